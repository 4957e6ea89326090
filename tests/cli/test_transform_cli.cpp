// features.transform through the CLI: train on raw counts, the model records
// the transforms, inspect shows them, predict applies them to raw rows (its
// accuracy equals the one train reported on the same file), and a bad name is
// a configuration error naming the key.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <sstream>

#include "tests/cli/cli_test_util.h"

using namespace fgm::test;

namespace {

// Word-count-like rows: the label depends on log counts of a few features.
std::string count_rows(int rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::geometric_distribution<int> count(0.25);
  std::uniform_real_distribution<double> unif(0, 1);
  std::ostringstream out;
  for (int i = 0; i < rows; ++i) {
    std::ostringstream row;
    double margin = 0;
    for (int j = 1; j <= 60; ++j) {
      if (unif(rng) > 0.3) continue;
      int c = 1 + count(rng) * (j % 4 == 0 ? 10 : 1);
      row << ' ' << j << ':' << c;
      if (j <= 6) margin += (j % 2 ? 1.0 : -1.0) * std::log1p(c);
    }
    out << (margin > 0 ? "+1" : "-1") << row.str() << '\n';
  }
  return out.str();
}

// The number after `key` (train prints 4 decimals, predict 6); -1 if absent.
double number_after(const std::string& text, const std::string& key) {
  auto at = text.find(key);
  return at == std::string::npos ? -1.0 : std::stod(text.substr(at + key.size()));
}

}  // namespace

TEST_CASE("fgm train/inspect/predict with features.transform", "[cli][transform]") {
  TempDir dir("fgm-cli-transform");
  dir.write("train.svm", count_rows(400, 1));
  dir.write("test.svm", count_rows(200, 2));
  const std::string common =
      "data.train=train.svm data.test=test.svm output.dir=run engine.cache_dir=cache fgm.B=3 "
      "fgm.max_iterations=3 engine.progress=off features.kind=poly2 ";
  RunResult r = run(dir, "train " + common + "'features.transform=[\"log1p\", \"maxabs\", \"row_l2\"]'");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  const double trained = number_after(r.out, "accuracy=");
  REQUIRE(trained > 0.6);  // the transforms make the planted log-count rule learnable
  REQUIRE(contains(r.err, "feature transforms [log1p, maxabs, row_l2]"));

  RunResult inspect = run(dir, "inspect run/model.fgm");
  REQUIRE(inspect.code == 0);
  REQUIRE(contains(inspect.out, "\"transforms\""));
  REQUIRE(contains(inspect.out, "\"name\": \"maxabs\""));
  REQUIRE(contains(inspect.out, "\"name\": \"row_l2\""));

  RunResult predict = run(dir, "predict --model run/model.fgm test.svm --out scores.txt");
  CAPTURE(predict.err);
  REQUIRE(predict.code == 0);
  REQUIRE(std::fabs(number_after(predict.out, "accuracy=") - trained) < 5.1e-5);

  // A second run reuses the cached statistics.
  r = run(dir, "train " + common + "output.dir=run2 'features.transform=[\"log1p\", \"maxabs\", \"row_l2\"]'");
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.err, "0 stages computed, 2 from the cache"));
  REQUIRE(run(dir, "predict --model run2/model.fgm test.svm --out scores2.txt").code == 0);
  REQUIRE(slurp(dir.file("scores2.txt")) == slurp(dir.file("scores.txt")));

  // Without transforms: no transforms in the model or in inspect.
  r = run(dir, "train " + common + "output.dir=plain");
  REQUIRE(r.code == 0);
  REQUIRE(!contains(run(dir, "inspect plain/model.fgm").out, "\"transforms\""));

  RunResult bad = run(dir, "train " + common + "output.dir=bad 'features.transform=[\"log1p\", \"log2\"]'");
  REQUIRE(bad.code == 2);
  REQUIRE(contains(bad.err, "features.transform"));
  REQUIRE(contains(bad.err, "'log2'"));
  REQUIRE(!fgm::test::contains(slurp(dir.file("bad/model.fgm")), "FGM"));
}
