// Linear and group feature spaces (FGM Sections 4.1–4.2, Algorithm 2): one
// streamed pass computes c = Σ_i a_i x_i block by block; features score
// s_j = c_j², disjoint groups s_g = ‖c_G‖².
#include "features/linear_space.h"

#include <utility>

#include "features/feature_groups.h"

namespace fgm {
namespace {

struct TopOutput : BlockOutput {
  TopOutput(size_t B, MemoryBudget* budget) : top(B, budget) {}
  TopBCache top;
};

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
        auto local = std::make_unique<TopOutput>(B, ctx.budget);
        for (uint64_t k = 0; k < block.column_count; ++k) {
          uint64_t begin = block.col_ptr[k], end = block.col_ptr[k + 1];
          if (begin == end) continue;
          double c = column_dot(block.row_ids + begin, block.values + begin, end - begin, a);
          double s = c * c;
          if (!(s > 0) || !local->top.may_admit(s)) continue;
          uint64_t feature = block.first_column + k;
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
        for (uint64_t k = 0; k < block.column_count; ++k) {
          uint64_t begin = block.col_ptr[k], end = block.col_ptr[k + 1];
          c[block.first_column + k] = column_dot(block.row_ids + begin, block.values + begin, end - begin, a);
        }
        return nullptr;
      },
      [&](std::unique_ptr<BlockOutput>) {}, "scoring groups");
  auto group_score = [&](uint64_t g) {
    double s = 0;
    for (uint64_t p = groups_.member_ptr[g]; p < groups_.member_ptr[g + 1]; ++p) s += c[groups_.members[p]] * c[groups_.members[p]];
    return s;
  };
  TopBCache top(ctx.B, ctx.budget);
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
  out.candidates_scored = evaluated;
  out.top = top.take_sorted(&out.top_memory);
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
