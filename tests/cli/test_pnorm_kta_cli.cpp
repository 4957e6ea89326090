// fgm path / train / predict / inspect / report with solver = "pnorm_kta".
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "core/json_reader.h"
#include "tests/cli/cli_test_util.h"

using namespace fgm::test;

namespace {

struct KtaFiles {
  TempDir dir{"fgm-kta-cli"};
  KtaFiles() {
    dir.write("train.svm", random_libsvm(400, 40, 0.3, 5, {0, 3, 7}));
    dir.write("test.svm", random_libsvm(200, 40, 0.3, 6, {0, 3, 7}));
    dir.write("valid.svm", random_libsvm(150, 40, 0.3, 7, {0, 3, 7}));
    dir.write("kta.toml",
              "solver = \"pnorm_kta\"\n"
              "[data]\ntrain = \"train.svm\"\ntest = \"test.svm\"\n"
              "[kta]\nlambda1 = 0.01\nlambda2 = 0.05\np_step = 0.1\n"
              "[engine]\ncache_dir = \"cache\"\nprogress = \"off\"\n");
  }
};

// The rows of a CSV as vectors of cells.
size_t column_of(const std::vector<std::string>& header, const std::string& name) {
  const size_t c = csv_column(header, name);
  if (c == header.size()) FAIL("no column " << name);
  return c;
}

}  // namespace

TEST_CASE("fgm path with solver = pnorm_kta: path.csv per p, oracle labelled, point models", "[kta][cli]") {
  KtaFiles f;
  const RunResult r = run(f.dir, "path --config kta.toml data.validation=valid.svm output.dir=out");
  INFO(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.out, "oracle_best_test_accuracy="));
  const auto rows = csv_cells(slurp(f.dir.file("out/path.csv")));
  REQUIRE(rows.size() == 12);  // header + p = 2.0, 1.9, ..., 1.0
  const auto& h = rows[0];
  for (const char* name : {"p", "selected", "test_accuracy", "validation_accuracy", "seconds"}) column_of(h, name);
  const size_t p_col = column_of(h, "p"), sel = column_of(h, "selected"), acc = column_of(h, "test_accuracy");
  REQUIRE(rows[1][p_col] == "2");
  REQUIRE(rows.back()[p_col] == "1");
  for (size_t i = 2; i < rows.size(); ++i) REQUIRE(std::stoul(rows[i][sel]) <= std::stoul(rows[i - 1][sel]));
  REQUIRE(std::stoul(rows[1][sel]) > std::stoul(rows.back()[sel]));
  const std::string json = slurp(f.dir.file("out/path.json"));
  REQUIRE(contains(json, "\"solver\": \"pnorm_kta\""));
  REQUIRE(contains(json, "\"oracle_best_test\""));
  REQUIRE(contains(json, "ORACLE"));
  REQUIRE(contains(json, "\"seconds_per_point\""));
  REQUIRE(std::filesystem::exists(f.dir.file("out/report.html")));
  // A point's model, scored by fgm predict from the text, gives path.csv's accuracy.
  const size_t point = 6;
  REQUIRE(std::stoul(rows[point][sel]) > 0);
  const RunResult p = run(f.dir, "predict --model out/point-" + std::to_string(point) + ".fgm test.svm");
  REQUIRE(p.code == 0);
  REQUIRE(contains(p.out, "accuracy=" + rows[point][acc]));
  const RunResult report = run(f.dir, "report out");
  REQUIRE(report.code == 0);
}

TEST_CASE("fgm path with solver = pnorm_kta: 1 and 2 threads write the same path", "[kta][cli]") {
  KtaFiles f;
  std::vector<std::vector<std::string>> runs[2];
  for (int threads : {1, 2}) {
    const RunResult r = run(f.dir, "path --config kta.toml engine.block_bytes=4KB engine.threads=" +
                                       std::to_string(threads) + " output.dir=out" + std::to_string(threads));
    INFO(r.err);
    REQUIRE(r.code == 0);
    auto rows = csv_cells(slurp(f.dir.file("out" + std::to_string(threads) + "/path.csv")));
    const size_t first_time = column_of(rows[0], "seconds");
    for (auto& row : rows) row.resize(first_time);  // the columns before the timings
    runs[threads - 1] = rows;
  }
  REQUIRE(runs[0] == runs[1]);
}

TEST_CASE("fgm path with solver = pnorm_kta and an RBF kernel keeps no point models", "[kta][cli]") {
  KtaFiles f;
  const RunResult r = run(f.dir, "path --config kta.toml kta.kernel=rbf kta.p_step=0.25 output.dir=out");
  INFO(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(slurp(f.dir.file("out/path.json")), "\"point_models\": false"));
  REQUIRE_FALSE(std::filesystem::exists(f.dir.file("out/point-1.fgm")));
  REQUIRE(std::filesystem::exists(f.dir.file("out/report.html")));
  const auto rows = csv_cells(slurp(f.dir.file("out/path.csv")));
  REQUIRE(rows.size() == 6);
  REQUIRE_FALSE(rows[1][column_of(rows[0], "test_accuracy")].empty());
}

TEST_CASE("fgm train with solver = pnorm_kta: a linear model that predict, inspect and report read", "[kta][cli]") {
  KtaFiles f;
  const RunResult r = run(f.dir, "train --config kta.toml kta.p=1.4 output.dir=out");
  INFO(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.out, "p=1.4"));
  const std::string run_json = slurp(f.dir.file("out/run.json"));
  REQUIRE(contains(run_json, "\"solver\": \"pnorm_kta\""));
  const RunResult inspect = run(f.dir, "inspect out/model.fgm");
  REQUIRE(inspect.code == 0);
  REQUIRE(contains(inspect.out, "\"solver\": \"pnorm_kta\""));
  const RunResult predict = run(f.dir, "predict --model out/model.fgm test.svm");
  REQUIRE(predict.code == 0);
  // train's printed accuracy (evaluate_file) equals predict's.
  const size_t at = r.out.find("accuracy=");
  REQUIRE(at != std::string::npos);
  REQUIRE(contains(predict.out, r.out.substr(at, r.out.find(' ', at) - at)));
  REQUIRE(run(f.dir, "report out").code == 0);
}

TEST_CASE("solver = pnorm_kta: bad and ignored keys are errors naming the key, nothing written", "[kta][cli]") {
  KtaFiles f;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"path --config kta.toml kta.kernel=poly", "kta.kernel"},
      {"path --config kta.toml kta.lambda1=0", "kta.lambda1"},
      {"path --config kta.toml kta.epsilon=0.5", "kta.epsilon"},
      {"path --config kta.toml kta.p_end=1.8 kta.p_start=1.5", "kta.p_end"},
      {"path --config kta.toml fgm.B=3", "fgm.B"},
      {"path --config kta.toml path.features=[5]", "path.features"},
      {"path --config kta.toml kta.p=1.2", "kta.p"},
      {"path --config kta.toml features.kind=poly2", "features.kind"},
      {"path --config kta.toml kta.kernel=rbf apg.eta=0.3", "apg.eta"},
      {"train --config kta.toml kta.p_end=1.2", "kta.p_end"},
      {"train --config kta.toml kta.p_start=1.3", "kta.p"},
      {"train --config kta.toml solver=fgm", "belongs to solver = \"pnorm_kta\""},
  };
  for (const auto& [args, key] : cases) {
    CAPTURE(args);
    const RunResult r = run(f.dir, args + " output.dir=bad");
    REQUIRE(r.code == 2);
    REQUIRE(contains(r.err, key));
    REQUIRE_FALSE(std::filesystem::exists(f.dir.file("bad/path.csv")));
    REQUIRE_FALSE(std::filesystem::exists(f.dir.file("bad/model.fgm")));
  }
  // A missing test file is named too.
  const RunResult missing = run(f.dir, "path --config kta.toml data.test=nope.svm output.dir=bad");
  REQUIRE(missing.code != 0);
  REQUIRE(contains(missing.err, "nope.svm"));
}

TEST_CASE("solver = pnorm_kta with an RBF kernel refuses a kernel the budget cannot hold", "[kta][cli]") {
  KtaFiles f;
  // 400 rows: the LIBSVM training kernel needs 400 x 402 x 16 bytes = 2.5 MiB.
  const RunResult small = run(f.dir, "path --config kta.toml kta.kernel=rbf kta.p_step=0.5 "
                                     "engine.memory_budget=2MB output.dir=small");
  REQUIRE(small.code == 6);
  REQUIRE(contains(small.err, "400 x 400"));
  REQUIRE(contains(small.err, "engine.memory_budget"));
  REQUIRE_FALSE(std::filesystem::exists(f.dir.file("small/path.csv")));
  const RunResult enough = run(f.dir, "path --config kta.toml kta.kernel=rbf kta.p_step=0.5 "
                                      "engine.memory_budget=4MB output.dir=enough");
  INFO(enough.err);
  REQUIRE(enough.code == 0);
}

// Each point's linear SVM is a certified APG solve: one that stops at
// apg.max_iterations above apg.gap_tolerance says so (path.json and stderr);
// with the default cap none does.
TEST_CASE("pnorm_kta: a linear SVM above apg.gap_tolerance is a warning", "[kta][cli][warnings]") {
  KtaFiles f;
  RunResult r = run(f.dir, "path --config kta.toml output.dir=capped apg.max_iterations=1");
  INFO(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.err, "warning: pnorm_kta point p = "));
  REQUIRE(contains(slurp(f.dir.file("capped/path.json")), "\"kta_svm_gap_above_tolerance\""));
  r = run(f.dir, "path --config kta.toml output.dir=ok");
  REQUIRE(r.code == 0);
  REQUIRE_FALSE(contains(slurp(f.dir.file("ok/path.json")), "kta_svm_gap_above_tolerance"));
}

TEST_CASE("fgm path with solver = pnorm_kta and path.folds: the CV choice, refit and oracle side by side",
          "[kta][cli][cv]") {
  KtaFiles f;
  f.dir.write("cv.toml",
              "solver = \"pnorm_kta\"\n"
              "[data]\ntrain = \"train.svm\"\ntest = \"test.svm\"\n"
              "[kta]\nlambda1 = 0.01\n"
              "[engine]\ncache_dir = \"cache\"\nprogress = \"off\"\n");
  const std::string args =
      "path --config cv.toml path.folds=3 path.fold_seed=5 kta.lambda2_grid=[0.02,0.1] kta.C_grid=[0.1,10] "
      "kta.p_step=0.25 engine.block_bytes=4KB";
  std::string csv[2];
  for (int threads : {1, 2}) {
    const std::string out = "cv" + std::to_string(threads);
    const RunResult r = run(f.dir, args + " engine.threads=" + std::to_string(threads) + " output.dir=" + out);
    INFO(r.err);
    REQUIRE(r.code == 0);
    REQUIRE(contains(r.out, "cv_accuracy="));
    REQUIRE(contains(r.out, "oracle_best_test_accuracy="));
    csv[threads - 1] = slurp(f.dir.file(out + "/cv.csv"));
  }
  REQUIRE(csv[0] == csv[1]);  // no timings in cv.csv: the same bits for 1 and 2 threads
  const auto rows = csv_cells(csv[0]);
  REQUIRE(rows.size() == 1 + 1 * 2 * 5 * 2);  // lambda1 x lambda2 x points x C
  const size_t acc = column_of(rows[0], "cv_accuracy"), chosen = column_of(rows[0], "chosen");
  const size_t l2 = column_of(rows[0], "lambda2"), C = column_of(rows[0], "C"), point = column_of(rows[0], "point");
  double best = -1;
  size_t chosen_row = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    best = std::max(best, std::stod(rows[i][acc]));
    if (rows[i][chosen] == "1") {
      REQUIRE(chosen_row == 0);
      chosen_row = i;
    }
  }
  REQUIRE(chosen_row > 0);
  REQUIRE(std::stod(rows[chosen_row][acc]) == best);
  // path.json: the refit ran with the chosen lambda2 and C, and the chosen point's test accuracy is path.csv's.
  const fgm::JsonValue json = fgm::parse_json(slurp(f.dir.file("cv1/path.json")), "path.json");
  const fgm::JsonValue* cv = json.find("cross_validation");
  REQUIRE(cv);
  CHECK(cv->find("folds")->number() == 3);
  const fgm::JsonValue* choice = cv->find("chosen");
  CHECK(choice->find("lambda2")->number() == Approx(std::stod(rows[chosen_row][l2])));
  CHECK(choice->find("C")->number() == Approx(std::stod(rows[chosen_row][C])));
  CHECK(json.find("kta")->find("lambda2")->number() == choice->find("lambda2")->number());
  CHECK(json.find("kta")->find("C")->number() == choice->find("C")->number());
  CHECK(json.find("oracle_best_test"));
  const auto path = csv_cells(slurp(f.dir.file("cv1/path.csv")));
  const size_t k = std::stoul(rows[chosen_row][point]);
  CHECK(choice->find("test_accuracy")->number() == Approx(std::stod(path[k][column_of(path[0], "test_accuracy")])));
}

TEST_CASE("pnorm_kta cross-validation: unsupported combinations are refused naming the key", "[kta][cli][cv]") {
  KtaFiles f;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"path --config kta.toml kta.lambda2_grid=[0.1,0.2]", "kta.lambda2_grid"},
      {"path --config kta.toml path.folds=3 kta.C_grid=[1,2] kta.C=3", "kta.C"},
      {"path --config kta.toml path.folds=3 kta.lambda1_grid=[0]", "kta.lambda1_grid"},
      {"path --config kta.toml path.folds=500", "path.folds"},
      {"path --config kta.toml path.fold_seed=3", "path.fold_seed"},
      {"train --config kta.toml path.folds=3", "path.folds"},
      {"train --config kta.toml kta.C_grid=[1,2]", "kta.C_grid"},
  };
  for (const auto& [args, key] : cases) {
    CAPTURE(args);
    const RunResult r = run(f.dir, args + " output.dir=bad");
    REQUIRE(r.code == 2);
    REQUIRE(contains(r.err, key));
    REQUIRE_FALSE(std::filesystem::exists(f.dir.file("bad")));
  }
  // A partitioned store: the CV needs each fold's rows of every partition.
  REQUIRE(run(f.dir, "ingest train.svm --out parts --partitions 2").code == 0);
  const RunResult parts = run(f.dir, "path --config kta.toml data.train=parts path.folds=3 output.dir=bad");
  REQUIRE(parts.code != 0);
  REQUIRE(contains(parts.err, "path.folds"));
  REQUIRE(contains(parts.err, "partitioned"));
  REQUIRE_FALSE(std::filesystem::exists(f.dir.file("bad/path.json")));
}
