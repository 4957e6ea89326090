// MSLR's subproblem (solvers/mslr/): the Newton–bisection step against the
// paper's Fig. 2 check values (ERRATA 001) and an independent bisection; the
// overflow-safe softmax weights; and the smoothed coordinate descent's
// optimum against an independent solver of the same minimax problem: the
// minimax theorem turns min_α max_t f_t into min over μ in the simplex of
// Φ(μ) = min_v ½Σ_j d̄_j v_j² + C Σ_i ln(1 + exp(−y_i Σ_j d̄_j v_j x_ij))
// (d̄ = Σ_t μ_t d^t), which the oracle solves by golden-section search over μ
// (Φ is convex in μ) around a dense long-double Newton solve in v. The primal
// proximal Newton solve (solvers/mslr/latent_newton.h) against the same oracle.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "cache/selected_features.h"
#include "core/communicator.h"
#include "core/memory_budget.h"
#include "solvers/apg_reduction.h"
#include "solvers/mslr/latent_newton.h"
#include "solvers/mslr/newton_bisection.h"
#include "solvers/mslr/smoothed_minimax.h"

using namespace fgm;
using namespace fgm::mslr;

namespace {

using LD = long double;

// p'(z) written out independently (long double, direct normalisation after a max shift).
LD reference_gradient(LD c1, LD c2, const std::vector<double>& a, const std::vector<double>& b,
                      const std::vector<double>& e, LD q, LD z) {
  std::vector<LD> v(a.size());
  LD top = -INFINITY;
  for (size_t t = 0; t < a.size(); ++t) {
    v[t] = q * (e[t] + a[t] * z * z / 2 + b[t] * z);
    top = std::max(top, v[t]);
  }
  LD num = 0, den = 0;
  for (size_t t = 0; t < a.size(); ++t) {
    LD w = std::exp(v[t] - top);
    num += w * (a[t] * z + b[t]);
    den += w;
  }
  return std::log((c1 + z) / (c2 - z)) + num / den;
}

// The root of p' on (−c1, c2) by 200 bisection steps (p' increases).
LD reference_root(LD c1, LD c2, const std::vector<double>& a, const std::vector<double>& b,
                  const std::vector<double>& e, LD q) {
  LD lo = -c1, hi = c2;
  for (int k = 0; k < 200; ++k) {
    LD mid = (lo + hi) / 2;
    if (mid <= -c1 || mid >= c2) break;
    if (reference_gradient(c1, c2, a, b, e, q, mid) > 0) hi = mid;
    else lo = mid;
  }
  return (lo + hi) / 2;
}

NewtonBisectionResult run_step(double c1, double c2, const std::vector<double>& a, const std::vector<double>& b,
                               const std::vector<double>& e, double q) {
  CoordinateProblem p;
  p.c1 = c1;
  p.c2 = c2;
  p.a = a.data();
  p.b = b.data();
  p.e = e.data();
  p.T = a.size();
  p.q = q;
  std::vector<double> scratch(2 * a.size());
  return newton_bisection(p, 1e-12, 200, scratch.data());
}

}  // namespace

TEST_CASE("Newton-bisection reproduces the Fig. 2 check values of ERRATA 001", "[solvers][mslr][newton]") {
  const std::vector<double> a{0.015, 0.040}, b{-2.433, 1.380};
  const std::vector<double> e{2406.148 / 2, 2403.345 / 2};  // ½‖w^t‖²: exp(q e_t) overflows at q = 100
  for (auto [q, expected] : {std::pair{10.0, 0.38862}, std::pair{100.0, 0.36951}}) {
    NewtonBisectionResult r = run_step(0.09, 0.99, a, b, e, q);
    const double z = r.z1 - 0.09;
    CHECK(z == Approx(expected).margin(5e-6));
    CHECK(r.z1 + r.z2 == Approx(1.08).epsilon(1e-15));
    CHECK(r.z1 > 0);
    CHECK(r.z2 > 0);
  }
}

TEST_CASE("Newton-bisection matches an independent bisection on random, tied and extreme steps",
          "[solvers][mslr][newton]") {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t T = 1 + trial % 4;
    const double C = trial % 3 == 0 ? 0.5 : 10.0;
    double c1 = C * unif(rng);
    if (trial % 7 == 0) c1 = C * 1e-9;          // α_i at the lower edge
    if (trial % 11 == 0) c1 = C * (1 - 1e-9);   // and at the upper edge
    const double c2 = C - c1;
    std::vector<double> a(T), b(T), e(T);
    for (size_t t = 0; t < T; ++t) {
      a[t] = trial % 5 == 0 ? 0.0 : std::fabs(normal(rng)) * 3;
      b[t] = normal(rng) * (trial % 2 ? 30 : 1);
      e[t] = 1000 + std::round(normal(rng) * 2);  // integer: ties between constraints
    }
    if (T > 1 && trial % 6 == 0) {  // two identical constraints
      a[1] = a[0];
      b[1] = b[0];
      e[1] = e[0];
    }
    const double q = std::pow(10.0, -2 + 4 * unif(rng));
    NewtonBisectionResult r = run_step(c1, c2, a, b, e, q);
    LD z_ref = reference_root(c1, c2, a, b, e, q);
    INFO("trial " << trial << " q " << q << " c1 " << c1);
    CHECK(r.z1 > 0);
    CHECK(r.z2 > 0);
    CHECK(double(r.z1) == Approx(double(c1 + z_ref)).epsilon(1e-7).margin(1e-12 * C));
    CHECK(double(r.z2) == Approx(double(c2 - z_ref)).epsilon(1e-7).margin(1e-12 * C));
  }
}

TEST_CASE("softmax weights stay finite with norms in the thousands and q up to 100", "[solvers][mslr][softmax]") {
  const std::vector<double> v{2406.148 / 2, 2403.345 / 2, 5000.0, 4999.0};
  std::vector<double> lambda(4);
  for (double q : {0.01, 1.0, 10.0, 100.0, 1e4}) {
    const double lse = softmax_weights(v.data(), v.size(), q, lambda.data());
    double sum = 0;
    for (double l : lambda) {
      CHECK(std::isfinite(l));
      CHECK(l >= 0);
      sum += l;
    }
    CHECK(sum == Approx(1.0).epsilon(1e-14));
    CHECK(std::isfinite(lse));
    // (1/q) ln Σ exp(q v) lies in [max v, max v + ln(T)/q].
    CHECK(lse >= 5000.0);
    CHECK(lse <= 5000.0 + std::log(4.0) / q + 1e-9);
  }
  softmax_weights(v.data(), v.size(), 100.0, lambda.data());
  CHECK(lambda[2] == Approx(1.0 / (1.0 + std::exp(-100.0))).epsilon(1e-14));
}

namespace {

struct DenseProblem {
  size_t n = 0, m = 0;
  std::vector<double> x;  // n × m, float-representable values
  std::vector<int8_t> y;
  std::vector<std::vector<uint32_t>> constraints;
  double at(size_t i, size_t j) const { return x[i * m + j]; }
};

enum class Kind { kGaussian, kBinary, kInteger, kTied };

DenseProblem make_problem(uint64_t seed, Kind kind, size_t n, size_t m, size_t T, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  DenseProblem p;
  p.n = n;
  p.m = m;
  p.x.assign(n * m, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < m; ++j) {
      if (unif(rng) > 0.6) continue;
      double v = 0;
      switch (kind) {
        case Kind::kGaussian: v = float(normal(rng) * scale); break;
        case Kind::kBinary: v = 1.0; break;
        case Kind::kInteger: v = std::round(normal(rng) * 2); break;
        case Kind::kTied: v = std::round(normal(rng)); break;
      }
      p.x[i * m + j] = v;
    }
  if (kind == Kind::kTied) {  // duplicate rows and a duplicate column
    for (size_t i = 1; i < n; i += 3)
      for (size_t j = 0; j < m; ++j) p.x[i * m + j] = p.x[(i - 1) * m + j];
    for (size_t i = 0; i < n; ++i) p.x[i * m + m - 1] = p.x[i * m + 0];
  }
  std::vector<double> planted(m);
  for (auto& w : planted) w = normal(rng);
  p.y.resize(n);
  for (size_t i = 0; i < n; ++i) {
    double s = 0.5 * normal(rng);
    for (size_t j = 0; j < m; ++j) s += p.at(i, j) * planted[j];
    p.y[i] = s >= 0 ? 1 : -1;
  }
  // T overlapping windows of consecutive columns (wrapping around).
  const size_t r = std::max<size_t>(1, m / T + 1);
  for (size_t t = 0; t < T; ++t) {
    std::vector<uint32_t> d;
    for (size_t k = 0; k < r; ++k) d.push_back(uint32_t((t * (m / T) + k) % m));
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
    p.constraints.push_back(d);
  }
  return p;
}

SelectedRows rows_of(const DenseProblem& p, MemoryBudget& budget, SelectedFeatureCache& cache) {
  cache.begin_batch();
  for (size_t j = 0; j < p.m; ++j) {
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
  return SelectedRows::from_cache(cache, budget);
}

LD softplus_ld(LD z) { return z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z)); }
LD sigmoid_ld(LD z) { return z >= 0 ? 1 / (1 + std::exp(-z)) : std::exp(z) / (1 + std::exp(z)); }

// Φ(μ) by damped Newton in v over the features with d̄_j > 0; also returns the
// decision values at the optimum (for α* = C σ(−y m)).
LD weighted_lr(const DenseProblem& p, double C, const std::vector<LD>& mu, std::vector<LD>* decision) {
  std::vector<LD> dbar(p.m, 0);
  for (size_t t = 0; t < mu.size(); ++t)
    for (uint32_t k : p.constraints[t]) dbar[k] += mu[t];
  std::vector<size_t> active;
  for (size_t j = 0; j < p.m; ++j)
    if (dbar[j] > 1e-15) active.push_back(j);
  const size_t K = active.size();
  std::vector<LD> v(K, 0);
  auto objective = [&](const std::vector<LD>& vv, std::vector<LD>* dec) {
    LD f = 0;
    for (size_t a = 0; a < K; ++a) f += dbar[active[a]] * vv[a] * vv[a] / 2;
    if (dec) dec->assign(p.n, 0);
    for (size_t i = 0; i < p.n; ++i) {
      LD d = 0;
      for (size_t a = 0; a < K; ++a) d += dbar[active[a]] * vv[a] * p.at(i, active[a]);
      if (dec) (*dec)[i] = d;
      f += C * softplus_ld(-p.y[i] * d);
    }
    return f;
  };
  for (int it = 0; it < 40; ++it) {
    std::vector<LD> dec;
    const LD f = objective(v, &dec);
    std::vector<LD> g(K), H(K * K, 0);
    for (size_t a = 0; a < K; ++a) {
      g[a] = dbar[active[a]] * v[a];
      H[a * K + a] = dbar[active[a]];
    }
    for (size_t i = 0; i < p.n; ++i) {
      const LD s = sigmoid_ld(-p.y[i] * dec[i]);
      for (size_t a = 0; a < K; ++a) {
        const LD xa = dbar[active[a]] * p.at(i, active[a]);
        g[a] -= C * p.y[i] * s * xa;
        for (size_t b = 0; b < K; ++b) H[a * K + b] += C * s * (1 - s) * xa * dbar[active[b]] * p.at(i, active[b]);
      }
    }
    LD gnorm = 0;
    for (LD gi : g) gnorm = std::max(gnorm, std::fabs(gi));
    if (gnorm < 1e-12L) break;
    // Solve H δ = g by Gaussian elimination (H is positive definite).
    std::vector<LD> A = H, rhs = g;
    for (size_t c = 0; c < K; ++c) {
      for (size_t r = c + 1; r < K; ++r) {
        const LD f2 = A[r * K + c] / A[c * K + c];
        for (size_t k = c; k < K; ++k) A[r * K + k] -= f2 * A[c * K + k];
        rhs[r] -= f2 * rhs[c];
      }
    }
    std::vector<LD> delta(K);
    for (size_t c = K; c-- > 0;) {
      LD s = rhs[c];
      for (size_t k = c + 1; k < K; ++k) s -= A[c * K + k] * delta[k];
      delta[c] = s / A[c * K + c];
    }
    LD step = 1;
    std::vector<LD> trial(K);
    bool decreased = false;
    for (int ls = 0; ls < 60 && !decreased; ++ls, step /= 2) {
      for (size_t a = 0; a < K; ++a) trial[a] = v[a] - step * delta[a];
      decreased = objective(trial, nullptr) <= f;
    }
    if (!decreased) break;  // at the optimum to rounding
    v = trial;
  }
  return objective(v, decision);
}

// min over the simplex of Φ by nested golden-section search (T ≤ 3).
LD golden(const std::function<LD(LD)>& f, LD lo, LD hi) {
  const LD r = (std::sqrt(5.0L) - 1) / 2;
  LD a = lo, b = hi, c = b - r * (b - a), d = a + r * (b - a);
  LD fc = f(c), fd = f(d);
  for (int k = 0; k < 48; ++k) {
    if (fc < fd) {
      b = d; d = c; fd = fc; c = b - r * (b - a); fc = f(c);
    } else {
      a = c; c = d; fc = fd; d = a + r * (b - a); fd = f(d);
    }
  }
  return (a + b) / 2;
}

std::vector<LD> oracle_weights(const DenseProblem& p, double C) {
  const size_t T = p.constraints.size();
  auto phi = [&](const std::vector<LD>& mu) { return weighted_lr(p, C, mu, nullptr); };
  if (T == 1) return {1.0L};
  if (T == 2) {
    LD u = golden([&](LD u) { return phi({u, 1 - u}); }, 0, 1);
    return {u, 1 - u};
  }
  REQUIRE(T == 3);
  auto inner = [&](LD u) {
    LD v = golden([&](LD v) { return phi({u, (1 - u) * v, (1 - u) * (1 - v)}); }, 0, 1);
    return std::pair{v, phi({u, (1 - u) * v, (1 - u) * (1 - v)})};
  };
  LD u = golden([&](LD u) { return inner(u).second; }, 0, 1);
  LD v = inner(u).first;
  return {u, (1 - u) * v, (1 - u) * (1 - v)};
}

}  // namespace

TEST_CASE("smoothed coordinate descent reaches the minimax optimum of an independent solver",
          "[solvers][mslr][oracle]") {
  const double C = 10.0;
  int seed = 0;
  for (Kind kind : {Kind::kGaussian, Kind::kBinary, Kind::kInteger, Kind::kTied}) {
    for (size_t T : {size_t(1), size_t(2), size_t(3)}) {
      ++seed;
      DenseProblem p = make_problem(100 + seed, kind, 36, 6, T, 0.7);
      MemoryBudget budget(64 << 20);
      SelectedFeatureCache cache(budget, p.n);
      SelectedRows rows = rows_of(p, budget, cache);
      std::vector<double> alpha(p.n, std::min(1.0, C / 2)), beta(p.n);
      for (size_t i = 0; i < p.n; ++i) beta[i] = C - alpha[i];
      MinimaxOptions options;
      options.C = C;
      options.tolerance = 1e-6;
      options.gradient_tolerance = 1e-7;
      options.q_max = 1e8;
      options.max_sweeps = 300;
      options.shuffle = seed % 2 == 0;  // both row orders reach the same optimum
      MinimaxResult r = solve_smoothed_minimax(rows, p.y.data(), p.constraints, options, alpha, beta);
      INFO("kind " << int(kind) << " T " << T << " shuffle " << options.shuffle << " gap " << r.relative_gap << " q " << r.q);
      CHECK(r.converged);
      const std::vector<LD> mu = oracle_weights(p, C);
      std::vector<LD> decision;
      const LD phi_star = weighted_lr(p, C, mu, &decision);
      // D(α) ≤ Φ* ≤ P(w): both ends of the certificate against the oracle's value.
      CHECK(r.dual <= double(phi_star) * (1 + 1e-9));
      CHECK(r.primal >= double(phi_star) * (1 - 1e-9));
      CHECK(r.primal == Approx(double(phi_star)).epsilon(1e-6));
      // α is unique (max_t f_t is strongly convex, modulus 4/C): α*_i = C σ(−y_i m_i), and
      // ‖α − α*‖² ≤ (C/2)·(max_t f_t(α) − min) ≤ (C/2)(P − D).
      const double alpha_radius = std::sqrt(C / 2 * std::max(0.0, r.primal - r.dual));
      for (size_t i = 0; i < p.n; ++i) {
        const double expected = double(C * sigmoid_ld(-p.y[i] * decision[i]));
        CHECK(alpha[i] == Approx(expected).margin(alpha_radius + 1e-9));
        CHECK(alpha[i] + beta[i] == Approx(C).epsilon(1e-12));
        CHECK(alpha[i] > 0);
        CHECK(beta[i] > 0);
      }
    }
  }
}

TEST_CASE("the minimax solve stays finite with ‖w‖² in the thousands and q up to 100",
          "[solvers][mslr][softmax]") {
  // Large values: ½‖w^t‖² = ½Σ c_j² is in the thousands after the first sweep.
  DenseProblem p = make_problem(7, Kind::kGaussian, 60, 8, 3, 6.0);
  MemoryBudget budget(64 << 20);
  SelectedFeatureCache cache(budget, p.n);
  SelectedRows rows = rows_of(p, budget, cache);
  const double C = 10.0;
  std::vector<double> alpha(p.n, 1.0), beta(p.n, 9.0);
  MinimaxOptions options;
  options.C = C;
  options.tolerance = 0;  // run every stage up to q_max
  options.q_max = 100;
  options.max_sweeps = 20;
  options.stall_sweeps = 100000;  // the stages up to q = 100 are the point here
  MinimaxResult r = solve_smoothed_minimax(rows, p.y.data(), p.constraints, options, alpha, beta);
  double largest = 0;
  for (double e : r.half_norms) largest = std::max(largest, 2 * e);
  INFO("largest ‖w‖² " << largest << " q " << r.q);
  CHECK(r.q > 50);
  CHECK(r.q <= 100);
  for (double m : r.mu) CHECK(std::isfinite(m));
  CHECK(std::isfinite(r.primal));
  CHECK(std::isfinite(r.dual));
  CHECK(r.dual <= r.primal);
  for (size_t i = 0; i < p.n; ++i) {
    CHECK(alpha[i] > 0);
    CHECK(beta[i] > 0);
  }
  // The initial α gave ‖w‖² in the thousands: the case ERRATA warns about.
  std::vector<double> c(p.m, 0);
  for (size_t i = 0; i < p.n; ++i)
    for (size_t j = 0; j < p.m; ++j) c[j] += 1.0 * p.y[i] * p.at(i, j);
  double initial = 0;
  for (double cj : c) initial += cj * cj;
  CHECK(initial > 1000);
}

// The news20 failure (iterations 4, 5, 10 of the path): a stage that ends at
// max_sweeps far from the smoothed optimum must not raise q, or the stiffer
// steps never bring max_t ½‖w^t‖² down (2800 sweeps to q_max, gap 1.6).
// Here stages of 10 sweeps from a start whose norms are in the thousands.
TEST_CASE("q is raised only after the smoothed problem is solved: short stages still reach the oracle optimum",
          "[solvers][mslr][oracle]") {
  const double C = 10.0;
  for (size_t T : {size_t(2)}) {  // T = 3 of this data stalls at q ≈ 59, gap 2.5·10⁻³ (bench/README)
    DenseProblem p = make_problem(40 + T, Kind::kGaussian, 60, 8, T, 6.0);
    MemoryBudget budget(64 << 20);
    SelectedFeatureCache cache(budget, p.n);
    SelectedRows rows = rows_of(p, budget, cache);
    std::vector<double> alpha(p.n, 1.0), beta(p.n, C - 1.0);
    MinimaxOptions options;
    options.C = C;
    options.max_sweeps = 10;  // default tolerance 10⁻³ and q_max
    MinimaxResult r = solve_smoothed_minimax(rows, p.y.data(), p.constraints, options, alpha, beta);
    const LD phi_star = weighted_lr(p, C, oracle_weights(p, C), nullptr);
    INFO("T " << T << " gap " << r.relative_gap << " q " << r.q << " sweeps " << r.sweeps << " oracle "
              << double(phi_star) << " primal " << r.primal << " dual " << r.dual);
    CHECK(r.converged);
    CHECK(r.dual <= double(phi_star) * (1 + 1e-9));
    CHECK(r.primal >= double(phi_star) * (1 - 1e-9));
    CHECK(r.primal <= double(phi_star) * (1 + options.tolerance));
  }
}

TEST_CASE("a solve whose gap stops shrinking gives up before q_max and keeps its best bounds",
          "[solvers][mslr]") {
  DenseProblem p = make_problem(9, Kind::kGaussian, 60, 8, 3, 6.0);
  MemoryBudget budget(64 << 20);
  SelectedFeatureCache cache(budget, p.n);
  SelectedRows rows = rows_of(p, budget, cache);
  const double C = 10.0;
  std::vector<double> alpha(p.n, 1.0), beta(p.n, C - 1.0);
  MinimaxOptions options;
  options.C = C;
  options.tolerance = 0;  // unreachable: only the stall test or q_max ends it
  options.q_max = 1e12;
  options.stall_sweeps = 1000;
  MinimaxResult r = solve_smoothed_minimax(rows, p.y.data(), p.constraints, options, alpha, beta);
  INFO("q " << r.q << " stages " << r.stages << " gap " << r.relative_gap);
  CHECK_FALSE(r.converged);
  CHECK(r.q * options.q_factor <= options.q_max);  // stopped by the stall test
  CHECK(r.relative_gap < 1e-6);                   // after having solved the problem
  CHECK(r.dual <= r.primal);
}

TEST_CASE("the dual entropy stays finite when a coordinate has rounded to 0 or C", "[solvers][mslr]") {
  // x ln x → 0: H(α) with α = (0, C, C/2) equals the C/2 row's 2·(C/2) ln 2 alone.
  const double C = 10.0;
  const int8_t labels[3] = {1, -1, 1};
  const std::vector<double> alpha = {0.0, C, C / 2}, beta = {C, 0.0, C / 2};
  CHECK(dual_entropy(labels, alpha, beta, C) == Approx(C * std::log(2.0)).epsilon(1e-14));
}

namespace {

// The rows of `p` split into `partitions` consecutive parts (as a
// partitioned store splits them), each with its rows of every column.
struct PartitionedProblem {
  std::vector<DenseProblem> parts;
  std::vector<std::unique_ptr<SelectedFeatureCache>> caches;
  std::vector<SelectedRows> rows;
  std::vector<std::vector<double>> alpha, beta;
};

PartitionedProblem split_rows(const DenseProblem& p, uint32_t partitions, double C, MemoryBudget& budget) {
  PartitionedProblem out;
  for (uint32_t k = 0; k < partitions; ++k) {
    const size_t begin = k * p.n / partitions, end = (k + 1) * p.n / partitions;
    DenseProblem part = p;
    part.n = end - begin;
    part.x.assign(p.x.begin() + begin * p.m, p.x.begin() + end * p.m);
    part.y.assign(p.y.begin() + begin, p.y.begin() + end);
    out.caches.push_back(std::make_unique<SelectedFeatureCache>(budget, part.n));
    out.rows.push_back(rows_of(part, budget, *out.caches.back()));
    out.alpha.emplace_back(part.n, std::min(1.0, C / 2));
    out.beta.emplace_back(part.n, C - std::min(1.0, C / 2));
    out.parts.push_back(std::move(part));
  }
  return out;
}

MinimaxResult solve_partitioned(PartitionedProblem& pp, uint32_t partitions, const DenseProblem& p,
                                const MinimaxOptions& options) {
  SingleRankCommunicator comm;
  PartitionTreeRowSums reduction(comm, partitions, 0);
  std::vector<MinimaxPart> parts;
  for (uint32_t k = 0; k < partitions; ++k)
    parts.push_back({&pp.rows[k], pp.parts[k].y.data(), &pp.alpha[k], &pp.beta[k]});
  return solve_smoothed_minimax(parts, {partitions, 0}, reduction, p.constraints, options);
}

}  // namespace

// The data-parallel form (CoCoA+ rounds over row partitions, σ' = P; header
// of solvers/mslr/smoothed_minimax.h) against the same independent oracle as
// the single-store solve: the certificate brackets the oracle's minimax value,
// and α is the unique optimum. P = 1 is the single-store solve bit for bit.
TEST_CASE("the minimax solve over row partitions reaches the oracle optimum; one partition is the single-store solve",
          "[solvers][mslr][oracle][partitions]") {
  const double C = 10.0;
  int seed = 0;
  for (Kind kind : {Kind::kGaussian, Kind::kBinary, Kind::kInteger, Kind::kTied}) {
    for (size_t T : {size_t(1), size_t(3)}) {
      ++seed;
      DenseProblem p = make_problem(300 + seed, kind, 40, 6, T, 0.7);
      MinimaxOptions options;
      options.C = C;
      options.tolerance = 1e-6;
      options.gradient_tolerance = 1e-7;
      options.q_max = 1e8;
      options.max_sweeps = 300;
      options.stall_sweeps = 100000;
      options.shuffle = seed % 2 == 0;
      const std::vector<LD> mu = oracle_weights(p, C);
      std::vector<LD> decision;
      const LD phi_star = weighted_lr(p, C, mu, &decision);
      for (uint32_t partitions : {1u, 4u}) {
        MemoryBudget budget(64 << 20);
        PartitionedProblem pp = split_rows(p, partitions, C, budget);
        const MinimaxResult r = solve_partitioned(pp, partitions, p, options);
        INFO("kind " << int(kind) << " T " << T << " P " << partitions << " gap " << r.relative_gap << " q " << r.q
                     << " rounds " << r.sweeps);
        CHECK(r.converged);
        CHECK(r.dual <= double(phi_star) * (1 + 1e-9));
        CHECK(r.primal >= double(phi_star) * (1 - 1e-9));
        CHECK(r.primal == Approx(double(phi_star)).epsilon(1e-6));
        const double alpha_radius = std::sqrt(C / 2 * std::max(0.0, r.primal - r.dual));
        size_t i = 0;
        for (uint32_t k = 0; k < partitions; ++k)
          for (size_t row = 0; row < pp.parts[k].n; ++row, ++i) {
            CHECK(pp.alpha[k][row] == Approx(double(C * sigmoid_ld(-p.y[i] * decision[i]))).margin(alpha_radius + 1e-9));
            CHECK(pp.alpha[k][row] > 0);
            CHECK(pp.beta[k][row] > 0);
          }
        if (partitions == 1) {  // the single-store entry point on the same rows: the same bits
          MemoryBudget single_budget(64 << 20);
          SelectedFeatureCache cache(single_budget, p.n);
          SelectedRows rows = rows_of(p, single_budget, cache);
          std::vector<double> alpha(p.n, 1.0), beta(p.n, C - 1.0);
          const MinimaxResult s = solve_smoothed_minimax(rows, p.y.data(), p.constraints, options, alpha, beta);
          CHECK(std::memcmp(&s.primal, &r.primal, sizeof(double)) == 0);
          CHECK(std::memcmp(&s.dual, &r.dual, sizeof(double)) == 0);
          CHECK(s.weights == r.weights);
          CHECK(alpha == pp.alpha[0]);
          CHECK(s.sweeps == r.sweeps);
        }
      }
    }
  }
}

namespace {

// The columns of `p` as one cache (the selected columns of a run).
std::unique_ptr<SelectedFeatureCache> columns_of(const DenseProblem& p, MemoryBudget& budget) {
  auto cache = std::make_unique<SelectedFeatureCache>(budget, p.n);
  rows_of(p, budget, *cache);
  return cache;
}

// w'x_i of the model the solver returns (weights per column).
std::vector<double> model_decisions(const DenseProblem& p, const std::vector<double>& weights) {
  std::vector<double> d(p.n, 0.0);
  for (size_t i = 0; i < p.n; ++i)
    for (size_t j = 0; j < p.m; ++j) d[i] += weights[j] * p.at(i, j);
  return d;
}

struct NewtonRun {
  MinimaxResult result;
  std::vector<double> alpha, beta;
};

NewtonRun newton_solve(const DenseProblem& p, double C, double tolerance, const std::vector<double>& warm_mu = {},
                       const std::vector<double>& alpha0 = {}, int max_iterations = 500) {
  MemoryBudget budget(64 << 20);
  auto cache = columns_of(p, budget);
  NewtonRun run;
  run.alpha = alpha0.empty() ? std::vector<double>(p.n, std::min(1.0, C / 2)) : alpha0;
  run.beta.resize(p.n);
  for (size_t i = 0; i < p.n; ++i) run.beta[i] = C - run.alpha[i];
  MinimaxOptions options;
  options.C = C;
  options.tolerance = tolerance;
  LatentNewtonOptions newton;
  newton.max_iterations = max_iterations;
  LocalRowSums one_process;
  run.result = solve_minimax_newton({{cache.get(), p.y.data(), &run.alpha, &run.beta}}, one_process, p.constraints,
                                    options, newton, warm_mu, budget);
  return run;
}

// The certificate, α, and the model's decision values against the oracle.
void check_against_oracle(const DenseProblem& p, double C, const NewtonRun& run, double tolerance) {
  const MinimaxResult& r = run.result;
  const std::vector<LD> mu = oracle_weights(p, C);
  std::vector<LD> decision;
  const LD phi_star = weighted_lr(p, C, mu, &decision);
  INFO("gap " << r.relative_gap << " steps " << r.newton_steps << " oracle " << double(phi_star));
  CHECK(r.converged);
  CHECK(r.relative_gap <= tolerance);
  CHECK(r.dual <= double(phi_star) * (1 + 1e-9));
  CHECK(r.primal >= double(phi_star) * (1 - 1e-9));
  CHECK(r.primal == Approx(double(phi_star)).epsilon(2 * tolerance + 1e-9));
  // α*_i = C σ(−y_i m_i) is unique; ‖α − α*‖² ≤ (C/2)(P − D) (strong convexity, modulus 4/C).
  const double alpha_radius = std::sqrt(C / 2 * std::max(0.0, r.primal - r.dual));
  const std::vector<double> d = model_decisions(p, r.weights);
  for (size_t i = 0; i < p.n; ++i) {
    const double expected = double(C * sigmoid_ld(-p.y[i] * decision[i]));
    CHECK(run.alpha[i] == Approx(expected).margin(alpha_radius + 1e-9));
    CHECK(run.alpha[i] + run.beta[i] == Approx(C).epsilon(1e-12));
    CHECK(run.alpha[i] > 0);
    CHECK(run.beta[i] > 0);
    if (tolerance <= 1e-7)
      CHECK(d[i] == Approx(double(decision[i])).margin(1e-3 * (1 + std::fabs(double(decision[i])))));
  }
  double mu_sum = 0;
  for (double m : r.mu) {
    CHECK(m >= 0);
    mu_sum += m;
  }
  CHECK(mu_sum == Approx(1.0).epsilon(1e-12));
}

}  // namespace

TEST_CASE("the primal Newton solve reaches the minimax optimum of the independent oracle",
          "[solvers][mslr][oracle][latent_newton]") {
  const double C = 10.0;
  int seed = 0;
  for (Kind kind : {Kind::kGaussian, Kind::kBinary, Kind::kInteger, Kind::kTied}) {
    for (size_t T : {size_t(1), size_t(2), size_t(3)}) {
      ++seed;
      const DenseProblem p = make_problem(100 + seed, kind, 36, 6, T, 0.7);
      for (double tolerance : {1e-3, 1e-8}) {
        INFO("kind " << int(kind) << " T " << T << " tolerance " << tolerance);
        check_against_oracle(p, C, newton_solve(p, C, tolerance), tolerance);
      }
    }
  }
  SECTION("two identical constraints and a constraint inside another (ties in μ)") {
    DenseProblem p = make_problem(77, Kind::kTied, 40, 6, 2, 1.0);
    p.constraints = {{0, 1, 2}, {0, 1, 2}, {1, 2}};
    // The oracle handles T ≤ 3: {0,1,2} twice and its subset {1,2}.
    check_against_oracle(p, C, newton_solve(p, C, 1e-8), 1e-8);
  }
  SECTION("C below 1 and large margins: α stays strictly inside (0, C)") {
    const DenseProblem p = make_problem(91, Kind::kGaussian, 36, 6, 2, 40.0);
    check_against_oracle(p, 0.5, newton_solve(p, 0.5, 1e-8), 1e-8);
  }
}

TEST_CASE("the primal Newton solve from a warm start reaches the same optimum as from zero",
          "[solvers][mslr][oracle][latent_newton]") {
  const double C = 10.0;
  int seed = 0;
  for (Kind kind : {Kind::kGaussian, Kind::kBinary, Kind::kInteger, Kind::kTied}) {
    ++seed;
    // The cutting-plane order: solve over d^1, d^2, then over d^1..d^3 from that α and μ.
    const DenseProblem p3 = make_problem(200 + seed, kind, 40, 6, 3, 0.7);
    DenseProblem p2 = p3;
    p2.constraints.pop_back();
    const NewtonRun first = newton_solve(p2, C, 1e-6);
    REQUIRE(first.result.converged);
    const NewtonRun warm = newton_solve(p3, C, 1e-8, first.result.mu, first.alpha);
    const NewtonRun cold = newton_solve(p3, C, 1e-8);
    INFO("kind " << int(kind) << " warm steps " << warm.result.newton_steps << " cold " << cold.result.newton_steps);
    check_against_oracle(p3, C, warm, 1e-8);
    CHECK(warm.result.primal == Approx(cold.result.primal).epsilon(3e-8));
  }
}

TEST_CASE("a primal Newton solve stopped by its step limit is not called converged",
          "[solvers][mslr][latent_newton]") {
  const DenseProblem p = make_problem(5, Kind::kGaussian, 60, 6, 3, 2.0);
  const NewtonRun run = newton_solve(p, 10.0, 1e-14, {}, {}, 1);
  INFO("gap " << run.result.relative_gap);
  CHECK(run.result.newton_steps <= 1);
  CHECK(run.result.relative_gap > 1e-14);
  CHECK_FALSE(run.result.converged);
  CHECK(run.result.dual <= run.result.primal);
}

TEST_CASE("the primal Newton solve over row partitions: the oracle optimum; one partition is the single-store solve",
          "[solvers][mslr][oracle][partitions][latent_newton]") {
  const double C = 10.0;
  int seed = 0;
  for (Kind kind : {Kind::kGaussian, Kind::kBinary, Kind::kInteger, Kind::kTied}) {
    ++seed;
    const DenseProblem p = make_problem(300 + seed, kind, 40, 6, 3, 0.7);
    const NewtonRun single = newton_solve(p, C, 1e-8);
    for (uint32_t partitions : {1u, 2u, 4u}) {
      MemoryBudget budget(64 << 20);
      PartitionedProblem pp = split_rows(p, partitions, C, budget);
      SingleRankCommunicator comm;
      PartitionTreeRowSums reduction(comm, partitions, 0);
      std::vector<LatentPart> parts;
      for (uint32_t k = 0; k < partitions; ++k)
        parts.push_back({pp.caches[k].get(), pp.parts[k].y.data(), &pp.alpha[k], &pp.beta[k]});
      MinimaxOptions options;
      options.C = C;
      options.tolerance = 1e-8;
      NewtonRun run;
      run.result = solve_minimax_newton(parts, reduction, p.constraints, options, {}, {}, budget);
      for (uint32_t k = 0; k < partitions; ++k) {
        run.alpha.insert(run.alpha.end(), pp.alpha[k].begin(), pp.alpha[k].end());
        run.beta.insert(run.beta.end(), pp.beta[k].begin(), pp.beta[k].end());
      }
      INFO("kind " << int(kind) << " P " << partitions);
      check_against_oracle(p, C, run, 1e-8);
      if (partitions == 1) {  // the single-store call on the same rows: the same bits
        CHECK(std::memcmp(&single.result.primal, &run.result.primal, sizeof(double)) == 0);
        CHECK(std::memcmp(&single.result.dual, &run.result.dual, sizeof(double)) == 0);
        CHECK(single.result.weights == run.result.weights);
        CHECK(single.alpha == run.alpha);
      }
    }
  }
}
