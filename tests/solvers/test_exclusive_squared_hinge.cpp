// E-SVM with the squared hinge (ExclusiveLoss::kSquaredHinge, licp's
// coordinate solver, licp_coordinate.h) against an independent check: a
// PRIMAL twin written here, accelerated proximal gradient on
//   Σ_i max(0, 1 − y_i(x_iᵀw + b))² + (α/2)‖w‖² + (λ/2)Σ_g ‖w_g‖₁²
// (smooth loss + ridge; the prox per group by Algorithm 2's sorting
// projection; b an unpenalised variable), run until its objective stalls in
// long double. It never touches the dual, so it checks the dual's derivation
// (the −u²/4 term, u ≥ 0 unbounded) as well as the solver. Binary, integer,
// tied and Gaussian designs, unbalanced classes, with and without the bias.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
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
using fgm::test::esvm_objective;
using fgm::test::unbalanced_problem;

namespace {

struct PrimalTwin {
  std::vector<double> w;
  double bias = 0, primal = 0;
};

// FISTA with gradient restarts on the primal; step 1/L, L = 2‖[X 1]‖_F² + α
// (a bound on the smooth part's curvature). Stops when 2,000 iterations lower
// the objective by less than 10⁻¹⁵ relative (linear convergence: α > 0).
PrimalTwin primal_twin(const DenseProblem& d, const ExclusiveGroups& G, double lambda, double ridge, bool with_bias) {
  const size_t n = d.n, p = d.p;
  double frobenius = with_bias ? double(n) : 0.0;
  for (double x : d.x) frobenius += x * x;
  const double L = 2 * frobenius + ridge;
  ProjectionScratch scratch;
  std::vector<double> w(p, 0.0), w_old = w, w_bar = w, grad(p), c, out;
  double b = 0, b_old = 0, b_bar = 0, t = 1;
  double best = std::numeric_limits<double>::infinity(), checkpoint = best;
  PrimalTwin result;
  for (int k = 0; k < 2000000; ++k) {
    std::fill(grad.begin(), grad.end(), 0.0);
    double grad_b = 0;
    for (size_t i = 0; i < n; ++i) {
      double z = b_bar;
      for (size_t j = 0; j < p; ++j) z += d.at(i, j) * w_bar[j];
      const double r = d.y[i] * z < 1 ? -2.0 * d.y[i] * (1.0 - d.y[i] * z) : 0.0;
      for (size_t j = 0; j < p; ++j) grad[j] += r * d.at(i, j);
      grad_b += r;
    }
    std::vector<double> next(p);
    for (size_t j = 0; j < p; ++j) next[j] = w_bar[j] - (grad[j] + ridge * w_bar[j]) / L;
    for (uint64_t g = 0; g < G.count(); ++g) {
      c.clear();
      for (uint64_t q = G.member_ptr[g]; q < G.member_ptr[g + 1]; ++q) c.push_back(next[G.members[q]]);
      out.resize(c.size());
      prox_l1_squared(c.data(), c.size(), lambda / L, out.data(), scratch);
      for (uint64_t q = G.member_ptr[g]; q < G.member_ptr[g + 1]; ++q) next[G.members[q]] = out[q - G.member_ptr[g]];
    }
    const double b_next = with_bias ? b_bar - grad_b / L : 0.0;
    double score = (b_bar - b_next) * (b_next - b);  // restart when the step turns against the momentum
    for (size_t j = 0; j < p; ++j) score += (w_bar[j] - next[j]) * (next[j] - w[j]);
    const double t_next = 0.5 + 0.5 * std::sqrt(1 + 4 * t * t);
    const double beta = score > 0 ? 0.0 : (t - 1) / t_next;
    t = score > 0 ? 1.0 : t_next;
    w_old = w, w = next, b_old = b, b = b_next;
    for (size_t j = 0; j < p; ++j) w_bar[j] = w[j] + beta * (w[j] - w_old[j]);
    b_bar = b + beta * (b - b_old);
    if (k % 2000 == 1999) {
      const double value = esvm_objective(d, G, lambda, ridge, w, b, ExclusiveLoss::kSquaredHinge);
      if (value < best) best = value, result.w = w, result.bias = b, result.primal = value;
      if (checkpoint - best <= 1e-15 * best) return result;
      checkpoint = best;
    }
  }
  return {};  // not settled: the callers REQUIRE a positive primal
}

FistaOptions squared_hinge_options(double lambda, double ridge, bool bias) {
  FistaOptions o;
  o.algorithm = Algorithm::kLicp;
  o.loss = ExclusiveLoss::kSquaredHinge;
  o.lambda = lambda;
  o.ridge = ridge;
  o.bias = bias;
  o.max_iterations = 200000;
  return o;
}

}  // namespace

TEST_CASE("best_squared_hinge_bias is the squared-hinge sum's minimiser found by ternary search",
          "[exclusive][bias][squared_hinge]") {
  for (int kind = 0; kind < 4; ++kind)
    for (double shift : {0.0, 3.0, -3.0}) {  // shifts make one class's rows all inactive at the optimum
      INFO("kind " << kind << " shift " << shift);
      const auto d = unbalanced_problem(kind, 190 + kind, 25, 6, true);
      std::vector<double> z(d.n);
      for (size_t i = 0; i < d.n; ++i)
        z[i] = (kind == 1 ? std::round(d.at(i, 0)) : d.at(i, 0) + 0.3 * d.at(i, 1)) + shift * d.y[i];
      auto value = [&](long double b) {
        long double s = 0;
        for (size_t i = 0; i < d.n; ++i) {
          const long double slack = std::max(0.0L, 1.0L - d.y[i] * (z[i] + b));
          s += slack * slack;
        }
        return s;
      };
      long double low = -100, high = 100;  // convex: ternary search
      for (int it = 0; it < 400; ++it) {
        const long double a = low + (high - low) / 3, c = high - (high - low) / 3;
        (value(a) < value(c) ? high : low) = value(a) < value(c) ? c : a;
      }
      const double b = best_squared_hinge_bias(d.y, z.data());
      CHECK(double(value(b)) <= double(value(0.5L * (low + high))) + 1e-12);
      if (value(0.5L * (low + high)) > 1e-9) CHECK(b == Approx(double(0.5L * (low + high))).margin(1e-6));
    }
  // Separable with room: every b in [−1, 1] has zero loss; the one nearest 0.
  const std::vector<double> y{1, -1};
  const std::vector<double> z{2.0, -2.0};
  CHECK(best_squared_hinge_bias(y, z.data()) == 0.0);
  const std::vector<double> z_shifted{3.0, 0.5};  // zero loss for b ∈ [−2, −1.5]
  CHECK(best_squared_hinge_bias(y, z_shifted.data()) == -1.5);
  const std::vector<double> one_class{1, 1, 1};  // b ≥ 1 − min z = 1.5 minimises; the one nearest 0
  const std::vector<double> z_one{-0.5, 2.0, 0.0};
  CHECK(best_squared_hinge_bias(one_class, z_one.data()) == 1.5);
}

// The coordinate solve at 10⁻¹⁰ reaches the primal twin's optimum (objective
// and weights); at 10⁻³ its reported gap bounds the true suboptimality
// P(w, b) − P*; with the bias the returned dual keeps yᵀu = 0; the dual is
// u_i = 2·max(0, 1 − y_i(x_iᵀw + b)) at the optimum (above 1 for some rows:
// the box [0, 1] of the hinge would be wrong here).
TEST_CASE("licp with the squared hinge reaches the primal twin's optimum and its gap is a bound",
          "[exclusive][licp][squared_hinge]") {
  MemoryBudget budget(1 << 28);
  const size_t n = 30, p = 24;
  bool some_dual_above_one = false;
  for (int kind = 0; kind < 4; ++kind)
    for (const auto& [lambda, ridge] : {std::pair{1.0, 1.0}, std::pair{0.5, 0.2}, std::pair{4.0, 0.04}})
      for (bool bias : {false, true}) {
        INFO("kind " << kind << " lambda " << lambda << " ridge " << ridge << " bias " << bias);
        const auto d = unbalanced_problem(kind, 70 + kind, n, p, true);
        // The third setting: one group of every column (the ℓ1 SVM plus the ridge) and two ungrouped columns.
        std::vector<std::vector<uint64_t>> lists;
        if (lambda == 4.0) {
          lists.emplace_back();
          for (uint64_t j = 0; j + 2 < p; ++j) lists.back().push_back(j);
        }
        const ExclusiveGroups G = lambda == 4.0 ? make_groups(p, lists, budget) : contiguous_groups(p, 6, budget);
        const PrimalTwin twin = primal_twin(d, G, lambda, ridge, bias);
        REQUIRE(twin.primal > 0);
        InMemoryDesign X = InMemoryDesign::from_dense(d.n, d.p, d.x, budget);
        FistaOptions o = squared_hinge_options(lambda, ridge, bias);
        o.tolerance = 1e-10;
        const FistaResult tight = solve_licp_coordinate(X, d.y, G, o, budget);
        CHECK(tight.converged);
        if (!bias) CHECK(tight.bias == 0.0);
        const double p_tight = esvm_objective(d, G, lambda, ridge, tight.w, tight.bias, ExclusiveLoss::kSquaredHinge);
        CHECK(p_tight == Approx(tight.objective).epsilon(1e-9));
        CHECK(std::fabs(p_tight - twin.primal) <= 1e-8 * std::max(1.0, twin.primal));
        double distance = 0, scale = 0;
        for (size_t j = 0; j < p; ++j) distance = std::max(distance, std::fabs(tight.w[j] - twin.w[j])),
                                       scale = std::max(scale, std::fabs(twin.w[j]));
        CHECK(distance <= 1e-3 * std::max(scale, 1e-3));
        double yu = 0, u_sum = 0;
        for (size_t i = 0; i < n; ++i) {
          yu += d.y[i] * tight.dual[i], u_sum += tight.dual[i];
          const double slack = std::max(0.0, 1.0 - d.y[i] * tight.margins[i]);
          CHECK(tight.dual[i] == Approx(2 * slack).margin(1e-3));
          some_dual_above_one |= tight.dual[i] > 1.1;
        }
        if (bias) CHECK(std::fabs(yu) <= 1e-12 * std::max(1.0, u_sum));
        o.tolerance = 1e-3;
        const FistaResult loose = solve_licp_coordinate(X, d.y, G, o, budget);
        CHECK(loose.converged);
        const double p_loose = esvm_objective(d, G, lambda, ridge, loose.w, loose.bias, ExclusiveLoss::kSquaredHinge);
        CHECK(p_loose == Approx(loose.objective).epsilon(1e-9));
        CHECK(loose.duality_gap <= 1e-3 * std::max(1.0, p_loose));
        CHECK(p_loose - twin.primal >= -1e-9 * twin.primal);
        CHECK(p_loose - twin.primal <= loose.duality_gap + 1e-9 * twin.primal);
        // The dispatcher takes the coordinate solver for disjoint groups in memory.
        const FistaResult dispatched = solve_exclusive(X, d.y, G, o, budget);
        CHECK(dispatched.w == loose.w);
      }
  CHECK(some_dual_above_one);
}

// The degenerate regime of the planted set (p > n, nearly separable) and the
// working set (full problem checked on every column, restricted problems by
// the coordinate solver, the full gap certified with the squared hinge's
// dual): the twin's optimum, with and without the bias.
TEST_CASE("the working-set E-SVM fit with the squared hinge reaches the primal twin's optimum (p > n)",
          "[exclusive][licp][squared_hinge]") {
  MemoryBudget budget(1 << 28);
  for (int kind = 0; kind < 4; ++kind)
    for (bool bias : {false, true}) {
      INFO("kind " << kind << " bias " << bias);
      const auto d = unbalanced_problem(kind, 130 + kind, 40, 120, true);
      const ExclusiveGroups G = contiguous_groups(d.p, 12, budget);
      const PrimalTwin twin = primal_twin(d, G, 2.0, 0.5, bias);
      REQUIRE(twin.primal > 0);
      InMemoryDesign X = InMemoryDesign::from_dense(d.n, d.p, d.x, budget);
      FistaOptions o = squared_hinge_options(2.0, 0.5, bias);
      for (double tolerance : {1e-10, 1e-3}) {
        o.tolerance = tolerance;
        WorkingSetOptions ws;
        ws.growth = 5;
        const ExclusiveFit fit = fit_exclusive(X, d.y, G, o, ws, budget);
        CHECK(fit.converged);
        CHECK(fit.rounds > 1);
        const double value = esvm_objective(d, G, 2.0, 0.5, fit.w, fit.bias, ExclusiveLoss::kSquaredHinge);
        CHECK(value == Approx(fit.last_solve.objective).epsilon(1e-9));
        CHECK(value - twin.primal >= -1e-9 * twin.primal);
        CHECK(value - twin.primal <= fit.last_solve.duality_gap + 1e-9 * twin.primal);
        if (tolerance < 1e-6) CHECK(std::fabs(value - twin.primal) <= 1e-8 * twin.primal);
      }
    }
}

// The squared hinge is an E-SVM loss: pcp refuses it, naming both keys (the
// FISTA licp solves it: test_exclusive_fista_licp_losses.cpp).
TEST_CASE("the squared hinge with pcp is refused naming exclusive.algorithm", "[exclusive][licp][squared_hinge]") {
  MemoryBudget budget(1 << 28);
  const auto d = unbalanced_problem(3, 5, 20, 8, true);
  InMemoryDesign X = InMemoryDesign::from_dense(d.n, d.p, d.x, budget);
  FistaOptions pcp = squared_hinge_options(1.0, 1.0, false);
  pcp.algorithm = Algorithm::kPcp;
  CHECK_THROWS_WITH(solve_exclusive(X, d.y, contiguous_groups(d.p, 4, budget), pcp, budget),
                    Catch::Contains("does not go with exclusive.algorithm = \"pcp\""));
}
