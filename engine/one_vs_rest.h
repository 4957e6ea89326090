// One-vs-rest training on a multi-class store: for each class c (in the
// store's class order, increasing label value), a binary FGM run on labels +1
// for rows of class c and -1 for the rest (TrainSettings::labels), each from
// scratch with the same settings. So class c's features, weights and bias are
// exactly those of a binary run on the data relabelled by hand, for any
// thread count.
// Linear and group spaces run the K problems in lockstep
// (train_fgm_lockstep): each outer iteration streams the store once and
// scores the dual vectors of all classes still running, so the store is
// streamed max_c(passes of class c) times rather than the sum. poly2, hik and
// additive run the K problems one after another, each with its own passes
// (their scoring state — pair blocks, expansion tables — is per vector).
// Lockstep holds the K runs' state at once; when that exceeds the budget the
// K runs go one after another (run warning "ovr_lockstep_fell_back"; the
// iterations of the abandoned attempt were already reported to on_iteration).
// Either way the models are the same.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "engine/fgm_trainer.h"

namespace fgm {

// Labels of the one-vs-rest problem of class `c`: +1 for rows of class c, -1
// for the others; a row that `mask` leaves out (0) stays 0. n entries.
std::vector<int8_t> one_vs_rest_labels(const ShardStore& store, size_t c,
                                       const int8_t* mask = nullptr);

struct OneVsRestOutcome {
  Model model;                        // multi-class: model.classes, one per class
  std::vector<TrainOutcome> classes;  // each class's binary run (its model too)
  double seconds = 0;
  uint64_t budget_peak = 0;
  bool lockstep = false;        // the classes shared their scoring passes
  uint64_t scoring_passes = 0;  // streams over the store, all classes together
  uint64_t bytes_streamed = 0;  // what those passes read
  // The multi-class model on its training rows (argmax of the classes'
  // decision values) and the largest class's share: the chance-level check.
  double train_accuracy = std::numeric_limits<double>::quiet_NaN();
  double majority_rate = std::numeric_limits<double>::quiet_NaN();
};

enum class OneVsRestSchedule {
  kLockstepWherePossible,  // lockstep when the space supports it (scores_many)
  kSequential,             // one class after another (the reference the tests compare with)
};

// on_iteration(c, record) after each outer iteration of class c's run.
using ClassIterationCallback = std::function<void(size_t, const IterationRecord&)>;

OneVsRestOutcome train_one_vs_rest(const ShardStore& store, const TrainSettings& settings,
                                   MemoryBudget& budget,
                                   const ClassIterationCallback& on_iteration = {},
                                   OneVsRestSchedule schedule = OneVsRestSchedule::kLockstepWherePossible);

// The multi-class model of per-class binary models (same space and settings):
// their features, biases and objectives per class, the union of their
// expansion scalings. `labels` are the class values, increasing.
Model combine_class_models(const std::vector<Model>& models, const std::vector<double>& labels);

// The multi-class model's predictions on its training rows, built as the
// class runs finish (in any order): the largest decision value, a tie to the
// smaller class index (as argmax_class), for the chance-level check. The
// rows come in parts: one store is one part; a partitioned run, this rank's
// partitions (their counts then summed in the partition tree).
class TrainingArgmax {
 public:
  TrainingArgmax(const std::vector<uint64_t>& part_rows, MemoryBudget& budget, const char* remedy);
  // Class c's decision values on part q (empty: all 0, the empty model's).
  // A class may report twice (a lockstep attempt that fell back reruns it):
  // the same values, so the second changes nothing.
  void add(size_t c, size_t q, const std::vector<double>& decision);
  // Part q's counts: [0] rows predicted right, [1 + c] rows of class c.
  // class_of(i): row i's class index, SIZE_MAX for a row outside the fit.
  std::vector<double> counts(size_t q, size_t K, const std::function<size_t(uint64_t)>& class_of) const;
  // From the counts over all rows: the training accuracy and the largest
  // class's share; true when the model does no better.
  static bool at_chance_level(const std::vector<double>& total, double& train_accuracy, double& majority_rate);

 private:
  Reservation memory_;
  std::vector<std::vector<double>> best_;
  std::vector<std::vector<uint16_t>> best_class_;
};

// One-vs-rest's schedule on either backend (one store, or this rank's
// partitions): the K class runs in lockstep when `lockstep` (the space shares
// scoring passes) and it fits, else one after another, with the run warning
// "ovr_lockstep_fell_back". `shortfall`: what lockstep lacks, checked
// beforehand ("": it fits), as partitions must (an out of memory on one rank
// would break the others' collectives); nullopt: the attempt finds out, and an
// out of memory falls back (one store). Returns whether they ran in lockstep.
bool schedule_classes(size_t K, bool lockstep, const std::optional<std::string>& shortfall,
                      const std::function<void()>& run_lockstep, const std::function<void()>& run_one_by_one,
                      const std::function<void(std::string)>& warn_fell_back);

// The feature transforms of `store` (features.transform) with the statistics
// of every class's features: each class model recorded only its own, and
// predict needs them all.
void record_class_transforms(const ShardStore& store, Model& model);

}  // namespace fgm
