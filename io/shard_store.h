// Column-block shard store (format 6): the on-disk form of a training set,
// written by io/store_writer.h (ingest, io/ingest.h, and the synthetic
// generator feed it) and read here. A store directory holds:
//   manifest.fgm   FlatBuffer (n, m, nnz, label map and counts, class table,
//                  input size and hash, tile_rows, non-empty column count,
//                  stored block target, shard list with per-file checksums,
//                  format version) followed by an aligned raw block with the
//                  labels (int8 ±1) and an aligned block with each row's class
//                  index (uint16), each with its own checksum.
//   shard-NNNNN.fgs  FlatBuffer header (id range, counts, tile_rows, offsets,
//                  piece size and piece-table checksum) followed by a 64-byte
//                  aligned raw block: the shard's stored column blocks one
//                  after the other, then the block table (store::BlockEntry
//                  per block: id range, counts, offset, flags) -- the data region --
//                  then the piece table: XXH64 of every 16 KiB piece of the
//                  data region.
// A stored column block is laid out as io/column_block.h describes: row tiles
// of tile_rows rows, doubly compressed (only non-empty columns are listed,
// and inside a tile only columns with nonzeros there have a cell); each array
// starts 64-byte aligned (io/store_format.h, block_layout). Only non-empty
// columns are stored anywhere: the size of a store depends on its nonzeros,
// not on the width of its id space (ids up to 2^63-1). A block covers the id
// range [its first listed id, its last listed id + 1); blocks and shards are
// in increasing id order; ids between them are empty columns.
// Format 6 writes a stored block of popular and rare columns as a head and a
// tail part, two entries of the block table, and records a bound of the
// tail's scores' factors in its entry (io/store_format.h): the pruned linear
// pass reads the tail only when that bound can reach its floor.
// Both files start with a 24-byte preamble: magic ("FGMSHARD" / "FGMSTORE"),
// uint32 format version, uint32 FlatBuffer length, uint64 XXH64 of the
// FlatBuffer; then the size-prefixed FlatBuffer (schemas io/schema/shard.fbs,
// manifest.fbs), zero padding to 64 bytes, the raw block. Bulk data is never
// inside a FlatBuffer (whose offsets stop at 2 GiB).
// Cut rules (store writer): a block is cut when its arrays would pass the
// stored block target (8 bytes per nonzero, 16 per column, 8 per cell); a
// shard when its staged columns pass the shard target (8 bytes per nonzero,
// 32 per column). A column is never split: one bigger than a target is a
// block (or shard) of its own.
// Values are stored as float32; row ids are uint32 (a store holds at most
// 2^32-1 rows); cell pointers are block-local uint32. A block whose values
// are all 1.0 stores none (kBlockUnitValues, format 5): the reader hands out
// a shared array of ones for it, so every consumer sees the same values.
// The output is deterministic: the same input and options give byte-identical
// files whatever the thread count or budget.
// Every file is verified when the store is opened (FlatBuffers verifier,
// sizes, version, checksums, the block tables). After that the engine never
// trusts the files: shards are read with pread() into caller-owned buffers
// (never mmap, so a truncated file is a short read, not SIGBUS), every piece
// a read touches is checked against the piece table kept in memory since
// open whenever the file no longer has the identity it had when verified
// (device, inode, size, mtime, ctime: any write changes ctime, which no user
// can set back; a file written within recent_write_seconds of its
// verification is re-hashed at every read, since the kernel's coarse clock
// may stamp a later write alike), and every array of a block is bounds-
// checked before use, at every read (cell
// columns, cell pointers, tile directory, row ids inside their tile and
// increasing inside a cell, column ids increasing inside the block's range).
// A store changed, shrunk or overwritten under a running engine therefore
// gives Error(kCorruption) naming the file, or the unchanged data.
// Classes: a label file may hold up to kMaxClasses distinct values. The class
// table lists them in increasing numeric order (class k = k-th smallest), so
// the same rows give the same class indices whatever the row order. The ±1
// labels block maps the largest label to +1 and every other to -1 (for two
// classes: the binary label map); multi-class training relabels per class.
// Format history: 1 had one raw-block checksum per shard (no piece table);
// 2 had no class table (two labels only); 3 stored every column of
// [0, n_features) in plain CSC; 4 had no unit-valued blocks; 5 no tail
// parts. Versions 4 to 6 are read (older ones: "ingest the data again");
// ingest writes 6.
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

inline constexpr uint32_t kStoreFormatVersion = 6;
inline constexpr uint32_t kOldestReadableStoreFormat = 4;
inline bool readable_store_format(uint32_t version) {
  return version >= kOldestReadableStoreFormat && version <= kStoreFormatVersion;
}
// Distinct labels a store may hold (a file with more is most likely a
// regression target, which fgm does not fit).
inline constexpr uint32_t kMaxClasses = 1024;

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
  uint32_t tile_rows = 0;       // rows per tile of every block
  uint64_t nonempty_columns = 0;  // columns with at least one nonzero (the others are not stored)
  uint64_t block_bytes = 0;     // the stored block target chosen at ingest
  uint64_t block_count = 0;     // stored blocks
};

// Consecutive stored blocks of one shard: the unit the scheduler streams
// (plan_blocks). A stored block is never split.
struct BlockRef {
  uint32_t shard = 0;
  uint64_t first_block = 0;   // shard-local index of the first stored block
  uint64_t block_count = 0;   // stored blocks grouped (>= 1)
  uint64_t first_column = 0;  // the id range [first_column, end_column) covered
  uint64_t end_column = 0;
  uint64_t column_count = 0;  // non-empty columns listed
  uint64_t nnz = 0;
  uint64_t bytes = 0;         // bytes of the block's arrays (a compact copy of the ColumnBlock)
  uint64_t read_bytes = 0;    // BlockBuffer bytes read_block needs (whole checksum pieces,
                              // plus the merged arrays when several stored blocks are grouped)
  bool unit_values = false;   // one unit-valued stored block: read_block gives shared ones
                              // (ColumnBlock::unit_values), `bytes` holds no values
  // Format 6 (io/store_format.h), a BlockRef of one stored block split into
  // a head and a tail part (groups of several are read whole): read_part
  // reads either. tail_bound is at least every tail column's nonzeros · max
  // |value| (0 without a tail).
  bool has_tail = false;
  uint64_t tail_columns = 0;
  double tail_bound = 0;
  uint64_t head_read_bytes = 0;  // the part of read_bytes read_head uses; read_tail the rest
};

// Which parts of a BlockRef a read returns.
enum class BlockPart { kHead, kTail };

// Caller-owned, reusable memory that read_block reads into (64-byte aligned).
// The caller accounts for it in the MemoryBudget (BlockRef::read_bytes).
// Buffers of a stored block's size (MiBs) are their own mappings
// (core/huge_pages.h), given back to the system when freed: from malloc,
// glibc's dynamic mmap threshold kept freed 16 MiB buffers in each thread's
// arena, and a 2-thread run's resident memory reached twice its budget.
class BlockBuffer {
 public:
  BlockBuffer() = default;
  ~BlockBuffer() { release(); }
  BlockBuffer(const BlockBuffer&) = delete;
  BlockBuffer& operator=(const BlockBuffer&) = delete;

  uint8_t* get(uint64_t bytes);  // at least `bytes`; previous contents are not kept
  uint64_t capacity() const { return capacity_; }
  // Room for `count` values beside the block (a wrapper that rewrites the
  // values of a unit-valued block, whose ones are shared, writes them here;
  // its plan_blocks counts them in read_bytes). Kept until the next call.
  float* values_room(uint64_t count) {
    if (count > values_capacity_) {
      values_room_ = std::make_unique<float[]>(count);
      values_capacity_ = count;
    }
    return values_room_.get();
  }

 private:
  void release() noexcept;
  uint8_t* data_ = nullptr;
  uint64_t capacity_ = 0;
  std::unique_ptr<float[]> values_room_;
  uint64_t values_capacity_ = 0;
};

// Files written less than this many seconds before their verification are
// re-hashed at every read (default 2; tests lower it to reach the other path).
void set_recent_write_seconds(double seconds);
// Raw-block bytes re-hashed by reads since the process started.
uint64_t store_bytes_rehashed();

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

  // Partitions the stored blocks, in increasing id order, into BlockRefs:
  // consecutive stored blocks of a shard are grouped while their bytes stay
  // within target_bytes; a stored block is never split, so one bigger than
  // the target is a BlockRef of its own.
  virtual std::vector<BlockRef> plan_blocks(uint64_t target_bytes) const = 0;
  // Reads and verifies `block` into `buffer` (which grows to block.read_bytes);
  // the view (io/column_block.h) points into the buffer.
  virtual ColumnBlock read_block(const BlockRef& block, BlockBuffer& buffer) const = 0;
  // Hints the kernel to start reading the block (posix_fadvise WILLNEED).
  virtual void prefetch_block(const BlockRef& block) const = 0;
  // The hint for read_part(block, kHead) alone: a pass that may skip the
  // tails does not ask the disk for them.
  virtual void prefetch_head(const BlockRef& block) const { prefetch_block(block); }
  // Format 6 (block.has_tail): the block's head parts only (read_head), or
  // its tail parts only (read_tail), each verified as read_block verifies;
  // the two views are blocks of their own over disjoint columns whose union
  // is read_block's. read_head sizes `buffer` to block.read_bytes and uses
  // its first head_read_bytes; read_tail the rest (the head's view stays
  // valid). Stores that do not split blocks return false from reads_parts.
  virtual bool reads_parts() const { return false; }
  virtual ColumnBlock read_part(const BlockRef& block, BlockPart part, BlockBuffer& buffer) const;

  // Copies one column out (for the selected-feature cache), verified; any id
  // in [0, n_features): an empty column gives no rows. Rows increase.
  virtual void read_column(uint64_t feature, std::vector<uint32_t>& rows,
                           std::vector<float>& values) const = 0;
  // Over all n rows, implicit zeros included (an empty column: 0 and 0).
  virtual float column_min(uint64_t feature) const = 0;
  virtual float column_max(uint64_t feature) const = 0;
};

}  // namespace fgm
