// End-to-end tests of the `fgm` binary: exit codes, messages, outputs, and
// that a failed run leaves no partial output.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "tests/cli/cli_test_util.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using fgm::test::TempDir;
using fgm::test::RunResult;
using fgm::test::contains;
using fgm::test::run;
using fgm::test::slurp;

TEST_CASE("every subcommand has --help", "[cli]") {
  TempDir dir("fgm-cli");
  for (std::string sub : {"ingest", "train", "predict", "inspect", "synth"}) {
    RunResult r = run(dir, sub + " --help");
    CAPTURE(sub, r.err);
    REQUIRE(r.code == 0);
    REQUIRE(contains(r.out, "Usage"));
  }
  // The help texts name what fgm does today: multi-class too, and every solver.
  for (std::string args : {"--help", "train --help", "path --help"}) {
    RunResult h = run(dir, args);
    CAPTURE(args, h.out);
    REQUIRE(h.code == 0);
    for (const char* solver : {"sifs", "exclusive", "mslr", "pnorm_kta"}) REQUIRE(contains(h.out, solver));
    REQUIRE_FALSE(contains(h.out, "run FGM"));
  }
  REQUIRE(contains(run(dir, "--help").out, "multi-class"));
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
                          "\"accuracy\"", "\"auc\"", "\"simd_target\""})
    REQUIRE(contains(log, key));
  REQUIRE(contains(log, "\"fgm.B\": \"4\""));  // the override is what ran
  REQUIRE(contains(log, "\"solver\": \"fgm\""));

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
  REQUIRE(contains(r.out, "\"solver\": \"fgm\""));

  // Predict data wider than the model: features beyond m are ignored, one warning.
  dir.write("wide.svm", "+1 1:0.5 250:1\n-1 2:0.3 260:2 270:1\n");
  r = run(dir, "predict --model run/model.fgm wide.svm");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.err, "wide.svm:1: feature index 250 is beyond the 200 features"));
  size_t first = r.err.find("beyond");
  REQUIRE(r.err.find("beyond", first + 1) == std::string::npos);
}

TEST_CASE("FGM_SIMD forces the SIMD target recorded in run.json; a bad value is exit 2 before any work",
          "[cli][simd]") {
  TempDir dir("fgm-cli-simd");
  REQUIRE(run(dir, "synth --out data --rows 200 --features 50 --relevant 5 --seed 4").code == 0);
  dir.write("job.toml",
            "[data]\ntrain = \"data/train.svm\"\n[output]\ndir = \"run\"\n[fgm]\nB = 3\nmax_iterations = 1\n"
            "[engine]\nthreads = 2\nmemory_budget = \"64MB\"\ncache_dir = \"cache\"\n");
  ::setenv("FGM_SIMD", "scalar", 1);
  RunResult r = run(dir, "train --config job.toml engine.progress=off");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(slurp(dir.file("run/run.json")), "\"simd_target\": \"scalar\""));
  ::setenv("FGM_SIMD", "sse9", 1);
  r = run(dir, "train --config job.toml engine.progress=off output.dir=bad");
  ::unsetenv("FGM_SIMD");
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "FGM_SIMD"));
  REQUIRE_FALSE(fs::exists(dir.path / "bad"));
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
  REQUIRE(contains(r.err, "model_dir: cannot read (model): it is a directory"));
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
          "seconds,apg_iterations,cv_accuracy,cv_accuracy_se,cv_auc,cv_auc_se");
  int rows = 0;
  for (std::string line; std::getline(csv, line);) {
    ++rows;
    size_t commas = std::count(line.begin(), line.end(), ',');
    REQUIRE(commas == 19);
    REQUIRE(line.substr(line.size() - 4) == ",,,,");  // no folds: the cv columns are empty
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

TEST_CASE("fgm path with path.folds: cv columns, the chosen point in path.json, fold logs", "[cli][path][cv]") {
  TempDir dir("fgm-cli");
  REQUIRE(run(dir, "synth --out data --rows 400 --test-rows 200 --features 120 --relevant 8 --seed 6").code == 0);
  dir.write("job.toml",
            "[data]\ntrain = \"data/train.svm\"\ntest = \"data/test.svm\"\nvalidation = \"data/test.svm\"\n"
            "[output]\ndir = \"path\"\n[fgm]\nB = 4\n[path]\nfeatures = [4, 8, 12]\nfolds = 3\ndebias = false\n"
            "[engine]\ncache_dir = \"cache\"\n");
  RunResult r = run(dir, "path --config job.toml");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.out, "chosen_by=cv"));
  REQUIRE(contains(r.err, "cv fold 3/3"));
  std::ifstream csv(dir.file("path/path.csv"));
  std::string header;
  std::getline(csv, header);
  REQUIRE(header.substr(header.size() - 43) == "cv_accuracy,cv_accuracy_se,cv_auc,cv_auc_se");
  int rows = 0;
  for (std::string line; std::getline(csv, line);) {
    ++rows;
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
    REQUIRE(cells.size() == 20);
    for (size_t k = 16; k < 20; ++k) {
      CAPTURE(k);
      double v = std::stod(cells[k]);
      REQUIRE(v >= 0);
      REQUIRE(v <= 1);
    }
  }
  REQUIRE(rows == 3);
  std::string json = slurp(dir.file("path/path.json"));
  REQUIRE(contains(json, "\"selection\": {\n    \"criterion\": \"cv\""));
  REQUIRE(contains(json, "\"one_se_point\": "));
  REQUIRE(contains(json, "\"best_mean_point\": "));
  REQUIRE(contains(json, "\"validation\": {\n      \"rows\": 200"));
  REQUIRE(contains(json, "\"cv_folds\": ["));
  REQUIRE(contains(json, "\"fold\": 3"));
  REQUIRE(contains(json, "\"selected\": [4, 8, 12]"));

  // Off: the criterion is the validation set's; no folds are logged.
  r = run(dir, "path --config job.toml path.folds=0");
  REQUIRE(r.code == 0);
  json = slurp(dir.file("path/path.json"));
  REQUIRE(contains(json, "\"criterion\": \"validation\""));
  REQUIRE(contains(json, "\"cv_folds\": []"));
  REQUIRE(!contains(json, "\"cv\": {"));

  // Keys that would be ignored, and folds a class cannot fill, are errors naming the key.
  r = run(dir, "path --config job.toml path.folds=0 path.fold_seed=3");
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "path.fold_seed"));
  r = run(dir, "train data.train=data/train.svm path.folds=3 output.dir=t engine.cache_dir=cache");
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "path.folds"));
  r = run(dir, "path --config job.toml path.folds=101");
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "path.folds"));
  dir.write("tiny.svm", "+1 1:1\n-1 2:1\n-1 1:1 2:1\n+1 2:2\n-1 1:3\n");
  r = run(dir, "path data.train=tiny.svm path.features=[1] path.folds=3 output.dir=tiny engine.cache_dir=cache");
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "path.folds"));
  REQUIRE(contains(r.err, "2 training rows of the smallest class"));
  REQUIRE(!fs::exists(dir.path / "tiny"));
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

TEST_CASE("fgm path with path.B de-biases a poly2 cross on its own column", "[cli][path][poly2]") {
  TempDir dir("fgm-cli");
  std::mt19937_64 rng(8);
  std::normal_distribution<double> normal(0, 1);
  auto rows = [&](int n) {
    std::ostringstream text;
    for (int i = 0; i < n; ++i) {
      double x[10];
      for (double& v : x) v = normal(rng);
      text << (x[1] * x[6] >= 0 ? "+1" : "-1");  // y = sign(x2·x7), 1-based ids
      for (int j = 0; j < 10; ++j) text << ' ' << j + 1 << ':' << static_cast<float>(x[j]);
      text << '\n';
    }
    return text.str();
  };
  dir.write("train.svm", rows(1000));
  dir.write("test.svm", rows(500));
  RunResult r = run(dir, "path data.train=train.svm data.test=test.svm features.kind=poly2 'path.B=[1]' "
                         "fgm.max_iterations=1 output.dir=run engine.cache_dir=cache");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  std::ifstream csv(dir.file("run/path.csv"));
  std::string header, line;
  std::getline(csv, header);
  std::getline(csv, line);
  std::vector<std::string> cells;
  for (std::stringstream ss(line); std::getline(ss, cells.emplace_back(), ',');) {
  }
  CAPTURE(line);
  REQUIRE(std::stod(cells[6]) > 0.95);   // test_accuracy
  REQUIRE(std::stod(cells[10]) > 0.95);  // debiased_test_accuracy (0 when refitted on x2 alone)
}

TEST_CASE("fgm.max_features counts groups exactly for hik (not generated columns)", "[cli][hik]") {
  TempDir dir("fgm-cli");
  REQUIRE(run(dir, "synth --out data --rows 400 --test-rows 50 --features 40 --relevant 8 --seed 3").code == 0);
  RunResult r = run(dir, "train data.train=data/train.svm features.kind=hik features.levels=10 "
                         "fgm.max_features=5 fgm.B=4 output.dir=run engine.cache_dir=cache");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  r = run(dir, "inspect run/model.fgm");
  REQUIRE(r.code == 0);
  // Distinct base features among the selected columns ("ids": [j]).
  std::set<std::string> groups;
  int columns = 0;
  for (size_t at = r.out.find("\"ids\": ["); at != std::string::npos; at = r.out.find("\"ids\": [", at + 1)) {
    size_t close = r.out.find(']', at);
    groups.insert(r.out.substr(at, close - at));
    ++columns;
  }
  REQUIRE(groups.size() == 5);
  REQUIRE(columns > 5);
}

namespace {

// Parses a JSON file with Python's json module (an independent validator).
bool python_parses_json(const std::string& path) {
  std::string cmd = "python3 -c 'import json,sys; json.load(open(sys.argv[1], encoding=\"utf-8\"))' '" +
                    path + "' 2>/dev/null";
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

TEST_CASE("paths with invalid UTF-8 still give valid JSON in run.json and inspect", "[cli][json]") {
  TempDir dir("fgm-cli");
  const std::string name = "d\xff\xc0-\xe2\x82.svm";  // not UTF-8
  dir.write(name, "+1 1:1 2:0.5\n-1 2:1 3:1\n+1 1:0.5 3:0.25\n-1 3:1\n");
  RunResult r = run(dir, "train 'data.train=" + name + "' fgm.B=1 fgm.max_iterations=2 output.dir=run "
                         "engine.cache_dir=cache");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(python_parses_json(dir.file("run/run.json")));
  REQUIRE(contains(slurp(dir.file("run/run.json")), "d\\ufffd\\ufffd-\\ufffd\\ufffd.svm"));
  r = run(dir, "inspect run/model.fgm");
  REQUIRE(r.code == 0);
  dir.write("inspect.json", r.out);
  REQUIRE(python_parses_json(dir.file("inspect.json")));
}

TEST_CASE("a feature index below the base is reported without a stray space", "[cli][errors]") {
  TempDir dir("fgm-cli");
  dir.write("zero.svm", "+1 1:1\n-1 0:1 2:1\n");
  RunResult r = run(dir, "ingest zero.svm --out store");
  REQUIRE(r.code == 3);
  REQUIRE(contains(r.err, "zero.svm:2:4: feature index in '0:1' is below 1; indices are 1-based here"));
}

TEST_CASE("keys a command would ignore are errors naming the key, where it was set and why",
          "[cli][errors][config]") {
  TempDir dir("fgm-cli");
  dir.write("t.svm", "+1 1:1 2:1\n-1 2:1 3:1\n+1 1:1 3:0.5\n-1 3:1\n");
  dir.write("groups.txt", "1 2\n3\n");
  REQUIRE(run(dir, "ingest t.svm --out store").code == 0);
  const std::string base = "train data.train=t.svm output.dir=run engine.cache_dir=cache ";
  struct Case {
    std::string args, where_and_key, why;
  };
  const std::vector<Case> cases = {
      {base + "'path.B=[1,2]'", "command line: key 'path.B' would be ignored", "`fgm path` only"},
      {base + "path.debias=false", "command line: key 'path.debias' would be ignored", "`fgm path` only"},
      {base + "data.validation=t.svm", "key 'data.validation' would be ignored", "validation set"},
      {"train data.train=store output.dir=run data.index_base=0",
       "command line: key 'data.index_base' = 0 would be ignored: data.train is the store store",
       "built with --index-base 1"},
      {"path data.train=store output.dir=run data.features=10 'path.B=[1]'",
       "command line: key 'data.features' = 10 would be ignored", "built with --features 3"},
      {base + "features.kind=hik features.groups=groups.txt", "key 'features.groups' would be ignored",
       "features.kind = linear only"},
      {base + "features.kind=poly2 features.groups=groups.txt", "key 'features.groups' would be ignored",
       "features.kind = linear only"},
      {base + "features.group_structure=tree", "key 'features.group_structure' would be ignored",
       "features.groups, which is not set"},
      {base + "features.tree_pruning=false", "key 'features.tree_pruning' would be ignored",
       "features.group_structure = \"tree\" only"},
      {base + "features.groups=groups.txt features.group_structure=overlapping features.tree_pruning=false",
       "key 'features.tree_pruning' would be ignored", "features.group_structure = \"tree\" only"},
      {base + "features.levels=5", "key 'features.levels' would be ignored", "features.kind = hik only"},
      {base + "features.kind=hik features.coef0=0", "key 'features.coef0' would be ignored",
       "features.kind = poly2 only"},
      {"path data.train=t.svm output.dir=run engine.cache_dir=cache 'path.features=[1]' data.truth=t.svm",
       "key 'data.truth' would be ignored", "`fgm train`"},
      {"path data.train=t.svm output.dir=run engine.cache_dir=cache 'path.features=[1]' fgm.max_features=1",
       "key 'fgm.max_features' would be ignored", "largest count"},
  };
  for (const auto& c : cases) {
    RunResult r = run(dir, c.args);
    CAPTURE(c.args, r.err);
    REQUIRE(r.code == 2);
    REQUIRE(contains(r.err, c.where_and_key));
    REQUIRE(contains(r.err, c.why));
    REQUIRE_FALSE(fs::exists(dir.path / "run"));
    REQUIRE_FALSE(fs::exists(dir.path / "cache"));  // rejected before any ingest
  }
  // The location of a key set in a file is file:line:column.
  dir.write("job.toml", "[data]\ntrain = \"t.svm\"\nvalidation = \"t.svm\"\n");
  RunResult r = run(dir, "train --config job.toml output.dir=run");
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "job.toml:3:14: key 'data.validation' would be ignored"));

  // Defaults and explicitly empty values are not "set": these runs work.
  REQUIRE(run(dir, base + "data.validation= fgm.B=1 fgm.max_iterations=1").code == 0);
  REQUIRE(run(dir, "train data.train=store output.dir=run2 fgm.B=1 fgm.max_iterations=1").code == 0);
  // Values that agree with the store are not ignored: one config serves text and store.
  REQUIRE(run(dir, "train data.train=store output.dir=run3 data.features=3 data.index_base=1 fgm.B=1").code == 0);
  REQUIRE(run(dir, base + "features.groups=groups.txt features.group_structure=disjoint fgm.B=1").code == 0);
  REQUIRE(run(dir, base + "features.kind=hik features.levels=4 fgm.B=1 fgm.max_iterations=1").code == 0);

  // The help text no longer claims groups must be disjoint.
  r = run(dir, "train --help-config");
  REQUIRE(r.code == 0);
  REQUIRE_FALSE(contains(r.out, "must be disjoint"));
  REQUIRE(contains(r.out, "Groups may be disjoint, overlap or nest"));
}

TEST_CASE("unusable input and output paths: exit 4 with path, key and reason, before any work",
          "[cli][errors][paths]") {
  TempDir dir("fgm-cli");
  dir.write("t.svm", "+1 1:1 2:1\n-1 2:1 3:1\n+1 1:1 3:0.5\n-1 3:1\n");
  dir.write("afile", "a regular file");
  fs::create_directories(dir.path / "adir");
  REQUIRE(run(dir, "train data.train=t.svm fgm.B=1 fgm.max_iterations=1 output.dir=run "
                   "engine.cache_dir=cache").code == 0);
  fs::remove_all(dir.path / "cache");
  struct Case {
    std::string args, message;
  };
  const std::string train = "train data.train=t.svm engine.cache_dir=cache ";
  const std::vector<Case> cases = {
      {"predict --model adir t.svm", "adir: cannot read (--model): it is a directory"},
      {"predict --model run/model.fgm adir", "adir: cannot read (input): it is a directory"},
      {"predict --model run/model.fgm t.svm --out afile/scores.txt",
       "afile/scores.txt: cannot write (--out): afile is not a directory"},
      {"predict --model run/model.fgm t.svm --out adir", "adir: cannot write (--out): it is a directory"},
      {"inspect adir", "adir: cannot read (model): it is a directory"},
      {"train --config adir", "adir: cannot read (--config): it is a directory"},
      {train + "output.dir=afile/out", "afile/out: cannot write (output.dir): cannot create it: afile is a file"},
      {train + "output.dir=afile", "afile: cannot write (output.dir): it exists and is not a directory"},
      {train + "output.dir=o data.test=adir", "adir: cannot read (data.test): it is a directory"},
      {train + "output.dir=o data.truth=missing.txt", "missing.txt: cannot read (data.truth): No such file"},
      {train + "output.dir=o features.groups=adir", "adir: cannot read (features.groups): it is a directory"},
      {"train data.train=t.svm output.dir=o engine.cache_dir=afile/cache",
       "afile/cache: cannot write (engine.cache_dir): cannot create it: Not a directory"},
      {"path data.train=t.svm engine.cache_dir=cache 'path.features=[1]' output.dir=afile/p",
       "afile/p: cannot write (output.dir): cannot create it: afile is a file"},
      {"path data.train=t.svm engine.cache_dir=cache 'path.features=[1]' output.dir=o data.validation=adir",
       "adir: cannot read (data.validation): it is a directory"},
      {"ingest t.svm --out afile/store", "afile/store: cannot write (--out): cannot create it: afile is a file"},
      {"ingest adir --out store", "adir: cannot read (input): it is a directory"},
      {"synth --out afile/syn --rows 10 --features 5 --relevant 2",
       "afile/syn: cannot write (--out): cannot create it: afile is a file"},
      {"synth --kind sparse --out afile/syn --rows 10 --features 50",
       "afile/syn: cannot write (--out): cannot create it: afile is a file"},
  };
  for (const auto& c : cases) {
    RunResult r = run(dir, c.args);
    CAPTURE(c.args, r.err);
    REQUIRE(r.code == 4);
    REQUIRE(contains(r.err, "fgm: I/O error: " + c.message));
    REQUIRE_FALSE(contains(r.err, "iter "));      // failed before the first scoring pass
    REQUIRE_FALSE(fs::exists(dir.path / "cache"));  // and before any ingest
    REQUIRE_FALSE(fs::exists(dir.path / "o"));
    REQUIRE_FALSE(fs::exists(dir.path / "store"));
  }
  if (::geteuid() != 0) {  // root writes through permission bits
    fs::create_directories(dir.path / "locked");
    fs::permissions(dir.path / "locked", fs::perms::owner_read | fs::perms::owner_exec);
    RunResult r = run(dir, "train data.train=t.svm output.dir=o engine.cache_dir=locked/cache");
    fs::permissions(dir.path / "locked", fs::perms::owner_all);
    CAPTURE(r.err);
    REQUIRE(r.code == 4);
    REQUIRE(contains(r.err, "locked/cache: cannot write (engine.cache_dir)"));
    REQUIRE(contains(r.err, "Permission denied"));
    REQUIRE_FALSE(contains(r.err, "tmp-"));
  }
}

namespace {

// Runs a Python assertion script on a JSON file (loaded as `d`): true if it passes.
bool python_check_json(const std::string& path, const std::string& assertions) {
  std::string script = "import json,sys\nd = json.load(open(sys.argv[1], encoding='utf-8'))\n" + assertions;
  std::string cmd = "python3 -c \"$FGM_PY\" '" + path + "'";
  setenv("FGM_PY", script.c_str(), 1);
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

TEST_CASE("APG stopped by its iteration cap is a warning and is recorded per iteration",
          "[cli][warnings]") {
  TempDir dir("fgm-cli");
  REQUIRE(run(dir, "synth --out data --rows 300 --test-rows 10 --features 60 --relevant 6 --seed 3").code == 0);
  const std::string train =
      "train data.train=data/train.svm engine.cache_dir=cache fgm.B=3 fgm.max_iterations=3 apg.method=apg ";
  // One APG iteration can neither shrink the mapping to 1e-12 of its first
  // value (the inexact solves of iterations 1 and 2) nor certify a relative
  // gap of 1e-3 (the final solve, iteration 3).
  RunResult r = run(dir, train + "output.dir=capped apg.max_iterations=1 apg.eps_inner=1e-12");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.err, "warning: outer iteration 1: APG stopped at apg.max_iterations = 1"));
  REQUIRE(contains(r.err, "warning: outer iteration 3: the certified solve stopped at apg.max_iterations"));
  REQUIRE(python_check_json(dir.file("capped/run.json"),
                            "its = d['iterations']\n"
                            "assert len(its) == 3\n"
                            "assert all(i['apg_iterations'] == 1 and i['apg_converged'] is False and\n"
                            "           i['apg_stop'] == 'max_iterations' for i in its)\n"
                            "assert [i['apg_certified'] for i in its] == [False, False, True]\n"
                            "assert its[2]['apg_relative_gap'] > 1e-3\n"
                            "w = d['warnings']\n"
                            "assert len(w) == len(its)\n"
                            "for k, x in enumerate(w[:2]):\n"
                            "  assert x['code'] == 'apg_max_iterations'\n"
                            "  assert x['message'].startswith('outer iteration %d: APG stopped' % (k + 1))\n"
                            "assert w[2]['code'] == 'apg_gap_above_tolerance'\n"
                            "assert w[2]['message'].startswith('outer iteration 3: the certified solve')\n"));

  // Solves that meet their rules: the intermediate ones inexact, the final
  // one certified to apg.gap_tolerance; no warnings.
  r = run(dir, train + "output.dir=ok");
  REQUIRE(r.code == 0);
  REQUIRE_FALSE(contains(r.err, "warning:"));
  REQUIRE(python_check_json(dir.file("ok/run.json"),
                            "its = d['iterations']\n"
                            "assert len(its) == 3\n"
                            "assert all(i['apg_converged'] is False and i['apg_stop'] == 'inexact' and\n"
                            "           not i['apg_certified'] for i in its[:2])\n"
                            "last = its[2]\n"
                            "assert last['apg_converged'] is True and last['apg_stop'] == 'converged'\n"
                            "assert last['apg_certified'] and last['apg_relative_gap'] <= 1e-3\n"
                            "assert all(i['apg_iterations'] < 2000 for i in its)\n"
                            "assert d['warnings'] == []\n"));

  // fgm path: every point's solve is certified, so each capped one warns
  // (into path.json).
  r = run(dir, "path data.train=data/train.svm engine.cache_dir=cache fgm.B=2 'path.features=[2,4]' "
               "path.debias=false output.dir=p apg.max_iterations=1 apg.eps_inner=1e-12 apg.method=apg");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(python_check_json(dir.file("p/path.json"),
                            "w = d['warnings']\n"
                            "assert len(w) == 2, w\n"
                            "assert all(x['code'] == 'apg_gap_above_tolerance' for x in w)\n"));
  // The de-biased refits are certified too: capped, each point's refit warns.
  r = run(dir, "path data.train=data/train.svm engine.cache_dir=cache fgm.B=2 'path.features=[2,4]' "
               "output.dir=pd apg.max_iterations=2 apg.method=apg");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(python_check_json(dir.file("pd/path.json"),
                            "codes = [x['code'] for x in d['warnings']]\n"
                            "assert codes.count('debias_gap_above_tolerance') == 2, codes\n"));
}

// The default subproblem solver (apg.method = auto: proximal Newton up to 2,048
// columns) stops every solve on its certificate: the intermediate ones (the
// paper's Inexact FGM) at apg.intermediate_gap, recorded inexact with their
// gap, the final one certified to apg.gap_tolerance; capped above their
// tolerances, each solve is a run warning, and an uncapped run has none. The
// final gap bounds the suboptimality against a re-solve to 1e-12 of the final
// subproblem (same selection: the intermediate solves stop on the same rule).
TEST_CASE("Newton solves: intermediate ones inexact at apg.intermediate_gap, the final one certified; capped ones warn",
          "[cli][warnings][newton]") {
  TempDir dir("fgm-cli-newton");
  REQUIRE(run(dir, "synth --out data --rows 300 --test-rows 10 --features 60 --relevant 6 --seed 3").code == 0);
  const std::string train = "train data.train=data/train.svm engine.cache_dir=cache fgm.B=3 fgm.max_iterations=3 ";
  RunResult r = run(dir, train + "output.dir=ok");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE_FALSE(contains(r.err, "warning:"));
  REQUIRE(python_check_json(dir.file("ok/run.json"),
                            "its = d['iterations']\n"
                            "assert len(its) == 3\n"
                            "assert all(not i['apg_converged'] and not i['apg_certified'] and i['apg_stop'] == 'inexact' and\n"
                            "           i['apg_relative_gap'] <= 1e-2 for i in its[:2])\n"
                            "assert any(i['apg_relative_gap'] > 1e-3 for i in its[:2])  # the looser rule ended a solve\n"
                            "last = its[2]\n"
                            "assert last['apg_converged'] and last['apg_certified'] and last['apg_stop'] == 'converged'\n"
                            "assert last['apg_relative_gap'] <= 1e-3\n"
                            "assert all(i['apg_iterations'] < 30 for i in its)\n"
                            "assert d['warnings'] == []\n"));
  // apg.intermediate_gap at apg.gap_tolerance: every solve to 1e-3 (the
  // intermediate ones still recorded inexact).
  r = run(dir, train + "output.dir=all apg.intermediate_gap=1e-3");
  REQUIRE(r.code == 0);
  REQUIRE(python_check_json(dir.file("all/run.json"),
                            "its = d['iterations']\n"
                            "assert [i['apg_stop'] for i in its] == ['inexact', 'inexact', 'converged']\n"
                            "assert all(i['apg_relative_gap'] <= 1e-3 for i in its)\n"));
  r = run(dir, train + "output.dir=tight apg.gap_tolerance=1e-12");
  REQUIRE(r.code == 0);
  REQUIRE(python_check_json(dir.file("ok/run.json"),
                            "tight = json.load(open(sys.argv[1].replace('/ok/', '/tight/')))\n"
                            "F, G = d['iterations'][-1], tight['iterations'][-1]\n"
                            "assert F['objective'] - G['objective'] <= F['apg_relative_gap'] * F['objective'] + 1e-9\n"));
  r = run(dir, train + "output.dir=capped apg.max_iterations=1 apg.gap_tolerance=1e-12 apg.intermediate_gap=1e-12");
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.err, "warning: outer iteration 1: APG stopped at apg.max_iterations = 1"));
  REQUIRE(contains(r.err, "warning: outer iteration 3: the certified solve stopped at apg.max_iterations"));
  REQUIRE(python_check_json(dir.file("capped/run.json"),
                            "assert [w['code'] for w in d['warnings']] == ['apg_max_iterations'] * 2 + ['apg_gap_above_tolerance']\n"
                            "assert all(not i['apg_converged'] and i['apg_relative_gap'] > 1e-12 for i in d['iterations'])\n"));
}

// Issue 7 item 6: a budget a fraction of the store's size slows training down
// but neither fails it nor changes the model, and the process stays within
// the budget plus a fixed allowance (binary, libraries, stacks).
TEST_CASE("training under a budget a third of the store: same model, bounded peak RSS", "[cli][budget]") {
  TempDir dir("fgm-cli-budget");
  REQUIRE(run(dir, "synth --kind sparse --out data --rows 50000 --test-rows 200 --features 30000 "
                   // Binary: 4 bytes a nonzero (no values stored), a 13 MB store.
                   "--nnz-per-row 62 --zipf 0.9 --store --memory-budget 64MB "
                   // Stored blocks are read whole: small ones, so that several fit 4 MB.
                   "--block-bytes 262144")
              .code == 0);
  uint64_t store_bytes = 0;
  for (const auto& e : fs::directory_iterator(dir.path / "data" / "store"))
    if (e.is_regular_file()) store_bytes += e.file_size();
  const uint64_t budget = 4ull << 20;
  REQUIRE(store_bytes > 3 * budget);
  const std::string common = "train data.train=data/store fgm.B=3 fgm.max_iterations=3 fgm.loss=logistic "
                             "fgm.bias=true engine.threads=2 engine.progress=off ";
  auto features_of = [&](const std::string& out_dir) {
    RunResult r = run(dir, "inspect " + out_dir + "/model.fgm");
    REQUIRE(r.code == 0);
    size_t b = r.out.find("\"features\": ["), e = r.out.find("\"config\"");
    REQUIRE(b != std::string::npos);
    REQUIRE(e != std::string::npos);
    return r.out.substr(b, e - b);
  };
  RunResult tight = run(dir, common + "engine.memory_budget=4MB output.dir=tight");
  CAPTURE(tight.err);
  REQUIRE(tight.code == 0);
  RunResult ample = run(dir, common + "engine.memory_budget=1GB output.dir=ample");
  REQUIRE(ample.code == 0);
  REQUIRE(features_of("tight") == features_of("ample"));  // ids and weights, printed exactly

  std::string log = slurp(dir.file("tight/run.json"));
  const std::string key = "\"peak_rss_bytes\": ";
  size_t at = log.rfind(key);  // the run's peak, after the per-iteration ones
  REQUIRE(at != std::string::npos);
  const uint64_t peak_rss = std::stoull(log.substr(at + key.size()));
  CAPTURE(peak_rss, store_bytes);
  REQUIRE(peak_rss > 0);
  REQUIRE(peak_rss <= budget + (64ull << 20));
}
