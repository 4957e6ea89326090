// Fista-pcp, Fista-locp and Fista-licp (seed 002) against independent checks:
// the optimality conditions of (7) evaluated from the dense matrix, agreement
// of the algorithms on one optimum, the E-SVM objective along every coordinate
// direction, and the O(1/k²) rate bound of FISTA (which the paper's printed
// momentum misses).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/memory_budget.h"
#include "solvers/exclusive/design.h"
#include "solvers/exclusive/fista_exclusive.h"
#include "solvers/exclusive/licp_coordinate.h"
#include "solvers/exclusive/cone_projection.h"
#include "tests/solvers/exclusive_test_problems.h"

using namespace fgm;
using namespace fgm::exclusive;
using fgm::test::contiguous_groups;
using fgm::test::dense_problem;
using fgm::test::valued_problem;

namespace {

FistaResult solve(const fgm::test::DenseProblem& d, const ExclusiveGroups& G, FistaOptions o, MemoryBudget& budget) {
  InMemoryDesign X = InMemoryDesign::from_dense(d.n, d.p, d.x, budget);
  return solve_exclusive(X, d.y, G, o, budget);
}

}  // namespace

TEST_CASE("Fista-pcp and Fista-locp reach the same optimum of (7), which satisfies its optimality conditions",
          "[exclusive][fista]") {
  MemoryBudget budget(1 << 28);
  for (ExclusiveLoss loss : {ExclusiveLoss::kSquared, ExclusiveLoss::kLogistic}) {
    const bool classification = loss == ExclusiveLoss::kLogistic;
    auto d = dense_problem(classification ? 21 : 22, 40, 18, classification, 0.7);
    ExclusiveGroups G = contiguous_groups(d.p, 4, budget);  // 4,4,4,4,2: unequal sizes
    for (double lambda : {0.05, 1.0, 20.0}) {
      FistaOptions o;
      o.loss = loss;
      o.lambda = lambda;
      o.tolerance = 1e-11;
      o.max_iterations = 200000;
      o.algorithm = Algorithm::kPcp;
      FistaResult pcp = solve(d, G, o, budget);
      o.algorithm = Algorithm::kLocp;
      FistaResult locp = solve(d, G, o, budget);
      INFO(loss_name(loss) << " lambda=" << lambda);
      CHECK(pcp.converged);
      CHECK(locp.converged);
      CHECK(fgm::test::kkt_violation(d, G, loss, lambda, pcp.w) < 1e-6);
      CHECK(fgm::test::kkt_violation(d, G, loss, lambda, locp.w) < 1e-6);
      CHECK(pcp.objective == Approx(locp.objective).epsilon(1e-9));
      for (size_t j = 0; j < d.p; ++j) CHECK(pcp.w[j] == Approx(locp.w[j]).margin(1e-5));
      // The exclusive norm keeps every group alive: each has a nonzero weight.
      for (uint64_t g = 0; g < G.count(); ++g) {
        double s = 0;
        for (uint64_t q = G.member_ptr[g]; q < G.member_ptr[g + 1]; ++q) s += std::fabs(pcp.w[G.members[q]]);
        CHECK(s > 0);
      }
    }
  }
}

TEST_CASE("Fista-pcp solves (7) with overlapping groups; Fista-locp refuses them", "[exclusive][fista]") {
  MemoryBudget budget(1 << 28);
  auto d = dense_problem(23, 30, 12, false, 0.8);
  ExclusiveGroups G = make_groups(d.p, {{0, 1, 2, 3, 4}, {3, 4, 5, 6, 7}, {7, 8, 9, 0}, {10, 11, 1}}, budget);
  REQUIRE_FALSE(G.disjoint);
  FistaOptions o;
  o.lambda = 0.5;
  o.tolerance = 1e-11;
  o.max_iterations = 200000;
  FistaResult pcp = solve(d, G, o, budget);
  CHECK(pcp.converged);
  CHECK(fgm::test::kkt_violation(d, G, ExclusiveLoss::kSquared, 0.5, pcp.w) < 1e-6);
  o.algorithm = Algorithm::kLocp;
  try {
    solve(d, G, o, budget);
    FAIL("locp accepted overlapping groups");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kConfig);
    CHECK(std::string(e.what()).find("exclusive.algorithm") != std::string::npos);
  }
}

// Where every margin y_i x_iᵀw* < 1 the hinge is linear near w*, and (10)
// equals Σ(1 − y_i x_iᵀw) + (α/2)‖w‖² + (λ/2)‖w‖_e² = ½‖√α w − c/√α‖² + (λ/2)‖w‖_e²
// + const with c = Xᵀy: a squared-loss problem (7) with design √α·I that
// Fista-pcp and Fista-locp solve. So all three algorithms meet on one optimum.
TEST_CASE("Fista-licp, Fista-pcp and Fista-locp agree on one optimum", "[exclusive][fista]") {
  MemoryBudget budget(1 << 28);
  auto d = dense_problem(24, 25, 15, true, 0.8);
  ExclusiveGroups G = contiguous_groups(d.p, 5, budget);
  const double alpha = 1.0, lambda = 400.0;
  FistaOptions o;
  o.algorithm = Algorithm::kLicp;
  o.loss = ExclusiveLoss::kHinge;
  o.lambda = lambda;
  o.ridge = alpha;
  o.tolerance = 1e-12;
  o.max_iterations = 200000;
  FistaResult licp = solve(d, G, o, budget);
  CHECK(licp.converged);
  CHECK(licp.duality_gap >= -1e-9);
  for (size_t i = 0; i < d.n; ++i) {
    double z = 0;
    for (size_t j = 0; j < d.p; ++j) z += d.at(i, j) * licp.w[j];
    REQUIRE(d.y[i] * z < 1.0);  // the linear regime the equivalence needs
  }
  fgm::test::DenseProblem sq;
  sq.n = sq.p = d.p;
  sq.x.assign(d.p * d.p, 0.0);
  sq.y.assign(d.p, 0.0);
  for (size_t j = 0; j < d.p; ++j) {
    sq.x[j * d.p + j] = std::sqrt(alpha);
    double c = 0;
    for (size_t i = 0; i < d.n; ++i) c += d.y[i] * d.at(i, j);
    sq.y[j] = c / std::sqrt(alpha);
  }
  FistaOptions s;
  s.lambda = lambda;
  s.tolerance = 1e-12;
  s.max_iterations = 200000;
  FistaResult pcp = solve(sq, G, s, budget);
  s.algorithm = Algorithm::kLocp;
  FistaResult locp = solve(sq, G, s, budget);
  size_t nonzero = 0;
  for (size_t j = 0; j < d.p; ++j) {
    CHECK(licp.w[j] == Approx(pcp.w[j]).margin(1e-6));
    CHECK(licp.w[j] == Approx(locp.w[j]).margin(1e-6));
    nonzero += pcp.w[j] != 0;
  }
  CHECK(nonzero > 0);
  CHECK(nonzero < d.p);  // the regulariser is active: some weights are exactly 0
}

TEST_CASE("Fista-licp's E-SVM solution cannot be improved along any coordinate", "[exclusive][fista]") {
  MemoryBudget budget(1 << 28);
  auto d = dense_problem(25, 40, 12, true, 0.8);
  ExclusiveGroups G = make_groups(d.p, {{0, 1, 2, 3}, {3, 4, 5, 6}, {6, 7, 8, 9, 10, 11}}, budget);  // overlapping
  FistaOptions o;
  o.algorithm = Algorithm::kLicp;
  o.loss = ExclusiveLoss::kHinge;
  o.lambda = 0.3;
  o.ridge = 0.1;
  o.tolerance = 1e-10;
  o.max_iterations = 400000;
  FistaResult r = solve(d, G, o, budget);
  CHECK(r.converged);
  const double best = fgm::test::esvm_objective(d, G, o.lambda, o.ridge, r.w);
  CHECK(best == Approx(r.objective).epsilon(1e-10));
  CHECK(r.duality_gap <= 1e-10 * std::max(1.0, best));
  size_t margin_one_or_more = 0;
  for (size_t i = 0; i < d.n; ++i) {
    double z = 0;
    for (size_t j = 0; j < d.p; ++j) z += d.at(i, j) * r.w[j];
    margin_one_or_more += d.y[i] * z >= 1 - 1e-9;
  }
  CHECK(margin_one_or_more > 0);  // the hinge's kink is in play (not the linear regime)
  for (size_t j = 0; j < d.p; ++j)
    for (double h : {1e-3, -1e-3, 1e-5, -1e-5}) {
      auto w = r.w;
      w[j] += h;
      CHECK(fgm::test::esvm_objective(d, G, o.lambda, o.ridge, w) >= best - 1e-8 * best);
    }
}

TEST_CASE("unsupported algorithm and loss pairs name both keys", "[exclusive][fista]") {
  MemoryBudget budget(1 << 28);
  auto d = dense_problem(26, 10, 6, true);
  ExclusiveGroups G = contiguous_groups(d.p, 3, budget);
  FistaOptions o;
  o.algorithm = Algorithm::kPcp;
  o.loss = ExclusiveLoss::kHinge;
  CHECK_THROWS_WITH(solve(d, G, o, budget), Catch::Contains("exclusive.loss") && Catch::Contains("exclusive.algorithm"));
  o.algorithm = Algorithm::kLicp;
  o.loss = ExclusiveLoss::kLogistic;
  CHECK_THROWS_WITH(solve(d, G, o, budget), Catch::Contains("exclusive.loss"));
}

// Beck–Teboulle: with a fixed step 1/L, F(x_k) − F* ≤ 2L‖x₀ − x*‖²/(k+1)². A
// chain design (XᵀX tridiagonal, Nesterov's worst case for first-order
// methods) makes plain gradient steps O(1/k); the paper's printed momentum
// t' = ½ + ½√(1 + 4t) tends to t = 2, a constant momentum of ½, and breaks
// the bound — which shows this test catches the misprint.
TEST_CASE("FISTA keeps the O(1/k^2) bound; the printed momentum does not", "[exclusive][fista][rate]") {
  MemoryBudget budget(1 << 28);
  const size_t p = 200;
  fgm::test::DenseProblem d;
  d.n = d.p = p;
  d.x.assign(p * p, 0.0);
  d.y.assign(p, 0.0);
  for (size_t i = 0; i < p; ++i) {
    d.x[i * p + i] = 1.0;
    if (i > 0) d.x[i * p + i - 1] = -1.0;
  }
  d.y[0] = 1.0;
  ExclusiveGroups G = contiguous_groups(p, 5, budget);
  const double L = 4.0;  // ‖X‖² ≤ 4 for the chain; pcp's bound adds 2λ·max|g| and doubles
  for (Algorithm algorithm : {Algorithm::kLocp, Algorithm::kPcp}) {
    FistaOptions o;
    o.algorithm = algorithm;
    o.lambda = 1e-4;
    o.lipschitz = algorithm == Algorithm::kLocp ? L : 2 * L + 2 * o.lambda * 5;
    o.tolerance = 0;
    o.max_iterations = 60000;
    FistaResult reference = solve(d, G, o, budget);
    const double f_star = reference.objective;
    double distance = 0;  // ‖x₀ − x*‖² with x₀ = 0 (pcp: ‖(w₊, w₋)‖² = ‖w‖²)
    for (double v : reference.w) distance += v * v;
    o.max_iterations = 2000;
    o.record_objective = true;
    FistaResult run = solve(d, G, o, budget);
    CHECK(run.backtracks == 0);
    double worst_ratio = 0;
    for (size_t k = 0; k < run.trace.size(); ++k) {
      const double bound = 2 * o.lipschitz * distance / double((k + 2) * (k + 2));
      worst_ratio = std::max(worst_ratio, (run.trace[k] - f_star) / bound);
    }
    INFO(algorithm_name(algorithm));
    CHECK(worst_ratio <= 1.0);
    o.paper_momentum_misprint = true;
    FistaResult misprint = solve(d, G, o, budget);
    double misprint_ratio = 0;
    for (size_t k = 0; k < misprint.trace.size(); ++k) {
      const double bound = 2 * o.lipschitz * distance / double((k + 2) * (k + 2));
      misprint_ratio = std::max(misprint_ratio, (misprint.trace[k] - f_star) / bound);
    }
    CHECK(misprint_ratio > 1.0);
  }
}

// The licp certificate against an independent long solve: at a loose
// tolerance the returned objective is within its reported gap of P*, where P*
// comes from a separate 10⁻¹² solve (and is itself certified), on binary,
// integer, tied and Gaussian designs with disjoint (random-like) groups.
TEST_CASE("Fista-licp's certified gap bounds its distance to a high-precision optimum", "[exclusive][fista][licp]") {
  MemoryBudget budget(1 << 28);
  const size_t n = 30, p = 24;
  for (int kind = 0; kind < 4; ++kind) {
    auto d = dense_problem(40 + kind, n, p, true, 0.9);
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < p; ++j) {
        double& x = d.x[i * p + j];
        if (x == 0) continue;
        if (kind == 0) x = x > 0 ? 1.0 : 0.0;                          // binary
        if (kind == 1) x = std::round(3 * x);                           // integer
      }
    if (kind == 2)
      for (size_t i = 0; i < n; ++i)
        for (size_t j = 1; j < p; ++j)
          if (j % 3 != 0) d.x[i * p + j] = d.x[i * p + j - 1];  // groups of three equal columns
    ExclusiveGroups G = contiguous_groups(p, 6, budget);
    FistaOptions o;
    o.algorithm = Algorithm::kLicp;
    o.loss = ExclusiveLoss::kHinge;
    o.lambda = 0.5;
    o.ridge = 0.2;
    o.tolerance = 1e-12;
    o.max_iterations = 400000;
    o.licp_coordinate = false;  // FISTA on (11) (disjoint groups in memory would take coordinate ascent)
    FistaResult exact = solve(d, G, o, budget);
    REQUIRE(exact.converged);
    const double p_star = fgm::test::esvm_objective(d, G, o.lambda, o.ridge, exact.w);
    CHECK(exact.duality_gap <= 1e-12 * std::max(1.0, p_star) + 1e-15);
    o.tolerance = 1e-3;
    FistaResult loose = solve(d, G, o, budget);
    CHECK(loose.converged);
    const double p_loose = fgm::test::esvm_objective(d, G, o.lambda, o.ridge, loose.w);
    CHECK(p_loose == Approx(loose.objective).epsilon(1e-9));
    CHECK(loose.duality_gap <= 1e-3 * std::max(1.0, p_loose));
    CHECK(p_loose - p_star >= -1e-9 * p_star);                         // P* is the minimum
    CHECK(p_loose - p_star <= loose.duality_gap + 1e-9 * p_star);      // the gap is a valid bound
    CHECK(loose.iterations < exact.iterations);
  }
}

namespace {


}  // namespace

// The coordinate-ascent licp (licp_coordinate.h) against an independent
// solver: Fista-licp on the dual (11) with v kept, at 10⁻¹² (its own
// certificate), on binary, integer, tied and Gaussian designs, in both the
// separable regime (λ = α = 1, where FISTA crept) and a soft-margin one. The
// coordinate solve at 10⁻¹⁰ reaches P*; at 10⁻³ its reported gap bounds its
// true suboptimality P(w) − P*, with P evaluated from the dense matrix.
TEST_CASE("licp coordinate ascent reaches the FISTA optimum and its gap bounds the true suboptimality",
          "[exclusive][fista][licp][coordinate]") {
  MemoryBudget budget(1 << 28);
  const size_t n = 30, p = 24;
  for (int kind = 0; kind < 4; ++kind)
    for (const auto& [lambda, ridge] : {std::pair{1.0, 1.0}, std::pair{0.5, 0.2}}) {
      INFO("kind " << kind << " lambda " << lambda);
      const auto d = valued_problem(kind, 60 + kind, n, p);
      ExclusiveGroups G = contiguous_groups(p, 6, budget);
      FistaOptions o;
      o.algorithm = Algorithm::kLicp;
      o.loss = ExclusiveLoss::kHinge;
      o.lambda = lambda;
      o.ridge = ridge;
      o.tolerance = 1e-12;
      o.max_iterations = 1000000;
      o.licp_coordinate = false;
      FistaResult fista = solve(d, G, o, budget);
      REQUIRE(fista.converged);
      const double p_star = fgm::test::esvm_objective(d, G, lambda, ridge, fista.w);
      InMemoryDesign X = InMemoryDesign::from_dense(d.n, d.p, d.x, budget);
      o.licp_coordinate = true;
      o.tolerance = 1e-10;
      o.max_iterations = 100000;
      FistaResult tight = solve_licp_coordinate(X, d.y, G, o, budget);
      CHECK(tight.converged);
      const double p_tight = fgm::test::esvm_objective(d, G, lambda, ridge, tight.w);
      CHECK(p_tight == Approx(tight.objective).epsilon(1e-9));
      CHECK(std::fabs(p_tight - p_star) <= 2e-9 * std::max(1.0, p_star));
      o.tolerance = 1e-3;
      FistaResult loose = solve_licp_coordinate(X, d.y, G, o, budget);
      CHECK(loose.converged);
      const double p_loose = fgm::test::esvm_objective(d, G, lambda, ridge, loose.w);
      CHECK(loose.duality_gap <= 1e-3 * std::max(1.0, p_loose));
      CHECK(p_loose - p_star >= -1e-9 * p_star);
      CHECK(p_loose - p_star <= loose.duality_gap + 1e-9 * p_star);
      // The dispatcher picks it for disjoint groups in memory: the same result.
      FistaResult dispatched = solve(d, G, o, budget);
      CHECK(dispatched.w == loose.w);
      CHECK(dispatched.iterations < fista.iterations);
    }
}

// Columns outside every group (μ = 0 there: a plain ridge) and a warm start
// from another solve's dual reach the same optimum as FISTA.
TEST_CASE("licp coordinate ascent with ungrouped columns and a warm start", "[exclusive][fista][licp][coordinate]") {
  MemoryBudget budget(1 << 28);
  const auto d = valued_problem(3, 77, 40, 15);
  ExclusiveGroups G = make_groups(d.p, {{0, 1, 2, 3, 4}, {5, 6, 7, 8}}, budget);  // 9..14 in no group
  FistaOptions o;
  o.algorithm = Algorithm::kLicp;
  o.loss = ExclusiveLoss::kHinge;
  o.lambda = 0.7;
  o.ridge = 0.3;
  o.tolerance = 1e-12;
  o.max_iterations = 1000000;
  o.licp_coordinate = false;
  FistaResult fista = solve(d, G, o, budget);
  REQUIRE(fista.converged);
  const double p_star = fgm::test::esvm_objective(d, G, o.lambda, o.ridge, fista.w);
  InMemoryDesign X = InMemoryDesign::from_dense(d.n, d.p, d.x, budget);
  o.tolerance = 1e-10;
  FistaResult cold = solve_licp_coordinate(X, d.y, G, o, budget);
  CHECK(cold.converged);
  CHECK(std::fabs(fgm::test::esvm_objective(d, G, o.lambda, o.ridge, cold.w) - p_star) <= 2e-9 * p_star);
  o.lambda = 0.6;
  FistaResult other = solve_licp_coordinate(X, d.y, G, o, budget);
  o.lambda = 0.7;
  FistaResult warm = solve_licp_coordinate(X, d.y, G, o, budget, other.dual);
  CHECK(warm.converged);
  CHECK(std::fabs(fgm::test::esvm_objective(d, G, o.lambda, o.ridge, warm.w) - p_star) <= 2e-9 * p_star);
}

// The Newton root-finder of the group prox against Algorithm 2's sorting
// projection (itself tested against face enumeration), with ties, zeros and
// any starting τ.
TEST_CASE("prox of the squared l1 norm by Newton on tau equals the sorting projection",
          "[exclusive][projection][prox]") {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal(0, 1);
  ProjectionScratch scratch;
  for (int trial = 0; trial < 300; ++trial) {
    const size_t d = 1 + trial % 17;
    std::vector<double> c(d), expected(d), got(d);
    for (auto& e : c) e = trial % 3 == 0 ? std::round(2 * normal(rng)) : normal(rng);  // integers: ties and zeros
    const double mu = std::exp(normal(rng));
    prox_l1_squared(c.data(), d, mu, expected.data(), scratch);
    for (double start : {0.0, 0.1, 10.0}) {
      double tau = start;
      const size_t support = prox_l1_squared_newton(c.data(), d, mu, got.data(), tau);
      size_t expected_support = 0;
      double l1 = 0;
      for (size_t j = 0; j < d; ++j) {
        CHECK(got[j] == Approx(expected[j]).margin(1e-12));
        expected_support += got[j] != 0;
        l1 += std::fabs(got[j]);
      }
      CHECK(support == expected_support);
      CHECK(tau == Approx(mu * l1).margin(1e-12));
    }
  }
}
