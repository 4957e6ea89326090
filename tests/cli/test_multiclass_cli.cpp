// fgm train / predict / inspect / path on a multi-class LIBSVM file.
#include <catch2/catch.hpp>

#include <random>
#include <sstream>

#include "core/json_writer.h"
#include "io/model_file.h"
#include "tests/cli/cli_test_util.h"

using namespace fgm;
using namespace fgm::test;

namespace {

// Three classes 1, 2, 3 (some spelled 2.0 / 3.000); class k raises features
// 4k+1..4k+4, so a few features per class separate them.
std::string three_classes(uint64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unif(0, 1);
  std::ostringstream out;
  for (uint64_t i = 0; i < n; ++i) {
    int c = static_cast<int>(i % 3);
    out << (c == 0 ? "1" : c == 1 ? (i % 2 ? "2.0" : "2") : (i % 2 ? "3.000" : "3"));
    for (int j = 0; j < 16; ++j) {
      double v = unif(rng) < 0.25 ? std::floor(3 * unif(rng)) : 0;
      if (j / 4 == c) v += 1;
      if (v != 0) out << ' ' << j + 1 << ':' << v;
    }
    out << '\n';
  }
  return out.str();
}

}  // namespace

TEST_CASE("multi-class train, predict, inspect; path refuses clearly", "[cli][multiclass]") {
  TempDir dir("fgm-cli-mc");
  dir.write("train.svm", three_classes(300, 1));
  dir.write("test.svm", three_classes(90, 2));
  RunResult r = run(dir, "train data.train=train.svm data.test=test.svm output.dir=run fgm.B=2 "
                         "fgm.max_iterations=2 engine.cache_dir=cache engine.progress=off");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.out, "classes=3"));
  REQUIRE(contains(r.out, "accuracy="));

  Model m = read_model(dir.file("run/model.fgm"));
  REQUIRE(m.multiclass());
  REQUIRE(m.classes.size() == 3);
  REQUIRE(m.classes[0].label == 1);
  REQUIRE(m.classes[2].label == 3);
  for (const auto& c : m.classes) REQUIRE(c.features.size() == 4);

  std::string run_json = slurp(dir.file("run/run.json"));
  REQUIRE(contains(run_json, "\"classes\": ["));
  REQUIRE(contains(run_json, "\"stop_reason\""));

  RunResult p = run(dir, "predict --model run/model.fgm test.svm --out pred.txt");
  CAPTURE(p.err);
  REQUIRE(p.code == 0);
  REQUIRE(contains(p.out, "accuracy="));
  REQUIRE(contains(p.out, "auc="));
  // The predictions file holds original labels, one per row.
  std::istringstream pred(slurp(dir.file("pred.txt")));
  std::string line;
  uint64_t rows = 0;
  while (std::getline(pred, line)) {
    REQUIRE((line == "1" || line == "2" || line == "3"));
    ++rows;
  }
  REQUIRE(rows == 90);

  RunResult i = run(dir, "inspect run/model.fgm");
  REQUIRE(i.code == 0);
  REQUIRE(contains(i.out, "\"classes\": ["));

  RunResult path = run(dir, "path data.train=train.svm output.dir=p 'path.features=[2,4]' "
                            "engine.cache_dir=cache engine.progress=off");
  REQUIRE(path.code == 2);
  REQUIRE(contains(path.err, "3 classes"));
  REQUIRE(contains(path.err, "fgm path supports two-label stores only"));
}
