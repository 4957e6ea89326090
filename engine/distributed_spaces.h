// The feature spaces (features/feature_space.h) over this rank's partitions
// of a partitioned store: the distributed worst-case analysis of linear features and groups scored by column ranges
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

#include <memory>
#include <vector>

#include "core/memory_budget.h"
#include "engine/own_partitions.h"
#include "features/feature_space.h"

namespace fgm {

// The space of settings.kind over this rank's partitions `own` (collective:
// hik/additive exchange the column ranges). Its score() reads context.parts
// and context.B, and is a collective: the same top-B on every rank. hik/additive
// need m·dim() < 2^64 (a config error naming features.levels or
// features.order otherwise).
std::unique_ptr<FeatureSpace> make_distributed_space(const FeatureSpaceSettings& settings, OwnPartitions& own,
                                                     MemoryBudget& budget);

}  // namespace fgm
