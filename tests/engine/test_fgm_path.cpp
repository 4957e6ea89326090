#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "engine/debias.h"
#include "engine/fgm_path.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "synth/synthetic_data.h"
#include "solvers/apg.h"
#include "tests/engine/mixed_data.h"
#include "tests/features/explicit_expansion.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

struct PathFixture {
  test::TempDir dir{"fgm-path"};
  MemoryBudget budget{512ull << 20};
  std::unique_ptr<ShardStore> store;
  PathFixture() {
    SynthOptions so;
    so.rows = 800;
    so.test_rows = 400;
    so.features = 300;
    so.relevant = 30;
    so.seed = 21;
    write_gaussian_synthetic(dir.path.string(), so);
    IngestOptions o;
    ingest_libsvm(dir.file("train.svm"), dir.file("store"), o, budget);
    store = ShardStore::open(dir.file("store"), budget);
  }
  TrainSettings base(Loss loss) const {
    TrainSettings s;
    s.B = 5;
    s.max_iterations = 1000;
    s.eps_outer = 0;
    s.apg.loss = loss;
    s.apg.C = 1.0;
    s.apg.bias = true;
    s.final_certificate = false;
    return s;
  }
};

}  // namespace

TEST_CASE("path points equal independent runs, with less APG work", "[engine][path]") {
  PathFixture fx;
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    PathSettings ps;
    ps.base = fx.base(loss);
    // A path certifies the solve at each of its points, which an independent
    // run with a larger count solves inexactly: with every solve run near
    // to its optimum both reach the same models.
    ps.base.apg.eps_inner = 1e-9;
    ps.base.apg.gap_tolerance = 1e-10;
    ps.feature_counts = {5, 10, 20, 35};
    ps.debias = false;
    ps.test_path = fx.dir.file("test.svm");
    PathOutcome path = run_fgm_path(*fx.store, ps, fx.budget);
    REQUIRE(path.points.size() == 4);
    uint64_t independent_work = 0;
    for (size_t k = 0; k < 4; ++k) {
      TrainSettings s = ps.base;
      s.max_features = ps.feature_counts[k];
      TrainOutcome single = train_fgm(*fx.store, s, fx.budget);
      independent_work += single.total_apg_iterations;
      const Model& a = path.points[k].model;
      const Model& b = single.model;
      REQUIRE(a.features.size() == ps.feature_counts[k]);
      REQUIRE(b.features.size() == a.features.size());
      for (size_t j = 0; j < a.features.size(); ++j) {
        REQUIRE(a.features[j].key.ids[0] == b.features[j].key.ids[0]);
        REQUIRE(a.features[j].weight == Approx(b.features[j].weight).margin(1e-9));
      }
      REQUIRE(path.points[k].train_objective == Approx(b.objective).epsilon(1e-9));
      REQUIRE(path.points[k].test.rows == 400);
      REQUIRE(path.points[k].test.accuracy > 0.5);
    }
    // The path reuses its scoring passes and warm starts: strictly less APG work.
    CAPTURE(path.total_apg_iterations, independent_work);
    REQUIRE(path.total_apg_iterations < independent_work);
  }
}

TEST_CASE("de-biased refit satisfies the optimality conditions of the l2 problem", "[engine][path][debias]") {
  PathFixture fx;
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    PathSettings ps;
    ps.base = fx.base(loss);
    ps.feature_counts = {10, 20};
    ps.debias = true;
    ps.debias_C = 2.0;
    // The refit stops on its certified gap; a tight one makes the gradient
    // test below meaningful at 2e-3.
    ps.base.apg.gap_tolerance = 1e-9;
    ps.validation_path = fx.dir.file("test.svm");
    PathOutcome path = run_fgm_path(*fx.store, ps, fx.budget);
    REQUIRE(path.best >= 0);
    for (const auto& p : path.points) {
      REQUIRE(p.has_debiased);
      const Model& m = p.debiased;
      // Independent check: recompute d = Xw - b from the store and the gradient
      // of ½‖w‖² + P(w, b); at the optimum w_j = -∂P/∂w_j and ∂P/∂b = 0.
      const uint64_t n = fx.store->info().n_rows;
      const int8_t* y = fx.store->labels();
      std::vector<double> d(n, -m.bias);
      std::vector<std::vector<uint32_t>> rows(m.features.size());
      std::vector<std::vector<float>> vals(m.features.size());
      for (size_t j = 0; j < m.features.size(); ++j) {
        fx.store->read_column(m.features[j].key.ids[0], rows[j], vals[j]);
        for (size_t k = 0; k < rows[j].size(); ++k) d[rows[j][k]] += m.features[j].weight * vals[j][k];
      }
      std::vector<double> dl(n);  // ∂P/∂d_i with C = 2
      for (uint64_t i = 0; i < n; ++i) {
        double yd = y[i] * d[i];
        dl[i] = loss == Loss::kSquaredHinge ? -2.0 * y[i] * std::max(0.0, 1 - yd)  // (C/2)·max(0,1-yd)²
                                            : -2.0 * y[i] / (1 + std::exp(yd));    // C·log(1+e^{-yd})
      }
      double scale = 0, worst = 0;
      for (size_t j = 0; j < m.features.size(); ++j) {
        double g = 0;
        for (size_t k = 0; k < rows[j].size(); ++k) g += dl[rows[j][k]] * vals[j][k];
        worst = std::max(worst, std::fabs(m.features[j].weight + g));
        scale = std::max(scale, std::fabs(m.features[j].weight));
      }
      double gb = 0;
      for (uint64_t i = 0; i < n; ++i) gb -= dl[i];
      CAPTURE(loss == Loss::kLogistic, worst, scale, gb);
      REQUIRE(worst <= 2e-3 * std::max(1.0, scale));
      REQUIRE(std::fabs(gb) <= 2e-3 * std::max(1.0, scale));
    }
    // The best point has the highest validation accuracy.
    for (const auto& p : path.points)
      REQUIRE(p.validation.accuracy <= path.points[static_cast<size_t>(path.best)].validation.accuracy);
  }
}

TEST_CASE("path settings: exactly one list, increasing counts", "[engine][path]") {
  PathSettings ps;
  REQUIRE_THROWS_WITH(validate_path_settings(ps), Catch::Contains("exactly one list"));
  ps.feature_counts = {10, 5};
  REQUIRE_THROWS_WITH(validate_path_settings(ps), Catch::Contains("strictly increasing"));
  ps.feature_counts = {5, 10};
  ps.C_values = {1.0};
  REQUIRE_THROWS_WITH(validate_path_settings(ps), Catch::Contains("exactly one list"));
}

TEST_CASE("B and C lists run one FGM per value", "[engine][path]") {
  PathFixture fx;
  PathSettings ps;
  ps.base = fx.base(Loss::kSquaredHinge);
  ps.base.max_iterations = 3;
  ps.C_values = {0.1, 1.0, 10.0};
  ps.debias = false;
  PathOutcome path = run_fgm_path(*fx.store, ps, fx.budget);
  REQUIRE(path.mode == "C");
  REQUIRE(path.points.size() == 3);
  for (size_t k = 0; k < 3; ++k) {
    TrainSettings s = fx.base(Loss::kSquaredHinge);
    s.max_iterations = 3;
    s.apg.C = ps.C_values[k];
    TrainOutcome single = train_fgm(*fx.store, s, fx.budget);
    REQUIRE(path.points[k].C == ps.C_values[k]);
    REQUIRE(path.points[k].selected == single.model.features.size());
    REQUIRE(path.points[k].train_objective == Approx(single.model.objective).epsilon(1e-12));
  }
}

namespace {

// Largest violation of the optimality conditions of the de-biased problem
//   min ½‖w‖² + P(w, b)  (P with cost C), w_j = −∂P/∂w_j and ∂P/∂b = 0,
// evaluated on explicitly expanded columns, relative to the size of the terms
// (max(1, |w_j|, Σ_i |∂P/∂d_i · x_ij|)).
double refit_violation(const Model& m, const test::ExplicitExpansion& oracle, const int8_t* y, uint64_t n,
                       Loss loss, double C) {
  std::vector<std::vector<double>> cols = oracle.columns(m);
  std::vector<double> d(n, -m.bias);
  for (size_t k = 0; k < cols.size(); ++k)
    for (uint64_t i = 0; i < n; ++i) d[i] += m.features[k].weight * cols[k][i];
  std::vector<double> dl(n);
  for (uint64_t i = 0; i < n; ++i) {
    double yd = y[i] * d[i];
    dl[i] = loss == Loss::kSquaredHinge ? -C * y[i] * std::max(0.0, 1 - yd) : -C * y[i] / (1 + std::exp(yd));
  }
  double worst = 0, scale = 1;
  for (size_t k = 0; k < cols.size(); ++k) {
    double g = 0, g_abs = 0;
    for (uint64_t i = 0; i < n; ++i) g += dl[i] * cols[k][i], g_abs += std::fabs(dl[i] * cols[k][i]);
    worst = std::max(worst, std::fabs(m.features[k].weight + g));
    scale = std::max({scale, std::fabs(m.features[k].weight), g_abs});
  }
  double gb = 0, gb_abs = 0;
  for (uint64_t i = 0; i < n; ++i) gb -= dl[i], gb_abs += std::fabs(dl[i]);
  scale = std::max(scale, gb_abs);
  return std::max(worst, std::fabs(gb)) / scale;
}

}  // namespace

TEST_CASE("de-biased refits use the generated columns in every space and path mode",
          "[engine][path][debias]") {
  test::TempDir dir("fgm-path-kinds");
  const uint64_t n = 300, m = 12;
  std::string train = dir.write("train.svm", test::mixed_libsvm(n, m, 5));
  std::string groups = dir.write("groups.txt", "1 2 3\n4 5 6\n7 8 9\n10 11 12\n");
  test::InMemoryData rows = test::parse_libsvm_simple(train);
  test::ExplicitExpansion oracle(rows, m);
  MemoryBudget budget(256ull << 20);
  IngestOptions o;
  o.reader.declared_features = m;
  ingest_libsvm(train, dir.file("store"), o, budget);
  auto store = ShardStore::open(dir.file("store"), budget);

  struct Kind {
    std::string name;
    FeatureSpaceSettings space;
  };
  std::vector<Kind> kinds(5);
  kinds[0].name = "linear";
  kinds[1].name = "group";
  kinds[1].space.groups_path = groups;
  kinds[2].name = "poly2";
  kinds[2].space.kind = "poly2";
  kinds[2].space.coef0 = 0.5;
  kinds[3].name = "hik";
  kinds[3].space.kind = "hik";
  kinds[3].space.levels = 6;
  kinds[4].name = "additive";
  kinds[4].space.kind = "additive";
  kinds[4].space.order = 2;
  std::vector<FeatureKind> poly2_kinds_seen;
  for (const Kind& kind : kinds) {
    for (const std::string mode : {"features", "B", "C"}) {
      PathSettings ps;
      ps.base.B = 2;
      ps.base.max_iterations = 3;
      ps.base.eps_outer = 0;
      ps.base.final_certificate = false;
      ps.base.apg.C = 1.0;
      ps.base.apg.bias = true;
      ps.base.space = kind.space;
      if (mode == "features") ps.feature_counts = {2, 4};
      if (mode == "B") ps.B_values = {1, 3};
      if (mode == "C") ps.C_values = {0.5, 4.0};
      ps.debias = true;
      ps.debias_C = 2.0;
      ps.base.apg.gap_tolerance = 1e-10;  // the refit's optimality conditions are checked to 1e-4 below
      PathOutcome path = run_fgm_path(*store, ps, budget);
      REQUIRE(path.points.size() == 2);
      for (const auto& p : path.points) {
        INFO(kind.name << " path." << mode << " point " << p.point);
        REQUIRE(p.has_debiased);
        REQUIRE_FALSE(p.debiased.features.empty());
        for (const auto& f : p.debiased.features)
          if (kind.name == "poly2") poly2_kinds_seen.push_back(f.key.kind);
        double v = refit_violation(p.debiased, oracle, store->labels(), n, Loss::kSquaredHinge, 2.0);
        CAPTURE(v);
        REQUIRE(v <= 1e-4);
      }
    }
  }
  // The poly-2 points cover all three generated kinds.
  for (FeatureKind k : {FeatureKind::kLinear, FeatureKind::kSquare, FeatureKind::kCross})
    REQUIRE(std::count(poly2_kinds_seen.begin(), poly2_kinds_seen.end(), k) > 0);
}

// The refit of a path point is certified like every final solve: it stops on
// apg.gap_tolerance (a fixed eps_inner = 1e-10 made a default path 5–10×
// slower), and its gap bounds the error against a refit solved to 1e-12.
TEST_CASE("de-biased refits stop on their certified gap", "[engine][path][debias][certified]") {
  PathFixture fx;
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    for (bool bias : {false, true}) {
      CAPTURE(loss_name(loss), bias);
      TrainSettings s = fx.base(loss);
      s.apg.bias = bias;
      s.max_features = 15;
      const TrainOutcome trained = train_fgm(*fx.store, s, fx.budget);
      SelectedFeatureCache cache(fx.budget, fx.store->info().n_rows);
      cache.begin_batch();
      std::vector<uint32_t> rows;
      std::vector<float> values;
      for (const auto& f : trained.model.features) {
        fx.store->read_column(f.key.ids[0], rows, values);
        cache.add_column(f.key, rows, values);
      }
      ApgOptions o = s.apg;
      o.certify = true;
      const DebiasResult refit = debias_refit(cache, fx.store->labels(), trained.model, o, fx.budget);
      CAPTURE(refit.solve.relative_gap, refit.solve.iterations);
      REQUIRE(refit.solve.certified);
      REQUIRE(refit.solve.converged);
      REQUIRE(refit.solve.relative_gap <= o.gap_tolerance);
      o.gap_tolerance = 1e-12;
      o.max_iterations = 200000;
      const DebiasResult tight = debias_refit(cache, fx.store->labels(), trained.model, o, fx.budget);
      REQUIRE(tight.solve.converged);
      const double F = refit.solve.objective;
      REQUIRE(F - tight.solve.objective <= refit.solve.relative_gap * F + 1e-12 * F);
      REQUIRE(refit.solve.iterations < tight.solve.iterations);
    }
  }
}
