// End-to-end tests of the `fgm` binary: exit codes, messages, outputs, and
// that a failed run leaves no partial output.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "tests/test_util.h"

namespace fs = std::filesystem;
using fgm::test::TempDir;

namespace {

struct RunResult {
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

RunResult run(const TempDir& dir, const std::string& args) {
  std::string out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
  std::string cmd = "cd '" + dir.path.string() + "' && '" FGM_BINARY_PATH "' " + args + " >'" + out +
                    "' 2>'" + err + "' </dev/null";
  int status = std::system(cmd.c_str());
  RunResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("every subcommand has --help", "[cli]") {
  TempDir dir("fgm-cli");
  for (std::string sub : {"ingest", "train", "predict", "inspect", "synth"}) {
    RunResult r = run(dir, sub + " --help");
    CAPTURE(sub, r.err);
    REQUIRE(r.code == 0);
    REQUIRE(contains(r.out, "Usage"));
  }
  RunResult r = run(dir, "train --help-config");
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.out, "engine.memory_budget"));
  REQUIRE(contains(r.out, "fgm.eps_outer"));
  REQUIRE(run(dir, "").code == 2);
  REQUIRE(run(dir, "frobnicate").code == 2);
}

TEST_CASE("synth, train, predict, inspect end to end", "[cli][e2e]") {
  TempDir dir("fgm-cli");
  REQUIRE(run(dir, "synth --out data --rows 500 --test-rows 300 --features 200 --relevant 10 --seed 4").code == 0);
  dir.write("job.toml",
            "[data]\ntrain = \"data/train.svm\"\ntest = \"data/test.svm\"\ntruth = \"data/truth.txt\"\n"
            "[output]\ndir = \"run\"\n[fgm]\nB = 5\nmax_iterations = 2\n"
            "[engine]\nthreads = 2\nmemory_budget = \"64MB\"\ncache_dir = \"cache\"\n");
  fs::create_directories(dir.path / "elsewhere");
  // Relative paths in the file resolve against the file, not the cwd.
  RunResult r = run(dir, "train --config job.toml fgm.B=4 engine.progress=off");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.out, "accuracy="));
  REQUIRE(contains(r.out, "recovered="));
  REQUIRE(contains(r.err, "iter   1:"));
  std::string log = slurp(dir.file("run/run.json"));
  for (const char* key : {"\"iterations\"", "\"iter\"", "\"selected\"", "\"objective\"", "\"rel_decrease\"",
                          "\"sip_violation\"", "\"score_seconds\"", "\"solve_seconds\"", "\"bytes_streamed\"",
                          "\"peak_rss_bytes\"", "\"selected_features\"", "\"total_seconds\"", "\"test\"",
                          "\"accuracy\"", "\"auc\""})
    REQUIRE(contains(log, key));
  REQUIRE(contains(log, "\"fgm.B\": \"4\""));  // the override is what ran

  // Second run reuses the cached store.
  r = run(dir, "train --config job.toml");
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.err, "using cached store"));

  r = run(dir, "predict --model run/model.fgm data/test.svm --out scores.txt");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.out, "accuracy="));
  REQUIRE(contains(r.out, "auc="));
  std::ifstream scores(dir.file("scores.txt"));
  int lines = 0;
  for (std::string l; std::getline(scores, l);) ++lines;
  REQUIRE(lines == 300);

  r = run(dir, "inspect run/model.fgm");
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.out, "\"features\": ["));
  REQUIRE(contains(r.out, "\"id\": "));
  REQUIRE(contains(r.out, "\"weight\": "));

  // Predict data wider than the model: features beyond m are ignored, one warning.
  dir.write("wide.svm", "+1 1:0.5 250:1\n-1 2:0.3 260:2 270:1\n");
  r = run(dir, "predict --model run/model.fgm wide.svm");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.err, "wide.svm:1: feature index 250 is beyond the 200 features"));
  size_t first = r.err.find("beyond");
  REQUIRE(r.err.find("beyond", first + 1) == std::string::npos);
}

TEST_CASE("bad configuration: exit 2, key named, nothing written", "[cli][errors]") {
  TempDir dir("fgm-cli");
  dir.write("t.svm", "+1 1:1\n-1 2:1\n");
  dir.write("bad.toml", "[data]\ntrain = \"t.svm\"\n[output]\ndir = \"run\"\n[fgm]\nBB = 3\n");
  RunResult r = run(dir, "train --config bad.toml");
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "bad.toml:6:1: unknown key 'fgm.BB' (did you mean 'fgm.B'?)"));
  REQUIRE_FALSE(fs::exists(dir.path / "run"));

  dir.write("ok.toml", "[data]\ntrain = \"t.svm\"\n[output]\ndir = \"run\"\n");
  r = run(dir, "train --config ok.toml fgm.C=abc");
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "command line: key 'fgm.C' must be a number, got a string"));
  r = run(dir, "train --config ok.toml fgm.max_iterations=0");
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "'fgm.max_iterations' = 0 is out of range"));
  r = run(dir, "train");
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "data.train"));
  REQUIRE_FALSE(fs::exists(dir.path / "run"));
}

TEST_CASE("bad training data: exit 3 with file:line:column, no model, no store", "[cli][errors]") {
  TempDir dir("fgm-cli");
  dir.write("bad.svm", "+1 1:1 2:1\n-1 3:1\n+1 2:0.5 1:0.25\n");
  dir.write("job.toml", "[data]\ntrain = \"bad.svm\"\n[output]\ndir = \"run\"\n[engine]\ncache_dir = \"cache\"\n");
  RunResult r = run(dir, "train --config job.toml");
  CAPTURE(r.err);
  REQUIRE(r.code == 3);
  REQUIRE(contains(r.err, "bad.svm:3:"));
  REQUIRE_FALSE(fs::exists(dir.path / "run" / "model.fgm"));
  // The cache holds no (partial) store.
  if (fs::exists(dir.path / "cache")) REQUIRE(fs::is_empty(dir.path / "cache"));

  r = run(dir, "ingest nowhere.svm --out store");
  REQUIRE(r.code == 4);
  REQUIRE(contains(r.err, "nowhere.svm"));
  REQUIRE_FALSE(fs::exists(dir.path / "store"));

  r = run(dir, "ingest bad.svm --out store");
  REQUIRE(r.code == 3);
  REQUIRE_FALSE(fs::exists(dir.path / "store"));
}

TEST_CASE("a file that is not a model: exit 5", "[cli][errors]") {
  TempDir dir("fgm-cli");
  dir.write("junk.fgm", "this is not a model at all, just text");
  dir.write("t.svm", "+1 1:1\n");
  RunResult r = run(dir, "inspect junk.fgm");
  REQUIRE(r.code == 5);
  REQUIRE(contains(r.err, "junk.fgm: not an fgm model file"));
  r = run(dir, "predict --model junk.fgm t.svm --out s.txt");
  REQUIRE(r.code == 5);
  REQUIRE_FALSE(fs::exists(dir.path / "s.txt"));
  r = run(dir, "inspect missing.fgm");
  REQUIRE(r.code == 4);
}

TEST_CASE("a directory or an endless device as the model: exit 4 / exit 5 naming it",
          "[cli][errors]") {
  TempDir dir("fgm-cli");
  fs::create_directories(dir.path / "model_dir");
  RunResult r = run(dir, "inspect model_dir");
  CAPTURE(r.err);
  REQUIRE(r.code == 4);
  REQUIRE(contains(r.err, "model_dir: cannot open: Is a directory"));
  // Under a 1 GiB address-space limit: the magic is checked before anything
  // is read into memory (reading /dev/zero whole used to end in exit 6).
  std::string err = dir.file("stderr.txt");
  std::string cmd = "ulimit -v 1048576; '" FGM_BINARY_PATH "' inspect /dev/zero 2>'" + err +
                    "' </dev/null >/dev/null";
  int status = std::system(("bash -c \"" + cmd + "\"").c_str());
  CAPTURE(slurp(err));
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 5);
  REQUIRE(contains(slurp(err), "/dev/zero: not an fgm model file (no fgm model header)"));
}

TEST_CASE("fgm path writes path.csv with the documented schema and one model per point", "[cli][path]") {
  TempDir dir("fgm-cli");
  REQUIRE(run(dir, "synth --out data --rows 400 --test-rows 200 --features 120 --relevant 8 --seed 6").code == 0);
  dir.write("job.toml",
            "[data]\ntrain = \"data/train.svm\"\ntest = \"data/test.svm\"\nvalidation = \"data/test.svm\"\n"
            "[output]\ndir = \"path\"\n[fgm]\nB = 4\n[path]\nfeatures = [4, 8, 12]\n"
            "[engine]\ncache_dir = \"cache\"\n");
  RunResult r = run(dir, "path --config job.toml");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.out, "best_point="));
  std::ifstream csv(dir.file("path/path.csv"));
  std::string header;
  std::getline(csv, header);
  REQUIRE(header ==
          "point,B,C,selected,nonzero,train_objective,test_accuracy,test_auc,validation_accuracy,validation_auc,"
          "debiased_test_accuracy,debiased_test_auc,debiased_validation_accuracy,debiased_validation_auc,"
          "seconds,apg_iterations");
  int rows = 0;
  for (std::string line; std::getline(csv, line);) {
    ++rows;
    size_t commas = std::count(line.begin(), line.end(), ',');
    REQUIRE(commas == 15);
    REQUIRE(line.rfind(std::to_string(rows) + ",4,10,", 0) == 0);
  }
  REQUIRE(rows == 3);
  for (int k = 1; k <= 3; ++k) {
    REQUIRE(fs::exists(dir.path / "path" / ("point-" + std::to_string(k) + ".fgm")));
    REQUIRE(fs::exists(dir.path / "path" / ("point-" + std::to_string(k) + "-debiased.fgm")));
  }
  r = run(dir, "inspect path/point-2.fgm");
  REQUIRE(r.code == 0);
  REQUIRE(std::count(r.out.begin(), r.out.end(), '{') >= 8);  // 8 features + envelope

  r = run(dir, "path --config job.toml 'path.B=[2]'");
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "exactly one list"));
}

TEST_CASE("poly2 through the CLI: inspect lists cross pairs with 1-based ids", "[cli][poly2]") {
  TempDir dir("fgm-cli");
  std::ostringstream text;
  std::mt19937_64 rng(4);
  std::normal_distribution<double> normal(0, 1);
  for (int i = 0; i < 1500; ++i) {
    double x[10];
    for (double& v : x) v = normal(rng);
    text << (x[1] * x[6] >= 0 ? "+1" : "-1");  // planted cross (2, 7) in 1-based ids
    for (int j = 0; j < 10; ++j) text << ' ' << j + 1 << ':' << static_cast<float>(x[j]);
    text << '\n';
  }
  dir.write("train.svm", text.str());
  RunResult r = run(dir, "train data.train=train.svm features.kind=poly2 fgm.B=1 fgm.max_iterations=1 "
                         "output.dir=run engine.cache_dir=cache");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  r = run(dir, "inspect run/model.fgm");
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.out, "\"feature_kind\": \"poly2\""));
  REQUIRE(contains(r.out, "\"kind\": \"cross\""));
  REQUIRE(contains(r.out, "\"ids\": [\n        2,\n        7\n      ]"));
  r = run(dir, "predict --model run/model.fgm train.svm");
  REQUIRE(r.code == 0);
  // The label is the sign of the selected cross feature itself.
  double accuracy = std::stod(r.out.substr(r.out.find("accuracy=") + 9));
  REQUIRE(accuracy > 0.99);
}
