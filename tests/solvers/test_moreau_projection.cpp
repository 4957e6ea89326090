// Algorithm 3 (Moreau projection of ½(Σ_h‖ω_h‖)², problem (34)) against a
// brute-force minimiser. The solution has the form ω_h = c_h·u_h/‖u_h‖ with
// c ≥ 0, so (34) reduces to min_{c≥0} τ/2 Σ(c_h − ô_h)² + ½(Σ c_h)², which the
// oracle solves by exact cyclic coordinate descent in long double.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "solvers/apg.h"

using namespace fgm;
using LD = long double;

namespace {

// Coordinate descent on the c-problem; each coordinate step is exact:
// c_h = max(0, (τ ô_h − Σ_{j≠h} c_j)/(τ + 1)). Slow when τ ≪ t (the Hessian
// τI + 11' is ill-conditioned), so `converged` says whether it got there.
std::vector<LD> brute_force_c(const std::vector<double>& norms, LD tau, bool& converged) {
  size_t t = norms.size();
  std::vector<LD> c(t, 0);
  LD sum = 0;
  converged = false;
  for (int sweep = 0; sweep < 200000 && !converged; ++sweep) {
    LD change = 0;
    for (size_t h = 0; h < t; ++h) {
      LD rest = sum - c[h];
      LD next = std::max<LD>(0, (tau * norms[h] - rest) / (tau + 1));
      change = std::max(change, std::fabs(next - c[h]));
      sum = rest + next;
      c[h] = next;
    }
    converged = change <= 1e-30L;
  }
  return c;
}

// Second oracle, from the optimality conditions alone: c_h = max(ô_h − ς, 0)
// with ς = Σ_h c_h / τ; ς − Σ_h max(ô_h − ς, 0)/τ is increasing, so bisect.
std::vector<LD> bisection_c(const std::vector<double>& norms, LD tau) {
  LD lo = 0, hi = 0;
  for (double o : norms) hi = std::max<LD>(hi, o);
  for (int k = 0; k < 20000 && lo < hi; ++k) {
    LD mid = (lo + hi) / 2, s = 0;
    if (mid == lo || mid == hi) break;
    for (double o : norms) s += std::max<LD>(o - mid, 0);
    if (mid - s / tau < 0) lo = mid; else hi = mid;
  }
  std::vector<LD> c;
  for (double o : norms) c.push_back(std::max<LD>(o - (lo + hi) / 2, 0));
  return c;
}

LD c_objective(const std::vector<double>& norms, LD tau, const std::vector<LD>& c) {
  LD q = 0, s = 0;
  for (size_t h = 0; h < norms.size(); ++h) {
    q += (c[h] - norms[h]) * (c[h] - norms[h]);
    s += c[h];
  }
  return tau / 2 * q + s * s / 2;
}

int g_instances = 0, g_cd_converged = 0;

void check_instance(const std::vector<double>& norms, double tau) {
  CAPTURE(norms, tau);
  std::vector<double> scales = moreau_group_scales(norms, 1.0 / tau);
  REQUIRE(scales.size() == norms.size());
  std::vector<LD> ours(norms.size());
  LD z = 0, max_norm = 0;
  for (size_t h = 0; h < norms.size(); ++h) {
    REQUIRE(std::isfinite(scales[h]));
    REQUIRE(scales[h] >= 0);
    REQUIRE(scales[h] <= 1);
    if (norms[h] == 0) REQUIRE(scales[h] == 0);
    ours[h] = LD(scales[h]) * norms[h];
    z += ours[h];
    max_norm = std::max<LD>(max_norm, norms[h]);
  }
  bool cd_converged = false;
  std::vector<LD> cd = brute_force_c(norms, tau, cd_converged);
  std::vector<LD> bis = bisection_c(norms, tau);
  ++g_instances;
  g_cd_converged += cd_converged;
  const LD tol = 1e-12L * std::max<LD>(1, max_norm);
  for (size_t h = 0; h < norms.size(); ++h) {
    REQUIRE(std::fabs(double(ours[h] - bis[h])) <= tol);
    if (cd_converged) REQUIRE(std::fabs(double(ours[h] - cd[h])) <= tol);
  }
  // CD iterates are feasible, so their objective bounds the minimum from above.
  LD fo = c_objective(norms, tau, ours), fb = c_objective(norms, tau, cd);
  REQUIRE(fo <= fb + 1e-13L * std::max<LD>(1, std::fabs(fb)));
  // KKT of (34) in c: τ(c_h − ô_h) + Σc = 0 where c_h > 0, τ ô_h ≤ Σc where c_h = 0.
  for (size_t h = 0; h < norms.size(); ++h) {
    if (ours[h] > 0)
      REQUIRE(std::fabs(double(tau * (ours[h] - norms[h]) + z)) <= 1e-10 * std::max<LD>(1, tau * max_norm));
    else
      REQUIRE(double(tau * norms[h]) <= double(z) + 1e-10 * std::max<LD>(1, tau * max_norm));
  }
}

}  // namespace

TEST_CASE("Moreau projection matches a brute-force minimiser of (34)", "[solvers][moreau]") {
  std::mt19937_64 rng(20140501);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  const double taus[] = {1e-3, 0.05, 0.3, 1.0, 3.0, 10.0, 1e3};
  const size_t sizes[] = {1, 2, 3, 5, 8, 20, 60};
  for (size_t t : sizes) {
    for (double tau : taus) {
      for (int rep = 0; rep < 4; ++rep) {
        std::vector<double> norms(t);
        for (double& o : norms) o = std::exp(4 * unif(rng) - 2);
        if (rep == 1 && t > 1) {  // ties
          for (size_t h = 1; h < t; h += 2) norms[h] = norms[h - 1];
        }
        if (rep == 2) {  // all-zero groups mixed in
          for (size_t h = 0; h < t; h += 2) norms[h] = 0;
        }
        if (rep == 3) {  // all equal
          for (double& o : norms) o = 0.7;
        }
        check_instance(norms, tau);
      }
    }
  }
  check_instance({0.0}, 1.0);
  check_instance({0.0, 0.0, 0.0}, 0.5);
  check_instance({2.0}, 1.0);   // one group: c = τ ô/(τ + 1)
  check_instance({1.0, 1.0, 1.0, 1e-300}, 2.0);
  check_instance({1e-200, 3e-200, 2e-200}, 1.0);
  // The coordinate-descent oracle must actually have been used on most instances.
  CAPTURE(g_instances, g_cd_converged);
  REQUIRE(g_cd_converged >= g_instances * 9 / 10);
}

TEST_CASE("Moreau projection: closed forms and limits", "[solvers][moreau]") {
  // One group: min τ/2(c − ô)² + c²/2 → c = τ ô/(1 + τ).
  auto s = moreau_group_scales({2.0}, 1.0 / 3.0);
  REQUIRE(s[0] == Approx(3.0 / 4.0).epsilon(1e-15));
  // s = 0 (τ = ∞): nothing is shrunk. s = ∞ (τ = 0): everything vanishes.
  s = moreau_group_scales({1.0, 0.0, 2.0}, 0.0);
  REQUIRE(s == std::vector<double>{1.0, 0.0, 1.0});
  s = moreau_group_scales({1.0, 0.0, 2.0}, INFINITY);
  REQUIRE(s == std::vector<double>{0.0, 0.0, 0.0});
  REQUIRE(moreau_group_scales({}, 1.0).empty());
}

TEST_CASE("Moreau projection minimises (34) over full vectors", "[solvers][moreau]") {
  // J(ω) = τ/2‖ω − u‖² + ½(Σ‖ω_h‖)² must not decrease under any perturbation
  // of S_τ(u) (this also checks the direction u_h/‖u_h‖ of Proposition 1).
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int rep = 0; rep < 40; ++rep) {
    size_t t = 1 + rep % 7;
    double tau = std::exp(normal(rng));
    std::vector<std::vector<LD>> u(t);
    std::vector<double> norms(t);
    for (size_t h = 0; h < t; ++h) {
      u[h].resize(1 + (rep + h) % 4);
      LD q = 0;
      for (auto& x : u[h]) {
        x = (h == 0 && rep % 5 == 0) ? 0 : normal(rng);
        q += x * x;
      }
      norms[h] = double(std::sqrt(q));
    }
    auto scales = moreau_group_scales(norms, 1.0 / tau);
    auto J = [&](const std::vector<std::vector<LD>>& w) {
      LD q = 0, z = 0;
      for (size_t h = 0; h < t; ++h) {
        LD nh = 0;
        for (size_t k = 0; k < w[h].size(); ++k) {
          q += (w[h][k] - u[h][k]) * (w[h][k] - u[h][k]);
          nh += w[h][k] * w[h][k];
        }
        z += std::sqrt(nh);
      }
      return tau / 2 * q + z * z / 2;
    };
    std::vector<std::vector<LD>> w = u;
    for (size_t h = 0; h < t; ++h)
      for (auto& x : w[h]) x *= scales[h];
    LD base = J(w);
    for (double eps : {1e-6, 1e-3, 1e-1}) {
      for (int k = 0; k < 50; ++k) {
        auto p = w;
        for (auto& g : p)
          for (auto& x : g) x += eps * normal(rng);
        REQUIRE(J(p) >= base - 1e-14L * std::max<LD>(1, base));
      }
    }
  }
}
