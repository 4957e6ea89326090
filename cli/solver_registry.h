// Every solver of `fgm train` / `fgm path` (config key `solver`): one entry
// each with its capabilities, the config keys it reads, its checks and its
// train and path functions. The runner (cli/runner.h) refuses what an entry
// cannot do, naming the key, before any output; docs/development.md shows
// how to add one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cli/runner.h"
#include "core/config.h"

namespace fgm::cli {

struct SolverCapabilities {
  bool multiclass = false;              // fgm train on a store with more than two labels
  bool multiclass_path = false;         // fgm path on such a store
  bool partitioned = false;             // a partitioned store (io/partitioned_store.h), over MPI or not
  bool partitioned_path = false;        // fgm path on a partitioned store
  bool partitioned_train_transforms = false;  // features.transform on a partitioned store (fgm train)
  bool partitioned_truth = false;       // data.truth on a partitioned store
  bool every_feature_space = false;     // features.kind other than "linear"
  bool resume = false;                  // an interrupted run resumes from its checkpoint
};

struct SolverEntry {
  std::string_view name;  // the value of `solver`
  std::string_view description;
  std::string_view path_points;  // what `fgm path` varies, for its --help
  SolverCapabilities can;
  // Checks of the config alone (settings, key combinations): before any data is opened.
  void (*check_config)(const Config& config, RunKind kind, bool partitioned) = nullptr;
  // Checks of the opened data (every rank): before the output directory and session.
  void (*check_data)(SolverRun& run) = nullptr;
  int (*train)(SolverRun& run) = nullptr;
  int (*path)(SolverRun& run) = nullptr;
};

// Every solver, in the order `fgm --help-config` lists their sections.
const std::vector<SolverEntry>& solver_registry();
// The entry of `name`; an internal error when there is none (config
// validation restricts `solver` to the registered names).
const SolverEntry& find_solver(std::string_view name);
// "fgm, sifs, ..." (`with_path_points`: "feature counts for fgm, ..."), for --help.
std::string solver_list(bool with_path_points);
// The config keys `entry` reads beyond the shared sections (data.*, engine.*,
// features.*, output.*): its own sections'.
std::vector<std::string> solver_keys(const SolverEntry& entry);

// What `entry` cannot do with `config` and this data, as a config error
// naming the key (and the solver); nothing when it can. `classes`: 0 before
// the data's labels are known.
void refuse_missing_capability(const SolverEntry& entry, const Config& config, RunKind kind, bool partitioned,
                               size_t classes);

}  // namespace fgm::cli
