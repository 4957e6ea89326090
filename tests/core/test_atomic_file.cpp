// write_file_atomic: content, no temporaries left, and durability of the
// rename (the containing directory is fsynced after it).
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "tests/test_util.h"

// This executable's fsync preempts libc's (symbol interposition): it records
// fsyncs of directories and forwards every call to the kernel.
namespace {
std::atomic<int> g_directory_fsyncs{0};
}
extern "C" int fsync(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) ++g_directory_fsyncs;
  return static_cast<int>(::syscall(SYS_fsync, fd));
}

TEST_CASE("write_file_atomic writes the content and fsyncs the directory after the rename",
          "[core][atomic_file]") {
  namespace fs = std::filesystem;
  fgm::test::TempDir tmp("fgm-atomic");
  const fs::path dir = tmp.path;
  const std::string path = tmp.file("out.txt");
  int before = g_directory_fsyncs.load();
  fgm::write_file_atomic(path, "first\n");
  REQUIRE(g_directory_fsyncs.load() > before);
  fgm::write_file_atomic(path, "second\n");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  REQUIRE(text.str() == "second\n");
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) entries += e.is_regular_file();
  REQUIRE(entries == 1);  // no temporary left beside it
}

using namespace fgm;
namespace fs = std::filesystem;

TEST_CASE("stale temporaries of dead writers are removed, live ones kept", "[core][atomic]") {
  test::TempDir dir("fgm-atomic");
  auto touch = [&](const std::string& name) { std::ofstream(dir.path / name) << "partial"; };
  touch(".model.fgm.tmp-999999999");     // no such process
  touch(".run.json.tmp-1");              // pid 1 always runs
  touch(".model.fgm.tmp-" + std::to_string(::getpid()));  // this process is writing it
  touch("model.fgm");                    // not a temporary
  touch(".notes.tmp-12x");               // not a pid
  write_file_atomic(dir.file("checkpoint.fgm"), "data");
  std::vector<std::string> removed = remove_stale_temporaries(dir.path.string());
  REQUIRE(removed == std::vector<std::string>{dir.file(".model.fgm.tmp-999999999")});
  REQUIRE_FALSE(fs::exists(dir.path / ".model.fgm.tmp-999999999"));
  REQUIRE(fs::exists(dir.path / ".run.json.tmp-1"));
  REQUIRE(fs::exists(dir.path / (".model.fgm.tmp-" + std::to_string(::getpid()))));
  REQUIRE(fs::exists(dir.path / "model.fgm"));
  REQUIRE(fs::exists(dir.path / ".notes.tmp-12x"));
  REQUIRE(fs::exists(dir.path / "checkpoint.fgm"));
}

TEST_CASE("a symlink planted at the temporary's old, predictable name is never followed", "[core][atomic]") {
  test::TempDir dir("fgm-atomic");
  const std::string victim = dir.write("victim.txt", "precious\n");
  // Before issue 23 the temporary was ".<name>.tmp-<pid>", opened with O_CREAT | O_TRUNC.
  fs::create_symlink(victim, dir.path / (".out.txt.tmp-" + std::to_string(::getpid())));
  write_file_atomic(dir.file("out.txt"), "new content\n");
  std::ifstream in(victim);
  std::stringstream text;
  text << in.rdbuf();
  REQUIRE(text.str() == "precious\n");
  REQUIRE(fs::is_regular_file(fs::symlink_status(dir.path / "out.txt")));
  std::ifstream out(dir.file("out.txt"));
  std::stringstream written;
  written << out.rdbuf();
  REQUIRE(written.str() == "new content\n");
}

TEST_CASE("temporaries named .<name>.tmp-<pid>-<hex> are cleaned like the older ones", "[core][atomic]") {
  test::TempDir dir("fgm-atomic");
  auto touch = [&](const std::string& name) { std::ofstream(dir.path / name) << "partial"; };
  touch(".model.fgm.tmp-999999999-0badf00d");  // no such process
  touch(".run.json.tmp-1-0badf00d");           // pid 1 always runs
  touch(".run.json.tmp-999999999-xyz");        // not hex: not ours
  touch(".run.json.tmp-999999999-");           // nothing after the dash
  std::vector<std::string> removed = remove_stale_temporaries(dir.path.string());
  REQUIRE(removed == std::vector<std::string>{dir.file(".model.fgm.tmp-999999999-0badf00d")});
  REQUIRE(fs::exists(dir.path / ".run.json.tmp-1-0badf00d"));
  REQUIRE(fs::exists(dir.path / ".run.json.tmp-999999999-xyz"));
  REQUIRE(fs::exists(dir.path / ".run.json.tmp-999999999-"));
}
