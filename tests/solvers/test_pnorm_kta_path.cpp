// The p-norm KTA path (solvers/pnorm_kta/kta_path.h) against independent
// oracles at every p of the grid: each feature's 1-D problem solved by plain
// bisection on its optimality condition (and in closed form at p = 1), and
// the closed-form active set {i : a_i > 2λ₁ε + λ₂pε^(p−1)}.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "solvers/pnorm_kta/kta_path.h"

using namespace fgm;
using namespace fgm::kta;

namespace {

// argmin_{η ≥ 0} λ₁η² + λ₂η^p − aη by bisection on the derivative
// 2λ₁η + λ₂pη^(p−1) − a over [0, a/(2λ₁)], halving to the last bit.
double bisection_weight(double a, double p, double l1, double l2) {
  if (a <= 0) return 0;
  if (p == 1) return a > l2 ? (a - l2) / (2 * l1) : 0.0;
  double lo = 0, hi = a / (2 * l1);
  for (int k = 0; k < 1100; ++k) {
    const double mid = 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) break;
    const double g = 2 * l1 * mid + l2 * p * std::pow(mid, p - 1) - a;
    (g < 0 ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

std::vector<double> random_alignments(size_t m, double top, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, top);
  std::vector<double> a(m);
  for (auto& v : a) v = u(rng);
  // Ties, zeros and tiny values.
  for (size_t i = 0; i + 1 < m; i += 17) a[i + 1] = a[i];
  for (size_t i = 5; i < m; i += 23) a[i] = 0;
  for (size_t i = 11; i < m; i += 29) a[i] = 1e-9;
  return a;
}

void check_path(const std::vector<double>& a, const PathOptions& o) {
  const std::vector<double> grid = path_grid(o);
  size_t visited = 0;
  size_t previous_active = a.size() + 1;
  std::vector<char> dropped(a.size(), 0);
  follow_path(a, o, [&](const PathPoint& point) {
    REQUIRE(visited < grid.size());
    REQUIRE(point.p == grid[visited]);
    ++visited;
    const double threshold = active_threshold(point.p, o);
    std::vector<char> active(a.size(), 0);
    for (size_t k = 0; k < point.active.size(); ++k) {
      const uint32_t i = point.active[k];
      if (k > 0) REQUIRE(point.active[k - 1] < i);
      active[i] = 1;
      const double oracle = bisection_weight(a[i], point.p, o.lambda1, o.lambda2);
      CAPTURE(point.p, i, a[i]);
      REQUIRE(point.weights[k] == Approx(oracle).epsilon(1e-12));
    }
    for (size_t i = 0; i < a.size(); ++i) {
      CAPTURE(point.p, i, a[i], threshold);
      // The closed-form active set, exactly.
      REQUIRE(static_cast<bool>(active[i]) == (a[i] > threshold));
      // A dropped feature never comes back (juncture points), and its exact
      // weight is indeed below ε (Theorem 2).
      if (dropped[i]) REQUIRE_FALSE(active[i]);
      if (!active[i]) {
        dropped[i] = 1;
        REQUIRE(bisection_weight(a[i], point.p, o.lambda1, o.lambda2) < o.epsilon);
      }
    }
    REQUIRE(point.active.size() <= previous_active);  // monotone in p
    previous_active = point.active.size();
  });
  REQUIRE(visited == grid.size());
}

}  // namespace

TEST_CASE("KTA path weights equal per-p bisection and the active set the closed form", "[kta][path]") {
  struct Case {
    double l1, l2, eps, p_start, p_end, step, top;
  };
  const std::vector<Case> cases = {
      {1.0, 1.0, 0.05, 2.0, 1.0, 0.01, 1.5},   // the paper's grid
      {0.1, 1.0, 0.05, 2.0, 1.0, 0.01, 1.2},   // ℓ_p term dominant
      {1.0, 0.0, 0.05, 2.0, 1.0, 0.01, 0.5},   // λ₂ = 0: η = a/(2λ₁) at every p
      {2.0, 0.3, 0.2, 1.9, 1.15, 0.013, 2.0},  // ε near 1/e, a grid that misses p_end
      {1e-3, 1.0, 0.01, 2.0, 1.0, 0.05, 1.3},  // stiff: η up to 650
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    CAPTURE(c);
    PathOptions o;
    o.lambda1 = cases[c].l1;
    o.lambda2 = cases[c].l2;
    o.epsilon = cases[c].eps;
    o.p_start = cases[c].p_start;
    o.p_end = cases[c].p_end;
    o.p_step = cases[c].step;
    check_path(random_alignments(150, cases[c].top, 31 + c), o);
  }
}

TEST_CASE("KTA path grid runs from p_start to exactly p_end", "[kta][path]") {
  PathOptions o;
  auto g = path_grid(o);
  REQUIRE(g.size() == 101);
  REQUIRE(g.front() == 2.0);
  REQUIRE(g.back() == 1.0);
  for (size_t k = 1; k < g.size(); ++k) REQUIRE(g[k - 1] - g[k] == Approx(0.01).epsilon(1e-9));
  o.p_start = 1.5;
  o.p_end = 1.0;
  o.p_step = 0.2;
  g = path_grid(o);
  REQUIRE(g == std::vector<double>{1.5, 1.3, 1.1, 1.0});
  o.p_end = 1.5;
  REQUIRE(path_grid(o) == std::vector<double>{1.5});
}

TEST_CASE("KTA corrector: Newton from the predictor, bisection only as a fallback", "[kta][path]") {
  PathOptions o;
  SolveCounts counts;
  // A poor guess (far right of the root) still converges.
  const double eta = solve_weight(0.9, 1.37, o, 1e6, counts);
  REQUIRE(eta == Approx(bisection_weight(0.9, 1.37, 1, 1)).epsilon(1e-13));
  REQUIRE(std::fabs(optimality_residual(eta, 0.9, 1.37, o)) < 1e-14);
  // Along the paper's path the predictor leaves the corrector a few Newton steps.
  uint64_t newton = 0, bisection = 0, points = 0;
  follow_path(random_alignments(300, 1.5, 3), o, [&](const PathPoint& p) {
    newton += p.counts.newton_steps;
    bisection += p.counts.bisection_steps;
    points += p.active.size();
  });
  REQUIRE(points > 0);
  REQUIRE(bisection * 20 < newton);
  REQUIRE(newton < 6 * points);
}

TEST_CASE("KTA path options are checked with the key named", "[kta][path]") {
  auto fails_with = [](PathOptions o, const char* key) {
    try {
      check_path_options(o);
      return false;
    } catch (const Error& e) {
      return e.kind() == ErrorKind::kConfig && std::string(e.what()).find(key) != std::string::npos;
    }
  };
  PathOptions o;
  REQUIRE_NOTHROW(check_path_options(o));
  PathOptions bad = o;
  bad.lambda1 = 0;
  REQUIRE(fails_with(bad, "kta.lambda1"));
  bad = o;
  bad.lambda2 = -1;
  REQUIRE(fails_with(bad, "kta.lambda2"));
  bad = o;
  bad.epsilon = 0.4;  // > 1/e
  REQUIRE(fails_with(bad, "kta.epsilon"));
  bad = o;
  bad.p_end = 2.5;
  REQUIRE(fails_with(bad, "kta.p_end"));
  bad = o;
  bad.p_start = 0.5;
  REQUIRE(fails_with(bad, "kta.p_start"));
  bad = o;
  bad.p_step = 0;
  REQUIRE(fails_with(bad, "kta.p_step"));
}
