// The chunk scheduler: streams column blocks of a ShardStore through a oneTBB
// parallel_pipeline — a serial in-order source (which also prefetches the next
// block), a parallel transform, and a serial in-order consumer. The number of
// blocks in flight is bounded by the token count; each transform reads its
// block (verified, see ShardStore::read_block) into a buffer from a pool of
// at most `tokens` buffers reserved from the budget, so resident memory stays
// bounded even when the store is much larger than RAM. With keep_resident the
// verified blocks are kept (compact copies) and later passes read no file.
// Exceptions thrown by a transform are carried to the caller by TBB.
#pragma once

#include <algorithm>
#include <cstring>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>

#include "core/memory_budget.h"
#include "core/progress.h"
#include "features/block_stream.h"
#include "features/feature_space.h"
#include "io/shard_store.h"

namespace fgm {

struct SchedulerOptions {
  int threads = 1;              // explicit, never the TBB default
  int blocks_in_flight = 0;     // 0: 2·threads + 2
  bool progress = false;
  std::string progress_label = "scoring";
  // Keep verified blocks in memory between passes (the caller has reserved
  // the whole store, info().shard_bytes, from the budget).
  bool keep_resident = false;
};

// Verified blocks kept between passes (keep_resident): compact copies of
// exactly BlockRef::bytes each, at most `capacity` bytes in all (a block list
// other than the first one streamed is read from the store again).
class ResidentBlocks {
 public:
  explicit ResidentBlocks(uint64_t capacity) : capacity_(capacity) {}
  const ColumnBlock* find(const BlockRef& ref) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(key(ref));
    return it == blocks_.end() ? nullptr : &it->second.view;
  }
  void keep(const BlockRef& ref, const ColumnBlock& c) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (used_ + ref.bytes > capacity_ || blocks_.count(key(ref))) return;
    Entry& e = blocks_[key(ref)];
    const uint64_t n = c.nnz(), count = c.column_count, cells = c.cell_count(), T = c.tile_count;
    e.words.resize((8 * count + 8 * count + 4 * (T + 1) + 4 * cells + 4 * (cells + 1) + 8 * n + 7) / 8);
    auto* at = reinterpret_cast<uint8_t*>(e.words.data());
    auto copy = [&](const void* src, uint64_t bytes) {
      std::memcpy(at, src, bytes);
      const uint8_t* begin = at;
      at += bytes;
      return begin;
    };
    e.view = c;
    // 8-byte ids first, then the 4-byte arrays.
    e.view.column_ids = reinterpret_cast<const uint64_t*>(copy(c.column_ids, 8 * count));
    e.view.col_min = reinterpret_cast<const float*>(copy(c.col_min, 4 * count));
    e.view.col_max = reinterpret_cast<const float*>(copy(c.col_max, 4 * count));
    e.view.tile_cells = reinterpret_cast<const uint32_t*>(copy(c.tile_cells, 4 * (T + 1)));
    e.view.cell_column = reinterpret_cast<const uint32_t*>(copy(c.cell_column, 4 * cells));
    e.view.cell_ptr = reinterpret_cast<const uint32_t*>(copy(c.cell_ptr, 4 * (cells + 1)));
    e.view.row_ids = reinterpret_cast<const uint32_t*>(copy(c.row_ids, 4 * n));
    e.view.values = reinterpret_cast<const float*>(copy(c.values, 4 * n));
    used_ += ref.bytes;
  }
  bool holds_all(const std::vector<BlockRef>& blocks) const {
    for (const auto& b : blocks)
      if (!find(b)) return false;
    return true;
  }

 private:
  struct Entry {
    std::vector<uint64_t> words;  // 8-byte aligned storage of the block's arrays
    ColumnBlock view;
  };
  static std::pair<uint64_t, uint64_t> key(const BlockRef& r) {
    return {r.first_column, r.column_count};
  }
  mutable std::mutex mutex_;
  std::map<std::pair<uint64_t, uint64_t>, Entry> blocks_;
  uint64_t capacity_;
  uint64_t used_ = 0;
};

// BlockBuffers for the blocks in flight, reused across blocks of a pass.
class BlockBufferPool {
 public:
  std::unique_ptr<BlockBuffer> take() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) return std::make_unique<BlockBuffer>();
    auto b = std::move(free_.back());
    free_.pop_back();
    return b;
  }
  void give(std::unique_ptr<BlockBuffer> b) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(std::move(b));
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<BlockBuffer>> free_;
};


inline int effective_tokens(const SchedulerOptions& o) {
  return o.blocks_in_flight > 0 ? o.blocks_in_flight : 2 * o.threads + 2;
}

// transform(block_ref, block) -> Result runs in parallel; consume(Result&&)
// runs serially in block order. `resident` (may be null) keeps verified blocks
// between calls.
template <class Result>
PassStats stream_blocks(const ShardStore& store, const std::vector<BlockRef>& blocks,
                        const SchedulerOptions& options, MemoryBudget& budget,
                        const std::function<Result(const BlockRef&, const ColumnBlock&)>& transform,
                        const std::function<void(Result&&)>& consume,
                        ResidentBlocks* resident = nullptr) {
  auto start = std::chrono::steady_clock::now();
  PassStats stats;
  int tokens = effective_tokens(options);
  uint64_t largest = 0, total = 0;
  for (const auto& b : blocks) {
    largest = std::max(largest, b.read_bytes);
    total += b.bytes;
  }
  // Read buffers of the blocks in flight: count them (unless every block is
  // already resident, when nothing is read). A tight budget runs fewer blocks
  // in flight, down to one.
  Reservation in_flight;
  if ((!resident || !resident->holds_all(blocks)) && largest > 0) {
    in_flight = budget.reserve_up_to(largest * static_cast<uint64_t>(tokens), largest,
                                     "scoring blocks in flight");
    const uint64_t fit = in_flight.bytes() / largest;
    if (fit < 1) {
      in_flight.release();  // not even one: fail with the usual message
      in_flight = budget.reserve(largest, "scoring blocks in flight", "lower engine.block_bytes");
    }
    tokens = static_cast<int>(std::min<uint64_t>(tokens, std::max<uint64_t>(fit, 1)));
  }
  BlockBufferPool buffers;
  ProgressBar bar(options.progress_label, total, options.progress);
  size_t next = 0;
  tbb::task_arena arena(options.threads);
  arena.execute([&] {
    tbb::parallel_pipeline(
        static_cast<size_t>(tokens),
        tbb::make_filter<void, size_t>(
            tbb::filter_mode::serial_in_order,
            [&](tbb::flow_control& fc) -> size_t {
              if (next >= blocks.size()) {
                fc.stop();
                return 0;
              }
              if (next + 1 < blocks.size() && !(resident && resident->find(blocks[next + 1])))
                store.prefetch_block(blocks[next + 1]);
              return next++;
            }) &
            tbb::make_filter<size_t, std::pair<size_t, Result>>(
                tbb::filter_mode::parallel,
                [&](size_t index) {
                  const BlockRef& ref = blocks[index];
                  if (const ColumnBlock* kept = resident ? resident->find(ref) : nullptr)
                    return std::pair<size_t, Result>(index, transform(ref, *kept));
                  std::unique_ptr<BlockBuffer> buffer = buffers.take();
                  ColumnBlock block = store.read_block(ref, *buffer);
                  if (resident) resident->keep(ref, block);
                  Result r = transform(ref, block);
                  buffers.give(std::move(buffer));
                  return std::pair<size_t, Result>(index, std::move(r));
                }) &
            tbb::make_filter<std::pair<size_t, Result>, void>(
                tbb::filter_mode::serial_in_order, [&](std::pair<size_t, Result> item) {
                  const BlockRef& ref = blocks[item.first];
                  stats.blocks += 1;
                  stats.bytes_streamed += ref.bytes;
                  bar.add(ref.bytes);
                  consume(std::move(item.second));
                }));
  });
  bar.finish();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

// The type-erased streamer feature spaces use (features/block_stream.h).
inline BlockStreamer make_block_streamer(const ShardStore& store, const SchedulerOptions& options,
                                         MemoryBudget& budget) {
  // Shared by every copy of the streamer; freed with the last one.
  std::shared_ptr<ResidentBlocks> resident;
  if (options.keep_resident) resident = std::make_shared<ResidentBlocks>(store.info().shard_bytes);
  return [&store, options, &budget, resident](const std::vector<BlockRef>& blocks,
                                              const BlockTransform& transform,
                                              const BlockConsume& consume, const std::string& label) {
    SchedulerOptions o = options;
    o.progress_label = label;
    return stream_blocks<std::unique_ptr<BlockOutput>>(store, blocks, o, budget, transform, consume,
                                                       resident.get());
  };
}

// One worst-case analysis of `space` against a = α∘y over `blocks`.
inline SpaceScores run_worst_case_analysis(FeatureSpace& space, const ShardStore& store,
                                           const std::vector<BlockRef>& blocks, const BlockStreamer& streamer,
                                           const double* a, uint64_t B, int threads, MemoryBudget& budget) {
  ScoringContext ctx;
  ctx.store = &store;
  ctx.blocks = &blocks;
  ctx.stream = &streamer;
  ctx.a = a;
  ctx.B = B;
  ctx.threads = threads;
  ctx.budget = &budget;
  return space.score(ctx);
}

}  // namespace fgm
