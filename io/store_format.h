// Private to the shard store (ingest writes, ShardStore::open reads): the
// fixed preamble and the raw-block layout of shard and manifest files.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace fgm::store {

inline constexpr uint64_t kAlign = 64;
inline constexpr char kShardMagic[8] = {'F', 'G', 'M', 'S', 'H', 'A', 'R', 'D'};
inline constexpr char kManifestMagic[8] = {'F', 'G', 'M', 'S', 'T', 'O', 'R', 'E'};
inline constexpr const char* kManifestName = "manifest.fgm";
// Caps what open() reads as a header before verifying it (headers are < 1 KiB
// per shard entry; a garbage length must not make us allocate gigabytes).
inline constexpr uint64_t kMaxShardHeaderBytes = 1 << 16;

inline uint64_t align_up(uint64_t x, uint64_t a = kAlign) { return (x + a - 1) / a * a; }

// Little-endian on disk (the engine targets x86-64/aarch64 Linux).
struct Preamble {
  char magic[8];
  uint32_t format_version;
  uint32_t flatbuffer_bytes;     // size-prefixed FlatBuffer that follows, prefix included
  uint64_t flatbuffer_checksum;  // XXH64 of those bytes: a header is checked on its own
};
static_assert(sizeof(Preamble) == 24);

// Byte offsets inside a shard's raw block; each array starts 64-byte aligned.
struct ShardLayout {
  uint64_t col_ptr = 0, row_ids = 0, values = 0, col_min = 0, col_max = 0, raw_bytes = 0;
};

inline ShardLayout shard_layout(uint64_t column_count, uint64_t nnz) {
  ShardLayout l;
  l.col_ptr = 0;
  l.row_ids = align_up(8 * (column_count + 1));
  l.values = align_up(l.row_ids + 4 * nnz);
  l.col_min = align_up(l.values + 4 * nnz);
  l.col_max = align_up(l.col_min + 4 * column_count);
  l.raw_bytes = l.col_max + 4 * column_count;
  return l;
}

inline std::string shard_file_name(uint64_t index) {
  char name[32];
  std::snprintf(name, sizeof(name), "shard-%05llu.fgs", static_cast<unsigned long long>(index));
  return name;
}

}  // namespace fgm::store
