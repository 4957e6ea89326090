// The chunk scheduler: streams column blocks of a ShardStore through a oneTBB
// parallel_pipeline — a serial in-order source (which also prefetches the next
// block), a parallel transform, and a serial in-order consumer. The number of
// blocks in flight is bounded by the token count, and the pages of a block are
// released (madvise DONTNEED) as soon as its transform is done, so resident
// memory stays bounded even when the store is much larger than RAM.
// Exceptions thrown by a transform are carried to the caller by TBB.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
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
  // Keep consumed pages mapped (the caller has reserved the whole store from
  // the budget): later passes then fault nothing in.
  bool keep_resident = false;
};


inline int effective_tokens(const SchedulerOptions& o) {
  return o.blocks_in_flight > 0 ? o.blocks_in_flight : 2 * o.threads + 2;
}

// transform(block_ref, mapped_block) -> Result runs in parallel; consume(Result&&)
// runs serially in block order.
template <class Result>
PassStats stream_blocks(const ShardStore& store, const std::vector<BlockRef>& blocks,
                        const SchedulerOptions& options, MemoryBudget& budget,
                        const std::function<Result(const BlockRef&, const ColumnBlock&)>& transform,
                        const std::function<void(Result&&)>& consume) {
  auto start = std::chrono::steady_clock::now();
  PassStats stats;
  int tokens = effective_tokens(options);
  uint64_t largest = 0, total = 0;
  for (const auto& b : blocks) {
    largest = std::max(largest, b.bytes);
    total += b.bytes;
  }
  // Mapped pages of the blocks in flight (and the one prefetched) are
  // resident: count them, unless the whole store is already reserved as
  // resident. A tight budget runs fewer blocks in flight, down to one.
  Reservation in_flight;
  if (!options.keep_resident && largest > 0) {
    in_flight = budget.reserve_up_to(largest * static_cast<uint64_t>(tokens + 1), largest,
                                     "scoring blocks in flight");
    const uint64_t fit = in_flight.bytes() / largest;  // blocks, one of them prefetched
    if (fit < 2) {
      in_flight.release();  // not even one: fail with the usual message
      in_flight = budget.reserve(2 * largest, "scoring blocks in flight", "lower engine.block_bytes");
    }
    tokens = static_cast<int>(std::min<uint64_t>(tokens, std::max<uint64_t>(fit, 2) - 1));
  }
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
              if (next + 1 < blocks.size()) store.prefetch_block(blocks[next + 1]);
              return next++;
            }) &
            tbb::make_filter<size_t, std::pair<size_t, Result>>(
                tbb::filter_mode::parallel,
                [&](size_t index) {
                  const BlockRef& ref = blocks[index];
                  ColumnBlock block = store.map_block(ref);
                  Result r = transform(ref, block);
                  if (!options.keep_resident) store.release_block(ref);
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
  return [&store, options, &budget](const std::vector<BlockRef>& blocks, const BlockTransform& transform,
                                    const BlockConsume& consume, const std::string& label) {
    SchedulerOptions o = options;
    o.progress_label = label;
    return stream_blocks<std::unique_ptr<BlockOutput>>(store, blocks, o, budget, transform, consume);
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
