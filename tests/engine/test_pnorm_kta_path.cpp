// The pnorm_kta driver (engine/pnorm_kta_path.h): the path's points against
// the closed-form active set, the linear SVM at a point against its
// optimality conditions computed from an independent parse of the text, the
// RBF kernel SVM on a problem a linear model cannot solve, and the whole run
// identical for 1 and 2 threads.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <sstream>

#include "engine/pnorm_kta_path.h"
#include "io/ingest.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

// Feature 1 decides the label through |x| (not linearly separable), feature 2
// linearly; features 3.. are noise; integer-valued columns with ties.
std::string nonlinear_text(uint64_t rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> value(-3, 3);
  std::uniform_real_distribution<double> u(0, 1);
  std::ostringstream out;
  for (uint64_t r = 0; r < rows; ++r) {
    const int x1 = value(rng), x2 = value(rng);
    const bool positive = (std::abs(x1) >= 2) != (u(rng) < 0.05);
    out << (positive ? "+1" : "-1");
    if (x1) out << " 1:" << x1;
    if (x2) out << " 2:" << (positive ? x2 + 1 : x2);
    for (int j = 3; j <= 12; ++j)
      if (int v = value(rng)) out << ' ' << j << ':' << v;
    out << '\n';
  }
  return out.str();
}

struct Fixture {
  test::TempDir dir{"fgm-kta-engine"};
  MemoryBudget budget{64ull << 20};
  std::unique_ptr<ShardStore> store;
  test::InMemoryData data;
  std::string test_path;
  Fixture() {
    const std::string train = dir.write("train.svm", nonlinear_text(300, 1));
    test_path = dir.write("test.svm", nonlinear_text(200, 2));
    data = test::parse_libsvm_simple(train);
    IngestOptions o;
    o.reader.declared_features = 12;
    o.block_bytes = 1024;
    o.tile_rows = 64;
    ingest_libsvm(train, dir.file("store"), o, budget);
    store = ShardStore::open(dir.file("store"), budget);
  }
};

KtaSettings settings_for(kta::KernelKind kernel, int threads) {
  KtaSettings s;
  s.kernel = kernel;
  s.path.lambda1 = 0.05;
  s.path.lambda2 = 0.05;
  s.path.p_step = 0.05;
  s.C = 1.0;
  s.apg.eps_inner = 1e-7;
  s.apg.gap_tolerance = 1e-10;  // the linear SVM is a certified solve; its optimality conditions are checked to 1e-3
  s.apg.max_iterations = 200000;
  s.scheduler.threads = threads;
  s.block_bytes = 2048;
  return s;
}

}  // namespace

TEST_CASE("KTA driver: points follow the closed form; the linear SVM meets its optimality conditions",
          "[kta][engine]") {
  Fixture fx;
  KtaSettings s = settings_for(kta::KernelKind::kLinear, 1);
  s.test_path = fx.test_path;
  const std::unique_ptr<KtaData> data = open_kta_store(*fx.store, fx.budget);
  KtaRun run = data->align(s);
  REQUIRE(run.alignments.size() == 12);
  std::vector<kta::PathPoint> points;
  run_kta_path(*data, s, fx.budget, run, [&](const KtaPoint& p, const kta::PathPoint& pp) {
    points.push_back(pp);
    uint64_t expected = 0;
    for (const auto& f : run.alignments) expected += f.alignment > kta::active_threshold(p.p, s.path);
    REQUIRE(p.selected == expected);
    REQUIRE(std::isfinite(p.test.accuracy));
  });
  REQUIRE(run.points.size() == kta::path_grid(s.path).size());
  REQUIRE(run.best_test_point >= 0);
  // The linear SVM at the first point with two or more features, checked on
  // the raw parse: ω_k = C Σ_i ξ_i y_i z_ik and Σ_i ξ_i y_i = 0 (bias), with
  // z_ik = x_ik·sqrt((η_k/Ση)·n/‖x_k − μ_k‖²).
  const kta::PathPoint* point = nullptr;
  for (const auto& pp : points)
    if (pp.active.size() >= 2) point = &pp;
  REQUIRE(point != nullptr);
  const Model m = data->fit(s, run.alignments, *point).model;
  const size_t n = fx.data.labels.size();
  double eta_sum = 0;
  for (double w : point->weights) eta_sum += w;
  std::vector<double> scale;
  for (size_t k = 0; k < point->active.size(); ++k) {
    const uint64_t j = run.alignments[point->active[k]].feature;
    double mean = 0, var = 0;
    for (size_t i = 0; i < n; ++i) mean += fx.data.rows[i].count(j) ? fx.data.rows[i].at(j) : 0.0;
    mean /= n;
    for (size_t i = 0; i < n; ++i) {
      const double d = (fx.data.rows[i].count(j) ? fx.data.rows[i].at(j) : 0.0) - mean;
      var += d * d;
    }
    scale.push_back(std::sqrt(point->weights[k] / eta_sum * n / var));
    REQUIRE(m.features[k].key.ids[0] == j);
  }
  std::vector<double> grad(scale.size(), 0.0);
  double bias_grad = 0, omega_norm = 0;
  for (size_t i = 0; i < n; ++i) {
    const double y = fx.data.labels[i] > 0 ? 1 : -1;
    double d = -m.bias;
    for (size_t k = 0; k < scale.size(); ++k) {
      const uint64_t j = m.features[k].key.ids[0];
      d += m.features[k].weight * (fx.data.rows[i].count(j) ? fx.data.rows[i].at(j) : 0.0);
    }
    const double xi = std::max(0.0, 1 - y * d);
    bias_grad += xi * y;
    for (size_t k = 0; k < scale.size(); ++k) {
      const uint64_t j = m.features[k].key.ids[0];
      grad[k] += s.C * xi * y * scale[k] * (fx.data.rows[i].count(j) ? fx.data.rows[i].at(j) : 0.0);
    }
  }
  double residual = 0;
  for (size_t k = 0; k < scale.size(); ++k) {
    const double omega = m.features[k].weight / scale[k];
    omega_norm += omega * omega;
    residual += (omega - grad[k]) * (omega - grad[k]);
  }
  REQUIRE(omega_norm > 0);
  REQUIRE(std::sqrt(residual) <= 1e-3 * std::sqrt(omega_norm));
  REQUIRE(std::fabs(bias_grad) <= 1e-3 * n);
}

TEST_CASE("KTA driver: the RBF kernel SVM learns |x| that no linear model can", "[kta][engine]") {
  Fixture fx;
  double best_linear = 0, best_rbf = 0;
  for (auto kernel : {kta::KernelKind::kLinear, kta::KernelKind::kRbf}) {
    KtaSettings s = settings_for(kernel, 1);
    s.test_path = fx.test_path;
    s.path.lambda1 = 0.01;
    s.path.lambda2 = 0.02;
    s.path.p_step = 0.25;
    const std::unique_ptr<KtaData> data = open_kta_store(*fx.store, fx.budget);
    KtaRun run = data->align(s);
    run_kta_path(*data, s, fx.budget, run, nullptr);
    REQUIRE(run.best_test_point >= 0);
    const double best = run.points[run.best_test_point].test.accuracy;
    (kernel == kta::KernelKind::kLinear ? best_linear : best_rbf) = best;
    if (kernel == kta::KernelKind::kRbf) {
      // Feature 1 (id 0) has by far the largest RBF alignment.
      for (const auto& f : run.alignments)
        if (f.feature != 0) REQUIRE(f.alignment < run.alignments[0].alignment / 3);
    }
  }
  CAPTURE(best_linear, best_rbf);
  REQUIRE(best_rbf > 0.85);
  REQUIRE(best_rbf > best_linear + 0.1);
}

TEST_CASE("KTA driver: 1 and 2 threads give the same path and models", "[kta][engine]") {
  Fixture fx;
  std::vector<std::vector<double>> weights[2];
  for (int threads : {1, 2}) {
    KtaSettings s = settings_for(kta::KernelKind::kLinear, threads);
    s.train_p = 1.3;
    const std::unique_ptr<KtaData> data = open_kta_store(*fx.store, fx.budget);
    KtaRun run = data->align(s);
    const Model m = train_kta_model(*data, s, fx.budget, run).model;
    REQUIRE(run.points.back().p == Approx(1.3));
    REQUIRE(!m.features.empty());  // the path had the alignments (an empty run selects nothing)
    std::vector<double> w;
    for (const auto& f : m.features) w.push_back(f.weight);
    w.push_back(m.bias);
    weights[threads - 1].push_back(w);
    for (const auto& p : run.points) weights[threads - 1].push_back({p.p, double(p.selected), p.weight_sum});
  }
  REQUIRE(weights[0] == weights[1]);
}
