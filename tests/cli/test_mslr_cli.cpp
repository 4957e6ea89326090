// solver = "mslr" through the fgm binary: train, predict, inspect, report and
// path on sparse synthetic data, and the configuration errors of the mslr
// section (another solver's keys, out-of-range values, keys the command
// would ignore), which leave no output.
#include <catch2/catch.hpp>

#include <filesystem>

#include "tests/cli/cli_test_util.h"

using namespace fgm::test;

namespace {

const char* kData =
    "synth --kind sparse --out data --rows 1500 --test-rows 800 --features 600 --planted-linear 6 "
    "--planted-cross 0 --min-term-frequency 0.03 --nnz-per-row 15 --seed 3";

}  // namespace

TEST_CASE("fgm train with solver = mslr writes a model predict, inspect and report read", "[cli][mslr]") {
  TempDir dir("mslr-cli");
  REQUIRE(run(dir, kData).code == 0);
  RunResult r = run(dir, "train solver=mslr data.train=data/train.svm data.test=data/test.svm "
                         "data.truth=data/truth.txt mslr.r=3 mslr.max_iterations=3 engine.threads=2 output.dir=out");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "selected=9"));
  CHECK(contains(r.out, "accuracy="));
  const std::string run_json = slurp(dir.file("out/run.json"));
  CHECK(contains(run_json, "\"solver\": \"mslr\""));
  CHECK(contains(run_json, "\"relative_gap\""));
  CHECK(contains(run_json, "\"mu\""));
  CHECK(contains(run_json, "\"stop_reason\": \"max_iterations\""));
  RunResult inspect = run(dir, "inspect out/model.fgm");
  REQUIRE(inspect.code == 0);
  CHECK(contains(inspect.out, "\"solver\": \"mslr\""));
  CHECK(contains(inspect.out, "\"has_bias\": false"));
  RunResult predict = run(dir, "predict --model out/model.fgm data/test.svm");
  REQUIRE(predict.code == 0);
  CHECK(contains(predict.out, "accuracy="));
  // The test accuracy of train and of predict agree (same model, same file).
  const auto acc = [](const std::string& s) { return std::stod(s.substr(s.find("accuracy=") + 9)); };
  CHECK(acc(r.out) == Approx(acc(predict.out)).margin(1e-4));  // train prints 4 digits
  CHECK(run(dir, "report out").code == 0);
  CHECK(std::filesystem::exists(dir.file("out/report.html")));
}

TEST_CASE("fgm path with solver = mslr writes a model per count of mslr.features", "[cli][mslr]") {
  TempDir dir("mslr-path");
  REQUIRE(run(dir, kData).code == 0);
  RunResult r = run(dir, "path solver=mslr data.train=data/train.svm data.test=data/test.svm mslr.r=3 "
                         "'mslr.features=[2,5,7]' output.dir=out");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "points=3"));
  const std::string csv = slurp(dir.file("out/path.csv"));
  CHECK(contains(csv, "\n1,2,"));
  CHECK(contains(csv, "\n2,5,"));
  CHECK(contains(csv, "\n3,7,"));
  for (int k = 1; k <= 3; ++k) CHECK(std::filesystem::exists(dir.file("out/point-" + std::to_string(k) + ".fgm")));
  CHECK(contains(slurp(dir.file("out/path.json")), "\"solver\": \"mslr\""));
}

TEST_CASE("solver = mslr: bad and foreign keys are errors naming the key, with no output", "[cli][mslr]") {
  TempDir dir("mslr-keys");
  REQUIRE(run(dir, kData).code == 0);
  const std::string base = "train data.train=data/train.svm output.dir=out ";
  struct Case {
    std::string args, key;
  };
  for (const Case& c : std::vector<Case>{
           {"solver=mslr fgm.B=5", "fgm.B"},
           {"solver=mslr apg.eps_inner=0.1", "apg.eps_inner"},
           {"solver=fgm mslr.C=3", "mslr.C"},
           {"solver=mslr mslr.C=0", "mslr.C"},
           {"solver=mslr mslr.r=0", "mslr.r"},
           {"solver=mslr mslr.max_iterations=65", "mslr.max_iterations"},
           {"solver=mslr mslr.q_factor=1", "mslr.q_factor"},
           {"solver=mslr mslr.order=backwards", "mslr.order"},
           {"solver=mslr 'mslr.features=[3]'", "mslr.features"},
           {"solver=mslr features.kind=poly2", "features.kind"},
           {"solver=mslr mslr.rr=3", "mslr.rr"},
       }) {
    RunResult r = run(dir, base + c.args);
    INFO(c.args << "\n" << r.err);
    CHECK(r.code == 2);
    CHECK(contains(r.err, c.key));
    CHECK_FALSE(std::filesystem::exists(dir.file("out")));
  }
  RunResult path = run(dir, "path solver=mslr data.train=data/train.svm output.dir=out");
  CHECK(path.code == 2);
  CHECK(contains(path.err, "mslr.features"));
  RunResult both = run(dir, "path solver=mslr data.train=data/train.svm output.dir=out 'mslr.features=[3]' "
                            "mslr.max_features=5");
  CHECK(both.code == 2);
  CHECK(contains(both.err, "mslr.max_features"));
  CHECK_FALSE(std::filesystem::exists(dir.file("out/path.csv")));
}
