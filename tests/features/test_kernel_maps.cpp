// Kernel maps (features/kernel_maps.h) against independent oracles: the exact
// kernels min(x,z) and 2xz/(x+z), and direct re-implementations of the maps'
// formulas.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "features/kernel_maps.h"
#include "io/model_file.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

double dot(const std::vector<double>& u, const std::vector<double>& v) {
  double s = 0;
  for (size_t k = 0; k < u.size(); ++k) s += u[k] * v[k];
  return s;
}

// The HIK map as printed: φ(x)_k = sqrt(1/r)·clamp(r·x − (k−1), 0, 1), k = 1..r.
std::vector<double> hik_formula(double x, int r) {
  std::vector<double> out(r);
  for (int k = 1; k <= r; ++k) out[k - 1] = std::sqrt(1.0 / r) * std::clamp(r * x - (k - 1), 0.0, 1.0);
  return out;
}

// The V&Z map as printed, with direct cos/sin.
std::vector<double> vz_formula(double x, int n, double L, bool chi2) {
  auto kappa = [&](double l) {
    return chi2 ? 1.0 / std::cosh(M_PI * l) : 2.0 / (M_PI * (1.0 + 4.0 * l * l));
  };
  std::vector<double> out(2 * n + 1, 0.0);
  if (x <= 0) return out;
  out[0] = std::sqrt(x * L * kappa(0));
  for (int j = 1; j <= n; ++j) {
    double a = std::sqrt(2 * x * L * kappa(j * L));
    out[2 * j - 1] = a * std::cos(j * L * std::log(x));
    out[2 * j] = a * std::sin(j * L * std::log(x));
  }
  return out;
}

double chi2_kernel(double x, double z) { return 2 * x * z / (x + z); }

// Test grid on (0,1]²: 1/100 .. 1 and a few small values.
std::vector<double> unit_grid() {
  std::vector<double> g;
  for (int k = 1; k <= 100; ++k) g.push_back(k / 100.0);
  for (double v : {1e-6, 1e-4, 1e-3, 3e-3, 0.005, 0.015}) g.push_back(v);
  return g;
}

double max_additive_error(const ExpansionMap& map, bool chi2) {
  std::vector<double> g = unit_grid();
  std::vector<std::vector<double>> phi;
  for (double x : g) phi.push_back(map.eval(x));
  double worst = 0;
  for (size_t a = 0; a < g.size(); ++a)
    for (size_t b = 0; b < g.size(); ++b) {
      double exact = chi2 ? chi2_kernel(g[a], g[b]) : std::min(g[a], g[b]);
      worst = std::max(worst, std::fabs(dot(phi[a], phi[b]) - exact));
    }
  return worst;
}

}  // namespace

TEST_CASE("scale_to_unit clamps to [0,1] and maps a constant column to 0", "[features]") {
  REQUIRE(scale_to_unit(0.5, 0, 1) == 0.5);
  REQUIRE(scale_to_unit(0, -2, 2) == 0.5);
  REQUIRE(scale_to_unit(-3, -2, 2) == 0);
  REQUIRE(scale_to_unit(7, -2, 2) == 1);
  REQUIRE(scale_to_unit(3, 3, 3) == 0);
  REQUIRE(scale_to_unit(1, 3, 2) == 0);
  REQUIRE(scale_to_unit(std::nan(""), 0, 1) == 0);
}

TEST_CASE("HIK map is the printed formula and exact on the grid", "[features]") {
  for (int r : {1, 7, 100}) {
    ExpansionMap map = ExpansionMap::hik(r);
    REQUIRE(map.dim() == static_cast<uint32_t>(r));
    REQUIRE(map.kind() == FeatureKind::kHik);
    // Same values as the formula, and component() == eval().
    std::mt19937_64 rng(r);
    std::uniform_real_distribution<double> unif(0.0, 1.0);
    for (int t = 0; t < 200; ++t) {
      double x = t < 3 ? t * 0.5 : unif(rng);
      std::vector<double> got = map.eval(x), want = hik_formula(x, r);
      for (int l = 0; l < r; ++l) {
        REQUIRE(got[l] == Approx(want[l]).margin(1e-15));
        REQUIRE(map.component(x, l) == got[l]);
      }
    }
    // Grid: φ(a/r)'φ(b/r) = min(a,b)/r.
    for (int a = 0; a <= r; ++a)
      for (int b = 0; b <= r; ++b) {
        double x = static_cast<double>(a) / r, z = static_cast<double>(b) / r;
        REQUIRE(dot(map.eval(x), map.eval(z)) == Approx(std::min(a, b) / double(r)).margin(1e-12));
      }
  }
}

TEST_CASE("HIK error off the grid is within [0, 1/(4r)] and reaches 1/(4r)", "[features]") {
  // Proof (kernel_maps.h): in different cells φ(x)'φ(z) = min(x,z); in one
  // cell x = (l+s)/r, z = (l+t)/r gives (l + st)/r, error (min(s,t) − st)/r.
  for (int r : {1, 7, 100}) {
    ExpansionMap map = ExpansionMap::hik(r);
    std::mt19937_64 rng(100 + r);
    std::uniform_real_distribution<double> unif(0.0, 1.0);
    double worst = 0;
    for (int t = 0; t < 20000; ++t) {
      double x = unif(rng), z = t % 2 ? unif(rng) : std::min(1.0, x + unif(rng) / r);
      double err = std::min(x, z) - dot(map.eval(x), map.eval(z));
      REQUIRE(err >= -1e-12);
      REQUIRE(err <= 0.25 / r + 1e-12);
      if (std::floor(x * r) != std::floor(z * r) && x < 1 && z < 1) REQUIRE(std::fabs(err) < 1e-12);
      worst = std::max(worst, err);
    }
    double mid = (std::floor(r / 3.0) + 0.5) / r;  // x = z in the middle of a cell
    REQUIRE(mid - dot(map.eval(mid), map.eval(mid)) == Approx(0.25 / r).margin(1e-12));
    REQUIRE(worst > 0.2 / r);
  }
}

TEST_CASE("additive map is the printed V&Z formula", "[features]") {
  for (bool chi2 : {true, false}) {
    for (int n : {1, 5, 50}) {
      double L = chi2 ? 0.4 : 0.7;
      ExpansionMap map = ExpansionMap::additive(chi2 ? AdditiveKernel::kChi2 : AdditiveKernel::kIntersection, n, L);
      REQUIRE(map.dim() == static_cast<uint32_t>(2 * n + 1));
      for (double x : {0.0, 1e-30, 1e-6, 0.01, 0.3, 0.77, 1.0}) {
        std::vector<double> got = map.eval(x), want = vz_formula(x, n, L, chi2);
        for (int l = 0; l <= 2 * n; ++l) {
          REQUIRE(got[l] == Approx(want[l]).margin(1e-13));  // recurrence drift ≪ float32
          REQUIRE(map.component(x, l) == got[l]);
        }
      }
      // x = 0 maps to 0; at x = 1 the sin components vanish.
      for (double v : map.eval(0.0)) REQUIRE(v == 0);
      std::vector<double> one = map.eval(1.0);
      for (int j = 1; j <= n; ++j) REQUIRE(one[2 * j] == 0);
    }
  }
}

TEST_CASE("additive map approximates chi2 and intersection within the documented tolerance", "[features]") {
  // Measured on the grid {k/100} ∪ {1e-6 .. 0.015}² with the default period
  // at order 5: chi2 1.52e-3 (L = 0.377), intersection 4.64e-2 (L = 0.748);
  // the sup over (0,1]² is the same (kernel_maps.h). Tolerances slightly above.
  const double tol_chi2 = 1.6e-3, tol_int = 4.8e-2;
  double p_chi2 = additive_default_period(AdditiveKernel::kChi2, 5);
  double p_int = additive_default_period(AdditiveKernel::kIntersection, 5);
  REQUIRE(p_chi2 == 0.377);
  REQUIRE(p_int == 0.748);
  double e_chi2 = max_additive_error(ExpansionMap::additive(AdditiveKernel::kChi2, 5, p_chi2), true);
  double e_int = max_additive_error(ExpansionMap::additive(AdditiveKernel::kIntersection, 5, p_int), false);
  WARN("max |phi'phi - k| order 5: chi2 " << e_chi2 << ", intersection " << e_int);
  REQUIRE(e_chi2 <= tol_chi2);
  REQUIRE(e_int <= tol_int);
  REQUIRE(e_chi2 > 0.5 * tol_chi2);  // the measurement is what we think it is
  REQUIRE(e_int > 0.5 * tol_int);

  // The default period is (near) the best one for this grid.
  for (bool chi2 : {true, false}) {
    AdditiveKernel kernel = chi2 ? AdditiveKernel::kChi2 : AdditiveKernel::kIntersection;
    double at_default = chi2 ? e_chi2 : e_int, best = 1e9;
    for (int i = 10; i <= 150; i += 2)
      best = std::min(best, max_additive_error(ExpansionMap::additive(kernel, 5, i / 100.0), chi2));
    REQUIRE(at_default <= best * 1.02);
  }
}

TEST_CASE("additive kernel error shrinks as the order grows", "[features]") {
  for (bool chi2 : {true, false}) {
    AdditiveKernel kernel = chi2 ? AdditiveKernel::kChi2 : AdditiveKernel::kIntersection;
    double prev = 1e9;
    for (int n : {1, 2, 3, 5, 8, 12, 20, 35, 50}) {
      double e = max_additive_error(ExpansionMap::additive(kernel, n, additive_default_period(kernel, n)), chi2);
      REQUIRE(e < prev);
      prev = e;
    }
    // chi2 converges fast (sech spectrum), intersection slowly (1/λ²).
    REQUIRE(prev < (chi2 ? 1e-8 : 1e-2));
  }
  // With a fixed period the error stops shrinking once aliasing dominates.
  double e5 = max_additive_error(ExpansionMap::additive(AdditiveKernel::kChi2, 5, 0.377), true);
  double e20 = max_additive_error(ExpansionMap::additive(AdditiveKernel::kChi2, 20, 0.377), true);
  REQUIRE(e20 < e5);
  REQUIRE(e20 > 5e-4);
}

TEST_CASE("expansion maps reject invalid parameters", "[features]") {
  REQUIRE_THROWS_AS(ExpansionMap::hik(0), Error);
  REQUIRE_THROWS_AS(ExpansionMap::additive(AdditiveKernel::kChi2, 0, 0.5), Error);
  REQUIRE_THROWS_AS(ExpansionMap::additive(AdditiveKernel::kChi2, 51, 0.5), Error);
  REQUIRE_THROWS_AS(ExpansionMap::additive(AdditiveKernel::kChi2, 5, 0), Error);
  REQUIRE(parse_additive_kernel("chi2") == AdditiveKernel::kChi2);
  REQUIRE(parse_additive_kernel("intersection") == AdditiveKernel::kIntersection);
  REQUIRE(!parse_additive_kernel("rbf"));
}

TEST_CASE("expansion_feature_value scales with the model and rounds like training", "[features]") {
  Model m;
  m.feature_kind = "additive";
  m.order = 3;
  m.period = 0.45;
  m.kernel = "intersection";
  m.scale_ids = {40, 7};  // unsorted on purpose
  m.scale_min = {-2.0f, 0.0f};
  m.scale_max = {2.0f, 8.0f};
  ExpansionMap map = ExpansionMap::additive(AdditiveKernel::kIntersection, 3, 0.45);
  ModelFeature f;
  f.key.kind = FeatureKind::kAdditive;
  for (uint32_t level = 0; level < 7; ++level) {
    f.key.level = level;
    f.key.ids[0] = 40;
    // x' = (x + 2)/4: a raw 0 (absent) is 0.5; beyond the range clamps.
    for (double raw : {0.0, -2.0, 1.0, 5.0, -9.0}) {
      double x = std::clamp((raw + 2.0) / 4.0, 0.0, 1.0);
      double want = static_cast<float>(vz_formula(x, 3, 0.45, false)[level]);
      REQUIRE(expansion_feature_value(m, f, raw) == Approx(want).margin(1e-7));
      REQUIRE(expansion_feature_value(m, f, raw) == static_cast<float>(map.component(x, level)));
    }
    f.key.ids[0] = 7;
    REQUIRE(expansion_feature_value(m, f, 0.0) == 0.0);
    REQUIRE(expansion_feature_value(m, f, 2.0) == static_cast<float>(map.component(0.25, level)));
  }
  f.key.ids[0] = 8;
  REQUIRE_THROWS_AS(expansion_feature_value(m, f, 1.0), Error);  // no scaling for feature 8
  f.key.ids[0] = 7;
  f.key.level = 7;
  REQUIRE_THROWS_AS(expansion_feature_value(m, f, 1.0), Error);  // beyond 2n+1 components
  f.key.level = 0;
  f.key.kind = FeatureKind::kHik;
  REQUIRE_THROWS_AS(expansion_feature_value(m, f, 1.0), Error);  // kind mismatch

  // HIK, dense scaling (no scale_ids): entry j belongs to feature j.
  Model h;
  h.feature_kind = "hik";
  h.levels = 10;
  h.scale_min = {0.0f, -1.0f};
  h.scale_max = {4.0f, 1.0f};
  ModelFeature g;
  g.key.kind = FeatureKind::kHik;
  g.key.ids[0] = 1;
  g.key.level = 4;  // k = 5: sqrt(0.1)·clamp(10x − 4, 0, 1)
  REQUIRE(expansion_feature_value(h, g, 0.0) == static_cast<float>(std::sqrt(0.1) * 1.0));  // x' = 0.5
  REQUIRE(expansion_feature_value(h, g, -0.1) == Approx(std::sqrt(0.1) * 0.5).margin(1e-7));  // x' = 0.45
  REQUIRE(expansion_feature_value(h, g, -0.5) == 0.0);                                     // x' = 0.25
  g.key.ids[0] = 0;
  REQUIRE(expansion_feature_value(h, g, 2.0) == static_cast<float>(std::sqrt(0.1) * 1.0));
  REQUIRE(expansion_feature_value(h, g, 1.8) == Approx(std::sqrt(0.1) * 0.5).margin(1e-7));
  ExpansionEvaluator ev(h);
  REQUIRE(ev.scaled(1, 0.0) == 0.5);
  h.levels = 0;
  REQUIRE_THROWS_AS(ExpansionEvaluator(h), Error);
}

TEST_CASE("model file round-trips the expansion parameters and scale_ids", "[features]") {
  test::TempDir dir("fgm-kmap");
  Model m;
  m.feature_kind = "additive";
  m.order = 5;
  m.period = 0.377;
  m.kernel = "chi2";
  m.n_features = 1000000;
  m.scale_ids = {3, 17, 999999};
  m.scale_min = {-1.5f, 0.0f, -0.25f};
  m.scale_max = {2.0f, 7.5f, 0.0f};
  ModelFeature f;
  f.key.kind = FeatureKind::kAdditive;
  f.key.ids[0] = 17;
  f.key.level = 9;
  f.key.group = 17;
  f.weight = 0.125;
  f.batch = 1;
  m.features.push_back(f);
  write_model(dir.file("m.fgm"), m);
  Model r = read_model(dir.file("m.fgm"));
  REQUIRE(r.feature_kind == "additive");
  REQUIRE(r.order == 5);
  REQUIRE(r.period == 0.377);
  REQUIRE(r.kernel == "chi2");
  REQUIRE(r.scale_ids == m.scale_ids);
  REQUIRE(r.scale_min == m.scale_min);
  REQUIRE(r.scale_max == m.scale_max);
  REQUIRE(r.features.size() == 1);
  REQUIRE(r.features[0].key == f.key);
  REQUIRE(r.features[0].key.group == 17);
  for (double raw : {0.0, 3.0, -1.0}) REQUIRE(expansion_feature_value(r, r.features[0], raw) ==
                                              expansion_feature_value(m, f, raw));

  // A model without scale_ids reads back with none (dense scaling).
  Model d;
  d.feature_kind = "hik";
  d.levels = 4;
  d.scale_min = {0.0f};
  d.scale_max = {1.0f};
  write_model(dir.file("d.fgm"), d);
  Model rd = read_model(dir.file("d.fgm"));
  REQUIRE(rd.scale_ids.empty());
  REQUIRE(rd.levels == 4);
  REQUIRE(rd.scale_max == d.scale_max);
}
