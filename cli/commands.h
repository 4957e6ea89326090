// Subcommand registration (private to cli/).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace fgm::cli {

// A registered subcommand and the action to run when it was chosen.
struct Command {
  CLI::App* sub = nullptr;
  std::function<int()> run;
};

Command add_ingest(CLI::App& app);
Command add_predict(CLI::App& app);
Command add_inspect(CLI::App& app);
Command add_synth(CLI::App& app);
Command add_report(CLI::App& app);
// fgm train (`path` false) and fgm path: the config, its overrides and --restart handed to the runner (cli/runner.h).
Command add_solver_command(CLI::App& app, bool path);

}  // namespace fgm::cli
