// fgm synth --kind groups (FGM Section 8.6.1) through the CLI: its groups.txt
// is a features.groups file fgm train reads, and on an easy instance the groups
// FGM selects are the planted ones planted_groups.txt lists (the planted truth is
// the check). Options of another kind are refused before anything is written.
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <sstream>

#include "core/json_reader.h"
#include "tests/cli/cli_test_util.h"

using namespace fgm;
using namespace fgm::test;
namespace fs = std::filesystem;

TEST_CASE("synth --kind groups: fgm train on its groups.txt finds the planted groups", "[cli][synth][groups]") {
  TempDir dir("fgm-cli-synth-groups");
  RunResult r = run(dir,
                    "synth --kind groups --out data --rows 400 --test-rows 200 --features 200 "
                    "--features-per-group 10 --relevant-groups 3 --seed 4");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.out, "3 planted groups of 10 features each"));
  std::set<uint64_t> planted;  // 0-based, as run.json's "group"
  std::istringstream lines(slurp(dir.file("data/planted_groups.txt")));
  for (uint64_t g = 0; lines >> g;) planted.insert(g - 1);
  REQUIRE(planted.size() == 3);

  r = run(dir,
          "train data.train=data/train.svm data.test=data/test.svm features.groups=data/groups.txt "
          "fgm.B=1 fgm.max_features=3 engine.threads=1 engine.progress=off output.dir=run");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  const JsonValue run_json = parse_json(slurp(dir.file("run/run.json")), "run.json");
  std::set<uint64_t> selected;
  size_t features = 0;
  for (const JsonValue& f : run_json.find("selected_features")->items()) {
    REQUIRE(f.find("kind")->string() == "group");
    selected.insert(static_cast<uint64_t>(f.find("group")->number()));
    ++features;
  }
  REQUIRE(selected == planted);
  REQUIRE(features == 30);  // whole groups of 10
}

TEST_CASE("synth --kind groups: misplaced and impossible options fail before writing", "[cli][synth][groups]") {
  TempDir dir("fgm-cli-synth-groups-bad");
  struct Case {
    const char* args;
    const char* message;
  };
  for (const Case& c : {
           Case{"synth --kind groups --out o --relevant 3", "--relevant applies to --kind gaussian only"},
           Case{"synth --out o --relevant-groups 3", "--relevant-groups applies to --kind groups only"},
           Case{"synth --kind sparse --out o --features-per-group 3", "--features-per-group applies to --kind groups only"},
           Case{"synth --kind groups --out o --zipf 2", "--zipf applies to --kind sparse only"},
           Case{"synth --kind groups --out o --features 20 --features-per-group 10 --relevant-groups 3",
                "--relevant-groups 3 exceeds the 2 groups"},
           Case{"synth --kind groups --out o --features-per-group 0", "--features-per-group must be at least 1"},
       }) {
    RunResult r = run(dir, c.args);
    CAPTURE(c.args, r.err);
    REQUIRE(r.code != 0);
    REQUIRE(contains(r.err, c.message));
    REQUIRE(!fs::exists(dir.file("o")));
  }
}
