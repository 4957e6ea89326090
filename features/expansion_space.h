// Private to features/: the HIK and additive-kernel expansion spaces (FGM
// Section 6.1). Each base feature j is one group (candidate id j) of the
// dim() generated features φ(x'_j), x'_j = scale_to_unit(x_j, min_j, max_j)
// with the store's column min/max (implicit zeros included).
#pragma once

#include <vector>

#include "features/feature_space.h"
#include "features/kernel_maps.h"

namespace fgm {

class ExpansionSpace : public FeatureSpace {
 public:
  ExpansionSpace(const ShardStore& store, const FeatureSpaceSettings& settings, MemoryBudget& budget);
  std::string kind() const override;
  double dimension() const override;
  SpaceScores score(const ScoringContext& context) override;
  void mark_selected(uint64_t candidate) override;
  std::vector<GeneratedColumn> columns(const ShardStore& store, uint64_t candidate) override;
  uint64_t candidate_of(const FeatureKey& key) const override { return key.ids[0]; }
  void describe(Model& model) const override;
  const ExpansionMap& map() const { return map_; }

 private:
  const ShardStore& store_;
  ExpansionMap map_;
  uint64_t n_features_;
  uint64_t n_rows_;
  CandidateSet selected_;
  std::vector<uint64_t> selected_ids_;
};

}  // namespace fgm
