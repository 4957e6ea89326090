// The parts of run.json that every solver writes the same way, and the end of
// every `fgm train` run: test metrics, planted-truth recovery, resources,
// warnings, the atomic write and the report (the runner, cli/runner.h, closes
// the resume session).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/json_writer.h"
#include "core/memory_budget.h"
#include "core/run_warnings.h"
#include "engine/evaluate.h"
#include "engine/fgm_trainer.h"
#include "engine/training_data.h"
#include "io/model_file.h"

namespace fgm::cli {

struct TruthRecovery {
  uint64_t recovered = 0, planted = 0, recovered_cross = 0, planted_cross = 0;
};

// How many planted features (data.truth) are among `features`.
TruthRecovery recover_truth(const std::string& truth_path, const std::vector<ModelFeature>& features);

// What a train run learns of its final model before writing anything:
// data.test's metrics and data.truth's recovery, each when configured.
struct ModelResults {
  std::optional<EvalResult> test;
  std::optional<TruthRecovery> truth;
  const EvalResult* test_or_null() const { return test ? &*test : nullptr; }
};

// The end of a train run before run.json: the model's provenance completed
// (model.config: every key's value), data.test scored, data.truth recovered
// among `truth_among` (null: not recovered), then output.dir/model.fgm written.
ModelResults score_and_write_model(const Config& config, Model& model,
                                   const std::vector<ModelFeature>* truth_among, MemoryBudget& budget,
                                   RunWarnings& warnings);

// The features of `model` and of every class of a multi-class model.
std::vector<ModelFeature> all_features(const Model& model);

// The result line of `fgm train`: its opening "recovered=R/P " with
// data.truth (and "recovered_cross=R/P " when `cross` and crosses were
// planted), and its end " accuracy=… auc=…" with data.test, then the model.
void print_truth(const ModelResults& results, bool cross);
void print_test_and_model(const ModelResults& results, const std::string& out_dir);

// data.test scored with `model`; a test file wider than the model adds the
// run warning test_features_beyond_model. Call it before writing anything, so
// a bad test file leaves no output.
EvalResult evaluate_test_file(const Config& config, const Model& model, MemoryBudget& budget, RunWarnings& warnings);

// "data": the training file, its store and its shape.
void write_data_section(JsonWriter& j, const Config& config, const TrainingData& data);

// One outer iteration of an FGM run (iterations[] of run.json).
void write_iteration(JsonWriter& j, const IterationRecord& r);

// "config": every key with its value, as the model records it.
void write_config_section(JsonWriter& j, const std::map<std::string, std::string>& config);

// run.json of a one-vs-rest FGM run after its opening (single-store and
// distributed): "multiclass", each class run (class c is labels[c] with
// rows[c] rows, test_auc when data.test was scored) and their totals;
// `scoring_passes` counts the store's streams, which classes in lockstep share.
void write_one_vs_rest_runs(JsonWriter& j, const std::vector<TrainOutcome>& classes, const std::vector<double>& labels,
                            const std::vector<uint64_t>& rows, int index_base, const EvalResult* test, bool lockstep,
                            uint64_t scoring_passes);

// "selected_features": id (in the file's index base), kind, group, weight, batch.
void write_selected_features(JsonWriter& j, const std::vector<ModelFeature>& features, int index_base);

// The columns every solver's path.csv has (docs/file-formats.md); a cell
// without a value (no data.test) is empty.
inline constexpr const char* kSharedPathColumns[] = {"point", "selected", "test_accuracy", "test_auc", "seconds"};
// A path.csv cell with 6 significant digits; empty for a value that is not finite.
std::string csv_cell(double v);

// The run's warnings as [{"code": ..., "message": ...}] (run.json and path.json).
void write_warnings(JsonWriter& j, const RunWarnings& warnings);

// The end of every train run (any solver, binary and multi-class; called by
// SolverRun::finish_train): resources, test metrics, truth recovery and
// warnings close run.json's object; the file is written atomically, then the
// report.
void finish_run_json(JsonWriter& j, const MemoryBudget& budget, uint64_t budget_peak, double train_seconds,
                     double ingest_seconds, const Config& config, const ModelResults& results,
                     const RunWarnings& warnings, const std::string& out_dir);

}  // namespace fgm::cli
