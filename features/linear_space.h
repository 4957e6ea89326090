// Private to features/: the linear and disjoint-group spaces.
#pragma once

#include "features/feature_groups.h"
#include "features/feature_space.h"

namespace fgm {

class LinearSpace : public FeatureSpace {
 public:
  LinearSpace(const ShardStore& store, MemoryBudget& budget);
  std::string kind() const override { return "linear"; }
  double dimension() const override { return static_cast<double>(n_features_); }
  SpaceScores score(const ScoringContext& context) override;
  void mark_selected(uint64_t candidate) override { selected_.insert(candidate); }
  std::vector<GeneratedColumn> columns(const ShardStore& store, uint64_t candidate) override {
    return linear_columns(store, candidate);
  }
  bool keeps_empty_columns() const override { return true; }
  uint64_t candidate_of(const FeatureKey& key) const override { return key.ids[0]; }
  void describe(Model& model) const override;
  // score_many (feature_space.h) for requests on LinearSpaces.
  std::vector<SpaceScores> score_many(const ScoringContext& context,
                                      const std::vector<ScoreRequest>& requests) override;

 private:
  uint64_t n_features_;
  CandidateSet selected_;
};

class GroupSpace : public FeatureSpace {
 public:
  // tree_pruning: search tree groups with Remark 2's pruning (false: score
  // every group, as disjoint and overlapping groups are; same result).
  GroupSpace(const ShardStore& store, const std::string& groups_path, GroupStructure structure,
             MemoryBudget& budget, bool tree_pruning = true);
  std::string kind() const override { return "group"; }
  double dimension() const override { return static_cast<double>(groups_.n_groups); }
  SpaceScores score(const ScoringContext& context) override;
  void mark_selected(uint64_t candidate) override { selected_.insert(candidate); }
  std::vector<GeneratedColumn> columns(const ShardStore& store, uint64_t candidate) override {
    return group_columns(store, groups_, candidate);
  }
  bool keeps_empty_columns() const override { return true; }
  uint64_t candidate_of(const FeatureKey& key) const override { return key.group; }
  void describe(Model& model) const override;
  const FeatureGroups& groups() const { return groups_; }
  uint64_t last_evaluated() const { return last_evaluated_; }  // group scores computed by the last pass
  // score_many (feature_space.h) for requests on GroupSpaces of one group file.
  std::vector<SpaceScores> score_many(const ScoringContext& context,
                                      const std::vector<ScoreRequest>& requests) override;

 private:
  std::vector<ScoredCandidate> top_groups(const double* listed_c, size_t stride, TopBCache& singles,
                                          MemoryBudget* budget, Reservation* top_memory);

  FeatureGroups groups_;
  bool tree_pruning_;
  uint64_t last_evaluated_ = 0;
  CandidateSet selected_;
};

}  // namespace fgm
