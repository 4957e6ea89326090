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
                                          parse_group_structure(settings.group_structure), budget);
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
  return requests.front().space->score_many(ctx, requests);
}

std::vector<SpaceScores> FeatureSpace::score_many(const ScoringContext&, const std::vector<ScoreRequest>&) {
  throw Error(ErrorKind::kInternal, "score_many: features.kind = " + kind() + " scores one dual vector per pass");
}

void FeatureSpace::materialize(const ShardStore& store, uint64_t candidate, SelectedFeatureCache& cache) {
  for (const GeneratedColumn& col : columns(store, candidate))
    if (keeps_empty_columns() || !col.rows.empty()) cache.add_column(col.key, col.rows, col.values);
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
