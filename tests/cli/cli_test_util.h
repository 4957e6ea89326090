// Running the built `fgm` binary from the CLI tests.
#pragma once

#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

namespace fgm::test {

// `mpirun -np <np> fgm <args>` in the background in `dir`: stdout and stderr
// go to out.txt and err.txt, mpirun's pid to pid.txt, its exit code to rc.txt
// when it ends.
inline void start_mpi(const TempDir& dir, int np, const std::string& args) {
  const std::string launch = "cd '" + dir.path.string() + "' && (" + kMpirun + "-np " + std::to_string(np) + " '" +
                             FGM_BINARY_PATH + "' " + args +
                             " >out.txt 2>err.txt </dev/null & echo $! >pid.txt; wait $!; echo $? >rc.txt) "
                             ">/dev/null 2>&1 &";
  std::system(launch.c_str());
}

// SIGKILLs the last rank of the job start_mpi started (mpirun's last child).
inline void kill_last_rank(const TempDir& dir) {
  const std::string children = dir.file("children.txt");
  std::system(("pgrep -P " + std::to_string(std::stol(slurp(dir.file("pid.txt")))) + " > '" + children + "'").c_str());
  std::istringstream pids(slurp(children));
  long last = 0;
  for (long p; pids >> p;) last = p;
  if (last > 0) ::kill(static_cast<pid_t>(last), SIGKILL);
}

// A CSV file's rows as cells (a trailing comma ends with an empty cell).
inline std::vector<std::vector<std::string>> csv_cells(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream ls(line);
    while (std::getline(ls, cell, ',')) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.push_back("");
    rows.push_back(cells);
  }
  return rows;
}

// The index of column `name` in a CSV header (header.size() when absent).
inline size_t csv_column(const std::vector<std::string>& header, const std::string& name) {
  for (size_t c = 0; c < header.size(); ++c)
    if (header[c] == name) return c;
  return header.size();
}

}  // namespace fgm::test
