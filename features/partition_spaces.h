// The per-partition half of the distributed worst-case analysis for the
// generated feature spaces (poly2, hik, additive; docs/distributed.md,
// "poly-2 and kernel spaces"), and their columns, which the single-store
// spaces generate with the same code. Each function reads ONE store (a row
// partition) and returns its partial sums over that partition's rows, in a
// fixed order that depends on the partition's data only (not on threads, not
// on the rank count); the spaces (poly2_space.cpp, expansion_space.cpp) add the partitions'
// partials in the fixed partition tree (core/partition_sum.h) and takes the
// top-B from the sums. No communication here.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/memory_budget.h"
#include "core/partition_sum.h"
#include "features/block_stream.h"
#include "features/feature_space.h"
#include "features/kernel_maps.h"
#include "io/shard_store.h"

namespace fgm {

// The rank whose range of [0, m) (column_range_of_rank) holds id j < m.
int rank_of_id(uint64_t j, uint64_t m, int ranks);
// Every rank's range of [0, m), each id j standing for the keys [j·width, (j + 1)·width).
std::vector<ColumnSpans> rank_key_ranges(uint64_t m, int ranks, uint64_t width);

// ---- poly2 (FGM Section 6.2, Algorithm 5) ----

// Per non-empty base feature j of the partition: c_j = Σ a_i x_ij,
// q_j = Σ a_i x_ij², w_j = Σ |a_i| x_ij² (the square of the pair bound u_j)
// over the partition's rows, each column in row order by the fixed-lane
// kernel simd gather_moments (the same bits on every SIMD target), as sparse
// sums with keys 3j (c_j), 3j + 1 (q_j), 3j + 2 (w_j), increasing: 48 bytes
// per non-empty column, whatever the id space (reserved by the caller).
SparseSums poly2_partition_moments(const BlockStream& stream, const std::vector<BlockRef>& blocks, const double* a,
                                   PassStats* pass);

// The bound threshold t for θ (features/poly2_space.cpp): every pair whose
// computed score can reach θ has û_j·û_k ≥ t, for a pair sum of at most n
// terms added in ANY order (row order, GEMM blocks, the partition tree).
double pair_bound_threshold(double theta, double cross_scale, uint64_t n);

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

// The store's column of generated poly-2 feature `candidate` (poly2_id):
// √(2γr)·x_j, γ·x_j² or √2·γ·x_j·x_k (as float), as prediction computes them.
std::vector<GeneratedColumn> poly2_columns(const ShardStore& store, uint64_t candidate, double gamma, double coef0);
// The poly2_id of a generated column's key.
uint64_t poly2_candidate_of(const FeatureKey& key);

// ---- hik and additive expansions (FGM Section 6.1) ----

// The map of settings.kind (hik or additive) with its parameters; a config
// error naming features.kernel for an unknown kernel.
ExpansionMap expansion_map_from_settings(const FeatureSpaceSettings& settings);

// φ(x), its dim() components float32-rounded, into out (`scratch`: dim() doubles).
void expansion_components(const ExpansionMap& map, double x, double* scratch, double* out);

// Buffers of expansion_column_sums, reused from column to column.
struct ExpansionScratch {
  std::vector<double> below, partial, phi, scratch;
};

// c_l = Σ_e a_e φ_l(x'_e) (l < dim(), into c) over the entries of column k
// of `block`, x'_e = scale_to_unit(x_e, lo, hi), in entry order; `sum_entries`
// = Σ_e a_e. The same sums on one store and on a partition.
void expansion_column_sums(const ExpansionMap& map, const CscColumns& block, uint64_t k, const double* a, double lo,
                           double hi, ExpansionScratch& scratch, double* c, double& sum_entries);

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

// The partition's non-empty columns, increasing, each with its min/max over
// the partition's rows (implicit zeros included): the blocks' col_min/col_max,
// what ShardStore::column_min/max return, read block by block (one stored
// block at a time, the buffer reserved from `budget`) instead of one verified
// read per column.
ColumnRanges partition_column_ranges(const ShardStore& store, MemoryBudget& budget);

// Per base feature j not `selected`, the dim() component sums
// c_{j,l} = Σ_i a_i φ_l(x'_ij) over the partition's rows, x'_ij scaled by the
// GLOBAL column range (`ranges`, which must hold every non-empty column of the
// partition and every id of `raised_zero`); a row without an entry contributes
// a_i·φ(x'_0) when x'_0 = scale_to_unit(0, lo, hi) > 0, which is the case
// exactly for the ids of `raised_zero` (increasing; they get sums on every
// partition, with or without entries). Values are float32-rounded as in
// ExpansionSpace. Sparse: keys j·dim() + l, increasing, nonzero sums only
// (16 bytes each, reserved by the caller); the additions are those of a dense
// m·dim() vector, whose other entries are exact zeros.
SparseSums expansion_partition_sums(const BlockStream& stream, const std::vector<BlockRef>& blocks, const double* a,
                                    const ExpansionMap& map, const ColumnRanges& ranges,
                                    const std::vector<uint64_t>& raised_zero,
                                    const std::function<bool(uint64_t)>& selected, PassStats* pass);

// The store's columns of the dim() components of base feature j (all of
// them, in level order; a component may be empty on this store), x_j scaled
// by the range [lo, hi], values float32-rounded.
std::vector<GeneratedColumn> expansion_columns(const ShardStore& store, const ExpansionMap& map, uint64_t j, float lo,
                                               float hi);

}  // namespace fgm
