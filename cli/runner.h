// The runner of `fgm train` and `fgm path`: what every solver's run shares.
// It finds the solver in the registry (cli/solver_registry.h), refuses what
// the solver cannot do (naming the key, before any output), opens the data
// (a single store, or a partitioned store over the world communicator), the
// output directory's lock and resume session (rank 0), then calls the
// solver's train or path function with a SolverRun. The solver runs and hands
// its results back through SolverRun's writers: run.json / path.json opened
// the same way for either backend, the ranks' resources gathered, the
// report, and the closed session.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/distributed_train.h"
#include "cli/resume.h"
#include "cli/run_output.h"
#include "core/communicator.h"
#include "core/config.h"
#include "core/json_writer.h"
#include "core/memory_budget.h"
#include "core/run_warnings.h"
#include "engine/training_data.h"

namespace fgm::cli {

enum class RunKind { kTrain, kPath };

// One run of one solver, as the runner opened it.
struct SolverRun {
  SolverRun(const Config& config, RunKind kind, MemoryBudget& budget, RunWarnings& warnings, Communicator& comm,
            bool restart)
      : config(config), kind(kind), budget(budget), warnings(warnings), comm(comm), restart(restart),
        out_dir(config.get_string("output.dir")), dir(config.get_string("data.train")) {}

  const Config& config;
  RunKind kind;
  MemoryBudget& budget;
  RunWarnings& warnings;
  Communicator& comm;  // the world: one rank on a single store
  bool restart = false;
  std::string out_dir;                     // output.dir
  std::string dir;                         // data.train
  TrainingData* data = nullptr;            // the single store, transformed; null on a partitioned store
  std::unique_ptr<ResumeSession> session;  // rank 0 only
  std::vector<RankResources> ranks;        // after gather_outputs, on a partitioned store

  bool partitioned() const { return data == nullptr; }
  double ingest_seconds() const { return data ? data->ingest_seconds : 0.0; }
  // " ranks=N" closing a partitioned run's result line, else empty.
  std::string ranks_suffix() const;
  // Every rank calls it once its run is over (a collective on a partitioned
  // store): the ranks' resources are gathered; true on the rank that writes
  // the outputs (rank 0), which then writes them.
  bool gather_outputs(uint64_t budget_peak);
  // run.json / path.json's opening: the object begins, then engine_version,
  // solver, data (the single store's, or the partitioned store's and its
  // "distributed" section from `partitioned`) and config.
  void begin_json(JsonWriter& j, std::string_view solver, const std::map<std::string, std::string>& config_dump,
                  const PartitionedRun* partitioned, const std::vector<double>& class_labels = {}) const;
  // "data" (and on a partitioned store "distributed") alone, for a path.json
  // that opens in its own order.
  void write_data(JsonWriter& j, const PartitionedRun* partitioned) const;
  // The end of a train run: run.json closed (finish_run_json) and written, the report, the session closed.
  void finish_train(JsonWriter& j, const ModelResults& results, uint64_t budget_peak, double train_seconds);
  // The end of a path run: the warnings close path.json's object; path.csv
  // (`csv`) and path.json written atomically, the report, the session closed.
  void finish_path(JsonWriter& j, const std::string& csv);
};

// fgm train / fgm path with the config's solver; the process exit code.
int run_solver(RunKind kind, const Config& config, bool restart);

}  // namespace fgm::cli
