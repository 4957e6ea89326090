// Seed 002's cone projections (Algorithms 2 and 3 with the ERRATA fixes) and
// the prox of (κ/2)‖w‖₁², each against an independent brute force:
//  * P1, P∞: a ternary search over y of the convex h(y) = min_x {½‖x − a‖² :
//    ‖x‖ ≤ y} + (ζ/2)(y − b)², the inner minimum found without sorting
//    (bisection on the ℓ1 soft threshold; clipping for ℓ∞). The algorithm's
//    point must be feasible and its objective at most the brute minimum.
//  * prox: enumeration of every sign pattern σ ∈ {−1,0,1}^d (a face of the
//    orthants, where the problem is an unconstrained quadratic with a closed
//    form); the minimum over the feasible faces is the global minimum.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "solvers/exclusive/cone_projection.h"

using namespace fgm::exclusive;

namespace {

double l1(const std::vector<double>& x) {
  double s = 0;
  for (double e : x) s += std::fabs(e);
  return s;
}
double linf(const std::vector<double>& x) {
  double s = 0;
  for (double e : x) s = std::max(s, std::fabs(e));
  return s;
}

double cone_objective(const std::vector<double>& x, double y, const std::vector<double>& a, double b, double zeta) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += 0.5 * (x[i] - a[i]) * (x[i] - a[i]);
  return s + 0.5 * zeta * (y - b) * (y - b);
}

// ½ dist(a, {‖x‖₁ ≤ r})² by bisection on the soft threshold θ: ‖S_θ(a)‖₁ = r.
double l1_ball_distance(const std::vector<double>& a, double r) {
  if (l1(a) <= r) return 0;
  double lo = 0, hi = linf(a);
  for (int it = 0; it < 200; ++it) {
    const double mid = 0.5 * (lo + hi);
    double s = 0;
    for (double e : a) s += std::max(std::fabs(e) - mid, 0.0);
    (s > r ? lo : hi) = mid;
  }
  double d = 0;
  for (double e : a) {
    const double m = std::max(std::fabs(e) - hi, 0.0);
    d += 0.5 * (std::fabs(e) - m) * (std::fabs(e) - m);
  }
  return d;
}

double linf_ball_distance(const std::vector<double>& a, double r) {
  double d = 0;
  for (double e : a) d += 0.5 * std::max(std::fabs(e) - r, 0.0) * std::max(std::fabs(e) - r, 0.0);
  return d;
}

template <class Distance>
double brute_cone_minimum(const std::vector<double>& a, double b, double zeta, double upper, Distance distance) {
  double lo = 0, hi = std::max(upper, 0.0);
  auto h = [&](double y) { return distance(a, y) + 0.5 * zeta * (y - b) * (y - b); };
  for (int it = 0; it < 300; ++it) {
    const double m1 = lo + (hi - lo) / 3, m2 = hi - (hi - lo) / 3;
    if (h(m1) <= h(m2)) hi = m2;
    else lo = m1;
  }
  return std::min({h(lo), h(hi), h(0.0), h(std::max(upper, 0.0))});
}

struct Case {
  std::vector<double> a;
  double b;
};

std::vector<Case> cases(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_int_distribution<int> small(-2, 2), dim(1, 9);
  std::vector<Case> out;
  for (int r = 0; r < 40; ++r) {  // random
    Case c;
    c.a.resize(dim(rng));
    for (auto& e : c.a) e = normal(rng) * 3;
    c.b = std::fabs(normal(rng)) * (r % 3);
    out.push_back(c);
  }
  for (int r = 0; r < 40; ++r) {  // tied integer magnitudes with random signs
    Case c;
    c.a.resize(dim(rng));
    for (auto& e : c.a) e = small(rng);
    c.b = std::fabs(double(small(rng)));
    out.push_back(c);
  }
  // degenerate: zero vector, one entry, all equal, b on the cone's boundary, b huge
  out.push_back({{0, 0, 0}, 0});
  out.push_back({{5}, 0});
  out.push_back({{-5}, 2});
  out.push_back({{1, 1, 1, 1}, 0});
  out.push_back({{1, -1, 1, -1}, 4});  // ‖a‖₁ = b exactly
  out.push_back({{1, -1, 1, -1}, 1});  // ‖a‖∞ = b exactly
  out.push_back({{3, 2, 1}, 1e9});
  out.push_back({{1e-300, -1e-300}, 0});
  out.push_back({{1e8, 1e-8, -1e8}, 0});
  return out;
}

const double kZetas[] = {0.0, 1e-14, 1e-9, 1e-3, 0.5, 1.0, 7.0, 1e4, 1e9};

}  // namespace

TEST_CASE("P1 cone projection matches a brute-force projection", "[exclusive][projection]") {
  ProjectionScratch scratch;
  for (const Case& c : cases(11))
    for (double zeta : kZetas) {
      std::vector<double> x(c.a.size());
      const double y = project_l1_cone(c.a.data(), c.a.size(), c.b, zeta, x.data(), scratch);
      INFO("d=" << c.a.size() << " b=" << c.b << " zeta=" << zeta);
      const double scale = 1 + l1(c.a) + c.b;
      CHECK(l1(x) <= y * (1 + 1e-12) + 1e-300);  // feasible
      for (size_t i = 0; i < x.size(); ++i) CHECK(x[i] * c.a[i] >= 0);  // signs kept
      const double ours = cone_objective(x, y, c.a, c.b, zeta);
      const double brute = brute_cone_minimum(c.a, c.b, zeta, std::max(l1(c.a), c.b), l1_ball_distance);
      CHECK(ours <= brute + 1e-9 * scale * scale);
      if (zeta == 0) CHECK(x == c.a);  // no pull on y: nothing to shrink
    }
}

TEST_CASE("P1 refuses b < 0 (the paper's search is not exact there)", "[exclusive][projection]") {
  ProjectionScratch scratch;
  std::vector<double> a{1, 2}, x(2);
  CHECK_THROWS(project_l1_cone(a.data(), 2, -1.0, 1.0, x.data(), scratch));
}

TEST_CASE("P-infinity cone projection matches a brute-force projection", "[exclusive][projection]") {
  ProjectionScratch scratch;
  auto all = cases(12);
  for (Case c : cases(13)) {  // P∞ accepts any b: add negative ones (the apex (0,0) is reachable)
    c.b = -c.b - 0.5;
    all.push_back(c);
  }
  all.push_back({{1, 1}, -1e9});
  for (const Case& c : all)
    for (double zeta : kZetas) {
      std::vector<double> x(c.a.size());
      const double y = project_linf_cone(c.a.data(), c.a.size(), c.b, zeta, x.data(), scratch);
      INFO("d=" << c.a.size() << " b=" << c.b << " zeta=" << zeta);
      const double scale = 1 + l1(c.a) + std::fabs(c.b);
      CHECK(y >= 0);
      CHECK(linf(x) <= y * (1 + 1e-12) + 1e-300);
      for (size_t i = 0; i < x.size(); ++i) CHECK(x[i] * c.a[i] >= 0);
      // Step 4 as corrected: x_i = sgn(a_i)·min(|a_i|, y).
      for (size_t i = 0; i < x.size(); ++i) CHECK(std::fabs(x[i]) == Approx(std::min(std::fabs(c.a[i]), y)).margin(1e-12 * scale));
      const double ours = cone_objective(x, y, c.a, c.b, zeta);
      const double brute = brute_cone_minimum(c.a, c.b, zeta, std::max(linf(c.a), c.b), linf_ball_distance);
      CHECK(ours <= brute + 1e-9 * scale * scale);
    }
}

namespace {

// min_w ½‖w − c‖² + (κ/2)‖w‖₁² by enumerating the faces σ ∈ {−1,0,1}^d.
double brute_prox_l1_squared(const std::vector<double>& c, double kappa, std::vector<double>& best_w) {
  const size_t d = c.size();
  size_t faces = 1;
  for (size_t i = 0; i < d; ++i) faces *= 3;
  double best = INFINITY;
  std::vector<double> w(d);
  for (size_t code = 0; code < faces; ++code) {
    std::vector<int> sigma(d);
    size_t rest = code;
    int support = 0;
    double sc = 0;
    for (size_t i = 0; i < d; ++i) {
      sigma[i] = int(rest % 3) - 1;
      rest /= 3;
      support += sigma[i] != 0;
      sc += sigma[i] * c[i];
    }
    // On the face: (I + κσσᵀ) w_S = c_S  ⇒  w_S = c_S − κσ_S (σᵀc)/(1 + κ|S|).
    bool feasible = true;
    for (size_t i = 0; i < d; ++i) {
      w[i] = sigma[i] == 0 ? 0.0 : c[i] - kappa * sigma[i] * sc / (1 + kappa * support);
      if (sigma[i] * w[i] < 0) feasible = false;
    }
    if (!feasible) continue;
    double obj = 0;
    for (size_t i = 0; i < d; ++i) obj += 0.5 * (w[i] - c[i]) * (w[i] - c[i]);
    obj += 0.5 * kappa * l1(w) * l1(w);
    if (obj < best) best = obj, best_w = w;
  }
  return best;
}

}  // namespace

TEST_CASE("prox of the squared group l1 norm matches face enumeration", "[exclusive][projection][prox]") {
  ProjectionScratch scratch;
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_int_distribution<int> small(-3, 3), dim(1, 6);
  for (int r = 0; r < 300; ++r) {
    std::vector<double> c(dim(rng));
    for (auto& e : c) e = r % 2 ? normal(rng) * 2 : double(small(rng));  // random and tied integers
    for (double kappa : {1e-12, 0.01, 0.3, 1.0, 5.0, 1e3}) {
      std::vector<double> w(c.size()), oracle;
      prox_l1_squared(c.data(), c.size(), kappa, w.data(), scratch);
      const double best = brute_prox_l1_squared(c, kappa, oracle);
      double ours = 0;
      for (size_t i = 0; i < c.size(); ++i) ours += 0.5 * (w[i] - c[i]) * (w[i] - c[i]);
      ours += 0.5 * kappa * l1(w) * l1(w);
      INFO("r=" << r << " kappa=" << kappa);
      CHECK(ours == Approx(best).epsilon(1e-12).margin(1e-12));
      for (size_t i = 0; i < c.size(); ++i) CHECK(w[i] == Approx(oracle[i]).margin(1e-9));
    }
  }
}
