// The driver of solver = "exclusive" (seed 002): config → settings, the store
// → StreamedDesign, the groups (features.groups, or random), the working-set
// fit (solvers/exclusive/working_set.h) → a linear model (a bias with exclusive.bias) that
// `fgm predict` and `fgm inspect` read like any other.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/memory_budget.h"
#include "engine/train_settings.h"
#include "io/model_file.h"
#include "io/shard_store.h"
#include "solvers/exclusive/fista_exclusive.h"
#include "solvers/exclusive/working_set.h"

namespace fgm {

struct ExclusiveSettings {
  exclusive::FistaOptions fista;
  exclusive::WorkingSetOptions working_set;
  std::string groups_path;          // features.groups (empty: random groups)
  std::string group_structure = "disjoint";
  uint64_t random_groups = 0;       // m (resolved from expected_relevant when that is set)
  uint64_t expected_relevant = 0;
  uint64_t group_seed = 1;
  std::vector<double> path_lambda;  // fgm path
  bool path_warm_start = true;      // fgm path: each λ starts from the previous one's fit
  int threads = 1;
  uint64_t block_bytes = 4 << 20;
};

// Reads the exclusive.* keys (and engine.threads, engine.block_bytes,
// features.groups); rejects keys this command and algorithm would ignore,
// naming the key and where it was set.
ExclusiveSettings exclusive_settings_from_config(const Config& config, ConfigCommand command);

struct ExclusiveOutcome {
  Model model;
  exclusive::ExclusiveFit fit;
  std::string group_source;  // "file" or "random"
  uint64_t group_count = 0;
  bool groups_disjoint = true;
  uint64_t columns = 0;      // non-empty columns of the store (the design's p)
  double seconds = 0;
  uint64_t budget_peak = 0;
  bool warm_started = false;  // fgm path: started from the previous λ's fit
};

// What a fit reads, whoever holds the rows: the design (a store's, or this
// rank's partitions of a partitioned store), its rows' ±1 labels, the groups
// over its columns, and the model every fit's model starts from (the store's
// provenance).
struct ExclusiveProblemView {
  exclusive::Design& design;
  const std::vector<double>& y;
  const exclusive::ExclusiveGroups& groups;
  std::string group_source;  // "file" or "random"
  Model base;
};

// The groups over the columns `column_ids` (ids of the design's columns):
// features.groups, or exclusive.random_groups seeded by exclusive.group_seed
// (the same groups wherever the same column count is drawn). `source`: "file" or "random".
exclusive::ExclusiveGroups exclusive_groups_for(const ExclusiveSettings& s, const std::vector<uint64_t>& column_ids,
                                                uint64_t n_features, int index_base, MemoryBudget& budget,
                                                std::string* source);

// One working-set fit at `lambda` and its linear model (with b under exclusive.bias).
ExclusiveOutcome fit_exclusive_at(const ExclusiveProblemView& problem, const ExclusiveSettings& settings,
                                  double lambda, MemoryBudget& budget,
                                  const exclusive::ExclusiveWarmStart* warm = nullptr);

// One fit per λ of settings.path_lambda (see train_exclusive_path).
std::vector<ExclusiveOutcome> fit_exclusive_path(const ExclusiveProblemView& problem, const ExclusiveSettings& settings,
                                                 MemoryBudget& budget);

// One fit at settings.fista.lambda. The store must be binary (labels ±1).
ExclusiveOutcome train_exclusive_model(const ShardStore& store, const ExclusiveSettings& settings,
                                       MemoryBudget& budget);

// A multi-class store, one-vs-rest as the FGM solver does it
// (engine/one_vs_rest.h): for each class c in the store's class order, the
// binary fit on labels +1 for class c and −1 for the rest
// (one_vs_rest_labels), one after another on the same stream, design and
// groups. So class c's model is exactly the binary run's on the data
// relabelled by hand (tested).
struct ExclusiveMulticlassOutcome {
  Model model;                            // model.classes, one per class
  std::vector<ExclusiveOutcome> classes;  // each class's fit (its binary model too)
  double seconds = 0;
  uint64_t budget_peak = 0;
};
ExclusiveMulticlassOutcome train_exclusive_one_vs_rest(const ShardStore& store, const ExclusiveSettings& settings,
                                                       MemoryBudget& budget);

// One fit per λ of settings.path_lambda, in order, sharing the stream, the
// design and the groups; with path_warm_start each fit starts from the
// previous λ's (solvers/exclusive/working_set.h ExclusiveWarmStart).
std::vector<ExclusiveOutcome> train_exclusive_path(const ShardStore& store, const ExclusiveSettings& settings,
                                                   MemoryBudget& budget);

}  // namespace fgm
