// Test-only helpers for the exclusive-sparsity solvers: small dense problems
// and the optimality conditions of (7) and the objective of (10) evaluated
// from the dense matrix in long double — independent of the solvers' designs.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/memory_budget.h"
#include "solvers/exclusive/exclusive_groups.h"
#include "solvers/exclusive/fista_exclusive.h"

namespace fgm::test {

struct DenseProblem {
  size_t n = 0, p = 0;
  std::vector<double> x;  // row-major n × p
  std::vector<double> y;
  double at(size_t i, size_t j) const { return x[i * p + j]; }
};

// Gaussian X (a fraction `density` nonzero); y = ±1 from a planted sparse
// model (classification) or X·w* + noise (regression).
inline DenseProblem dense_problem(uint64_t seed, size_t n, size_t p, bool classification, double density = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> unif(0, 1);
  DenseProblem d;
  d.n = n, d.p = p;
  d.x.assign(n * p, 0.0);
  for (auto& e : d.x)
    if (unif(rng) < density) e = double(float(normal(rng)));
  std::vector<double> planted(p, 0.0);
  for (size_t j = 0; j < p; j += 3) planted[j] = normal(rng);
  d.y.resize(n);
  for (size_t i = 0; i < n; ++i) {
    double s = 0;
    for (size_t j = 0; j < p; ++j) s += d.at(i, j) * planted[j];
    d.y[i] = classification ? ((s + 0.5 * normal(rng)) >= 0 ? 1.0 : -1.0) : s + 0.1 * normal(rng);
  }
  return d;
}

// Disjoint groups of `size` consecutive columns (the last one shorter).
inline exclusive::ExclusiveGroups contiguous_groups(size_t p, size_t size, MemoryBudget& budget) {
  std::vector<std::vector<uint64_t>> groups;
  for (size_t j = 0; j < p; ++j) {
    if (j % size == 0) groups.emplace_back();
    groups.back().push_back(j);
  }
  return exclusive::make_groups(p, groups, budget);
}

// dense_problem's classification data with binary (kind 0), integer (1),
// tied (2: groups of three equal columns) or Gaussian (3) values.
inline DenseProblem valued_problem(int kind, uint64_t seed, size_t n, size_t p) {
  auto d = dense_problem(seed, n, p, true, 0.9);
  for (auto& x : d.x) {
    if (x == 0) continue;
    if (kind == 0) x = x > 0 ? 1.0 : 0.0;
    if (kind == 1) x = std::round(3 * x);
  }
  if (kind == 2)
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 1; j < p; ++j)
        if (j % 3 != 0) d.x[i * p + j] = d.x[i * p + j - 1];
  return d;
}

// valued_problem with about two thirds of the labels positive (every third
// row relabelled +1), so that a bias matters; `zero_row`: in the Gaussian
// kind, row 5 all zero (its dual variable is free of Ω*).
inline DenseProblem unbalanced_problem(int kind, uint64_t seed, size_t n, size_t p, bool zero_row = false) {
  auto d = valued_problem(kind, seed, n, p);
  for (size_t i = 0; i < n; i += 3) d.y[i] = 1.0;
  if (zero_row && kind == 3)
    for (size_t j = 0; j < p; ++j) d.x[5 * p + j] = 0.0;
  return d;
}

// Largest violation of the optimality conditions of (7), relative to
// ‖∇f(0)‖∞: with θ_k = λ Σ_{g∋k} ‖w_g‖₁, a nonzero w_k needs
// ∇f_k + θ_k·sgn(w_k) = 0, a zero one |∇f_k| ≤ θ_k.
// With a bias b (margins x_iᵀw + b), also its condition Σ_i ∂f/∂z_i = 0.
inline double kkt_violation(const DenseProblem& d, const exclusive::ExclusiveGroups& G, exclusive::ExclusiveLoss loss,
                            double lambda, const std::vector<double>& w, double bias = 0, bool with_bias = false) {
  long double bias_derivative = 0;
  auto gradient_at = [&](const std::vector<double>& v, long double b) {
    std::vector<long double> r(d.n), g(d.p, 0.0L);
    bias_derivative = 0;
    for (size_t i = 0; i < d.n; ++i) {
      long double z = b;
      for (size_t j = 0; j < d.p; ++j) z += (long double)d.at(i, j) * v[j];
      r[i] = loss == exclusive::ExclusiveLoss::kSquared ? z - d.y[i]
                                                        : -d.y[i] / (1.0L + std::exp((long double)d.y[i] * z));
      bias_derivative += r[i];
    }
    for (size_t i = 0; i < d.n; ++i)
      for (size_t j = 0; j < d.p; ++j) g[j] += r[i] * d.at(i, j);
    return g;
  };
  const auto g0 = gradient_at(std::vector<double>(d.p, 0.0), 0.0L);
  long double scale = 1e-300L;
  for (auto e : g0) scale = std::max(scale, std::fabs(e));
  const auto g = gradient_at(w, bias);
  std::vector<long double> group_l1(G.count(), 0.0L);
  for (uint64_t k = 0; k < G.count(); ++k)
    for (uint64_t q = G.member_ptr[k]; q < G.member_ptr[k + 1]; ++q) group_l1[k] += std::fabs((long double)w[G.members[q]]);
  long double worst = 0;
  for (size_t j = 0; j < d.p; ++j) {
    long double theta = 0;
    for (uint64_t q = G.membership_ptr[j]; q < G.membership_ptr[j + 1]; ++q) theta += lambda * group_l1[G.memberships[q]];
    const long double v = std::fabs(w[j]) > 1e-9 ? std::fabs(g[j] + theta * (w[j] > 0 ? 1 : -1))
                                                 : std::max(0.0L, std::fabs(g[j]) - theta);
    worst = std::max(worst, v / scale);
  }
  if (with_bias) worst = std::max(worst, std::fabs(bias_derivative) / scale);
  return double(worst);
}

// (10) at w from the dense matrix, in long double: the hinge (E-SVM) or the
// squared hinge summed over the rows, + (α/2)‖w‖² + (λ/2)Σ_g ‖w_g‖₁².
inline double esvm_objective(const DenseProblem& d, const exclusive::ExclusiveGroups& G, double lambda, double ridge,
                             const std::vector<double>& w, double bias = 0,
                             exclusive::ExclusiveLoss loss = exclusive::ExclusiveLoss::kHinge) {
  long double total = 0, ww = 0, e = 0;
  for (size_t i = 0; i < d.n; ++i) {
    long double z = bias;
    for (size_t j = 0; j < d.p; ++j) z += (long double)d.at(i, j) * w[j];
    const long double slack = std::max(0.0L, 1.0L - d.y[i] * z);
    total += loss == exclusive::ExclusiveLoss::kSquaredHinge ? slack * slack : slack;
  }
  for (double v : w) ww += (long double)v * v;
  for (uint64_t k = 0; k < G.count(); ++k) {
    long double s = 0;
    for (uint64_t q = G.member_ptr[k]; q < G.member_ptr[k + 1]; ++q) s += std::fabs((long double)w[G.members[q]]);
    e += s * s;
  }
  return double(total + 0.5L * ridge * ww + 0.5L * lambda * e);
}

}  // namespace fgm::test
