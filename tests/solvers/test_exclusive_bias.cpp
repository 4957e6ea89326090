// The unregularised bias of the exclusive solvers (FistaOptions::bias)
// against independent checks: for E-SVM, a twin solver written here (projected
// accelerated gradient on the dual with yᵀu = 0, the projection by bisection,
// w(u) by Algorithm 2's sorting prox, b by enumerating the hinge's kinks) run
// to a 10⁻¹¹ gap; for pcp and locp, the optimality conditions of (7) with the
// bias's own, Σ_i ∂f/∂z_i = 0, from the dense matrix. Binary, integer, tied
// and Gaussian designs, with unbalanced classes so that b matters.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/memory_budget.h"
#include "solvers/exclusive/cone_projection.h"
#include "solvers/exclusive/design.h"
#include "solvers/exclusive/fista_exclusive.h"
#include "solvers/exclusive/licp_coordinate.h"
#include "solvers/exclusive/working_set.h"
#include "tests/solvers/exclusive_test_problems.h"

using namespace fgm;
using namespace fgm::exclusive;
using fgm::test::contiguous_groups;
using fgm::test::DenseProblem;
using fgm::test::unbalanced_problem;

namespace {

struct Twin {
  std::vector<double> w, u;
  double bias = 0, primal = 0, dual = 0;
};

// argmin_b of the hinge sum by trying every kink y_i − z_i (O(n²); the sum is
// piecewise linear, so a kink is a minimiser).
double brute_force_bias(const DenseProblem& d, const std::vector<double>& z) {
  double best = 0, best_value = std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < d.n; ++k) {
    const double b = d.y[k] - z[k];
    long double value = 0;
    for (size_t i = 0; i < d.n; ++i) value += std::max(0.0L, 1.0L - d.y[i] * ((long double)z[i] + b));
    if (double(value) < best_value) best_value = double(value), best = b;
  }
  return best;
}

// max D(u) = 1ᵀu − Ω*(Zu) over u ∈ [0,1]^n (and yᵀu = 0 with the bias), by
// FISTA with gradient restarts; ∇D = 1 − y∘(X w(u)), w(u) per group by
// prox_l1_squared.
Twin twin_esvm(const DenseProblem& d, const ExclusiveGroups& G, double lambda, double ridge, bool with_bias) {
  const size_t n = d.n, p = d.p;
  double norm = 0;  // ‖X‖_F² ≥ ‖X‖²: a safe step
  for (double x : d.x) norm += x * x;
  const double L = norm / ridge;
  ProjectionScratch scratch;
  auto weights = [&](const std::vector<double>& u, std::vector<double>& w, std::vector<double>& a) {
    a.assign(p, 0.0);
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < p; ++j) a[j] += u[i] * d.y[i] * d.at(i, j);
    std::vector<double> c;
    w.assign(p, 0.0);
    for (uint64_t g = 0; g < G.count(); ++g) {
      c.clear();
      for (uint64_t q = G.member_ptr[g]; q < G.member_ptr[g + 1]; ++q) c.push_back(a[G.members[q]] / ridge);
      prox_l1_squared(c.data(), c.size(), lambda / ridge, c.data(), scratch);
      for (uint64_t q = G.member_ptr[g]; q < G.member_ptr[g + 1]; ++q) w[G.members[q]] = c[q - G.member_ptr[g]];
    }
  };
  auto dual_value = [&](const std::vector<double>& u) {
    std::vector<double> w, a;
    weights(u, w, a);
    long double value = 0, omega_e = 0, ww = 0;
    for (double e : u) value += e;
    for (size_t j = 0; j < p; ++j) value -= (long double)a[j] * w[j], ww += (long double)w[j] * w[j];
    for (uint64_t g = 0; g < G.count(); ++g) {
      long double s = 0;
      for (uint64_t q = G.member_ptr[g]; q < G.member_ptr[g + 1]; ++q) s += std::fabs(w[G.members[q]]);
      omega_e += s * s;
    }
    return double(value + 0.5L * ridge * ww + 0.5L * lambda * omega_e);  // 1ᵀu − ⟨a, w⟩ + Ω(w)
  };
  auto project = [&](std::vector<double>& v) {  // onto [0,1]^n ∩ {yᵀu = 0}: u = clip(v − θy)
    if (!with_bias) {
      for (double& e : v) e = std::clamp(e, 0.0, 1.0);
      return;
    }
    auto at = [&](double theta) {
      double s = 0;
      for (size_t i = 0; i < n; ++i) s += d.y[i] * std::clamp(v[i] - theta * d.y[i], 0.0, 1.0);
      return s;
    };
    double low = -1, high = 1;
    while (at(low) < 0) low *= 2;
    while (at(high) > 0) high *= 2;
    for (int it = 0; it < 200; ++it) {
      const double mid = 0.5 * (low + high);
      (at(mid) > 0 ? low : high) = mid;
    }
    for (size_t i = 0; i < n; ++i) v[i] = std::clamp(v[i] - 0.5 * (low + high) * d.y[i], 0.0, 1.0);
    balance_dual(d.y, v);  // exact feasibility after the bisection's last bit
  };
  std::vector<double> u(n, 0.0), u_old = u, bar = u, w, a;
  double t = 1;
  for (int k = 0; k < 400000; ++k) {
    weights(bar, w, a);
    std::vector<double> next(n);
    for (size_t i = 0; i < n; ++i) {
      double z = 0;
      for (size_t j = 0; j < p; ++j) z += d.at(i, j) * w[j];
      next[i] = bar[i] + (1.0 - d.y[i] * z) / L;
    }
    project(next);
    double score = 0;
    for (size_t i = 0; i < n; ++i) score += (bar[i] - next[i]) * (next[i] - u[i]);
    const double t_next = 0.5 + 0.5 * std::sqrt(1 + 4 * t * t);
    const double beta = score > 0 ? 0.0 : (t - 1) / t_next;
    t = score > 0 ? 1.0 : t_next;
    u_old = u, u = next;
    for (size_t i = 0; i < n; ++i) bar[i] = u[i] + beta * (u[i] - u_old[i]);
    if (k % 200 == 0) {
      Twin out;
      out.u = u;
      weights(u, out.w, a);
      std::vector<double> z(n, 0.0);
      for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < p; ++j) z[i] += d.at(i, j) * out.w[j];
      out.bias = with_bias ? brute_force_bias(d, z) : 0.0;
      out.primal = fgm::test::esvm_objective(d, G, lambda, ridge, out.w, out.bias);
      out.dual = dual_value(u);
      if (out.primal - out.dual <= 1e-11 * std::max(1.0, out.primal)) return out;
    }
  }
  return {};  // not converged: the callers REQUIRE a positive primal
}

FistaOptions esvm_options(double lambda, double ridge, bool bias) {
  FistaOptions o;
  o.algorithm = Algorithm::kLicp;
  o.loss = ExclusiveLoss::kHinge;
  o.lambda = lambda;
  o.ridge = ridge;
  o.bias = bias;
  o.max_iterations = 200000;
  return o;
}

}  // namespace

TEST_CASE("best_hinge_bias is the hinge sum's minimiser found by trying every kink", "[exclusive][bias]") {
  for (int kind = 0; kind < 4; ++kind) {
    const auto d = unbalanced_problem(kind, 90 + kind, 25, 6);
    std::vector<double> z(d.n);
    for (size_t i = 0; i < d.n; ++i) z[i] = kind == 1 ? std::round(d.at(i, 0)) : d.at(i, 0) + 0.3 * d.at(i, 1);
    auto hinge = [&](double b) {
      long double s = 0;
      for (size_t i = 0; i < d.n; ++i) s += std::max(0.0L, 1.0L - d.y[i] * ((long double)z[i] + b));
      return double(s);
    };
    const double b = best_hinge_bias(d.y, z.data());
    CHECK(hinge(b) <= hinge(brute_force_bias(d, z)) + 1e-12);
  }
  const std::vector<double> y{1, 1, 1};  // one class: every b ≥ 1 − min z minimises both sums; the first
  const std::vector<double> z{-0.5, 2.0, 0.0};
  CHECK(best_hinge_bias(y, z.data()) == 1.5);
}

namespace {

long double hinge_sum(const std::vector<double>& y, const std::vector<double>& z, long double b, int power) {
  long double s = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const long double slack = std::max(0.0L, 1.0L - y[i] * ((long double)z[i] + b));
    s += power == 1 ? slack : slack * slack;
  }
  return s;
}

// The hinge's minimisers by brute force: the sum at every kink (a convex
// piecewise-linear function attains its minimum at kinks, and its set of
// minimisers spans the minimising kinks), then the least squared hinge on
// that interval by ternary search (convex) in long double.
struct BruteBias {
  double low, high, hinge_min;
  long double squared_min;
};
BruteBias brute_force_tie_break(const std::vector<double>& y, const std::vector<double>& z) {
  long double best = std::numeric_limits<long double>::infinity();
  for (size_t k = 0; k < y.size(); ++k) best = std::min(best, hinge_sum(y, z, y[k] - z[k], 1));
  BruteBias out{std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(), double(best), 0};
  for (size_t k = 0; k < y.size(); ++k)
    if (hinge_sum(y, z, y[k] - z[k], 1) <= best + 1e-12L * std::max(1.0L, best))
      out.low = std::min(out.low, y[k] - z[k]), out.high = std::max(out.high, y[k] - z[k]);
  long double a = out.low, c = out.high;
  for (int it = 0; it < 300; ++it) {
    const long double m1 = a + (c - a) / 3, m2 = c - (c - a) / 3;
    if (hinge_sum(y, z, m1, 2) <= hinge_sum(y, z, m2, 2))
      c = m2;
    else
      a = m1;
  }
  out.squared_min = hinge_sum(y, z, (a + c) / 2, 2);
  return out;
}

}  // namespace

// Of the hinge's flat interval of minimisers, best_hinge_bias takes the least
// squared hinge; checked against the brute force above on binary, integer,
// tied and Gaussian margins, balanced and unbalanced, at full scale and in the
// large-λ regime (small margins with an offset, the interval about [−1, 1]).
// The last case is the old rule's failure: b nearest 0 left every score
// positive (training accuracy 0.5); the tie-break centres them (accuracy 1).
TEST_CASE("best_hinge_bias takes the least squared hinge of the hinge's minimisers (brute force)",
          "[exclusive][bias]") {
  for (int kind = 0; kind < 4; ++kind)
    for (bool balanced : {true, false})
      for (double scale : {1.0, 0.05}) {
        INFO("kind " << kind << " balanced " << balanced << " scale " << scale);
        const auto d = balanced ? fgm::test::valued_problem(kind, 110 + kind, 31, 6)
                                : unbalanced_problem(kind, 110 + kind, 31, 6);
        std::vector<double> z(d.n);
        for (size_t i = 0; i < d.n; ++i)
          z[i] = scale * (d.at(i, 0) + 0.3 * d.at(i, 1) + (kind == 1 ? 0.0 : 0.2 * d.at(i, 2))) + (scale < 1 ? 0.3 : 0);
        const BruteBias brute = brute_force_tie_break(d.y, z);
        const auto [low, high] = hinge_bias_minimisers(d.y, z.data());
        CHECK(low == Approx(brute.low).margin(1e-12));
        CHECK(high == Approx(brute.high).margin(1e-12));
        const double b = best_hinge_bias(d.y, z.data());
        CHECK(b >= low);
        CHECK(b <= high);
        CHECK(double(hinge_sum(d.y, z, b, 1)) <= brute.hinge_min + 1e-12 * std::max(1.0, brute.hinge_min));
        CHECK(double(hinge_sum(d.y, z, b, 2)) <= double(brute.squared_min) * (1 + 1e-12) + 1e-12);
      }
  // Balanced, every |z| < 1, scores offset by +0.4: the minimisers are
  // [max over negatives of −1 − z, min over positives of 1 − z] ∋ 0.
  const std::vector<double> y{1, 1, 1, 1, -1, -1, -1, -1};
  const std::vector<double> z{0.55, 0.6, 0.65, 0.7, 0.1, 0.15, 0.2, 0.25};
  const auto [low, high] = hinge_bias_minimisers(y, z.data());
  CHECK(low == Approx(-1.1));
  CHECK(high == Approx(0.3));
  const auto accuracy = [&](double b) {
    int right = 0;
    for (size_t i = 0; i < y.size(); ++i) right += (z[i] + b > 0) == (y[i] > 0);
    return right / double(y.size());
  };
  CHECK(accuracy(std::clamp(0.0, low, high)) == 0.5);  // the old rule: the minimiser nearest 0
  const double b = best_hinge_bias(y, z.data());
  CHECK(b == Approx(-0.4));  // every row active: b = mean(y − z) = −mean(z)
  CHECK(accuracy(b) == 1.0);
}

// E-SVM with the bias by coordinate ascent (an augmented Lagrangian of yᵀu = 0)
// against the twin: the same optimum at 10⁻¹⁰; the returned dual satisfies
// Σ y_i u_i = 0 and the complementarity of the margins; at 10⁻³ the reported
// gap bounds the true suboptimality P(w, b) − P*.
TEST_CASE("licp with a bias reaches the twin's optimum; its dual keeps y'u = 0 and its gap is a bound",
          "[exclusive][bias][licp]") {
  MemoryBudget budget(1 << 28);
  const size_t n = 30, p = 24;
  for (int kind = 0; kind < 4; ++kind)
    for (const auto& [lambda, ridge] : {std::pair{1.0, 1.0}, std::pair{0.5, 0.2}}) {
      INFO("kind " << kind << " lambda " << lambda << " ridge " << ridge);
      const auto d = unbalanced_problem(kind, 70 + kind, n, p);
      const ExclusiveGroups G = contiguous_groups(p, 6, budget);
      const Twin twin = twin_esvm(d, G, lambda, ridge, true);
      REQUIRE(twin.primal > 0);
      InMemoryDesign X = InMemoryDesign::from_dense(d.n, d.p, d.x, budget);
      FistaOptions o = esvm_options(lambda, ridge, true);
      o.tolerance = 1e-10;
      const FistaResult tight = solve_licp_coordinate(X, d.y, G, o, budget);
      CHECK(tight.converged);
      const double p_tight = fgm::test::esvm_objective(d, G, lambda, ridge, tight.w, tight.bias);
      CHECK(p_tight == Approx(tight.objective).epsilon(1e-9));
      CHECK(std::fabs(p_tight - twin.primal) <= 1e-8 * std::max(1.0, twin.primal));
      double yu = 0, u_sum = 0;
      for (size_t i = 0; i < n; ++i) yu += d.y[i] * tight.dual[i], u_sum += tight.dual[i];
      CHECK(std::fabs(yu) <= 1e-12 * std::max(1.0, u_sum));  // the bias's KKT condition
      for (size_t i = 0; i < n; ++i) {  // margins above 1: u = 0; below 1: u = 1
        const double margin = d.y[i] * tight.margins[i];
        if (margin > 1 + 1e-4) CHECK(tight.dual[i] <= 1e-4);
        if (margin < 1 - 1e-4) CHECK(tight.dual[i] >= 1 - 1e-4);
      }
      o.tolerance = 1e-3;
      const FistaResult loose = solve_licp_coordinate(X, d.y, G, o, budget);
      CHECK(loose.converged);
      const double p_loose = fgm::test::esvm_objective(d, G, lambda, ridge, loose.w, loose.bias);
      CHECK(loose.duality_gap <= 1e-3 * std::max(1.0, p_loose));
      CHECK(p_loose - twin.primal >= -1e-9 * twin.primal);
      CHECK(p_loose - twin.primal <= loose.duality_gap + 1e-9 * twin.primal);
      // Without the bias: b = 0 and a larger optimum (b = 0 is one choice).
      o = esvm_options(lambda, ridge, false);
      o.tolerance = 1e-10;
      const FistaResult plain = solve_licp_coordinate(X, d.y, G, o, budget);
      CHECK(plain.bias == 0.0);
      CHECK(plain.objective >= twin.primal - 1e-9 * twin.primal);
    }
}

// One group holding every column (‖w‖_e² = ‖w‖₁²: E-SVM is then the ℓ1 hinge
// SVM plus the ridge, up to λ's parametrisation) and a large μ = λ/α, the
// regime where Ω*'s curvature along the group's sign vector, 1/(α(1 + μ|S|)),
// is far below 1/α: the coordinate ascent still reaches the twin's optimum
// and certifies it, with and without the bias.
TEST_CASE("licp with one group of every column and a large lambda/ridge reaches the twin's optimum",
          "[exclusive][bias][licp][one_group]") {
  MemoryBudget budget(1 << 28);
  const size_t n = 30, p = 24;
  size_t widest = 0;
  for (int kind = 0; kind < 4; ++kind)
    for (const auto& [lambda, ridge] : {std::pair{1.0, 0.05}, std::pair{4.0, 0.04}})
      for (bool bias : {false, true}) {
        INFO("kind " << kind << " lambda " << lambda << " ridge " << ridge << " bias " << bias);
        const auto d = unbalanced_problem(kind, 90 + kind, n, p);
        const ExclusiveGroups G = contiguous_groups(p, p, budget);
        REQUIRE(G.count() == 1);
        const Twin twin = twin_esvm(d, G, lambda, ridge, bias);
        REQUIRE(twin.primal > 0);
        InMemoryDesign X = InMemoryDesign::from_dense(d.n, d.p, d.x, budget);
        FistaOptions o = esvm_options(lambda, ridge, bias);
        o.tolerance = 1e-10;
        const FistaResult r = solve_licp_coordinate(X, d.y, G, o, budget);
        CHECK(r.converged);
        const double objective = fgm::test::esvm_objective(d, G, lambda, ridge, r.w, r.bias);
        CHECK(objective == Approx(r.objective).epsilon(1e-9));
        CHECK(std::fabs(objective - twin.primal) <= 1e-8 * std::max(1.0, twin.primal));
        CHECK(objective - twin.primal <= r.duality_gap + 1e-9 * twin.primal);
        size_t support = 0;
        for (double v : r.w) support += v != 0;
        CHECK(support >= 1);
        widest = std::max(widest, support);
      }
  CHECK(widest >= 10);  // many weights share the group somewhere: μ|S| in the hundreds
}

// The working set (full problem checked on every column, restricted problems
// by coordinate ascent) with the bias reaches the same optimum, certified.
TEST_CASE("the working-set E-SVM fit with a bias reaches the twin's optimum", "[exclusive][bias][licp]") {
  MemoryBudget budget(1 << 28);
  const auto d = unbalanced_problem(3, 81, 40, 60);
  const ExclusiveGroups G = contiguous_groups(d.p, 10, budget);
  const Twin twin = twin_esvm(d, G, 2.0, 0.5, true);
  REQUIRE(twin.primal > 0);
  InMemoryDesign X = InMemoryDesign::from_dense(d.n, d.p, d.x, budget);
  FistaOptions o = esvm_options(2.0, 0.5, true);
  o.tolerance = 1e-9;
  WorkingSetOptions ws;
  ws.growth = 5;
  const ExclusiveFit fit = fit_exclusive(X, d.y, G, o, ws, budget);
  CHECK(fit.converged);
  CHECK(fit.rounds > 1);
  const double objective = fgm::test::esvm_objective(d, G, 2.0, 0.5, fit.w, fit.bias);
  CHECK(std::fabs(objective - twin.primal) <= 2e-9 * twin.primal);
  CHECK(objective - twin.primal <= fit.last_solve.duality_gap + 1e-9 * twin.primal);
}

// The degenerate regime of the planted set (more columns than rows, separable:
// more free duals than nonzero weights, where the solver leans on its damped
// Newton steps): the solve at 10⁻¹⁰ reaches the twin's optimum, and at 10⁻³
// its reported gap bounds P(w) − P*, with and without the bias.
TEST_CASE("licp's gap bounds its true suboptimality when the dual is degenerate (p > n, separable)",
          "[exclusive][bias][licp]") {
  MemoryBudget budget(1 << 28);
  for (int kind = 0; kind < 4; ++kind)
    for (bool with_bias : {false, true}) {
      INFO("kind " << kind << " bias " << with_bias);
      const auto d = unbalanced_problem(kind, 30 + kind, 40, 120);
      const ExclusiveGroups G = contiguous_groups(d.p, 12, budget);
      const Twin twin = twin_esvm(d, G, 1.0, 1.0, with_bias);
      REQUIRE(twin.primal > 0);
      InMemoryDesign X = InMemoryDesign::from_dense(d.n, d.p, d.x, budget);
      FistaOptions o = esvm_options(1.0, 1.0, with_bias);
      for (double tolerance : {1e-10, 1e-3}) {
        o.tolerance = tolerance;
        const FistaResult r = solve_licp_coordinate(X, d.y, G, o, budget);
        CHECK(r.converged);
        const double objective = fgm::test::esvm_objective(d, G, 1.0, 1.0, r.w, r.bias);
        CHECK(objective == Approx(r.objective).epsilon(1e-9));
        CHECK(objective - twin.primal >= -1e-9 * twin.primal);
        CHECK(objective - twin.primal <= r.duality_gap + 1e-9 * twin.primal);
        if (tolerance < 1e-6) CHECK(std::fabs(objective - twin.primal) <= 1e-8 * twin.primal);
      }
    }
}

// pcp and locp with the bias: the optimality conditions of (7) and of b
// (Σ_i ∂f/∂z_i = 0) from the dense matrix; both reach one optimum; directly
// and through the working set.
TEST_CASE("pcp and locp with a bias satisfy the optimality conditions of w and b", "[exclusive][bias][fista]") {
  MemoryBudget budget(1 << 28);
  for (ExclusiveLoss loss : {ExclusiveLoss::kSquared, ExclusiveLoss::kLogistic})
    for (int kind = 0; kind < 4; ++kind) {
      INFO(loss_name(loss) << " kind " << kind);
      auto d = unbalanced_problem(kind, 50 + kind, 36, 18);
      if (loss == ExclusiveLoss::kSquared)
        for (auto& y : d.y) y = 2.0 * y + 3.0;  // an offset only b can fit
      const ExclusiveGroups G = contiguous_groups(d.p, 4, budget);
      InMemoryDesign X = InMemoryDesign::from_dense(d.n, d.p, d.x, budget);
      FistaOptions o;
      o.loss = loss;
      o.lambda = 0.5;
      o.bias = true;
      o.tolerance = 1e-11;
      o.max_iterations = 400000;
      o.algorithm = Algorithm::kPcp;
      const FistaResult pcp = solve_exclusive(X, d.y, G, o, budget);
      o.algorithm = Algorithm::kLocp;
      const FistaResult locp = solve_exclusive(X, d.y, G, o, budget);
      CHECK(fgm::test::kkt_violation(d, G, loss, o.lambda, pcp.w, pcp.bias, true) <= 1e-6);
      CHECK(fgm::test::kkt_violation(d, G, loss, o.lambda, locp.w, locp.bias, true) <= 1e-6);
      CHECK(pcp.objective == Approx(locp.objective).epsilon(1e-8));
      CHECK(pcp.bias == Approx(locp.bias).epsilon(1e-4));  // b is flat-ish near separable data
      CHECK(pcp.bias != 0.0);
      // Without the bias, b's condition fails (the offset is not fitted).
      o.bias = false;
      const FistaResult plain = solve_exclusive(X, d.y, G, o, budget);
      CHECK(plain.bias == 0.0);
      CHECK(fgm::test::kkt_violation(d, G, loss, o.lambda, plain.w, 0.0, true) > 1e-3);
      CHECK(plain.objective > locp.objective);
      // The working set with the bias: the same optimum.
      o.bias = true;
      WorkingSetOptions ws;
      ws.growth = 3;
      ws.kkt_tolerance = 1e-9;
      const ExclusiveFit fit = fit_exclusive(X, d.y, G, o, ws, budget);
      CHECK(fgm::test::kkt_violation(d, G, loss, o.lambda, fit.w, fit.bias, true) <= 1e-6);
    }
}
