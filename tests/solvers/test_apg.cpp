// APG (Algorithm 4) on problem (31) against independent oracles:
//  * a plain proximal-gradient method in long double with a fixed step from an
//    explicit Lipschitz bound (power iteration on X̃'X̃), whose prox is found by
//    bisection on the threshold ς rather than by the sorting of Algorithm 3;
//  * the optimality conditions of (31) and the primal–dual relations of
//    Theorem 3 / Appendix A, evaluated in long double from the returned w, b;
//  * closed forms (bias-only problems) and exact bitwise comparisons.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <random>
#include <vector>

#include "core/error.h"
#include "solvers/apg.h"
#include "tests/solvers/solver_test_util.h"

using namespace fgm;
using namespace fgm::test;

namespace {

constexpr uint64_t kBudget = uint64_t(1) << 32;

struct OracleResult {
  std::vector<LD> w;
  LD b = 0;
  LD F = 0;
  int iterations = 0;
};

// Proximal gradient on (ω, b) with step 1/L, L ≥ λmax(∇²P) (up to a 10% margin
// on a power-iteration estimate; any step below 2/λmax converges).
OracleResult prox_gradient_oracle(const Problem& p, size_t batches, Loss loss, LD C, bool bias,
                                  int max_iterations = 400000) {
  const size_t cols = p.batch_end(batches - 1);
  const size_t dim = cols + (bias ? 1 : 0);
  auto xt = [&](size_t i, size_t j) -> LD { return j < cols ? LD(p.at(i, j)) : LD(-1); };
  std::vector<LD> gram(dim * dim, 0);
  for (size_t i = 0; i < p.n; ++i)
    for (size_t a = 0; a < dim; ++a)
      for (size_t c = 0; c < dim; ++c) gram[a * dim + c] += xt(i, a) * xt(i, c);
  std::vector<LD> vec(dim, 1), next(dim);
  LD lambda = 0;
  for (int it = 0; it < 3000; ++it) {
    LD norm = 0;
    for (size_t a = 0; a < dim; ++a) {
      next[a] = 0;
      for (size_t c = 0; c < dim; ++c) next[a] += gram[a * dim + c] * vec[c];
      norm += next[a] * next[a];
    }
    norm = std::sqrt(norm);
    lambda = norm;
    for (size_t a = 0; a < dim; ++a) vec[a] = next[a] / norm;
  }
  const LD L = 1.1L * lambda * (loss == Loss::kLogistic ? C / 4 : C);

  OracleResult r;
  r.w.assign(cols, 0);
  std::vector<LD> grad(cols), u(cols);
  for (int it = 0; it < max_iterations; ++it) {
    std::vector<LD> d = ld_decision(p, cols, r.w, r.b);
    std::fill(grad.begin(), grad.end(), 0);
    LD gb = 0;
    for (size_t i = 0; i < p.n; ++i) {
      LD ay = ld_alpha(loss, C, p.y[i], d[i]) * p.y[i];
      if (ay == 0) continue;
      for (size_t j = 0; j < cols; ++j) grad[j] -= ay * p.at(i, j);
      gb += ay;  // ∂P/∂b = Σ α_i y_i
    }
    for (size_t j = 0; j < cols; ++j) u[j] = r.w[j] - grad[j] / L;
    // prox of ½(Σ‖ω_h‖)²/L: c_h = max(ô_h − ς, 0) with ς = (1/L)·Σ c_h, by bisection.
    std::vector<LD> norms(batches);
    LD hi = 0;
    for (size_t h = 0; h < batches; ++h) {
      LD q = 0;
      for (size_t j = p.batch_begin[h]; j < p.batch_end(h); ++j) q += u[j] * u[j];
      norms[h] = std::sqrt(q);
      hi = std::max(hi, norms[h]);
    }
    LD lo = 0;
    for (int k = 0; k < 200; ++k) {
      LD mid = (lo + hi) / 2, s = 0;
      for (LD o : norms) s += std::max<LD>(o - mid, 0);
      if (mid - s / L < 0) lo = mid; else hi = mid;
    }
    LD thr = (lo + hi) / 2, change = 0, size = 0;
    for (size_t h = 0; h < batches; ++h) {
      LD scale = norms[h] > thr ? (norms[h] - thr) / norms[h] : 0;
      for (size_t j = p.batch_begin[h]; j < p.batch_end(h); ++j) {
        LD nw = scale * u[j];
        change = std::max(change, std::fabs(nw - r.w[j]));
        size = std::max(size, std::fabs(nw));
        r.w[j] = nw;
      }
    }
    if (bias) {
      LD nb = r.b - gb / L;
      change = std::max(change, std::fabs(nb - r.b));
      r.b = nb;
    }
    r.iterations = it + 1;
    if (change <= 1e-17L * (1 + size)) break;
  }
  r.F = ld_objective(p, batches, loss, C, r.w, r.b);
  return r;
}

struct Kkt {
  LD active_residual = 0;    // max_h ‖∇_h P + z ω_h/‖ω_h‖‖ over active groups
  LD inactive_excess = 0;    // max_h (‖∇_h P‖ − z)_+ over zero groups
  LD bias_gradient = 0;      // |∂P/∂b| = |Σ α_i y_i|
  LD z = 0;                  // Σ_h ‖ω_h‖
  LD grad_scale = 0;         // max_h ‖∇_h P‖
  std::vector<LD> c;         // c_h = Σ_i α_i y_i x_ih norms
  int zero_groups = 0;
};

Kkt kkt_of(const Problem& p, size_t batches, Loss loss, LD C, const std::vector<double>& w, double b) {
  const size_t cols = p.batch_end(batches - 1);
  std::vector<LD> wl = to_ld(w);
  std::vector<LD> d = ld_decision(p, cols, wl, b);
  std::vector<LD> grad(cols, 0);
  Kkt k;
  LD sum_ay = 0;
  for (size_t i = 0; i < p.n; ++i) {
    LD ay = ld_alpha(loss, C, p.y[i], d[i]) * p.y[i];
    sum_ay += ay;
    for (size_t j = 0; j < cols; ++j) grad[j] -= ay * p.at(i, j);
  }
  k.bias_gradient = std::fabs(sum_ay);
  std::vector<LD> wn(batches);
  for (size_t h = 0; h < batches; ++h) {
    LD q = 0;
    for (size_t j = p.batch_begin[h]; j < p.batch_end(h); ++j) q += wl[j] * wl[j];
    wn[h] = std::sqrt(q);
    k.z += wn[h];
  }
  for (size_t h = 0; h < batches; ++h) {
    LD gq = 0, rq = 0;
    for (size_t j = p.batch_begin[h]; j < p.batch_end(h); ++j) {
      gq += grad[j] * grad[j];
      if (wn[h] > 0) {
        LD e = grad[j] + k.z * wl[j] / wn[h];
        rq += e * e;
      }
    }
    k.c.push_back(std::sqrt(gq));
    k.grad_scale = std::max(k.grad_scale, std::sqrt(gq));
    if (wn[h] > 0)
      k.active_residual = std::max(k.active_residual, std::sqrt(rq));
    else {
      k.inactive_excess = std::max(k.inactive_excess, std::sqrt(gq) - k.z);
      ++k.zero_groups;
    }
  }
  return k;
}

std::vector<size_t> batch_sizes(std::mt19937_64& rng, size_t t) {
  std::vector<size_t> s(t);
  for (auto& x : s) x = 1 + rng() % 4;
  return s;
}

ApgOptions tight_options(Loss loss, double C, bool bias) {
  ApgOptions o;
  o.loss = loss;
  o.C = C;
  o.bias = bias;
  o.eps_inner = 1e-15;
  o.max_iterations = 200000;
  return o;
}

bool all_finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

}  // namespace

TEST_CASE("APG reaches the optimum of (31) found by long-double proximal gradient",
          "[solvers][apg]") {
  std::mt19937_64 rng(31);
  int cases = 0;
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    for (bool bias : {false, true}) {
      for (size_t t = 1; t <= 4; ++t) {
        const size_t n = 50 + rng() % 151;
        const double C = (t % 2 == 0) ? 0.05 : 10.0;  // small C leaves some groups at 0
        Problem p = random_problem(rng(), n, batch_sizes(rng, t), 0.6, 0.1);
        // Odd t: make the last column nearly a copy of the first (slow for the oracle).
        const bool correlated = t % 2 == 1 && p.cols > 1;
        if (correlated)
          for (size_t i = 0; i < n; ++i)
            p.x[i * p.cols + p.cols - 1] =
                double(float(p.at(i, 0) + 0.05 * p.at(i, p.cols - 1)));
        CAPTURE(loss_name(loss), bias, t, n, C, correlated);
        MemoryBudget budget(kBudget);
        SelectedFeatureCache cache(budget, n);
        fill_cache(p, cache, t);
        ApgState state;
        std::vector<double> decision;
        ApgResult res = solve_apg(cache, p.y.data(), tight_options(loss, C, bias), state, decision,
                                  budget);
        OracleResult oracle = prox_gradient_oracle(p, t, loss, C, bias);
        CAPTURE(res.iterations, res.objective, oracle.iterations, double(oracle.F));
        REQUIRE(res.converged);
        REQUIRE(!res.stalled);
        // APG's objective, re-evaluated independently, equals the oracle's optimum.
        LD ours = ld_objective(p, t, loss, C, to_ld(state.w), state.b);
        REQUIRE(std::fabs(double(ours - oracle.F)) <= 1e-9 * double(oracle.F));
        REQUIRE(res.objective == Approx(double(ours)).epsilon(1e-12));
        REQUIRE(res.regularizer + res.loss == Approx(res.objective).epsilon(1e-15));
        // Decision values are d = Xw − b at the returned point.
        std::vector<LD> d = ld_decision(p, p.cols, to_ld(state.w), state.b);
        for (size_t i = 0; i < n; ++i) REQUIRE(std::fabs(double(d[i]) - decision[i]) <= 1e-12);
        // P summed over all rows equals the solver's (touched rows plus the
        // untouched ones in aggregate) up to rounding.
        REQUIRE(res.loss == Approx(loss_value(loss, C, p.y.data(), decision)).epsilon(1e-14));
        // Optimality conditions of (31).
        Kkt k = kkt_of(p, t, loss, C, state.w, state.b);
        CAPTURE(double(k.active_residual), double(k.inactive_excess), double(k.bias_gradient),
                double(k.z));
        const double tol = 1e-5 * std::max(1.0, double(k.grad_scale));
        REQUIRE(double(k.active_residual) <= tol);
        REQUIRE(double(k.inactive_excess) <= tol);
        if (bias) REQUIRE(double(k.bias_gradient) <= tol);
        // One gradient per iteration and one more for the certificate.
        REQUIRE(res.gradient_evaluations == res.iterations + 1);
        // The certificate: weak duality against the oracle's optimum, and a
        // gap that closes at the optimum.
        CAPTURE(res.dual_bound, res.relative_gap);
        REQUIRE(res.dual_bound <= double(oracle.F) * (1 + 1e-12));
        REQUIRE(res.relative_gap <= 1e-6);
        ++cases;
      }
    }
  }
  REQUIRE(cases == 16);
}

TEST_CASE("Theorem 3: dual variables from decision values", "[solvers][apg][dual]") {
  std::vector<int8_t> y = {1, -1, 1, -1, 1, -1, 1, -1};
  std::vector<double> d = {0.3, 0.3, -2.0, -2.0, 1.0, -1.0, 40.0, 40.0};
  const double C = 2.5;
  std::vector<double> alpha;
  dual_from_decision(Loss::kSquaredHinge, C, y.data(), d, alpha);
  REQUIRE(alpha.size() == d.size());
  for (size_t i = 0; i < d.size(); ++i) {
    double xi = std::max(0.0, 1.0 - y[i] * d[i]);  // ξ_i of the squared hinge
    REQUIRE(alpha[i] == Approx(C * xi).margin(1e-15));
  }
  dual_from_decision(Loss::kLogistic, C, y.data(), d, alpha);
  for (size_t i = 0; i < d.size(); ++i) {
    LD xi = -LD(y[i]) * d[i];  // ξ_i = −y_i(w'x_i − b)
    LD expected = C * std::exp(xi) / (1 + std::exp(xi));
    REQUIRE(alpha[i] == Approx(double(expected)).epsilon(1e-14));
  }
}

TEST_CASE("Theorem 3 at the optimum: w = Σ α_i y_i x_i and zero duality gap",
          "[solvers][apg][dual]") {
  // From the KKT system of Appendix A: with ζ_h = −Σ_i α_i y_i x_ih and
  // γ = z = Σ_h‖ω_h‖, stationarity in ω gives Σ_i α_i y_i x_ih = γ ω_h/‖ω_h‖ for
  // active groups, i.e. ω_h = μ_h Σ_i α_i y_i x_ih with μ_h = ‖ω_h‖/γ, Σ μ_h = 1
  // (the MKL weights of (29)); ‖Σ_i α_i y_i x_ih‖ ≤ γ for all h; Σ α_i y_i = 0
  // with a bias. One batch: w = Σ_i α_i y_i x_i exactly. The dual objectives
  //   squared hinge: −½γ² − α'α/(2C) + 1'α
  //   logistic:      −½γ² − Σ[(C−α_i)log(C−α_i) + α_i log α_i] + n C log C
  // (Appendix A drops the constant n C log C) equal F at the optimum; γ is
  // taken as max_h ‖Σ_i α_i y_i x_ih‖ so the dual point is feasible.
  std::mt19937_64 rng(3);
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    for (bool bias : {false, true}) {
      for (size_t t : {size_t(1), size_t(3)}) {
        const size_t n = 120;
        const double C = t == 1 ? 0.5 : 0.2;
        Problem p = random_problem(rng(), n, batch_sizes(rng, t), 0.6, 0.1);
        CAPTURE(loss_name(loss), bias, t);
        MemoryBudget budget(kBudget);
        SelectedFeatureCache cache(budget, n);
        fill_cache(p, cache, t);
        ApgState state;
        std::vector<double> decision, alpha;
        ApgResult res = solve_apg(cache, p.y.data(), tight_options(loss, C, bias), state, decision,
                                  budget);
        REQUIRE(res.converged);
        dual_from_decision(loss, C, p.y.data(), decision, alpha);
        std::vector<LD> c(p.cols, 0);
        LD sum_ay = 0;
        for (size_t i = 0; i < n; ++i) {
          sum_ay += LD(alpha[i]) * p.y[i];
          for (size_t j = 0; j < p.cols; ++j) c[j] += LD(alpha[i]) * p.y[i] * p.at(i, j);
        }
        LD z = 0, gamma = 0, mu_sum = 0;
        std::vector<LD> wn(t), cn(t);
        for (size_t h = 0; h < t; ++h) {
          LD a = 0, b = 0;
          for (size_t j = p.batch_begin[h]; j < p.batch_end(h); ++j) {
            a += LD(state.w[j]) * state.w[j];
            b += c[j] * c[j];
          }
          wn[h] = std::sqrt(a);
          cn[h] = std::sqrt(b);
          z += wn[h];
          gamma = std::max(gamma, cn[h]);
        }
        REQUIRE(z > 0);
        const double tol = 1e-5 * std::max(1.0, double(gamma));
        for (size_t h = 0; h < t; ++h) {
          if (wn[h] > 0) {
            LD mu = wn[h] / z;
            mu_sum += mu;
            REQUIRE(std::fabs(double(cn[h] - z)) <= tol);  // active kernels attain γ
            for (size_t j = p.batch_begin[h]; j < p.batch_end(h); ++j)
              REQUIRE(std::fabs(double(state.w[j] - mu * c[j])) <= tol);
          } else {
            REQUIRE(double(cn[h]) <= double(z) + tol);
          }
        }
        REQUIRE(double(mu_sum) == Approx(1.0).epsilon(1e-12));
        if (t == 1)
          for (size_t j = 0; j < p.cols; ++j) REQUIRE(std::fabs(double(state.w[j] - c[j])) <= tol);
        if (bias) REQUIRE(std::fabs(double(sum_ay)) <= tol);
        LD dual = -gamma * gamma / 2;
        for (size_t i = 0; i < n; ++i) {
          LD a = alpha[i];
          if (loss == Loss::kSquaredHinge) {
            dual += a - a * a / (2 * C);
          } else {
            LD ca = LD(C) - a;
            dual -= (ca > 0 ? ca * std::log(ca) : 0) + (a > 0 ? a * std::log(a) : 0);
            dual += LD(C) * std::log(LD(C));
          }
        }
        CAPTURE(res.objective, double(dual));
        // Weak duality (up to the 1e-5 dual infeasibility Σαy of the bias case) and a small gap.
        REQUIRE(double(dual) <= res.objective * (1 + 1e-9) + (bias ? 1e-6 : 0.0));
        REQUIRE(res.objective - double(dual) <= 1e-6 * res.objective);
      }
    }
  }
}

TEST_CASE("APG warm start after adding a batch reaches the cold-start optimum faster",
          "[solvers][apg][warm]") {
  std::mt19937_64 rng(99);
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    for (bool bias : {false, true}) {
      const size_t n = 400;
      Problem p = random_problem(rng(), n, {5, 5, 5}, 0.5, 0.1);
      p.y[0] = 1;
      ApgOptions o;
      o.loss = loss;
      o.C = 1.0;
      o.bias = bias;
      o.eps_inner = 1e-9;
      o.max_iterations = 100000;
      CAPTURE(loss_name(loss), bias);
      MemoryBudget budget(kBudget);
      SelectedFeatureCache cache(budget, n);
      fill_cache(p, cache, 2);
      ApgState warm;
      std::vector<double> decision;
      solve_apg(cache, p.y.data(), o, warm, decision, budget);
      REQUIRE(warm.w.size() == cache.num_columns());
      REQUIRE(warm.lipschitz > 0);
      fill_cache(p, cache, 3);
      ApgResult rw = solve_apg(cache, p.y.data(), o, warm, decision, budget);
      REQUIRE(warm.w.size() == cache.num_columns());
      ApgState cold;
      ApgResult rc = solve_apg(cache, p.y.data(), o, cold, decision, budget);
      CAPTURE(rw.iterations, rc.iterations, rw.objective, rc.objective);
      REQUIRE(rw.converged);
      REQUIRE(rc.converged);
      REQUIRE(rw.objective == Approx(rc.objective).epsilon(1e-6));
      // The stop rule is relative to each solve's first step, so both solves
      // reduce it by the same factor and the iteration counts need not
      // differ; the warm start's advantage shows at a fixed budget: after 5
      // iterations it is closer to the optimum than the cold start.
      {
        ApgOptions few = o;
        few.eps_inner = 0;
        few.max_iterations = 5;
        SelectedFeatureCache again(budget, n);  // batches 1-2, solved, then batch 3
        fill_cache(p, again, 2);
        ApgState w2;
        solve_apg(again, p.y.data(), o, w2, decision, budget);
        fill_cache(p, again, 3);
        ApgResult fw5 = solve_apg(again, p.y.data(), few, w2, decision, budget);
        ApgState c2;
        ApgResult fc5 = solve_apg(again, p.y.data(), few, c2, decision, budget);
        CAPTURE(fw5.objective, fc5.objective);
        REQUIRE(fw5.objective - rc.objective < fc5.objective - rc.objective);
      }
      LD fw = ld_objective(p, 3, loss, o.C, to_ld(warm.w), warm.b);
      LD fc = ld_objective(p, 3, loss, o.C, to_ld(cold.w), cold.b);
      REQUIRE(double(fw) == Approx(double(fc)).epsilon(1e-6));
    }
  }
}

TEST_CASE("APG results are bit-identical for any thread count", "[solvers][apg][threads]") {
  // n spans several row chunks and there are several batches, so every
  // parallel loop of the solver really splits.
  const size_t n = 30000;
  Problem p = random_problem(5, n, {4, 3, 5, 2, 4}, 0.2, 0.1);
  // A near-duplicate column makes the problem ill-conditioned: > 100 iterations.
  for (size_t i = 0; i < n; ++i) p.x[i * p.cols + 1] = double(float(p.at(i, 0) + 0.01 * p.at(i, 1)));
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    MemoryBudget budget(kBudget);
    SelectedFeatureCache cache(budget, n);
    fill_cache(p, cache, 5);
    ApgOptions o;
    o.loss = loss;
    o.C = 1.0;
    o.bias = true;
    o.eps_inner = 1e-8;
    o.max_iterations = 250;
    std::vector<ApgState> states;
    std::vector<std::vector<double>> decisions;
    std::vector<ApgResult> results;
    for (int threads : {1, 2, 3, 4}) {
      o.threads = threads;
      ApgState s;
      std::vector<double> d;
      results.push_back(solve_apg(cache, p.y.data(), o, s, d, budget));
      states.push_back(s);
      decisions.push_back(d);
    }
    REQUIRE(results[0].iterations > 100);
    for (size_t k = 1; k < states.size(); ++k) {
      CAPTURE(loss_name(loss), k);
      REQUIRE(results[k].iterations == results[0].iterations);
      REQUIRE(results[k].line_search_steps == results[0].line_search_steps);
      REQUIRE(std::memcmp(&results[k].objective, &results[0].objective, sizeof(double)) == 0);
      REQUIRE(states[k].w.size() == states[0].w.size());
      REQUIRE(std::memcmp(states[k].w.data(), states[0].w.data(),
                          states[0].w.size() * sizeof(double)) == 0);
      REQUIRE(std::memcmp(&states[k].b, &states[0].b, sizeof(double)) == 0);
      REQUIRE(std::memcmp(&states[k].lipschitz, &states[0].lipschitz, sizeof(double)) == 0);
      REQUIRE(std::memcmp(decisions[k].data(), decisions[0].data(), n * sizeof(double)) == 0);
    }
  }
}

TEST_CASE("Logistic loss with huge margins stays finite", "[solvers][apg][logistic]") {
  std::vector<int8_t> y = {1, -1, 1, -1};
  std::vector<double> d = {1e300, -1e300, -1e300, 1e300};
  double P = loss_value(Loss::kLogistic, 10.0, y.data(), d);
  REQUIRE(std::isfinite(P));  // two samples are 1e301 wrong: finite, not inf/NaN
  REQUIRE(P == Approx(2e301));
  std::vector<double> alpha;
  dual_from_decision(Loss::kLogistic, 10.0, y.data(), d, alpha);
  REQUIRE(alpha == std::vector<double>{0.0, 0.0, 10.0, 10.0});
  d = {800, -800, -800, 800};
  REQUIRE(loss_value(Loss::kLogistic, 1.0, y.data(), d) == Approx(1600.0));
  dual_from_decision(Loss::kLogistic, 1.0, y.data(), d, alpha);
  REQUIRE(alpha == std::vector<double>{0.0, 0.0, 1.0, 1.0});

  // Separable data scaled by 1e4 and a warm start far out: margins ~1e8.
  const size_t n = 200;
  Problem p = random_problem(11, n, {3, 2}, 0.7, 0.0, 1e4);
  MemoryBudget budget(kBudget);
  SelectedFeatureCache cache(budget, n);
  fill_cache(p, cache, 2);
  for (bool bias : {false, true}) {
    ApgOptions o;
    o.loss = Loss::kLogistic;
    o.C = 1e3;
    o.bias = bias;
    ApgState s;
    s.w.assign(p.cols, 0.0);
    for (size_t j = 0; j < 3; ++j) s.w[j] = (j % 2 ? -1e4 : 1e4);
    s.b = bias ? 1e6 : 0.0;
    std::vector<double> decision;
    ApgResult r = solve_apg(cache, p.y.data(), o, s, decision, budget);
    REQUIRE(std::isfinite(r.objective));
    REQUIRE(std::isfinite(s.b));
    REQUIRE(std::isfinite(s.lipschitz));
    REQUIRE(all_finite(s.w));
    REQUIRE(all_finite(decision));
    dual_from_decision(Loss::kLogistic, o.C, p.y.data(), decision, alpha);
    REQUIRE(all_finite(alpha));
    // Starting objective (huge) must have gone down.
    REQUIRE(r.objective < 1e12);
  }
}

TEST_CASE("APG with a stale Lipschitz estimate still converges", "[solvers][apg][lipschitz]") {
  // The paper caps τ at L_t; with L_t far below the true constant that loop
  // never ends. Too large an L_t must not stop the solver early either.
  const size_t n = 150;
  Problem p = random_problem(21, n, {3, 4}, 0.6, 0.1, 5.0);
  MemoryBudget budget(kBudget);
  SelectedFeatureCache cache(budget, n);
  fill_cache(p, cache, 2);
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    ApgOptions o = tight_options(loss, 1.0, true);
    o.eps_inner = 1e-10;
    OracleResult oracle = prox_gradient_oracle(p, 2, loss, o.C, true);
    for (double L0 : {0.0, 1e-9, 1e9}) {
      CAPTURE(loss_name(loss), L0);
      ApgState s;
      s.lipschitz = L0;
      std::vector<double> decision;
      ApgResult r = solve_apg(cache, p.y.data(), o, s, decision, budget);
      REQUIRE(r.converged);
      REQUIRE(r.objective == Approx(double(oracle.F)).epsilon(1e-7));
      REQUIRE(s.lipschitz > 0);
      if (L0 == 1e-9) {
        REQUIRE(r.line_search_steps > r.iterations);
        REQUIRE(r.lipschitz_max > 1e-3);
      }
    }
  }
}

TEST_CASE("APG line-search trials do not pass over the columns (Section 5.5)",
          "[solvers][apg][cache]") {
  const size_t n = 300;
  Problem p = random_problem(8, n, {3, 3, 3}, 0.5, 0.1);
  MemoryBudget budget(kBudget);
  SelectedFeatureCache cache(budget, n);
  fill_cache(p, cache, 3);
  ApgOptions o;
  o.C = 1.0;
  o.eps_inner = 1e-12;
  o.max_iterations = 1000;
  ApgState s;
  s.lipschitz = 1e-12;  // forces many backtracking trials
  std::vector<double> decision;
  ApgResult r = solve_apg(cache, p.y.data(), o, s, decision, budget);
  REQUIRE(r.line_search_steps > r.iterations + 20);
  // 1 initial X v, 3 per iteration (∇P, X_h g_h, X_h v_h), 1 final X ω and
  // the certificate's gradient at ω.
  REQUIRE(r.column_passes <= 3 + 3 * r.iterations);
  REQUIRE(r.gradient_evaluations == r.iterations + 1);
  REQUIRE(r.cached_products == 6);
  REQUIRE(r.recomputed_products == 0);
}

TEST_CASE("APG without selected columns optimises the bias alone", "[solvers][apg][bias]") {
  // With ω empty, d = −b and the optimal b has a closed form:
  // squared hinge b = (n₋ − n₊)/n (|b| < 1), logistic b = log(n₋/n₊).
  const size_t n = 10;
  std::vector<int8_t> y = {1, 1, 1, 1, 1, 1, 1, -1, -1, -1};
  MemoryBudget budget(kBudget);
  SelectedFeatureCache cache(budget, n);
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    ApgOptions o = tight_options(loss, 2.0, true);
    ApgState s;
    std::vector<double> decision;
    ApgResult r = solve_apg(cache, y.data(), o, s, decision, budget);
    double expected = loss == Loss::kSquaredHinge ? (3.0 - 7.0) / 10.0 : std::log(3.0 / 7.0);
    REQUIRE(r.converged);
    REQUIRE(s.b == Approx(expected).epsilon(1e-7));
    REQUIRE(s.w.empty());
    REQUIRE(r.regularizer == 0);
    for (double d : decision) REQUIRE(d == -s.b);
  }
  // Without bias nothing can move: F = P(0) = nC/2 (squared hinge).
  ApgOptions o;
  ApgState s;
  std::vector<double> decision;
  ApgResult r = solve_apg(cache, y.data(), o, s, decision, budget);
  REQUIRE(r.objective == Approx(0.5 * n * o.C));
  REQUIRE(r.converged);
}

TEST_CASE("APG reserves its working memory from the budget", "[solvers][apg][budget]") {
  const size_t n = 2000;
  Problem p = random_problem(4, n, {5, 5}, 0.1, 0.1);
  MemoryBudget big(kBudget);
  SelectedFeatureCache cache(big, n);
  fill_cache(p, cache, 2);
  const TouchedRows touched = touched_rows(p, 2);
  const uint64_t cache_bytes = 2 * touched.total_batch_rows() * sizeof(double);
  uint64_t before = big.used();
  ApgState s;
  std::vector<double> decision;
  ApgResult r = solve_apg(cache, p.y.data(), ApgOptions{}, s, decision, big);
  REQUIRE(big.used() == before);  // released on return
  // The whole inner-product cache (2 vectors of |R_h| entries per batch) and
  // 3 vectors over the touched rows (squared hinge).
  REQUIRE(r.cached_products == 4);
  const uint64_t peak = big.peak() - before;
  REQUIRE(peak >= cache_bytes + 3 * touched.count * sizeof(double));
  // Too small for the re-indexed columns: the error names them and the remedy.
  auto fails_with = [&](uint64_t limit, const char* purpose, const char* remedy) {
    MemoryBudget small(limit);
    ApgState st;
    try {
      solve_apg(cache, p.y.data(), ApgOptions{}, st, decision, small);
      FAIL("expected out-of-memory");
    } catch (const Error& e) {
      REQUIRE(e.kind() == ErrorKind::kOutOfMemory);
      std::string m = e.what();
      CAPTURE(m);
      REQUIRE(m.find(purpose) != std::string::npos);
      REQUIRE(m.find(remedy) != std::string::npos);
    }
    REQUIRE(small.used() == 0);
  };
  fails_with(1024, "APG touched-row layout", "fewer selected columns");
  // Room for everything but the per-row vectors' last byte: they fail; with
  // that byte the solve runs, with no inner-product cache at all.
  const uint64_t without_cache = peak - cache_bytes;
  fails_with(without_cache - 1, "APG per-row vectors", "fewer training rows");
  MemoryBudget exact(without_cache);
  ApgState st;
  ApgResult none = solve_apg(cache, p.y.data(), ApgOptions{}, st, decision, exact);
  REQUIRE(none.cached_products == 0);
  REQUIRE(none.recomputed_products > 0);
  REQUIRE(std::memcmp(&none.objective, &r.objective, sizeof(double)) == 0);
}

TEST_CASE("APG memory does not grow with the rows no selected column touches",
          "[solvers][apg][budget]") {
  // 200,000 rows, 3 batches touching ~1% of them: the solver holds no
  // n-vector of doubles (the dense form held 4 + 2t of them); its only
  // per-row structure over all n rows is a bitmap.
  const size_t n = 200000;
  std::mt19937_64 rng(8);
  MemoryBudget budget(kBudget);
  SelectedFeatureCache cache(budget, n);
  std::vector<int8_t> y(n);
  for (size_t i = 0; i < n; ++i) y[i] = rng() % 3 == 0 ? 1 : -1;
  for (size_t h = 0; h < 3; ++h) {
    cache.begin_batch();
    for (size_t j = 0; j < 4; ++j) {
      std::vector<uint32_t> rows;
      std::vector<float> values;
      for (size_t i = 0; i < n; i += 400 + rng() % 200) {
        rows.push_back(uint32_t(i));
        values.push_back(float(1 + rng() % 3) * (y[i] > 0 ? 1.0f : 0.5f));
      }
      cache.add_column(FeatureKey{}, rows, values);
    }
  }
  const uint64_t before = budget.used();
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    ApgOptions o;
    o.loss = loss;
    o.bias = true;
    ApgState s;
    std::vector<double> decision;
    ApgResult r = solve_apg(cache, y.data(), o, s, decision, budget);
    CAPTURE(loss_name(loss), budget.peak() - before);
    REQUIRE(r.converged);
    REQUIRE(decision.size() == n);
    REQUIRE(budget.peak() - before < n * sizeof(double));
  }
}

// The inner-product cache shrinks to what the budget allows, and the solution
// does not change by a bit: checked for every cache size from none to all,
// both losses, with and without bias, for 1 and 2 threads; the reference
// solution is checked against the optimality conditions of (31).
TEST_CASE("APG gives the same bits for any inner-product cache size", "[solvers][apg][budget][cache]") {
  const size_t n = 9000;  // two row chunks
  Problem p = random_problem(12, n, {3, 2, 4}, 0.3, 0.1);
  // Binary and small-integer columns beside the Gaussian ones, and a tie.
  for (size_t i = 0; i < n; ++i) {
    p.x[i * p.cols + 3] = (i % 3 == 0) ? 1.0 : 0.0;
    p.x[i * p.cols + 5] = double(i % 4);
    p.x[i * p.cols + 6] = p.x[i * p.cols + 3];
  }
  MemoryBudget holder(kBudget);
  SelectedFeatureCache cache(holder, n);
  fill_cache(p, cache, 3);
  // Slot 2h + kind of the cache holds |R_h| doubles (R_h: rows batch h touches).
  const TouchedRows touched = touched_rows(p, 3);
  std::vector<uint64_t> slot_bytes;
  for (size_t h = 0; h < 3; ++h)
    for (int kind = 0; kind < 2; ++kind) slot_bytes.push_back(touched.batch[h] * sizeof(double));
  const uint64_t all_slots = 2 * touched.total_batch_rows() * sizeof(double);
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    for (bool bias : {false, true}) {
      ApgOptions o = tight_options(loss, 0.5, bias);
      MemoryBudget full(kBudget);
      ApgState ref;
      std::vector<double> ref_decision;
      ApgResult ref_result = solve_apg(cache, p.y.data(), o, ref, ref_decision, full);
      REQUIRE(ref_result.cached_products == 6);
      REQUIRE(ref_result.recomputed_products == 0);
      // What the solver needs beyond the cache (its peak minus the 6 cached vectors).
      const uint64_t required = full.peak() - all_slots;
      // The reference is the optimum of (31): its optimality conditions hold.
      REQUIRE(ref_result.converged);
      CAPTURE(ref_result.iterations);
      Kkt k = kkt_of(p, 3, loss, o.C, ref.w, ref.b);
      const double tol = 1e-4 * std::max(1.0, double(k.grad_scale));
      REQUIRE(double(k.active_residual) <= tol);
      REQUIRE(double(k.inactive_excess) <= tol);
      if (bias) REQUIRE(double(k.bias_gradient) <= tol);
      for (uint64_t kept : {0, 1, 3, 5}) {
        for (int threads : {1, 2}) {
          CAPTURE(loss_name(loss), bias, kept, threads);
          o.threads = threads;
          uint64_t room = 0;
          for (uint64_t k = 0; k < kept; ++k) room += slot_bytes[k];
          MemoryBudget tight(required + room + slot_bytes[kept] / 2);
          ApgState s;
          std::vector<double> d;
          ApgResult r = solve_apg(cache, p.y.data(), o, s, d, tight);
          REQUIRE(r.cached_products == kept);
          REQUIRE(r.recomputed_products > 0);
          REQUIRE(tight.peak() <= tight.limit());
          REQUIRE(r.iterations == ref_result.iterations);
          REQUIRE(r.line_search_steps == ref_result.line_search_steps);
          REQUIRE(std::memcmp(&r.objective, &ref_result.objective, sizeof(double)) == 0);
          REQUIRE(s.w.size() == ref.w.size());
          REQUIRE(std::memcmp(s.w.data(), ref.w.data(), ref.w.size() * sizeof(double)) == 0);
          REQUIRE(std::memcmp(&s.b, &ref.b, sizeof(double)) == 0);
          REQUIRE(std::memcmp(&s.lipschitz, &ref.lipschitz, sizeof(double)) == 0);
          REQUIRE(std::memcmp(d.data(), ref_decision.data(), n * sizeof(double)) == 0);
        }
      }
    }
  }
}

// Timing for the report: n = 100000, 100 columns of density 0.1 in t = 10 batches.
// Hidden; run with: test_solvers "[bench]"
TEST_CASE("APG cost per iteration", "[.][bench]") {
  const size_t n = 100000, t = 10, per = 10;
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  MemoryBudget budget(kBudget);
  SelectedFeatureCache cache(budget, n);
  std::vector<double> score(n, 0.0);
  for (size_t h = 0; h < t; ++h) {
    cache.begin_batch();
    for (size_t j = 0; j < per; ++j) {
      std::vector<uint32_t> rows;
      std::vector<float> vals;
      double wj = normal(rng);
      for (size_t i = 0; i < n; ++i)
        if (unif(rng) < 0.1) {
          rows.push_back(uint32_t(i));
          vals.push_back(float(unif(rng)));
          score[i] += wj * vals.back();
        }
      cache.add_column(FeatureKey{}, rows, vals);
    }
  }
  std::vector<int8_t> y(n);
  for (size_t i = 0; i < n; ++i) y[i] = (score[i] + 0.1 * normal(rng) > 0) ? 1 : -1;
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    for (int threads : {1, 2}) {
      ApgOptions o;
      o.loss = loss;
      o.C = 1.0;
      o.bias = true;
      o.eps_inner = 0;  // run exactly max_iterations
      o.max_iterations = 200;
      o.threads = threads;
      ApgState s;
      std::vector<double> d;
      auto t0 = std::chrono::steady_clock::now();
      std::clock_t c0 = std::clock();
      ApgResult r = solve_apg(cache, y.data(), o, s, d, budget);
      double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      double cpu = double(std::clock() - c0) / CLOCKS_PER_SEC;
      WARN(loss_name(loss) << " threads=" << threads << ": " << r.iterations << " iterations, "
                           << r.line_search_steps << " ω trials, " << r.bias_line_search_steps
                           << " b trials, " << r.column_passes << " column passes, "
                           << 1e3 * sec / r.iterations << " ms/iteration (cpu "
                           << 1e3 * cpu / r.iterations << " ms), objective "
                           << r.objective);
    }
  }
}

namespace {

// Binary (0/1), small integer (0..4) or tied (integer, every column doubled)
// data, as the FGM scoring pass sees them; labels from a planted rule on the
// first columns with 10% flips.
Problem discrete_problem(uint64_t seed, size_t n, const std::vector<size_t>& sizes, int kind) {
  std::mt19937_64 rng(seed);
  Problem p = zero_problem(n, sizes);
  p.y.resize(n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < p.cols; ++j) {
      if (kind == 2 && j % 2 == 1) {
        p.x[i * p.cols + j] = p.x[i * p.cols + j - 1];  // a tie: the same column twice
        continue;
      }
      const bool present = rng() % 100 < 40;
      p.x[i * p.cols + j] = !present ? 0.0 : kind == 0 ? 1.0 : double(1 + rng() % 4);
    }
    const double score = p.at(i, 0) - p.at(i, std::min<size_t>(2, p.cols - 1)) + 0.3;
    p.y[i] = (score > 0) == (rng() % 10 != 0) ? 1 : -1;
  }
  return p;
}

Problem scaled(Problem p, double factor) {
  for (double& v : p.x) v = double(float(v * factor));
  return p;
}

}  // namespace

TEST_CASE("APG stop rule: same relative accuracy on data scaled by 1, 1e3 and 1e-3",
          "[solvers][apg][stop]") {
  // Scaling X by s and C by 1/s² gives the same problem with F scaled by
  // 1/s² (ω by 1/s): a scale-free rule must stop at the same relative
  // accuracy. Scaling X alone changes the problem (the loss outweighs the
  // regulariser by s²); the rule must still stop at a small relative error
  // and never after one tiny step. References: the long-double oracle.
  const char* kinds[] = {"binary", "integer", "tied"};
  for (int kind = 0; kind < 3; ++kind) {
    for (bool bias : {false, true}) {
      for (bool equivalent : {true, false}) {
        Problem base = discrete_problem(100 + kind, 120, {2, 3, 2}, kind);
        std::vector<int> iterations;
        for (double s : {1.0, 1e3, 1e-3}) {
          const double C = equivalent ? 1.0 / (s * s) : 1.0;
          Problem p = scaled(base, s);
          CAPTURE(kinds[kind], bias, equivalent, s, C);
          MemoryBudget budget(kBudget);
          SelectedFeatureCache cache(budget, p.n);
          fill_cache(p, cache, 3);
          ApgOptions o;
          o.loss = Loss::kSquaredHinge;
          o.C = C;
          o.bias = bias;
          o.eps_inner = 1e-4;
          o.max_iterations = 100000;
          ApgState state;
          std::vector<double> decision;
          ApgResult r = solve_apg(cache, p.y.data(), o, state, decision, budget);
          // The reference optimum: equivalent problems F*(1)/s² (the oracle
          // on the unscaled data); otherwise the oracle, or with a bias (where
          // the scaled problem is too ill-conditioned for its fixed step) a
          // long APG solve to 10^-10, which must agree with the oracle at s = 1.
          double reference;
          if (equivalent) {
            reference = double(prox_gradient_oracle(base, 3, Loss::kSquaredHinge, 1.0, bias).F) / (s * s);
          } else if (!bias) {
            reference = double(prox_gradient_oracle(p, 3, Loss::kSquaredHinge, C, bias).F);
          } else {
            ApgOptions tight = o;
            tight.eps_inner = 1e-10;
            tight.max_iterations = 1000000;
            ApgState ts;
            std::vector<double> td;
            solve_apg(cache, p.y.data(), tight, ts, td, budget);
            reference = double(ld_objective(p, 3, Loss::kSquaredHinge, C, to_ld(ts.w), ts.b));
            if (s == 1.0)
              REQUIRE(reference == Approx(double(prox_gradient_oracle(p, 3, Loss::kSquaredHinge, C, bias).F)).epsilon(1e-9));
          }
          const double ours = double(ld_objective(p, 3, Loss::kSquaredHinge, C, to_ld(state.w), state.b));
          const double rel = (ours - reference) / reference;
          CAPTURE(r.iterations, ours, reference, rel, r.relative_gap);
          REQUIRE(r.converged);
          REQUIRE(r.iterations > 1);
          REQUIRE(rel >= -1e-7);
          REQUIRE(rel <= 1e-4);
          // The reported certificate bounds the true relative error.
          REQUIRE(rel <= r.relative_gap * (1 + 1e-6) + 1e-7);
          iterations.push_back(r.iterations);
        }
        // Equivalent problems: the same iterates up to the starting step size
        // (L₀ = 0.01nC is not scale-equivariant: C changes by 10^6 here, and a
        // τ that is too large shrinks by η = 1/2 per iteration, so at most
        // log₂(10^6) ≈ 20 extra iterations; one too small costs backtracking
        // trials, not iterations).
        CAPTURE(kinds[kind], bias, equivalent, iterations[0], iterations[1], iterations[2]);
        if (equivalent) {
          for (int k : iterations) REQUIRE(std::abs(k - iterations[0]) <= iterations[0] / 4 + 21);
        }
      }
    }
  }
}

TEST_CASE("APG certificate: the dual bound is below the optimum, also far from it",
          "[solvers][apg][stop]") {
  std::mt19937_64 rng(77);
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    for (bool bias : {false, true}) {
      for (int kind = 0; kind < 3; ++kind) {
        Problem p = discrete_problem(rng(), 90, {2, 2, 3}, kind);
        const double C = 2.0;
        OracleResult oracle = prox_gradient_oracle(p, 3, loss, C, bias);
        for (int cap : {1, 3, 10, 100}) {
          CAPTURE(loss_name(loss), bias, kind, cap);
          MemoryBudget budget(kBudget);
          SelectedFeatureCache cache(budget, p.n);
          fill_cache(p, cache, 3);
          ApgOptions o;
          o.loss = loss;
          o.C = C;
          o.bias = bias;
          o.eps_inner = 0;
          o.max_iterations = cap;
          ApgState state;
          std::vector<double> decision;
          ApgResult r = solve_apg(cache, p.y.data(), o, state, decision, budget);
          CAPTURE(r.objective, r.dual_bound, double(oracle.F), r.relative_gap);
          REQUIRE(r.dual_bound <= double(oracle.F) * (1 + 1e-12));
          REQUIRE(r.objective >= double(oracle.F) * (1 - 1e-12));
          const double rel = (r.objective - double(oracle.F)) / r.objective;
          REQUIRE(rel <= r.relative_gap + 1e-12);
        }
      }
    }
  }
}


TEST_CASE("rows with label 0 change nothing: the solve equals the solve on the other rows",
          "[solvers][apg][labels]") {
  // A loose stop (1e-4) so that the iterates themselves, not only the optimum,
  // must agree: the same L₀, steps and stop as the run on the subset.
  for (const char* kind : {"gaussian", "binary", "integer", "tied"}) {
    for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
      CAPTURE(kind, loss_name(loss));
      const size_t n = 160;
      Problem p = random_problem(17, n, {3, 4}, 0.6, 0.1);
      for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < p.cols; ++j) {
          double& x = p.x[i * p.cols + j];
          if (std::string(kind) == "binary") x = x > 0 ? 1 : 0;
          else if (std::string(kind) == "integer") x = std::floor(std::fabs(2 * x));
          else if (std::string(kind) == "tied") x = j == 4 ? p.at(i, 0) : std::round(x);  // column 4 = column 0
        }
      std::vector<int8_t> masked = p.y;
      Problem q = p;  // the rows kept, alone
      q.x.clear();
      q.y.clear();
      for (size_t i = 0; i < n; ++i) {
        if (i % 4 == 1 || i % 9 == 0) {
          masked[i] = 0;
          continue;
        }
        q.y.push_back(p.y[i]);
        for (size_t j = 0; j < p.cols; ++j) q.x.push_back(p.at(i, j));
      }
      q.n = q.y.size();
      ApgOptions o = tight_options(loss, 0.7, true);
      o.eps_inner = 1e-4;
      o.max_iterations = 500;
      MemoryBudget budget(kBudget);
      SelectedFeatureCache full_cache(budget, n), sub_cache(budget, q.n);
      ApgState full_state, sub_state;
      std::vector<double> full_d, sub_d, full_alpha, sub_alpha;
      for (size_t batches = 1; batches <= 2; ++batches) {  // a cold solve, then a warm start
        CAPTURE(batches);
        fill_cache(p, full_cache, batches);
        fill_cache(q, sub_cache, batches);
        ApgResult a = solve_apg(full_cache, masked.data(), o, full_state, full_d, budget);
        ApgResult b = solve_apg(sub_cache, q.y.data(), o, sub_state, sub_d, budget);
        REQUIRE(a.iterations == b.iterations);
        REQUIRE(a.objective == Approx(b.objective).epsilon(1e-12));
        REQUIRE(a.loss == Approx(b.loss).epsilon(1e-12));
        // The objective of the subset problem, evaluated independently, at the masked solution.
        REQUIRE(double(ld_objective(q, batches, loss, o.C, to_ld(full_state.w), full_state.b)) ==
                Approx(a.objective).epsilon(1e-12));
        REQUIRE(full_state.b == Approx(sub_state.b).margin(1e-9));
        for (size_t j = 0; j < full_state.w.size(); ++j)
          REQUIRE(full_state.w[j] == Approx(sub_state.w[j]).margin(1e-9));
        // Decision values of every row (left-out ones too) are Xw − b.
        std::vector<LD> d = ld_decision(p, full_cache.num_columns(), to_ld(full_state.w), full_state.b);
        for (size_t i = 0; i < n; ++i) REQUIRE(std::fabs(double(d[i]) - full_d[i]) <= 1e-12);
        // Dual variables: 0 for left-out rows; the gradient Σ α_i y_i x_ij of every
        // column (the worst-case analysis score) equals the subset's.
        dual_from_decision(loss, o.C, masked.data(), full_d, full_alpha);
        dual_from_decision(loss, o.C, q.y.data(), sub_d, sub_alpha);
        for (size_t i = 0; i < n; ++i)
          if (masked[i] == 0) REQUIRE(full_alpha[i] == 0.0);
        for (size_t j = 0; j < p.cols; ++j) {
          double gf = 0, gs = 0;
          for (size_t i = 0; i < n; ++i) gf += full_alpha[i] * masked[i] * p.at(i, j);
          for (size_t i = 0; i < q.n; ++i) gs += sub_alpha[i] * q.y[i] * q.at(i, j);
          REQUIRE(gf == Approx(gs).margin(1e-9));
        }
      }
    }
  }
}

namespace {

// Problem kinds of the certified-stop test: 0 binary, 1 integer, 2 tied
// columns (discrete_problem), 3 Gaussian (random_problem), 4 poly-2: the
// products of pairs of integer columns appended as a batch.
Problem certificate_problem(uint64_t seed, int kind) {
  if (kind <= 2) return discrete_problem(seed, 90, {2, 2, 3}, kind);
  if (kind == 3) return random_problem(seed, 90, {2, 2, 3}, 0.6, 0.1);
  Problem base = discrete_problem(seed, 90, {2, 2}, 1);
  Problem p = zero_problem(base.n, {2, 2, 3});
  p.y = base.y;
  const std::pair<size_t, size_t> pairs[3] = {{0, 2}, {1, 3}, {0, 0}};
  for (size_t i = 0; i < p.n; ++i) {
    for (size_t j = 0; j < 4; ++j) p.x[i * p.cols + j] = base.at(i, j);
    for (size_t k = 0; k < 3; ++k) p.x[i * p.cols + 4 + k] = base.at(i, pairs[k].first) * base.at(i, pairs[k].second);
  }
  return p;
}

}  // namespace

TEST_CASE("Certified APG: the gap bounds the true suboptimality and closes as the solve converges",
          "[solvers][apg][certified]") {
  std::mt19937_64 rng(2014);
  int cases = 0;
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    for (bool bias : {false, true}) {
      for (int kind = 0; kind < 5; ++kind) {
        Problem p = certificate_problem(rng(), kind);
        const double C = kind == 3 ? 0.5 : 2.0;
        // The oracle's optimum F* (long double, run to a fixed point).
        const OracleResult oracle = prox_gradient_oracle(p, 3, loss, C, bias);
        const double optimum = double(oracle.F);
        double previous_gap = 1.0;
        for (double tolerance : {1e-2, 1e-4, 1e-7}) {
          CAPTURE(loss_name(loss), bias, kind, tolerance);
          MemoryBudget budget(kBudget);
          SelectedFeatureCache cache(budget, p.n);
          fill_cache(p, cache, 3);
          ApgOptions o;
          o.loss = loss;
          o.C = C;
          o.bias = bias;
          o.certify = true;
          o.gap_tolerance = tolerance;
          o.max_iterations = 100000;
          ApgState state;
          std::vector<double> decision;
          const ApgResult r = solve_apg(cache, p.y.data(), o, state, decision, budget);
          CAPTURE(r.iterations, r.objective, r.dual_bound, optimum, r.relative_gap);
          REQUIRE(r.certified);
          REQUIRE(r.converged);
          REQUIRE(r.relative_gap <= tolerance);
          // The returned objective, evaluated independently in long double.
          const double F = double(ld_objective(p, 3, loss, C, to_ld(state.w), state.b));
          REQUIRE(r.objective == Approx(F).epsilon(1e-12));
          // Weak duality and the certificate against the oracle's optimum.
          REQUIRE(r.dual_bound <= optimum * (1 + 1e-12));
          REQUIRE(F - optimum <= r.relative_gap * F + 1e-12 * optimum);
          REQUIRE(r.relative_gap <= previous_gap);
          previous_gap = std::max(r.relative_gap, 0.0);
          ++cases;
        }
      }
    }
  }
  REQUIRE(cases == 60);
}

TEST_CASE("Certified APG stopped at its cap is not converged, and its gap still bounds the error",
          "[solvers][apg][certified]") {
  std::mt19937_64 rng(41);
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    for (bool bias : {false, true}) {
      Problem p = certificate_problem(rng(), 1);
      const double C = 2.0;
      const double optimum = double(prox_gradient_oracle(p, 3, loss, C, bias).F);
      CAPTURE(loss_name(loss), bias);
      MemoryBudget budget(kBudget);
      SelectedFeatureCache cache(budget, p.n);
      fill_cache(p, cache, 3);
      ApgOptions o;
      o.loss = loss;
      o.C = C;
      o.bias = bias;
      o.certify = true;
      o.gap_tolerance = 1e-6;
      o.max_iterations = 2;
      ApgState state;
      std::vector<double> decision;
      const ApgResult r = solve_apg(cache, p.y.data(), o, state, decision, budget);
      CAPTURE(r.objective, r.relative_gap, optimum);
      REQUIRE(r.iterations == 2);
      REQUIRE(r.certified);
      REQUIRE(!r.converged);
      REQUIRE(r.relative_gap > 1e-6);
      REQUIRE(r.objective - optimum <= r.relative_gap * r.objective + 1e-12 * optimum);
      // An inexact solve is not certified; its converged means the mapping rule held.
      o.certify = false;
      o.max_iterations = 2000;
      ApgState inexact_state;
      const ApgResult inexact = solve_apg(cache, p.y.data(), o, inexact_state, decision, budget);
      REQUIRE(!inexact.certified);
      REQUIRE(inexact.converged);
    }
  }
}

TEST_CASE("Certified APG returns the best point and the same bits for any thread count",
          "[solvers][apg][certified][threads]") {
  std::mt19937_64 rng(5);
  for (bool bias : {false, true}) {
    Problem p = random_problem(rng(), 400, {3, 2, 4, 1}, 0.5, 0.2);
    std::vector<double> first_w;
    double first_b = 0;
    int first_iterations = 0;
    for (int threads : {1, 2, 4}) {
      MemoryBudget budget(kBudget);
      SelectedFeatureCache cache(budget, p.n);
      fill_cache(p, cache, 4);
      ApgOptions o;
      o.C = 3.0;
      o.bias = bias;
      o.certify = true;
      o.gap_tolerance = 1e-5;
      o.threads = threads;
      ApgState state;
      std::vector<double> decision;
      const ApgResult r = solve_apg(cache, p.y.data(), o, state, decision, budget);
      REQUIRE(r.converged);
      if (threads == 1) {
        first_w = state.w;
        first_b = state.b;
        first_iterations = r.iterations;
      } else {
        REQUIRE(r.iterations == first_iterations);
        REQUIRE(std::memcmp(state.w.data(), first_w.data(), first_w.size() * sizeof(double)) == 0);
        REQUIRE(std::memcmp(&state.b, &first_b, sizeof first_b) == 0);
      }
    }
  }
}
