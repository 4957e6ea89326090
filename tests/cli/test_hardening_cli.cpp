// Issue 23 (an adversarial probe of the CLI), items 1-4, 10-13 and 16: each
// input below once hung fgm, crashed it, let it overwrite a file it did not
// own, allocate far beyond its memory budget, or leave temporaries forever.
// Every command runs as a child with a deadline (a hang fails the test, never
// blocks the suite) and its peak RSS measured (wait4).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/cli/cli_test_util.h"

using namespace fgm::test;
namespace fs = std::filesystem;

namespace {

struct LimitedRun {
  int code = -1;  // exit code; -1: killed (the deadline, or a signal such as SIGSEGV)
  bool timed_out = false;
  long peak_rss_kb = 0;
  std::string out, err;
};

// `sh -c "<prefix> exec <launcher>fgm <args>"` in `dir` with stdin closed, SIGKILLed
// (its whole process group) after `seconds`. `on_start(pid)` runs before the
// child execs (without a prefix, fgm runs as that pid). `limits` (resource,
// value) apply to the child after stdout and stderr are redirected (with
// RLIMIT_NOFILE low, dash's own redirections would fail: they need
// descriptors 10 and up).
LimitedRun run_limited(const TempDir& dir, const std::string& args, int seconds = 60,
                       const std::string& prefix = "", const std::function<void(pid_t)>& on_start = {},
                       const std::vector<std::pair<int, rlim_t>>& limits = {}, const std::string& launcher = "") {
  const std::string out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
  const std::string cmd = prefix + "exec " + launcher + "'" FGM_BINARY_PATH "' " + args;
  int go[2];
  REQUIRE(::pipe(go) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setpgid(0, 0);
    ::close(go[1]);
    char byte;
    if (::read(go[0], &byte, 1) != 1) ::_exit(127);
    ::close(go[0]);
    if (::chdir(dir.path.c_str()) != 0) ::_exit(127);
    const int in_fd = ::open("/dev/null", O_RDONLY);
    const int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in_fd < 0 || out_fd < 0 || err_fd < 0) ::_exit(127);
    ::dup2(in_fd, 0);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    ::close(in_fd);
    ::close(out_fd);
    ::close(err_fd);
    for (const auto& [resource, value] : limits) {
      const struct rlimit limit = {value, value};
      if (::setrlimit(resource, &limit) != 0) ::_exit(127);
    }
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(go[0]);
  if (on_start) on_start(pid);
  REQUIRE(::write(go[1], "x", 1) == 1);
  ::close(go[1]);
  LimitedRun r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int status = 0;
  struct rusage usage {};
  for (;;) {
    const pid_t done = ::wait4(pid, &status, WNOHANG, &usage);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      ::wait4(pid, &status, 0, &usage);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.peak_rss_kb = usage.ru_maxrss;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// Rows "±1 1:v 2:v 3:v" with values `scale` times a random number in [0.5, 1.5), sign by label.
std::string scaled_rows(int n, double scale, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unif(0.5, 1.5);
  std::ostringstream out;
  out.precision(9);
  for (int i = 0; i < n; ++i) {
    const int y = i % 2 ? 1 : -1;
    out << y;
    for (int j = 1; j <= 3; ++j) out << ' ' << j << ':' << (j == 1 ? y : (j == 2 ? -y : 1)) * scale * unif(rng);
    out << '\n';
  }
  return out.str();
}

// Three classes (1, 2, 3); class k raises features 4k+1..4k+4.
std::string three_classes(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unif(0, 1);
  std::ostringstream out;
  for (int i = 0; i < n; ++i) {
    const int c = i % 3;
    out << c + 1;
    for (int j = 0; j < 12; ++j) {
      double v = unif(rng) < 0.3 ? std::floor(3 * unif(rng)) : 0;
      if (j / 4 == c) v += 1;
      if (v != 0) out << ' ' << j + 1 << ':' << v;
    }
    out << '\n';
  }
  return out.str();
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename().string());
  return names;
}

bool any_contains(const std::vector<std::string>& names, const std::string& part) {
  for (const auto& n : names)
    if (contains(n, part)) return true;
  return false;
}

const std::string kQuiet = " engine.progress=off";

}  // namespace

// ---- item 1: non-finite decision values

TEST_CASE("a row whose transformed values overflow fails predict naming the feature, never hangs the AUC",
          "[cli][hardening]") {
  TempDir dir("fgm-hard-nan");
  dir.write("tiny.svm", scaled_rows(60, 1e-30, 1));
  // 1e10 · (1 / 1.5e-30) is beyond the float range: ±inf after maxabs, and inf − inf = NaN.
  dir.write("huge.svm", scaled_rows(20, 1e10, 2));
  LimitedRun t = run_limited(dir, "train data.train=tiny.svm output.dir=run engine.cache_dir=cache fgm.B=3 "
                                  "fgm.max_iterations=2 'features.transform=[\"maxabs\"]'" + kQuiet);
  CAPTURE(t.err);
  REQUIRE(t.code == 0);

  LimitedRun p = run_limited(dir, "predict --model run/model.fgm huge.svm --out pred.txt", 60);
  CAPTURE(p.err);
  REQUIRE_FALSE(p.timed_out);
  REQUIRE(p.code == 3);
  REQUIRE(contains(p.err, "huge.svm:1:1"));
  REQUIRE(contains(p.err, "feature 1 (value"));
  REQUIRE(contains(p.err, "after features.transform [maxabs]"));

  // The same rows as data.test of fgm train: the same error after training, no hang.
  LimitedRun tt = run_limited(dir, "train data.train=tiny.svm data.test=huge.svm output.dir=run2 "
                                   "engine.cache_dir=cache fgm.B=3 fgm.max_iterations=2 "
                                   "'features.transform=[\"maxabs\"]'" + kQuiet);
  CAPTURE(tt.err);
  REQUIRE_FALSE(tt.timed_out);
  REQUIRE(tt.code == 3);
  REQUIRE(contains(tt.err, "huge.svm:1:1"));
}

TEST_CASE("a transform that takes a training value out of the float range is an error naming it",
          "[cli][hardening]") {
  TempDir dir("fgm-hard-tfidf");
  // Feature 4 holds 3.4e38 (below FLT_MAX) on one row of 61: tfidf multiplies it by log(62/2) + 1.
  std::string rows = scaled_rows(60, 1.0, 3);
  rows.insert(rows.find('\n') + 1, "1 1:1 4:3.4e38\n");
  dir.write("train.svm", rows);
  LimitedRun t = run_limited(dir, "train data.train=train.svm output.dir=run engine.cache_dir=cache fgm.B=2 "
                                  "fgm.max_iterations=2 'features.transform=[\"tfidf\"]'" + kQuiet);
  CAPTURE(t.err);
  REQUIRE(t.code == 3);
  REQUIRE(contains(t.err, "feature 4 of row 2 (value 3.4e+38)"));
  REQUIRE(contains(t.err, "features.transform [tfidf]"));
  REQUIRE_FALSE(fs::exists(dir.path / "run" / "model.fgm"));
}

// ---- item 2: fgm path on a multi-class partitioned store

TEST_CASE("fgm path on a multi-class partitioned store refuses before training, as on one store",
          "[cli][hardening]") {
  TempDir dir("fgm-hard-mcpart");
  dir.write("three.svm", three_classes(150, 4));
  LimitedRun i = run_limited(dir, "ingest three.svm --out p2 --partitions 2");
  CAPTURE(i.err);
  REQUIRE(i.code == 0);
  for (const std::string extra : {"'path.features=[2,4]'", "'path.B=[2,3]'", "'path.C=[0.5,1]'",
                                  "'path.features=[2,4]' path.debias=false"}) {
    CAPTURE(extra);
    fs::remove_all(dir.path / "out");
    LimitedRun r = run_limited(dir, "path data.train=p2 output.dir=out " + extra + kQuiet);
    CAPTURE(r.err);
    REQUIRE(r.code == 2);
    REQUIRE(contains(r.err, "3 classes"));
    REQUIRE(contains(r.err, "fgm path supports two-label stores only"));
    REQUIRE_FALSE(fs::exists(dir.path / "out" / "path.csv"));
    REQUIRE_FALSE(fs::exists(dir.path / "out" / ".fgm-run.lock"));
  }
}

TEST_CASE("mpirun fgm path on a multi-class partitioned store refuses on every rank count", "[.mpi][mpi]") {
  TempDir dir("fgm-hard-mcpart-mpi");
  dir.write("three.svm", three_classes(150, 4));
  REQUIRE(run_limited(dir, "ingest three.svm --out p2 --partitions 2").code == 0);
  for (int np : {1, 2}) {
    CAPTURE(np);
    fs::remove_all(dir.path / "out");
    LimitedRun r = run_limited(dir, "path data.train=p2 output.dir=out 'path.B=[2,3]'" + kQuiet, 120, "", {}, {},
                               kMpirun + "-np " + std::to_string(np) + " ");
    CAPTURE(r.err);
    REQUIRE(r.code == 2);
    REQUIRE(contains(r.err, "fgm path supports two-label stores only"));
    REQUIRE_FALSE(fs::exists(dir.path / "out" / "path.csv"));
    REQUIRE_FALSE(fs::exists(dir.path / "out" / ".fgm-run.lock"));
  }
}

// ---- item 3: a deep dotted key

TEST_CASE("a config with a 20,000-part dotted key is refused naming its line and column", "[cli][hardening]") {
  TempDir dir("fgm-hard-deepkey");
  std::string key = "a";
  for (int i = 1; i < 20000; ++i) key += ".a";
  dir.write("table.toml", "# deep\n[" + key + "]\nx = 1\n");
  dir.write("key.toml", "fgm.B = 3\n  " + key + " = 1\n");
  LimitedRun r = run_limited(dir, "train --config table.toml data.train=x.svm");
  CAPTURE(r.err.substr(0, 400));
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "table.toml:2:2: "));
  REQUIRE(contains(r.err, "a dotted key of more than 16 parts"));
  REQUIRE(r.peak_rss_kb < 200 * 1024);
  LimitedRun k = run_limited(dir, "train --config key.toml data.train=x.svm");
  CAPTURE(k.err.substr(0, 400));
  REQUIRE(k.code == 2);
  REQUIRE(contains(k.err, "key.toml:2:3: "));
  // Dots in strings, comments and values are no key parts.
  dir.write("ok.toml", "# a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r\n[fgm]\nB = 3\n[data]\n"
                       "train = \"x.a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.svm\"\n[engine]\nmemory_budget = \"1.5GB\"\n");
  LimitedRun ok = run_limited(dir, "train --config ok.toml");
  CAPTURE(ok.err);
  REQUIRE(ok.code == 4);  // the data file is missing: the config itself was accepted
  REQUIRE(contains(ok.err, "x.a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.svm"));
}

// ---- item 4: FIFOs and devices as inputs

TEST_CASE("a FIFO as ingest input or data.train is refused naming it; FIFOs at fgm's own names never block",
          "[cli][hardening]") {
  TempDir dir("fgm-hard-fifo");
  REQUIRE(::mkfifo(dir.file("rows.fifo").c_str(), 0644) == 0);
  LimitedRun i = run_limited(dir, "ingest rows.fifo --out s", 30);
  CAPTURE(i.err);
  REQUIRE_FALSE(i.timed_out);
  REQUIRE(i.code == 4);
  REQUIRE(contains(i.err, "rows.fifo"));
  REQUIRE(contains(i.err, "not a regular file"));
  REQUIRE_FALSE(fs::exists(dir.path / "s"));

  LimitedRun t = run_limited(dir, "train data.train=rows.fifo output.dir=run engine.cache_dir=cache" + kQuiet, 30);
  CAPTURE(t.err);
  REQUIRE_FALSE(t.timed_out);
  REQUIRE(t.code == 4);
  REQUIRE(contains(t.err, "data.train"));
  REQUIRE(contains(t.err, "not a regular file"));

  // /dev/stdin on a pipe: refused, not a store of 0 rows with the checksum of nothing.
  LimitedRun s = run_limited(dir, "ingest /dev/stdin --out s2", 30, "echo '1 1:1' | ");
  CAPTURE(s.err);
  REQUIRE(s.code == 4);
  REQUIRE(contains(s.err, "not a regular file"));

  // A FIFO planted at the transform cache's name and at checkpoint.fgm.
  dir.write("train.svm", scaled_rows(60, 1.0, 5));
  LimitedRun a = run_limited(dir, "train data.train=train.svm output.dir=run engine.cache_dir=cache fgm.B=2 "
                                  "fgm.max_iterations=2 'features.transform=[\"maxabs\"]'" + kQuiet);
  REQUIRE(a.code == 0);
  std::string stats_name;
  for (const auto& entry : fs::recursive_directory_iterator(dir.path / "cache"))
    if (entry.path().extension() == ".stats") stats_name = entry.path().string();
  REQUIRE_FALSE(stats_name.empty());
  fs::remove(stats_name);
  REQUIRE(::mkfifo(stats_name.c_str(), 0644) == 0);
  LimitedRun b = run_limited(dir, "train data.train=train.svm output.dir=run2 engine.cache_dir=cache fgm.B=2 "
                                  "fgm.max_iterations=2 'features.transform=[\"maxabs\"]'" + kQuiet, 60);
  CAPTURE(b.err);
  REQUIRE_FALSE(b.timed_out);
  REQUIRE(b.code == 0);
  REQUIRE(contains(b.err, "not a regular file"));
  REQUIRE(fs::is_regular_file(stats_name));  // rewritten over the FIFO

  REQUIRE(::mkfifo(dir.file("run3/checkpoint.fgm").c_str(), 0644) != 0);  // run3 does not exist yet
  fs::create_directories(dir.path / "run3");
  REQUIRE(::mkfifo(dir.file("run3/checkpoint.fgm").c_str(), 0644) == 0);
  LimitedRun c = run_limited(dir, "train data.train=train.svm output.dir=run3 engine.cache_dir=cache fgm.B=2 "
                                  "fgm.max_iterations=2" + kQuiet, 30);
  CAPTURE(c.err);
  REQUIRE_FALSE(c.timed_out);
  REQUIRE(c.code == 5);
  REQUIRE(contains(c.err, "checkpoint.fgm"));
  REQUIRE(contains(c.err, "not a regular file"));
}

// ---- item 10: a symlink planted at the atomic writer's temporary name

TEST_CASE("outputs are never written through a symlink planted at the old temporary name", "[cli][hardening]") {
  TempDir dir("fgm-hard-symlink");
  dir.write("train.svm", scaled_rows(60, 1.0, 6));
  dir.write("victim.txt", "precious\n");
  fs::create_directories(dir.path / "run");
  // The name the writer used: ".<name>.tmp-<pid>", its pid known once forked.
  auto plant = [&](pid_t pid) {
    for (const char* name : {".model.fgm", ".run.json"})
      fs::create_symlink(dir.path / "victim.txt", dir.path / "run" / (name + (".tmp-" + std::to_string(pid))));
  };
  LimitedRun t = run_limited(dir, "train data.train=train.svm output.dir=run engine.cache_dir=cache fgm.B=2 "
                                  "fgm.max_iterations=2" + kQuiet, 60, "", plant);
  CAPTURE(t.err);
  REQUIRE(t.code == 0);
  REQUIRE(slurp(dir.file("victim.txt")) == "precious\n");
  REQUIRE(fs::is_regular_file(dir.path / "run" / "model.fgm"));
}

// ---- item 11: a line longer than the memory budget admits

TEST_CASE("one huge line is an error naming file, line and the budget key, within the budget", "[cli][hardening]") {
  TempDir dir("fgm-hard-longline");
  dir.write("train.svm", scaled_rows(60, 1.0, 7));
  LimitedRun t = run_limited(dir, "train data.train=train.svm output.dir=run engine.cache_dir=cache fgm.B=2 "
                                  "fgm.max_iterations=2" + kQuiet);
  REQUIRE(t.code == 0);
  // Line 2 is 200 MB of '1' (gzip -1: about 1 MB); in nul.gz, 200 MB of NUL bytes.
  const std::string make = "cd '" + dir.path.string() +
                           "' && { echo '1 1:1'; head -c 200000000 /dev/zero | tr '\\0' '1'; echo; } | gzip -1 >"
                           " digits.gz && { echo '1 1:1'; head -c 200000000 /dev/zero; echo; } | gzip -1 > nul.gz";
  REQUIRE(std::system(make.c_str()) == 0);
  for (const char* file : {"digits.gz", "nul.gz"}) {
    CAPTURE(file);
    LimitedRun p = run_limited(dir, std::string("predict --model run/model.fgm ") + file +
                                        " --out pred.txt --memory-budget 64MB");
    CAPTURE(p.err.substr(0, 400));
    REQUIRE(p.code == 6);
    REQUIRE(contains(p.err, std::string(file) + ":2: the line is longer than 8.0 MiB"));
    REQUIRE(contains(p.err, "raise --memory-budget"));
    REQUIRE(p.peak_rss_kb < 160 * 1024);  // the old reader held the whole 200 MB line, twice
    LimitedRun i = run_limited(dir, std::string("ingest ") + file + " --out s --memory-budget 64MB");
    CAPTURE(i.err.substr(0, 400));
    REQUIRE(i.code == 6);
    REQUIRE(contains(i.err, std::string(file) + ":2: the line is longer than 8.0 MiB"));
    REQUIRE(i.peak_rss_kb < 200 * 1024);
    REQUIRE_FALSE(any_contains(names_in(dir.path), "s.tmp-"));
    LimitedRun pi = run_limited(dir, std::string("ingest ") + file + " --out sp --partitions 2 --memory-budget 64MB");
    CAPTURE(pi.err.substr(0, 400));
    REQUIRE(pi.code == 6);
    REQUIRE(contains(pi.err, std::string(file) + ":2: the line is longer than 8.0 MiB"));
    REQUIRE(pi.peak_rss_kb < 200 * 1024);
    REQUIRE_FALSE(any_contains(names_in(dir.path), "sp.tmp-"));
  }
  // A budget (4GB: lines up to 512 MiB) above what ulimit -v lets the process map: the
  // system refuses the line's buffer, and the advice is to raise that limit, not to lower the budget.
  LimitedRun v = run_limited(dir, "predict --model run/model.fgm digits.gz --out pred.txt --memory-budget 4GB", 60, "",
                             {}, {{RLIMIT_AS, rlim_t{400} << 20}});
  CAPTURE(v.err);
  REQUIRE(v.code == 6);
  REQUIRE(contains(v.err, "address-space limit (ulimit -v, 400.0 MiB)"));
  REQUIRE(contains(v.err, "raise that limit"));
  REQUIRE_FALSE(contains(v.err, "lower engine.memory_budget"));
}

// ---- item 12: a budget is a cap

TEST_CASE("a budget far above the machine's memory is a cap: a small ingest takes what it needs",
          "[cli][hardening]") {
  TempDir dir("fgm-hard-bigbudget");
  dir.write("train.svm", scaled_rows(600, 1.0, 8));
  LimitedRun i = run_limited(dir, "ingest train.svm --out s --memory-budget 1TB");
  CAPTURE(i.err);
  REQUIRE(i.code == 0);
  REQUIRE(i.peak_rss_kb < 300 * 1024);
  LimitedRun t = run_limited(dir, "train data.train=train.svm output.dir=run engine.cache_dir=cache fgm.B=2 "
                                  "fgm.max_iterations=2 engine.memory_budget=1TB" + kQuiet);
  CAPTURE(t.err);
  REQUIRE(t.code == 0);
  REQUIRE(t.peak_rss_kb < 300 * 1024);
}

// ---- item 13: a SIFS grid of 10^12 points

TEST_CASE("a SIFS path grid above 10^6 points is refused naming both keys", "[cli][hardening]") {
  TempDir dir("fgm-hard-sifsgrid");
  dir.write("train.svm", scaled_rows(60, 1.0, 9));
  LimitedRun r = run_limited(dir, "path data.train=train.svm output.dir=run engine.cache_dir=cache solver=sifs "
                                  "sifs.beta_points=1000000 sifs.alpha_points=1000000" + kQuiet, 60);
  CAPTURE(r.err);
  REQUIRE_FALSE(r.timed_out);
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "sifs.beta_points x sifs.alpha_points = 1000000 x 1000000"));
  REQUIRE_FALSE(fs::exists(dir.path / "run" / "path.csv"));
  // At the cap it is accepted (checked only up to the refusal: 1000 x 1000 points would run long).
  LimitedRun ok = run_limited(dir, "path data.train=train.svm output.dir=run2 engine.cache_dir=cache solver=sifs "
                                   "sifs.beta_points=2 sifs.alpha_points=3" + kQuiet, 120);
  CAPTURE(ok.err);
  REQUIRE(ok.code == 0);
}

// ---- item 16: leftovers

TEST_CASE("stale transform-cache temporaries are removed, live ones kept; an EMFILE ingest leaves nothing",
          "[cli][hardening]") {
  TempDir dir("fgm-hard-leftovers");
  dir.write("train.svm", scaled_rows(60, 1.0, 10));
  REQUIRE(run_limited(dir, "ingest train.svm --out s").code == 0);
  dir.write("s/.transform-0123456789abcdef.stats.tmp-999999999", "partial");     // a dead writer's
  dir.write("s/.transform-0123456789abcdef.stats.tmp-999999998-0badf00d", "partial");
  dir.write("s/.transform-fedcba9876543210.stats.tmp-1-0badf00d", "partial");    // pid 1 lives
  LimitedRun t = run_limited(dir, "train data.train=s output.dir=run fgm.B=2 fgm.max_iterations=2 "
                                  "'features.transform=[\"maxabs\"]'" + kQuiet);
  CAPTURE(t.err);
  REQUIRE(t.code == 0);
  const std::vector<std::string> left = names_in(dir.path / "s");
  REQUIRE_FALSE(any_contains(left, "tmp-999999999"));
  REQUIRE_FALSE(any_contains(left, "tmp-999999998"));
  REQUIRE(any_contains(left, ".stats.tmp-1-0badf00d"));

  // A killed partitioned ingest's directory (its pid gone) is removed by the next one.
  fs::create_directories(dir.path / "p.tmp-999999999-partitions" / "part-0000");
  LimitedRun pi = run_limited(dir, "ingest train.svm --out p --partitions 2");
  CAPTURE(pi.err);
  REQUIRE(pi.code == 0);
  REQUIRE_FALSE(any_contains(names_in(dir.path), "p.tmp-"));

  // Too few descriptors: the ingest fails, and its own temporary goes with it.
  int emfile_failures = 0;
  for (int files = 5; files <= 9; ++files) {
    CAPTURE(files);
    LimitedRun e = run_limited(dir, "ingest train.svm --out e", 60, "", {}, {{RLIMIT_NOFILE, rlim_t(files)}});
    CAPTURE(e.err);
    REQUIRE((e.code == 0 || e.code == 4));  // exit 4: "Too many open files", naming the file
    emfile_failures += e.code == 4 && contains(e.err, "Too many open files");
    REQUIRE_FALSE(any_contains(names_in(dir.path), "e.tmp-"));
    REQUIRE_FALSE(fs::exists(dir.path / "e.lock"));
    if (e.code != 0) REQUIRE_FALSE(fs::exists(dir.path / "e"));
    fs::remove_all(dir.path / "e");
  }
  REQUIRE(emfile_failures >= 1);  // the limit did bite (5 and 6 fail on the ingest's temporary directory)
}
