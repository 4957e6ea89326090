// `fgm path`: models at several operating points in one run.
//  * Feature counts (path.features): ONE FGM run with checkpoints at the
//    counts — the scoring passes and the warm-started APG solutions are shared
//    by all points, so the whole path costs what its largest point costs.
//  * B or C values (path.B / path.C): one FGM run per value on the same open
//    store (the pages stay cached between runs).
// Each point can be de-biased (Section 5.3) and is evaluated on the test and
// validation sets; the best point is the one with the highest validation
// accuracy (ties: fewer features).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "engine/evaluate.h"
#include "engine/fgm_trainer.h"

namespace fgm {

struct PathSettings {
  TrainSettings base;
  std::vector<uint64_t> feature_counts;
  std::vector<uint64_t> B_values;
  std::vector<double> C_values;
  bool debias = true;
  double debias_C = 0;  // 0: base.apg.C
  std::string test_path, validation_path;
};

struct PathPoint {
  int point = 0;  // 1-based
  uint64_t B = 0;
  double C = 0;
  uint64_t selected = 0;
  uint64_t nonzero = 0;          // selected features whose weight is not 0
  double train_objective = 0;
  double seconds = 0;            // since the path started
  uint64_t apg_iterations = 0;   // APG iterations spent on this point's run so far
  uint64_t gradient_evaluations = 0;
  Model model;
  bool has_debiased = false;
  Model debiased;
  EvalResult test, validation, test_debiased, validation_debiased;
};

struct PathOutcome {
  std::vector<PathPoint> points;
  int best = -1;  // index into points, -1 without validation data
  uint64_t total_apg_iterations = 0;
  uint64_t total_gradient_evaluations = 0;
  double seconds = 0;
  std::string mode;  // "features", "B" or "C"
};

// The path-level state a resume restores, besides the FGM run in progress
// (a TrainProgress): the points already emitted (their models; evaluations
// are recomputed on restore) and, for B/C lists, which run is in progress.
struct PathProgress {
  std::vector<PathPoint> points;
  uint64_t run = 0;  // B/C lists: index of the value being run
  uint64_t total_apg_iterations = 0;        // of the runs before `run`
  uint64_t total_gradient_evaluations = 0;
};

struct PathHooks {
  std::function<void(const PathPoint&)> on_point;
  // After each outer iteration (with that run's state) and after each
  // finished B/C run (train == nullptr): the state to persist for a resume.
  std::function<void(const PathProgress&, const TrainProgress* train)> on_progress;
  // Restore from these (moved from); resume_train may be null.
  PathProgress* resume = nullptr;
  TrainProgress* resume_train = nullptr;
};

// Throws a config error unless exactly one of the lists is given and valid.
void validate_path_settings(const PathSettings& settings);

PathOutcome run_fgm_path(const ShardStore& store, const PathSettings& settings, MemoryBudget& budget,
                         const PathHooks& hooks);

inline PathOutcome run_fgm_path(const ShardStore& store, const PathSettings& settings,
                                MemoryBudget& budget,
                                const std::function<void(const PathPoint&)>& on_point = {}) {
  PathHooks hooks;
  hooks.on_point = on_point;
  return run_fgm_path(store, settings, budget, hooks);
}

}  // namespace fgm
