// Shared helpers for the solver tests: random group-sparse problems held both
// in a SelectedFeatureCache (for the solver) and as a dense matrix of the same
// float values (for the independent oracles), plus long-double evaluations of
// problem (31).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cache/selected_features.h"
#include "core/memory_budget.h"
#include "solvers/apg.h"

namespace fgm::test {

struct Problem {
  size_t n = 0;
  std::vector<size_t> batch_begin;           // column index where each batch starts
  size_t cols = 0;
  std::vector<double> x;                     // dense n × cols, row-major, the cached float values
  std::vector<int8_t> y;
  double at(size_t i, size_t j) const { return x[i * cols + j]; }
  size_t batch_end(size_t h) const { return h + 1 < batch_begin.size() ? batch_begin[h + 1] : cols; }
};

// n rows of zeros, `sizes[h]` columns in batch h (labels not set).
inline Problem zero_problem(size_t n, const std::vector<size_t>& sizes) {
  Problem p;
  p.n = n;
  for (size_t s : sizes) {
    p.batch_begin.push_back(p.cols);
    p.cols += s;
  }
  p.x.assign(n * p.cols, 0.0);
  return p;
}

// Random problem: `sizes[h]` columns in batch h, entries N(0,1)·scale with the
// given density; labels from a planted weight vector that uses only the first
// batch(es), flipped with probability `noise`.
inline Problem random_problem(uint64_t seed, size_t n, const std::vector<size_t>& sizes,
                              double density = 0.6, double noise = 0.1, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  Problem p = zero_problem(n, sizes);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < p.cols; ++j)
      if (unif(rng) < density) p.x[i * p.cols + j] = double(float(normal(rng) * scale));
  std::vector<double> planted(p.cols, 0.0);
  size_t informative = sizes.empty() ? 0 : p.batch_end(0);
  for (size_t j = 0; j < informative; ++j) planted[j] = normal(rng);
  p.y.resize(n);
  for (size_t i = 0; i < n; ++i) {
    double s = 0.3 * normal(rng);
    for (size_t j = 0; j < p.cols; ++j) s += p.at(i, j) * planted[j];
    int8_t label = s >= 0 ? 1 : -1;
    if (unif(rng) < noise) label = int8_t(-label);
    p.y[i] = label;
  }
  return p;
}

// Loads the first `batches` batches of `p` into `cache`.
inline void fill_cache(const Problem& p, SelectedFeatureCache& cache, size_t batches) {
  for (size_t h = cache.num_batches(); h < batches; ++h) {
    cache.begin_batch();
    for (size_t j = p.batch_begin[h]; j < p.batch_end(h); ++j) {
      std::vector<uint32_t> rows;
      std::vector<float> vals;
      for (size_t i = 0; i < p.n; ++i)
        if (p.at(i, j) != 0) {
          rows.push_back(uint32_t(i));
          vals.push_back(float(p.at(i, j)));
        }
      FeatureKey key;
      key.ids[0] = j;
      cache.add_column(key, rows, vals);
    }
  }
}

// Rows the first `batches` batches touch (a nonzero in some column), and per
// batch the rows that batch touches: the sizes of the solver's sparse vectors.
struct TouchedRows {
  uint64_t count = 0;
  std::vector<uint64_t> batch;
  uint64_t total_batch_rows() const {
    uint64_t s = 0;
    for (uint64_t b : batch) s += b;
    return s;
  }
};
inline TouchedRows touched_rows(const Problem& p, size_t batches) {
  TouchedRows t;
  std::vector<bool> any(p.n, false);
  for (size_t h = 0; h < batches; ++h) {
    uint64_t rows = 0;
    for (size_t i = 0; i < p.n; ++i) {
      bool in_batch = false;
      for (size_t j = p.batch_begin[h]; j < p.batch_end(h); ++j) in_batch = in_batch || p.at(i, j) != 0;
      rows += in_batch;
      if (in_batch) any[i] = true;
    }
    t.batch.push_back(rows);
  }
  for (bool a : any) t.count += a;
  return t;
}

using LD = long double;

inline LD ld_softplus(LD z) { return z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z)); }

// Per-sample loss and its derivative in d, written out independently of solvers/losses.h.
inline LD ld_loss(Loss loss, LD C, int y, LD d) {
  LD m = y * d;
  if (loss == Loss::kLogistic) return C * ld_softplus(-m);
  LD a = 1 - m;
  return a > 0 ? C / 2 * a * a : 0;
}
// α_i (Theorem 3): −∂ℓ/∂d_i = y_i α_i.
inline LD ld_alpha(Loss loss, LD C, int y, LD d) {
  LD m = y * d;
  if (loss == Loss::kLogistic) return C / (1 + std::exp(m));
  return m < 1 ? C * (1 - m) : 0;
}

inline std::vector<LD> ld_decision(const Problem& p, size_t cols, const std::vector<LD>& w, LD b) {
  std::vector<LD> d(p.n);
  for (size_t i = 0; i < p.n; ++i) {
    LD s = 0;
    for (size_t j = 0; j < cols; ++j) s += p.at(i, j) * w[j];
    d[i] = s - b;
  }
  return d;
}

// F(ω, b) of (31) over the first `batches` batches.
inline LD ld_objective(const Problem& p, size_t batches, Loss loss, LD C, const std::vector<LD>& w,
                       LD b) {
  size_t cols = batches == 0 ? 0 : p.batch_end(batches - 1);
  std::vector<LD> d = ld_decision(p, cols, w, b);
  LD P = 0;
  for (size_t i = 0; i < p.n; ++i)
    if (p.y[i] != 0) P += ld_loss(loss, C, p.y[i], d[i]);  // label 0: row not in the fit
  LD z = 0;
  for (size_t h = 0; h < batches; ++h) {
    LD s = 0;
    for (size_t j = p.batch_begin[h]; j < p.batch_end(h); ++j) s += w[j] * w[j];
    z += std::sqrt(s);
  }
  return z * z / 2 + P;
}

inline std::vector<LD> to_ld(const std::vector<double>& v) { return std::vector<LD>(v.begin(), v.end()); }

}  // namespace fgm::test
