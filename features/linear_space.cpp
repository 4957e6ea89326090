// Linear and group feature spaces (FGM Sections 4.1–4.2, Algorithm 2): one
// streamed pass computes c = Σ_i a_i x_i block by block; features score
// s_j = c_j², disjoint groups s_g = ‖c_G‖².
#include "features/linear_space.h"

#include <utility>

#include "core/error.h"

#include "features/feature_groups.h"

namespace fgm {
namespace {

struct TopOutput : BlockOutput {
  TopOutput(size_t B, MemoryBudget* budget) : top(B, budget) {}
  TopBCache top;
};

// One block's top-B per request of a shared pass.
struct ManyTopOutput : BlockOutput {
  std::vector<TopBCache> tops;
};

// The requests' dual vectors interleaved row by row (a[i·K + r]) for
// column_dot_many, reserved from the budget (K·n doubles).
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

}  // namespace

LinearSpace::LinearSpace(const ShardStore& store, MemoryBudget& budget)
    : n_features_(store.info().n_features), selected_(n_features_, budget) {}

SpaceScores LinearSpace::score(const ScoringContext& ctx) {
  SpaceScores out;
  TopBCache global(ctx.B, ctx.budget);
  const double* a = ctx.a;
  const uint64_t B = ctx.B;
  out.pass = (*ctx.stream)(
      *ctx.blocks,
      [&](const BlockRef&, const ColumnBlock& block) -> std::unique_ptr<BlockOutput> {
        CscScratch csc_scratch;
        const CscColumns cols = csc_columns(block, csc_scratch);
        auto local = std::make_unique<TopOutput>(B, ctx.budget);
        for (uint64_t k = 0; k < block.column_count; ++k) {
          uint64_t begin = cols.col_ptr[k], end = cols.col_ptr[k + 1];
          if (begin == end) continue;
          double c = column_dot(cols.row_ids + begin, cols.values + begin, end - begin, a);
          double s = c * c;
          if (!(s > 0) || !local->top.may_admit(s)) continue;
          uint64_t feature = cols.column_ids[k];
          if (selected_.test(feature)) continue;
          local->top.offer({s, feature});
        }
        return local;
      },
      [&](std::unique_ptr<BlockOutput> o) { global.merge(static_cast<TopOutput&>(*o).top); },
      "scoring");
  out.candidates_scored = n_features_;
  out.top = global.take_sorted(&out.top_memory);
  return out;
}

std::vector<SpaceScores> LinearSpace::score_many(const ScoringContext& ctx,
                                                const std::vector<ScoreRequest>& requests) {
  std::vector<const LinearSpace*> spaces;
  for (const auto& r : requests) spaces.push_back(&dynamic_cast<const LinearSpace&>(*r.space));
  const InterleavedDuals duals = interleave_duals(ctx, requests);
  const size_t K = duals.K;
  std::vector<TopBCache> global;
  for (const auto& r : requests) global.emplace_back(r.B, ctx.budget);
  PassStats pass = (*ctx.stream)(
      *ctx.blocks,
      [&](const BlockRef&, const ColumnBlock& block) -> std::unique_ptr<BlockOutput> {
        CscScratch csc_scratch;
        const CscColumns cols = csc_columns(block, csc_scratch);
        auto local = std::make_unique<ManyTopOutput>();
        for (const auto& r : requests) local->tops.emplace_back(r.B, ctx.budget);
        std::vector<double> scratch(5 * K);  // 4·K accumulators, then the K dot products
        double* c = scratch.data() + 4 * K;
        for (uint64_t k = 0; k < block.column_count; ++k) {
          uint64_t begin = cols.col_ptr[k], end = cols.col_ptr[k + 1];
          if (begin == end) continue;
          column_dot_many(cols.row_ids + begin, cols.values + begin, end - begin, duals.a.data(), K,
                          scratch.data(), c);
          const uint64_t feature = cols.column_ids[k];
          for (size_t r = 0; r < K; ++r) {
            double s = c[r] * c[r];
            if (!(s > 0) || !local->tops[r].may_admit(s)) continue;
            if (spaces[r]->selected_.test(feature)) continue;
            local->tops[r].offer({s, feature});
          }
        }
        return local;
      },
      [&](std::unique_ptr<BlockOutput> o) {
        auto& tops = static_cast<ManyTopOutput&>(*o).tops;
        for (size_t r = 0; r < K; ++r) global[r].merge(tops[r]);
      },
      "scoring (shared)");
  return shared_pass_results(global, pass, spaces.front()->n_features_);
}

void LinearSpace::materialize(const ShardStore& store, uint64_t candidate, SelectedFeatureCache& cache) {
  store.read_column(candidate, rows_, values_);
  FeatureKey key;
  key.kind = FeatureKind::kLinear;
  key.ids[0] = candidate;
  cache.add_column(key, rows_, values_);
}

void LinearSpace::describe(Model& model) const { model.feature_kind = "linear"; }

GroupSpace::GroupSpace(const ShardStore& store, const std::string& groups_path, GroupStructure structure,
                       MemoryBudget& budget)
    : groups_(read_feature_groups(groups_path, store.info().n_features, store.info().index_base, budget,
                                  structure)),
      selected_(groups_.n_groups, budget) {}

SpaceScores GroupSpace::score(const ScoringContext& ctx) {
  SpaceScores out;
  const double* a = ctx.a;
  const uint64_t m = ctx.store->info().n_features;
  // c for every feature: each block writes only its own columns.
  Reservation c_mem = ctx.budget->reserve(m * sizeof(double), "feature c-values for group scores",
                                          "use fewer base features");
  std::vector<double> c(m, 0.0);
  out.pass = (*ctx.stream)(
      *ctx.blocks,
      [&](const BlockRef&, const ColumnBlock& block) -> std::unique_ptr<BlockOutput> {
        CscScratch csc_scratch;
        const CscColumns cols = csc_columns(block, csc_scratch);
        for (uint64_t k = 0; k < block.column_count; ++k) {
          uint64_t begin = cols.col_ptr[k], end = cols.col_ptr[k + 1];
          c[cols.column_ids[k]] = column_dot(cols.row_ids + begin, cols.values + begin, end - begin, a);
        }
        return nullptr;
      },
      [&](std::unique_ptr<BlockOutput>) {}, "scoring groups");
  out.top = top_groups(c.data(), 1, ctx.B, ctx.budget, &out.top_memory);
  out.candidates_scored = last_evaluated_;
  return out;
}

std::vector<ScoredCandidate> GroupSpace::top_groups(const double* c, size_t stride, uint64_t B,
                                                    MemoryBudget* budget, Reservation* top_memory) {
  auto group_score = [&](uint64_t g) {
    double s = 0;
    for (uint64_t p = groups_.member_ptr[g]; p < groups_.member_ptr[g + 1]; ++p) {
      const double cj = c[groups_.members[p] * stride];
      s += cj * cj;
    }
    return s;
  };
  TopBCache top(B, budget);
  uint64_t evaluated = 0;
  if (groups_.structure != GroupStructure::kTree) {
    for (uint64_t g = 0; g < groups_.n_groups; ++g) {
      double s = group_score(g);
      ++evaluated;
      if (s > 0 && !selected_.test(g)) top.offer({s, g});
    }
  } else {
    // Remark 2: s_child ≤ s_parent, so a subtree whose root scores strictly
    // below the B-th best cannot contribute (ties may still win on the id).
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
  last_evaluated_ = evaluated;
  return top.take_sorted(top_memory);
}

std::vector<SpaceScores> GroupSpace::score_many(const ScoringContext& ctx,
                                               const std::vector<ScoreRequest>& requests) {
  std::vector<GroupSpace*> spaces;
  for (const auto& r : requests) spaces.push_back(&dynamic_cast<GroupSpace&>(*r.space));
  const InterleavedDuals duals = interleave_duals(ctx, requests);
  const size_t K = duals.K;
  const uint64_t m = ctx.store->info().n_features;
  // c for every feature and request, interleaved (c[j·K + r]); each block
  // writes only its own columns.
  Reservation c_mem = ctx.budget->reserve(m * K * sizeof(double), "feature c-values for group scores",
                                          "use fewer base features or classes");
  std::vector<double> c(m * K, 0.0);
  PassStats pass = (*ctx.stream)(
      *ctx.blocks,
      [&](const BlockRef&, const ColumnBlock& block) -> std::unique_ptr<BlockOutput> {
        CscScratch csc_scratch;
        const CscColumns cols = csc_columns(block, csc_scratch);
        std::vector<double> acc(4 * K);
        for (uint64_t k = 0; k < block.column_count; ++k) {
          uint64_t begin = cols.col_ptr[k], end = cols.col_ptr[k + 1];
          column_dot_many(cols.row_ids + begin, cols.values + begin, end - begin, duals.a.data(), K,
                          acc.data(), &c[(cols.column_ids[k]) * K]);
        }
        return nullptr;
      },
      [&](std::unique_ptr<BlockOutput>) {}, "scoring groups (shared)");
  std::vector<SpaceScores> out(K);
  for (size_t r = 0; r < K; ++r) {
    out[r].pass = pass;
    out[r].top = spaces[r]->top_groups(&c[r], K, requests[r].B, ctx.budget, &out[r].top_memory);
    out[r].candidates_scored = spaces[r]->last_evaluated_;
  }
  return out;
}

void GroupSpace::materialize(const ShardStore& store, uint64_t candidate, SelectedFeatureCache& cache) {
  for (uint64_t p = groups_.member_ptr[candidate]; p < groups_.member_ptr[candidate + 1]; ++p) {
    uint64_t f = groups_.members[p];
    store.read_column(f, rows_, values_);
    FeatureKey key;
    key.kind = FeatureKind::kGroup;
    key.ids[0] = f;
    key.group = candidate;
    cache.add_column(key, rows_, values_);
  }
}

void GroupSpace::describe(Model& model) const { model.feature_kind = "group"; }

}  // namespace fgm
