// Model selection over the points of `fgm path`: k-fold cross-validation
// folds (row masks over one store), the held-out evaluation of a fold's
// models, the mean and standard error over folds, and the one-standard-error
// rule (Hastie, Tibshirani, Friedman, ESL 2nd ed., Section 7.10): among the
// points whose mean is within one SE of the best mean, the simplest.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "cache/selected_features.h"
#include "core/memory_budget.h"
#include "io/model_file.h"

namespace fgm {

constexpr uint16_t kNoFold = 0xffff;  // a row outside every fold (its label is 0)

// Fold of each row (0..k-1, kNoFold for label 0), stratified: the rows of each
// label value are shuffled by a fixed-seed generator (splitmix64, portable —
// no std:: distribution) and dealt round-robin, the deal continuing from one
// label to the next; so every fold holds ⌊n_c/k⌋ or ⌈n_c/k⌉ rows of each
// label c and ⌊n/k⌋ or ⌈n/k⌉ rows in all. Depends on labels, k and seed only.
BudgetedArray<uint16_t> assign_folds(const int8_t* labels, uint64_t n, int k, uint64_t seed, MemoryBudget& budget);

// assign_folds over the rows of a store split into row partitions (all rows in
// partition order), for one rank's partitions [first, first + labels.size())
// only, without the other partitions' labels: `label_rows[p]` = partition p's
// rows of label −1 and of +1, for every partition; labels[q] (−1, 0 or +1) and
// rows[q] of own partition first + q. The shuffle of each label is replayed
// whole (n generator calls on every rank) but only the own rows' positions are
// tracked, so the memory is O(own rows). Gives assign_folds' folds exactly.
std::vector<BudgetedArray<uint16_t>> assign_partition_folds(const std::vector<std::array<uint64_t, 2>>& label_rows,
                                                            uint32_t first, const std::vector<const int8_t*>& labels,
                                                            const std::vector<uint64_t>& rows, int k, uint64_t seed,
                                                            MemoryBudget& budget);

struct HeldOutEval {
  uint64_t rows = 0;
  double accuracy = std::numeric_limits<double>::quiet_NaN();
  double auc = std::numeric_limits<double>::quiet_NaN();  // NaN when the fold holds one class only
};

// The held-out rows of fold `fold` among the cache's rows, in row order: their
// decision values w'x − b (from the columns of `cache`, which holds every row
// of each selected column; model.features[k] is column k) and labels (±1
// from `labels`), appended. The caller reserves the appended entries.
void append_held_out_scores(const SelectedFeatureCache& cache, const Model& model, const int8_t* labels,
                            const uint16_t* folds, int fold, MemoryBudget& budget, std::vector<double>& scores,
                            std::vector<int8_t>& y);

// Accuracy (a score > 0 predicts +1, as in engine/evaluate) and AUC of held-out scores.
HeldOutEval held_out_eval(const std::vector<double>& scores, const std::vector<int8_t>& y);

struct MeanSe {
  double mean = std::numeric_limits<double>::quiet_NaN();
  double se = std::numeric_limits<double>::quiet_NaN();  // sample sd / √count; NaN below 2 values
  int count = 0;                                          // finite values used
};
// Mean and standard error of the finite values (NaN ones, e.g. the AUC of a
// one-class fold, are left out).
MeanSe mean_and_se(const std::vector<double>& values);

// Binomial standard error of an accuracy measured on `rows` rows: √(p(1−p)/rows).
double binomial_se(double accuracy, uint64_t rows);

struct PointChoice {
  int best = -1;    // highest mean (ties: the simpler point); -1 when no mean is finite
  int one_se = -1;  // simplest point with mean ≥ best mean − SE of the best
  double best_mean = std::numeric_limits<double>::quiet_NaN();
  double best_se = std::numeric_limits<double>::quiet_NaN();
  double threshold = std::numeric_limits<double>::quiet_NaN();
};

// `simplest_first` lists the point indices from the simplest point to the most
// complex one (see simplicity_order). NaN means are never chosen; a NaN SE
// counts as 0.
PointChoice choose_point(const std::vector<double>& means, const std::vector<double>& ses,
                         const std::vector<int>& simplest_first);

// Point indices ordered by fewer selected features, then (ties) smaller B and
// smaller C (more regularisation), then the earlier point.
std::vector<int> simplicity_order(const std::vector<uint64_t>& selected, const std::vector<uint64_t>& B,
                                  const std::vector<double>& C);

}  // namespace fgm
