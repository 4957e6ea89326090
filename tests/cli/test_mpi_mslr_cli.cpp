// solver = "mslr" on a partitioned store (engine/mslr_trainer.h train_mslr_partitions,
// docs/distributed.md "MSLR"): the same model byte for byte on 1, 2 and 4
// ranks and 1 or 2 threads; a one-partition store gives the single-store
// model bit for bit; the data-parallel subproblem reaches the single-store
// solver's certified optimum on the unpartitioned data; refused settings;
// fgm path (bit-identical across ranks and threads, its points at the
// single-store path's); a run killed mid-run resumes to the uninterrupted
// model on the same rank count.
// Tagged [.mpi] like tests/cli/test_mpi_cli.cpp (ctest entry `mpi`).
#include <catch2/catch.hpp>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "core/json_reader.h"
#include "core/memory_budget.h"
#include "engine/resume_checkpoint.h"
#include "io/model_file.h"
#include "tests/cli/cli_test_util.h"

namespace fgm::test {
namespace {

// Binary (feature id ≡ 1 mod 3), small-integer (≡ 2) and tied columns (three
// values, ≡ 0), every fifth row a copy of the one before; labels from a
// planted sign with label noise. Values are integers or halves, so the
// scores c_j = Σ_i α_i y_i x_ij at α⁰ = 1 are exact in any summation order.
std::string mixed_libsvm(uint64_t rows, uint32_t features, uint32_t per_row, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> feature(1, features);
  std::uniform_int_distribution<int> small(-3, 3), tied(0, 2), coin(0, 9);
  std::string text, previous;
  for (uint64_t i = 0; i < rows; ++i) {
    if (i % 5 == 4) {
      text += previous;
      continue;
    }
    std::map<uint32_t, double> row;
    for (uint32_t k = 0; k < per_row; ++k) {
      const uint32_t f = feature(rng);
      row[f] = f % 3 == 1 ? 1.0 : f % 3 == 2 ? double(small(rng)) : 0.5 * (1 + tied(rng));
    }
    double score = 0;
    for (const auto& [f, v] : row)
      if (f <= 5) score += (f % 2 ? 1.0 : -1.0) * v;
    const bool positive = (score > 0) != (coin(rng) == 0);
    std::string line = positive ? "+1" : "-1";
    for (const auto& [f, v] : row) {
      char value[32];
      std::snprintf(value, sizeof value, "%g", v);
      line += " " + std::to_string(f) + ":" + value;
    }
    previous = line + "\n";
    text += previous;
  }
  return text;
}

// The model file's bytes apart from the recorded configuration (output.dir
// and engine.threads differ between the runs compared).
std::string model_bytes(const std::string& path) {
  Model m = read_model(path);
  m.config.clear();
  m.created_unix = 0;
  return encode_model(m);
}

const JsonValue* run_json_key(const JsonValue& run, const char* key) {
  const JsonValue* v = run.find(key);
  REQUIRE(v != nullptr);
  return v;
}

}  // namespace

TEST_CASE("MSLR on a partitioned store: the same model byte for byte on 1, 2 and 4 ranks and 1 or 2 threads",
          "[.mpi][mpi][mslr]") {
  TempDir dir("fgm-mpi-mslr");
  dir.write("in.txt", mixed_libsvm(400, 30, 5, 11));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4 --tile-rows 32").code == 0);
  const std::string args = "train solver=mslr data.train=store mslr.r=3 mslr.max_iterations=4 ";
  RunResult one = run(dir, args + "engine.threads=1 output.dir=o1");
  REQUIRE(one.code == 0);
  const std::string reference = model_bytes(dir.file("o1/model.fgm"));
  CHECK(read_model(dir.file("o1/model.fgm")).features.size() >= 6);
  {
    const JsonValue run_json = parse_json(slurp(dir.file("o1/run.json")), "run.json");
    const JsonValue* distributed = run_json_key(run_json, "distributed");
    CHECK(distributed->find("partitions")->number() == 4);
    for (const auto& pass : distributed->find("passes")->items()) CHECK(pass.find("bytes")->number() == 0);
    for (const auto& it : run_json_key(run_json, "iterations")->items()) CHECK(it.find("converged")->boolean());
  }
  for (auto [np, threads] : {std::pair{1, 2}, std::pair{2, 2}, std::pair{4, 1}}) {
    INFO("np " << np << " threads " << threads);
    const std::string out = "o" + std::to_string(np) + "t" + std::to_string(threads);
    RunResult r = run_mpi(dir, np, args + "engine.threads=" + std::to_string(threads) + " output.dir=" + out);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(contains(r.out, "ranks=" + std::to_string(np)));
    CHECK(model_bytes(dir.file(out + "/model.fgm")) == reference);
    const JsonValue run_json = parse_json(slurp(dir.file(out + "/run.json")), "run.json");
    const JsonValue* distributed = run_json_key(run_json, "distributed");
    CHECK(distributed->find("ranks")->number() == np);
    CHECK(distributed->find("rank_resources")->items().size() == size_t(np));
    double scoring_bytes = 0, solve_bytes = 0;
    for (const auto& pass : distributed->find("passes")->items()) {
      if (pass.find("phase")->string() == "scoring") scoring_bytes += pass.find("bytes")->number();
      if (pass.find("phase")->string() == "solve") solve_bytes += pass.find("bytes")->number();
    }
    CHECK((scoring_bytes > 0) == (np > 1));
    CHECK((solve_bytes > 0) == (np > 1));
  }
}

TEST_CASE("MSLR on a one-partition store is the single-store model bit for bit", "[.mpi][mpi][mslr]") {
  TempDir dir("fgm-mpi-mslr");
  dir.write("in.txt", mixed_libsvm(300, 24, 4, 12));
  REQUIRE(run(dir, "ingest in.txt --out store1 --partitions 1").code == 0);
  const std::string args = "train solver=mslr mslr.r=3 mslr.max_iterations=3 ";
  REQUIRE(run(dir, args + "data.train=in.txt output.dir=single").code == 0);
  REQUIRE(run(dir, args + "data.train=store1 output.dir=parted").code == 0);
  const Model single = read_model(dir.file("single/model.fgm")), parted = read_model(dir.file("parted/model.fgm"));
  REQUIRE(single.features.size() == parted.features.size());
  REQUIRE(!single.features.empty());
  for (size_t k = 0; k < single.features.size(); ++k) {
    CHECK(single.features[k].key.ids[0] == parted.features[k].key.ids[0]);
    CHECK(single.features[k].batch == parted.features[k].batch);
    CHECK(std::memcmp(&single.features[k].weight, &parted.features[k].weight, sizeof(double)) == 0);
  }
  CHECK(std::memcmp(&single.objective, &parted.objective, sizeof(double)) == 0);
  CHECK(single.positive_label == parted.positive_label);
}

// The scoring pass goes by column ranges (sparse sums of the non-empty
// columns, as FGM's): the same rows with their columns moved to ids near 2^40
// (a dense score vector would be 8 TiB per rank) train in 24 MB per rank, and
// give the model of the original ids, moved, with the same weight bits.
TEST_CASE("MSLR on a partitioned store scores sparsely: ids near 2^40 in a budget a dense vector would exceed",
          "[.mpi][mpi][mslr]") {
  TempDir dir("fgm-mpi-mslr");
  const std::string original = mixed_libsvm(300, 24, 4, 18);
  const uint64_t far = uint64_t{1} << 40;
  auto moved = [&](uint64_t id) { return far + 977 * id; };  // 1-based ids, increasing
  std::istringstream in(original);
  std::string text, line;
  while (std::getline(in, line)) {
    std::istringstream tokens(line);
    std::string token;
    tokens >> token;
    text += token;
    while (tokens >> token) {
      const size_t colon = token.find(':');
      text += " " + std::to_string(moved(std::stoull(token.substr(0, colon)))) + token.substr(colon);
    }
    text += "\n";
  }
  dir.write("near.txt", original);
  dir.write("far.txt", text);
  REQUIRE(run(dir, "ingest near.txt --out near --partitions 2").code == 0);
  REQUIRE(run(dir, "ingest far.txt --out far --partitions 2").code == 0);
  const std::string args = "train solver=mslr mslr.r=3 mslr.max_iterations=3 ";
  REQUIRE(run(dir, args + "data.train=near output.dir=n").code == 0);
  const std::string small = args + "engine.memory_budget=24MB data.train=far output.dir=";
  RunResult r = run(dir, small + "f1");
  INFO(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(run_mpi(dir, 2, small + "f2").code == 0);
  CHECK(model_bytes(dir.file("f1/model.fgm")) == model_bytes(dir.file("f2/model.fgm")));
  const Model n = read_model(dir.file("n/model.fgm")), f = read_model(dir.file("f2/model.fgm"));
  CHECK(f.n_features > far);
  REQUIRE(!n.features.empty());
  REQUIRE(n.features.size() == f.features.size());
  for (size_t k = 0; k < n.features.size(); ++k) {
    CHECK(f.features[k].key.ids[0] + 1 == moved(n.features[k].key.ids[0] + 1));  // model ids are 0-based
    CHECK(f.features[k].batch == n.features[k].batch);
    CHECK(std::memcmp(&f.features[k].weight, &n.features[k].weight, sizeof(double)) == 0);
  }
  CHECK(std::memcmp(&f.objective, &n.objective, sizeof(double)) == 0);
}

// An independent check of the data-parallel subproblem (CoCoA+ rounds over 4
// partitions) against the sequential single-store solver on the same rows,
// unpartitioned: both certify their duality gap to mslr.tolerance, so their
// objectives agree to twice that. At α⁰ the scores are exact (integer and
// half values), so both select the same first constraint.
TEST_CASE("MSLR over 4 partitions reaches the single-store solver's certified optimum", "[.mpi][mpi][mslr]") {
  TempDir dir("fgm-mpi-mslr");
  dir.write("in.txt", mixed_libsvm(400, 30, 5, 13));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4").code == 0);
  const double tolerance = 1e-6;
  const std::string args = "train solver=mslr mslr.r=4 mslr.max_iterations=1 mslr.tolerance=1e-6 mslr.q_max=1e6 ";
  REQUIRE(run(dir, args + "data.train=in.txt output.dir=single").code == 0);
  RunResult r = run_mpi(dir, 2, args + "data.train=store output.dir=parted");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const JsonValue single = parse_json(slurp(dir.file("single/run.json")), "run.json");
  const JsonValue parted = parse_json(slurp(dir.file("parted/run.json")), "run.json");
  const JsonValue& s = run_json_key(single, "iterations")->items().at(0);
  const JsonValue& p = run_json_key(parted, "iterations")->items().at(0);
  CHECK(s.find("converged")->boolean());
  CHECK(p.find("converged")->boolean());
  CHECK(p.find("relative_gap")->number() <= tolerance);
  // Each run's bounds bracket the common optimum: D ≤ min max ≤ P on both sides.
  const double ps = s.find("objective")->number(), pp = p.find("objective")->number();
  CHECK(p.find("dual")->number() <= ps * (1 + 1e-12));
  CHECK(s.find("dual")->number() <= pp * (1 + 1e-12));
  CHECK(pp == Approx(ps).epsilon(2 * tolerance));
  const Model ms = read_model(dir.file("single/model.fgm")), mp = read_model(dir.file("parted/model.fgm"));
  REQUIRE(ms.features.size() == mp.features.size());
  for (size_t k = 0; k < ms.features.size(); ++k) {
    CHECK(ms.features[k].key.ids[0] == mp.features[k].key.ids[0]);
    CHECK(mp.features[k].weight == Approx(ms.features[k].weight).epsilon(1e-2).margin(1e-3));
  }
}

TEST_CASE("MSLR on a partitioned store refuses what it does not support, naming the key", "[.mpi][mpi][mslr]") {
  TempDir dir("fgm-mpi-mslr");
  dir.write("in.txt", mixed_libsvm(200, 20, 4, 14));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 2").code == 0);
  for (auto [setting, key] : {std::pair{"features.transform=[\"maxabs\"]", "features.transform"},
                              std::pair{"data.truth=in.txt", "data.truth"}}) {
    INFO(setting);
    RunResult r = run_mpi(dir, 2, std::string("train solver=mslr data.train=store output.dir=out '") + setting + "'");
    CHECK(r.code == 2);
    CHECK(contains(r.err, key));
    CHECK_FALSE(std::filesystem::exists(dir.file("out/model.fgm")));
  }
  // Three labels: MSLR is binary.
  dir.write("three.txt", "1 1:1 2:1\n2 1:2 3:1\n3 2:1 3:2\n1 1:1\n2 2:2\n3 3:3\n");
  REQUIRE(run(dir, "ingest three.txt --out three --partitions 2").code == 0);
  RunResult r = run(dir, "train solver=mslr data.train=three output.dir=out3");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "binary models only"));
  CHECK_FALSE(std::filesystem::exists(dir.file("out3/model.fgm")));
}

namespace {

// path.csv without its seconds column (the last).
std::string csv_without_seconds(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out += line.substr(0, line.rfind(',')) + "\n";
  return out;
}

// `mpirun -np <np> fgm <args>` started in the background; once
// `<output_dir>/checkpoint.fgm` exists (a completed iteration saved), one
// rank is SIGKILLed. Returns the launcher's exit code (nonzero: killed).
int kill_after_first_checkpoint(const TempDir& dir, int np, const std::string& args, const std::string& output_dir) {
  for (const char* f : {"pid.txt", "rc.txt"}) std::filesystem::remove(dir.file(f));
  const std::string launch = "cd '" + dir.path.string() + "' && (" + kMpirun + "-np " + std::to_string(np) + " '" +
                             FGM_BINARY_PATH + "' " + args + " >out.txt 2>err.txt </dev/null & echo $! >pid.txt; "
                             "wait $!; echo $? >rc.txt) >/dev/null 2>&1 &";
  REQUIRE(std::system(launch.c_str()) == 0);
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  while (!std::filesystem::exists(dir.file(output_dir + "/checkpoint.fgm")) || !std::filesystem::exists(dir.file("pid.txt"))) {
    REQUIRE(seconds() < 120);
    REQUIRE_FALSE(std::filesystem::exists(dir.file("rc.txt")));  // ended before its first checkpoint
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::string children = dir.file("children.txt");
  std::system(("pgrep -P " + std::to_string(std::stol(slurp(dir.file("pid.txt")))) + " > '" + children + "'").c_str());
  std::istringstream pids(slurp(children));
  std::vector<long> rank_pids;
  for (long p; pids >> p;) rank_pids.push_back(p);
  REQUIRE(rank_pids.size() == size_t(np));
  ::kill(static_cast<pid_t>(rank_pids.back()), SIGKILL);
  while (!std::filesystem::exists(dir.file("rc.txt")) || slurp(dir.file("rc.txt")).empty()) {
    REQUIRE(seconds() < 180);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::stoi(slurp(dir.file("rc.txt")));
}

// The rank files of a partitioned run's checkpoint (engine/resume_checkpoint.h rank_checkpoint_file).
std::vector<std::filesystem::path> rank_files(const std::string& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind("checkpoint.rank-", 0) == 0) out.push_back(e.path());
  return out;
}

// A real checkpoint of a partitioned `fgm train solver=mslr` written by the fgm
// before rank files (cd6d380: the duals in hand-rolled mslr-duals.rank-<r>.iter-<t>
// files), killed after its first iteration: synth --kind sparse --rows 300
// --test-rows 100 --features 200 --planted-linear 6 --planted-cross 0
// --min-term-frequency 0.03 --nnz-per-row 15 --seed 3, ingested with
// --partitions 2, mpirun -np 2, mslr.r=3 mslr.subproblem=smoothing.
const std::string kEarlierCheckpoint = FGM_SOURCE_DIR "/tests/cli/fixtures/mslr-partitioned-earlier-checkpoint";

}  // namespace

TEST_CASE("MSLR path on a partitioned store: the same points byte for byte on 1, 2 and 4 ranks and 1 or 2 threads",
          "[.mpi][mpi][mslr]") {
  TempDir dir("fgm-mpi-mslr");
  dir.write("in.txt", mixed_libsvm(400, 30, 5, 15));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4 --tile-rows 32").code == 0);
  const std::string args = "path solver=mslr data.train=store mslr.r=3 mslr.max_iterations=6 'mslr.features=[3,5,9]' ";
  RunResult one = run(dir, args + "engine.threads=1 output.dir=o1");
  INFO(one.err);
  REQUIRE(one.code == 0);
  CHECK(contains(one.out, "points=3"));
  // The second point caps its constraint's new features at 5 − 3 (new_feature_limit, engine/mslr_trainer.cpp).
  CHECK(read_model(dir.file("o1/point-2.fgm")).features.size() == 5);
  CHECK(read_model(dir.file("o1/point-3.fgm")).features.size() == 9);
  const JsonValue path_json = parse_json(slurp(dir.file("o1/path.json")), "path.json");
  CHECK(run_json_key(path_json, "distributed")->find("partitions")->number() == 4);
  CHECK(run_json_key(path_json, "data")->find("partitions")->number() == 4);
  CHECK(rank_files(dir.file("o1")).empty());  // removed with the checkpoint once the outputs are written
  CHECK_FALSE(std::filesystem::exists(dir.file("o1/checkpoint.fgm")));
  for (auto [np, threads] : {std::pair{1, 2}, std::pair{2, 2}, std::pair{4, 1}}) {
    INFO("np " << np << " threads " << threads);
    const std::string out = "o" + std::to_string(np) + "t" + std::to_string(threads);
    RunResult r = run_mpi(dir, np, args + "engine.threads=" + std::to_string(threads) + " output.dir=" + out);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(contains(r.out, "ranks=" + std::to_string(np)));
    for (int k = 1; k <= 3; ++k) {
      const std::string point = "/point-" + std::to_string(k) + ".fgm";
      CHECK(model_bytes(dir.file(out + point)) == model_bytes(dir.file("o1" + point)));
    }
    CHECK(csv_without_seconds(slurp(dir.file(out + "/path.csv"))) == csv_without_seconds(slurp(dir.file("o1/path.csv"))));
    const JsonValue j = parse_json(slurp(dir.file(out + "/path.json")), "path.json");
    CHECK(run_json_key(j, "distributed")->find("ranks")->number() == np);
  }
}

// An independent check of the distributed path: the single-store MSLR path on
// the unpartitioned rows (the sequential subproblem solver) reaches the same
// points. Both certify each subproblem's duality gap to mslr.tolerance, so
// the objectives agree to twice that and the constraints (chosen from c_j²
// of nearly the same α) pick the same features.
TEST_CASE("MSLR path over 4 partitions matches the single-store path on the unpartitioned data", "[.mpi][mpi][mslr]") {
  TempDir dir("fgm-mpi-mslr");
  dir.write("in.txt", mixed_libsvm(400, 30, 5, 16));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4").code == 0);
  const double tolerance = 1e-6;
  const std::string args = "path solver=mslr mslr.r=3 mslr.max_iterations=4 'mslr.features=[3,6,8]' "
                           "mslr.tolerance=1e-6 mslr.q_max=1e6 ";
  RunResult single_run = run(dir, args + "data.train=in.txt output.dir=single");
  INFO(single_run.err);
  REQUIRE(single_run.code == 0);
  RunResult r = run_mpi(dir, 2, args + "data.train=store output.dir=parted");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string single_csv = slurp(dir.file("single/path.csv")), parted_csv = slurp(dir.file("parted/path.csv"));
  std::istringstream s_lines(single_csv), p_lines(parted_csv);
  std::string s_line, p_line;
  std::getline(s_lines, s_line);
  std::getline(p_lines, p_line);
  int points = 0;
  while (std::getline(s_lines, s_line)) {
    REQUIRE(std::getline(p_lines, p_line));
    ++points;
    auto objective = [](const std::string& line) {  // point,selected,train_objective,...
      const size_t a = line.find(',', line.find(',') + 1) + 1;
      return std::stod(line.substr(a, line.find(',', a) - a));
    };
    CHECK(objective(p_line) == Approx(objective(s_line)).epsilon(2 * tolerance));
    const std::string point = "/point-" + std::to_string(points) + ".fgm";
    const Model ms = read_model(dir.file("single" + point)), mp = read_model(dir.file("parted" + point));
    REQUIRE(ms.features.size() == mp.features.size());
    for (size_t k = 0; k < ms.features.size(); ++k) {
      CHECK(ms.features[k].key.ids[0] == mp.features[k].key.ids[0]);
      CHECK(mp.features[k].weight == Approx(ms.features[k].weight).epsilon(1e-2).margin(1e-3));
    }
  }
  CHECK(points == 3);
  CHECK_FALSE(std::getline(p_lines, p_line));
}

TEST_CASE("a distributed MSLR run killed mid-run resumes on the same rank count to the uninterrupted model",
          "[.mpi][mpi][mslr]") {
  TempDir dir("fgm-mpi-mslr");
  dir.write("in.txt", mixed_libsvm(300, 40, 6, 17));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4").code == 0);
  // Iteration 1 is quick (α⁰ is nearly optimal); the four after it leave the kill time to land
  // with the paper's smoothing subproblem (the Newton one can finish the run first).
  const std::string common =
      "solver=mslr data.train=store mslr.r=2 mslr.max_iterations=5 mslr.tolerance=1e-2 mslr.subproblem=smoothing ";
  const std::string train = "train " + common + "mslr.eps_outer=0 ";
  const std::string path = "path " + common + "'mslr.features=[2,6,10]' ";

  SECTION("train") {
    REQUIRE(run_mpi(dir, 2, train + "output.dir=whole").code == 0);
    REQUIRE(kill_after_first_checkpoint(dir, 2, train + "output.dir=o", "o") != 0);
    REQUIRE_FALSE(std::filesystem::exists(dir.file("o/model.fgm")));
    REQUIRE(std::filesystem::exists(dir.file("o/checkpoint.fgm")));
    // Every rank's duals of the checkpoint's iteration are next to it.
    const std::vector<std::filesystem::path> slices = rank_files(dir.file("o"));
    REQUIRE(slices.size() >= 2);
    const std::string checkpoint = dir.file("o/checkpoint.fgm");
    MemoryBudget budget(uint64_t{1} << 30);
    const ResumeCheckpoint kept = read_checkpoint(checkpoint, budget);
    REQUIRE(kept.solver);
    CHECK(kept.solver->rank_files_step >= 1);
    CHECK(std::filesystem::exists(rank_checkpoint_file(dir.file("o"), 1, kept.solver->rank_files_step)));

    // Another rank count (4 ranks, or one process) is refused; the checkpoint stays.
    RunResult other = run_mpi(dir, 4, train + "output.dir=o");
    CHECK(other.code == 2);
    CHECK(contains(other.err, "written by a run on 2 rank(s), this run has 4"));
    other = run(dir, train + "output.dir=o");
    CHECK(other.code == 2);
    CHECK(contains(other.err, "this run has 1"));

    // A damaged slice is refused naming its file; the run has written nothing.
    std::map<std::filesystem::path, std::string> saved;
    for (const auto& f : slices) {
      saved[f] = slurp(f.string());
      std::string bytes = saved[f];
      bytes[bytes.size() / 2] ^= 0x10;
      std::ofstream(f, std::ios::binary) << bytes;
    }
    RunResult damaged = run_mpi(dir, 2, train + "output.dir=o");
    CHECK(damaged.code != 0);
    CHECK(contains(damaged.err, "checkpoint.rank-"));
    CHECK(contains(damaged.err, "checksum"));
    CHECK_FALSE(std::filesystem::exists(dir.file("o/model.fgm")));
    // One cut short, and one missing.
    for (const auto& [f, bytes] : saved) std::ofstream(f, std::ios::binary) << bytes.substr(0, bytes.size() - 9);
    damaged = run_mpi(dir, 2, train + "output.dir=o");
    CHECK(damaged.code != 0);
    CHECK(contains(damaged.err, "checkpoint.rank-"));
    CHECK(contains(damaged.err, "the header says"));
    for (const auto& [f, bytes] : saved) std::ofstream(f, std::ios::binary) << bytes;
    const std::string rank1 = rank_checkpoint_file(dir.file("o"), 1, kept.solver->rank_files_step);
    std::filesystem::rename(rank1, rank1 + ".away");
    damaged = run_mpi(dir, 2, train + "output.dir=o");
    CHECK(damaged.code != 0);
    INFO(damaged.err);
    CHECK(contains(damaged.err, "o/" + std::filesystem::path(rank1).filename().string()));
    CHECK(contains(damaged.err, "missing"));
    std::filesystem::rename(rank1 + ".away", rank1);
    CHECK_FALSE(std::filesystem::exists(dir.file("o/model.fgm")));

    // An earlier fgm's partitioned checkpoint (its state as that fgm wrote it, under this run's identity; its
    // mslr-duals files beside it) is refused naming the file and --restart; --restart removes its files.
    const ResumeCheckpoint earlier = read_checkpoint(kEarlierCheckpoint + "/checkpoint.fgm", budget);
    REQUIRE(earlier.solver);
    REQUIRE(earlier.solver->rank_files_step == 0);
    const std::string current = slurp(checkpoint);
    write_checkpoint(checkpoint, kept.identity, nullptr, nullptr, budget, &*earlier.solver);
    for (const auto& e : std::filesystem::directory_iterator(kEarlierCheckpoint))
      if (e.path().filename().string().rfind("mslr-duals.rank-", 0) == 0)
        std::filesystem::copy_file(e.path(), dir.path / "o" / e.path().filename());
    RunResult old = run_mpi(dir, 2, train + "output.dir=o");
    CHECK(old.code == 5);
    INFO(old.err);
    CHECK(contains(old.err, "o/checkpoint.fgm"));
    CHECK(contains(old.err, "an earlier fgm"));
    CHECK(contains(old.err, "--restart"));
    CHECK_FALSE(std::filesystem::exists(dir.file("o/model.fgm")));
    std::ofstream(checkpoint, std::ios::binary) << current;

    RunResult resumed = run_mpi(dir, 2, train + "output.dir=o engine.threads=2");
    INFO(resumed.err);
    REQUIRE(resumed.code == 0);
    CHECK(contains(resumed.err, "resuming from iteration "));
    CHECK(model_bytes(dir.file("o/model.fgm")) == model_bytes(dir.file("whole/model.fgm")));
    const JsonValue run_json = parse_json(slurp(dir.file("o/run.json")), "run.json");
    CHECK(run_json_key(run_json, "iterations_restored")->number() >= 1);
    CHECK(run_json_key(run_json, "iterations")->items().size() ==
          parse_json(slurp(dir.file("whole/run.json")), "run.json").find("iterations")->items().size());
    CHECK_FALSE(std::filesystem::exists(dir.file("o/checkpoint.fgm")));
    CHECK(rank_files(dir.file("o")).empty());
    CHECK_FALSE(std::filesystem::exists(dir.file("o/mslr-duals.rank-0.iter-1")));  // an earlier fgm's, removed too
  }
  SECTION("path") {
    REQUIRE(run_mpi(dir, 4, path + "output.dir=whole").code == 0);
    REQUIRE(kill_after_first_checkpoint(dir, 4, path + "output.dir=o", "o") != 0);
    REQUIRE_FALSE(std::filesystem::exists(dir.file("o/path.csv")));
    RunResult resumed = run_mpi(dir, 4, path + "output.dir=o");
    INFO(resumed.err);
    REQUIRE(resumed.code == 0);
    CHECK(contains(resumed.err, "resuming from iteration "));
    for (int k = 1; k <= 3; ++k) {
      const std::string point = "/point-" + std::to_string(k) + ".fgm";
      CHECK(model_bytes(dir.file("o" + point)) == model_bytes(dir.file("whole" + point)));
    }
    CHECK(csv_without_seconds(slurp(dir.file("o/path.csv"))) == csv_without_seconds(slurp(dir.file("whole/path.csv"))));
    CHECK(rank_files(dir.file("o")).empty());
  }
}

TEST_CASE("a distributed MSLR run on a 1- and a 2-partition store killed mid-run resumes to the uninterrupted model",
          "[.mpi][mpi][mslr]") {
  TempDir dir("fgm-mpi-mslr");
  dir.write("in.txt", mixed_libsvm(300, 40, 6, 17));
  // As the test above: the smoothing subproblem leaves the kill time to land after iteration 1.
  const std::string common = "train solver=mslr mslr.r=2 mslr.max_iterations=5 mslr.tolerance=1e-2 "
                             "mslr.subproblem=smoothing mslr.eps_outer=0 ";
  for (int partitions : {1, 2}) {
    INFO(partitions << " partition(s), as many ranks");
    const std::string p = std::to_string(partitions);
    REQUIRE(run(dir, "ingest in.txt --out store" + p + " --partitions " + p).code == 0);
    const std::string train = common + "data.train=store" + p + " ";
    REQUIRE(run_mpi(dir, partitions, train + "output.dir=whole" + p).code == 0);
    REQUIRE(kill_after_first_checkpoint(dir, partitions, train + "output.dir=o" + p, "o" + p) != 0);
    REQUIRE_FALSE(std::filesystem::exists(dir.file("o" + p + "/model.fgm")));
    CHECK(rank_files(dir.file("o" + p)).size() >= size_t(partitions));
    RunResult resumed = run_mpi(dir, partitions, train + "output.dir=o" + p);
    INFO(resumed.err);
    REQUIRE(resumed.code == 0);
    CHECK(contains(resumed.err, "resuming from iteration "));
    CHECK(model_bytes(dir.file("o" + p + "/model.fgm")) == model_bytes(dir.file("whole" + p + "/model.fgm")));
    CHECK_FALSE(std::filesystem::exists(dir.file("o" + p + "/checkpoint.fgm")));
    CHECK(rank_files(dir.file("o" + p)).empty());
  }
}

}  // namespace fgm::test
