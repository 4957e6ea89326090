#include <catch2/catch.hpp>

#include <cmath>

#include "engine/debias.h"
#include "engine/fgm_path.h"
#include "io/shard_store.h"
#include "io/synthetic_data.h"
#include "solvers/apg.h"
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
    ps.feature_counts = {5, 10, 20, 35};
    ps.debias = false;
    ps.test_path = fx.dir.file("test.svm");
    PathOutcome path = run_fgm_path(*fx.store, ps, fx.budget);
    REQUIRE(path.points.size() == 4);
    uint64_t independent_work = 0;
    for (size_t k = 0; k < 4; ++k) {
      TrainSettings s = fx.base(loss);
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
