// The parts of run.json and path.json that several solvers write the same
// way (the runner, cli/runner.h, writes their opening and end).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/json_writer.h"
#include "core/memory_budget.h"
#include "core/run_warnings.h"
#include "engine/evaluate.h"
#include "engine/fgm_trainer.h"
#include "engine/own_partitions.h"
#include "io/model_file.h"

namespace fgm::cli {

// The features of `model` and of every class of a multi-class model.
std::vector<ModelFeature> all_features(const Model& model);

// data.test scored with `model`; a test file wider than the model adds the
// run warning test_features_beyond_model. Call it before writing anything, so
// a bad test file leaves no output.
EvalResult evaluate_test_file(const Config& config, const Model& model, MemoryBudget& budget, RunWarnings& warnings);

// One outer iteration of an FGM run (iterations[] of run.json).
void write_iteration(JsonWriter& j, const IterationRecord& r);

// "config": every key with its value, as the model records it.
void write_config_section(JsonWriter& j, const std::map<std::string, std::string>& config);

// `key`: field(x) of every x in `items`, on one line (path.json's columns).
template <class Items, class Field>
void write_column(JsonWriter& j, const char* key, const Items& items, const Field& field) {
  j.key(key).begin_array(true);
  for (const auto& x : items) j.value(field(x));
  j.end_array();
}

// "selected_features": id (in the file's index base), kind, group, weight, batch.
void write_selected_features(JsonWriter& j, const std::vector<ModelFeature>& features, int index_base);

// The columns every solver's path.csv has (docs/file-formats.md); a cell
// without a value (no data.test) is empty.
inline constexpr const char* kSharedPathColumns[] = {"point", "selected", "test_accuracy", "test_auc", "seconds"};
// A path.csv cell with 6 significant digits; empty for a value that is not finite.
std::string csv_cell(double v);

// A JSON array of communication records (run.json's and path.json's "passes").
// `class_labels`: one-vs-rest runs' labels, named by the records' class_index.
void write_communication_records(JsonWriter& j, const std::vector<CommunicationRecord>& records,
                                 const std::vector<double>& class_labels = {});

}  // namespace fgm::cli
