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
