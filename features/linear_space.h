// Private to features/: the linear and group spaces.
#pragma once

#include "features/feature_groups.h"
#include "features/feature_space.h"

namespace fgm {

// What the linear and group spaces share: a candidate's columns are base
// columns, read as stored; over partitions a pass scores by column ranges
// (SpacePartitions::score_by_ranges) and carries the selected columns' c_j for (37).
class BaseColumnSpace : public FeatureSpace {
 public:
  double dimension() const override { return static_cast<double>(candidates()); }
  void mark_selected(uint64_t candidate) override;
  bool keeps_empty_columns() const override { return true; }
  void describe(Model& model) const override { model.feature_kind = kind(); }

 protected:
  BaseColumnSpace(const SpaceRows& rows, MemoryBudget& budget) : partitions_(rows.partitions), selected_(&budget) {}
  virtual uint64_t candidates() const = 0;
  virtual const FeatureGroups* groups() const { return nullptr; }
  // score_many over this rank's partitions, for requests on spaces of this one's kind.
  std::vector<SpaceScores> score_by_ranges(const std::vector<ScoreRequest>& requests);

  SpacePartitions* partitions_;
  CandidateSet selected_;
  std::vector<uint64_t> selected_columns_;  // over partitions: the selected columns' features, in order
  std::vector<uint64_t> column_group_;      // and their groups (group spaces)
};

class LinearSpace : public BaseColumnSpace {
 public:
  LinearSpace(const SpaceRows& rows, MemoryBudget& budget)
      : BaseColumnSpace(rows, budget), n_features_(rows.n_features()) {}
  std::string kind() const override { return "linear"; }
  SpaceScores score(const ScoringContext& context) override;
  std::vector<GeneratedColumn> columns(const ShardStore& store, uint64_t candidate) override {
    return linear_columns(store, candidate);
  }
  uint64_t candidate_of(const FeatureKey& key) const override { return key.ids[0]; }
  // score_many (feature_space.h) for requests on LinearSpaces.
  std::vector<SpaceScores> score_many(const ScoringContext& context,
                                      const std::vector<ScoreRequest>& requests) override;

 private:
  uint64_t candidates() const override { return n_features_; }
  uint64_t n_features_;
};

class GroupSpace : public BaseColumnSpace {
 public:
  // tree_pruning: search tree groups with Remark 2's pruning (false: score
  // every group, as disjoint and overlapping groups are; same result).
  GroupSpace(const SpaceRows& rows, const std::string& groups_path, GroupStructure structure, MemoryBudget& budget,
             bool tree_pruning = true);
  std::string kind() const override { return "group"; }
  SpaceScores score(const ScoringContext& context) override;
  std::vector<GeneratedColumn> columns(const ShardStore& store, uint64_t candidate) override {
    return group_columns(store, groups_, candidate);
  }
  uint64_t candidate_of(const FeatureKey& key) const override { return key.group; }
  // score_many (feature_space.h) for requests on GroupSpaces of one group file.
  std::vector<SpaceScores> score_many(const ScoringContext& context,
                                      const std::vector<ScoreRequest>& requests) override;

 private:
  uint64_t candidates() const override { return groups_.n_groups; }
  const FeatureGroups* groups() const override { return &groups_; }
  std::vector<ScoredCandidate> top_groups(const double* listed_c, size_t stride, TopBCache& singles,
                                          MemoryBudget* budget, Reservation* top_memory);

  FeatureGroups groups_;
  bool tree_pruning_;
  uint64_t last_evaluated_ = 0;  // group scores computed by the last pass
};

}  // namespace fgm
