// The `fgm` binary against a store that changes under it, ingests killed at
// random points, concurrent writers of one output and concurrent runs sharing
// engine.cache_dir. Every run must end in a clean exit (a code and a message
// naming the file) or the unchanged result: never a signal, never a wrong model.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/memory_budget.h"
#include "io/shard_store.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using fgm::test::TempDir;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A running `fgm` with stderr on a pipe (read line by line) and stdout in a file.
struct Child {
  pid_t pid = -1;
  int err_fd = -1;
  std::string err;
  int status = 0;
  long max_rss_kb = 0;

  Child(const fs::path& cwd, const std::vector<std::string>& args) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      if (::chdir(cwd.c_str()) != 0) ::_exit(127);
      ::dup2(fds[1], 2);
      int out = ::open("child-stdout.txt", O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (out >= 0) ::dup2(out, 1);
      int in = ::open("/dev/null", O_RDONLY);
      if (in >= 0) ::dup2(in, 0);
      ::close(fds[0]);
      std::vector<char*> argv;
      std::string binary = FGM_BINARY_PATH;
      argv.push_back(binary.data());
      std::vector<std::string> copy = args;
      for (auto& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(binary.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    err_fd = fds[0];
  }
  ~Child() {
    if (err_fd >= 0) ::close(err_fd);
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  // Reads stderr until `text` has appeared (true) or the pipe closed (false).
  bool read_until(const std::string& text) {
    char buf[4096];
    while (!contains(err, text)) {
      ssize_t n = ::read(err_fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      err.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  void finish() {
    read_until("\x01never\x01");
    struct rusage usage {};
    ::wait4(pid, &status, 0, &usage);
    max_rss_kb = usage.ru_maxrss;
    pid = -1;
  }
  bool signalled() const { return WIFSIGNALED(status); }
  int code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
};

int run_fgm(const fs::path& cwd, const std::vector<std::string>& args, std::string* err = nullptr) {
  Child c(cwd, args);
  c.finish();
  if (err) *err = c.err;
  return c.signalled() ? -1 : c.code();
}

// Deterministic LIBSVM text: small-integer values, a planted linear rule.
std::string make_text(uint64_t rows, uint64_t features, int per_row, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> feature(1, features);
  std::uniform_int_distribution<int> value(1, 3);
  std::string text;
  for (uint64_t r = 0; r < rows; ++r) {
    std::vector<uint64_t> ids;
    for (int k = 0; k < per_row; ++k) ids.push_back(feature(rng));
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    std::string line;
    int score = 0;
    for (uint64_t id : ids) {
      int v = value(rng);
      if (id % 7 == 1) score += v;
      if (id % 7 == 2) score -= v;
      line += " " + std::to_string(id) + ":" + std::to_string(v);
    }
    text += (score >= 0 ? "+1" : "-1") + line + "\n";
  }
  return text;
}

std::vector<fs::path> shard_paths(const fs::path& store) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(store))
    if (e.path().extension() == ".fgs") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Entries of `dir` other than `keep`.
std::vector<std::string> leftovers(const fs::path& dir, const std::vector<std::string>& keep) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (std::find(keep.begin(), keep.end(), name) == keep.end()) out.push_back(name);
  }
  return out;
}

void overwrite(const fs::path& file, uint64_t offset, const std::string& bytes) {
  int fd = ::open(file.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)) ==
          static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

struct StoreFixture {
  TempDir dir{"fgm-robust"};
  StoreFixture() {
    dir.write("train.svm", make_text(20000, 3000, 30, 11));
    std::string err;
    // An 8MB ingest budget cuts ~1 MB shards: several files, each > 1 MiB of data.
    REQUIRE(run_fgm(dir.path, {"ingest", "train.svm", "--out", "store", "--memory-budget", "8MB"},
                    &err) == 0);
    REQUIRE(shard_paths(dir.path / "store").size() >= 3);
  }
  // Trains on `store_dir` with a budget that keeps the store streamed (not
  // resident) unless `resident`, then predicts the training text.
  std::vector<std::string> train_args(const std::string& store_dir, const std::string& out,
                                      bool resident) const {
    return {"train",
            "data.train=" + store_dir,
            "output.dir=" + out,
            "fgm.B=3",
            "fgm.max_iterations=6",
            "fgm.eps_outer=0",
            "engine.block_bytes=128KB",
            std::string("engine.memory_budget=") + (resident ? "256MB" : "8MB"),
            "engine.progress=off"};
  }
  std::string scores_of(const std::string& out) const {
    std::string err;
    std::string scores = out + "-scores.txt";
    REQUIRE(run_fgm(dir.path, {"predict", "--model", out + "/model.fgm", "train.svm", "--out", scores},
                    &err) == 0);
    return slurp(dir.file(scores));
  }
};

// Runs training, and right after iteration 1 stops the process, applies
// `change` to the store, and lets it continue.
template <class Change>
Child train_with_change(const StoreFixture& fx, const std::string& store, const std::string& out,
                        bool resident, Change&& change) {
  Child c(fx.dir.path, fx.train_args(store, out, resident));
  REQUIRE(c.read_until("iter   1:"));
  ::kill(c.pid, SIGSTOP);
  change();
  ::kill(c.pid, SIGCONT);
  c.finish();
  return c;
}

}  // namespace

TEST_CASE("a store truncated or overwritten during fgm train ends in exit 5 naming the shard",
          "[cli][store][robustness]") {
  StoreFixture fx;
  REQUIRE(run_fgm(fx.dir.path, fx.train_args("store", "reference", false)) == 0);
  const std::string reference = fx.scores_of("reference");

  struct Case {
    const char* name;
    std::function<void(const fs::path&)> change;
  };
  const std::vector<Case> cases = {
      {"truncated to half", [](const fs::path& shard) {
         fs::resize_file(shard, fs::file_size(shard) / 2);
       }},
      {"1 MiB of 0x7f over the data", [](const fs::path& shard) {
         overwrite(shard, 4096, std::string(std::min<uint64_t>(1 << 20, fs::file_size(shard) - 8192), '\x7f'));
       }},
      {"four value bytes changed", [](const fs::path& shard) {
         // Middle of the file: inside the row ids or values.
         uint64_t at = fs::file_size(shard) / 2 / 4 * 4;
         std::string old = slurp(shard.string()).substr(at, 4);
         for (auto& ch : old) ch = static_cast<char>(ch ^ 0x40);
         overwrite(shard, at, old);
       }},
      {"copied over by another shard (cp truncates, then writes)", [](const fs::path& shard) {
         fs::path other = shard_paths(shard.parent_path()).front() == shard
                              ? shard_paths(shard.parent_path()).back()
                              : shard_paths(shard.parent_path()).front();
         std::string bytes = slurp(other.string());
         std::ofstream(shard, std::ios::binary | std::ios::trunc) << bytes;
       }},
  };
  int trial = 0;
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const std::string store = "store-" + std::to_string(trial++);
      fs::copy(fx.dir.path / "store", fx.dir.path / store);
      const fs::path shard = shard_paths(fx.dir.path / store)[1];
      Child run = train_with_change(fx, store, "changed", false, [&] { c.change(shard); });
      CAPTURE(run.err);
      REQUIRE_FALSE(run.signalled());
      // The pass after iteration 1 reads the shard again: the change is found.
      REQUIRE(run.code() == 5);
      REQUIRE(contains(run.err, shard.filename().string()));
      REQUIRE_FALSE(fs::exists(fx.dir.path / "changed" / "model.fgm"));
    }
  }

  SECTION("a resident store: a clean error or the unchanged model") {
    fs::copy(fx.dir.path / "store", fx.dir.path / "store-resident");
    REQUIRE(run_fgm(fx.dir.path, fx.train_args("store-resident", "resident-ref", true)) == 0);
    // Streamed and resident runs give the same model.
    REQUIRE(fx.scores_of("resident-ref") == reference);
    const fs::path shard = shard_paths(fx.dir.path / "store-resident")[1];
    for (int trial = 0; trial < 2; ++trial) {
      // A fresh output.dir per trial: a failed trial leaves a resume checkpoint.
      const std::string out = "resident-" + std::to_string(trial);
      Child run = train_with_change(fx, "store-resident", out, true, [&] {
        if (trial == 0) {
          fs::resize_file(shard, fs::file_size(shard) / 2);
        } else {
          overwrite(shard, 4096, std::string(fs::file_size(shard) - 8192, '\x7f'));
        }
      });
      CAPTURE(trial, run.err);
      REQUIRE_FALSE(run.signalled());
      // Scoring passes use the blocks kept in memory; columns copied for the
      // solver are read (and verified) from the file again.
      if (run.code() == 0) {
        REQUIRE(fx.scores_of(out) == reference);
      } else {
        REQUIRE(run.code() == 5);
        REQUIRE(contains(run.err, shard.filename().string()));
      }
      fs::remove_all(fx.dir.path / "store-resident");
      fs::copy(fx.dir.path / "store", fx.dir.path / "store-resident");
    }
  }
}

TEST_CASE("fgm ingest killed at random points leaves no output or a complete store; the rerun "
          "cleans up",
          "[cli][store][robustness][kill]") {
  TempDir dir("fgm-kill");
  dir.write("in.svm", make_text(30000, 5000, 25, 5));
  // A 2MB budget spills sorted runs: the temporary directory holds real files.
  const std::vector<std::string> ingest = {"ingest", "in.svm", "--out", "store", "--memory-budget",
                                           "2MB"};
  const std::vector<std::string> reference = {"ingest", "in.svm", "--out", "reference",
                                              "--memory-budget", "2MB"};
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(run_fgm(dir.path, reference) == 0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::mt19937_64 rng(2024);
  std::uniform_real_distribution<double> when(0.0, seconds * 1.1);
  int killed_before_commit = 0;
  for (int trial = 0; trial < 12; ++trial) {
    CAPTURE(trial);
    {
      Child c(dir.path, ingest);
      std::this_thread::sleep_for(std::chrono::duration<double>(when(rng)));
      ::kill(c.pid, SIGKILL);
      c.finish();
    }
    // No output, or a store that opens (every file verified).
    if (fs::exists(dir.path / "store")) {
      fgm::MemoryBudget budget(256 << 20);
      REQUIRE_NOTHROW(fgm::ShardStore::open(dir.file("store"), budget));
    } else {
      ++killed_before_commit;
    }
    std::string err;
    REQUIRE(run_fgm(dir.path, ingest, &err) == 0);
    // The rerun removed what the killed one left: only the outputs remain.
    REQUIRE(leftovers(dir.path, {"in.svm", "store", "reference", "child-stdout.txt"}).empty());
    for (const auto& f : fs::directory_iterator(dir.path / "reference")) {
      std::string name = f.path().filename().string();
      REQUIRE(slurp(f.path().string()) == slurp((dir.path / "store" / name).string()));
    }
    REQUIRE(leftovers(dir.path / "store", {}).size() == leftovers(dir.path / "reference", {}).size());
    fs::remove_all(dir.path / "store");
  }
  CHECK(killed_before_commit > 0);
}

TEST_CASE("a second ingest into the same --out fails while the first runs",
          "[cli][store][robustness]") {
  TempDir dir("fgm-lock");
  dir.write("a.svm", make_text(30000, 5000, 25, 1));
  dir.write("b.svm", make_text(100, 50, 5, 2));
  Child first(dir.path, {"ingest", "a.svm", "--out", "store", "--memory-budget", "2MB"});
  // Wait until the first holds the output lock.
  for (int i = 0; i < 2000 && !fs::exists(dir.path / "store.lock"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(fs::exists(dir.path / "store.lock"));
  std::string err;
  int code = run_fgm(dir.path, {"ingest", "b.svm", "--out", "store"}, &err);
  CAPTURE(err);
  REQUIRE(code == 4);
  REQUIRE(contains(err, "another fgm process"));
  REQUIRE(contains(err, "store"));
  first.finish();
  REQUIRE(first.code() == 0);
  // The store is the first input's, and the lock is gone.
  fgm::MemoryBudget budget(256 << 20);
  auto store = fgm::ShardStore::open(dir.file("store"), budget);
  REQUIRE(store->info().n_rows == 30000);
  REQUIRE_FALSE(fs::exists(dir.path / "store.lock"));
}

TEST_CASE("two fgm train runs sharing engine.cache_dir ingest once and agree",
          "[cli][store][robustness]") {
  TempDir dir("fgm-cache");
  dir.write("train.svm", make_text(30000, 4000, 25, 3));
  auto args = [](const std::string& out) {
    return std::vector<std::string>{"train",           "data.train=train.svm", "output.dir=" + out,
                                    "fgm.B=3",         "fgm.max_iterations=2", "engine.cache_dir=cache",
                                    "engine.memory_budget=32MB", "engine.progress=off"};
  };
  Child a(dir.path, args("a"));
  Child b(dir.path, args("b"));
  a.finish();
  b.finish();
  CAPTURE(a.err, b.err);
  REQUIRE(a.code() == 0);
  REQUIRE(b.code() == 0);
  const int ingests = contains(a.err, "info: ingested train.svm") +
                      contains(b.err, "info: ingested train.svm");
  REQUIRE(ingests == 1);
  REQUIRE(contains(a.err + b.err, "using cached store"));
  // Same model: same scores on the training text.
  REQUIRE(run_fgm(dir.path, {"predict", "--model", "a/model.fgm", "train.svm", "--out", "sa.txt"}) == 0);
  REQUIRE(run_fgm(dir.path, {"predict", "--model", "b/model.fgm", "train.svm", "--out", "sb.txt"}) == 0);
  REQUIRE(slurp(dir.file("sa.txt")) == slurp(dir.file("sb.txt")));
  // The cache holds the one entry and nothing else.
  REQUIRE(leftovers(dir.path / "cache", {}).size() == 1);
}

TEST_CASE("a killed cache ingest leaves a temporary that the next run removes",
          "[cli][store][robustness][kill]") {
  TempDir dir("fgm-cache-kill");
  dir.write("train.svm", make_text(30000, 4000, 25, 8));
  const std::vector<std::string> args = {"train", "data.train=train.svm", "output.dir=out",
                                         "fgm.B=2", "fgm.max_iterations=1", "engine.cache_dir=cache",
                                         "engine.memory_budget=4MB", "engine.progress=off"};
  {
    Child c(dir.path, args);
    // Kill once the ingest's temporary directory exists.
    bool seen = false;
    for (int i = 0; i < 5000 && !seen; ++i) {
      std::error_code ec;
      if (fs::exists(dir.path / "cache", ec))
        for (const auto& e : fs::directory_iterator(dir.path / "cache", ec))
          seen = seen || contains(e.path().filename().string(), ".tmp-");
      if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE(seen);
    ::kill(c.pid, SIGKILL);
    c.finish();
  }
  std::string err;
  REQUIRE(run_fgm(dir.path, args, &err) == 0);
  CAPTURE(err);
  // One store entry; no temporaries, no lock files.
  auto left = leftovers(dir.path / "cache", {});
  REQUIRE(left.size() == 1);
  REQUIRE_FALSE(contains(left[0], ".tmp-"));
  REQUIRE_FALSE(contains(left[0], "lock"));
}

TEST_CASE("peak RSS of fgm train does not grow with the number of shards",
          "[cli][store][robustness]") {
  TempDir dir("fgm-shards");
  // The same rows as ~3 shards and as ~360 small ones.
  for (const char* target : {"2000000", "12000"}) {
    std::string err;
    REQUIRE(run_fgm(dir.path, {"synth", "--kind", "sparse", "--out", std::string("s") + target,
                               "--rows", "20000", "--test-rows", "10", "--features", "20000",
                               "--store", "--shard-target", target, "--seed", "5"},
                    &err) == 0);
  }
  REQUIRE(shard_paths(dir.path / "s12000" / "store").size() > 300);
  REQUIRE(shard_paths(dir.path / "s2000000" / "store").size() < 5);
  auto peak = [&](const std::string& store) {
    Child c(dir.path, {"train", "data.train=" + store, "output.dir=out", "engine.memory_budget=8MB",
                       "fgm.B=3", "fgm.max_iterations=3", "engine.block_bytes=256KB",
                       "engine.progress=off"});
    c.finish();
    CAPTURE(c.err);
    REQUIRE(c.code() == 0);
    return c.max_rss_kb;
  };
  const long few = peak("s2000000/store"), many = peak("s12000/store");
  CAPTURE(few, many);
  // Per shard the engine keeps a few hundred bytes (counted in the budget)
  // and an open descriptor; mapped shards used to add ~1 MB here.
  REQUIRE(many <= few + 512);
}

TEST_CASE("one huge feature id costs nothing: a small store, quickly", "[cli][store][robustness]") {
  // Store format 4 keeps only non-empty columns: the width of the id space
  // (4,294,967,297 here) does not enter the store's size.
  TempDir dir("fgm-huge");
  dir.write("two.svm", "+1 1:1 4294967297:1\n-1 2:1\n");
  std::string err;
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(run_fgm(dir.path, {"ingest", "two.svm", "--out", "s", "--max-store-bytes", "1MB"}, &err) == 0);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 10);
  uint64_t bytes = 0;
  for (const auto& e : fs::directory_iterator(dir.path / "s")) bytes += fs::file_size(e.path());
  CHECK(bytes < (1 << 20));
  // The cache ingest of fgm train, with a declared width far beyond the ids.
  dir.write("small.svm", "+1 1:1 3:1\n-1 2:1\n");
  REQUIRE(run_fgm(dir.path, {"train", "data.train=small.svm", "engine.cache_dir=cache",
                             "data.features=100000000", "store.max_bytes=1MB", "engine.progress=off",
                             "fgm.B=1", "fgm.max_iterations=1", "output.dir=out"},
                  &err) == 0);
  CAPTURE(err);
}

TEST_CASE("a directory without manifest.fgm as data.train says so", "[cli][store][robustness]") {
  TempDir dir("fgm-nomanifest");
  fs::create_directories(dir.path / "notastore");
  std::string err;
  REQUIRE(run_fgm(dir.path, {"train", "data.train=notastore", "engine.progress=off"}, &err) == 4);
  CHECK(contains(err, "no manifest.fgm"));
  CHECK_FALSE(contains(err, "Is a directory"));
}
