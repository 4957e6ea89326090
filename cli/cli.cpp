#include "cli/cli.h"

#include <sys/resource.h>

#include <cstdio>
#include <filesystem>
#include <ios>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/solver_registry.h"
#include "core/communicator.h"
#include "core/error.h"
#include "core/messages.h"
#include "core/simd/simd.h"

namespace fgm {

static int exit_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kConfig: return 2;
    case ErrorKind::kInvalidInput: return 3;
    case ErrorKind::kIo: return 4;
    case ErrorKind::kCorruption: return 5;
    case ErrorKind::kOutOfMemory: return 6;
    case ErrorKind::kInternal: return 70;
  }
  return 1;
}

namespace {

// The command line's subcommands, registered on one CLI::App.
struct CommandLine {
  CLI::App app{"fgm — feature selection for ultrahigh-dimensional classification (binary and multi-class), "
               "out of core: the Feature Generating Machine and further solvers (key `solver`: " +
               cli::solver_list(false) + "), on one machine or over MPI"};
  std::vector<cli::Command> commands;
  CommandLine() {
    app.require_subcommand(1);
    commands = {cli::add_ingest(app), cli::add_solver_command(app, false), cli::add_predict(app), cli::add_inspect(app),
                cli::add_synth(app),  cli::add_solver_command(app, true),  cli::add_report(app)};
  }
};

// Runs the parsed subcommand; failures propagate as exceptions.
int run_parsed(CommandLine& line, Communicator& world) {
  simd::active_target();  // a bad FGM_SIMD fails here, before any work
  for (auto& c : line.commands)
    if (c.sub->parsed()) {
      // Several ranks running ingest (or any other command) would all write the same output.
      if (world.size() > 1 && c.sub->get_name() != "train" && c.sub->get_name() != "path")
        throw Error(ErrorKind::kConfig,
                    fmt::format("fgm {} runs on one process: only fgm train and fgm path are distributed over "
                                "mpirun ranks (docs/distributed.md); run fgm {} without mpirun",
                                c.sub->get_name(), c.sub->get_name()));
      return c.run();
    }
  return 2;
}

}  // namespace

int run_command(const std::vector<std::string>& args) {
  CommandLine line;
  std::vector<std::string> words = {"fgm"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  try {
    line.app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    throw Error(ErrorKind::kConfig, e.what());
  }
  return run_parsed(line, world_communicator());
}

int run_cli(int argc, char** argv) {
  // Human log lines go to stderr; stdout carries results only.
  auto logger = spdlog::stderr_color_mt("fgm");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%^%l%$: %v");

  CommandLine line;
  try {
    line.app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return line.app.exit(e) == 0 ? 0 : 2;
  }
  // Under mpirun this is MPI_Init; a failure on any rank then ends the whole
  // job (MPI_Abort) with a message naming the rank, never a hang.
  Communicator& world = world_communicator();
  int code = 2;
  std::string failure;
  try {
    code = run_parsed(line, world);
  } catch (const Error& e) {
    failure = fmt::format("{}: {}", error_kind_name(e.kind()), e.what());
    code = exit_code(e.kind());
  } catch (const std::filesystem::filesystem_error& e) {
    // An OS error on a path that no check caught first: I/O, not a bug in fgm.
    failure = fmt::format("{}: {}", error_kind_name(ErrorKind::kIo),
                          msg::filesystem_failed(e.path1().string(), e.code().message(), e.what()));
    code = exit_code(ErrorKind::kIo);
  } catch (const std::ios_base::failure& e) {
    failure = fmt::format("{}: {}", error_kind_name(ErrorKind::kIo), e.what());
    code = exit_code(ErrorKind::kIo);
  } catch (const std::bad_alloc&) {
    struct rlimit address_space {};
    const bool limited = ::getrlimit(RLIMIT_AS, &address_space) == 0 && address_space.rlim_cur != RLIM_INFINITY;
    failure = msg::system_refused_allocation(limited ? static_cast<uint64_t>(address_space.rlim_cur) : 0);
    code = 6;
  } catch (const std::exception& e) {
    failure = fmt::format("internal error: {}", e.what());
    code = 70;
  }
  if (!failure.empty()) {
    if (world.size() > 1) world.abort(failure, code);
    std::fprintf(stderr, "fgm: %s\n", failure.c_str());
  }
  finalize_world_communicator();
  return code;
}

}  // namespace fgm
