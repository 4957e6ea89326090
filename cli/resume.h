// The resume checkpoint of `fgm train` / `fgm path` in output.dir (see
// engine/resume_checkpoint.h): opened before training, rewritten after every
// outer iteration, removed once the run's outputs are written.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/config.h"
#include "core/memory_budget.h"
#include "engine/resume_checkpoint.h"
#include "io/store_files.h"

namespace fgm::cli {

class ResumeSession {
 public:
  // Creates `out_dir` and locks it for this run (a second run writing the same
  // output.dir fails at once, exit 4), removes temporaries left there by
  // killed runs, then:
  // with `restart` removes the checkpoint (and rank files); otherwise reads it and throws a
  // config error naming every difference if it belongs to another run.
  // `final_output` (e.g. "model.fgm") tells a finished run apart.
  ResumeSession(const std::string& out_dir, RunIdentity identity, bool restart,
                const std::string& final_output, MemoryBudget& budget);
  // A run that fails (an exception unwinds the session) before writing
  // anything into an output.dir that this session created leaves no directory
  // behind: no partial output, even for errors found after the session began
  // (e.g. a solver's own settings checks).
  ~ResumeSession();
  ResumeSession(const ResumeSession&) = delete;
  ResumeSession& operator=(const ResumeSession&) = delete;

  // The state to resume from (null: start from scratch). Moved from by the run.
  TrainProgress* train() { return saved_ && saved_->train ? &*saved_->train : nullptr; }
  PathProgress* path() { return saved_ ? &saved_->path : nullptr; }
  bool resuming() const { return saved_.has_value(); }

  void save(const TrainProgress* train, const PathProgress* path);
  // Solvers other than FGM: their own state (SolverState), saved and read
  // back whole (SolverRun::resume_solver_state checks whose it is).
  void save_solver_state(const SolverState& state);
  SolverState* solver() { return saved_ && saved_->solver ? &*saved_->solver : nullptr; }
  // The run's outputs are written: its checkpoint (and a partitioned run's
  // rank files) are no longer needed.
  void finish();
  const std::string& file() const { return file_; }

 private:
  void remove_rank_files();

  std::unique_ptr<store::FileLock> lock_;  // <out_dir>/.fgm-run.lock, held for the whole run
  std::string created_dir_;                // out_dir when this session created it, else empty
  int exceptions_at_start_ = 0;            // std::uncaught_exceptions() when constructed
  std::string file_;
  RunIdentity identity_;
  MemoryBudget& budget_;
  std::optional<ResumeCheckpoint> saved_;
};

}  // namespace fgm::cli
