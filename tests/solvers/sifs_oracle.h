// Test-only: small SIFS problems held densely, with the objectives, the KKT
// maps and the margins computed straight from the definitions of (P), (D),
// (m-P), (m-D) — independent of the streamed passes and of the solver.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "solvers/sifs/sifs_problem.h"
#include "tests/features/tiled_store.h"

namespace fgm::test {

enum class SifsKind { kReal, kBinary, kInteger, kTied, kDegenerate };

inline const char* sifs_kind_name(SifsKind k) {
  switch (k) {
    case SifsKind::kReal: return "real";
    case SifsKind::kBinary: return "binary";
    case SifsKind::kInteger: return "integer";
    case SifsKind::kTied: return "tied";
    case SifsKind::kDegenerate: return "degenerate";
  }
  return "?";
}

struct DenseSifs {
  uint64_t n = 0, m = 0;
  uint32_t K = 1;  // weight blocks (binary 1)
  std::vector<std::vector<double>> X;  // n × m
  std::vector<int8_t> y;               // binary labels
  std::vector<uint16_t> cls;           // multi-class labels
  std::vector<Triplet> triplets;

  // classes == 2: binary; otherwise multi-class with `classes` classes.
  DenseSifs(uint64_t rows, uint64_t cols, SifsKind kind, uint32_t classes, uint64_t seed) : n(rows), m(cols) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> unif(0.0, 1.0);
    std::normal_distribution<double> normal(0.0, 1.0);
    K = classes == 2 ? 1 : classes;
    X.assign(n, std::vector<double>(m, 0.0));
    for (uint64_t i = 0; i < n; ++i) {
      const uint32_t c = static_cast<uint32_t>(rng() % classes);
      if (classes == 2) y.push_back(c ? 1 : -1);
      else cls.push_back(static_cast<uint16_t>(c));
      for (uint64_t j = 0; j < m; ++j) {
        if (unif(rng) > 0.35) continue;
        // Features j < 4 (binary) or j ≡ class (mod m) lean with the label.
        const double shift = classes == 2 ? (j < 4 ? 0.8 * (c ? 1 : -1) : 0.0) : (j % classes == c && j < 3 * classes ? 1.0 : 0.0);
        double v = 0;
        switch (kind) {
          case SifsKind::kReal: v = normal(rng) + shift; break;
          case SifsKind::kBinary: v = (unif(rng) < 0.5 + 0.3 * shift) ? 1.0 : 0.0; break;
          case SifsKind::kInteger: v = static_cast<double>(1 + rng() % 3) * (shift > 0 ? 1 : shift < 0 ? -1 : (rng() % 2 ? 1 : -1)); break;
          case SifsKind::kTied: v = (shift > 0 ? 1.0 : shift < 0 ? -1.0 : 0.0) + (rng() % 2 ? 0.5 : -0.5); break;
          case SifsKind::kDegenerate: v = normal(rng) + shift; break;
        }
        X[i][j] = static_cast<float>(v);
      }
    }
    if (kind == SifsKind::kTied) {
      // Duplicate columns and duplicate rows (same label): exact ties everywhere.
      for (uint64_t i = 0; i < n; ++i)
        for (uint64_t j = 1; j < m; j += 3) X[i][j] = X[i][j - 1];
      for (uint64_t i = 1; i < n; i += 4) {
        X[i] = X[i - 1];
        if (classes == 2) y[i] = y[i - 1];
        else cls[i] = cls[i - 1];
      }
    }
    if (kind == SifsKind::kDegenerate) {
      // Empty columns, a constant column, an empty row and a row equal to another with the other label.
      for (uint64_t i = 0; i < n; ++i) X[i][m - 1] = 0, X[i][m - 2] = 0, X[i][0] = 1;
      X[1].assign(m, 0.0);
      X[3] = X[2];
      if (classes == 2) y[3] = static_cast<int8_t>(-y[2]);
      else cls[3] = static_cast<uint16_t>((cls[2] + 1) % classes);
    }
    for (uint64_t i = 0; i < n; ++i)
      for (uint64_t j = 0; j < m; ++j)
        if (X[i][j] != 0) triplets.push_back({static_cast<uint32_t>(i), j, static_cast<float>(X[i][j])});
    if (classes == 2) return;
  }

  SifsLayout layout() const {
    return K == 1 ? SifsLayout::binary(y) : SifsLayout::multiclass(cls, K);
  }
  std::vector<int8_t> store_labels() const {
    if (K == 1) return y;
    std::vector<int8_t> l(n);
    for (uint64_t i = 0; i < n; ++i) l[i] = cls[i] % 2 ? 1 : -1;
    return l;
  }
  // The store's non-empty columns in id order (the weight space's columns).
  std::vector<uint64_t> nonempty_columns() const {
    std::vector<uint64_t> c;
    for (uint64_t j = 0; j < m; ++j)
      for (uint64_t i = 0; i < n; ++i)
        if (X[i][j] != 0) {
          c.push_back(j);
          break;
        }
    return c;
  }
  std::unique_ptr<TiledMemoryStore> store(uint32_t tile_rows) const {
    return std::make_unique<TiledMemoryStore>(n, m, triplets, store_labels(), tile_rows);
  }

  // Coordinates d = i·K + k (binary d = i); valid excludes the multi-class (i, y_i).
  uint64_t coordinates() const { return n * K; }
  bool valid(uint64_t d) const { return K == 1 || d % K != cls[d / K]; }

  // ⟨a_d, w⟩ with w over all m columns (dense), K blocks.
  double a_dot(uint64_t d, const std::vector<double>& w) const {
    if (K == 1) {
      double s = 0;
      for (uint64_t j = 0; j < m; ++j) s += X[d][j] * w[j];
      return -y[d] * s;
    }
    const uint64_t i = d / K, k = d % K, c = cls[i];
    double s = 0;
    for (uint64_t j = 0; j < m; ++j) s += X[i][j] * (w[k * m + j] - w[c * m + j]);
    return s;
  }
  double a_norm(uint64_t d) const {
    double s = 0;
    const uint64_t i = K == 1 ? d : d / K;
    for (uint64_t j = 0; j < m; ++j) s += X[i][j] * X[i][j];
    return std::sqrt(K == 1 ? s : 2 * s);
  }
  // z(θ) = −(1/n) Σ_d θ_d a_d over all K·m weights.
  std::vector<double> z(const std::vector<double>& theta) const {
    std::vector<double> out(K * m, 0.0);
    for (uint64_t d = 0; d < coordinates(); ++d) {
      if (!valid(d) || theta[d] == 0) continue;
      const uint64_t i = K == 1 ? d : d / K;
      for (uint64_t j = 0; j < m; ++j) {
        if (X[i][j] == 0) continue;
        if (K == 1) out[j] += theta[d] * y[i] * X[i][j] / static_cast<double>(n);
        else {
          const uint64_t k = d % K, c = cls[i];
          out[k * m + j] -= theta[d] * X[i][j] / static_cast<double>(n);
          out[c * m + j] += theta[d] * X[i][j] / static_cast<double>(n);
        }
      }
    }
    return out;
  }
  double primal(const std::vector<double>& w, double alpha, double beta, double gamma) const {
    double loss = 0, sq = 0, l1 = 0;
    for (uint64_t d = 0; d < coordinates(); ++d)
      if (valid(d)) loss += smoothed_hinge(1 + a_dot(d, w), gamma);
    for (double v : w) sq += v * v, l1 += std::abs(v);
    return loss / static_cast<double>(n) + alpha / 2 * sq + beta * l1;
  }
  // D(θ) of (D) / (m-D) (a minimisation; −D(θ) ≤ min P).
  double dual(const std::vector<double>& theta, double alpha, double beta, double gamma) const {
    const auto zz = z(theta);
    double s = 0, t2 = 0, t1 = 0;
    for (double v : zz) s += soft_threshold(v, beta) * soft_threshold(v, beta);
    for (uint64_t d = 0; d < coordinates(); ++d)
      if (valid(d)) t2 += theta[d] * theta[d], t1 += theta[d];
    return s / (2 * alpha) + gamma / (2 * static_cast<double>(n)) * t2 - t1 / static_cast<double>(n);
  }
  // KKT-2: θ_d = clip((1 + ⟨a_d, w⟩)/γ, 0, 1).
  std::vector<double> theta_of(const std::vector<double>& w, double gamma) const {
    std::vector<double> t(coordinates(), 0.0);
    for (uint64_t d = 0; d < coordinates(); ++d)
      if (valid(d)) t[d] = std::clamp((1 + a_dot(d, w)) / gamma, 0.0, 1.0);
    return t;
  }
  // A weight vector over the store's non-empty columns (solver layout) spread to all m columns.
  std::vector<double> dense_w(const std::vector<double>& w_nonempty) const {
    const auto cols = nonempty_columns();
    std::vector<double> out(K * m, 0.0);
    for (uint32_t k = 0; k < K; ++k)
      for (size_t c = 0; c < cols.size(); ++c) out[k * m + cols[c]] = w_nonempty[k * cols.size() + c];
    return out;
  }
};

}  // namespace fgm::test
