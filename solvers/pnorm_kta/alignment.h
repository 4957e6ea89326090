// Per-feature kernel-target alignments of the Generalized ℓ_p-KTA
// (Jawanpuria, Varma, Nath, "On p-norm Path Following in Multiple Kernel
// Learning for Non-linear Feature Selection", ICML 2014, eq. (1) with the
// squared Euclidean Bregman divergence and x₀ = 0; shared/notes/ERRATA.md 004).
//
// One base kernel per feature i, centred and trace-normalised on the training
// rows (Cortes et al. 2012):  K̃_i = H K_i H / tr(H K_i H),  H = I − 11ᵀ/n.
// The alignment of feature i is
//
//   a_i = ỹᵀ K̃_i ỹ,   ỹ = H y / ‖H y‖   (y the ±1 training labels),
//
// so 0 ≤ a_i ≤ λ_max(K̃_i) ≤ tr K̃_i = 1 whatever n (ỹ is a unit vector).
// Because Hỹ = ỹ, ỹᵀ H K H ỹ = ỹᵀ K ỹ: the centring enters only through the
// trace. A constant column (col_min = col_max; its centred kernel is 0) has
// a_i = 0 and trace 0: it is never selected.
//
// Linear kernel k_i(x, z) = x_i z_i (K_i = x xᵀ, x the column with its
// implicit zeros):  a_i = (xᵀỹ)² / ‖x − μ1‖²,  μ = Σx/n,  — the squared
// Pearson correlation of the feature with the label. Both sums run over the
// stored nonzeros only: xᵀỹ = Σ_nz x_r ỹ_r, and ‖x − μ1‖² = Σ_nz (x_r − μ)² +
// (n − nnz) μ² (two passes over the nonzeros, no cancellation of Σx² − nμ²).
//
// RBF kernel k_i(x, z) = exp(−(x_i − z_i)² / (2 h_i²)) with the per-feature
// median heuristic: h_i = the lower median of |x_r − x_s| over the pairs
// r < s whose values differ (pairs of equal values are left out so that a
// sparse column, whose pairs are mostly (0, 0), still gets h_i > 0). The
// column is grouped by distinct value v_k (count c_k, label sum s_k = Σ ỹ_r
// over its rows; the implicit zeros are one group), so with u distinct
// values, in O(nnz log nnz + u²) time and O(u) memory — never an n × n matrix:
//   1ᵀK1 = Σ_kl c_k c_l κ_kl,  ỹᵀKỹ = Σ_kl s_k s_l κ_kl,  κ_kl = k(v_k, v_l),
//   tr(HKH) = n − 1ᵀK1 / n,  a_i = ỹᵀKỹ / tr(HKH).
// The median is found exactly by bisection on the bit patterns of doubles
// with an O(u) two-pointer count of the pairs within a distance.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace fgm::kta {

enum class KernelKind { kLinear, kRbf };
const char* kernel_name(KernelKind kind);

// What the path and the evaluation need of one feature.
struct FeatureAlignment {
  uint64_t feature = 0;  // 0-based feature id
  double alignment = 0;  // a_i
  double trace = 0;      // tr(H K_i H) before normalisation (linear: ‖x − μ1‖²)
  double bandwidth = 0;  // RBF h_i (0 for linear)
};

// ỹ = H y / ‖H y‖ for ±1 labels: row i's ỹ_i = (y_i − m)·scale with
// m = (n₊ − n₋)/n and scale = 1/√(n₊(1 − m)² + n₋(1 + m)²), from the class
// counts only, so a row's ỹ is the same bits on one store and on any
// partitioning of it. Empty when all labels are equal (Hy = 0).
struct UnitLabelScale {
  double mean = 0, scale = 0;
};
UnitLabelScale unit_label_scale(uint64_t n_positive, uint64_t n_negative);
std::vector<double> centred_unit_labels(const int8_t* labels, uint64_t n);

// One column: `nnz` stored entries (rows strictly increasing, values) of a
// column with n rows, col_min/col_max over all n rows (implicit zeros count).
struct ColumnEntries {
  const uint32_t* rows = nullptr;
  const float* values = nullptr;
  uint64_t nnz = 0;
  float col_min = 0, col_max = 0;
};

FeatureAlignment linear_alignment(uint64_t feature, const ColumnEntries& column,
                                  const double* unit_labels, uint64_t n);

// The pieces of linear_alignment, for rows split into parts (a partitioned
// store: each part's sums are added in the partition tree, engine/distributed_kta.h):
//   Σ_nz x and Σ_nz x·ỹ over a column's stored entries, in row order;
struct LinearColumnSums {
  double sum = 0, label_dot = 0;
};
LinearColumnSums linear_column_sums(const ColumnEntries& column, const double* unit_labels);
//   Σ_nz (x − μ)² over its stored entries, in row order;
double centred_square_sum(const ColumnEntries& column, double mean);
//   a_i from the sums over all n rows (`centred2` = ‖x − μ1‖² =
//   (n − nnz)·μ² + Σ_nz (x − μ)², added in that order; `constant`:
//   col_min = col_max over all rows).
FeatureAlignment linear_alignment_from_sums(uint64_t feature, bool constant, const LinearColumnSums& sums,
                                            double centred2, uint64_t n);

// Reusable buffers of rbf_alignment (grown to the column's nnz + 1 entries).
struct RbfScratch {
  std::vector<std::pair<double, double>> value_label;  // (x_r, ỹ_r) of the nonzeros
  std::vector<double> values, label_sums;              // distinct values v_k, s_k
  std::vector<uint64_t> counts;                        // c_k
  // Bytes rbf_alignment uses for a column of `nnz` stored entries.
  static uint64_t bytes_for(uint64_t nnz) { return 16 * nnz + 24 * (nnz + 1); }
};

FeatureAlignment rbf_alignment(uint64_t feature, const ColumnEntries& column,
                               const double* unit_labels, uint64_t n, RbfScratch& scratch);

// The lower median of v_l − v_k over pairs of distinct values v_k < v_l
// (sorted, increasing) weighted by counts c_k·c_l; 0 when u < 2.
double median_distinct_distance(const std::vector<double>& values, const std::vector<uint64_t>& counts);

}  // namespace fgm::kta
