// `fgm` command line: ingest, train, path, predict, inspect, synth.
// Exit codes: 0 success, 2 configuration/usage, 3 invalid input data, 4 I/O,
// 5 corrupted file, 6 memory budget exceeded, 70 internal error.
#pragma once

#include <string>
#include <vector>

namespace fgm {

int run_cli(int argc, char** argv);

// One command (`args` without the program name, e.g. {"train", "data.train=x"})
// run in this process with the default logger as it is: what the Python
// binding calls. Failures propagate as exceptions (fgm::Error, filesystem
// errors, bad_alloc) instead of becoming exit codes; --help is a kConfig Error.
int run_command(const std::vector<std::string>& args);

}  // namespace fgm
