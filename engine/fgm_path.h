// `fgm path`: models at several operating points in one run.
//  * Feature counts (path.features): ONE FGM run with checkpoints at the
//    counts — the scoring passes and the warm-started APG solutions are shared
//    by all points, so the whole path costs what its largest point costs.
//  * B or C values (path.B / path.C): one FGM run per value on the same open
//    store (the pages stay cached between runs).
// Each point can be de-biased (Section 5.3) and is evaluated on the test and
// validation sets; the best point is the one with the highest validation
// accuracy (ties: fewer features).
// With folds = k ≥ 2, the same path is also run k times on the training rows
// of each stratified fold (the fold's rows left out of the fit) and each point
// is evaluated on the fold's held-out rows; the points get the mean and standard error over folds, and a point is
// chosen by the one-standard-error rule (engine/path_selection.h). The chosen
// point's model is the one of the full-data path (the refit on all rows).
// The FGM runs come from one path trainer over either backend (the single
// store, or a rank's partitions of a partitioned store): the points, refits,
// evaluations, folds and the choice are the same code for both.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "engine/evaluate.h"
#include "engine/fgm_trainer.h"
#include "engine/own_partitions.h"
#include "engine/path_selection.h"

namespace fgm {

struct PathSettings {
  TrainSettings base;
  std::vector<uint64_t> feature_counts;
  std::vector<uint64_t> B_values;
  std::vector<double> C_values;
  bool debias = true;
  double debias_C = 0;  // 0: base.apg.C
  std::string test_path, validation_path;
  int folds = 0;  // 0 or 1: no cross-validation
  uint64_t fold_seed = 1;
  // The per-point warnings (zero weights among the selected, a chance-level
  // point, fewer points than asked) go to base.warnings; off on the ranks
  // other than 0 of a distributed path, which would repeat them.
  bool point_warnings = true;
};

// Cross-validated accuracy and AUC of a point: mean and standard error over folds.
struct CvEstimate {
  MeanSe accuracy, auc;
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
  CvEstimate cv;          // when folds ≥ 2
  HeldOutEval held_out;   // in a fold's run: the fold's held-out rows
};

// One fold's run, compactly: its outer iterations and its points' held-out
// accuracy and AUC (index = point index of the fold's path).
struct FoldRun {
  int fold = 0;  // 1-based
  uint64_t training_rows = 0, held_out_rows = 0;
  double seconds = 0;
  std::vector<uint64_t> selected;       // per outer iteration (all runs of a B/C list, in order)
  std::vector<double> objective;
  std::vector<int> apg_iterations;
  std::vector<HeldOutEval> points;
  uint64_t total_apg_iterations = 0;
};

// One FGM run of the path (the single run of path.features, or one B/C
// value): its outer-iteration log, for path.json and the report.
struct PathRunRecord {
  uint64_t B = 0;
  double C = 0;
  std::string stop_reason;
  std::vector<IterationRecord> iterations;
};

// The chosen point: by the cross-validated accuracy when folds ≥ 2, else by
// the validation accuracy (binomial SE), else none. Both are recorded when
// both are present. Indices into PathOutcome::points.
struct PathSelection {
  std::string criterion = "none";  // "cv", "validation" or "none"
  int chosen = -1;                 // the criterion's one-SE point
  bool has_cv = false, has_validation = false;
  PointChoice cv, validation;
  uint64_t validation_rows = 0;
};

struct PathOutcome {
  std::vector<PathPoint> points;
  int best = -1;  // index into points, -1 without validation data
  uint64_t total_apg_iterations = 0;
  uint64_t total_gradient_evaluations = 0;
  double seconds = 0;
  std::string mode;  // "features", "B" or "C"
  std::vector<FoldRun> folds;
  PathSelection selection;
  std::vector<PathRunRecord> runs;  // the full-data path's runs, in order
};

// The path-level state a resume restores, besides the FGM run in progress
// (a TrainProgress): the points already emitted (their models; evaluations
// are recomputed on restore) and, for B/C lists, which run is in progress.
struct PathProgress {
  std::vector<PathPoint> points;
  uint64_t run = 0;  // B/C lists: index of the value being run
  uint64_t total_apg_iterations = 0;        // of the runs before `run`
  uint64_t total_gradient_evaluations = 0;
  std::vector<PathRunRecord> runs;  // the runs before `run`
};

struct PathHooks {
  std::function<void(const PathPoint&)> on_point;
  // After each outer iteration (with that run's state) and after each
  // finished B/C run (train == nullptr): the state to persist for a resume.
  std::function<void(const PathProgress&, const TrainProgress* train)> on_progress;
  // Cross-validation progress: a fold's run starts / ends (for the terminal).
  std::function<void(const FoldRun&, int folds)> on_fold_start, on_fold_end;
  // Restore from these (moved from); resume_train may be null.
  PathProgress* resume = nullptr;
  TrainProgress* resume_train = nullptr;
};

// Throws a config error unless exactly one of the lists is given and valid.
void validate_path_settings(const PathSettings& settings);

// Throws a config error naming path.folds when a label has fewer rows than
// folds (a fold would hold none of it). Labels: base.labels or the store's.
void validate_folds(const PathSettings& settings, const ShardStore& store);
// The same check from the row count of the smallest label.
void validate_folds(int folds, uint64_t smallest_label_rows);

struct DistributedPathOutcome {
  PathOutcome path;  // evaluations and the choice on rank 0 only
  PartitionManifest manifest;
  int ranks = 1;
  uint32_t own_partitions = 0;
  // This rank's communication: per FGM run of the path and phase (the
  // trainer's records; `iteration` counts within its run), in total, of the
  // cross-validation (fold assignment, the folds' runs, the held-out
  // gathers) and of the points' refits (the rest).
  std::vector<std::vector<CommunicationRecord>> communication;
  CommunicationStats total_communication, cv_communication, refit_communication;
  uint64_t budget_peak = 0;  // this rank's MemoryBudget peak
};

// Throws Error(kConfig) msg::multiclass_path_unsupported when the partitions
// of `store_dir` hold more than two label values together (a path is binary,
// as on one store). Collective: every rank opens its own partitions' stores
// and the label values are gathered; call before anything is written.
// With `folds` ≥ 2 it also refuses more folds than the smaller class has
// rows over all partitions (validate_folds, as on one store).
void check_partitioned_path_data(Communicator& comm, const std::string& store_dir, int folds, MemoryBudget& budget);

// The path on the single store `store`, or (null) data-parallel on this
// rank's partitions of the partitioned store `store_dir` over `comm`
// (docs/distributed.md, "fgm path"): every rank runs the whole path (the
// collectives need all of them); only rank 0 reads data.test and
// data.validation, evaluates the points and warns. The one path trainer
// serves both: path.features is one FGM run with checkpoints at the counts,
// path.B / path.C one run per value (engine/distributed_fgm.h, either
// backend); each point is de-biased over the rows it was trained on
// (engine/debias.h, row sums in the partition tree), so every point's model
// and refit are the same bits for every rank count dividing the partition
// count and any engine.threads. path.folds = k: the folds of
// engine/path_selection.h over all rows (on partitions each rank deals its
// own rows their folds from the per-partition label counts), each fold's
// path trained with its held-out rows left out, each point's held-out
// decision values and labels gathered on rank 0 in row order. A run resumes
// from the PathHooks' state (every rank reads the same checkpoint; rank 0
// writes it from on_progress).
DistributedPathOutcome run_fgm_path(Communicator& comm, const ShardStore* store, const std::string& store_dir,
                                    const PathSettings& settings, MemoryBudget& budget, const PathHooks& hooks = {});
// The single store's path, in this process.
PathOutcome run_fgm_path(const ShardStore& store, const PathSettings& settings, MemoryBudget& budget,
                         const PathHooks& hooks = {});

}  // namespace fgm
