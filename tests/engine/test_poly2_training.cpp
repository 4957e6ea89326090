// FGM training on the poly-2 space (engine/ driving features/poly2_space).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <sstream>

#include "engine/evaluate.h"
#include "engine/fgm_trainer.h"
#include "features/model_scorer.h"
#include "features/poly2_space.h"
#include "io/model_file.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

// The construction of tests/features/test_poly2_space.cpp (tied_pairs_data):
// features 0,1 share 13 positive rows; 2,3 share 13 positive rows plus one
// negative row each; `heavy` balanced features (7 positive, 7 negative rows
// each, disjoint). With α = 1, cross(0,1) and cross(2,3) tie at 2·13².
std::unique_ptr<ShardStore> tied_pairs_store(test::TempDir& dir, size_t heavy, MemoryBudget& budget) {
  std::ostringstream text;
  auto row = [&](int label, std::vector<size_t> on) {
    text << (label > 0 ? "+1" : "-1");
    for (size_t j : on) text << ' ' << j + 1 << ":1";
    text << '\n';
  };
  for (int r = 0; r < 13; ++r) row(+1, {0, 1});
  for (int r = 0; r < 13; ++r) row(+1, {2, 3});
  row(-1, {2});
  row(-1, {3});
  for (size_t h = 0; h < heavy; ++h)
    for (int r = 0; r < 14; ++r) row(r < 7 ? +1 : -1, {4 + h});
  IngestOptions o;
  o.reader.declared_features = 4 + heavy;
  o.shard_target_bytes = 16 << 10;
  ingest_libsvm(dir.write("train.svm", text.str()), dir.file("store"), o, budget);
  return ShardStore::open(dir.file("store"), budget);
}

}  // namespace

TEST_CASE("FGM on poly2 recovers a planted cross-feature model; predict regenerates features",
          "[features][poly2][fgm]") {
  test::TempDir dir("fgm-poly2-planted");
  std::mt19937_64 rng(9);
  std::normal_distribution<double> normal(0, 1);
  auto make = [&](uint64_t n) {
    std::ostringstream out;
    for (uint64_t i = 0; i < n; ++i) {
      std::vector<double> x(40);
      for (auto& v : x) v = normal(rng);
      double margin = 2.0 * x[3] * x[17] - 1.5 * x[8] * x[30] + 0.5 * x[5];
      out << (margin >= 0 ? "+1" : "-1");
      for (size_t j = 0; j < x.size(); ++j) out << ' ' << j + 1 << ':' << static_cast<float>(x[j]);
      out << '\n';
    }
    return out.str();
  };
  std::string train = dir.write("train.svm", make(3000));
  std::string test_path = dir.write("test.svm", make(1000));
  MemoryBudget budget(512ull << 20);
  IngestOptions o;
  ingest_libsvm(train, dir.file("store"), o, budget);
  auto store = ShardStore::open(dir.file("store"), budget);
  TrainSettings s;
  s.B = 2;
  s.max_iterations = 3;
  s.eps_outer = 0;
  s.apg.C = 1.0;
  s.apg.bias = true;
  s.apg.threads = s.scheduler.threads = 2;
  s.space.kind = "poly2";
  TrainOutcome out = train_fgm(*store, s, budget);
  auto has_cross = [&](uint64_t j, uint64_t k) {
    for (const auto& f : out.model.features)
      if (f.key.kind == FeatureKind::kCross && f.key.ids[0] == j && f.key.ids[1] == k) return true;
    return false;
  };
  REQUIRE(out.model.feature_kind == "poly2");
  REQUIRE(has_cross(3, 17));
  REQUIRE(has_cross(8, 30));
  EvalResult ev = evaluate_file(test_path, out.model, true, budget);
  CAPTURE(ev.accuracy);
  REQUIRE(ev.accuracy > 0.9);

  // predict on raw rows == the explicit expansion's dot product.
  write_model(dir.file("m.fgm"), out.model);
  Model m = read_model(dir.file("m.fgm"));
  ModelScorer scorer(m);
  test::InMemoryData rows = test::parse_libsvm_simple(test_path);
  for (size_t i = 0; i < 200; ++i) {
    std::vector<uint64_t> idx;
    std::vector<float> val;
    for (const auto& [j, v] : rows.rows[i]) {
      idx.push_back(j);
      val.push_back(static_cast<float>(v));
    }
    double explicit_dot = -m.bias;
    auto x = [&](uint64_t j) { return rows.rows[i].count(j) ? double(static_cast<float>(rows.rows[i].at(j))) : 0.0; };
    for (const auto& f : m.features) {
      double phi = f.key.kind == FeatureKind::kLinear   ? std::sqrt(2 * m.gamma * m.coef0) * x(f.key.ids[0])
                   : f.key.kind == FeatureKind::kSquare ? m.gamma * x(f.key.ids[0]) * x(f.key.ids[0])
                                                        : std::sqrt(2.0) * m.gamma * x(f.key.ids[0]) * x(f.key.ids[1]);
      explicit_dot += f.weight * phi;
    }
    REQUIRE(scorer.decision(idx.data(), val.data(), idx.size()) == Approx(explicit_dot).epsilon(1e-9).margin(1e-12));
    REQUIRE(ev.scores[i] == Approx(explicit_dot).epsilon(1e-9).margin(1e-12));
  }
}

TEST_CASE("poly2 training with fgm.B=1 selects the tied pair with the smaller id", "[features][poly2][ties]") {
  test::TempDir dir("fgm-poly2-tie");
  MemoryBudget budget(256ull << 20);
  auto store = tied_pairs_store(dir, 254, budget);
  TrainSettings s;
  s.B = 1;
  s.max_iterations = 1;
  s.apg.C = 1.0;
  s.final_certificate = false;
  s.space.kind = "poly2";
  s.space.coef0 = 0.5;
  TrainOutcome out = train_fgm(*store, s, budget);
  REQUIRE(out.model.features.size() == 1);
  REQUIRE(out.model.features[0].key.kind == FeatureKind::kCross);
  REQUIRE(out.model.features[0].key.ids[0] == 0);
  REQUIRE(out.model.features[0].key.ids[1] == 1);
}

