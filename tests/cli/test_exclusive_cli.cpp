// solver = "exclusive" from the command line: fgm train writes a linear model
// that fgm predict / fgm inspect / fgm report read, fgm path writes one model
// per λ, the same model for 1 and 2 threads, and every misused key is an error
// that names it and leaves no output.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>

#include "tests/cli/cli_test_util.h"
#include "tests/test_util.h"

using namespace fgm::test;

namespace {

void make_data(const TempDir& dir) {
  REQUIRE(run(dir, "synth --out data --rows 300 --test-rows 100 --features 60 --relevant 5 --seed 9").code == 0);
}

const std::string kBase =
    "data.train=data/train.svm data.test=data/test.svm engine.cache_dir=cache solver=exclusive "
    "exclusive.random_groups=4 exclusive.lambda=2 ";

// The "selected_features" array of a run.json.
std::string selected_features(const std::string& run_json) {
  const auto begin = run_json.find("\"selected_features\"");
  const auto end = run_json.find(']', begin);
  return run_json.substr(begin, end - begin);
}

}  // namespace

TEST_CASE("fgm train solver=exclusive writes a model predict, inspect and report read", "[exclusive][cli]") {
  TempDir dir("fgm-exclusive-cli");
  make_data(dir);
  auto r = run(dir, "train " + kBase + "output.dir=out1 engine.threads=1");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "accuracy="));
  const std::string run_json = slurp(dir.file("out1/run.json"));
  CHECK(contains(run_json, "\"solver\": \"exclusive\""));
  CHECK(contains(run_json, "\"exclusive\": {"));
  CHECK(contains(run_json, "\"algorithm\": \"pcp\""));
  CHECK(contains(run_json, "\"source\": \"random\""));
  CHECK(std::filesystem::exists(dir.file("out1/report.html")));
  auto p = run(dir, "predict --model out1/model.fgm data/test.svm");
  REQUIRE(p.code == 0);
  CHECK(contains(p.out, "accuracy="));
  auto i = run(dir, "inspect out1/model.fgm");
  REQUIRE(i.code == 0);
  CHECK(contains(i.out, "\"solver\": \"exclusive\""));
  CHECK(run(dir, "report out1").code == 0);
  // Two threads: the same model.
  REQUIRE(run(dir, "train " + kBase + "output.dir=out2 engine.threads=2").code == 0);
  CHECK(selected_features(slurp(dir.file("out2/run.json"))) == selected_features(run_json));
  // E-SVM (licp; its loss defaults to hinge) and locp on random (disjoint) groups.
  REQUIRE(run(dir, "train " + kBase + "output.dir=out3 exclusive.algorithm=licp exclusive.ridge=0.5").code == 0);
  CHECK(contains(slurp(dir.file("out3/run.json")), "\"duality_gap\""));
  REQUIRE(run(dir, "train " + kBase + "output.dir=out4 exclusive.algorithm=locp exclusive.loss=squared").code == 0);
  // Groups from a file (overlapping): pcp runs, locp refuses.
  dir.write("groups.txt", "1 2 3 4\n4 5 6\n10 11 12 13 14\n");
  const std::string file_groups = "data.train=data/train.svm engine.cache_dir=cache solver=exclusive "
                                  "features.groups=groups.txt features.group_structure=overlapping ";
  REQUIRE(run(dir, "train " + file_groups + "output.dir=out5").code == 0);
  CHECK(contains(slurp(dir.file("out5/run.json")), "\"source\": \"file\""));
  auto locp = run(dir, "train " + file_groups + "output.dir=out6 exclusive.algorithm=locp");
  CHECK(locp.code == 2);
  CHECK(contains(locp.err, "exclusive.algorithm"));
  CHECK_FALSE(std::filesystem::exists(dir.file("out6/model.fgm")));
}

TEST_CASE("fgm path solver=exclusive writes one model per exclusive.path_lambda", "[exclusive][cli]") {
  TempDir dir("fgm-exclusive-path");
  make_data(dir);
  auto r = run(dir, "path data.train=data/train.svm data.test=data/test.svm engine.cache_dir=cache solver=exclusive "
                    "exclusive.expected_relevant=20 'exclusive.path_lambda=[50.0, 5.0, 0.5]' output.dir=p");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string csv = slurp(dir.file("p/path.csv"));
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 4);
  CHECK(contains(slurp(dir.file("p/path.json")), "\"solver\": \"exclusive\""));
  for (int k = 0; k < 3; ++k) {
    auto p = run(dir, "predict --model p/models/lambda_" + std::to_string(k) + ".fgm data/test.svm");
    CHECK(p.code == 0);
  }
}

TEST_CASE("misused exclusive keys are errors naming the key; nothing is written", "[exclusive][cli]") {
  TempDir dir("fgm-exclusive-bad");
  make_data(dir);
  const std::string data = "data.train=data/train.svm engine.cache_dir=cache output.dir=out ";
  struct Bad {
    std::string command, args, key;
  };
  const Bad cases[] = {
      {"train", "exclusive.lambda=1", "exclusive.lambda"},  // another solver's key (solver = fgm)
      {"train", "solver=exclusive exclusive.random_groups=3 fgm.B=4", "fgm.B"},
      {"train", "solver=exclusive exclusive.random_groups=3 exclusive.ridge=2", "exclusive.ridge"},
      {"train", "solver=exclusive", "features.groups"},  // no groups at all
      {"train", "solver=exclusive exclusive.random_groups=3 exclusive.expected_relevant=9", "exclusive.expected_relevant"},
      {"train", "solver=exclusive exclusive.random_groups=3 exclusive.loss=hinge", "exclusive.loss"},
      {"train", "solver=exclusive exclusive.random_groups=3 exclusive.algorithm=licp exclusive.loss=squared",
       "exclusive.loss"},
      {"train", "solver=exclusive exclusive.random_groups=3 exclusive.lambda=-1", "exclusive.lambda"},
      {"train", "solver=exclusive exclusive.random_groups=3 exclusive.algorithm=fast", "exclusive.algorithm"},
      {"train", "solver=exclusive exclusive.random_groups=3 'exclusive.path_lambda=[1.0]'", "exclusive.path_lambda"},
      {"train", "solver=exclusive exclusive.random_groups=3 exclusive.working_set=false exclusive.kkt_tolerance=0.1",
       "exclusive.kkt_tolerance"},
      {"path", "solver=exclusive exclusive.random_groups=3", "exclusive.path_lambda"},
      {"path", "solver=exclusive exclusive.random_groups=3 'exclusive.path_lambda=[1.0]' exclusive.lambda=2",
       "exclusive.lambda"},
  };
  for (const Bad& b : cases) {
    auto r = run(dir, b.command + " " + data + b.args);
    INFO(b.command << " " << b.args << "\n" << r.err);
    CHECK(r.code == 2);
    CHECK(contains(r.err, b.key));
    // No output: not even the output directory, which the failed run made
    // (cli/resume.h removes it again when the run fails before writing).
    CHECK(!std::filesystem::exists(dir.file("out")));
  }
}
