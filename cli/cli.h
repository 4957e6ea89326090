// `fgm` command line: ingest, train, path, predict, inspect, synth.
// Exit codes: 0 success, 2 configuration/usage, 3 invalid input data, 4 I/O,
// 5 corrupted file, 6 memory budget exceeded, 70 internal error.
#pragma once

namespace fgm {

int run_cli(int argc, char** argv);

}  // namespace fgm
