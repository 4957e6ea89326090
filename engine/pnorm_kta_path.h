// The pnorm_kta driver (solver = "pnorm_kta"): the Generalized ℓ_p-KTA
// feature-selection path of Jawanpuria, Varma & Nath (ICML 2014) on a store.
//
//   1. alignments a_i: one streamed pass over the store (solvers/pnorm_kta/alignment_pass.h);
//   2. the p-path from kta.p_start to kta.p_end (solvers/pnorm_kta/kta_path.h);
//   3. at every p, the accuracy of an SVM on the selected features with the
//      kernel Σ_i w_i K_i, w_i = (η_i / Σ_j η_j)·(n / tr_i) — the paper's
//      combined kernel Σ η_i K̃_i up to a positive factor (n / Σ η), which only
//      rescales C, so the kernel's mean diagonal is 1 whatever n and the path
//      point (kta.C means the same along the path):
//        linear: the engine's APG solver (solvers/apg.h) on the columns
//          x_i·sqrt(w_i) (one batch, so ½(Σ_h‖ω_h‖)² = ½‖ω‖²: an ℓ2-regularised
//          squared-hinge SVM, with an unregularised bias, which also absorbs
//          the centring of the kernels); the model is linear in the raw features;
//        rbf: LIBSVM's C-SVC (hinge loss) on the precomputed n × n training kernel
//          (centring is absorbed by its bias too), reserved from the budget;
//          the result is a kernel-SVM model (engine/pnorm_kta_rbf_svm.h), scored
//          by the same code as `fgm predict`.
// The best test accuracy along the path is an oracle figure (the paper's
// Tables 2 and 3 report it so); the point chosen by validation accuracy, when
// data.validation is set, is not.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/memory_budget.h"
#include "core/run_warnings.h"
#include "engine/evaluate.h"
#include "engine/pnorm_kta_rbf_svm.h"
#include "features/block_stream.h"
#include "io/model_file.h"
#include "io/shard_store.h"
#include "solvers/apg.h"
#include "solvers/apg_reduction.h"
#include "solvers/pnorm_kta/alignment_pass.h"
#include "solvers/pnorm_kta/kta_path.h"

namespace fgm {

struct KtaSettings {
  kta::KernelKind kernel = kta::KernelKind::kLinear;
  kta::PathOptions path;
  double C = 1.0;          // kta.C: loss weight of the SVM that measures accuracy
  double train_p = 1.5;    // kta.p: the path point `fgm train` writes as its model
  ApgOptions apg;          // the linear SVM (loss squared hinge, bias on, C = kta.C)
  SchedulerOptions scheduler;
  uint64_t block_bytes = 4 << 20;
  std::string test_path, validation_path;
  bool evaluate = true;    // fit and evaluate an SVM at every point
  // A linear SVM whose certified APG solve ends above apg.gap_tolerance warns
  // here (null: logged only).
  RunWarnings* warnings = nullptr;
};

struct KtaPoint {
  int point = 0;              // 1-based
  double p = 0;
  uint64_t selected = 0;
  double weight_sum = 0;      // Σ η over the selected features
  double path_seconds = 0;    // predictor–corrector work for this p
  double svm_seconds = 0;     // fitting and evaluating the SVM
  uint64_t newton_steps = 0, bisection_steps = 0;
  EvalResult test, validation;  // accuracy NaN when the file is not set
  double train_accuracy = std::numeric_limits<double>::quiet_NaN();
  bool has_model = false;  // linear kernel with evaluate: the point's linear SVM
  Model model;
};

struct KtaRun {
  std::vector<kta::FeatureAlignment> alignments;  // non-empty columns, increasing id
  PassStats alignment_pass;
  double alignment_seconds = 0;
  double path_seconds = 0;  // Σ over points (path following only)
  double total_seconds = 0;
  std::vector<KtaPoint> points;
  int best_test_point = -1;        // index into points: the oracle figure
  int best_validation_point = -1;  // index into points
};

// The rows a KTA run aligns and fits on: one store (open_kta_store) or this
// rank's partitions (engine/distributed_kta.h open_kta_partitions). The path
// and `fgm train` below run over either.
class KtaData {
 public:
  virtual ~KtaData() = default;
  // Step 1: the alignments of every non-empty column (increasing id).
  virtual KtaRun align(const KtaSettings& settings) = 0;
  // The models' label map, width and provenance.
  virtual Model shape() const = 0;
  // The SVM of one path point (a partitioned run fits over its partitions).
  virtual KtaPointModel fit(const KtaSettings& settings, const std::vector<kta::FeatureAlignment>& alignments,
                            const kta::PathPoint& point) = 0;
};

std::unique_ptr<KtaData> open_kta_store(const ShardStore& store, MemoryBudget& budget);

// Steps 2 and 3 after KtaData::align; on_point is called after each point.
// data.test and data.validation (settings) are read where they are set:
// only the process that reports sets them.
void run_kta_path(KtaData& data, const KtaSettings& settings, MemoryBudget& budget, KtaRun& run,
                  const std::function<void(const KtaPoint&, const kta::PathPoint&)>& on_point);

// The training rows of the linear SVMs: one store, or this rank's partitions
// of a partitioned store, whose sums over rows `reduction` adds (LocalRowSums
// for one store, the partition tree for partitions: solvers/apg.h).
struct KtaRows {
  std::vector<const ShardStore*> parts;
  std::vector<const int8_t*> labels;  // each part's ±1 labels
  RowSumReduction* reduction = nullptr;
  uint64_t n = 0, n_positive = 0, n_negative = 0;  // over all rows of every part and process
  Model shape;                                     // the models' label map and provenance
};

// A subset of the parts' rows (a cross-validation fold's training rows,
// engine/pnorm_kta_cv.h): part q holds part_rows[q] rows and its columns come
// from read_column(q, feature, rows, values) instead of the store.
struct KtaRowSubsetColumns {
  std::vector<uint64_t> part_rows;
  std::function<void(size_t, uint64_t, std::vector<uint32_t>&, std::vector<float>&)> read_column;
};

// The linear SVM at one path point as a model on the raw features (solver
// "pnorm_kta", bias on). An empty selection gives the majority-class model.
// `subset` (optional): the parts' rows it lists instead of all.
Model fit_kta_linear_model(const KtaRows& rows, const KtaSettings& settings,
                           const std::vector<kta::FeatureAlignment>& alignments, const kta::PathPoint& point,
                           MemoryBudget& budget, const KtaRowSubsetColumns* subset = nullptr);

// `fgm train`: the path from kta.p_start down to kta.p (same step), and the
// SVM at its last point: linear, a linear model on the raw features; rbf, a
// kernel SVM (io/model_file.h KernelSvm) whose arrays `memory` holds. Fills
// `run` (alignments and the path's points, without SVMs at the intermediate
// points).
using KtaTrained = KtaPointModel;
KtaTrained train_kta_model(KtaData& data, const KtaSettings& settings, MemoryBudget& budget, KtaRun& run);

}  // namespace fgm
