// One-vs-rest training on a multi-class store, on either backend (one store,
// or this rank's partitions): for each class c (increasing label value), a
// binary FGM run on labels +1 for rows of class c and -1 for the rest, each
// from scratch with the same settings. So class c's features, weights and
// bias are exactly those of a binary run on the data relabelled by hand, for
// any thread count.
// Linear and group spaces run the K problems in lockstep
// (engine/fgm_loop.h run_rows_in_lockstep): each outer iteration streams the
// data once and scores the dual vectors of all classes still running, so the
// data is streamed max_c(passes of class c) times rather than the sum. poly2,
// hik and additive run the K problems one after another, each with its own
// passes (their scoring state — pair blocks, expansion tables — is per
// vector). Lockstep holds the K runs' state at once; when that exceeds the
// budget the K runs go one after another (run warning
// "ovr_lockstep_fell_back"; the iterations of the abandoned attempt were
// already logged). Either way the models are the same.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/fgm_loop.h"
#include "engine/fgm_trainer.h"

namespace fgm {

// Labels of the one-vs-rest problem of class `c`: +1 for rows of class c, -1
// for the others; a row that `mask` leaves out (0) stays 0. n entries.
std::vector<int8_t> one_vs_rest_labels(const ShardStore& store, size_t c,
                                       const int8_t* mask = nullptr);

// A run of solver "fgm" on either backend: one binary run (the TrainOutcome
// fields), or one-vs-rest: `model` is the multi-class model, classes[c] the
// binary run of class class_labels[c] against the rest (+1: that class) with
// class_rows[c] rows; iterations and stop_reason stay empty, scoring_passes
// and total_bytes_streamed count the streams over the data, which classes in
// lockstep share; train_accuracy and majority_rate are the multi-class
// model's (argmax of the classes' decision values) for the chance check. On
// partitions: what they were and their communication (one-vs-rest: every
// class run's records, class_index set).
struct FgmOutcome : TrainOutcome, PartitionedRun {
  uint64_t iterations_restored = 0;  // outer iterations taken from a checkpoint
  std::vector<double> class_labels;
  std::vector<uint64_t> class_rows;
  std::vector<TrainOutcome> classes;
  bool lockstep = false;
};

enum class OneVsRestSchedule {
  kLockstepWherePossible,  // lockstep when the space supports it (scores_many)
  kSequential,             // one class after another (the reference the tests compare with)
};

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

 private:
  Reservation memory_;
  std::vector<std::vector<double>> best_;
  std::vector<std::vector<uint16_t>> best_class_;
};

// One class's binary run on a source: its labels per part (when the run
// owns them), its rows and its loop.
struct ClassRun {
  std::vector<std::vector<int8_t>> labels;
  Reservation labels_memory;
  std::unique_ptr<FgmRows> rows;
  std::unique_ptr<FgmLoop> loop;
};

// What one-vs-rest needs of a backend.
struct OneVsRestBackend {
  std::vector<double> values;        // the class values, increasing
  bool lockstep = false;             // the schedule, the space and the backend allow shared passes
  // What lockstep lacks, checked beforehand ("": it fits), as partitions must
  // (an out of memory on one rank would break the others' collectives);
  // nullopt: the attempt finds out, and an out of memory falls back (one store).
  std::optional<std::string> shortfall;
  // A source for one schedule (lockstep, or the classes one after another);
  // not opened until a run asks.
  std::function<std::unique_ptr<RowSource>()> make_source;
  // Class c's rows on `source` (the driver adds the loop).
  std::function<ClassRun(RowSource&, size_t c, const TrainSettings&, const TrainHooks&)> make_run;
  // The multi-class model's counts over all rows (TrainingArgmax::counts, reduced).
  std::function<std::vector<double>(const TrainingArgmax&)> counts;
};

// The K class runs on `backend`: in lockstep when it can and it fits, else
// one after another; then their models combined (with the feature transforms
// of every class), class_rows and the chance check of the multi-class model,
// the run's totals; its communication: the shared passes', the classes'
// (class_index set) and the final count's records.
FgmOutcome run_one_vs_rest(const OneVsRestBackend& backend, const TrainSettings& settings, MemoryBudget& budget);

}  // namespace fgm
