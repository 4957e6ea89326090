// The sparse APG (solvers/apg.cpp: per-row work only on the rows the selected
// columns touch, the untouched rows in aggregate, the Section 5.5 cache held
// on R_h) against
//  * its dense twin (tests/solvers/dense_apg_twin.cpp: the solver before the
//    rewrite, every per-row vector over all n rows): same optimum, same
//    support, and the same iterates step by step;
//  * a brute-force re-indexing for its layout (solvers/apg_layout.h);
//  * itself across thread counts and inner-product cache sizes, bit for bit.
// Data: Gaussian, binary, small-integer, tied and raw-count columns; tall
// shapes where most rows are untouched; labels 0 among touched and untouched
// rows; with and without bias; both losses.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/simd/simd.h"
#include "solvers/apg.h"
#include "solvers/apg_layout.h"
#include "tests/solvers/dense_apg_twin.h"
#include "tests/solvers/solver_test_util.h"

using namespace fgm;
using namespace fgm::test;

namespace {

constexpr uint64_t kBudget = uint64_t(1) << 32;

enum class Kind { kGaussian, kBinary, kInteger, kTied, kCounts };
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kGaussian: return "gaussian";
    case Kind::kBinary: return "binary";
    case Kind::kInteger: return "integer";
    case Kind::kTied: return "tied";
    case Kind::kCounts: return "counts";
  }
  return "?";
}

// n rows of which about `touched` (a fraction) carry nonzeros; the others are
// empty in every column, so only the bias reaches them. Labels: a planted
// rule on the first columns for touched rows, 70% negative among the others
// (so the bias has work to do), 10% flips. `masked`: rows with label 0, both
// touched and untouched ones.
Problem tall_problem(uint64_t seed, size_t n, const std::vector<size_t>& sizes, Kind kind,
                     double touched, bool masked) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  Problem p = zero_problem(n, sizes);
  p.y.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const bool row_touched = unif(rng) < touched;
    for (size_t j = 0; row_touched && j < p.cols; ++j) {
      double& x = p.x[i * p.cols + j];
      if (kind == Kind::kTied && j % 3 == 2) {
        x = p.at(i, j - 2);  // a tie: the same column again (in another batch when sizes allow)
        continue;
      }
      if (unif(rng) >= 0.5) continue;
      switch (kind) {
        case Kind::kGaussian: x = double(float(normal(rng))); break;
        case Kind::kBinary: x = 1.0; break;
        case Kind::kInteger:
        case Kind::kTied: x = double(1 + rng() % 4); break;
        case Kind::kCounts: x = double(1 + uint64_t(std::exp(7.0 * unif(rng)))); break;  // 1 … ~1100
      }
    }
    double score;
    if (row_touched) {
      const double scale = kind == Kind::kCounts ? 1.0 / 100 : 1.0;
      score = scale * (p.at(i, 0) - p.at(i, std::min<size_t>(1, p.cols - 1))) + 0.3 * normal(rng);
    } else {
      score = unif(rng) < 0.3 ? 1 : -1;
    }
    int8_t label = score > 0 ? 1 : -1;
    if (unif(rng) < 0.1) label = int8_t(-label);
    p.y[i] = masked && (i % 7 == 3 || i % 11 == 5) ? 0 : label;
  }
  return p;
}

ApgOptions options(Loss loss, double C, bool bias, double eps, int max_iterations) {
  ApgOptions o;
  o.loss = loss;
  o.C = C;
  o.bias = bias;
  o.eps_inner = eps;
  o.max_iterations = max_iterations;
  return o;
}

// Batches whose weights are not all zero.
std::vector<bool> support(const Problem& p, size_t batches, const std::vector<double>& w) {
  std::vector<bool> s(batches, false);
  for (size_t h = 0; h < batches; ++h)
    for (size_t j = p.batch_begin[h]; j < p.batch_end(h); ++j) s[h] = s[h] || w[j] != 0;
  return s;
}

// Column 1 := column 0 except on every 20th row: a near-tie that makes the
// problem ill-conditioned (slow convergence), keeping the data's kind.
void make_ill_conditioned(Problem& p) {
  for (size_t i = 0; i < p.n; ++i) p.x[i * p.cols + 1] = i % 20 == 0 ? 0.0 : p.at(i, 0);
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

}  // namespace

TEST_CASE("APG layout: touched rows, per-batch row lists and positions, untouched counts",
          "[solvers][apg][layout]") {
  // Against a brute-force re-indexing, in every index form (lists, ranked
  // bitmaps, and the smallest per batch). 30,000 rows with ~60% touched: the
  // touched rows span three row chunks.
  const size_t n = 30000;
  Problem p = tall_problem(1, n, {2, 3, 1, 2}, Kind::kInteger, 0.6, true);
  // Batch 2 touches only rows below 1000: empty chunks for it.
  for (size_t i = 1000; i < n; ++i) p.x[i * p.cols + p.batch_begin[2]] = 0;
  MemoryBudget budget(kBudget);
  SelectedFeatureCache cache(budget, n);
  fill_cache(p, cache, 4);
  const uint64_t before = budget.used();
  for (ApgRowIndex choice : {ApgRowIndex::kSmallest, ApgRowIndex::kListed, ApgRowIndex::kRanked}) {
    CAPTURE(int(choice));
    detail::ApgLayout layout(cache, p.y.data(), budget, choice);
    std::vector<uint32_t> rows;
    uint64_t untouched_pos = 0, untouched_neg = 0, fit = 0;
    for (size_t i = 0; i < n; ++i) {
      bool any = false;
      for (size_t j = 0; j < p.cols; ++j) any = any || p.at(i, j) != 0;
      if (any) rows.push_back(uint32_t(i));
      fit += p.y[i] != 0;
      if (!any) untouched_pos += p.y[i] > 0, untouched_neg += p.y[i] < 0;
    }
    REQUIRE(layout.n_rows() == n);
    REQUIRE(layout.touched() == rows.size());
    REQUIRE(rows.size() > 2 * detail::kLayoutRowChunk);
    REQUIRE(layout.num_chunks() == (rows.size() + detail::kLayoutRowChunk - 1) / detail::kLayoutRowChunk);
    std::vector<uint32_t> walked;
    layout.for_each_touched([&](uint32_t c, uint32_t row) {
      REQUIRE(c == walked.size());
      walked.push_back(row);
    });
    REQUIRE(walked == rows);
    for (size_t c = 0; c < rows.size(); ++c) REQUIRE(layout.labels()[c] == p.y[rows[c]]);
    REQUIRE(layout.untouched().positive == untouched_pos);
    REQUIRE(layout.untouched().negative == untouched_neg);
    REQUIRE(layout.fit_rows() == fit);
    REQUIRE(layout.num_batches() == 4);
    REQUIRE(layout.num_columns() == p.cols);
    uint64_t nnz = 0, batch_rows = 0;
    for (size_t h = 0; h < 4; ++h) {
      // R_h: compact indices of the rows batch h touches, increasing.
      std::vector<uint32_t> expected;
      for (size_t c = 0; c < rows.size(); ++c) {
        bool any = false;
        for (size_t j = p.batch_begin[h]; j < p.batch_end(h); ++j) any = any || p.at(rows[c], j) != 0;
        if (any) expected.push_back(uint32_t(c));
      }
      CAPTURE(h, int(layout.batch_form(h)));
      if (choice == ApgRowIndex::kListed) REQUIRE(layout.batch_form(h) == detail::BatchIndexForm::kListed);
      if (choice == ApgRowIndex::kRanked) REQUIRE(layout.batch_form(h) == detail::BatchIndexForm::kRanked);
      REQUIRE(layout.batch_rows(h) == expected.size());
      batch_rows += expected.size();
      // Chunk c's rows of R_h are positions [batch_chunk(h, c), batch_chunk(h, c + 1)),
      // walked in order with their compact rows.
      std::vector<uint32_t> listed;
      for (size_t c = 0; c <= layout.num_chunks(); ++c) {
        const size_t first = std::lower_bound(expected.begin(), expected.end(),
                                              uint32_t(c * detail::kLayoutRowChunk)) - expected.begin();
        REQUIRE(layout.batch_chunk(h, c) == (c == layout.num_chunks() ? expected.size() : first));
        if (c == layout.num_chunks()) break;
        layout.for_each_batch_row(h, c, [&](uint32_t position, uint32_t compact) {
          REQUIRE(position == listed.size());
          REQUIRE(compact >= c * detail::kLayoutRowChunk);
          REQUIRE(compact < (c + 1) * detail::kLayoutRowChunk);
          listed.push_back(compact);
        });
      }
      REQUIRE(listed == expected);
      // Each entry: its compact row, its position in R_h, its value, in row order.
      for (size_t j = p.batch_begin[h]; j < p.batch_end(h); ++j) {
        std::vector<std::array<double, 3>> entries, want;
        layout.for_each_entry(j, [&](uint32_t position, uint32_t compact, float value) {
          entries.push_back({double(position), double(compact), double(value)});
        });
        for (size_t c = 0; c < rows.size(); ++c) {
          const double x = p.at(rows[c], j);
          if (x == 0) continue;
          const size_t position = std::lower_bound(expected.begin(), expected.end(), uint32_t(c)) - expected.begin();
          want.push_back({double(position), double(c), x});
        }
        REQUIRE(layout.column_batch(j) == h);
        REQUIRE(layout.column_size(j) == want.size());
        REQUIRE(entries == want);
        nnz += want.size();
      }
    }
    REQUIRE(layout.nnz() == nnz);
    REQUIRE(layout.total_batch_rows() == batch_rows);
    REQUIRE(budget.used() == before + layout.bytes());
  }
  REQUIRE(budget.used() == before);  // the layout's reservation ends with it
}

TEST_CASE("Sparse APG reaches the dense twin's optimum with the same support",
          "[solvers][apg][twin]") {
  // Tight solves of both, from a cold start and warm-started after a third
  // batch is added. Tall shapes: 4,000 rows of which 8% are touched.
  const Kind kinds[] = {Kind::kGaussian, Kind::kBinary, Kind::kInteger, Kind::kTied, Kind::kCounts};
  uint64_t seed = 40;
  int cases = 0;
  for (Kind kind : kinds) {
    for (bool tall : {false, true}) {
      for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
        for (bool bias : {false, true}) {
          const bool masked = (seed % 2) == 0;
          const size_t n = tall ? 4000 : 300;
          Problem p = tall_problem(++seed, n, {2, 3, 3}, kind, tall ? 0.08 : 1.0, masked);
          // C: the counts columns are ~300× larger; keep the loss and the
          // regulariser comparable so that some groups stay at zero.
          const double C = kind == Kind::kCounts ? 2e-6 : (tall ? 0.05 : 0.02);
          const ApgOptions o = options(loss, C, bias, 1e-10, 200000);
          CAPTURE(kind_name(kind), tall, loss_name(loss), bias, masked, C);
          MemoryBudget budget(kBudget);
          SelectedFeatureCache cache(budget, n);
          ApgState sparse_state, dense_state;
          std::vector<double> sparse_d, dense_d;
          for (size_t batches : {size_t(2), size_t(3)}) {
            CAPTURE(batches);
            fill_cache(p, cache, batches);
            ApgResult a = solve_apg(cache, p.y.data(), o, sparse_state, sparse_d, budget);
            ApgResult b = solve_apg_dense(cache, p.y.data(), o, dense_state, dense_d, budget);
            CAPTURE(a.iterations, b.iterations, a.objective, b.objective, a.relative_gap);
            REQUIRE(a.converged);
            REQUIRE(b.converged);
            REQUIRE(std::fabs(a.objective - b.objective) <= 1e-9 * b.objective);
            // Evaluated independently in long double at the returned point.
            const LD F = ld_objective(p, batches, loss, C, to_ld(sparse_state.w), sparse_state.b);
            REQUIRE(std::fabs(double(F) - a.objective) <= 1e-12 * a.objective);
            REQUIRE(support(p, batches, sparse_state.w) == support(p, batches, dense_state.w));
            REQUIRE(a.relative_gap <= 1e-6);
            REQUIRE(a.dual_bound <= b.objective * (1 + 1e-9));
            // Decision values: Xw − b on every row, label 0 rows included.
            const std::vector<LD> d = ld_decision(p, cache.num_columns(), to_ld(sparse_state.w), sparse_state.b);
            for (size_t i = 0; i < n; ++i) REQUIRE(std::fabs(double(d[i]) - sparse_d[i]) <= 1e-9 * (1 + std::fabs(sparse_d[i])));
          }
          ++cases;
        }
      }
    }
  }
  REQUIRE(cases == 40);
}

TEST_CASE("Sparse APG takes the dense twin's steps", "[solvers][apg][twin]") {
  // Same iterates in exact arithmetic: the same line-search decisions,
  // restarts, step counts and stop, and iterates that differ only by
  // rounding. (Near the optimum, where F changes by less than its rounding,
  // restart decisions follow the rounding; the stop at ε_in = 10^-3 comes
  // well before that.)
  uint64_t seed = 900;
  for (Kind kind : {Kind::kGaussian, Kind::kBinary, Kind::kCounts}) {
    for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
      for (bool bias : {false, true}) {
        Problem p = tall_problem(++seed, 3000, {3, 2, 4}, kind, 0.1, true);
        make_ill_conditioned(p);
        const double C = kind == Kind::kCounts ? 1e-5 : 0.1;
        const ApgOptions o = options(loss, C, bias, 1e-3, 1000);
        CAPTURE(kind_name(kind), loss_name(loss), bias);
        MemoryBudget budget(kBudget);
        SelectedFeatureCache cache(budget, p.n);
        fill_cache(p, cache, 3);
        ApgState sa, sb;
        std::vector<double> da, db;
        ApgResult a = solve_apg(cache, p.y.data(), o, sa, da, budget);
        ApgResult b = solve_apg_dense(cache, p.y.data(), o, sb, db, budget);
        REQUIRE(a.iterations > 5);
        REQUIRE(a.iterations == b.iterations);
        REQUIRE(a.line_search_steps == b.line_search_steps);
        REQUIRE(a.bias_line_search_steps == b.bias_line_search_steps);
        REQUIRE(a.restarts == b.restarts);
        REQUIRE(a.gradient_evaluations == b.gradient_evaluations);
        REQUIRE(a.column_passes == b.column_passes);
        REQUIRE(a.objective == Approx(b.objective).epsilon(1e-12));
        REQUIRE(a.dual_bound == Approx(b.dual_bound).epsilon(1e-9));
        REQUIRE(sa.lipschitz == Approx(sb.lipschitz).epsilon(1e-12));
        REQUIRE(sa.b == Approx(sb.b).epsilon(1e-9).margin(1e-12));
        double scale = 0;
        for (double x : sb.w) scale = std::max(scale, std::fabs(x));
        for (size_t j = 0; j < sa.w.size(); ++j) REQUIRE(std::fabs(sa.w[j] - sb.w[j]) <= 1e-9 * scale);
      }
    }
  }
}

TEST_CASE("Sparse APG is bit-identical across thread counts and cache sizes on tall data",
          "[solvers][apg][threads]") {
  // 40,000 rows, ~50% touched (three row chunks of the touched rows), four
  // batches; with and without room for the whole inner-product cache.
  const size_t n = 40000;
  Problem p = tall_problem(7, n, {3, 2, 3, 2}, Kind::kGaussian, 0.5, true);
  MemoryBudget holder(kBudget);
  SelectedFeatureCache cache(holder, n);
  fill_cache(p, cache, 4);
  const TouchedRows touched = touched_rows(p, 4);
  REQUIRE(touched.count > 2 * detail::kLayoutRowChunk);
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    const ApgOptions base = options(loss, 0.5, true, 1e-6, 300);
    ApgState ref;
    std::vector<double> ref_d;
    MemoryBudget full(kBudget);
    ApgResult r0 = solve_apg(cache, p.y.data(), base, ref, ref_d, full);
    REQUIRE(r0.cached_products == 8);
    REQUIRE(r0.iterations > 10);
    // Room for the first three products only.
    const uint64_t required = full.peak() - 2 * touched.total_batch_rows() * sizeof(double);
    const uint64_t three = (2 * touched.batch[0] + touched.batch[1]) * sizeof(double);
    for (bool tight : {false, true}) {
      for (int threads : {1, 2, 3, 4}) {
        CAPTURE(loss_name(loss), tight, threads);
        ApgOptions o = base;
        o.threads = threads;
        MemoryBudget budget(tight ? required + three + 8 : kBudget);
        ApgState s;
        std::vector<double> d;
        ApgResult r = solve_apg(cache, p.y.data(), o, s, d, budget);
        REQUIRE(r.cached_products == (tight ? 3u : 8u));
        REQUIRE(r.iterations == r0.iterations);
        REQUIRE(r.line_search_steps == r0.line_search_steps);
        REQUIRE(std::memcmp(&r.objective, &r0.objective, sizeof(double)) == 0);
        REQUIRE(std::memcmp(&r.dual_bound, &r0.dual_bound, sizeof(double)) == 0);
        REQUIRE(same_bits(s.w, ref.w));
        REQUIRE(std::memcmp(&s.b, &ref.b, sizeof(double)) == 0);
        REQUIRE(std::memcmp(&s.lipschitz, &ref.lipschitz, sizeof(double)) == 0);
        REQUIRE(same_bits(d, ref_d));
      }
    }
  }
}

// The row sweeps run on the dispatched SIMD kernels (apg_kernels.h): every
// target this CPU has gives the same solve, bit for bit.
TEST_CASE("Sparse APG is bit-identical on every SIMD target", "[solvers][apg][simd]") {
  const size_t n = 20000;
  Problem p = tall_problem(11, n, {3, 2}, Kind::kInteger, 0.4, true);
  MemoryBudget holder(kBudget);
  SelectedFeatureCache cache(holder, n);
  fill_cache(p, cache, 2);
  const simd::Target before = simd::active_target();
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    const ApgOptions o = options(loss, 0.5, true, 1e-6, 200);
    ApgState ref;
    std::vector<double> ref_d;
    ApgResult r0;
    bool first = true;
    for (simd::Target target : simd::supported_targets()) {
      CAPTURE(loss_name(loss), simd::target_name(target));
      simd::set_active_target(target);
      MemoryBudget budget(kBudget);
      ApgState s;
      std::vector<double> d;
      ApgResult r = solve_apg(cache, p.y.data(), o, s, d, budget);
      if (first) {
        r0 = r, ref = s, ref_d = d, first = false;
        REQUIRE(r.iterations > 5);
        continue;
      }
      REQUIRE(r.iterations == r0.iterations);
      REQUIRE(std::memcmp(&r.objective, &r0.objective, sizeof(double)) == 0);
      REQUIRE(same_bits(s.w, ref.w));
      REQUIRE(std::memcmp(&s.b, &ref.b, sizeof(double)) == 0);
      REQUIRE(same_bits(d, ref_d));
    }
  }
  simd::set_active_target(before);
}

TEST_CASE("Sparse APG: untouched rows alone (no columns) give the closed-form bias",
          "[solvers][apg][bias]") {
  // Every row untouched, 10^6 of them: the whole loss is the two counts.
  // Optimal b: squared hinge (n₋ − n₊)/n, logistic log(n₋/n₊); label-0 rows
  // count for nothing.
  const size_t n = 1000000;
  std::vector<int8_t> y(n);
  for (size_t i = 0; i < n; ++i) y[i] = i % 10 < 3 ? 1 : (i % 10 < 9 ? -1 : 0);  // 3 : 6 : 1
  MemoryBudget budget(kBudget);
  SelectedFeatureCache cache(budget, n);
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    ApgOptions o = options(loss, 1.0, true, 1e-12, 10000);
    ApgState s;
    std::vector<double> decision;
    ApgResult r = solve_apg(cache, y.data(), o, s, decision, budget);
    const double expected = loss == Loss::kSquaredHinge ? (6.0 - 3.0) / 9.0 : std::log(6.0 / 3.0);
    CAPTURE(loss_name(loss));
    REQUIRE(r.converged);
    REQUIRE(s.b == Approx(expected).epsilon(1e-9));
    // P = 300000·φ(−b) + 600000·φ(b), as loss_value sums it row by row.
    REQUIRE(r.loss == Approx(loss_value(loss, 1.0, y.data(), decision)).epsilon(1e-13));
    REQUIRE(r.relative_gap <= 1e-9);
  }
}

TEST_CASE("Sparse APG: every column form and row index gives the plain forms' solve, bit for bit",
          "[solvers][apg][compact]") {
  // The plain forms (row lists with values in the cache, listed R_h with
  // per-entry positions) against each cache form (forced where it can hold
  // the column) and each layout index (smallest, lists, ranked bitmaps).
  // Shapes: dense (every row touched: all-touched batches, dense and bitmap
  // columns) and tall (10% touched); binary (uniform forms) and Gaussian.
  const ColumnForm forms[] = {ColumnForm::kSparse, ColumnForm::kSparseUniform, ColumnForm::kBitmap,
                              ColumnForm::kBitmapUniform, ColumnForm::kDense};
  uint64_t seed = 300;
  for (Kind kind : {Kind::kBinary, Kind::kGaussian}) {
    for (double touched : {1.0, 0.1}) {
      const size_t n = 20000;
      Problem p = tall_problem(++seed, n, {3, 2, 3}, kind, touched, true);
      if (touched == 1.0)  // one column on every row: a dense-form candidate
        for (size_t i = 0; i < n; ++i) p.x[i * p.cols + 2] = kind == Kind::kBinary ? 1.0 : 0.25 + double(i % 7);
      for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
        CAPTURE(kind_name(kind), touched, loss_name(loss));
        const ApgOptions o = options(loss, 0.5, true, 1e-6, 300);
        auto solve = [&](std::optional<ColumnForm> form, ApgRowIndex index, ApgState& s, std::vector<double>& d,
                         std::set<ColumnForm>* used) {
          MemoryBudget budget(kBudget);
          force_column_form(form);
          SelectedFeatureCache cache(budget, n);
          force_column_form(std::nullopt);
          fill_cache(p, cache, 3);
          if (used)
            for (size_t j = 0; j < cache.num_columns(); ++j) used->insert(cache.column(j).form);
          LocalRowSums local;
          ApgRowPart part{&cache, p.y.data(), &d};
          part.row_index = index;
          return solve_apg({part}, local, o, s, budget);
        };
        ApgState ref;
        std::vector<double> ref_d;
        const ApgResult r0 = solve(ColumnForm::kSparse, ApgRowIndex::kListed, ref, ref_d, nullptr);
        REQUIRE(r0.iterations > 5);
        std::set<ColumnForm> used;
        for (int f = -1; f < 5; ++f) {
          for (ApgRowIndex index : {ApgRowIndex::kSmallest, ApgRowIndex::kListed, ApgRowIndex::kRanked}) {
            CAPTURE(f, int(index));
            ApgState s;
            std::vector<double> d;
            const ApgResult r = solve(f < 0 ? std::nullopt : std::optional<ColumnForm>(forms[f]), index, s, d, &used);
            REQUIRE(r.iterations == r0.iterations);
            REQUIRE(r.line_search_steps == r0.line_search_steps);
            REQUIRE(std::memcmp(&r.objective, &r0.objective, sizeof(double)) == 0);
            REQUIRE(std::memcmp(&r.dual_bound, &r0.dual_bound, sizeof(double)) == 0);
            REQUIRE(same_bits(s.w, ref.w));
            REQUIRE(std::memcmp(&s.b, &ref.b, sizeof(double)) == 0);
            REQUIRE(same_bits(d, ref_d));
          }
        }
        // Every form really occurred (uniform ones only on binary data).
        REQUIRE(used.count(ColumnForm::kBitmap) == 1);
        if (touched == 1.0) REQUIRE(used.count(ColumnForm::kDense) == 1);
        if (kind == Kind::kBinary) REQUIRE(used.count(ColumnForm::kBitmapUniform) == 1);
        if (kind == Kind::kBinary) REQUIRE(used.count(ColumnForm::kSparseUniform) == 1);
      }
    }
  }
}

TEST_CASE("APG layout: the smallest index form per batch, and its bytes reserved", "[solvers][apg][layout][compact]") {
  // Every row touched by batch 0 (all-touched), batch 1 on ~half of the rows
  // (a ranked bitmap is smaller than its lists), batch 2 on a few rows (lists).
  const size_t n = 50000;
  Problem p = tall_problem(9, n, {2, 2, 1}, Kind::kBinary, 1.0, false);
  for (size_t i = 0; i < n; ++i) {
    p.x[i * p.cols + 0] = 1.0;
    p.x[i * p.cols + 4] = i % 1000 == 0 ? 1.0 : 0.0;
  }
  MemoryBudget budget(kBudget);
  SelectedFeatureCache cache(budget, n);
  fill_cache(p, cache, 3);
  const uint64_t before = budget.used();
  detail::ApgLayout smallest(cache, p.y.data(), budget);
  REQUIRE(smallest.batch_form(0) == detail::BatchIndexForm::kAllTouched);
  REQUIRE(smallest.batch_form(1) == detail::BatchIndexForm::kRanked);
  REQUIRE(smallest.batch_form(2) == detail::BatchIndexForm::kListed);
  const uint64_t compact = budget.used() - before;
  REQUIRE(compact == smallest.bytes());
  detail::ApgLayout listed(cache, p.y.data(), budget, ApgRowIndex::kListed);
  REQUIRE(budget.used() - before - compact == listed.bytes());
  // The listed layout holds 4 bytes per entry and per row of each R_h (and of R):
  // with ~125,000 entries here, over 10 times the compact one.
  REQUIRE(listed.bytes() >= 4 * (listed.nnz() + listed.total_batch_rows() + listed.touched()));
  REQUIRE(10 * compact < listed.bytes());
}
