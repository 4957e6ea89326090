// The solver registry (cli/solver_registry.h) against the config table, and
// the runner's refusals from the registry's capability data.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>
#include <set>
#include <string>

#include "cli/run_output.h"
#include "cli/solver_registry.h"
#include "core/config.h"
#include "core/error.h"
#include "engine/solver_choice.h"
#include "tests/cli/cli_test_util.h"

using namespace fgm;
using namespace fgm::test;

TEST_CASE("the registry lists every solver of the `solver` key, each with its own config keys", "[registry]") {
  const auto& entries = cli::solver_registry();
  std::set<std::string> registered;
  for (const auto& e : entries) registered.insert(std::string(e.name));
  std::vector<std::string> choices;
  for (const ParamSpec& spec : param_specs())
    if (spec.key == "solver") choices = spec.choices;
  REQUIRE(registered == std::set<std::string>(choices.begin(), choices.end()));
  REQUIRE(registered.size() == entries.size());  // one entry per name

  // Every key of a solver's section belongs to exactly one entry, and an
  // entry lists no key of another section.
  std::set<std::string> listed;
  for (const auto& e : entries) {
    INFO(e.name);
    CHECK(e.train != nullptr);
    CHECK(e.path != nullptr);
    const std::vector<std::string> keys = cli::solver_keys(e);
    CHECK_FALSE(keys.empty());
    for (const std::string& key : keys) {
      CHECK(solver_section_owner(key) == e.name);
      CHECK(listed.insert(key).second);
    }
  }
  for (const ParamSpec& spec : param_specs())
    if (solver_section_owner(spec.key)) CHECK(listed.count(spec.key) == 1);
  const std::vector<std::string> mslr = cli::solver_keys(cli::find_solver("mslr"));
  CHECK(std::find(mslr.begin(), mslr.end(), "mslr.r") != mslr.end());
  CHECK_THROWS_AS(cli::find_solver("nonesuch"), Error);
  // --help of fgm train and fgm path lists every registered solver.
  for (const char* command : {"train", "path"}) {
    TempDir dir;
    const RunResult help = run(dir, std::string(command) + " --help");
    for (const auto& e : entries) CHECK(contains(help.out, std::string(e.name)));
  }
}

TEST_CASE("a solver without a capability is refused from the registry's data, naming the key", "[registry]") {
  Config config = Config::load("", {"data.train=store", "features.transform=[\"maxabs\"]"});
  cli::SolverEntry bare{"bare", "a test entry with no capability", "nothing", {}, nullptr, nullptr, nullptr, nullptr};
  auto refusal = [&](cli::RunKind kind, bool partitioned, size_t classes) -> std::string {
    try {
      cli::refuse_missing_capability(bare, config, kind, partitioned, classes);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kConfig);
      return e.what();
    }
    return "";
  };
  const std::string no_path = refusal(cli::RunKind::kPath, false, 2);
  config = Config::load("", {"data.train=store", "features.transform=[\"maxabs\"]", "features.kind=hik"});
  CHECK(contains(refusal(cli::RunKind::kTrain, false, 2), "features.kind"));
  config = Config::load("", {"data.train=store", "features.transform=[\"maxabs\"]"});
  CHECK(contains(no_path, "solver"));
  CHECK(contains(no_path, "no path"));
  bare.path = [](cli::SolverRun&) { return 0; };
  CHECK(contains(refusal(cli::RunKind::kTrain, true, 0), "data.train"));
  bare.can.partitioned = true;
  CHECK(contains(refusal(cli::RunKind::kTrain, true, 0), "features.transform"));
  bare.can.partitioned_train_transforms = true;
  CHECK(refusal(cli::RunKind::kTrain, true, 0).empty());
  CHECK(contains(refusal(cli::RunKind::kTrain, false, 3), "binary models only"));
  CHECK(contains(refusal(cli::RunKind::kPath, false, 3), "two-label stores only"));
  bare.can.multiclass = bare.can.multiclass_path = true;
  CHECK(refusal(cli::RunKind::kTrain, false, 3).empty());
  CHECK(refusal(cli::RunKind::kPath, false, 3).empty());
}

TEST_CASE("a registered solver's missing capability stops the run before any output", "[registry]") {
  TempDir dir;
  dir.write("three.txt", "1 1:1 2:1\n2 1:2 3:1\n3 2:1 3:2\n1 1:1\n2 2:2\n3 3:3\n");
  // solver = mslr is binary (the registry's multiclass = false); fgm path has no multi-class path.
  for (const char* args : {"train solver=mslr data.train=three.txt output.dir=out",
                           "path solver=mslr data.train=three.txt output.dir=out mslr.features=[1]",
                           "path data.train=three.txt output.dir=out path.features=[1]"}) {
    INFO(args);
    RunResult r = run(dir, args);
    CHECK(r.code == 2);
    CHECK((contains(r.err, "binary models only") || contains(r.err, "two-label stores only")));
    CHECK_FALSE(std::filesystem::exists(dir.file("out")));
  }
}

TEST_CASE("the runner gives both backends the same checks: an MSLR path count beyond the width is refused on a "
          "partitioned store too",
          "[registry][mslr]") {
  TempDir dir;
  dir.write("in.txt", "1 1:1 2:1\n-1 1:2 3:1\n1 2:1 3:2\n-1 1:1\n1 2:2\n-1 3:3\n");
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 2").code == 0);
  for (const char* train : {"in.txt", "store"}) {
    INFO(train);
    RunResult r = run(dir, std::string("path solver=mslr data.train=") + train + " output.dir=out 'mslr.features=[2,9]'");
    CHECK(r.code == 2);
    CHECK(contains(r.err, "mslr.features"));
    CHECK_FALSE(std::filesystem::exists(dir.file("out")));
  }
}

TEST_CASE("every registered solver's path.csv has the shared columns, empty without data.test", "[registry][path]") {
  TempDir dir;
  dir.write("train.svm", random_libsvm(200, 30, 0.3, 5, {0, 1, 2}));
  const std::map<std::string, std::string> args = {
      {"fgm", "'path.features=[1,2]'"},
      {"sifs", "sifs.beta_points=2 sifs.alpha_points=3 sifs.beta_max_ratio=0.5"},
      {"exclusive", "exclusive.random_groups=5 'exclusive.path_lambda=[1.0,0.5]'"},
      {"mslr", "'mslr.features=[1,2]'"},
      {"pnorm_kta", "kta.lambda1=0.01 kta.lambda2=0.05 kta.p_step=0.5"}};
  size_t checked = 0;
  for (const auto& e : cli::solver_registry()) {
    const std::string name(e.name);
    INFO(name);
    if (!args.count(name)) continue;  // a solver added since: its own tests check its path.csv
    ++checked;
    RunResult r = run(dir, "path solver=" + name + " data.train=train.svm engine.cache_dir=cache engine.progress=off "
                               "output.dir=" + name + " " + args.at(name));
    CAPTURE(r.err);
    REQUIRE(r.code == 0);
    const std::string csv = slurp(dir.file(name + "/path.csv"));
    std::vector<std::string> header;
    std::stringstream line(csv.substr(0, csv.find('\n')));
    for (std::string cell; std::getline(line, cell, ',');) header.push_back(cell);
    for (const char* column : cli::kSharedPathColumns) {
      INFO(column);
      const auto at = std::find(header.begin(), header.end(), column);
      REQUIRE(at != header.end());
      if (std::string(column).rfind("test_", 0) == 0) {  // no data.test: the column's cells are empty
        std::stringstream row(csv.substr(csv.find('\n') + 1));
        std::string first_row;
        std::getline(row, first_row);
        std::vector<std::string> cells;
        std::stringstream cells_in(first_row + ",");
        for (std::string cell; std::getline(cells_in, cell, ',');) cells.push_back(cell);
        REQUIRE(cells.size() >= header.size());
        CHECK(cells[static_cast<size_t>(at - header.begin())].empty());
      }
    }
  }
  CHECK(checked == args.size());  // the five solvers of today
}
