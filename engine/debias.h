// De-biasing by retraining (FGM Section 5.3): after selection, refit a plain
// ℓ2-regularised model on the selected features only,
//   min_w ½‖w‖² + P(w, b)     (P the squared-hinge or logistic loss of (31)),
// which is problem (31) with all selected columns in a single group, so the
// same APG solver (one group: the Moreau projection is a ridge shrinkage)
// solves it to a tight tolerance.
#pragma once

#include <vector>

#include "cache/selected_features.h"
#include "io/model_file.h"
#include "solvers/apg.h"
#include "solvers/apg_reduction.h"

namespace fgm {

struct DebiasResult {
  Model model;          // `selected` with refit weights and bias
  ApgResult solve;
};

DebiasResult debias_refit(const SelectedFeatureCache& cache, const int8_t* labels,
                          const Model& selected, ApgOptions options, MemoryBudget& budget);

// The same refit over rows split into parts (a rank's partitions of a
// partitioned store): each part's rows of the selected columns and labels
// (`decision` is not written), every row sum added by `reduction` (the
// partition tree gives the same bits for every rank count). The one-part
// case with LocalRowSums is the refit above, bit for bit.
DebiasResult debias_refit(const std::vector<ApgRowPart>& parts, RowSumReduction& reduction, const Model& selected,
                          ApgOptions options, MemoryBudget& budget);

}  // namespace fgm
