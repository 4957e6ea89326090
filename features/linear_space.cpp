// Linear and group feature spaces (FGM Sections 4.1–4.2, Algorithm 2): one
// streamed pass computes c = Σ_i a_i x_i block by block (tile by tile inside
// a block, features/block_scores.h); features score s_j = c_j², groups
// s_g = ‖c_G‖². Nothing on the scoring path is sized by the id space: a
// block's scores live in an array of its non-empty columns, the selection in a
// CandidateSet, and only features some group lists keep a c-value past their
// block. Over partitions the pass is SpacePartitions::score_by_ranges (docs/distributed.md,
// "Scoring by column ranges").
#include "features/linear_space.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <utility>

#include "core/clock.h"
#include <fmt/format.h>

#include "core/error.h"
#include "features/block_scores.h"
#include "features/column_pruning.h"
#include "features/feature_groups.h"

namespace fgm {
namespace {

// The requests' dual vectors interleaved row by row (a[i·K + r]) for
// block_column_dots_many, reserved from the budget (K·n doubles).
struct InterleavedDuals {
  Reservation memory;
  std::vector<double> a;
  size_t K = 0;
};

InterleavedDuals interleave_duals(const ScoringContext& ctx, const std::vector<ScoreRequest>& requests) {
  const uint64_t n = ctx.store->info().n_rows;
  InterleavedDuals d;
  d.K = requests.size();
  d.memory = ctx.budget->reserve(n * d.K * sizeof(double), "dual vectors of a shared scoring pass",
                                 "use fewer training rows or classes");
  d.a.resize(n * d.K);
  for (size_t r = 0; r < d.K; ++r)
    for (uint64_t i = 0; i < n; ++i) d.a[i * d.K + r] = requests[r].a[i];
  return d;
}

// A block's score array (column_count·K doubles) and kernel scratch; the
// stream reserves them with the block (score_bytes).
struct BlockScores {
  BlockScores(const ColumnBlock& block, size_t K) : c(block.column_count * K), scratch(5 * K) {}
  std::vector<double> c;
  std::vector<double> scratch;
};

// What BlockScores and the block's result (a top-B per request, or the listed
// features' c-values) take for a block of `ref.column_count` columns.
struct ScoreBytes {
  size_t K;
  uint64_t operator()(const BlockRef& ref) const { return (ref.column_count * (K + 1) + 5 * K) * sizeof(double); }
};

// What a pruned pass allocates for a block beyond its result (the top-B
// cache, which reserves its own bytes).
struct PrunedScoreBytes {
  uint64_t operator()(const BlockRef& ref) const { return ref.column_count * PruningScratch::kBytesPerColumn; }
};

// The pass's result for every request: its own top, the shared PassStats.
std::vector<SpaceScores> shared_pass_results(std::vector<TopBCache>& tops, const PassStats& pass,
                                             uint64_t candidates_scored) {
  std::vector<SpaceScores> out(tops.size());
  for (size_t r = 0; r < tops.size(); ++r) {
    out[r].pass = pass;
    out[r].candidates_scored = candidates_scored;
    out[r].top = tops[r].take_sorted(&out[r].top_memory);
  }
  return out;
}

// The pass's batches of popular columns (features/column_pruning.h,
// DeferredColumns): one per thread, together at most an eighth of the
// available budget and 512 MiB. A batch of capacity C holds row ids and
// values arrays of C/4 entries each and cell and column lists of at most C
// bytes grown by doubling: the reservation is 3·C a batch. Columns of at
// least 16 nonzeros per tile on average are deferred: their cells are long
// (cell_dot), and a sum over them sweeps much of the dual vector. None when
// the budget leaves less than 1 MiB a batch.
struct DeferredBatches {
  Reservation memory;
  DeferredColumnsPool pool;
  uint64_t min_nnz = 0;  // the columns deferred have at least this many nonzeros
};

DeferredBatches deferred_batches(const ShardStore& store, int threads, MemoryBudget& budget) {
  constexpr uint64_t kMaxBytes = uint64_t{512} << 20, kMinBatch = uint64_t{1} << 20;
  const uint64_t batches = static_cast<uint64_t>(std::max(threads, 1));
  const uint64_t want = std::min(kMaxBytes, budget.available() / 8) / (3 * batches) * (3 * batches);
  Reservation memory = budget.reserve_up_to(want, 3 * batches, "popular columns summed together (scoring)");
  const uint64_t capacity = memory.bytes() / (3 * batches);
  const uint64_t tile_rows = store.info().tile_rows;
  const uint64_t tiles = tile_rows == 0 ? 0 : (store.info().n_rows + tile_rows - 1) / tile_rows;
  const uint64_t min_nnz = std::max<uint64_t>(16 * tiles, 16);
  if (capacity < kMinBatch) return {Reservation{}, DeferredColumnsPool(0, 0, 0), min_nnz};
  return {std::move(memory), DeferredColumnsPool(batches, capacity, min_nnz), min_nnz};
}

// The pass's blocks with those of long columns on average (at least min_nnz
// nonzeros a column: on Zipf data the most popular columns, each a stored
// block of its own) first, the others in store order. Their scores raise
// the floor at once, so the later blocks prune from their start; the top-B
// does not depend on the order.
std::vector<BlockRef> dense_blocks_first(const std::vector<BlockRef>& blocks, uint64_t min_nnz) {
  std::vector<BlockRef> out = blocks;
  std::stable_partition(out.begin(), out.end(),
                        [&](const BlockRef& b) { return b.nnz >= min_nnz * std::max<uint64_t>(b.column_count, 1); });
  return out;
}

}  // namespace

// Over partitions every rank marks the same candidates; one repeated or out
// of range comes from a corrupt checkpoint.
void BaseColumnSpace::mark_selected(uint64_t id) {
  const bool fresh = selected_.insert(id);
  if (!partitions_) return;
  if (id >= candidates() || !fresh)
    throw Error(ErrorKind::kCorruption, fmt::format("checkpoint: candidate {} is repeated or beyond the {} "
                                                    "candidates of {}",
                                                    id, candidates(), partitions_->dir()));
  const FeatureGroups* g = groups();
  for (uint64_t p = 0; p < (g ? g->size(id) : 1); ++p) {
    selected_columns_.push_back(g ? g->member(id, p) : id);
    column_group_.push_back(g ? id : 0);
  }
}

std::vector<SpaceScores> BaseColumnSpace::score_by_ranges(const std::vector<ScoreRequest>& requests) {
  std::vector<SpacePartitions::RangeRequest> ranges;
  for (const ScoreRequest& request : requests) {
    const auto* space = dynamic_cast<const BaseColumnSpace*>(request.space);
    FGM_ASSERT(space);
    std::vector<const double*> a;
    for (const PartitionScoringInput& p : request.parts) a.push_back(p.a);
    ranges.push_back({std::move(a), [space](uint64_t id) { return space->selected_.test(id); },
                      &space->selected_columns_, &space->column_group_, request.B});
  }
  uint64_t bytes = 0;
  std::vector<SpacePartitions::RangeScores> scored = partitions_->score_by_ranges(groups(), ranges, bytes);
  std::vector<SpaceScores> out(requests.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    out[r].top = std::move(scored[r].top);
    out[r].top_memory = std::move(scored[r].top_memory);
    out[r].selected_dots = std::move(scored[r].selected_dots);
    out[r].candidates_scored = candidates();
    out[r].pass.bytes_streamed = bytes;
  }
  return out;
}

// Pruned (features/column_pruning.h): a column whose bound cannot reach the
// B-th best score found so far is not summed; the top-B and its scores are
// those of summing every column.
SpaceScores LinearSpace::score(const ScoringContext& ctx) {
  if (partitions_) return std::move(score_by_ranges({{this, nullptr, ctx.parts, ctx.B}}).front());
  SpaceScores out;
  TopBCache global(ctx.B, ctx.budget);
  const double* a = ctx.a;
  const uint64_t B = ctx.B;
  const uint64_t n_rows = ctx.store->info().n_rows;
  const double a_max = max_abs(a, n_rows);
  ScoreFloor floor;
  PruningScratchPool scratches;
  DeferredBatches deferred = deferred_batches(*ctx.store, ctx.threads, *ctx.budget);
  auto selected = [&](uint64_t feature) { return selected_.test(feature); };
  const std::vector<BlockRef> blocks = dense_blocks_first(*ctx.blocks, deferred.min_nnz);
  std::atomic<uint64_t> tails_skipped{0};
  out.pass = stream_block_parts<TopBCache>(
      *ctx.stream, blocks, "scoring",
      [&](const BlockRef& ref, const ColumnBlock& block, const TailReader* tail) {
        TopBCache local(B, ctx.budget);
        std::unique_ptr<PruningScratch> scratch = scratches.take();
        // Blocks of more nonzeros than rows (resident units, ~2n) already
        // reuse each dual slice within the block: their long columns are
        // summed there, without the copy into a batch.
        std::unique_ptr<DeferredColumns> batch = block.nnz() <= n_rows ? deferred.pool.take() : nullptr;
        offer_block_top(block, a, a_max, floor, local, selected, *scratch, batch.get());
        // A format 6 block came as its head: its tail (the block's rare
        // columns) is read only if its bound can reach the floor, which the
        // head's popular columns have just raised.
        if (tail && part_out_of_reach(ref.tail_bound, a_max, floor)) {
          tails_skipped.fetch_add(1, std::memory_order_relaxed);
        } else if (tail) {
          const ColumnBlock rest = tail->read();
          offer_block_top(rest, a, a_max, floor, local, selected, *scratch, batch.get());
        }
        deferred.pool.give(std::move(batch));
        scratches.give(std::move(scratch));
        return local;
      },
      [&](TopBCache&& local) {
        global.merge(local);
        floor.raise_from(global);
      },
      PrunedScoreBytes{});
  const auto flush_start = std::chrono::steady_clock::now();
  deferred.pool.flush_all(a, floor, global);
  out.pass.seconds += seconds_since(flush_start);
  out.pass.tails_skipped = tails_skipped.load();
  out.candidates_scored = n_features_;
  out.top = global.take_sorted(&out.top_memory);
  return out;
}

std::vector<SpaceScores> LinearSpace::score_many(const ScoringContext& ctx,
                                                const std::vector<ScoreRequest>& requests) {
  if (partitions_) return score_by_ranges(requests);
  std::vector<const LinearSpace*> spaces;
  for (const auto& r : requests) spaces.push_back(&dynamic_cast<const LinearSpace&>(*r.space));
  const InterleavedDuals duals = interleave_duals(ctx, requests);
  const size_t K = duals.K;
  std::vector<TopBCache> global;
  for (const auto& r : requests) global.emplace_back(r.B, ctx.budget);
  PassStats pass = stream_blocks<std::vector<TopBCache>>(
      *ctx.stream, *ctx.blocks, "scoring (shared)",
      [&](const BlockRef&, const ColumnBlock& block) {
        std::vector<TopBCache> tops;
        for (const auto& r : requests) tops.emplace_back(r.B, ctx.budget);
        BlockScores scores(block, K);
        block_column_dots_many(block, duals.a.data(), K, scores.scratch.data(), scores.c.data());
        for (uint64_t k = 0; k < block.column_count; ++k) {
          const uint64_t feature = block.column_ids[k];
          const double* c = &scores.c[k * K];
          for (size_t r = 0; r < K; ++r) {
            const double s = c[r] * c[r];
            if (!(s > 0) || !tops[r].may_admit(s)) continue;
            if (spaces[r]->selected_.test(feature)) continue;
            tops[r].offer({s, feature});
          }
        }
        return tops;
      },
      [&](std::vector<TopBCache>&& tops) {
        for (size_t r = 0; r < K; ++r) global[r].merge(tops[r]);
      },
      ScoreBytes{K});
  return shared_pass_results(global, pass, spaces.front()->n_features_);
}

// The read of a column (8 bytes per nonzero, ~80 MB for a column on 10^7
// rows) is not kept between materialisations: the cache holds the column in
// its compact form, and the APG that runs next takes the budget.
std::vector<GeneratedColumn> linear_columns(const ShardStore& store, uint64_t feature) {
  std::vector<GeneratedColumn> out(1);
  out[0].key.kind = FeatureKind::kLinear;
  out[0].key.ids[0] = feature;
  store.read_column(feature, out[0].rows, out[0].values);
  return out;
}

GroupSpace::GroupSpace(const SpaceRows& rows, const std::string& groups_path, GroupStructure structure,
                       MemoryBudget& budget, bool tree_pruning)
    : BaseColumnSpace(rows, budget),
      groups_(read_feature_groups(groups_path, rows.n_features(), rows.index_base(), budget, structure)),
      tree_pruning_(tree_pruning) {}

SpaceScores GroupSpace::score(const ScoringContext& ctx) {
  ScoreRequest request;
  request.space = this;
  request.a = ctx.a;
  request.parts = ctx.parts;
  request.B = ctx.B;
  return std::move(score_many(ctx, {request}).front());
}

// The top-B unselected groups: the listed ones by s_g = Σ_{j∈g} c_j² with
// c_j = listed_c[listed_index(j)·stride], merged with `singles`, the top of the
// singleton groups the pass offered.
std::vector<ScoredCandidate> GroupSpace::top_groups(const double* listed_c, size_t stride, TopBCache& singles,
                                                    MemoryBudget* budget, Reservation* top_memory) {
  auto group_score = [&](uint64_t g) {
    double s = 0;
    for (uint64_t p = groups_.member_ptr[g]; p < groups_.member_ptr[g + 1]; ++p) {
      const double cj = listed_c[groups_.listed_index(groups_.members[p]) * stride];
      s += cj * cj;
    }
    return s;
  };
  TopBCache top(singles.capacity(), budget);
  uint64_t evaluated = 0;
  if (groups_.structure != GroupStructure::kTree || !tree_pruning_) {
    for (uint64_t g = 0; g < groups_.listed_groups; ++g) {
      double s = group_score(g);
      ++evaluated;
      if (s > 0 && !selected_.test(g)) top.offer({s, g});
    }
  } else {
    // Remark 2: s_child ≤ s_parent, so a subtree whose root scores strictly
    // below the B-th best cannot contribute (ties may still win on the id).
    // It holds in floating point too: a child's sum adds a subset of its
    // parent's nonnegative terms in the same (feature) order, and rounded
    // addition is monotone, so the pruned top-B is the exhaustive one.
    std::vector<uint64_t> stack(groups_.roots.rbegin(), groups_.roots.rend());
    while (!stack.empty()) {
      uint64_t g = stack.back();
      stack.pop_back();
      double s = group_score(g);
      ++evaluated;
      if (top.full() && s < top.worst().score) continue;
      if (s > 0 && !selected_.test(g)) top.offer({s, g});
      for (uint64_t q = groups_.child_ptr[g + 1]; q > groups_.child_ptr[g]; --q) stack.push_back(groups_.children[q - 1]);
    }
  }
  // Every singleton group is a root without children: each was evaluated.
  last_evaluated_ = evaluated + (groups_.n_groups - groups_.listed_groups);
  top.merge(singles);
  return top.take_sorted(top_memory);
}

namespace {

// One block's part of a group pass: the top singleton groups per request and
// the c-values of the listed features in the block (K each, by listed index).
struct GroupBlockScores {
  std::vector<TopBCache> singles;
  std::vector<uint64_t> listed;  // listed indices
  std::vector<double> listed_c;  // K per listed index
};

}  // namespace

std::vector<SpaceScores> GroupSpace::score_many(const ScoringContext& ctx,
                                               const std::vector<ScoreRequest>& requests) {
  if (partitions_) return score_by_ranges(requests);
  std::vector<GroupSpace*> spaces;
  for (const auto& r : requests) spaces.push_back(&dynamic_cast<GroupSpace&>(*r.space));
  const FeatureGroups& groups = spaces.front()->groups_;
  InterleavedDuals duals;
  if (requests.size() > 1) duals = interleave_duals(ctx, requests);
  const size_t K = requests.size();
  const double* a = K > 1 ? duals.a.data() : requests.front().a;
  // c of every listed feature and request, interleaved (c[l·K + r]).
  const uint64_t L = groups.listed_features.size();
  Reservation c_mem = ctx.budget->reserve(L * K * sizeof(double), "c-values of the group file's features",
                                          "list fewer features in the group file or use fewer classes");
  std::vector<double> listed_c(L * K, 0.0);
  std::vector<TopBCache> singles;
  for (const auto& r : requests) singles.emplace_back(r.B, ctx.budget);
  PassStats pass = stream_blocks<GroupBlockScores>(
      *ctx.stream, *ctx.blocks, K > 1 ? "scoring groups (shared)" : "scoring groups",
      [&](const BlockRef&, const ColumnBlock& block) {
        GroupBlockScores out;
        for (const auto& r : requests) out.singles.emplace_back(r.B, ctx.budget);
        BlockScores scores(block, K);
        block_column_dots_many(block, a, K, scores.scratch.data(), scores.c.data());
        for (uint64_t k = 0; k < block.column_count; ++k) {
          const uint64_t feature = block.column_ids[k];
          const double* c = &scores.c[k * K];
          const uint64_t l = L == 0 ? UINT64_MAX : groups.listed_index(feature);
          if (l != UINT64_MAX) {
            out.listed.push_back(l);
            out.listed_c.insert(out.listed_c.end(), c, c + K);
            continue;
          }
          const uint64_t g = groups.singleton_group(feature);
          for (size_t r = 0; r < K; ++r) {
            const double s = c[r] * c[r];
            if (!(s > 0) || !out.singles[r].may_admit(s) || spaces[r]->selected_.test(g)) continue;
            out.singles[r].offer({s, g});
          }
        }
        return out;
      },
      [&](GroupBlockScores&& block) {
        for (size_t q = 0; q < block.listed.size(); ++q)
          std::copy_n(&block.listed_c[q * K], K, &listed_c[block.listed[q] * K]);
        for (size_t r = 0; r < K; ++r) singles[r].merge(block.singles[r]);
      },
      ScoreBytes{K});
  std::vector<SpaceScores> out(K);
  for (size_t r = 0; r < K; ++r) {
    out[r].pass = pass;
    const auto search_start = std::chrono::steady_clock::now();
    out[r].top = spaces[r]->top_groups(listed_c.data() + r, K, singles[r], ctx.budget, &out[r].top_memory);
    out[r].pass.seconds += seconds_since(search_start);  // the group search is part of the analysis' time
    out[r].candidates_scored = spaces[r]->last_evaluated_;
  }
  return out;
}

std::vector<GeneratedColumn> group_columns(const ShardStore& store, const FeatureGroups& groups, uint64_t group) {
  std::vector<GeneratedColumn> out(groups.size(group));
  for (uint64_t p = 0; p < out.size(); ++p) {
    out[p].key.kind = FeatureKind::kGroup;
    out[p].key.ids[0] = groups.member(group, p);
    out[p].key.group = group;
    store.read_column(out[p].key.ids[0], out[p].rows, out[p].values);
  }
  return out;
}

}  // namespace fgm
