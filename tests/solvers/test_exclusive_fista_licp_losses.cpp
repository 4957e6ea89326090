// The FISTA licp (Fista-licp on the dual (11): overlapping groups,
// exclusive.working_set = false, partitioned stores) with the squared hinge
// and with the bias, against independent checks:
//  * project_dual_with_bias against a brute-force projection (every
//    breakpoint of φ tried in long double);
//  * a PRIMAL twin written here: accelerated projected gradient on the split
//    w = w₊ − w₋, w± ≥ 0, where Σ_g (1ᵀ(w₊ + w₋)_g)² is smooth, so the twin
//    handles overlapping groups and never sees the dual (the squared hinge);
//  * the coordinate solver's optimum (disjoint groups), itself tested against
//    twins in test_exclusive_squared_hinge.cpp and test_exclusive_bias.cpp;
//  * for the hinge on overlapping groups, no better point along any
//    coordinate of (w, b);
//  * Σ y_i u_i = 0 and the margins' complementarity at the returned dual.
// Binary, integer, tied and Gaussian designs with unbalanced classes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/memory_budget.h"
#include "solvers/exclusive/design.h"
#include "solvers/exclusive/fista_exclusive.h"
#include "solvers/exclusive/licp_coordinate.h"
#include "solvers/exclusive/working_set.h"
#include "tests/solvers/exclusive_test_problems.h"

using namespace fgm;
using namespace fgm::exclusive;
using fgm::test::contiguous_groups;
using fgm::test::DenseProblem;
using fgm::test::esvm_objective;
using fgm::test::unbalanced_problem;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The projection onto {0 ≤ u ≤ upper, yᵀu = 0} by brute force: φ(τ) =
// Σ y_i clip(v_i − τy_i) in long double at every breakpoint (v_i y_i and
// (v_i − upper) y_i), the root interpolated on the interval where φ changes sign.
std::vector<double> brute_force_projection(const std::vector<double>& y, const std::vector<double>& v, double upper) {
  auto phi = [&](long double t) {
    long double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += y[i] * std::clamp<long double>(v[i] - t * y[i], 0.0L, upper);
    return s;
  };
  std::vector<long double> points;
  for (size_t i = 0; i < y.size(); ++i) {
    points.push_back((long double)v[i] * y[i]);
    if (std::isfinite(upper)) points.push_back(((long double)v[i] - upper) * y[i]);
  }
  std::sort(points.begin(), points.end());
  long double tau = points.back();  // φ ≤ 0 past every breakpoint... unless φ > 0 there
  if (phi(points.front()) <= 0) tau = points.front();
  for (size_t k = 0; k + 1 < points.size(); ++k) {
    const long double a = phi(points[k]), b = phi(points[k + 1]);
    if (a >= 0 && b <= 0) {
      tau = a == b ? points[k] : points[k] + a * (points[k + 1] - points[k]) / (a - b);
      break;
    }
  }
  std::vector<double> u(y.size());
  for (size_t i = 0; i < y.size(); ++i) u[i] = double(std::clamp<long double>(v[i] - tau * y[i], 0.0L, upper));
  return u;
}

// A design of n empty rows: project_dual_with_bias only needs its row sums.
InMemoryDesign rows_only(size_t n, MemoryBudget& budget) {
  return InMemoryDesign::from_dense(n, 1, std::vector<double>(n, 0.0), budget);
}

struct PrimalTwin {
  std::vector<double> w;
  double bias = 0, primal = 0;
};

// The squared-hinge E-SVM in the split variables: min over w₊, w₋ ≥ 0 (and b)
// of Σ_i max(0, 1 − y_i(x_iᵀ(w₊ − w₋) + b))² + (α/2)‖w₊ − w₋‖² +
// (λ/2)Σ_g (1ᵀ(w₊ + w₋)_g)², smooth, by FISTA with gradient restarts and the
// fixed step 1/L (L a bound on the curvature). At a minimiser w₊ ⊙ w₋ = 0, so
// its value is the E-SVM optimum. Stops when 2,000 iterations lower the
// objective by less than 10⁻¹⁵ relative.
PrimalTwin split_primal_twin(const DenseProblem& d, const ExclusiveGroups& G, double lambda, double ridge,
                             bool with_bias) {
  const size_t n = d.n, p = d.p;
  double frobenius = with_bias ? double(n) : 0.0;
  for (double x : d.x) frobenius += 2 * x * x;
  double group_bound = 0;
  for (uint64_t g = 0; g < G.count(); ++g) group_bound += 2.0 * double(G.size(g));
  const double L = 2 * frobenius + 2 * ridge + lambda * group_bound;
  std::vector<double> x(2 * p, 0.0), x_old = x, bar = x, grad(2 * p);
  double b = 0, b_old = 0, b_bar = 0, t = 1;
  double best = kInf, checkpoint = best;
  PrimalTwin result;
  std::vector<double> w(p), group_sum(G.count());
  for (int k = 0; k < 3000000; ++k) {
    for (size_t j = 0; j < p; ++j) w[j] = bar[j] - bar[p + j];
    std::fill(grad.begin(), grad.end(), 0.0);
    double grad_b = 0;
    for (size_t i = 0; i < n; ++i) {
      double z = b_bar;
      for (size_t j = 0; j < p; ++j) z += d.at(i, j) * w[j];
      const double r = d.y[i] * z < 1 ? -2.0 * d.y[i] * (1.0 - d.y[i] * z) : 0.0;
      for (size_t j = 0; j < p; ++j) grad[j] += r * d.at(i, j);
      grad_b += r;
    }
    for (uint64_t g = 0; g < G.count(); ++g) {
      group_sum[g] = 0;
      for (uint64_t q = G.member_ptr[g]; q < G.member_ptr[g + 1]; ++q)
        group_sum[g] += bar[G.members[q]] + bar[p + G.members[q]];
    }
    std::vector<double> next(2 * p);
    for (size_t j = 0; j < p; ++j) {
      double penalty = 0;
      for (uint64_t q = G.membership_ptr[j]; q < G.membership_ptr[j + 1]; ++q) penalty += lambda * group_sum[G.memberships[q]];
      next[j] = std::max(0.0, bar[j] - (grad[j] + ridge * w[j] + penalty) / L);
      next[p + j] = std::max(0.0, bar[p + j] - (-grad[j] - ridge * w[j] + penalty) / L);
    }
    const double b_next = with_bias ? b_bar - grad_b / L : 0.0;
    double score = (b_bar - b_next) * (b_next - b);
    for (size_t j = 0; j < 2 * p; ++j) score += (bar[j] - next[j]) * (next[j] - x[j]);
    const double t_next = 0.5 + 0.5 * std::sqrt(1 + 4 * t * t);
    const double beta = score > 0 ? 0.0 : (t - 1) / t_next;
    t = score > 0 ? 1.0 : t_next;
    x_old = x, x = next, b_old = b, b = b_next;
    for (size_t j = 0; j < 2 * p; ++j) bar[j] = x[j] + beta * (x[j] - x_old[j]);
    b_bar = b + beta * (b - b_old);
    if (k % 2000 == 1999) {
      std::vector<double> wk(p);
      for (size_t j = 0; j < p; ++j) wk[j] = x[j] - x[p + j];
      const double value = esvm_objective(d, G, lambda, ridge, wk, b, ExclusiveLoss::kSquaredHinge);
      if (value < best) best = value, result.w = wk, result.bias = b, result.primal = value;
      if (checkpoint - best <= 1e-15 * best) return result;
      checkpoint = best;
    }
  }
  return {};  // not settled: the callers REQUIRE a positive primal
}

FistaOptions fista_licp(ExclusiveLoss loss, double lambda, double ridge, bool bias, double tolerance) {
  FistaOptions o;
  o.algorithm = Algorithm::kLicp;
  o.loss = loss;
  o.lambda = lambda;
  o.ridge = ridge;
  o.bias = bias;
  o.tolerance = tolerance;
  o.max_iterations = 400000;
  o.licp_coordinate = false;  // FISTA on (11) even for disjoint groups in memory
  return o;
}

// Overlapping groups over p columns, two columns in no group.
ExclusiveGroups overlapping_groups(size_t p, MemoryBudget& budget) {
  std::vector<std::vector<uint64_t>> lists;
  for (uint64_t start = 0; start + 2 < p; start += 4) {
    lists.emplace_back();
    for (uint64_t j = start; j < std::min<uint64_t>(start + 6, p - 2); ++j) lists.back().push_back(j);
  }
  ExclusiveGroups G = make_groups(p, lists, budget);
  REQUIRE_FALSE(G.disjoint);
  return G;
}

// Σ y_i u_i = 0 (the bias) and the dual's complementarity with the margins:
// squared hinge u_i = 2·max(0, 1 − y_i z_i); hinge u = 0 above the margin, 1 below.
void check_dual(const DenseProblem& d, ExclusiveLoss loss, bool bias, const FistaResult& r, double tolerance) {
  double yu = 0, u_sum = 0;
  for (size_t i = 0; i < d.n; ++i) {
    yu += d.y[i] * r.dual[i], u_sum += r.dual[i];
    CHECK(r.dual[i] >= 0);
    const double margin = d.y[i] * r.margins[i];
    if (loss == ExclusiveLoss::kSquaredHinge) {
      CHECK(r.dual[i] == Approx(2 * std::max(0.0, 1.0 - margin)).margin(tolerance));
    } else {
      CHECK(r.dual[i] <= 1);
      if (margin > 1 + tolerance) CHECK(r.dual[i] <= tolerance);
      if (margin < 1 - tolerance) CHECK(r.dual[i] >= 1 - tolerance);
    }
  }
  if (bias) CHECK(std::fabs(yu) <= 1e-12 * std::max(1.0, u_sum));
}

}  // namespace

TEST_CASE("project_dual_with_bias is the brute-force projection onto the box and y'u = 0",
          "[exclusive][licp][bias][projection]") {
  MemoryBudget budget(1 << 26);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_int_distribution<int> small(-3, 3);
  const size_t n = 41;
  InMemoryDesign X = rows_only(n, budget);
  for (int kind = 0; kind < 4; ++kind)
    for (int labels = 0; labels < 3; ++labels)  // balanced, unbalanced, one class
      for (double upper : {1.0, kInf})
        for (double start : {0.0, 7.5, -3.0}) {
          INFO("kind " << kind << " labels " << labels << " upper " << upper << " start " << start);
          std::vector<double> y(n), v(n);
          for (size_t i = 0; i < n; ++i) {
            y[i] = labels == 2 ? 1.0 : labels == 1 ? (i % 3 ? 1.0 : -1.0) : (i % 2 ? 1.0 : -1.0);
            v[i] = kind == 0 ? (normal(rng) > 0 ? 1.5 : -0.5)  // binary
                   : kind == 1 ? double(small(rng))            // integer
                   : kind == 2 ? 0.25 * double(i % 4)          // tied: four values
                               : 2 * normal(rng);              // Gaussian
          }
          const std::vector<double> expected = brute_force_projection(y, v, upper);
          std::vector<double> u = v;
          project_dual_with_bias(X, y, u.data(), upper, start);
          long double yu = 0, total = 0, distance = 0, expected_distance = 0;
          for (size_t i = 0; i < n; ++i) {
            CHECK(u[i] >= 0);
            CHECK(u[i] <= upper);
            CHECK(u[i] == Approx(expected[i]).margin(1e-12));
            yu += y[i] * u[i], total += u[i];
            distance += ((long double)u[i] - v[i]) * (u[i] - v[i]);
            expected_distance += ((long double)expected[i] - v[i]) * (expected[i] - v[i]);
          }
          CHECK(double(std::fabs(yu)) <= 1e-13 * std::max(1.0, double(total)));
          CHECK(double(distance) <= double(expected_distance) * (1 + 1e-12) + 1e-24);
        }
}

// The FISTA licp with the squared hinge, disjoint and overlapping groups,
// with and without the bias, at 10⁻¹⁰ reaches the split primal twin's
// optimum (to 10⁻⁸) and its weights; the dual is u = 2·slack (some u > 1:
// the hinge's box would be wrong) and keeps yᵀu = 0 with the bias; at 10⁻³
// the reported gap bounds P − P*.
TEST_CASE("the FISTA licp with the squared hinge reaches the primal twin's optimum, overlapping groups included",
          "[exclusive][licp][squared_hinge][fista]") {
  MemoryBudget budget(1 << 28);
  const size_t n = 30, p = 22;
  bool some_dual_above_one = false;
  for (int kind = 0; kind < 4; ++kind)
    for (bool overlapping : {false, true})
      for (bool bias : {false, true}) {
        const double lambda = overlapping ? 0.7 : 1.0, ridge = overlapping ? 0.3 : 1.0;
        INFO("kind " << kind << " overlapping " << overlapping << " bias " << bias);
        const auto d = unbalanced_problem(kind, 170 + kind, n, p, true);
        const ExclusiveGroups G = overlapping ? overlapping_groups(p, budget) : contiguous_groups(p, 5, budget);
        const PrimalTwin twin = split_primal_twin(d, G, lambda, ridge, bias);
        REQUIRE(twin.primal > 0);
        InMemoryDesign X = InMemoryDesign::from_dense(d.n, d.p, d.x, budget);
        const FistaOptions o = fista_licp(ExclusiveLoss::kSquaredHinge, lambda, ridge, bias, 1e-10);
        const FistaResult tight = solve_exclusive(X, d.y, G, o, budget);
        CHECK(tight.converged);
        if (!bias) CHECK(tight.bias == 0.0);
        const double value = esvm_objective(d, G, lambda, ridge, tight.w, tight.bias, ExclusiveLoss::kSquaredHinge);
        CHECK(value == Approx(tight.objective).epsilon(1e-9));
        CHECK(std::fabs(value - twin.primal) <= 1e-8 * std::max(1.0, twin.primal));
        double distance = 0, scale = 0;
        for (size_t j = 0; j < p; ++j)
          distance = std::max(distance, std::fabs(tight.w[j] - twin.w[j])), scale = std::max(scale, std::fabs(twin.w[j]));
        CHECK(distance <= 1e-3 * std::max(scale, 1e-3));
        if (bias) CHECK(tight.bias == Approx(twin.bias).margin(1e-3));
        check_dual(d, ExclusiveLoss::kSquaredHinge, bias, tight, 1e-3);
        for (double u : tight.dual) some_dual_above_one |= u > 1.1;
        const FistaResult loose = solve_exclusive(X, d.y, G, fista_licp(ExclusiveLoss::kSquaredHinge, lambda, ridge, bias, 1e-3), budget);
        CHECK(loose.converged);
        const double loose_value =
            esvm_objective(d, G, lambda, ridge, loose.w, loose.bias, ExclusiveLoss::kSquaredHinge);
        CHECK(loose.duality_gap <= 1e-3 * std::max(1.0, loose_value));
        CHECK(loose_value - twin.primal >= -1e-9 * twin.primal);
        CHECK(loose_value - twin.primal <= loose.duality_gap + 1e-9 * twin.primal);
      }
  CHECK(some_dual_above_one);
}

// Disjoint groups: the FISTA licp and the coordinate solver (two algorithms,
// two certificates) reach one optimum, for both losses, with and without
// the bias; the same through the working set with FISTA restricted solves
// (the partitioned stores' path).
TEST_CASE("the FISTA licp reaches the coordinate solver's optimum for both losses, with and without the bias",
          "[exclusive][licp][squared_hinge][bias][fista]") {
  MemoryBudget budget(1 << 28);
  for (ExclusiveLoss loss : {ExclusiveLoss::kSquaredHinge, ExclusiveLoss::kHinge})
    for (int kind = 0; kind < 4; ++kind)
      for (bool bias : {false, true}) {
        INFO(loss_name(loss) << " kind " << kind << " bias " << bias);
        const auto d = unbalanced_problem(kind, 210 + kind, 36, 48, true);
        const ExclusiveGroups G = contiguous_groups(d.p, 8, budget);
        InMemoryDesign X = InMemoryDesign::from_dense(d.n, d.p, d.x, budget);
        FistaOptions o = fista_licp(loss, 1.5, 0.5, bias, 1e-10);
        const FistaResult fista = solve_exclusive(X, d.y, G, o, budget);
        o.licp_coordinate = true;
        const FistaResult coordinate = solve_licp_coordinate(X, d.y, G, o, budget);
        CHECK(fista.converged);
        CHECK(coordinate.converged);
        const double f = esvm_objective(d, G, 1.5, 0.5, fista.w, fista.bias, loss);
        const double c = esvm_objective(d, G, 1.5, 0.5, coordinate.w, coordinate.bias, loss);
        CHECK(std::fabs(f - c) <= 1e-8 * std::max(1.0, c));
        check_dual(d, loss, bias, fista, 1e-4);
        // The working set, restricted problems by FISTA.
        o.licp_coordinate = false;
        o.tolerance = 1e-9;
        WorkingSetOptions ws;
        ws.growth = 4;
        const ExclusiveFit fit = fit_exclusive(X, d.y, G, o, ws, budget);
        CHECK(fit.converged);
        CHECK(fit.rounds > 1);
        const double value = esvm_objective(d, G, 1.5, 0.5, fit.w, fit.bias, loss);
        CHECK(value == Approx(fit.last_solve.objective).epsilon(1e-9));
        CHECK(std::fabs(value - c) <= 2e-9 * std::max(1.0, c));
        CHECK(value - c <= fit.last_solve.duality_gap + 1e-9 * c);
      }
}

// The hinge with the bias on overlapping groups (no closed-form w(u), no
// twin): certified at 10⁻¹⁰, no better point along any coordinate of (w, b),
// yᵀu = 0, complementarity; and b matters (without it the optimum is higher).
TEST_CASE("the FISTA licp with the hinge and a bias on overlapping groups cannot be improved along any coordinate",
          "[exclusive][licp][bias][fista]") {
  MemoryBudget budget(1 << 28);
  for (int kind = 0; kind < 4; ++kind) {
    INFO("kind " << kind);
    const auto d = unbalanced_problem(kind, 230 + kind, 40, 14);
    const ExclusiveGroups G = overlapping_groups(d.p, budget);
    InMemoryDesign X = InMemoryDesign::from_dense(d.n, d.p, d.x, budget);
    const FistaResult r = solve_exclusive(X, d.y, G, fista_licp(ExclusiveLoss::kHinge, 0.3, 0.1, true, 1e-10), budget);
    CHECK(r.converged);
    const double best = esvm_objective(d, G, 0.3, 0.1, r.w, r.bias, ExclusiveLoss::kHinge);
    CHECK(best == Approx(r.objective).epsilon(1e-10));
    CHECK(r.duality_gap <= 1e-10 * std::max(1.0, best));
    for (size_t j = 0; j <= d.p; ++j)
      for (double h : {1e-3, -1e-3, 1e-5, -1e-5}) {
        auto w = r.w;
        double b = r.bias;
        (j < d.p ? w[j] : b) += h;
        CHECK(esvm_objective(d, G, 0.3, 0.1, w, b, ExclusiveLoss::kHinge) >= best - 1e-8 * best);
      }
    check_dual(d, ExclusiveLoss::kHinge, true, r, 1e-4);
    const FistaResult plain = solve_exclusive(X, d.y, G, fista_licp(ExclusiveLoss::kHinge, 0.3, 0.1, false, 1e-10), budget);
    CHECK(plain.objective >= best - 1e-9 * best);
  }
}
