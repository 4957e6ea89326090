// The distributed worst-case analysis of every feature space on a
// partitioned store: linear features and groups scored by column ranges
// (OwnPartitions::score_by_ranges), and the generated spaces (features.kind =
// poly2, hik, additive; docs/distributed.md, "poly-2 and kernel spaces"). Every quantity summed
// over rows is summed per partition by features/partition_spaces.h and the
// partitions' sums are added in the fixed partition tree
// (core/partition_sum.h); every decision (bounds, threshold, candidate pairs,
// top-B with ties to the smaller id) is taken from those sums, identically on
// every rank. So the top-B, and the model, are the same bit for bit for every
// rank count dividing the partition count and any engine.threads.
//
// poly2 (Algorithm 5, per pass):
//   1. moments: c_j, q_j, w_j = u_j² per partition; one tree reduction of 3·m
//      doubles. Linear (2γr·c_j²) and square (γ²·q_j²) scores.
//   2. seed: the exact pair sums among the S features of largest u (S = 256,
//      or features.pair_block_features' setting), one sparse tree reduction;
//      θ = the B-th best of the single and seed scores.
//   3. candidates: H = features with u_j·u_max ≥ t, t = √(θ/2γ²) less a
//      certified rounding slack; every pair of H with u_j·u_k ≥ t that
//      co-occurs in a row is summed exactly per partition, one sparse tree
//      reduction. Every pair that can reach θ is among them, so the top-B
//      over singles and candidate pairs is the top-B of the whole space.
// hik / additive, by column ranges: the global column ranges (min/max over
// partitions, once per run, exchanged with each column's owner), then per pass
// each partition's sparse component sums, one reduce-scatter in the tree (rank
// r sums its id range), s_j = Σ_l c_{j,l}², its range's top-B, and one
// allgather of the K lists with the candidates' ranges. Nothing m-sized.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/top_b_cache.h"
#include "core/communicator.h"
#include "engine/own_partitions.h"
#include "core/feature_key.h"
#include "core/memory_budget.h"
#include "features/block_stream.h"
#include "features/feature_space.h"
#include "io/model_file.h"
#include "io/shard_store.h"

namespace fgm {

// One of this rank's partitions as a scoring pass sees it.
struct PartitionScoringInput {
  const BlockStream* stream = nullptr;
  const std::vector<BlockRef>* blocks = nullptr;
  const double* a = nullptr;  // α∘y over the partition's rows
};

struct DistributedScores {
  std::vector<ScoredCandidate> top;  // best first, unselected, scores > 0
  Reservation top_memory;
  uint64_t candidates_scored = 0;
  uint64_t bytes_streamed = 0;  // by this rank
  // poly2
  uint64_t candidate_pairs = 0;  // pairs summed exactly (co-occurring candidates, all partitions)
  uint64_t pair_updates = 0;     // a_i x_ij x_ik accumulations on this rank
  double threshold = 0;          // θ of the seed
  // c_j of each selected column, in selection order, when the pass computed
  // them on the way (linear, group); else the caller sums its cached columns.
  std::optional<std::vector<double>> selected_dots;
};

// One generated column of a selected candidate on one partition.
struct GeneratedColumn {
  FeatureKey key;
  std::vector<uint32_t> rows;
  std::vector<float> values;
};

class DistributedSpace {
 public:
  virtual ~DistributedSpace() = default;
  virtual std::string kind() const = 0;
  // The top-B of the pass, the same on every rank (collective: every rank calls it).
  virtual DistributedScores score(const std::vector<PartitionScoringInput>& parts, uint64_t B) = 0;
  virtual void mark_selected(uint64_t candidate) = 0;
  // The candidate's columns on one of this rank's partitions; the same keys,
  // in the same order, on every partition (a column may be empty).
  virtual std::vector<GeneratedColumn> columns(const ShardStore& partition, uint64_t candidate) = 0;
  // Whether a column empty on every partition is kept (base columns, as read)
  // or dropped (a generated column no row reaches, as the single store drops it).
  virtual bool keeps_empty_columns() const { return false; }
  // Kind and parameters (and, for hik/additive, the global scaling of the selected features).
  virtual void describe(Model& model) const = 0;
};

// The space of settings.kind over this rank's partitions `own` (collective:
// hik/additive exchange the column ranges). hik/additive need m·dim() < 2^64
// (a config error naming features.levels or features.order otherwise).
std::unique_ptr<DistributedSpace> make_distributed_space(const FeatureSpaceSettings& settings, OwnPartitions& own,
                                                         MemoryBudget& budget);

// One dual vector of a shared scoring pass (one-vs-rest in lockstep).
struct DistributedScoreRequest {
  DistributedSpace* space = nullptr;
  std::vector<PartitionScoringInput> parts;
  uint64_t B = 10;
};

// Scores every request in ONE stream over this rank's partitions: result r is
// requests[r].space->score(parts, B), bit for bit, with the shared pass's
// bytes. The spaces are all linear or all group (of one group file), the kind
// scores_many (features/feature_space.h) admits. Collective.
std::vector<DistributedScores> score_many(const std::vector<DistributedScoreRequest>& requests);

}  // namespace fgm
