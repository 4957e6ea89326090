#include "solvers/pnorm_kta/alignment.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace fgm::kta {

const char* kernel_name(KernelKind kind) { return kind == KernelKind::kLinear ? "linear" : "rbf"; }

UnitLabelScale unit_label_scale(uint64_t n_positive, uint64_t n_negative) {
  const double np = static_cast<double>(n_positive), nn = static_cast<double>(n_negative);
  const double m = (np - nn) / (np + nn);
  return {m, 1.0 / std::sqrt(np * (1 - m) * (1 - m) + nn * (1 + m) * (1 + m))};
}

std::vector<double> centred_unit_labels(const int8_t* labels, uint64_t n) {
  uint64_t positives = 0;
  for (uint64_t r = 0; r < n; ++r) positives += labels[r] > 0;
  if (positives == 0 || positives == n) return {};  // all labels equal: Hy = 0
  const UnitLabelScale s = unit_label_scale(positives, n - positives);
  std::vector<double> y(n);
  for (uint64_t r = 0; r < n; ++r) y[r] = (labels[r] - s.mean) * s.scale;
  return y;
}

LinearColumnSums linear_column_sums(const ColumnEntries& column, const double* unit_labels) {
  LinearColumnSums out;
  for (uint64_t e = 0; e < column.nnz; ++e) {
    const double x = column.values[e];
    out.sum += x;
    out.label_dot += x * unit_labels[column.rows[e]];
  }
  return out;
}

double centred_square_sum(const ColumnEntries& column, double mean) {
  double centred2 = 0;
  for (uint64_t e = 0; e < column.nnz; ++e) {
    const double d = column.values[e] - mean;
    centred2 += d * d;
  }
  return centred2;
}

FeatureAlignment linear_alignment_from_sums(uint64_t feature, bool constant, const LinearColumnSums& sums,
                                            double centred2, uint64_t n) {
  FeatureAlignment out;
  out.feature = feature;
  if (constant || n == 0) return out;  // constant: centred kernel 0
  out.trace = centred2;
  out.alignment = centred2 > 0 ? sums.label_dot * sums.label_dot / centred2 : 0.0;
  return out;
}

FeatureAlignment linear_alignment(uint64_t feature, const ColumnEntries& column,
                                  const double* unit_labels, uint64_t n) {
  const bool constant = column.col_min == column.col_max;
  if (constant || n == 0) return linear_alignment_from_sums(feature, true, {}, 0, n);
  const LinearColumnSums sums = linear_column_sums(column, unit_labels);
  const double mean = sums.sum / static_cast<double>(n);
  const double zeros = static_cast<double>(n - column.nnz) * mean * mean;
  return linear_alignment_from_sums(feature, false, sums, zeros + centred_square_sum(column, mean), n);
}

namespace {

// Pairs (k < l) with v_l − v_k ≤ t, weighted by c_k c_l (two pointers).
unsigned __int128 pairs_within(const std::vector<double>& v, const std::vector<uint64_t>& c,
                               const std::vector<unsigned __int128>& prefix, double t) {
  unsigned __int128 total = 0;
  size_t l = 0;
  for (size_t k = 0; k < v.size(); ++k) {
    if (l < k + 1) l = k + 1;
    while (l < v.size() && v[l] - v[k] <= t) ++l;
    // rows of values k+1 .. l-1
    total += static_cast<unsigned __int128>(c[k]) * (prefix[l] - prefix[k + 1]);
  }
  return total;
}

}  // namespace

double median_distinct_distance(const std::vector<double>& values, const std::vector<uint64_t>& counts) {
  const size_t u = values.size();
  if (u < 2) return 0;
  std::vector<unsigned __int128> prefix(u + 1, 0);
  for (size_t k = 0; k < u; ++k) prefix[k + 1] = prefix[k] + counts[k];
  const unsigned __int128 all = pairs_within(values, counts, prefix, values[u - 1] - values[0]);
  const unsigned __int128 rank = (all + 1) / 2;  // the lower median: the rank-th smallest
  // Smallest t ≥ 0 with at least `rank` pairs within t: non-negative doubles
  // order like their bit patterns, so bisect on those (≤ 64 steps, exact).
  uint64_t lo = 0, hi = std::bit_cast<uint64_t>(values[u - 1] - values[0]);
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (pairs_within(values, counts, prefix, std::bit_cast<double>(mid)) >= rank)
      hi = mid;
    else
      lo = mid + 1;
  }
  return std::bit_cast<double>(lo);
}

namespace {

// Groups the column by distinct value: the nonzeros sorted by value (ties in
// row order: a fixed summation order) plus one group for the implicit zeros.
void group_distinct_values(const ColumnEntries& column, const double* unit_labels, uint64_t n,
                           RbfScratch& s) {
  s.value_label.clear();
  double nonzero_label_sum = 0;
  for (uint64_t e = 0; e < column.nnz; ++e) {
    const double y = unit_labels[column.rows[e]];
    s.value_label.emplace_back(column.values[e], y);
    nonzero_label_sum += y;
  }
  const uint64_t zeros = n - column.nnz;
  // Σ ỹ = 0, so the implicit zeros' label sum is −Σ over the nonzeros; they
  // enter as one marker entry (label NaN). An explicit stored 0 joins that group.
  if (zeros > 0) s.value_label.emplace_back(0.0, std::nan(""));
  std::stable_sort(s.value_label.begin(), s.value_label.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  s.values.clear();
  s.counts.clear();
  s.label_sums.clear();
  for (const auto& [x, y] : s.value_label) {
    const bool is_zero_marker = std::isnan(y);
    if (s.values.empty() || s.values.back() != x) {
      s.values.push_back(x);
      s.counts.push_back(0);
      s.label_sums.push_back(0);
    }
    if (is_zero_marker) {
      s.counts.back() += zeros;
      s.label_sums.back() += -nonzero_label_sum;
    } else {
      s.counts.back() += 1;
      s.label_sums.back() += y;
    }
  }
}

}  // namespace

FeatureAlignment rbf_alignment(uint64_t feature, const ColumnEntries& column,
                               const double* unit_labels, uint64_t n, RbfScratch& scratch) {
  FeatureAlignment out;
  out.feature = feature;
  if (column.col_min == column.col_max || n == 0) return out;
  group_distinct_values(column, unit_labels, n, scratch);
  const auto& v = scratch.values;
  const auto& c = scratch.counts;
  const auto& s = scratch.label_sums;
  const size_t u = v.size();
  if (u < 2) return out;
  const double h = median_distinct_distance(v, c);
  out.bandwidth = h;
  const double gamma = 1.0 / (2.0 * h * h);
  // Diagonal groups: κ = 1.
  double ones_k_ones = 0, y_k_y = 0;
  for (size_t k = 0; k < u; ++k) {
    const double ck = static_cast<double>(c[k]);
    ones_k_ones += ck * ck;
    y_k_y += s[k] * s[k];
  }
  for (size_t k = 0; k < u; ++k) {
    double row_ones = 0, row_y = 0;
    for (size_t l = k + 1; l < u; ++l) {
      const double d = v[l] - v[k];
      const double kappa = std::exp(-gamma * d * d);
      row_ones += static_cast<double>(c[l]) * kappa;
      row_y += s[l] * kappa;
    }
    ones_k_ones += 2.0 * static_cast<double>(c[k]) * row_ones;
    y_k_y += 2.0 * s[k] * row_y;
  }
  const double trace = static_cast<double>(n) - ones_k_ones / static_cast<double>(n);
  out.trace = trace;
  out.alignment = trace > 0 ? std::max(0.0, y_k_y) / trace : 0.0;
  return out;
}

}  // namespace fgm::kta
