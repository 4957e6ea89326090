// Decision values w'φ(x) − b of a model on raw rows: regenerates the selected
// generated features (linear, square, cross pair, HIK/additive component)
// from the row's base features, so predict never needs the expanded data.
// The model's feature transforms (features.transform) are applied to the raw
// row first, exactly as training applied them to the store. A model with a
// kernel SVM (Model::kernel_svm) is scored by its kernel expansion instead.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "features/kernel_maps.h"
#include "features/transforms.h"
#include "io/model_file.h"

namespace fgm {

class ModelScorer {
 public:
  explicit ModelScorer(const Model& model);
  // `indices` 0-based and increasing; `values` raw (before the transforms).
  double decision(const uint64_t* indices, const float* values, size_t nnz) const;
  // Why decision() of this row is not finite, naming the features (numbered
  // with the model's index base): values the transforms take out of the
  // float range, or else the row's largest input when the sum overflows.
  std::string non_finite_cause(const uint64_t* indices, const float* values, size_t nnz) const;

 private:
  double transformed_decision(const uint64_t* indices, const float* values, size_t nnz) const;
  double value_of(const uint64_t* indices, const float* values, size_t nnz, uint64_t id) const;
  double kernel_svm_decision(const uint64_t* indices, const float* values, size_t nnz) const;
  const Model& model_;
  RowTransformer transformer_;
  double bias_;
  double linear_scale_ = 1.0, square_scale_ = 1.0, cross_scale_ = 1.0;
  // Linear terms merged into one sorted weight list (the common, fast case).
  std::vector<uint64_t> linear_ids_;
  std::vector<double> linear_weights_;
  std::vector<size_t> other_;  // indices of non-linear model features
  // HIK/additive: the evaluator and each feature's value for an absent base
  // feature (non-zero when the feature's minimum is negative).
  std::unique_ptr<ExpansionEvaluator> expansion_;
  std::vector<double> absent_value_;  // per model feature
  // Kernel SVM: 1/(2h_j²) per selected feature.
  std::vector<double> kernel_gamma_;
};

// One term of a kernel SVM: Σ_j d_j exp(−γ_j (x_j − z_j)²) over the selected
// features (x and z restricted to them, γ_j = 1/(2h_j²)). The pnorm_kta
// training kernel and the scorer both use it, so a training row and the same
// row scored later see the same kernel values.
double rbf_sum_kernel(const double* weights, const double* gammas, const float* x, const float* z, size_t m);

}  // namespace fgm
