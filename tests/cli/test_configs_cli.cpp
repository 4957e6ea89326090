// The shipped configs work as shipped (issue 20): every file in configs/ runs
// `fgm train`, and `fgm path` where it has a two-label training set, from the
// source tree with ../shared/data beside it. Each run is brief (one outer
// iteration, small batches); only output.dir and engine.cache_dir move to a
// temporary directory, so the data paths are the file's own. Its own ctest
// entry (`configs`, hidden tag) because it reads ~60 MB of shared data.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "tests/cli/cli_test_util.h"

namespace fs = std::filesystem;
using fgm::test::TempDir;
using fgm::test::RunResult;
using fgm::test::contains;
using fgm::test::run;

namespace {

// The brief arguments of each config: `train` for fgm train, `path` for fgm
// path (empty: the command does not apply, `why_no_path` says why). Every FGM
// run also skips the final certificate pass, and every path its de-biased
// refits and test file (the train run has read that file already).
struct ShippedRun {
  std::string train;
  std::string path;
  std::string why_no_path;
};

const std::map<std::string, ShippedRun>& shipped_runs() {
  static const std::map<std::string, ShippedRun> runs = {
      {"a9a", {"fgm.max_iterations=1", "fgm.B=2 'path.features=[2,4]'", ""}},
      {"a9a-mslr", {"mslr.max_iterations=1", "mslr.max_iterations=2 'mslr.features=[3,5]'", ""}},
      {"arcene", {"fgm.max_iterations=1", "fgm.B=2 'path.features=[2,4]'", ""}},
      {"colon-cancer", {"fgm.max_iterations=1", "fgm.B=2 'path.features=[2,4]' path.folds=2", ""}},
      // fgm path reads no planted truth: the empty override drops data.truth.
      {"demo", {"fgm.max_iterations=1", "data.truth= fgm.B=2 'path.features=[2,4]'", ""}},
      {"ijcnn1", {"fgm.max_iterations=1", "fgm.B=2 'path.features=[2,4]'", ""}},
      {"ijcnn1-hik", {"fgm.max_iterations=1", "fgm.B=1 'path.features=[1,2]'", ""}},
      // The file caps fgm.max_features; `fgm.max_features=` clears it for the path.
      {"ijcnn1-poly2", {"fgm.max_iterations=1", "fgm.max_features= fgm.B=2 'path.features=[2,4]'", ""}},
      {"leu", {"fgm.max_iterations=1", "fgm.B=2 'path.features=[2,4]'", ""}},
      {"madelon", {"fgm.max_iterations=1", "fgm.B=2 'path.features=[2,4]'", ""}},
      {"news20", {"fgm.max_iterations=1", "", "20 classes: fgm path takes two-label stores only"}},
      {"news20-poly2-transform",
       {"fgm.max_iterations=1", "", "20 classes: fgm path takes two-label stores only"}},
      {"w8a", {"fgm.max_iterations=1", "fgm.B=2 'path.features=[2,4]'", ""}},
  };
  return runs;
}

const fs::path kConfigs = fs::path(FGM_SOURCE_DIR) / "configs";

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

// demo.toml reads what `make demo` writes into demo-out/data; the test writes
// the same Section 8.2 data into its own directory and points the run there.
std::string demo_data(const TempDir& dir) {
  RunResult r = run(dir, "synth --out " + quoted(dir.path / "demo-data") +
                             " --rows 4096 --test-rows 4096 --features 4096 --relevant 300 --seed 1");
  REQUIRE(r.code == 0);
  const fs::path d = dir.path / "demo-data";
  return " data.train=" + quoted(d / "train.svm") + " data.test=" + quoted(d / "test.svm") +
         " data.truth=" + quoted(d / "truth.txt");
}

}  // namespace

TEST_CASE("every shipped config runs fgm train, and fgm path where it has two labels", "[.configs][configs]") {
  REQUIRE(fs::is_directory(fs::path(FGM_SHARED_DATA_DIR)));  // ../shared/data beside the repository
  TempDir dir("fgm-configs");
  const std::string common = " engine.cache_dir=" + quoted(dir.path / "cache") + " engine.progress=off";
  const auto brief = [](const std::string& name, const std::string& args, bool path) {
    std::string extra = name == "a9a-mslr" ? "" : " fgm.final_certificate=false";
    if (path) extra += name == "a9a-mslr" ? " data.test=" : " data.test= path.debias=false";
    return " " + args + extra;
  };
  std::set<std::string> seen;
  for (const auto& entry : fs::directory_iterator(kConfigs)) {
    if (entry.path().extension() != ".toml") continue;
    const std::string name = entry.path().stem().string();
    seen.insert(name);
    CAPTURE(name);
    const auto it = shipped_runs().find(name);
    INFO("a new file in configs/ needs its brief runs in tests/cli/test_configs_cli.cpp");
    REQUIRE(it != shipped_runs().end());
    const std::string config =
        " --config " + quoted(entry.path()) + (name == "demo" ? demo_data(dir) : std::string());

    RunResult train = run(dir, "train" + config + " output.dir=" + quoted(dir.path / (name + "-train")) + common +
                                   brief(name, it->second.train, false));
    CAPTURE(train.err);
    CHECK(train.code == 0);
    CHECK(fs::exists(dir.path / (name + "-train") / "model.fgm"));

    RunResult path = run(dir, "path" + config + " output.dir=" + quoted(dir.path / (name + "-path")) + common +
                                  brief(name, it->second.path, true));
    CAPTURE(path.err);
    if (it->second.path.empty()) {
      CHECK(path.code == 2);  // refused before any work, saying why
      CHECK_FALSE(it->second.why_no_path.empty());
    } else {
      CHECK(path.code == 0);
      CHECK(fs::exists(dir.path / (name + "-path") / "path.csv"));
    }
  }
  CHECK(seen.size() == shipped_runs().size());  // no entry for a file that is gone
  // The Slurm example is a script: it must at least parse.
  CHECK(std::system(("bash -n " + quoted(kConfigs / "slurm-example.sh")).c_str()) == 0);
}

TEST_CASE("a command-line override clears a key the config file set", "[.configs][configs]") {
  TempDir dir("fgm-configs");
  const std::string base = "path --config " + quoted(kConfigs / "ijcnn1-poly2.toml") +
                           " engine.cache_dir=" + quoted(dir.path / "cache") +
                           " engine.progress=off fgm.B=2 'path.features=[2,4]'";
  // As shipped the file caps fgm.max_features, which a path's counts replace: refused, naming the key.
  RunResult refused = run(dir, base + " output.dir=" + quoted(dir.path / "refused"));
  CHECK(refused.code == 2);
  CHECK(contains(refused.err, "fgm.max_features"));
  CHECK(contains(refused.err, "ijcnn1-poly2.toml"));
  CHECK_FALSE(fs::exists(dir.path / "refused" / "path.csv"));
  // `key=` resets it to its default; 0, the documented "no cap", does not conflict either.
  int variant = 0;
  for (const char* clear : {"fgm.max_features=", "fgm.max_features=0"}) {
    CAPTURE(clear);
    const fs::path out = dir.path / ("cleared-" + std::to_string(variant++));
    RunResult r = run(dir, base + " " + clear + " output.dir=" + quoted(out));
    CAPTURE(r.err);
    CHECK(r.code == 0);
    CHECK(fs::exists(out / "path.csv"));
  }
  // A nonzero cap on the command line still conflicts with path.features.
  RunResult capped = run(dir, base + " fgm.max_features=3 output.dir=" + quoted(dir.path / "capped"));
  CHECK(capped.code == 2);
  CHECK(contains(capped.err, "command line"));
}
