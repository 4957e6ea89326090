// `fgm train` and `fgm path` for the solvers other than FGM (config key
// `solver`, engine/solver_choice.h). The commands do the shared setup — config
// checks, the memory budget, the training data opened and transformed, the
// resume session — then hand over here; each solver writes its model(s),
// run.json or path.csv/path.json and the report through cli/run_output.h.
#pragma once

#include <string>

#include "cli/resume.h"
#include "core/communicator.h"
#include "core/config.h"
#include "core/memory_budget.h"
#include "core/run_warnings.h"
#include "engine/solver_choice.h"
#include "engine/training_data.h"

namespace fgm::cli {

struct SolverCommand {
  const Config& config;
  TrainingData& data;  // opened, checked against the config, feature transforms applied
  MemoryBudget& budget;
  RunWarnings& warnings;
  std::string out_dir;      // output.dir (not yet created)
  ResumeSession* session;   // closed by the solver's finish (finish_run does it)
};

// solver = "sifs" (cli/sifs_command.cpp).
int train_sifs(SolverCommand& command);
int path_sifs(SolverCommand& command);
// solver = "exclusive" (cli/exclusive_command.cpp).
int train_exclusive(SolverCommand& command);
int path_exclusive(SolverCommand& command);
// solver = "mslr" (cli/mslr_command.cpp).
int train_mslr(SolverCommand& command);
int path_mslr(SolverCommand& command);

// Run `solver` (not kFgm) for `fgm train` / `fgm path`; the process exit code.
int dispatch_solver_train(SolverKind solver, SolverCommand& command);
int dispatch_solver_path(SolverKind solver, SolverCommand& command);

// solver = "pnorm_kta" (cli/pnorm_kta_command.cpp).
int train_pnorm_kta(SolverCommand& command);
int path_pnorm_kta(SolverCommand& command);

// Each solver on a partitioned store, with or without mpirun (every rank runs
// it; rank 0 writes the outputs): sifs, exclusive, mslr and pnorm_kta with
// kta.kernel = "linear" (engine/distributed_<solver>.h).
int train_sifs_partitioned(const Config& config, MemoryBudget& budget, Communicator& comm, bool restart,
                           RunWarnings& warnings);
int path_sifs_partitioned(const Config& config, MemoryBudget& budget, Communicator& comm, bool restart,
                          RunWarnings& warnings);
int train_exclusive_partitioned(const Config& config, MemoryBudget& budget, Communicator& comm, bool restart,
                                RunWarnings& warnings);
int path_exclusive_partitioned(const Config& config, MemoryBudget& budget, Communicator& comm, bool restart,
                               RunWarnings& warnings);
int train_mslr_partitioned(const Config& config, MemoryBudget& budget, Communicator& comm, bool restart,
                           RunWarnings& warnings);
int path_mslr_partitioned(const Config& config, MemoryBudget& budget, Communicator& comm, bool restart,
                          RunWarnings& warnings);
int train_pnorm_kta_partitioned(const Config& config, MemoryBudget& budget, Communicator& comm, bool restart,
                                RunWarnings& warnings);
int path_pnorm_kta_partitioned(const Config& config, MemoryBudget& budget, Communicator& comm, bool restart,
                               RunWarnings& warnings);

}  // namespace fgm::cli
