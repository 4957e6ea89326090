// The driver of solver = "exclusive" (seed 002): config → settings, the store
// → StreamedDesign, the groups (features.groups, or random), the working-set
// fit (solvers/exclusive/working_set.h) → a linear model (a bias with exclusive.bias) that
// `fgm predict` and `fgm inspect` read like any other.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/memory_budget.h"
#include "engine/train_settings.h"
#include "io/model_file.h"
#include "io/shard_store.h"
#include "solvers/apg.h"
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
  std::vector<uint64_t> path_random_groups;  // fgm path: one λ path per group count m (empty: one path)
  bool path_warm_start = true;      // fgm path: each λ starts from the previous one's fit
  bool debias = false;              // fgm path: refit each λ's support (engine/debias.h)
  double debias_C = 1.0;
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
  bool has_debiased = false;  // fgm path with exclusive.debias: the refit on the nonzero weights
  Model debiased;
  ApgResult debias_solve;
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

// The data of the fits, wherever its rows live (one store here; this rank's
// partitions in engine/distributed_exclusive.h): the class values of all
// rows, the problem of each class, and the communication of each fit.
class ExclusiveData {
 public:
  virtual ~ExclusiveData() = default;
  virtual const std::vector<double>& class_values() const = 0;
  virtual const std::vector<uint64_t>& class_counts() const = 0;  // rows of each class
  virtual const std::string& where() const = 0;                    // the store's directory
  // y_i = +1 on the rows of class c (binary: c = 1, the larger label), −1 on the others.
  virtual ExclusiveProblemView problem_of_class(size_t c) = 0;
  // Replaces the groups of every later problem_of_class by m random groups
  // over the design's columns (exclusive.path_random_groups), seeded `seed`.
  virtual void use_random_groups(uint64_t m, uint64_t seed, MemoryBudget& budget) = 0;
  // A partitioned run records a fit's communication as phase `phase` of step `step`.
  virtual void begin_fit() {}
  virtual void end_fit(int /*step*/, const char* /*phase*/) {}
  const std::chrono::steady_clock::time_point opened = std::chrono::steady_clock::now();  // the run's start
};

// One store's data: one stream, design and set of groups for every fit.
// As FGM (engine/fgm_trainer.h), a store whose resident copy fits in half of
// what the budget has left stays in memory between passes.
std::unique_ptr<ExclusiveData> open_exclusive_store(const ShardStore& store, const ExclusiveSettings& settings,
                                                    MemoryBudget& budget);

// The fits of a run: binary, one; multi-class (fgm train only), one per
// class in class order, one-vs-rest as the FGM solver does it
// (engine/one_vs_rest.h), so class c's model is exactly the binary fit's on
// the data relabelled by hand (tested); a path, one per λ of
// settings.path_lambda.
struct ExclusiveRunOutcome {
  Model model;                            // binary: the fit's model; multi-class: one per class
  std::vector<ExclusiveOutcome> classes;  // the fits
  std::vector<double> class_values;       // the sorted labels of all rows
  std::vector<uint64_t> class_counts;     // rows of each class
  uint64_t budget_peak = 0;
  double seconds = 0;
};

// fgm train: one fit at settings.fista.lambda, or one per class.
void train_exclusive(ExclusiveData& data, const ExclusiveSettings& settings, MemoryBudget& budget,
                     ExclusiveRunOutcome& out);

// Called after each point of a path is fitted: its index, the number of
// points the path will have, and the point.
using ExclusivePointDone = std::function<void(size_t point, size_t points, const ExclusiveOutcome&)>;

// fgm path (a binary store): one fit per λ of settings.path_lambda, in order,
// sharing the stream, the design and the groups; with path_warm_start each
// fit starts from the previous λ's (solvers/exclusive/working_set.h ExclusiveWarmStart);
// with settings.debias each λ's nonzero weights are refit (ExclusiveOutcome::debiased).
// With settings.path_random_groups, that path once per group count m, in the
// order given (points m-major; each m's path starts cold), the groups of
// each m drawn with settings.group_seed. `done` (may be empty) hears of every point.
void path_exclusive(ExclusiveData& data, const ExclusiveSettings& settings, MemoryBudget& budget,
                    ExclusiveRunOutcome& out, const ExclusivePointDone& done = {});

}  // namespace fgm
