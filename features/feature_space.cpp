#include "features/feature_space.h"

#include "core/error.h"
#include "core/messages.h"
#include "features/expansion_space.h"
#include "features/linear_space.h"
#include "features/poly2_space.h"

namespace fgm {

std::unique_ptr<FeatureSpace> make_feature_space(const FeatureSpaceSettings& settings,
                                                 const ShardStore& store, MemoryBudget& budget) {
  if (settings.kind == "linear") {
    if (!settings.groups_path.empty())
      return std::make_unique<GroupSpace>(store, settings.groups_path,
                                          parse_group_structure(settings.group_structure), budget,
                                          settings.tree_pruning);
    return std::make_unique<LinearSpace>(store, budget);
  }
  if (settings.kind == "poly2") return std::make_unique<Poly2Space>(store, settings, budget);
  if (settings.kind == "hik" || settings.kind == "additive")
    return std::make_unique<ExpansionSpace>(store, settings, budget);
  throw Error(ErrorKind::kConfig, msg::bad_enum("", "features.kind", settings.kind, "linear"));
}

bool scores_many(const FeatureSpaceSettings& settings) { return settings.kind == "linear"; }

std::vector<SpaceScores> score_many(const ScoringContext& ctx, const std::vector<ScoreRequest>& requests) {
  FGM_ASSERT(!requests.empty());
  if (dynamic_cast<const GroupSpace*>(requests.front().space)) return GroupSpace::score_many(ctx, requests);
  return LinearSpace::score_many(ctx, requests);
}

void materialize_features(FeatureSpace& space, const ShardStore& store,
                          const std::vector<ModelFeature>& features, SelectedFeatureCache& cache) {
  const size_t first = cache.num_columns();
  // A candidate's columns are consecutive in the model (one materialisation).
  for (size_t k = 0; k < features.size(); ++k) {
    const uint64_t candidate = space.candidate_of(features[k].key);
    if (k > 0 && candidate == space.candidate_of(features[k - 1].key)) continue;
    space.materialize(store, candidate, cache);
  }
  FGM_ASSERT(cache.num_columns() - first == features.size());
  for (size_t k = 0; k < features.size(); ++k) FGM_ASSERT(cache.key(first + k) == features[k].key);
}

}  // namespace fgm
