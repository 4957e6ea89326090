// The accuracy of an RBF multiple-kernel SVM at one point of the pnorm_kta
// path (engine/pnorm_kta_path.h): LIBSVM's C-SVC on the precomputed kernel
//   k(x, z) = Σ_{i ∈ S} w_i exp(−(x_i − z_i)² / (2 h_i²)),  w_i = (η_i/Ση)(n/tr_i),
// h_i the feature's median-heuristic bandwidth and tr_i its centred kernel's
// trace (solvers/pnorm_kta/alignment.h). The n × n training kernel (LIBSVM
// nodes, 16 bytes an entry) and the selected columns are reserved from the
// budget; a test row's kernel row (n entries) is formed as it is scored.
#pragma once

#include <vector>

#include "core/memory_budget.h"
#include "engine/evaluate.h"
#include "io/shard_store.h"
#include "solvers/pnorm_kta/alignment.h"
#include "solvers/pnorm_kta/kta_path.h"

namespace fgm {

struct RbfSvmEvaluation {
  EvalResult test, validation;
  double train_accuracy = 0;
};

// `test` / `validation` may be null. C is LIBSVM's cost parameter.
RbfSvmEvaluation evaluate_rbf_svm(const ShardStore& store, const std::vector<kta::FeatureAlignment>& alignments,
                                  const kta::PathPoint& point, double C, const LabeledRows* test,
                                  const LabeledRows* validation, MemoryBudget& budget);

}  // namespace fgm
