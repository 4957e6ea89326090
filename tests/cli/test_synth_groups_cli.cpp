// fgm synth --kind groups (FGM Section 8.6.1) through the CLI: its groups.txt
// is a features.groups file fgm train reads, and on an easy instance the groups
// FGM selects are the planted ones planted_groups.txt lists (the planted truth is
// the check). Options of another kind are refused before anything is written.
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <sstream>

#include "core/json_reader.h"
#include "io/model_file.h"
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

TEST_CASE("synth --kind groups --group-overlap: overlapping FGM finds the planted windows", "[cli][synth][groups]") {
  TempDir dir("fgm-cli-synth-overlap");
  RunResult r = run(dir,
                    "synth --kind groups --out data --rows 600 --test-rows 100 --features 200 "
                    "--features-per-group 10 --group-overlap 4 --relevant-groups 3 --seed 9");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.out, "neighbours sharing 4"));
  std::set<uint64_t> planted;
  std::istringstream lines(slurp(dir.file("data/planted_groups.txt")));
  for (uint64_t g = 0; lines >> g;) planted.insert(g - 1);
  // The groups overlap: the disjoint reader refuses them, the overlapping one takes them.
  r = run(dir, "train data.train=data/train.svm features.groups=data/groups.txt fgm.B=1 output.dir=bad");
  REQUIRE(r.code != 0);
  REQUIRE(contains(r.err, "already in another group"));
  r = run(dir,
          "train data.train=data/train.svm features.groups=data/groups.txt features.group_structure=overlapping "
          "fgm.B=1 fgm.max_features=3 engine.threads=1 engine.progress=off output.dir=run");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  const JsonValue run_json = parse_json(slurp(dir.file("run/run.json")), "run.json");
  std::set<uint64_t> selected;
  for (const JsonValue& f : run_json.find("selected_features")->items())
    selected.insert(static_cast<uint64_t>(f.find("group")->number()));
  REQUIRE(selected == planted);
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
           Case{"synth --out o --group-overlap 2", "--group-overlap applies to --kind groups only"},
           Case{"synth --kind groups --out o --features-per-group 5 --group-overlap 5",
                "--group-overlap 5 must be below --features-per-group 5"},
       }) {
    RunResult r = run(dir, c.args);
    CAPTURE(c.args, r.err);
    REQUIRE(r.code != 0);
    REQUIRE(contains(r.err, c.message));
    REQUIRE(!fs::exists(dir.file("o")));
  }
}

namespace {

// The groups of a binary tree over the consecutive lines of groups.txt
// (level 0: the lines; level l: 2^l consecutive lines), as the tree file.
std::string binary_tree_over(const std::string& groups_txt, int levels) {
  std::vector<std::string> level;
  std::istringstream lines(groups_txt);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) level.push_back(line);
  std::string tree;
  for (int l = 0; l < levels && level.size() > 1; ++l) {
    for (const std::string& g : level) tree += g + "\n";
    std::vector<std::string> up;
    for (size_t i = 0; i + 1 < level.size(); i += 2) up.push_back(level[i] + " " + level[i + 1]);
    if (level.size() % 2 == 1) up.back() += " " + level.back();  // the odd tail joins the last pair
    level = up;
  }
  for (const std::string& g : level) tree += g + "\n";
  return tree;
}

}  // namespace

TEST_CASE("features.tree_pruning: pruned and exhaustive tree searches train the same model, bit for bit",
          "[cli][groups][tree][pruning]") {
  TempDir dir("fgm-cli-tree-pruning");
  // Gaussian planted groups (synth) and a binary copy of the same rows (value 1 where nonzero: tied scores).
  RunResult r = run(dir,
                    "synth --kind groups --out data --rows 300 --test-rows 100 --features 160 "
                    "--features-per-group 5 --relevant-groups 3 --seed 7");
  REQUIRE(r.code == 0);
  std::string binary;
  {
    std::istringstream rows(slurp(dir.file("data/train.svm")));
    for (std::string row; std::getline(rows, row);) {
      std::istringstream tokens(row);
      std::string token;
      tokens >> token;
      binary += token;
      while (tokens >> token) binary += " " + token.substr(0, token.find(':')) + ":1";
      binary += "\n";
    }
  }
  dir.write("binary.svm", binary);
  dir.write("tree.txt", binary_tree_over(slurp(dir.file("data/groups.txt")), 6));
  for (const std::string train : {"data/train.svm", "binary.svm"}) {
    std::vector<uint64_t> scored_total;
    for (const std::string pruning : {"true", "false"}) {
      for (const std::string threads : {"1", "2"}) {
        const std::string out = "run-" + train.substr(0, 4) + "-" + pruning + "-" + threads;
        r = run(dir, "train data.train=" + train +
                         " features.groups=tree.txt features.group_structure=tree features.tree_pruning=" + pruning +
                         " fgm.B=2 fgm.max_iterations=6 fgm.loss=logistic engine.progress=off engine.threads=" +
                         threads + " engine.cache_dir=cache output.dir=" + out);
        CAPTURE(train, pruning, threads, r.err);
        REQUIRE(r.code == 0);
        // The learned part of the model (its config and creation time differ).
        const Model got = read_model(dir.file(out + "/model.fgm"));
        const Model first = read_model(dir.file("run-" + train.substr(0, 4) + "-true-1/model.fgm"));
        REQUIRE(got.features.size() == first.features.size());
        for (size_t k = 0; k < got.features.size(); ++k) {
          REQUIRE(got.features[k].key.ids[0] == first.features[k].key.ids[0]);
          REQUIRE(got.features[k].key.group == first.features[k].key.group);
          REQUIRE(got.features[k].weight == first.features[k].weight);
          REQUIRE(got.features[k].batch == first.features[k].batch);
        }
        REQUIRE(got.objective == first.objective);
        REQUIRE(got.iterations == first.iterations);
        REQUIRE(got.features.size() > 20);
        const JsonValue run_json = parse_json(slurp(dir.file(out + "/run.json")), "run.json");
        uint64_t scored = 0;
        for (const JsonValue& it : run_json.find("iterations")->items())
          scored += static_cast<uint64_t>(it.find("candidates_scored")->number());
        if (threads == "1") scored_total.push_back(scored);
      }
    }
    CAPTURE(train, scored_total[0], scored_total[1]);
    REQUIRE(scored_total[0] < scored_total[1]);
  }
}

TEST_CASE("features.tree_pruning is refused, naming the key, where no tree search reads it",
          "[cli][groups][tree][pruning]") {
  TempDir dir("fgm-cli-tree-pruning-refused");
  dir.write("t.svm", "+1 1:1 2:1\n-1 2:1 3:1\n+1 1:1 3:0.5\n-1 3:1 4:1\n+1 4:2\n-1 1:1\n");
  dir.write("tree.txt", "1 2 3 4\n1 2\n");
  REQUIRE(run(dir, "ingest t.svm --out parts --partitions 2").code == 0);
  const std::string tree = " features.groups=tree.txt features.group_structure=tree features.tree_pruning=false";
  struct Case {
    std::string args, why;
  };
  for (const Case& c : {
           Case{"train data.train=parts output.dir=run" + tree, "partitioned store's run scores every group"},
           Case{"train data.train=t.svm output.dir=run solver=exclusive" + tree,
                "tree-group search of solver = \"fgm\""},
           Case{"path data.train=t.svm output.dir=run 'path.features=[1]' features.tree_pruning=true",
                "features.group_structure = \"tree\" only"},
       }) {
    RunResult r = run(dir, c.args);
    CAPTURE(c.args, r.err);
    REQUIRE(r.code == 2);
    REQUIRE(contains(r.err, "key 'features.tree_pruning' would be ignored"));
    REQUIRE(contains(r.err, c.why));
    REQUIRE_FALSE(fs::exists(dir.file("run")));
  }
  // fgm path reads it too: the same path either way.
  for (const std::string pruning : {"true", "false"}) {
    RunResult r = run(dir, "path data.train=t.svm 'path.features=[1,2]' fgm.B=1 engine.progress=off output.dir=p-" +
                               pruning + tree.substr(0, tree.rfind('=') + 1) + pruning);
    CAPTURE(r.err);
    REQUIRE(r.code == 0);
  }
  auto objectives = [&](const std::string& out) {
    std::vector<double> values;
    const JsonValue path = parse_json(slurp(dir.file(out + "/path.json")), "path.json");
    for (const JsonValue& run : path.find("runs")->items())
      for (const JsonValue& v : run.find("iterations")->find("objective")->items()) values.push_back(v.number());
    return values;
  };
  REQUIRE_FALSE(objectives("p-true").empty());
  REQUIRE(objectives("p-true") == objectives("p-false"));
}
