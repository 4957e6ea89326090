// One-vs-rest in lockstep on a partitioned store (docs/distributed.md,
// "Multi-class"): the classes share each scoring pass, and every class's
// model is bit for bit the model of the one-class-after-another run (the
// reference, trained in this process with OneVsRestSchedule::kSequential),
// on 1, 2 and 4 ranks and 1 or 2 threads. And the CPU-affinity warning of
// engine.threads under a restricted affinity (taskset).
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "core/communicator.h"
#include "core/config.h"
#include "core/json_reader.h"
#include "core/memory_budget.h"
#include "engine/distributed_fgm.h"
#include "engine/train_settings.h"
#include "io/model_file.h"
#include "tests/cli/cli_test_util.h"
#include "tests/cli/mpi_test_util.h"

namespace fgm::test {
namespace {

// Four classes over 20 features: class k raises features 3k+1..3k+3 by
// integer steps whose strength falls with k, feature 20 marks class 1 alone
// (so its loop ends before the others' under fgm.eps_outer); the other
// entries are binary or small integers (many ties).
std::string four_classes(uint64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> unif(0, 1);
  std::ostringstream out;
  for (uint64_t i = 0; i < rows; ++i) {
    const int c = static_cast<int>(rng() % 4);
    out << c + 1;
    for (int j = 0; j < 20; ++j) {
      double v = unif(rng) < 0.3 ? (j % 2 ? 1.0 : std::floor(4 * unif(rng))) : 0.0;
      if (j / 3 == c && unif(rng) < 0.9 - 0.2 * c) v += 3 - c;
      if (j == 19) v = c == 0 ? 4.0 : 0.0;  // separates class 1 from the rest: its loop ends early (eps_outer)
      if (v != 0) out << ' ' << j + 1 << ':' << v;
    }
    out << '\n';
  }
  return out.str();
}

// Eight classes over 4,000 sparse features (30 small-integer entries per row,
// three marker features per class): wide enough that the classes' shared
// scoring state (8 keys per column) outgrows a small budget.
std::string eight_wide_classes(uint64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::ostringstream out;
  for (uint64_t i = 0; i < rows; ++i) {
    const int c = static_cast<int>(rng() % 8);
    std::map<uint32_t, int> entries;
    for (int k = 0; k < 30; ++k) entries[1 + rng() % 4000] = 1 + static_cast<int>(rng() % 3);
    for (uint32_t j = 0; j < 3; ++j) entries[5 * c + j + 1] = 4;
    out << c + 1;
    for (const auto& [j, v] : entries) out << ' ' << j << ':' << v;
    out << '\n';
  }
  return out.str();
}

// The one-class-after-another model of `config_file` on `store`, in this
// process (one rank), written to `model_file`; its scoring passes.
size_t sequential_reference(const TempDir& dir, const std::string& config_file, const std::string& model_file) {
  const Config config = Config::load(dir.file(config_file), {});
  const TrainSettings settings = train_settings_from_config(config);
  SingleRankCommunicator comm;
  MemoryBudget budget(1ull << 30);
  const FgmOutcome o = train_fgm_on({comm, nullptr, config.get_string("data.train")}, settings, budget, {},
                                            OneVsRestSchedule::kSequential);
  REQUIRE(!o.lockstep);
  write_model(dir.file(model_file), o.model);
  size_t passes = 0, largest = 0;
  for (const auto& r : o.communication) passes += r.phase == "scoring";
  for (size_t c = 0; c < o.classes.size(); ++c) {
    size_t mine = 0;
    for (const auto& r : o.communication) mine += r.phase == "scoring" && r.class_index == static_cast<int>(c);
    largest = std::max(largest, mine);
  }
  CHECK(passes > largest);  // the sequential run makes the sum of the classes' passes
  return largest;
}

}  // namespace

TEST_CASE("one-vs-rest in lockstep on a partitioned store gives the sequential models bit for bit on 1, 2 and 4 ranks",
          "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-lockstep");
  dir.write("train.txt", four_classes(320, 5));
  dir.write("groups.txt", "1 2 3\n4 5 6\n7 8\n10 11 12 13\n");
  REQUIRE(run(dir, "ingest train.txt --out store --partitions 4 --tile-rows 32").code == 0);
  // Linear features with a bias (squared hinge; eps_outer stops the classes
  // at different iterations, so passes serve iterating classes and others'
  // certificates together), and groups with the logistic loss, no bias.
  dir.write("linear.toml",
            "[data]\ntrain = \"store\"\n[fgm]\nB = 2\nmax_iterations = 5\nbias = true\neps_outer = 0.02\n");
  dir.write("groups.toml",
            "[data]\ntrain = \"store\"\n[features]\ngroups = \"groups.txt\"\n[fgm]\nB = 1\nmax_iterations = 3\n"
            "loss = \"logistic\"\n");
  for (const std::string name : {"linear", "groups"}) {
    INFO(name);
    const size_t want_passes = sequential_reference(dir, name + ".toml", name + "-ref.fgm");
    for (int np : {1, 2, 4}) {
      INFO("np = " << np);
      const std::string out = name + std::to_string(np);
      const std::string args = "train --config " + name + ".toml output.dir=" + out +
                               " engine.threads=" + (np == 4 ? "1" : "2");
      const RunResult r = np == 1 ? run(dir, args) : run_mpi(dir, np, args);
      INFO(r.err);
      REQUIRE(r.code == 0);
      require_same_model(dir.file(name + "-ref.fgm"), dir.file(out + "/model.fgm"));
      const JsonValue log = parse_json(slurp(dir.file(out + "/run.json")), "run.json");
      CHECK(log.find("lockstep")->boolean());
      // max over the classes of their passes, each shared by the classes it lists.
      CHECK(log.find("scoring_passes")->number() == double(want_passes));
      std::set<std::string> stops;
      for (const auto& c : log.find("classes")->items()) stops.insert(c.find("stop_reason")->string());
      if (name == "linear") CHECK(stops.size() >= 2);  // the classes did leave the loop at different passes
      size_t shared = 0;
      for (const auto& pass : log.find("distributed")->find("passes")->items())
        if (pass.find("phase")->string() == "scoring") {
          ++shared;
          CHECK(!pass.find("class"));
          REQUIRE(pass.find("classes"));
          CHECK(!pass.find("classes")->items().empty());
          CHECK(pass.find("collectives")->number() == (np == 1 ? 0 : 2));
        }
      CHECK(shared == want_passes);
    }
  }
}

TEST_CASE("distributed one-vs-rest falls back to one class after another when lockstep does not fit the budget",
          "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-lockstep");
  dir.write("train.txt", eight_wide_classes(400, 3));
  REQUIRE(run(dir, "ingest train.txt --out store --partitions 4 --tile-rows 32").code == 0);
  dir.write("c.toml", "[data]\ntrain = \"store\"\n[fgm]\nB = 2\nmax_iterations = 2\n");
  sequential_reference(dir, "c.toml", "ref.fgm");
  auto fell_back = [&](const std::string& out) {
    const JsonValue log = parse_json(slurp(dir.file(out + "/run.json")), "run.json");
    for (const auto& w : log.find("warnings")->items())
      if (w.find("code")->string() == "ovr_lockstep_fell_back") return !log.find("lockstep")->boolean();
    return false;
  };
  // 1 MB: the store fits, the 8 classes' shared passes (about 1.8 MB on one process) do not.
  for (int np : {1, 2}) {
    const std::string out = "small" + std::to_string(np);
    const std::string args = "train --config c.toml engine.memory_budget=1MB output.dir=" + out;
    const RunResult r = np == 1 ? run(dir, args) : run_mpi(dir, np, args);
    INFO(r.err);
    REQUIRE(r.code == 0);
    require_same_model(dir.file("ref.fgm"), dir.file(out + "/model.fgm"));
    if (np == 1) CHECK(fell_back(out));
  }
  REQUIRE(run(dir, "train --config c.toml engine.memory_budget=8MB output.dir=roomy").code == 0);
  CHECK(!fell_back("roomy"));
  require_same_model(dir.file("ref.fgm"), dir.file("roomy/model.fgm"));
}

TEST_CASE("engine.threads above the CPUs a process may run on is a run warning naming the fix", "[cli]") {
  TempDir dir("fgm-affinity");
  dir.write("train.txt", four_classes(80, 9));
  REQUIRE(run(dir, "ingest train.txt --out store --partitions 2").code == 0);
  REQUIRE(std::system("taskset -c 0 true >/dev/null 2>&1") == 0);  // util-linux's taskset
  const std::string args = "train data.train=store fgm.B=2 fgm.max_iterations=1 output.dir=";
  const RunResult bound = run_launched(dir, "taskset -c 0 ", args + "bound engine.threads=2");
  INFO(bound.err);
  REQUIRE(bound.code == 0);
  CHECK(contains(bound.err, "engine.threads = 2"));
  CHECK(contains(bound.err, "--bind-to none"));
  CHECK(contains(bound.err, "--map-by slot:PE=2"));
  auto warned = [&](const std::string& out) {
    const JsonValue log = parse_json(slurp(dir.file(out + "/run.json")), "run.json");
    for (const auto& w : log.find("warnings")->items())
      if (w.find("code")->string() == "threads_exceed_cpu_affinity") return true;
    return false;
  };
  CHECK(warned("bound"));
  // One thread on one CPU is no warning.
  const RunResult one = run_launched(dir, "taskset -c 0 ", args + "one engine.threads=1");
  REQUIRE(one.code == 0);
  CHECK(!contains(one.err, "engine.threads = "));
  CHECK(!warned("one"));
}

}  // namespace fgm::test
