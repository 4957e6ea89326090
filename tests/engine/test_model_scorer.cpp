// predict regenerates HIK/additive features from raw rows: ModelScorer equals
// the explicit expansion (kernel maps applied to the scaled raw values).
#include <catch2/catch.hpp>

#include <cmath>

#include "engine/fgm_trainer.h"
#include "features/kernel_maps.h"
#include "features/model_scorer.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "tests/test_util.h"

using namespace fgm;

TEST_CASE("ModelScorer on raw rows equals the explicit HIK/additive expansion", "[features][scorer]") {
  test::TempDir dir("fgm-scorer");
  // Values of both signs, so implicit zeros scale above 0 and absent features contribute.
  std::string path = dir.write("train.svm", test::random_libsvm(600, 12, 0.4, 19, {2, 5}));
  test::InMemoryData rows = test::parse_libsvm_simple(path);
  MemoryBudget budget(256ull << 20);
  IngestOptions o;
  ingest_libsvm(path, dir.file("store"), o, budget);
  auto store = ShardStore::open(dir.file("store"), budget);
  for (std::string kind : {"hik", "additive"}) {
    TrainSettings s;
    s.B = 2;
    s.max_iterations = 2;
    s.eps_outer = 0;
    s.apg.C = 1;
    s.apg.bias = true;
    s.space.kind = kind;
    s.space.levels = 8;
    TrainOutcome out = train_fgm(*store, s, budget);
    write_model(dir.file(kind + ".fgm"), out.model);
    Model m = read_model(dir.file(kind + ".fgm"));
    REQUIRE(m.feature_kind == kind);
    ModelScorer scorer(m);
    for (size_t i = 0; i < rows.rows.size(); i += 7) {
      std::vector<uint64_t> idx;
      std::vector<float> val;
      for (const auto& [j, v] : rows.rows[i]) {
        idx.push_back(j);
        val.push_back(static_cast<float>(v));
      }
      double want = -m.bias;
      for (const auto& f : m.features) {
        double raw = rows.rows[i].count(f.key.ids[0]) ? double(static_cast<float>(rows.rows[i].at(f.key.ids[0]))) : 0.0;
        want += f.weight * expansion_feature_value(m, f, raw);
      }
      REQUIRE(scorer.decision(idx.data(), val.data(), idx.size()) == Approx(want).epsilon(1e-12).margin(1e-12));
    }
  }
}
