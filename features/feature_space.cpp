#include "features/feature_space.h"

#include "core/config.h"
#include "core/error.h"
#include "core/messages.h"
#include "features/expansion_space.h"
#include "features/linear_space.h"
#include "features/poly2_space.h"

namespace fgm {

namespace {

// Base features, or the groups of features.groups.
std::unique_ptr<FeatureSpace> make_linear(const FeatureSpaceSettings& s, const SpaceRows& rows, MemoryBudget& budget) {
  if (s.groups_path.empty()) return std::make_unique<LinearSpace>(rows, budget);
  return std::make_unique<GroupSpace>(rows, s.groups_path, parse_group_structure(s.group_structure), budget,
                                      s.tree_pruning);
}

template <class Space>
std::unique_ptr<FeatureSpace> make(const FeatureSpaceSettings& s, const SpaceRows& rows, MemoryBudget& budget) {
  return std::make_unique<Space>(rows, s, budget);
}

}  // namespace

const std::vector<FeatureSpaceKind>& feature_space_kinds() {
  static const std::vector<FeatureSpaceKind> kinds = {
      {"linear", {}, 1, true, make_linear},
      {"poly2", {"features.gamma", "features.coef0"}, 2, false, make<Poly2Space>},
      {"hik", {"features.levels"}, 1, false, make<ExpansionSpace>},
      {"additive", {"features.order", "features.period", "features.kernel"}, 1, false, make<ExpansionSpace>},
  };
  return kinds;
}

const FeatureSpaceKind& feature_space_kind(const std::string& kind) {
  std::string names;
  for (const FeatureSpaceKind& k : feature_space_kinds()) {
    if (k.kind == kind) return k;
    names += (names.empty() ? "" : ", ") + k.kind;
  }
  throw Error(ErrorKind::kConfig, msg::bad_enum("", "features.kind", kind, names));
}

FeatureSpaceSettings feature_space_settings(const Config& c) {
  FeatureSpaceSettings s;
  s.kind = c.get_string("features.kind");
  s.groups_path = c.get_string("features.groups");
  s.group_structure = c.get_string("features.group_structure");
  s.tree_pruning = c.get_bool("features.tree_pruning");
  s.gamma = c.get_float("features.gamma");
  s.coef0 = c.get_float("features.coef0");
  s.levels = static_cast<uint32_t>(c.get_int("features.levels"));
  s.order = static_cast<uint32_t>(c.get_int("features.order"));
  s.period = c.get_float("features.period");
  s.kernel = c.get_string("features.kernel");
  return s;
}

std::unique_ptr<FeatureSpace> make_feature_space(const FeatureSpaceSettings& settings,
                                                 const ShardStore& store, MemoryBudget& budget) {
  return feature_space_kind(settings.kind).make(settings, SpaceRows(store), budget);
}

std::unique_ptr<FeatureSpace> make_feature_space(const FeatureSpaceSettings& settings, SpacePartitions& partitions,
                                                 MemoryBudget& budget) {
  return feature_space_kind(settings.kind).make(settings, SpaceRows(partitions), budget);
}

std::vector<SpaceScores> score_many(const ScoringContext& ctx, const std::vector<ScoreRequest>& requests) {
  FGM_ASSERT(!requests.empty());
  return requests.front().space->score_many(ctx, requests);
}

std::vector<SpaceScores> FeatureSpace::score_many(const ScoringContext&, const std::vector<ScoreRequest>&) {
  throw Error(ErrorKind::kInternal, "score_many: features.kind = " + kind() + " scores one dual vector per pass");
}

void FeatureSpace::materialize(const ShardStore& store, uint64_t candidate, SelectedFeatureCache& cache) {
  for (const GeneratedColumn& col : columns(store, candidate))
    if (keeps_empty_columns() || !col.rows.empty()) cache.add_column(col.key, col.rows, col.values);
}

}  // namespace fgm
