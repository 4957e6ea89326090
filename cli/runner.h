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
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/resume.h"
#include "cli/run_output.h"
#include "core/communicator.h"
#include "core/config.h"
#include "core/json_writer.h"
#include "core/memory_budget.h"
#include "core/run_warnings.h"
#include "engine/distributed_fgm.h"
#include "engine/training_data.h"

namespace fgm::cli {

enum class RunKind { kTrain, kPath };

// What a train run hands to SolverRun::finish_train once its model is
// trained: the model's provenance is completed, data.test scored (a failure
// keeps model.fgm), data.truth recovered among `truth_among` (null: the
// model's features, every class's), model.fgm written; run.json opened
// (begin_json), `sections` add the solver's own, then resources, test
// metrics, truth and warnings close it; the report, the session closed, and
// the result line: "recovered=R/P " (`cross_truth`: "recovered_cross=R/P "
// too), `summary`, " ranks=N" on a partitioned store, " accuracy=… auc=…"
// with data.test, then the model.
struct TrainOutputs {
  std::string_view solver;
  Model* model = nullptr;
  const std::vector<ModelFeature>* truth_among = nullptr;
  const PartitionedRun* partitioned = nullptr;
  uint64_t budget_peak = 0;
  double train_seconds = 0;
  std::function<void(JsonWriter& j, const EvalResult* test)> sections;
  bool cross_truth = false;
  const std::vector<double>* class_labels = nullptr;  // a partitioned one-vs-rest run's ("distributed" names them)
  std::string summary;
};

// The ranks' peak RSS and budget peaks (run.json's "distributed").
struct RankResources {
  uint64_t peak_rss_bytes = 0, budget_peak_bytes = 0;
};

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
  RunIdentity identity;                    // the run's resume identity (every rank)
  std::unique_ptr<ResumeSession> session;  // rank 0 only
  std::vector<RankResources> ranks;        // after gather_outputs, on a partitioned store

  bool partitioned() const { return data == nullptr; }
  // The checkpoint the run resumes from, on every rank (a single store: one):
  // rank 0's session decides and tells the others, which read the same file
  // (output.dir is on a file system all ranks share, like the store). Empty:
  // start from scratch.
  std::optional<ResumeCheckpoint> resume_checkpoint();
  // A solver other than FGM: the SolverState `solver` saved, on every rank as
  // resume_checkpoint (empty: start from scratch); on a partitioned store
  // `rank_share` receives this rank's share from its rank file.
  std::optional<SolverState> resume_solver_state(const std::string& solver, std::string& rank_share);
  // Saves `state` after step `step` (>= 1). On a partitioned store every rank
  // first writes its share `rank_share` (state that stays with its rows) to
  // its rank file, then, once every rank's is on disk, rank 0 the checkpoint
  // naming them; the files of step − 2 go (rank 0 saved step − 1 before this
  // step's collectives, so no checkpoint names them).
  void save_solver_state(SolverState state, uint64_t step, const std::string& rank_share);
  // A path's largest feature count `largest` (config key `key`) beyond the
  // store's width, which no path can reach: a config error before the run.
  void refuse_counts_beyond_width(const char* key, uint64_t largest) const;
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
  // The end of a train run on the rank that writes the outputs (see TrainOutputs); returns the exit code 0.
  int finish_train(const TrainOutputs& out);
  // A path point's model: the run's config recorded, written as output.dir/point-<k>.fgm.
  void write_point_model(const std::string& k, Model model) const;
  // The end of a path run: the warnings close path.json's object; path.csv
  // (`csv`) and path.json written atomically, the report, the session
  // closed; the result line is `summary` and " ranks=N" on a partitioned store.
  void finish_path(JsonWriter& j, const std::string& csv, const std::string& summary);
};

}  // namespace fgm::cli
