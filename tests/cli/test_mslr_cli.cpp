// solver = "mslr" through the fgm binary: train, predict, inspect, report and
// path on sparse synthetic data, and the configuration errors of the mslr
// section (another solver's keys, out-of-range values, keys the command
// would ignore), which leave no output.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include "core/memory_budget.h"
#include "engine/mslr_trainer.h"
#include "engine/resume_checkpoint.h"
#include "io/model_file.h"
#include "tests/cli/cli_test_util.h"

extern char** environ;

using namespace fgm::test;

namespace {

const char* kData =
    "synth --kind sparse --out data --rows 1500 --test-rows 800 --features 600 --planted-linear 6 "
    "--planted-cross 0 --min-term-frequency 0.03 --nnz-per-row 15 --seed 3";

}  // namespace

TEST_CASE("fgm train with solver = mslr writes a model predict, inspect and report read", "[cli][mslr]") {
  TempDir dir("mslr-cli");
  REQUIRE(run(dir, kData).code == 0);
  RunResult r = run(dir, "train solver=mslr data.train=data/train.svm data.test=data/test.svm "
                         "data.truth=data/truth.txt mslr.r=3 mslr.max_iterations=3 engine.threads=2 output.dir=out");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "selected=9"));
  CHECK(contains(r.out, "accuracy="));
  const std::string run_json = slurp(dir.file("out/run.json"));
  CHECK(contains(run_json, "\"solver\": \"mslr\""));
  CHECK(contains(run_json, "\"relative_gap\""));
  CHECK(contains(run_json, "\"mu\""));
  CHECK(contains(run_json, "\"stop_reason\": \"max_iterations\""));
  RunResult inspect = run(dir, "inspect out/model.fgm");
  REQUIRE(inspect.code == 0);
  CHECK(contains(inspect.out, "\"solver\": \"mslr\""));
  CHECK(contains(inspect.out, "\"has_bias\": false"));
  RunResult predict = run(dir, "predict --model out/model.fgm data/test.svm");
  REQUIRE(predict.code == 0);
  CHECK(contains(predict.out, "accuracy="));
  // The test accuracy of train and of predict agree (same model, same file).
  const auto acc = [](const std::string& s) { return std::stod(s.substr(s.find("accuracy=") + 9)); };
  CHECK(acc(r.out) == Approx(acc(predict.out)).margin(1e-4));  // train prints 4 digits
  // The run wrote its report (output.report defaults to true), with the MSLR
  // run's figures: the training section, its selected-feature count and objective.
  REQUIRE(std::filesystem::exists(dir.file("out/report.html")));
  const std::string page = slurp(dir.file("out/report.html"));
  CHECK(contains(page, "id=\"train\""));
  CHECK(contains(page, "<svg"));
  CHECK(contains(page, "mslr"));
  const std::string objective = r.out.substr(r.out.find("objective=") + 10, 5);  // 6 significant digits printed
  CHECK(contains(page, objective));
  std::filesystem::remove(dir.file("out/report.html"));
  CHECK(run(dir, "report out").code == 0);
  CHECK(std::filesystem::exists(dir.file("out/report.html")));
}

TEST_CASE("fgm path with solver = mslr writes a model per count of mslr.features", "[cli][mslr]") {
  TempDir dir("mslr-path");
  REQUIRE(run(dir, kData).code == 0);
  RunResult r = run(dir, "path solver=mslr data.train=data/train.svm data.test=data/test.svm mslr.r=3 "
                         "'mslr.features=[2,5,7]' output.dir=out");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "points=3"));
  const std::string csv = slurp(dir.file("out/path.csv"));
  CHECK(contains(csv, "\n1,2,"));
  CHECK(contains(csv, "\n2,5,"));
  CHECK(contains(csv, "\n3,7,"));
  for (int k = 1; k <= 3; ++k) CHECK(std::filesystem::exists(dir.file("out/point-" + std::to_string(k) + ".fgm")));
  CHECK(contains(slurp(dir.file("out/path.json")), "\"solver\": \"mslr\""));
  // report.html: the path section with the points of path.csv (the last
  // point's test accuracy, its 7 features) and the objective chart.
  REQUIRE(std::filesystem::exists(dir.file("out/report.html")));
  const std::string page = slurp(dir.file("out/report.html"));
  CHECK(contains(page, "id=\"path\""));
  CHECK(contains(page, "Training objective against selected features"));
  CHECK(contains(page, "point 3 (the last point)"));
  const std::string last_row = csv.substr(csv.find("\n3,7,") + 1);
  const std::string accuracy = last_row.substr(0, last_row.find('\n'));
  std::vector<std::string> cells;
  for (size_t at = 0, next; at <= accuracy.size(); at = next + 1) {
    next = accuracy.find(',', at);
    if (next == std::string::npos) next = accuracy.size();
    cells.push_back(accuracy.substr(at, next - at));
  }
  REQUIRE(cells.size() == 7);  // point,selected,train_objective,relative_gap,test_accuracy,test_auc,seconds
  CHECK(contains(page, cells[4].substr(0, 5)));
  // `fgm report` rebuilds the same page from the files.
  std::filesystem::remove(dir.file("out/report.html"));
  REQUIRE(run(dir, "report out").code == 0);
  CHECK(contains(slurp(dir.file("out/report.html")), "Training objective against selected features"));
}

// Each cutting-plane iteration adds at most mslr.r features, so the last
// count needs ⌈count/r⌉ iterations: the default mslr.max_iterations is
// raised, a smaller one the user set is refused before the run (naming the
// key and where it was set), and a count past 64·r is refused naming mslr.r.
TEST_CASE("fgm path with solver = mslr never returns fewer points for want of iterations", "[cli][mslr]") {
  TempDir dir("mslr-path-iterations");
  REQUIRE(run(dir, kData).code == 0);
  const std::string base = "path solver=mslr data.train=data/train.svm data.test=data/test.svm output.dir=out ";
  // [5, 12] at r = 1 needs 12 iterations, more than the default 10 (the run
  // converges at 14 features: every count below is reachable).
  RunResult raised = run(dir, base + "mslr.r=1 'mslr.features=[5,12]'");
  INFO(raised.err);
  REQUIRE(raised.code == 0);
  CHECK(contains(raised.out, "points=2"));
  CHECK(contains(raised.err, "mslr.max_iterations raised from 10"));
  const std::string csv = slurp(dir.file("out/path.csv"));
  CHECK(contains(csv, "\n1,5,"));
  CHECK(contains(csv, "\n2,12,"));
  const std::string json = slurp(dir.file("out/path.json"));
  CHECK(contains(json, "\"stop_reason\": \"last_checkpoint\""));
  CHECK_FALSE(contains(json, "path_points_missing"));
  std::filesystem::remove_all(dir.file("out"));
  struct Refusal {
    std::string args, key, remedy;
  };
  for (const Refusal& c : std::vector<Refusal>{
           {"mslr.r=1 mslr.max_iterations=10 'mslr.features=[5,12]'", "command line: mslr.max_iterations",
            "set mslr.max_iterations to at least 12"},
           {"mslr.r=1 'mslr.features=[100]'", "mslr.r", "raise mslr.r to at least 2"},
           {"mslr.r=1 mslr.max_iterations=64 'mslr.features=[100]'", "mslr.max_iterations",
            "raise mslr.r to at least 2"},
       }) {
    RunResult r = run(dir, base + c.args);
    INFO(c.args << "\n" << r.err);
    CHECK(r.code == 2);
    CHECK(contains(r.err, c.key));
    CHECK(contains(r.err, c.remedy));
    CHECK_FALSE(std::filesystem::exists(dir.file("out")));
  }
}

TEST_CASE("solver = mslr: bad and foreign keys are errors naming the key, with no output", "[cli][mslr]") {
  TempDir dir("mslr-keys");
  REQUIRE(run(dir, kData).code == 0);
  const std::string base = "train data.train=data/train.svm output.dir=out ";
  struct Case {
    std::string args, key;
  };
  for (const Case& c : std::vector<Case>{
           {"solver=mslr fgm.B=5", "fgm.B"},
           {"solver=mslr apg.eps_inner=0.1", "apg.eps_inner"},
           {"solver=fgm mslr.C=3", "mslr.C"},
           {"solver=mslr mslr.C=0", "mslr.C"},
           {"solver=mslr mslr.r=0", "mslr.r"},
           {"solver=mslr mslr.max_iterations=65", "mslr.max_iterations"},
           {"solver=mslr mslr.q_factor=1", "mslr.q_factor"},
           {"solver=mslr mslr.order=backwards", "mslr.order"},
           {"solver=mslr mslr.subproblem=dual", "mslr.subproblem"},
           {"solver=mslr mslr.newton_max_iterations=0", "mslr.newton_max_iterations"},
           {"solver=mslr 'mslr.features=[3]'", "mslr.features"},
           {"solver=mslr features.kind=poly2", "features.kind"},
           {"solver=mslr mslr.rr=3", "mslr.rr"},
       }) {
    RunResult r = run(dir, base + c.args);
    INFO(c.args << "\n" << r.err);
    CHECK(r.code == 2);
    CHECK(contains(r.err, c.key));
    CHECK_FALSE(std::filesystem::exists(dir.file("out")));
  }
  RunResult path = run(dir, "path solver=mslr data.train=data/train.svm output.dir=out");
  CHECK(path.code == 2);
  CHECK(contains(path.err, "mslr.features"));
  RunResult both = run(dir, "path solver=mslr data.train=data/train.svm output.dir=out 'mslr.features=[3]' "
                            "mslr.max_features=5");
  CHECK(both.code == 2);
  CHECK(contains(both.err, "mslr.max_features"));
  CHECK_FALSE(std::filesystem::exists(dir.file("out/path.csv")));
}

// Crash safety: `fgm train` / `fgm path` with solver = mslr killed with
// SIGKILL (the injected failure) and run again resume from the last completed
// cutting-plane iteration and end with the uninterrupted run's model.
namespace {

pid_t spawn_fgm(const TempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv_s = {FGM_BINARY_PATH};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const std::string cwd = std::filesystem::current_path().string();
  std::filesystem::current_path(dir.path);
  const int rc = posix_spawn(&pid, FGM_BINARY_PATH, &actions, nullptr, argv.data(), environ);
  std::filesystem::current_path(cwd);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(rc == 0);
  return pid;
}

// SIGKILLs `fgm <args>` once `checkpoint` has been written `writes` times
// (its modification time changed); false if the run ended first.
bool kill_after_checkpoints(const TempDir& dir, const std::vector<std::string>& args,
                            const std::filesystem::path& checkpoint, int writes) {
  const pid_t pid = spawn_fgm(dir, args);
  std::filesystem::file_time_type last{};
  int seen = 0;
  int status = 0;
  for (int i = 0; i < 600000 && seen < writes; ++i) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return false;  // finished before
    std::error_code ec;
    const auto t = std::filesystem::last_write_time(checkpoint, ec);
    if (!ec && t != last) {
      last = t;
      ++seen;
    }
    if (seen < writes) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return WIFSIGNALED(status);
}

// The arguments of a command line (no shell: the quotes are dropped).
std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string a; in >> a;) {
    a.erase(std::remove(a.begin(), a.end(), '\''), a.end());
    out.push_back(a);
  }
  return out;
}

// The model without its creation time and its config text (which names
// output.dir: the two runs write different directories).
std::string model_without_time(const std::string& path) {
  fgm::Model m = fgm::read_model(path);
  m.created_unix = 0;
  m.config.clear();
  return fgm::encode_model(m);
}

// run.json / path.json / path.csv lines without wall-clock, RSS and resume bookkeeping.
std::string without_timings(const std::string& text) {
  std::istringstream in(text);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (contains(line, "seconds") || contains(line, "peak_rss") || contains(line, "budget_peak") ||
        contains(line, "iterations_restored") || contains(line, "ingest") || contains(line, "output.dir"))
      continue;
    out += line + "\n";
  }
  return out;
}

std::string csv_without_seconds(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out += line.substr(0, line.rfind(',')) + "\n";
  return out;
}

// A real checkpoint of `fgm train solver=mslr` written by fgm before MSLR's
// state moved into a FlatBuffer (its hand-rolled encode_mslr_state, tag
// "MSLRSTATE1"), killed after its first iteration: synth --kind sparse --rows
// 300 --test-rows 100 --features 200 --planted-linear 6 --planted-cross 0
// --min-term-frequency 0.03 --nnz-per-row 15 --seed 3, mslr.r=3.
const char* kHandRolledCheckpoint = FGM_SOURCE_DIR "/tests/cli/fixtures/mslr-hand-rolled-checkpoint.fgm";
// A real checkpoint of the fgm before partitioned runs' rank files (main at
// 5b35698, whose checkpoint format is cd6d380's: the MSLR state already a
// FlatBuffer, no rank_files_step), killed after a completed iteration of
// this file's `train` below (kData, ingested, mslr.r=3 mslr.max_iterations=5).
const char* kEarlierCheckpoint = FGM_SOURCE_DIR "/tests/cli/fixtures/mslr-single-store-earlier-checkpoint.fgm";

}  // namespace

TEST_CASE("solver = mslr: a run killed after a completed iteration resumes to the uninterrupted model",
          "[cli][mslr][resume]") {
  TempDir dir("mslr-resume");
  REQUIRE(run(dir, kData).code == 0);
  REQUIRE(run(dir, "ingest data/train.svm --out store").code == 0);
  const std::string common = "solver=mslr data.train=store data.test=data/test.svm mslr.r=3 mslr.max_iterations=5 ";
  const std::string train = "train " + common;
  REQUIRE(run(dir, train + "output.dir=whole").code == 0);
  const std::string path = "path " + common + "'mslr.features=[2,6,11]' ";
  REQUIRE(run(dir, path + "output.dir=whole-path").code == 0);

  for (int writes : {1, 2}) {
    INFO("killed after checkpoint write " << writes);
    SECTION("train, killed after " + std::to_string(writes) + " iterations") {
      const std::filesystem::path checkpoint = dir.path / "cut" / "checkpoint.fgm";
      REQUIRE(kill_after_checkpoints(dir, words(train + "output.dir=cut"), checkpoint, writes));
      REQUIRE(std::filesystem::exists(checkpoint));
      REQUIRE_FALSE(std::filesystem::exists(dir.path / "cut" / "model.fgm"));
      const RunResult r = run(dir, train + "output.dir=cut");
      INFO(r.err);
      REQUIRE(r.code == 0);
      // At least `writes` iterations were saved (polling may see two writes as one).
      CHECK(contains(r.err, "resuming from iteration "));
      CHECK(contains(r.err, " of at most 5 (mslr.max_iterations)"));
      CHECK_FALSE(std::filesystem::exists(checkpoint));
      CHECK(model_without_time(dir.file("cut/model.fgm")) == model_without_time(dir.file("whole/model.fgm")));
      const std::string resumed = slurp(dir.file("cut/run.json"));
      CHECK(contains(resumed, "\"iterations_restored\": "));
      CHECK_FALSE(contains(resumed, "\"iterations_restored\": 0"));
      CHECK(without_timings(resumed) == without_timings(slurp(dir.file("whole/run.json"))));
    }
    SECTION("path, killed after " + std::to_string(writes) + " iterations") {
      const std::filesystem::path checkpoint = dir.path / "cut-path" / "checkpoint.fgm";
      REQUIRE(kill_after_checkpoints(dir, words(path + "output.dir=cut-path"), checkpoint, writes));
      const RunResult r = run(dir, path + "output.dir=cut-path");
      INFO(r.err);
      REQUIRE(r.code == 0);
      CHECK(contains(r.err, "resuming from iteration "));
      for (int k = 1; k <= 3; ++k) {
        const std::string point = "/point-" + std::to_string(k) + ".fgm";
        CHECK(model_without_time(dir.file("cut-path" + point)) == model_without_time(dir.file("whole-path" + point)));
      }
      CHECK(csv_without_seconds(slurp(dir.file("cut-path/path.csv"))) ==
            csv_without_seconds(slurp(dir.file("whole-path/path.csv"))));
      CHECK(without_timings(slurp(dir.file("cut-path/path.json"))) ==
            without_timings(slurp(dir.file("whole-path/path.json"))));
      CHECK(std::filesystem::exists(dir.file("cut-path/report.html")));
    }
  }
  SECTION("a checkpoint in the hand-rolled MSLR format of an earlier fgm is refused, naming the file and --restart") {
    const std::filesystem::path checkpoint = dir.path / "cut" / "checkpoint.fgm";
    REQUIRE(kill_after_checkpoints(dir, words(train + "output.dir=cut"), checkpoint, 1));
    // This run's checkpoint (identity, checksummed frame) holding the old file's state as that fgm wrote it.
    fgm::MemoryBudget budget(uint64_t{1} << 30);
    const fgm::ResumeCheckpoint saved = fgm::read_checkpoint(checkpoint.string(), budget);
    const fgm::ResumeCheckpoint old = fgm::read_checkpoint(kHandRolledCheckpoint, budget);
    REQUIRE(old.solver);
    REQUIRE(old.solver->bytes.find("MSLRSTATE1") == 8);
    const fgm::SolverState old_state = *old.solver;
    fgm::write_checkpoint(checkpoint.string(), saved.identity, nullptr, nullptr, budget, &old_state);
    const RunResult r = run(dir, train + "output.dir=cut");
    INFO(r.err);
    CHECK(r.code == 5);
    CHECK(contains(r.err, "cut/checkpoint.fgm"));
    CHECK(contains(r.err, "hand-rolled format of an earlier fgm"));
    CHECK(contains(r.err, "--restart"));
    CHECK_FALSE(std::filesystem::exists(dir.path / "cut" / "model.fgm"));
    // The old file itself, and fgm path's old framing (the state behind its length, then the points).
    CHECK_THROWS_WITH(fgm::decode_mslr_state(old.solver->bytes, kHandRolledCheckpoint),
                      Catch::Contains(kHandRolledCheckpoint) && Catch::Contains("hand-rolled format"));
    std::string framed(8, '\0');
    const uint64_t length = old_state.bytes.size();
    std::memcpy(framed.data(), &length, 8);
    CHECK_THROWS_WITH(fgm::decode_mslr_state(framed + old_state.bytes, "p.fgm"),
                      Catch::Contains("p.fgm") && Catch::Contains("hand-rolled format of an earlier fgm"));
    const RunResult restarted = run(dir, train + "output.dir=cut --restart");
    INFO(restarted.err);
    REQUIRE(restarted.code == 0);
    CHECK(model_without_time(dir.file("cut/model.fgm")) == model_without_time(dir.file("whole/model.fgm")));
  }
  SECTION("a single-store checkpoint of the fgm before rank files still resumes to the uninterrupted model") {
    const std::filesystem::path checkpoint = dir.path / "cut" / "checkpoint.fgm";
    const std::filesystem::path again = dir.path / "again" / "checkpoint.fgm";
    REQUIRE(kill_after_checkpoints(dir, words(train + "output.dir=cut"), checkpoint, 1));
    REQUIRE(kill_after_checkpoints(dir, words(train + "output.dir=again"), again, 1));
    // Its state under this run's identity (the store checksum covers the input's path, and the engine
    // version may have moved on since). The fixture's iterations were solved by the fgm of its day, whose
    // subproblem solves stopped elsewhere (within their certified gaps), so today's uninterrupted run
    // takes another path: the reference is the run resumed from the fixture's state without interruption,
    // which a second resume, killed after one more iteration and resumed from today's checkpoint, must
    // reach bit for bit (nothing of the decoded state is lost).
    fgm::MemoryBudget budget(uint64_t{1} << 30);
    const fgm::ResumeCheckpoint saved = fgm::read_checkpoint(checkpoint.string(), budget);
    const fgm::ResumeCheckpoint earlier = fgm::read_checkpoint(kEarlierCheckpoint, budget);
    REQUIRE(earlier.solver);
    CHECK(earlier.solver->rank_files_step == 0);
    fgm::write_checkpoint(checkpoint.string(), saved.identity, nullptr, nullptr, budget, &*earlier.solver);
    fgm::write_checkpoint(again.string(), saved.identity, nullptr, nullptr, budget, &*earlier.solver);
    const RunResult r = run(dir, train + "output.dir=cut");
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(contains(r.err, "resuming from iteration 3 "));
    REQUIRE(kill_after_checkpoints(dir, words(train + "output.dir=again"), again, 2));
    const RunResult finished = run(dir, train + "output.dir=again");
    INFO(finished.err);
    REQUIRE(finished.code == 0);
    CHECK(contains(finished.err, "resuming from iteration 4 "));
    CHECK(model_without_time(dir.file("again/model.fgm")) == model_without_time(dir.file("cut/model.fgm")));
  }
  SECTION("a damaged checkpoint (a flipped byte, cut short) is refused naming it, with no output") {
    const std::filesystem::path checkpoint = dir.path / "cut" / "checkpoint.fgm";
    REQUIRE(kill_after_checkpoints(dir, words(train + "output.dir=cut"), checkpoint, 1));
    const std::string bytes = slurp(checkpoint.string());
    std::string flipped = bytes;
    flipped[bytes.size() - 40] ^= 0x01;  // inside the MSLR state's FlatBuffer
    for (const std::string& damaged : {flipped, bytes.substr(0, bytes.size() / 2)}) {
      std::ofstream(checkpoint, std::ios::binary) << damaged;
      const RunResult r = run(dir, train + "output.dir=cut");
      INFO(r.err);
      CHECK(r.code == 5);
      CHECK(contains(r.err, "cut/checkpoint.fgm"));
      CHECK(contains(r.err, damaged.size() == bytes.size() ? "checksum mismatch" : "the header says"));
      CHECK(contains(r.err, "--restart"));
      CHECK_FALSE(std::filesystem::exists(dir.path / "cut" / "model.fgm"));
      CHECK_FALSE(std::filesystem::exists(dir.path / "cut" / "run.json"));
    }
  }
  SECTION("another mslr setting: the checkpoint is refused naming the key") {
    const std::filesystem::path checkpoint = dir.path / "cut" / "checkpoint.fgm";
    REQUIRE(kill_after_checkpoints(dir, words(train + "output.dir=cut"), checkpoint, 1));
    const RunResult r = run(dir, train + "output.dir=cut mslr.C=3");
    CHECK(r.code == 2);
    CHECK(contains(r.err, "mslr.C: checkpoint"));
    REQUIRE(run(dir, train + "output.dir=cut mslr.C=3 --restart").code == 0);
  }
}
