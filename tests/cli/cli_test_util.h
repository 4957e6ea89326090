// Running the built `fgm` binary from the CLI tests.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/test_util.h"

namespace fgm::test {

struct RunResult {
  int code = -1;  // exit code; -1 when the process was killed by a signal
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `<launcher>fgm <args>` (shell-quoted by the caller) in `dir`, stdin closed.
inline RunResult run_launched(const TempDir& dir, const std::string& launcher, const std::string& args) {
  std::string out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
  std::string cmd = "cd '" + dir.path.string() + "' && " + launcher + "'" FGM_BINARY_PATH "' " + args + " >'" + out +
                    "' 2>'" + err + "' </dev/null";
  int status = std::system(cmd.c_str());
  RunResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// Runs `fgm <args>` in `dir`.
inline RunResult run(const TempDir& dir, const std::string& args) { return run_launched(dir, "", args); }

// Open MPI's launcher as the tests use it: as root it needs --allow-run-as-root,
// and the 2-core CI machines need --oversubscribe for 4 ranks.
inline const std::string kMpirun = "mpirun --allow-run-as-root --oversubscribe ";

// `mpirun -np <np> fgm <args>` in `dir`.
inline RunResult run_mpi(const TempDir& dir, int np, const std::string& args) {
  return run_launched(dir, kMpirun + "-np " + std::to_string(np) + " ", args);
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace fgm::test
