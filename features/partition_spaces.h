// The per-partition half of the distributed worst-case analysis for the
// generated feature spaces (poly2, hik, additive; docs/distributed.md,
// "poly-2 and kernel spaces"). Each function reads ONE store (a row
// partition) and returns its partial sums over that partition's rows, in a
// fixed order that depends on the partition's data only (not on threads, not
// on the rank count); engine/distributed_spaces.cpp adds the partitions'
// partials in the fixed partition tree (core/partition_sum.h) and takes the
// top-B from the sums. No communication here.
#pragma once

#include <cstdint>
#include <vector>

#include "core/memory_budget.h"
#include "core/partition_sum.h"
#include "features/block_stream.h"
#include "features/kernel_maps.h"
#include "io/shard_store.h"

namespace fgm {

// ---- poly2 (FGM Section 6.2, Algorithm 5) ----

// Per non-empty base feature j of the partition: c_j = Σ a_i x_ij,
// q_j = Σ a_i x_ij², w_j = Σ |a_i| x_ij² (the square of the pair bound u_j)
// over the partition's rows, each column in row order by the fixed-lane
// kernel simd gather_moments (the same bits on every SIMD target), as sparse
// sums with keys 3j (c_j), 3j + 1 (q_j), 3j + 2 (w_j), increasing: 48 bytes
// per non-empty column, whatever the id space (reserved by the caller).
SparseSums poly2_partition_moments(const BlockStream& stream, const std::vector<BlockRef>& blocks, const double* a,
                                   PassStats* pass);

// The features that may take part in a candidate pair, by decreasing bound
// (ties: smaller id); pair (p, q), p < q, is a candidate iff
// bound[p]·bound[q] ≥ t (evaluated exactly so on every rank).
struct Poly2ActiveSet {
  std::vector<uint32_t> ids;
  std::vector<double> bound;
  double t = 0;
  // Pairs of two features among ids[0, summed_prefix) are skipped (their
  // sums are known: the seed's pairs, the heaviest work of a pass).
  uint32_t summed_prefix = 0;
};

// p_jk = Σ_i a_i x_ij x_ik over the partition's rows, in row order, for the
// candidate pairs of `active` (outside the summed prefix) that co-occur in at least one row; keys
// poly2_id(kPoly2Cross, j, k) with j < k, increasing. The active columns'
// entries, their row-major copy and the pair table are reserved from `budget`.
SparseSums poly2_partition_pair_sums(const BlockStream& stream, const std::vector<BlockRef>& blocks, const double* a,
                                     const Poly2ActiveSet& active, MemoryBudget& budget, PassStats* pass,
                                     uint64_t* pair_updates);

// The partition's rows of generated poly-2 feature `candidate` (poly2_id),
// with the values Poly2Space::materialize gives (so prediction agrees).
void poly2_partition_column(const ShardStore& store, uint64_t candidate, double gamma, double coef0,
                            std::vector<uint32_t>& rows, std::vector<float>& values);

// ---- hik and additive expansions (FGM Section 6.1) ----

// Per base feature j, the dim() component sums c_{j,l} = Σ_i a_i φ_l(x'_ij)
// over the partition's rows (m·dim() doubles, feature-major), x'_ij scaled by
// the GLOBAL column range [lo[j], hi[j]] (min/max over all partitions,
// implicit zeros included); a row without an entry contributes a_i·φ(x'_0)
// when x'_0 = scale_to_unit(0, lo, hi) > 0. Values are float32-rounded as in
// ExpansionSpace. Features with selected[j] get no sums (left 0).
std::vector<double> expansion_partition_sums(const BlockStream& stream, const std::vector<BlockRef>& blocks,
                                             const double* a, const ExpansionMap& map, const std::vector<float>& lo,
                                             const std::vector<float>& hi, const std::vector<char>& selected,
                                             PassStats* pass);

// The partition's rows of the dim() components of base feature j (all of
// them, in level order; a component may be empty on this partition), with
// the values ExpansionSpace::materialize gives for the range [lo, hi].
void expansion_partition_columns(const ShardStore& store, const ExpansionMap& map, uint64_t j, float lo, float hi,
                                 std::vector<std::vector<uint32_t>>& rows, std::vector<std::vector<float>>& values);

}  // namespace fgm
