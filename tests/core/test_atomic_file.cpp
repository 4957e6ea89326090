#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "tests/test_util.h"

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
