// Private to the shard store: the bytes of a shard file's header and of a
// store manifest, shared by the two writers of a store (ingest_libsvm and the
// sparse synthetic generator, io/synthetic_sparse.cpp). See io/shard_store.h
// for the file layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/store_format.h"

namespace fgm::store {

struct ShardEntryInfo {
  std::string file_name;
  uint64_t first_column = 0, column_count = 0, nnz = 0, file_bytes = 0, checksum = 0;
};

// Preamble + size-prefixed ShardHeader. ForceDefaults keeps every field
// present, so the size does not depend on the values (raw_offset is fixed).
// `piece_table_checksum` is XXH64 of the piece table (see PieceHasher).
std::vector<uint8_t> shard_header_bytes(uint32_t index, uint64_t first, uint64_t count,
                                        uint64_t nnz, uint64_t n_rows, uint64_t raw_offset,
                                        const ShardLayout& layout, uint64_t piece_table_checksum);

// Size of every shard header (ForceDefaults: it does not depend on the values),
// rounded up to the raw block's alignment.
uint64_t shard_raw_offset();

struct ManifestFields {
  uint64_t n_rows = 0, n_features = 0, nnz = 0, n_positive = 0, n_negative = 0;
  double positive_value = 1, negative_value = -1;
  int index_base = 1;
  uint64_t declared_features = 0;
  std::string input_path;
  uint64_t input_bytes = 0, input_checksum = 0, explicit_zeros = 0, shard_target_bytes = 0;
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

}  // namespace fgm::store
