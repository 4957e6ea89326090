// The one writer of the store format (6; io/shard_store.h describes the files).
// Ingest (io/ingest.cpp) and the sparse synthetic generator's --store path
// (synth/synthetic_sparse.cpp) both add their columns here, so the cut rules
// of blocks and shards, the tile-major layout, the checksums and the manifest
// exist once: the same columns and options give byte-identical files.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/memory_budget.h"
#include "io/store_files.h"
#include "io/store_format.h"

namespace fgm::store {

// Receives one column's entries: all row ids first (increasing), then all
// values, each as a sequence of spans (n 4-byte elements, not necessarily aligned).
class ColumnSink {
 public:
  virtual ~ColumnSink() = default;
  virtual void rows(const uint8_t* data, uint64_t n) = 0;
  virtual void values(const uint8_t* data, uint64_t n) = 0;
};
using ColumnFill = std::function<void(ColumnSink&)>;

struct ShardEntryInfo {
  std::string file_name;
  uint64_t first_column = 0, end_column = 0, column_count = 0, nnz = 0, block_count = 0;
  uint64_t file_bytes = 0, checksum = 0;
};

struct StoreWriterOptions {
  uint64_t n_rows = 0;
  uint32_t tile_rows = 65536;
  // Columns of a shard are staged in memory up to this many bytes (8 per
  // nonzero, 32 per column); a column bigger than that is a shard of its own,
  // streamed to disk.
  uint64_t shard_target_bytes = 64 << 20;
  // A stored block is cut when its arrays would exceed this many bytes (8 per
  // nonzero, 16 per column, 8 per cell); a column bigger than that is a block
  // of its own. Blocks are never split when read.
  uint64_t block_target_bytes = 1 << 20;
  // Format 6: a block's columns of fewer nonzeros than this are written as
  // its tail part (io/store_format.h); 0: 16 per tile (at least 16).
  uint64_t tail_below_nnz = 0;
  uint64_t io_bytes = 1 << 20;  // file buffers
};

struct WrittenShards {
  std::vector<ShardEntryInfo> shards;
  uint64_t nonempty_columns = 0, nnz = 0, block_count = 0;
};

class StoreWriter {
 public:
  StoreWriter(const TempDir& dir, MemoryBudget& budget, const StoreWriterOptions& options);
  ~StoreWriter();
  StoreWriter(const StoreWriter&) = delete;
  StoreWriter& operator=(const StoreWriter&) = delete;
  // What a writer with these options reserves from the budget at its peak
  // (shard buffer, block layout, the shard file's write buffer), so a caller
  // can leave room for it before handing the rest to its own buffers.
  static uint64_t peak_bytes(const StoreWriterOptions& options);

  // Adds the non-empty column `id` (ids strictly increasing across calls,
  // nnz > 0, rows below n_rows and increasing); fill(sink) streams exactly nnz
  // rows, then nnz values.
  void add_column(uint64_t id, uint64_t nnz, const ColumnFill& fill);
  // The same for a column held in memory (values == nullptr: all 1).
  void add_column(uint64_t id, const uint32_t* rows, const float* values, uint64_t nnz);
  // Writes what is staged and fsyncs the shards.
  WrittenShards finish();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Preamble + size-prefixed ShardHeader. ForceDefaults keeps every field
// present, so the size does not depend on the values (raw_offset is fixed).
struct ShardHeaderFields {
  uint32_t index = 0;
  uint64_t first_column = 0, end_column = 0, column_count = 0, nnz = 0, n_rows = 0;
  uint32_t tile_rows = 0;
  uint64_t block_count = 0, raw_offset = 0;
  uint64_t piece_table_checksum = 0;  // XXH64 of the piece table (see PieceHasher)
};
std::vector<uint8_t> shard_header_bytes(const ShardHeaderFields& h, const ShardLayout& layout);

// Size of every shard header, rounded up to the raw block's alignment.
uint64_t shard_raw_offset();

struct ManifestFields {
  uint64_t n_rows = 0, n_features = 0, nnz = 0, n_positive = 0, n_negative = 0;
  double positive_value = 1, negative_value = -1;
  int index_base = 1;
  uint64_t declared_features = 0;
  std::string input_path;
  uint64_t input_bytes = 0, input_checksum = 0, explicit_zeros = 0, shard_target_bytes = 0;
  uint32_t tile_rows = 0;
  uint64_t nonempty_columns = 0, block_bytes = 0, block_count = 0;
  std::vector<ShardEntryInfo> shards;
  uint64_t labels_offset = 0, labels_checksum = 0;
  // The class table (increasing label values) and the class block's checksum;
  // the block starts at classes_offset(*this).
  std::vector<double> class_values;
  std::vector<uint64_t> class_counts;
  uint64_t classes_checksum = 0;
};

// Where the class block starts: after the labels block, 64-byte aligned.
inline uint64_t classes_offset(const ManifestFields& m) { return align_up(m.labels_offset + m.n_rows); }

// Class indices of a two-class store from its ±1 labels (-1 → class 0, +1 →
// class 1: the class table is in increasing label order).
std::vector<uint16_t> class_indices_of_signs(const int8_t* labels, uint64_t n);

// Preamble + size-prefixed Manifest (the labels block follows at labels_offset,
// the class block at classes_offset). The size does not depend on the
// offsets' or checksums' values, only on the shard list and the class count.
std::vector<uint8_t> manifest_bytes(const ManifestFields& m);

// Writes dir/manifest.fgm: the header (setting m.labels_offset), then the
// labels block from write_labels(out) (n_rows int8) and the class block from
// write_classes(out) (n_rows uint16); fsynced.
void write_manifest(const TempDir& dir, ManifestFields& m, MemoryBudget& budget,
                    uint64_t io_bytes, const std::function<void(FileWriter&)>& write_labels,
                    const std::function<void(FileWriter&)>& write_classes);

}  // namespace fgm::store
