// The coordinate licp's certificate point and its threads: best_loss_scale
// and best_scaled_primal against brute force (a fine grid refined by ternary
// search on the convex objective, the best b found by the tested exact
// best_svm_bias); the solve's weights, dual and gap the same bits for any
// FistaOptions::threads, on a Newton system large enough to be cut into
// several chunks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/memory_budget.h"
#include "solvers/exclusive/design.h"
#include "solvers/exclusive/fista_exclusive.h"
#include "solvers/exclusive/licp_coordinate.h"
#include "tests/solvers/exclusive_test_problems.h"

using namespace fgm;
using namespace fgm::exclusive;
using fgm::test::contiguous_groups;
using fgm::test::valued_problem;

namespace {

double scaled_objective(ExclusiveLoss loss, const std::vector<double>& c, const std::vector<double>& m, double omega,
                        double s) {
  double sum = s * s * omega;
  for (size_t i = 0; i < c.size(); ++i) {
    const double slack = std::max(0.0, c[i] - s * m[i]);
    sum += loss == ExclusiveLoss::kSquaredHinge ? slack * slack : slack;
  }
  return sum;
}

// min over s ≥ 0 by brute force: the best of a grid on [0, top], then a
// ternary search around it (the objective is convex in s).
template <class F>
double brute_minimum(F&& f, double top) {
  const int points = 4000;
  int best = 0;
  for (int k = 1; k <= points; ++k)
    if (f(top * k / points) < f(top * best / points)) best = k;
  double lo = top * std::max(0, best - 1) / points, hi = top * std::min(points, best + 1) / points;
  for (int it = 0; it < 200; ++it) {
    const double a = lo + (hi - lo) / 3, b = hi - (hi - lo) / 3;
    (f(a) < f(b) ? hi : lo) = f(a) < f(b) ? b : a;
  }
  return std::min(f(0.5 * (lo + hi)), f(top * best / points));
}

// Margins with ties, zeros, negative and large values; offsets c around 1.
void draw(std::mt19937_64& rng, size_t n, int kind, std::vector<double>& c, std::vector<double>& m) {
  std::normal_distribution<double> normal(0, 1);
  std::uniform_int_distribution<int> small(-2, 3);
  c.assign(n, 1.0), m.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (kind == 0) m[i] = small(rng) * 0.5;  // integer steps: ties and zeros
    if (kind == 1) m[i] = 1.0 + 0.05 * normal(rng);  // near the margin (the solver's regime)
    if (kind == 2) m[i] = 2 * normal(rng), c[i] = 1.0 + 0.5 * normal(rng);  // any sign of c
    if (kind == 3) m[i] = i % 3 == 0 ? 0.0 : 0.7;  // all tied
  }
}

}  // namespace

TEST_CASE("best_loss_scale is the minimiser found by brute force", "[exclusive][licp][scale]") {
  std::mt19937_64 rng(11);
  for (ExclusiveLoss loss : {ExclusiveLoss::kHinge, ExclusiveLoss::kSquaredHinge})
    for (int kind = 0; kind < 4; ++kind)
      for (double omega : {0.01, 1.0, 30.0, 1000.0})
        for (int trial = 0; trial < 5; ++trial) {
          std::vector<double> c, m;
          draw(rng, 1 + trial * 7, kind, c, m);
          INFO(loss_name(loss) << " kind " << kind << " omega " << omega << " trial " << trial);
          const double s = best_loss_scale(loss, c.data(), m.data(), c.size(), omega);
          CHECK(s >= 0);
          auto f = [&](double t) { return scaled_objective(loss, c, m, omega, t); };
          // P(s) ≥ s²·omega bounds the minimiser by sqrt(P(0)/omega).
          const double brute = brute_minimum(f, 2 * std::sqrt(f(0) / omega) + 1);
          CHECK(f(s) <= brute + 1e-12 * std::max(1.0, brute));
        }
}

TEST_CASE("best_scaled_primal lowers the objective along s*w, with and without the bias",
          "[exclusive][licp][scale]") {
  std::mt19937_64 rng(12);
  std::normal_distribution<double> normal(0, 1);
  for (ExclusiveLoss loss : {ExclusiveLoss::kHinge, ExclusiveLoss::kSquaredHinge})
    for (int trial = 0; trial < 20; ++trial) {
      const size_t n = 5 + trial * 3;
      std::vector<double> y(n), z(n);
      for (size_t i = 0; i < n; ++i) {
        y[i] = (i % 3 == 0 || normal(rng) > 0) ? 1.0 : -1.0;
        z[i] = y[i] * (1.0 + 0.3 * normal(rng)) + (trial % 2 ? 0.2 : 0.0);
      }
      const double omega = 0.5 + trial;
      INFO(loss_name(loss) << " trial " << trial);
      auto loss_at = [&](double s, double b) {
        double sum = 0;
        for (size_t i = 0; i < n; ++i) {
          const double slack = std::max(0.0, 1.0 - y[i] * (s * z[i] + b));
          sum += loss == ExclusiveLoss::kSquaredHinge ? slack * slack : slack;
        }
        return sum;
      };
      // Without the bias: the exact minimum over s.
      const ScaledPrimal plain = best_scaled_primal(loss, y, z.data(), omega, false, 0.0);
      CHECK(plain.bias == 0);
      CHECK(plain.loss == Approx(loss_at(plain.scale, 0.0)).epsilon(1e-12));
      const double brute = brute_minimum([&](double s) { return loss_at(s, 0.0) + s * s * omega; },
                                         2 * std::sqrt(loss_at(0, 0) / omega) + 1);
      CHECK(plain.loss + plain.scale * plain.scale * omega <= brute + 1e-12 * brute);
      // With the bias: never above the start (s = 1, its best b), and its
      // reported loss is the loss at the returned (s, b).
      const double b1 = best_svm_bias(loss, y, z.data());
      const ScaledPrimal biased = best_scaled_primal(loss, y, z.data(), omega, true, b1);
      CHECK(biased.loss == Approx(loss_at(biased.scale, biased.bias)).epsilon(1e-12));
      CHECK(biased.loss + biased.scale * biased.scale * omega <= loss_at(1.0, b1) + omega + 1e-12);
      // ... and within a small fraction of the joint minimum (brute force
      // over s, each s with its exact best b).
      auto profile = [&](double s) {
        std::vector<double> scaled(n);
        for (size_t i = 0; i < n; ++i) scaled[i] = s * z[i];
        return loss_at(s, best_svm_bias(loss, y, scaled.data())) + s * s * omega;
      };
      const double joint = brute_minimum(profile, 2 * std::sqrt(profile(0) / omega) + 1);
      CHECK(biased.loss + biased.scale * biased.scale * omega <= loss_at(1.0, b1) + omega);
      CHECK(joint <= biased.loss + biased.scale * biased.scale * omega + 1e-12);
    }
}

TEST_CASE("the coordinate licp gives the same bits for any thread count", "[exclusive][licp][coordinate][threads]") {
  MemoryBudget budget(1 << 29);
  // p > n and dense: more than 256 support columns and 64 free rows, so the
  // Newton products and margins are cut into several chunks.
  for (int kind : {0, 3})
    for (bool bias : {false, true})
      for (ExclusiveLoss loss : {ExclusiveLoss::kHinge, ExclusiveLoss::kSquaredHinge}) {
        INFO("kind " << kind << " bias " << bias << " " << loss_name(loss));
        auto d = valued_problem(kind, 90 + kind, 160, 700);
        const ExclusiveGroups G = contiguous_groups(d.p, 10, budget);
        InMemoryDesign X = InMemoryDesign::from_dense(d.n, d.p, d.x, budget);
        FistaOptions o;
        o.algorithm = Algorithm::kLicp;
        o.loss = loss;
        o.lambda = 0.05;
        o.ridge = 1.0;
        o.bias = bias;
        o.tolerance = 1e-8;
        o.max_iterations = 20000;
        o.threads = 1;
        const FistaResult one = solve_licp_coordinate(X, d.y, G, o, budget);
        CHECK(one.converged);
        size_t support = 0;
        for (double w : one.w) support += w != 0;
        CHECK(support > 256);
        for (int threads : {2, 3}) {
          o.threads = threads;
          const FistaResult many = solve_licp_coordinate(X, d.y, G, o, budget);
          CHECK(many.w == one.w);
          CHECK(many.dual == one.dual);
          CHECK(many.bias == one.bias);
          CHECK(many.duality_gap == one.duality_gap);
          CHECK(many.iterations == one.iterations);
        }
      }
}
