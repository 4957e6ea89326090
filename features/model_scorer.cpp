#include "features/model_scorer.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/error.h"

namespace fgm {

ModelScorer::ModelScorer(const Model& model)
    : model_(model), transformer_(model.transforms, "model"), bias_(model.has_bias ? model.bias : 0.0) {
  if (model.feature_kind == "poly2") {
    linear_scale_ = std::sqrt(2.0 * model.gamma * model.coef0);
    square_scale_ = model.gamma;
    cross_scale_ = std::sqrt(2.0) * model.gamma;
  }
  std::map<uint64_t, double> linear;
  for (size_t i = 0; i < model.features.size(); ++i) {
    const ModelFeature& f = model.features[i];
    if (f.key.kind == FeatureKind::kLinear || f.key.kind == FeatureKind::kGroup)
      linear[f.key.ids[0]] += f.weight * linear_scale_;
    else
      other_.push_back(i);
  }
  for (const auto& [id, w] : linear) {
    linear_ids_.push_back(id);
    linear_weights_.push_back(w);
  }
  for (double h : model.kernel_svm.bandwidths) kernel_gamma_.push_back(1.0 / (2.0 * h * h));
  if (model.feature_kind == "hik" || model.feature_kind == "additive") {
    expansion_ = std::make_unique<ExpansionEvaluator>(model);
    absent_value_.assign(model.features.size(), 0.0);
    for (size_t k : other_) absent_value_[k] = expansion_->value(model.features[k], 0.0);
  }
}

double ModelScorer::value_of(const uint64_t* indices, const float* values, size_t nnz, uint64_t id) const {
  const uint64_t* it = std::lower_bound(indices, indices + nnz, id);
  return (it != indices + nnz && *it == id) ? static_cast<double>(values[it - indices]) : 0.0;
}

double ModelScorer::decision(const uint64_t* indices, const float* values, size_t nnz) const {
  if (transformer_.empty()) return transformed_decision(indices, values, nnz);
  std::vector<float> transformed;
  transformer_.apply(indices, values, nnz, transformed);
  return transformed_decision(indices, transformed.data(), nnz);
}

std::string ModelScorer::non_finite_cause(const uint64_t* indices, const float* values, size_t nnz) const {
  std::vector<float> x(values, values + nnz);
  std::string transforms;
  for (const ModelTransform& t : model_.transforms) transforms += (transforms.empty() ? "" : ",") + t.name;
  if (!transformer_.empty()) transformer_.apply(indices, values, nnz, x);
  const uint64_t base = static_cast<uint64_t>(model_.index_base);
  std::string named;
  size_t count = 0, largest = nnz;
  for (size_t k = 0; k < nnz; ++k) {
    if (largest == nnz || std::fabs(x[k]) > std::fabs(x[largest])) largest = k;
    if (std::isfinite(x[k])) continue;
    if (++count <= 3)
      named += fmt::format("{}feature {} (value {} is {} after features.transform [{}])", named.empty() ? "" : ", ",
                           indices[k] + base, values[k], x[k], transforms);
  }
  if (count > 3) named += fmt::format(" and {} more", count - 3);
  if (count > 0) return named;
  if (largest == nnz) return "the model's bias is not finite";
  return fmt::format("the weighted sum overflows (the row's largest {}value: feature {} = {})",
                     transforms.empty() ? "" : "transformed ", indices[largest] + base, x[largest]);
}

double rbf_sum_kernel(const double* weights, const double* gammas, const float* x, const float* z, size_t m) {
  double k = 0;
  for (size_t j = 0; j < m; ++j) {
    const double d = static_cast<double>(x[j]) - static_cast<double>(z[j]);
    k += weights[j] * std::exp(-gammas[j] * d * d);
  }
  return k;
}

// Σ_s c_s k(x, sv_s) − b, summed over the support vectors in their stored order.
double ModelScorer::kernel_svm_decision(const uint64_t* indices, const float* values, size_t nnz) const {
  const KernelSvm& k = model_.kernel_svm;
  const size_t m = k.feature_ids.size();
  std::vector<float> x(m, 0.0f);
  for (size_t j = 0, i = 0; j < m && i < nnz; ++j) {  // merge walk: both increasing
    while (i < nnz && indices[i] < k.feature_ids[j]) ++i;
    if (i < nnz && indices[i] == k.feature_ids[j]) x[j] = values[i];
  }
  double s = 0;
  for (size_t sv = 0; sv < k.n_support(); ++sv)
    s += k.dual_coefs[sv] * rbf_sum_kernel(k.kernel_weights.data(), kernel_gamma_.data(), x.data(),
                                           k.support_vectors.data() + sv * m, m);
  return s - bias_;
}

double ModelScorer::transformed_decision(const uint64_t* indices, const float* values, size_t nnz) const {
  if (model_.has_kernel_svm()) return kernel_svm_decision(indices, values, nnz);
  double s = 0;
  // Merge walk of two sorted lists.
  size_t j = 0;
  for (size_t i = 0; i < nnz && j < linear_ids_.size(); ++i) {
    if (indices[i] < linear_ids_[j]) continue;
    j = static_cast<size_t>(std::lower_bound(linear_ids_.begin() + j, linear_ids_.end(), indices[i]) -
                            linear_ids_.begin());
    if (j < linear_ids_.size() && linear_ids_[j] == indices[i]) s += linear_weights_[j] * values[i];
  }
  for (size_t k : other_) {
    const ModelFeature& f = model_.features[k];
    switch (f.key.kind) {
      case FeatureKind::kSquare: {
        double x = value_of(indices, values, nnz, f.key.ids[0]);
        s += f.weight * square_scale_ * x * x;
        break;
      }
      case FeatureKind::kCross: {
        double x = value_of(indices, values, nnz, f.key.ids[0]);
        if (x == 0) break;
        s += f.weight * cross_scale_ * x * value_of(indices, values, nnz, f.key.ids[1]);
        break;
      }
      case FeatureKind::kHik:
      case FeatureKind::kAdditive: {
        FGM_ASSERT(expansion_ != nullptr);
        const uint64_t* it = std::lower_bound(indices, indices + nnz, f.key.ids[0]);
        bool present = it != indices + nnz && *it == f.key.ids[0];
        s += f.weight * (present ? expansion_->value(f, values[it - indices]) : absent_value_[k]);
        break;
      }
      default:
        throw Error(ErrorKind::kInternal, std::string("prediction for feature kind ") +
                                              feature_kind_name(f.key.kind) + " is not available");
    }
  }
  return s - bias_;
}

}  // namespace fgm
