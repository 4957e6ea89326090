// Column-block shard store: the on-disk form of a training set.
//
// `ingest_libsvm` transposes LIBSVM rows into column-major shards without
// holding the data in memory (sorted runs spilled to temporary files, then a
// k-way merge), within the MemoryBudget. A store directory holds:
//   manifest.fgm   FlatBuffer (n, m, nnz, label map and counts, class table,
//                  input size and hash, shard list with per-file checksums,
//                  format version) followed by an aligned raw block with the
//                  labels (int8 ±1) and an aligned block with each row's class
//                  index (uint16), each with its own checksum.
//   shard-NNNNN.fgs  FlatBuffer header (column range, counts, offsets into the
//                  raw block, piece size and piece-table checksum) followed by a
//                  64-byte aligned raw block: col_ptr (uint64, count+1), row ids
//                  (uint32), values (float32), per-column min and max (float32;
//                  implicit zeros included) -- the data region -- then the piece
//                  table: XXH64 of every 16 KiB piece of the data region.
// Both files start with a 24-byte preamble: magic ("FGMSHARD" / "FGMSTORE"),
// uint32 format version, uint32 FlatBuffer length, uint64 XXH64 of the
// FlatBuffer; then the size-prefixed FlatBuffer (schemas io/schema/shard.fbs,
// manifest.fbs), zero padding to 64 bytes, the raw block. Every raw array
// starts 64-byte aligned; bulk data is never inside a FlatBuffer (whose
// offsets stop at 2 GiB). Shards tile the columns [0, n_features) in order;
// a shard is cut when it reaches the shard target, at a column boundary (a
// column bigger than the target is a shard of its own, never split). Empty
// columns are stored (col_ptr entries, min = max = 0).
// Values are stored as float32 (half the bytes of float64 on the scoring pass;
// LIBSVM text rarely carries more than 7 significant digits). Row ids are
// uint32: a store holds at most 2^32-1 rows. Feature ids and nnz are 64-bit.
// The output is deterministic: the same input and options give byte-identical
// files whatever the thread count or budget (shards depend on the shard target).
// Ingest writes into a temporary directory beside the target and renames it
// into place, so a failed or killed ingest leaves no store or a complete one.
// It holds `<out>.lock` (a second writer of the same output fails), refuses
// before writing when the estimated size exceeds IngestOptions::max_store_bytes
// or the target's free space, and removes `<out>.tmp-*` left by dead
// processes (store::remove_stale_temporaries). Every file is verified
// when the store is opened (FlatBuffers verifier, sizes, version, checksums).
// After that the engine never trusts the files: shards are read with pread()
// into caller-owned buffers (never mmap, so a truncated file is a short read,
// not SIGBUS), every piece a read touches is checked against the piece table
// kept in memory since open, and column pointers and row ids are bounds-checked
// before use. A store changed, shrunk or overwritten under a running engine
// therefore gives Error(kCorruption) naming the file, or the unchanged data.
// Classes: a label file may hold up to kMaxClasses distinct values. The class
// table lists them in increasing numeric order (class k = k-th smallest), so
// the same rows give the same class indices whatever the row order. The ±1
// labels block maps the largest label to +1 and every other to -1 (for two
// classes: the binary label map); multi-class training relabels per class.
// Format history: 1 had one raw-block checksum per shard (no piece table);
// 2 had no class table (two labels only); version 3 stores are required
// (older ones: "ingest the data again").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/memory_budget.h"
#include "io/column_block.h"
#include "io/libsvm_reader.h"

namespace fgm {

inline constexpr uint32_t kStoreFormatVersion = 3;
// Distinct labels a store may hold (a file with more is most likely a
// regression target, which fgm does not fit).
inline constexpr uint32_t kMaxClasses = 1024;

struct IngestOptions {
  // Refuse (before writing shards) when the store would exceed this many bytes
  // (store.max_bytes, --max-store-bytes); 0: no fixed cap. The free space of
  // the target file system is always checked.
  uint64_t max_store_bytes = 0;
  ReaderOptions reader;
  uint64_t shard_target_bytes = 0;  // 0: automatic, min(64 MiB, budget / 8)
  int threads = 1;                  // parser threads (explicit, never implicit)
  bool progress = false;            // progress bar on stderr
  uint32_t merge_fan_in = 0;        // max runs merged at once; 0: as many as the budget allows
  // hash_file(input) if the caller already has it (e.g. a cache key): saves
  // ingest a second read of the input.
  std::optional<uint64_t> input_checksum;
};

struct IngestStats {
  uint64_t n_rows = 0;
  uint64_t n_features = 0;
  uint64_t nnz = 0;
  uint64_t explicit_zeros = 0;
  uint64_t input_bytes = 0;       // on disk
  uint64_t text_bytes = 0;        // decompressed
  uint64_t spilled_runs = 0;      // sorted runs written to disk (0: all fit in the sort buffer)
  uint64_t shards = 0;
  double seconds = 0;
};

// Reads `input` and writes a store at `out_dir` (which must not exist yet, or is
// replaced if it is a store). Throws Error on bad input; leaves no partial output.
IngestStats ingest_libsvm(const std::string& input, const std::string& out_dir,
                          const IngestOptions& options, MemoryBudget& budget);

struct StoreInfo {
  uint32_t format_version = 0;
  uint64_t n_rows = 0;
  uint64_t n_features = 0;
  uint64_t nnz = 0;
  uint64_t n_positive = 0;
  uint64_t n_negative = 0;
  double positive_value = 1;   // original label that maps to +1 (the largest)
  double negative_value = -1;  // original label that maps to -1 (the smallest)
  // The class table, in increasing label order (see above); size >= 2.
  std::vector<double> class_values;
  std::vector<uint64_t> class_counts;
  size_t classes() const { return class_values.size(); }
  int index_base = 1;
  uint64_t declared_features = 0;
  std::string input_path;
  uint64_t input_bytes = 0;
  uint64_t input_checksum = 0;
  uint64_t explicit_zeros = 0;
  uint64_t store_checksum = 0;  // XXH64 of manifest.fgm: identifies the store in models
  uint64_t shard_bytes = 0;     // total bytes of shard files
  uint32_t tile_rows = 0;       // rows per tile of every block (io/column_block.h)
};

// A contiguous run of columns inside one shard: the unit the scheduler streams.
struct BlockRef {
  uint32_t shard = 0;
  uint64_t first_column = 0;  // global feature id (0-based)
  uint64_t column_count = 0;
  uint64_t nnz = 0;
  uint64_t bytes = 0;         // raw-block bytes covered (col_ptr + rows + values + min/max)
  uint64_t nz_begin = 0;      // shard-local offset of the block's first nonzero
  uint64_t read_bytes = 0;    // BlockBuffer bytes read_block needs (whole checksum pieces)
};

// Caller-owned, reusable memory that read_block reads into (64-byte aligned).
// The caller accounts for it in the MemoryBudget (BlockRef::read_bytes).
class BlockBuffer {
 public:
  uint8_t* get(uint64_t bytes);  // at least `bytes`; previous contents are not kept
  uint64_t capacity() const { return capacity_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t[], Free> data_;
  uint64_t capacity_ = 0;

 public:
  // Interim (until the format-4 reader): the format-3 block re-expressed as a
  // one-tile ColumnBlock.
  std::vector<uint64_t> interim_ids;
  std::vector<uint32_t> interim_u32;
};

class ShardStore {
 public:
  // Opens and verifies the store (every file's checksum is checked, reading
  // with ordinary reads so verification does not inflate resident memory).
  // Labels and per-shard metadata (piece tables) are kept in memory, reserved
  // from `budget`. Every later read is verified again (see above) and throws
  // Error(kCorruption) naming the shard if it changed.
  static std::unique_ptr<ShardStore> open(const std::string& dir, MemoryBudget& budget);
  virtual ~ShardStore() = default;

  virtual const StoreInfo& info() const = 0;
  virtual const std::string& dir() const = 0;
  virtual const int8_t* labels() const = 0;  // n_rows entries of +1/-1
  // n_rows class indices into info().class_values.
  virtual const uint16_t* classes() const = 0;

  // Partitions all columns into blocks of at most ~target_bytes (a column is
  // never split; a block never spans shards), in increasing column order.
  virtual std::vector<BlockRef> plan_blocks(uint64_t target_bytes) const = 0;
  // Reads and verifies `block` into `buffer` (which grows to block.read_bytes).
  virtual ColumnBlock read_block(const BlockRef& block, BlockBuffer& buffer) const = 0;
  // Hints the kernel to start reading the block (posix_fadvise WILLNEED).
  virtual void prefetch_block(const BlockRef& block) const = 0;

  // Copies one column out (for the selected-feature cache), verified.
  virtual void read_column(uint64_t feature, std::vector<uint32_t>& rows,
                           std::vector<float>& values) const = 0;
  virtual float column_min(uint64_t feature) const = 0;
  virtual float column_max(uint64_t feature) const = 0;
};

}  // namespace fgm
