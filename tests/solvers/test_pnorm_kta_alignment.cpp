// Per-feature KTA alignments (solvers/pnorm_kta/alignment.h) against a direct
// n × n computation: the kernel matrix K built entry by entry, H K H and
// H y formed as matrices and vectors, a = (Hy)ᵀ(HKH)(Hy) / (‖Hy‖² tr(HKH)),
// and the RBF bandwidth as the median of the sorted list of all pairwise
// distances.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "solvers/pnorm_kta/alignment.h"

using namespace fgm;
using namespace fgm::kta;

namespace {

struct DenseColumn {
  std::vector<double> x;  // all n values
  // The sparse form the store gives (nonzeros, increasing rows).
  std::vector<uint32_t> rows;
  std::vector<float> values;
  ColumnEntries entries() const {
    ColumnEntries c;
    c.rows = rows.data();
    c.values = values.data();
    c.nnz = rows.size();
    c.col_min = static_cast<float>(*std::min_element(x.begin(), x.end()));
    c.col_max = static_cast<float>(*std::max_element(x.begin(), x.end()));
    return c;
  }
};

DenseColumn make_column(const std::vector<float>& x) {
  DenseColumn c;
  for (uint32_t r = 0; r < x.size(); ++r) {
    c.x.push_back(x[r]);
    if (x[r] != 0) {
      c.rows.push_back(r);
      c.values.push_back(x[r]);
    }
  }
  return c;
}

double brute_median_distance(const std::vector<double>& x) {
  std::vector<double> d;
  for (size_t r = 0; r < x.size(); ++r)
    for (size_t s = r + 1; s < x.size(); ++s)
      if (x[r] != x[s]) d.push_back(std::fabs(x[r] - x[s]));
  if (d.empty()) return 0;
  std::sort(d.begin(), d.end());
  return d[(d.size() + 1) / 2 - 1];
}

// a = (Hy)ᵀ H K H (Hy) / (‖Hy‖² tr(HKH)) from explicit n × n matrices, in
// long double (a column with mean 1e6 has K entries of 1e12).
double direct_alignment(const std::vector<std::vector<long double>>& K, const std::vector<int8_t>& y,
                        double* trace_out) {
  using Matrix = std::vector<std::vector<long double>>;
  const size_t n = y.size();
  Matrix H(n, std::vector<long double>(n));
  for (size_t r = 0; r < n; ++r)
    for (size_t s = 0; s < n; ++s) H[r][s] = (r == s ? 1.0L : 0.0L) - 1.0L / n;
  auto mul = [&](const Matrix& A, const Matrix& B) {
    Matrix C(n, std::vector<long double>(n, 0.0L));
    for (size_t r = 0; r < n; ++r)
      for (size_t k = 0; k < n; ++k)
        for (size_t s = 0; s < n; ++s) C[r][s] += A[r][k] * B[k][s];
    return C;
  };
  const Matrix HKH = mul(mul(H, K), H);
  std::vector<long double> hy(n, 0.0L);
  for (size_t r = 0; r < n; ++r)
    for (size_t s = 0; s < n; ++s) hy[r] += H[r][s] * y[s];
  long double trace = 0, quad = 0, norm2 = 0;
  for (size_t r = 0; r < n; ++r) {
    trace += HKH[r][r];
    norm2 += hy[r] * hy[r];
    for (size_t s = 0; s < n; ++s) quad += hy[r] * HKH[r][s] * hy[s];
  }
  *trace_out = static_cast<double>(trace);
  return trace > 1e-12L ? static_cast<double>(quad / (norm2 * trace)) : 0.0;
}

std::vector<std::vector<long double>> linear_kernel(const std::vector<double>& x) {
  std::vector<std::vector<long double>> K(x.size(), std::vector<long double>(x.size()));
  for (size_t r = 0; r < x.size(); ++r)
    for (size_t s = 0; s < x.size(); ++s) K[r][s] = static_cast<long double>(x[r]) * x[s];
  return K;
}

std::vector<std::vector<long double>> rbf_kernel(const std::vector<double>& x, double h) {
  std::vector<std::vector<long double>> K(x.size(), std::vector<long double>(x.size()));
  for (size_t r = 0; r < x.size(); ++r)
    for (size_t s = 0; s < x.size(); ++s) K[r][s] = std::exp(-(x[r] - x[s]) * (x[r] - x[s]) / (2 * h * h));
  return K;
}

// Columns of the kinds the brief names: binary, integer, tied, constant,
// sparse, negative, one nonzero.
std::vector<std::vector<float>> test_columns(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> small(0, 4), bit(0, 1), pick(0, 9);
  std::normal_distribution<float> normal(0, 3);
  std::vector<std::vector<float>> cols(8, std::vector<float>(n, 0.0f));
  for (size_t r = 0; r < n; ++r) {
    cols[0][r] = static_cast<float>(bit(rng));                      // binary
    cols[1][r] = static_cast<float>(small(rng));                    // integer, many ties
    cols[2][r] = r % 3 == 0 ? 2.5f : -1.25f;                        // two tied values, no zeros
    cols[3][r] = 7.0f;                                              // constant (stored dense)
    cols[4][r] = pick(rng) == 0 ? normal(rng) : 0.0f;               // sparse continuous
    cols[5][r] = -std::fabs(normal(rng)) - 0.5f;                    // negative, dense
    cols[6][r] = r == n / 2 ? 3.0f : 0.0f;                          // one nonzero
    cols[7][r] = static_cast<float>(r % 4) * 1e3f + 1e6f;           // large mean, small spread
  }
  return cols;
}

std::vector<int8_t> test_labels(size_t n, double positive_share, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<int8_t> y(n);
  for (auto& v : y) v = u(rng) < positive_share ? 1 : -1;
  y[0] = 1;
  y[1] = -1;  // both labels present
  return y;
}

}  // namespace

TEST_CASE("KTA alignments equal the direct n x n computation", "[kta][alignment]") {
  for (size_t n : {size_t{2}, size_t{9}, size_t{37}}) {
    for (double share : {0.5, 0.2}) {
      const auto y = test_labels(n, share, 100 + n);
      const auto unit = centred_unit_labels(y.data(), n);
      REQUIRE(unit.size() == n);
      const auto columns = test_columns(n, 7 * n);
      for (size_t j = 0; j < columns.size(); ++j) {
        CAPTURE(n, share, j);
        const DenseColumn col = make_column(columns[j]);
        const bool constant = col.entries().col_min == col.entries().col_max;
        // Linear.
        double trace = 0;
        const double direct_linear = direct_alignment(linear_kernel(col.x), y, &trace);
        const FeatureAlignment lin = linear_alignment(j, col.entries(), unit.data(), n);
        REQUIRE(lin.feature == j);
        if (constant) {
          REQUIRE(lin.alignment == 0);
        } else {
          REQUIRE(lin.alignment == Approx(direct_linear).epsilon(1e-9).margin(1e-12));
          REQUIRE(lin.trace == Approx(trace).epsilon(1e-9));
        }
        REQUIRE(lin.alignment >= 0);
        REQUIRE(lin.alignment <= 1 + 1e-12);
        // RBF with the median heuristic.
        RbfScratch scratch;
        const FeatureAlignment rbf = rbf_alignment(j, col.entries(), unit.data(), n, scratch);
        const double h = brute_median_distance(col.x);
        if (constant) {
          REQUIRE(rbf.alignment == 0);
          REQUIRE(h == 0);
          continue;
        }
        REQUIRE(rbf.bandwidth == h);  // exact: the same pairwise difference
        const double direct_rbf = direct_alignment(rbf_kernel(col.x, h), y, &trace);
        REQUIRE(rbf.alignment == Approx(direct_rbf).epsilon(1e-9).margin(1e-12));
        REQUIRE(rbf.trace == Approx(trace).epsilon(1e-9));
        REQUIRE(rbf.alignment <= 1 + 1e-12);
      }
    }
  }
}

TEST_CASE("KTA alignment of a perfectly aligned feature is 1, of a label-free one 0", "[kta][alignment]") {
  const std::vector<int8_t> y = {1, -1, 1, 1, -1, -1, 1, -1};
  const size_t n = y.size();
  const auto unit = centred_unit_labels(y.data(), n);
  std::vector<float> x(n);
  for (size_t r = 0; r < n; ++r) x[r] = y[r] > 0 ? 1.0f : 0.0f;  // the label itself, as 0/1
  const DenseColumn col = make_column(x);
  REQUIRE(linear_alignment(0, col.entries(), unit.data(), n).alignment == Approx(1.0).epsilon(1e-12));
  // Balanced within each value: the same count of +1 and −1 rows per value.
  std::vector<float> z = {1, 1, 2, 3, 2, 3, 0, 0};
  const DenseColumn neutral = make_column(z);
  RbfScratch s;
  REQUIRE(linear_alignment(1, neutral.entries(), unit.data(), n).alignment == Approx(0.0).margin(1e-15));
  REQUIRE(rbf_alignment(1, neutral.entries(), unit.data(), n, s).alignment == Approx(0.0).margin(1e-15));
}

TEST_CASE("KTA labels: one label only gives no centred target", "[kta][alignment]") {
  const std::vector<int8_t> same = {1, 1, 1};
  REQUIRE(centred_unit_labels(same.data(), same.size()).empty());
  const std::vector<int8_t> two = {1, -1, -1};
  const auto unit = centred_unit_labels(two.data(), two.size());
  double sum = 0, norm = 0;
  for (double v : unit) {
    sum += v;
    norm += v * v;
  }
  REQUIRE(sum == Approx(0).margin(1e-15));
  REQUIRE(norm == Approx(1).epsilon(1e-15));
}

TEST_CASE("median of distinct pairwise distances equals the sorted list's median", "[kta][alignment]") {
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int> value(-6, 6), count(1, 5);
  for (int trial = 0; trial < 200; ++trial) {
    const int u = 2 + trial % 9;
    std::vector<double> all;
    std::vector<double> values;
    std::vector<uint64_t> counts;
    std::vector<int> pool;
    for (int v = -6; v <= 6; ++v) pool.push_back(v);
    std::shuffle(pool.begin(), pool.end(), rng);
    pool.resize(u);
    std::sort(pool.begin(), pool.end());
    for (int v : pool) {
      const double x = v * 0.37;
      values.push_back(x);
      counts.push_back(count(rng));
      for (uint64_t c = 0; c < counts.back(); ++c) all.push_back(x);
    }
    CAPTURE(trial);
    REQUIRE(median_distinct_distance(values, counts) == brute_median_distance(all));
  }
}

TEST_CASE("RBF alignment treats an explicitly stored zero as one of the implicit zeros", "[kta][alignment]") {
  const std::vector<int8_t> y = {1, -1, 1, -1, 1, -1};
  const size_t n = y.size();
  const auto unit = centred_unit_labels(y.data(), n);
  const std::vector<double> x = {0, 2, 0, 0, 5, 2};
  // Row 2's zero stored explicitly; rows 0 and 3 implicit.
  const std::vector<uint32_t> rows = {1, 2, 4, 5};
  const std::vector<float> values = {2, 0, 5, 2};
  ColumnEntries c{rows.data(), values.data(), rows.size(), 0.0f, 5.0f};
  RbfScratch s;
  const FeatureAlignment got = rbf_alignment(0, c, unit.data(), n, s);
  double trace = 0;
  const double h = brute_median_distance(x);
  REQUIRE(got.bandwidth == h);
  REQUIRE(got.alignment == Approx(direct_alignment(rbf_kernel(x, h), y, &trace)).epsilon(1e-10));
}
