// Private to the shard store (ingest writes, ShardStore::open reads): the
// fixed preamble and the raw-block layout of shard and manifest files.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/hash.h"

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

// The data region of a shard's raw block is checksummed in fixed pieces (XXH64
// of bytes [i·piece, (i+1)·piece) of the raw block, the last one shorter); the
// table of piece checksums follows the data region. Every read after open
// verifies the pieces it touches, so a shard changed under a running engine is
// an error, not a wrong result.
inline constexpr uint64_t kPieceBytes = 16 << 10;
inline constexpr uint64_t kMinPieceBytes = 4 << 10, kMaxPieceBytes = 16 << 20;

// Format 5 (format 4 plus unit-valued blocks), format 6 (below: tail parts); all are read. A shard's raw
// block is a sequence of stored column blocks (each 64-byte aligned, laid out
// by block_layout), then the block table (one BlockEntry per block): together
// the data region, checksummed in pieces; then the piece table.
//
// Inside a stored block (offsets from the block's start, each 64-byte
// aligned; see io/column_block.h for the meaning):
//   row_ids  uint32[nnz]    values   float32[nnz]      (bulk first: a column
//   column_ids uint64[k]    col_min  float32[k]         bigger than the shard
//   col_max  float32[k]     tile_cells uint32[T+1]      target streams its rows
//   cell_column uint32[cells]  cell_ptr uint32[cells+1] before its cells are known)
// A block whose every stored value is 1.0 (binary data: text presence, clicks,
// one-hot) has kBlockUnitValues in its entry's flags and no values array
// (format 5): 4 of its 8 bytes per nonzero are not written, read or hashed.
inline constexpr uint64_t kBlockUnitValues = 1;

// Format 6: a stored block whose columns differ in popularity is written as
// two parts, each laid out as a block of its own (block_layout) and each an
// entry of the block table: the head (its columns of at least the writer's
// tail threshold of nonzeros) and, right after it, the tail (the others),
// flagged kBlockTailPart. Both entries carry the stored block's id range
// (their listed ids interleave inside it) and the tail's entry carries, in
// flags bits 32-63, a float32 at least max over its columns of nonzeros ·
// max(|col_min|, |col_max|): a pruned scoring pass whose floor that bound
// cannot reach reads neither the tail's bytes nor its checksums. A block
// whose columns all fall on one side of the threshold is one entry, as in
// format 5.
inline constexpr uint64_t kBlockTailPart = 2;
inline constexpr uint64_t kBlockFlagBits = kBlockUnitValues | kBlockTailPart;

// The tail bound as stored: the float32 nearest above `bound` (never below).
inline uint32_t tail_bound_bits(double bound) {
  float f = static_cast<float>(bound);
  if (static_cast<double>(f) < bound) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

struct BlockLayout {
  uint64_t row_ids = 0, values = 0, column_ids = 0, col_min = 0, col_max = 0;
  uint64_t tile_cells = 0, cell_column = 0, cell_ptr = 0;
  uint64_t end = 0;    // end of cell_ptr
  uint64_t bytes = 0;  // end rounded up to the alignment: the next block starts here
};

inline BlockLayout block_layout(uint64_t column_count, uint64_t cells, uint64_t nnz,
                                uint64_t tile_count, bool unit_values = false) {
  BlockLayout l;
  l.row_ids = 0;
  l.values = align_up(4 * nnz);
  l.column_ids = align_up(l.values + (unit_values ? 0 : 4 * nnz));
  l.col_min = align_up(l.column_ids + 8 * column_count);
  l.col_max = align_up(l.col_min + 4 * column_count);
  l.tile_cells = align_up(l.col_max + 4 * column_count);
  l.cell_column = align_up(l.tile_cells + 4 * (tile_count + 1));
  l.cell_ptr = align_up(l.cell_column + 4 * cells);
  l.end = l.cell_ptr + 4 * (cells + 1);
  l.bytes = align_up(l.end);
  return l;
}

// The bytes of a block's arrays without padding (BlockRef::bytes: what a
// compact in-memory copy takes).
inline uint64_t block_array_bytes(uint64_t column_count, uint64_t cells, uint64_t nnz,
                                  uint64_t tile_count) {
  return 16 * column_count + 4 * (tile_count + 1) + 4 * cells + 4 * (cells + 1) + 8 * nnz;
}

// One entry of a shard's block table (little-endian, 64 bytes).
struct BlockEntry {
  uint64_t first_column;  // the id range [first_column, end_column) the block covers
  uint64_t end_column;
  uint64_t column_count;  // non-empty columns listed
  uint64_t nnz;
  uint64_t offset;        // raw-block offset of the block (64-byte aligned)
  uint64_t bytes;         // block_layout(...).bytes
  uint32_t cell_count;
  uint32_t tile_count;
  uint64_t flags;         // kBlockUnitValues, kBlockTailPart (format 4: always 0);
                          // a tail part's bound in bits 32-63
  bool unit_values() const { return (flags & kBlockUnitValues) != 0; }
  bool tail_part() const { return (flags & kBlockTailPart) != 0; }
  float tail_bound() const {
    const uint32_t bits = static_cast<uint32_t>(flags >> 32);
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
};
static_assert(sizeof(BlockEntry) == 64);

// Byte offsets inside a shard's raw block.
struct ShardLayout {
  uint64_t block_table = 0;  // BlockEntry[block_count], after the blocks
  uint64_t data_bytes = 0;   // end of the block table: the checksummed region
  uint64_t piece_bytes = 0, piece_count = 0;
  uint64_t piece_table = 0;  // uint64[piece_count]
  uint64_t raw_bytes = 0;
};

inline ShardLayout shard_layout(uint64_t blocks_bytes, uint64_t block_count,
                                uint64_t piece_bytes = kPieceBytes) {
  ShardLayout l;
  l.block_table = align_up(blocks_bytes);
  l.data_bytes = l.block_table + sizeof(BlockEntry) * block_count;
  l.piece_bytes = piece_bytes;
  l.piece_count = (l.data_bytes + piece_bytes - 1) / piece_bytes;
  l.piece_table = align_up(l.data_bytes);
  l.raw_bytes = l.piece_table + 8 * l.piece_count;
  return l;
}

// Tiles of a store with n rows.
inline uint64_t tile_count_of(uint64_t n_rows, uint64_t tile_rows) {
  return tile_rows == 0 ? 0 : (n_rows + tile_rows - 1) / tile_rows;
}

// Piece checksums of a data region streamed through update() in order.
class PieceHasher {
 public:
  explicit PieceHasher(uint64_t piece_bytes = kPieceBytes) : piece_bytes_(piece_bytes) {}
  void update(const void* data, uint64_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
      uint64_t k = std::min(n, piece_bytes_ - filled_);
      hash_.update(p, k);
      filled_ += k;
      p += k;
      n -= k;
      if (filled_ == piece_bytes_) close_piece();
    }
  }
  // The table, closing a last partial piece.
  std::vector<uint64_t> finish() {
    if (filled_ > 0) close_piece();
    return std::move(table_);
  }

 private:
  void close_piece() {
    table_.push_back(hash_.digest());
    hash_ = Xxh64();
    filled_ = 0;
  }
  uint64_t piece_bytes_;
  uint64_t filled_ = 0;
  Xxh64 hash_;
  std::vector<uint64_t> table_;
};

inline std::string shard_file_name(uint64_t index) {
  char name[32];
  std::snprintf(name, sizeof(name), "shard-%05llu.fgs", static_cast<unsigned long long>(index));
  return name;
}

}  // namespace fgm::store
