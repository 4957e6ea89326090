// fgm under mpirun (docs/distributed.md): partitioned ingest, the same
// model bit for bit on 1, 2 and 4 ranks, the partition-count check, and a
// killed rank ending the job. Tagged [.mpi] (hidden from the `cli` ctest
// entry): ctest runs them as the `mpi` entry, oversubscribed on this machine.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <random>
#include <thread>

#include "core/json_reader.h"
#include "io/model_file.h"
#include "io/partitioned_store.h"
#include "tests/cli/cli_test_util.h"
#include "tests/cli/mpi_test_util.h"

namespace fgm::test {
namespace {

std::string fmt_value(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// A planted sparse problem: `rows` rows over `features` features, labels
// from a few of them (ties and integer values included).
std::string planted_libsvm(uint64_t rows, uint32_t features, uint32_t per_row, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> feature(1, features);
  std::uniform_int_distribution<int> small(1, 3);
  std::normal_distribution<double> noise(0, 0.3);
  std::string text;
  for (uint64_t i = 0; i < rows; ++i) {
    std::map<uint32_t, double> row;
    for (uint32_t k = 0; k < per_row; ++k) {
      const uint32_t f = feature(rng);
      row[f] = (f % 3 == 0) ? double(small(rng)) : std::round(std::normal_distribution<double>(0, 1)(rng) * 100) / 100;
    }
    double score = noise(rng);
    for (const auto& [f, v] : row)
      if (f <= 6) score += (f % 2 ? 1.0 : -1.0) * v;
    text += score > 0 ? "+1" : "-1";
    for (const auto& [f, v] : row) text += " " + std::to_string(f) + ":" + fmt_value(v);
    text += "\n";
  }
  return text;
}


void write_config(const TempDir& dir) {
  dir.write("c.toml", "[data]\ntrain = \"store\"\n[fgm]\nB = 3\nmax_iterations = 4\n");
}

}  // namespace

TEST_CASE("ingest --partitions writes P ordinary stores and a manifest of the row split", "[.mpi][mpi]") {
  TempDir dir("fgm-mpi");
  dir.write("in.txt", "# header comment\n" + planted_libsvm(103, 30, 5, 1));
  RunResult r = run(dir, "ingest in.txt --out store --partitions 4 --tile-rows 16");
  REQUIRE(r.code == 0);
  const PartitionManifest m = read_partition_manifest(dir.file("store"));
  CHECK(m.partitions == 4);
  CHECK(m.n_rows == 103);
  CHECK(m.first_row == std::vector<uint64_t>{0, 25, 51, 77, 103});
  CHECK(m.first_line[0] == 1);
  CHECK(m.first_line[1] == 27);  // the comment line goes with partition 0
  // Each partition is a store of its own, with the whole feature width.
  dir.write("p.toml", "[data]\ntrain = \"store/part-0002\"\n[fgm]\nB = 2\nmax_iterations = 1\n");
  r = run(dir, "train --config p.toml output.dir=p2");
  REQUIRE(r.code == 0);
  CHECK(read_model(dir.file("p2/model.fgm")).n_features == m.n_features);
}

TEST_CASE("ingest --partitions names the input line of a bad row in a later partition", "[.mpi][mpi]") {
  TempDir dir("fgm-mpi");
  std::string text = planted_libsvm(40, 10, 3, 2);
  // Line 35 (partition 3 of 4 starts at row 30, line 31) gets a bad value.
  size_t at = 0;
  for (int line = 1; line < 35; ++line) at = text.find('\n', at) + 1;
  text.insert(text.find(' ', at), " 4:abc");
  dir.write("bad.txt", text);
  RunResult r = run(dir, "ingest bad.txt --out store --partitions 4");
  CHECK(r.code == 3);
  CHECK(contains(r.err, "partition 3 of 4: its line 1 is line 31 of bad.txt"));
  CHECK(contains(r.err, ":5:"));  // line 5 of the partition = line 35 of the input
  CHECK_FALSE(std::filesystem::exists(dir.file("store")));
}

TEST_CASE("a linear model on 2 and 4 ranks is the 1-process model bit for bit", "[.mpi][mpi]") {
  TempDir dir("fgm-mpi");
  dir.write("in.txt", planted_libsvm(600, 40, 6, 3));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4 --tile-rows 64").code == 0);
  write_config(dir);
  RunResult one = run(dir, "train --config c.toml output.dir=o1");
  REQUIRE(one.code == 0);
  // Without mpirun nothing is communicated.
  for (const auto& pass : parse_json(slurp(dir.file("o1/run.json")), "run.json").find("distributed")->find("passes")->items())
    CHECK(pass.find("bytes")->number() == 0);
  for (int np : {2, 4}) {
    INFO("np = " << np);
    RunResult r = run_mpi(dir, np, "train --config c.toml output.dir=o" + std::to_string(np) + " engine.threads=" +
                                       std::to_string(np == 2 ? 2 : 1));
    REQUIRE(r.code == 0);
    CHECK(contains(r.out, "ranks=" + std::to_string(np)));
    require_same_model(dir.file("o1/model.fgm"), dir.file("o" + std::to_string(np) + "/model.fgm"));
    // run.json records each phase's communication. A scoring pass is two
    // collectives: the reduce-scatter (rank 0 sends each other rank d its one
    // tree node's values on d's column range, W_d doubles and a 24-byte header,
    // and receives as much for its own range W_0; every column here is
    // non-empty in every partition, so nodes go dense), then the allgather of
    // each rank's top list (16 per entry: between B entries in all and B per
    // rank) and of the selected columns' c_j (8 bytes each, once), each list
    // with an 8-byte count; each
    // collective adds K 4-byte sizes.
    const JsonValue run_json = parse_json(slurp(dir.file("o" + std::to_string(np) + "/run.json")), "run.json");
    const JsonValue* distributed = run_json.find("distributed");
    REQUIRE(distributed);
    CHECK(distributed->find("ranks")->number() == np);
    const auto m = static_cast<uint64_t>(read_model(dir.file("o1/model.fgm")).n_features);
    auto width = [&](int d) { return (uint64_t(d) + 1) * m / uint64_t(np) - uint64_t(d) * m / uint64_t(np); };
    double scatter = 4.0 * np;
    for (int d = 1; d < np; ++d) scatter += double(24 + 8 * width(d)) + double(24 + 8 * width(0));
    int scoring_passes = 0;
    for (const auto& pass : distributed->find("passes")->items())
      if (pass.find("phase")->string() == "scoring") {
        const double selected = 3.0 * scoring_passes;  // B = 3 features per earlier pass
        ++scoring_passes;
        const double lists = pass.find("bytes")->number() - scatter - 4.0 * np - 16.0 * np - 8 * selected;
        CHECK(std::fmod(lists, 16.0) == 0);
        CHECK(lists >= 16 * 3);
        CHECK(lists <= 16 * 3 * np);
        CHECK(pass.find("collectives")->number() == 2);
      }
    CHECK(scoring_passes == 5);  // 4 iterations and the pass that ends the loop
    // Rank 0 wrote the report page; `fgm report` reads the run again.
    CHECK(std::filesystem::exists(dir.file("o" + std::to_string(np) + "/report.html")));
    CHECK(run(dir, "report o" + std::to_string(np)).code == 0);
  }
  // The logistic loss too, 1 against 4 ranks.
  REQUIRE(run(dir, "train --config c.toml output.dir=l1 fgm.loss=logistic").code == 0);
  REQUIRE(run_mpi(dir, 4, "train --config c.toml output.dir=l4 fgm.loss=logistic").code == 0);
  require_same_model(dir.file("l1/model.fgm"), dir.file("l4/model.fgm"));
}

TEST_CASE("the distributed model solves the same problem as the single-store trainer", "[.mpi][mpi]") {
  // Independent check of the distributed APG: with one batch (max_iterations
  // = 1) both trainers select the same top-B by the same c and solve the same
  // convex problem (31); their objectives agree to the solvers' tolerance.
  TempDir dir("fgm-mpi");
  dir.write("in.txt", planted_libsvm(500, 30, 5, 4));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 2").code == 0);
  REQUIRE(run(dir, "ingest in.txt --out plain").code == 0);
  dir.write("c.toml", "[data]\ntrain = \"store\"\n[fgm]\nB = 4\nmax_iterations = 1\n[apg]\neps_inner = 1e-7\n");
  REQUIRE(run(dir, "train --config c.toml output.dir=d").code == 0);
  REQUIRE(run(dir, "train --config c.toml data.train=plain output.dir=s").code == 0);
  const Model d = read_model(dir.file("d/model.fgm")), s = read_model(dir.file("s/model.fgm"));
  REQUIRE(d.features.size() == s.features.size());
  for (size_t k = 0; k < d.features.size(); ++k) CHECK(d.features[k].key.ids[0] == s.features[k].key.ids[0]);
  CHECK(d.objective == Approx(s.objective).epsilon(1e-4));
}

TEST_CASE("a group model on 2 and 4 ranks is the 1-process model, and picks the single-store trainer's groups",
          "[.mpi][mpi]") {
  TempDir dir("fgm-mpi");
  dir.write("in.txt", planted_libsvm(600, 40, 6, 7));
  // Groups over the planted features and others; unlisted features are singletons.
  dir.write("disjoint.txt", "1 2 3\n4 5 6\n10 11 12 13\n20 21\n");
  dir.write("tree.txt", "1 2 3 4 5 6\n1 2 3\n4 5\n10 11 12 13\n10 11\n");
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4 --tile-rows 64").code == 0);
  REQUIRE(run(dir, "ingest in.txt --out plain --tile-rows 64").code == 0);
  for (const std::string structure : {"disjoint", "tree"}) {
    INFO("structure " << structure);
    const std::string groups = structure == "tree" ? "tree.txt" : "disjoint.txt";
    dir.write("g.toml", "[data]\ntrain = \"store\"\n[features]\ngroups = \"" + groups +
                            "\"\ngroup_structure = \"" + structure + "\"\n[fgm]\nB = 2\nmax_iterations = 3\n");
    REQUIRE(run(dir, "train --config g.toml output.dir=g1" + structure).code == 0);
    for (int np : {2, 4}) {
      REQUIRE(run_mpi(dir, np, "train --config g.toml output.dir=g" + std::to_string(np) + structure).code == 0);
      require_same_model(dir.file("g1" + structure + "/model.fgm"),
                         dir.file("g" + std::to_string(np) + structure + "/model.fgm"));
    }
    const Model m = read_model(dir.file("g1" + structure + "/model.fgm"));
    CHECK(m.feature_kind == "group");
    // First batch (α⁰ = C·1 in both trainers): the same groups, members and batch numbers.
    REQUIRE(run(dir, "train --config g.toml data.train=plain fgm.max_iterations=1 output.dir=s" + structure).code == 0);
    REQUIRE(run(dir, "train --config g.toml fgm.max_iterations=1 output.dir=d" + structure).code == 0);
    const Model s = read_model(dir.file("s" + structure + "/model.fgm"));
    const Model d = read_model(dir.file("d" + structure + "/model.fgm"));
    REQUIRE(s.features.size() == d.features.size());
    for (size_t k = 0; k < s.features.size(); ++k) {
      CHECK(s.features[k].key.group == d.features[k].key.group);
      CHECK(s.features[k].key.ids[0] == d.features[k].key.ids[0]);
      CHECK(s.features[k].batch == d.features[k].batch);
    }
  }
}

TEST_CASE("a partition holding one class only is refused at ingest, naming it", "[.mpi][mpi]") {
  // Rows sorted by label: partition 0 has only the positive rows.
  TempDir dir("fgm-mpi");
  std::string text = planted_libsvm(400, 30, 5, 8), pos, neg;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) (line[0] == '+' ? pos : neg) += line + "\n";
  dir.write("sorted.txt", pos + neg);
  RunResult r = run(dir, "ingest sorted.txt --out store --partitions 4");
  CHECK(r.code == 3);
  CHECK(contains(r.err, "partition 0 of 4 (rows 1..100, from line 1) has only label '+1'"));
  CHECK(contains(r.err, "shuffle the rows"));
  CHECK_FALSE(std::filesystem::exists(dir.file("store")));
}

TEST_CASE("a damaged partition manifest is named", "[.mpi][mpi]") {
  TempDir dir("fgm-mpi");
  dir.write("in.txt", planted_libsvm(60, 10, 3, 9));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 2").code == 0);
  std::string manifest = slurp(dir.file("store/partitions.json"));
  manifest.replace(manifest.find("\"n_rows\": 60"), 12, "\"n_rows\": 61");
  dir.write("store/partitions.json", manifest);
  write_config(dir);
  RunResult r = run(dir, "train --config c.toml output.dir=o");
  CHECK(r.code == 5);
  CHECK(contains(r.err, "partitions.json: inconsistent partition table"));
}

TEST_CASE("a rank count that does not divide the partitions is refused with what to do", "[.mpi][mpi]") {
  TempDir dir("fgm-mpi");
  dir.write("in.txt", planted_libsvm(100, 20, 4, 5));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4").code == 0);
  write_config(dir);
  RunResult r = run_mpi(dir, 3, "train --config c.toml output.dir=o3");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "has 4 row partitions, which 3 ranks cannot share evenly"));
  CHECK(contains(r.err, "(1, 2, 4)"));
  CHECK(contains(r.err, "--partitions 3"));
  CHECK_FALSE(std::filesystem::exists(dir.file("o3/model.fgm")));
  // An ordinary store under mpirun: told how to partition it.
  REQUIRE(run(dir, "ingest in.txt --out plain").code == 0);
  r = run_mpi(dir, 2, "train --config c.toml data.train=plain output.dir=o2");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "is not a partitioned store"));
  CHECK(contains(r.err, "--partitions 2"));
  // Only train is distributed: two ranks ingesting would write one output twice.
  r = run_mpi(dir, 2, "ingest in.txt --out twice");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "fgm ingest runs on one process"));
  CHECK_FALSE(std::filesystem::exists(dir.file("twice")));
}

TEST_CASE("a rank killed mid-run ends the whole job within seconds", "[.mpi][mpi]") {
  TempDir dir("fgm-mpi");
  dir.write("in.txt", planted_libsvm(40000, 400, 10, 6));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 2").code == 0);
  dir.write("c.toml", "[data]\ntrain = \"store\"\n[fgm]\nB = 1\nmax_iterations = 400\neps_outer = 0\n");
  const std::string launch = "cd '" + dir.path.string() + "' && (" + kMpirun + "-np 2 '" FGM_BINARY_PATH +
                             "' train --config c.toml output.dir=o >out.txt 2>err.txt </dev/null & echo $! >pid.txt; "
                             "wait $!; echo $? >rc.txt) >/dev/null 2>&1 &";
  REQUIRE(std::system(launch.c_str()) == 0);
  auto wait_for = [&](const std::function<bool()>& ready, double seconds) {
    const auto start = std::chrono::steady_clock::now();
    while (!ready()) {
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;
  };
  // The ranks: children of mpirun, once both are training (a log line on stderr).
  REQUIRE(wait_for([&] { return contains(slurp(dir.file("err.txt")), "iter   1:"); }, 60));
  const std::string mpirun_pid = slurp(dir.file("pid.txt"));
  const std::string children = dir.file("children.txt");
  std::system(("pgrep -P " + std::to_string(std::stol(mpirun_pid)) + " > '" + children + "'").c_str());
  std::istringstream pids(slurp(children));
  std::vector<long> ranks;
  for (long p; pids >> p;) ranks.push_back(p);
  REQUIRE(ranks.size() == 2);
  REQUIRE_FALSE(std::filesystem::exists(dir.file("rc.txt")));  // still running: the kill is mid-run
  ::kill(static_cast<pid_t>(ranks.back()), SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  REQUIRE(wait_for([&] { return std::filesystem::exists(dir.file("rc.txt")) && !slurp(dir.file("rc.txt")).empty(); }, 30));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  CHECK(seconds < 10);
  CHECK(std::stoi(slurp(dir.file("rc.txt"))) != 0);
  const std::string err = slurp(dir.file("err.txt"));
  INFO(err);
  CHECK(contains(err, "exited on signal 9"));
  CHECK(contains(err, "rank"));
  CHECK_FALSE(std::filesystem::exists(dir.file("o/model.fgm")));
}

TEST_CASE("a distributed run killed mid-run resumes on the same rank count to the uninterrupted model; another count is refused",
          "[.mpi][mpi]") {
  TempDir dir("fgm-mpi");
  dir.write("in.txt", planted_libsvm(20000, 200, 8, 7));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4").code == 0);
  dir.write("c.toml", "[data]\ntrain = \"store\"\n[fgm]\nB = 1\nmax_iterations = 40\neps_outer = 0\n");
  REQUIRE(run_mpi(dir, 2, "train --config c.toml output.dir=u").code == 0);
  // run.json of a distributed run: the single-store sections plus every rank's memory.
  const JsonValue u_json = parse_json(slurp(dir.file("u/run.json")), "run.json");
  CHECK(u_json.find("peak_rss_bytes")->number() > 0);
  CHECK(u_json.find("warnings"));
  CHECK(u_json.find("iterations_restored")->number() == 0);
  const auto& ranks = u_json.find("distributed")->find("rank_resources")->items();
  REQUIRE(ranks.size() == 2);
  for (const auto& r : ranks) CHECK(r.find("peak_rss_bytes")->number() > 0);
  CHECK_FALSE(std::filesystem::exists(dir.file("u/checkpoint.fgm")));  // removed once the outputs are written
  // The report shows the communication of every phase and every rank's memory.
  const std::string report = slurp(dir.file("u/report.html"));
  CHECK(contains(report, "Communication (distributed run, rank 0)"));
  CHECK(contains(report, "Memory per rank"));

  // The same run, rank 1 killed once rank 0 has logged iteration 3 (its checkpoint is written first;
  // 40 iterations leave the kill time to land before the run ends, even on a loaded machine).
  const std::string launch = "cd '" + dir.path.string() + "' && (" + kMpirun + "-np 2 '" FGM_BINARY_PATH +
                             "' train --config c.toml output.dir=o >out.txt 2>err.txt </dev/null & echo $! >pid.txt; "
                             "wait $!; echo $? >rc.txt) >/dev/null 2>&1 &";
  REQUIRE(std::system(launch.c_str()) == 0);
  const auto start = std::chrono::steady_clock::now();
  while (!contains(slurp(dir.file("err.txt")), "iter   3:")) {
    REQUIRE(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 120);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string children = dir.file("children.txt");
  std::system(("pgrep -P " + std::to_string(std::stol(slurp(dir.file("pid.txt")))) + " > '" + children + "'").c_str());
  std::istringstream pids(slurp(children));
  std::vector<long> rank_pids;
  for (long p; pids >> p;) rank_pids.push_back(p);
  REQUIRE(rank_pids.size() == 2);
  ::kill(static_cast<pid_t>(rank_pids.back()), SIGKILL);
  while (!std::filesystem::exists(dir.file("rc.txt")) || slurp(dir.file("rc.txt")).empty()) {
    REQUIRE(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 180);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(std::stoi(slurp(dir.file("rc.txt"))) != 0);  // killed mid-run, not finished
  REQUIRE_FALSE(std::filesystem::exists(dir.file("o/model.fgm")));
  REQUIRE(std::filesystem::exists(dir.file("o/checkpoint.fgm")));

  // Another rank count (4 ranks, or one process) is refused, saying what to do; the checkpoint stays.
  RunResult other = run_mpi(dir, 4, "train --config c.toml output.dir=o");
  CHECK(other.code == 2);
  CHECK(contains(other.err, "written by a run on 2 rank(s), this run has 4"));
  CHECK(contains(other.err, "mpirun -np 2"));
  CHECK(contains(other.err, "--restart"));
  other = run(dir, "train --config c.toml output.dir=o");
  CHECK(other.code == 2);
  CHECK(contains(other.err, "this run has 1"));
  REQUIRE(std::filesystem::exists(dir.file("o/checkpoint.fgm")));

  // The same rank count resumes and ends with the uninterrupted model, bit for bit.
  RunResult resumed = run_mpi(dir, 2, "train --config c.toml output.dir=o");
  REQUIRE(resumed.code == 0);
  CHECK(contains(resumed.err, "resuming from iteration"));
  const JsonValue o_json = parse_json(slurp(dir.file("o/run.json")), "run.json");
  CHECK(o_json.find("iterations_restored")->number() >= 3);
  CHECK(o_json.find("iterations")->items().size() == u_json.find("iterations")->items().size());
  require_same_model(dir.file("u/model.fgm"), dir.file("o/model.fgm"));
  CHECK_FALSE(std::filesystem::exists(dir.file("o/checkpoint.fgm")));
}

TEST_CASE("one partition: the distributed trainer gives the single-store model bit for bit (one APG)", "[.mpi][mpi]") {
  // The partition tree over one leaf adds nothing and the subproblem is the
  // single-store APG over the one part, so every sum is the single store's.
  TempDir dir("fgm-mpi");
  dir.write("in.txt", planted_libsvm(700, 40, 6, 8));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 1").code == 0);
  REQUIRE(run(dir, "ingest in.txt --out plain").code == 0);
  write_config(dir);
  for (const char* loss : {"squared_hinge", "logistic"}) {
    INFO(loss);
    const std::string l = std::string(" fgm.loss=") + loss;
    REQUIRE(run(dir, "train --config c.toml output.dir=d" + l).code == 0);
    REQUIRE(run(dir, "train --config c.toml data.train=plain output.dir=s" + l).code == 0);
    require_same_model(dir.file("d/model.fgm"), dir.file("s/model.fgm"));
  }
  // With the bias (FGM-SHIFT): the same b too.
  REQUIRE(run(dir, "train --config c.toml output.dir=db fgm.bias=true").code == 0);
  REQUIRE(run(dir, "train --config c.toml data.train=plain output.dir=sb fgm.bias=true").code == 0);
  require_same_model(dir.file("db/model.fgm"), dir.file("sb/model.fgm"));
  const Model db = read_model(dir.file("db/model.fgm")), sb = read_model(dir.file("sb/model.fgm"));
  CHECK(db.bias != 0);
  CHECK(std::memcmp(&db.bias, &sb.bias, sizeof(double)) == 0);
}

TEST_CASE("a model with the bias on 2 and 4 ranks is the 1-process model bit for bit", "[.mpi][mpi]") {
  TempDir dir("fgm-mpi");
  // Unbalanced labels (about 1 in 4 positive), so b matters.
  std::string text = planted_libsvm(800, 40, 6, 9);
  std::string unbalanced;
  std::istringstream lines(text);
  int k = 0;
  for (std::string line; std::getline(lines, line); ++k)
    unbalanced += (line[0] == '+' && k % 2 == 0 ? "-1" + line.substr(2) : line) + "\n";
  dir.write("in.txt", unbalanced);
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4 --tile-rows 64").code == 0);
  write_config(dir);
  for (const char* loss : {"squared_hinge", "logistic"}) {
    INFO(loss);
    const std::string l = std::string(" fgm.bias=true fgm.loss=") + loss;
    REQUIRE(run(dir, "train --config c.toml output.dir=b1" + l).code == 0);
    REQUIRE(run_mpi(dir, 2, "train --config c.toml output.dir=b2 engine.threads=2" + l).code == 0);
    REQUIRE(run_mpi(dir, 4, "train --config c.toml output.dir=b4" + l).code == 0);
    const Model m1 = read_model(dir.file("b1/model.fgm"));
    CHECK(m1.bias != 0);
    for (const char* other : {"b2/model.fgm", "b4/model.fgm"}) {
      require_same_model(dir.file("b1/model.fgm"), dir.file(other));
      const Model m = read_model(dir.file(other));
      CHECK(std::memcmp(&m.bias, &m1.bias, sizeof(double)) == 0);
    }
  }
}

// Issue 19: a partitioned run certifies its final solve like a single-store
// one (whichever rule ends it: the iteration cap, or eps_outer after an
// inexact solve, then a polish solve), the same bits on 1, 2 and 4 ranks; and
// with one batch the single-store and partitioned objectives, both of the
// same problem (31), agree within the larger of their certified gaps.
TEST_CASE("a partitioned run's final solve is certified, the same on any rank count", "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-cert");
  dir.write("in.txt", planted_libsvm(500, 30, 5, 4));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4").code == 0);
  REQUIRE(run(dir, "ingest in.txt --out plain").code == 0);
  auto last_iteration = [&](const std::string& out) {
    const JsonValue run_json = parse_json(slurp(dir.file(out + "/run.json")), "run.json");
    return run_json.find("iterations")->items().back();
  };
  for (const std::string stop : {"fgm.max_iterations=3", "fgm.max_iterations=50 fgm.eps_outer=0.05 fgm.B=2"}) {
    INFO(stop);
    REQUIRE(run(dir, "train data.train=store " + stop + " output.dir=c1").code == 0);
    for (int np : {2, 4}) {
      const RunResult r = run_mpi(dir, np, "train data.train=store " + stop + " output.dir=c" + std::to_string(np));
      INFO(r.err);
      REQUIRE(r.code == 0);
      require_same_model(dir.file("c1/model.fgm"), dir.file("c" + std::to_string(np) + "/model.fgm"));
    }
    const JsonValue last = last_iteration("c1");
    CHECK(last.find("apg_certified")->boolean());
    CHECK(last.find("apg_stop")->string() == "converged");
    CHECK(last.find("apg_relative_gap")->number() <= 1e-3);
  }
  REQUIRE(run(dir, "train data.train=store fgm.B=4 fgm.max_iterations=1 output.dir=d").code == 0);
  REQUIRE(run(dir, "train data.train=plain fgm.B=4 fgm.max_iterations=1 output.dir=s").code == 0);
  const Model d = read_model(dir.file("d/model.fgm")), s = read_model(dir.file("s/model.fgm"));
  REQUIRE(d.features.size() == s.features.size());
  for (size_t k = 0; k < d.features.size(); ++k) REQUIRE(d.features[k].key.ids[0] == s.features[k].key.ids[0]);
  const double gap = std::max(last_iteration("d").find("apg_relative_gap")->number(),
                              last_iteration("s").find("apg_relative_gap")->number());
  CHECK(std::fabs(d.objective - s.objective) <= gap * std::max(d.objective, s.objective));
}

}  // namespace fgm::test
