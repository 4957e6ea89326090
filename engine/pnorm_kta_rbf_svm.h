// The RBF multiple-kernel SVM at one point of the pnorm_kta path
// (engine/pnorm_kta_path.h): LIBSVM's C-SVC on the precomputed kernel
//   k(x, z) = Σ_{i ∈ S} d_i exp(−(x_i − z_i)² / (2 h_i²)),  d_i = (η_i/Ση)(n/tr_i),
// h_i the feature's median-heuristic bandwidth and tr_i its centred kernel's
// trace (solvers/pnorm_kta/alignment.h). The n × n training kernel (LIBSVM
// nodes, 16 bytes an entry) and the selected columns are reserved from the
// budget while LIBSVM trains. The result is a model file's kernel SVM
// (io/model_file.h KernelSvm): the selected features with d_i and h_i, the
// support vectors restricted to them, the dual coefficients and the offset,
// oriented towards the positive label; features/model_scorer.h scores it.
#pragma once

#include <limits>
#include <vector>

#include "core/memory_budget.h"
#include "io/model_file.h"
#include "io/shard_store.h"
#include "solvers/pnorm_kta/alignment.h"
#include "solvers/pnorm_kta/kta_path.h"

namespace fgm {

// The SVM of one point of the path (a linear model, or the RBF kernel SVM
// whose arrays `memory` holds) and, RBF only, its training accuracy.
struct KtaPointModel {
  Model model;
  Reservation memory;  // the model's kernel SVM arrays (support vectors)
  double train_accuracy = std::numeric_limits<double>::quiet_NaN();
};

// The point's kernel weights d_i = (η_i/Ση)(n/tr_i) of its active features,
// in order (`n`: the training rows).
std::vector<double> kta_kernel_weights(const std::vector<kta::FeatureAlignment>& alignments,
                                       const kta::PathPoint& point, uint64_t n);

// `shape` carries the label map and provenance (solver, store checksums,
// transforms); the fit fills its kernel SVM and bias. An empty selection
// gives the majority-class model (no support vectors, decision −bias).
// C is LIBSVM's cost parameter.
KtaPointModel fit_kta_rbf_model(const ShardStore& store, const std::vector<kta::FeatureAlignment>& alignments,
                            const kta::PathPoint& point, double C, Model shape, MemoryBudget& budget);

// Cross-validation (engine/pnorm_kta_cv.h): for each C of `Cs`, the number of
// `held` rows that LIBSVM's C-SVC (the same parameters as fit_kta_rbf_model)
// trained on `train` classifies correctly. Rows are dense over the m selected
// features (row-major), `weight` the d_i and `gamma` the 1/(2h_i²); the
// training kernel is built once for all C (reserved from the budget). With
// m = 0 every held row gets the training rows' majority class (+1 on a tie),
// as fit_kta_rbf_model's empty model does.
std::vector<uint64_t> kta_rbf_held_out_correct(const std::vector<float>& train, const std::vector<int8_t>& train_labels,
                                               const std::vector<float>& held, const std::vector<int8_t>& held_labels,
                                               const std::vector<double>& weight, const std::vector<double>& gamma,
                                               const std::vector<double>& Cs, MemoryBudget& budget);

}  // namespace fgm
