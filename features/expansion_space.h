// Private to features/: the HIK and additive-kernel expansion spaces (FGM
// Section 6.1). Each base feature j is one group (candidate id j) of the
// dim() generated features φ(x'_j), x'_j = scale_to_unit(x_j, min_j, max_j)
// with the column's min/max over all rows (implicit zeros included).
#pragma once

#include <vector>

#include "features/feature_space.h"
#include "features/kernel_maps.h"
#include "core/partition_sum.h"

namespace fgm {

// The global range [lo, hi] of some base columns (min/max over all
// partitions, implicit zeros included), by increasing id: a rank's table holds
// its partitions' non-empty columns, those whose scaled zero is positive, and
// its column range (ExpansionSpace exchanges them).
struct ColumnRanges {
  std::vector<uint64_t> ids;  // increasing
  std::vector<float> lo, hi;
  // The position of `id`, or ids.size() when absent.
  size_t find(uint64_t id) const;
};

class ExpansionSpace : public FeatureSpace {
 public:
  // Over partitions a collective: the column ranges are exchanged (and need
  // m·dim() < 2^64, a config error naming features.levels or features.order).
  ExpansionSpace(const SpaceRows& rows, const FeatureSpaceSettings& settings, MemoryBudget& budget);
  std::string kind() const override;
  double dimension() const override;
  SpaceScores score(const ScoringContext& context) override;
  void mark_selected(uint64_t candidate) override;
  std::vector<GeneratedColumn> columns(const ShardStore& store, uint64_t candidate) override;
  uint64_t candidate_of(const FeatureKey& key) const override { return key.ids[0]; }
  void describe(Model& model) const override;

  // A column's global range as the ranks exchange it.
  struct RangeRecord {
    uint64_t id = 0;
    float lo = 0, hi = 0;
  };

 private:
  // The range [lo, hi] of a selected base feature.
  RangeRecord selected_range(uint64_t j) const;
  SpaceScores score_partitions(const ScoringContext& context);
  void exchange_ranges();
  std::vector<RangeRecord> owned_ranges(const std::vector<uint8_t>& received, const std::vector<size_t>& sizes,
                                        std::vector<std::vector<uint64_t>>& asked) const;
  RangeRecord known_range(uint64_t j) const;

  const ShardStore* store_;       // the single store, or
  SpacePartitions* partitions_;  // this rank's partitions
  MemoryBudget& budget_;
  ExpansionMap map_;
  uint64_t n_features_;
  uint64_t n_rows_;
  CandidateSet selected_;
  std::vector<uint64_t> selected_ids_;
  // Over partitions: the global ranges of this rank's partitions' non-empty
  // columns, of every column whose scaled zero is positive (`raised_zero_`),
  // and of its column range.
  Reservation range_memory_;
  ColumnRanges ranges_;
  std::vector<uint64_t> raised_zero_;
  std::vector<RangeRecord> selected_ranges_;  // by id
  std::vector<RangeRecord> top_ranges_;       // the last pass's gathered candidates, by id (the same on every rank)
};

}  // namespace fgm
