// Streaming a store's column blocks to a feature space, typed: a pass is two
// named stages over a list of blocks (the shape of oneTBB's parallel_pipeline
// examples), a parallel `transform(ref, block) -> Result` and a serial, in
// block order, `consume(Result&&)`:
//
//   PassStats s = stream_blocks<TopBCache>(stream, blocks, "scoring",
//       [&](const BlockRef&, const ColumnBlock& b) { ...; return top; },
//       [&](TopBCache&& top) { global.merge(top); });
//
// BlockStream (implemented in features/block_stream.cpp over oneTBB, so no
// engine/ code is needed to stream) reads each block (verified, see
// ShardStore::read_block) inside its transform into one of at most
// min(tokens, threads) buffers reserved from the budget (kept for the next
// pass while they take at most a quarter of what is free), so the data in
// flight is bounded by the token and thread counts; the source
// stage hints the kernel to read ahead as many blocks as there are tokens
// (the prefetch depth). A Result lives in one of `tokens` slots between its
// two stages (block i in slot i mod tokens: the tokens keep at most that many
// blocks between the source and the in-order sink). Exceptions thrown by a
// stage are carried to the caller of stream_blocks.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/memory_budget.h"
#include "io/shard_store.h"

namespace fgm {

struct PassStats {
  uint64_t blocks = 0;
  uint64_t bytes_streamed = 0;  // shard raw-block bytes the pass read
  uint64_t tails_skipped = 0;   // format 6 tail parts a pruned pass left unread (their bytes counted above)
  double seconds = 0;
  PassStats& operator+=(const PassStats& p) {
    blocks += p.blocks;
    bytes_streamed += p.bytes_streamed;
    tails_skipped += p.tails_skipped;
    seconds += p.seconds;
    return *this;
  }
};

struct SchedulerOptions {
  int threads = 1;              // explicit, never the TBB default
  int blocks_in_flight = 0;     // tokens; 0: 2·threads + 2
  bool progress = false;
  // Keep verified blocks in memory between passes (the caller has reserved
  // resident_store_bytes(store.info()) from the budget).
  bool keep_resident = false;
  // Read buffers of at least this many bytes stay mapped between passes while
  // they take at most a quarter of what the budget has free (faulting tens of
  // MiB in afresh every pass costs more than the reads); smaller ones are
  // unmapped at the end of each pass, leaving tight budgets to the solver.
  uint64_t keep_buffers_from = uint64_t{16} << 20;
};

// What a stream with keep_resident holds at most for a store: its blocks,
// each listed column's nonzero count (ColumnBlock::column_nnz, 4 bytes), and
// on a store of several tiles the row orders of its blocks of short cells
// (io/column_block.h RowOrder: about 10 bytes per nonzero more).
uint64_t resident_store_bytes(const StoreInfo& info);

inline int effective_tokens(const SchedulerOptions& o) {
  return o.blocks_in_flight > 0 ? o.blocks_in_flight : 2 * o.threads + 2;
}

// The tail of a block whose head a transform holds (store format 6,
// BlockRef::has_tail): read (and verified) only if the transform asks.
class TailReader {
 public:
  TailReader(const ShardStore& store, const BlockRef& ref, BlockBuffer& buffer)
      : store_(store), ref_(ref), buffer_(buffer) {}
  ColumnBlock read() const { return store_.read_part(ref_, BlockPart::kTail, buffer_); }

 private:
  const ShardStore& store_;
  const BlockRef& ref_;
  BlockBuffer& buffer_;
};

// The two stages of one pass, untyped (stream_blocks adds the types): the
// stream calls open(slots) once, then transform on the blocks in parallel
// (each into its slot) and consume on the slots in block order.
class BlockStages {
 public:
  virtual ~BlockStages() = default;
  // Bytes the transform allocates for one block beyond the block itself (its
  // result, scratch): reserved with the block's buffer, per token.
  virtual uint64_t scratch_bytes(const BlockRef&) const { return 0; }
  virtual void open(size_t slots) = 0;
  virtual void transform(size_t slot, const BlockRef& ref, const ColumnBlock& block) = 0;
  // Stages that can take a block as its head and a reader of its tail (the
  // stream then hands them so the blocks with tails it reads, not kept ones).
  virtual bool takes_parts() const { return false; }
  virtual void transform_parts(size_t, const BlockRef&, const ColumnBlock&, const TailReader&) {}
  virtual void consume(size_t slot) = 0;
};

class ResidentBlocks;
class BlockBufferPool;

class BlockStream {
 public:
  // Streams `store` (which must outlive the stream) with `options`; buffers
  // and resident copies are reserved from `budget`.
  BlockStream(const ShardStore& store, const SchedulerOptions& options, MemoryBudget& budget);
  ~BlockStream();
  BlockStream(const BlockStream&) = delete;
  BlockStream& operator=(const BlockStream&) = delete;

  const ShardStore& store() const { return store_; }
  int threads() const { return options_.threads; }
  // Called on every block of the following passes before its transform (in
  // parallel); an empty function removes it.
  void set_observer(std::function<void(const ColumnBlock&)> observer) { observer_ = std::move(observer); }

  PassStats run(const std::vector<BlockRef>& blocks, const std::string& label, BlockStages& stages) const;

 private:
  const ShardStore& store_;
  SchedulerOptions options_;
  MemoryBudget& budget_;
  void keep_buffers(Reservation& in_flight) const;

  std::unique_ptr<ResidentBlocks> resident_;  // keep_resident only
  // Read buffers and their reservation between passes (passes of one stream
  // run one at a time).
  std::unique_ptr<BlockBufferPool> buffers_;
  mutable Reservation kept_buffers_;
  std::function<void(const ColumnBlock&)> observer_;
};

// The scratch of csc_columns for a block (CscScratch::bytes_for, from its
// BlockRef; nothing when the store has one tile: the view is the block): the
// stream_blocks scratch of transforms that need whole columns.
struct CscBytes {
  explicit CscBytes(const StoreInfo& info) : tiled(info.n_rows > info.tile_rows) {}
  bool tiled;
  uint64_t operator()(const BlockRef& ref) const { return tiled ? 4 * (ref.column_count + 1) + 8 * ref.nnz : 0; }
};

// What a transform allocates per block beyond the block: nothing.
struct NoScratch {
  uint64_t operator()(const BlockRef&) const { return 0; }
};

namespace detail {
// The stages of one pass: transforms in parallel into per-slot results,
// consumed in block order. With `kParts`, a split block can reach the
// transform as its head and a reader of its tail (stream_block_parts).
template <class Result, bool kParts, class Transform, class Consume, class Scratch>
struct PassStages final : BlockStages {
  PassStages(Transform& t, Consume& c, Scratch& s) : transform_fn(t), consume_fn(c), scratch_fn(s) {}
  uint64_t scratch_bytes(const BlockRef& ref) const override { return scratch_fn(ref); }
  void open(size_t slots) override { results.resize(slots); }
  void transform(size_t slot, const BlockRef& ref, const ColumnBlock& block) override {
    if constexpr (kParts)
      results[slot].emplace(transform_fn(ref, block, static_cast<const TailReader*>(nullptr)));
    else
      results[slot].emplace(transform_fn(ref, block));
  }
  bool takes_parts() const override { return kParts; }
  void transform_parts(size_t slot, const BlockRef& ref, const ColumnBlock& head, const TailReader& tail) override {
    if constexpr (kParts) results[slot].emplace(transform_fn(ref, head, &tail));
  }
  void consume(size_t slot) override {
    Result r = std::move(*results[slot]);
    results[slot].reset();
    consume_fn(std::move(r));
  }
  Transform& transform_fn;
  Consume& consume_fn;
  Scratch& scratch_fn;
  std::vector<std::optional<Result>> results;
};
}  // namespace detail

// One pass over `blocks`: transform(const BlockRef&, const ColumnBlock&) ->
// Result in parallel, consume(Result&&) serially in block order.
// scratch(const BlockRef&) -> bytes bounds what one transform allocates; the
// stream reserves it for every block in flight.
template <class Result, class Transform, class Consume, class Scratch = NoScratch>
PassStats stream_blocks(const BlockStream& stream, const std::vector<BlockRef>& blocks,
                        const std::string& label, Transform&& transform, Consume&& consume,
                        Scratch scratch = Scratch()) {
  detail::PassStages<Result, false, Transform, Consume, Scratch> stages(transform, consume, scratch);
  return stream.run(blocks, label, stages);
}

// stream_blocks for a transform that may leave a block's tail unread:
// transform(const BlockRef&, const ColumnBlock& block, const TailReader* tail)
// gets the whole block and no reader, or (a format 6 block with a tail, read
// from the store) the block's head and a reader of its tail.
template <class Result, class Transform, class Consume, class Scratch = NoScratch>
PassStats stream_block_parts(const BlockStream& stream, const std::vector<BlockRef>& blocks,
                             const std::string& label, Transform&& transform, Consume&& consume,
                             Scratch scratch = Scratch()) {
  detail::PassStages<Result, true, Transform, Consume, Scratch> stages(transform, consume, scratch);
  return stream.run(blocks, label, stages);
}

}  // namespace fgm
