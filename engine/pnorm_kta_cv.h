// Model selection for solver = "pnorm_kta" (`fgm path` with path.folds = k ≥ 2):
// the paper's protocol (Jawanpuria, Varma & Nath, ICML 2014, Section 6: λ₁, λ₂
// and the SVM's C "by 5-fold cross-validation while varying p from 2 to 1").
//
//   1. folds: assign_folds (engine/path_selection.h), the same stratified,
//      seeded folds as FGM's path.folds;
//   2. each fold's alignments on its k−1 training folds only (centring, trace
//      normalisation and RBF bandwidths from those rows), all folds in one
//      streamed pass (solvers/pnorm_kta/alignment_pass.h);
//   3. for each (λ₁, λ₂) of kta.lambda1_grid × kta.lambda2_grid, each fold's
//      path (the same p grid for every fold) and at every point, for each C of
//      kta.C_grid, the point's SVM (engine/pnorm_kta_path.h: the linear APG
//      fit on the fold's training rows, or LIBSVM's C-SVC on their kernel)
//      scored on the fold's held-out rows;
//   4. a candidate (λ₁, λ₂, point, C) scores the held-out rows it classifies
//      correctly, summed over the k folds (every row is held out once, so this
//      is the pooled CV accuracy). The choice: the most correct rows; ties
//      go to the larger λ₂, then the larger λ₁, then the smaller C (more
//      regularisation each), then the later point (smaller p, sparser).
// Every step is the single-store code on the fold's rows, each row set a
// store of its own would hold in the same order, so a fold's numbers equal a
// run on such a store (tests/engine/test_pnorm_kta_cv.cpp checks this against
// stores written from the folds). Deterministic for any thread count.
// The caller then refits the path on all training rows with the chosen
// (λ₁, λ₂, C); the chosen point's test accuracy there is an honest estimate,
// unlike the best test accuracy along the path (an oracle figure).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json_writer.h"
#include "core/memory_budget.h"
#include "engine/pnorm_kta_path.h"
#include "io/shard_store.h"

namespace fgm {

struct KtaCvOptions {
  int folds = 0;  // k ≥ 2
  uint64_t seed = 1;
  std::vector<double> lambda1s, lambda2s, Cs;  // the grids, each non-empty
};

struct KtaCvCandidate {
  double lambda1 = 0, lambda2 = 0, C = 0, p = 0;
  int point = 0;             // 1-based along the path
  uint64_t correct = 0;      // held-out rows classified correctly, over all folds
  uint64_t rows = 0;         // held-out rows, over all folds (= n)
  std::vector<double> fold_accuracy;  // per fold
  double mean_selected = 0;  // features selected, mean over folds
  double accuracy() const { return rows ? static_cast<double>(correct) / static_cast<double>(rows) : 0.0; }
};

struct KtaCvResult {
  int folds = 0;
  uint64_t seed = 1;
  std::vector<uint64_t> fold_rows;  // held-out rows of each fold
  // Order: λ₁ (grid order), λ₂, point, C (innermost).
  std::vector<KtaCvCandidate> candidates;
  int chosen = -1;  // index into candidates
  double seconds = 0;
};

// The tie rule of step 4 over `candidates`; -1 when empty.
int choose_kta_candidate(const std::vector<KtaCvCandidate>& candidates);

// Steps 1–4 on one store (two labels; each label needs ≥ k rows: a config
// error naming path.folds otherwise). settings.path's p grid and ε, the
// kernel, apg.* and the scheduler apply; its λ₁, λ₂ and C are replaced by the
// grids'.
KtaCvResult cross_validate_kta(const ShardStore& store, const KtaSettings& settings, const KtaCvOptions& options,
                               MemoryBudget& budget);

// path.json's "cross_validation" section: folds, seed, grids, the rule, the
// choice with its CV accuracy (and standard error over folds) and, from the
// refit on all rows (`refit`, run with the chosen λ₁, λ₂, C), the chosen
// point's selection and test accuracy next to the oracle figure.
void write_kta_cv_section(JsonWriter& j, const KtaCvOptions& options, const KtaCvResult& cv, const KtaRun& refit);

// cv.csv: one row per candidate.
std::string kta_cv_csv(const KtaCvResult& cv);

}  // namespace fgm
