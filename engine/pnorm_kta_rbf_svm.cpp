#include "engine/pnorm_kta_rbf_svm.h"

#include <svm.h>

#include <memory>

#include "core/error.h"
#include "core/messages.h"
#include "features/model_scorer.h"

namespace fgm {
namespace {

void silent(const char*) {}

// The selected features' kernel weights, bandwidths and training rows
// restricted to them (dense, row-major: n × m).
struct SelectedKernels {
  std::vector<uint64_t> ids;
  std::vector<double> weight, bandwidth, gamma;  // d_i, h_i, 1/(2h_i²)
  std::vector<float> rows;
  Reservation memory;
  size_t m() const { return ids.size(); }
  const float* row(uint64_t r) const { return rows.data() + r * m(); }
};

SelectedKernels load_selected(const ShardStore& store, const std::vector<kta::FeatureAlignment>& alignments,
                              const kta::PathPoint& point, MemoryBudget& budget) {
  const uint64_t n = store.info().n_rows;
  SelectedKernels s;
  const size_t m = point.active.size();
  s.memory = budget.reserve(m * n * sizeof(float), "selected columns of the KTA kernel SVM");
  s.weight = kta_kernel_weights(alignments, point, n);
  s.rows.assign(m * n, 0.0f);
  std::vector<uint32_t> rows;
  std::vector<float> values;
  for (size_t k = 0; k < m; ++k) {
    const kta::FeatureAlignment& f = alignments[point.active[k]];
    s.ids.push_back(f.feature);
    s.bandwidth.push_back(f.bandwidth);
    s.gamma.push_back(1.0 / (2.0 * f.bandwidth * f.bandwidth));
    store.read_column(f.feature, rows, values);
    for (size_t e = 0; e < rows.size(); ++e) s.rows[rows[e] * m + k] = values[e];
  }
  return s;
}

struct ModelDeleter {
  void operator()(svm_model* m) const { svm_free_and_destroy_model(&m); }
};

// LIBSVM's model as the model file's kernel SVM: support vector s is
// training row SV[s][0].value (1-based: the precomputed kernel's row id).
// LIBSVM's decision Σ coef·k − rho favours label[0]; turned towards +1.
Reservation take_support_vectors(const svm_model& svm, const SelectedKernels& s, uint64_t n, Model& model,
                                 MemoryBudget& budget) {
  KernelSvm& k = model.kernel_svm;
  const size_t m = s.m();
  const size_t l = static_cast<size_t>(svm.l);
  k.training_rows = n;
  k.feature_ids = s.ids;
  k.kernel_weights = s.weight;
  k.bandwidths = s.bandwidth;
  Reservation memory = budget.reserve(l * m * sizeof(float) + l * sizeof(double) + m * 24,
                                      "support vectors of the KTA kernel SVM");
  if (svm.nr_class < 2) {  // one label in the training rows: a constant model
    model.bias = svm.label[0] > 0 ? -1.0 : 1.0;
    return memory;
  }
  const double sign = svm.label[0] > 0 ? 1.0 : -1.0;
  k.support_vectors.reserve(l * m);
  for (size_t sv = 0; sv < l; ++sv) {
    const uint64_t r = static_cast<uint64_t>(svm.SV[sv][0].value) - 1;
    FGM_ASSERT(r < n);
    k.support_vectors.insert(k.support_vectors.end(), s.row(r), s.row(r) + m);
    k.dual_coefs.push_back(sign * svm.sv_coef[0][sv]);
  }
  model.bias = sign * svm.rho[0];
  return memory;
}

// LIBSVM's precomputed kernel of `total` rows (row r's m dense features at
// row(r)) against the first n, the training rows: per row its 1-based id,
// the n kernel values and the end marker, reserved from the budget.
struct PrecomputedKernel {
  Reservation memory;
  std::vector<svm_node> nodes;
  std::vector<svm_node*> rows;
};

template <class Row>
PrecomputedKernel precomputed_kernel(uint64_t n, uint64_t total, const Row& row, const std::vector<double>& weight,
                                     const std::vector<double>& gamma, MemoryBudget& budget) {
  PrecomputedKernel k;
  const uint64_t bytes = total * (n + 2) * sizeof(svm_node);
  try {
    k.memory = budget.reserve(bytes, "training kernel of the KTA kernel SVM");
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kOutOfMemory) throw;
    throw Error(ErrorKind::kOutOfMemory, msg::kta_kernel_too_large(n, bytes, budget.limit()));
  }
  k.nodes.resize(total * (n + 2));
  k.rows.resize(total);
  for (uint64_t r = 0; r < total; ++r) {
    svm_node* nodes = k.nodes.data() + r * (n + 2);
    k.rows[r] = nodes;
    nodes[0] = {0, static_cast<double>(r + 1)};
    for (uint64_t c = 0; c < n; ++c)
      nodes[c + 1] = {static_cast<int>(c + 1), rbf_sum_kernel(weight.data(), gamma.data(), row(r), row(c), weight.size())};
    nodes[n + 1] = {-1, 0.0};
  }
  return k;
}

// LIBSVM's C-SVC with cost C on the first n rows of `kernel` (every KTA kernel SVM's parameters).
std::unique_ptr<svm_model, ModelDeleter> train_svm(PrecomputedKernel& kernel, std::vector<double>& labels, double C) {
  svm_problem problem{static_cast<int>(labels.size()), labels.data(), kernel.rows.data()};
  svm_parameter param{};
  param.svm_type = C_SVC;
  param.kernel_type = PRECOMPUTED;
  param.cache_size = 64;
  param.eps = 1e-3;
  param.C = C;
  param.shrinking = 1;
  if (const char* problem_text = svm_check_parameter(&problem, &param))
    throw Error(ErrorKind::kInternal, std::string("LIBSVM parameters: ") + problem_text);
  svm_set_print_string_function(silent);
  return std::unique_ptr<svm_model, ModelDeleter>(svm_train(&problem, &param));
}

}  // namespace

std::vector<double> kta_kernel_weights(const std::vector<kta::FeatureAlignment>& alignments,
                                       const kta::PathPoint& point, uint64_t n) {
  double weight_sum = 0;
  for (double w : point.weights) weight_sum += w;
  std::vector<double> weight;
  for (size_t k = 0; k < point.active.size(); ++k)
    weight.push_back(point.weights[k] / weight_sum * static_cast<double>(n) / alignments[point.active[k]].trace);
  return weight;
}

KtaPointModel fit_kta_rbf_model(const ShardStore& store, const std::vector<kta::FeatureAlignment>& alignments,
                            const kta::PathPoint& point, double C, Model shape, MemoryBudget& budget) {
  const StoreInfo& info = store.info();
  const uint64_t n = info.n_rows;
  const int8_t* y = store.labels();
  KtaPointModel fit;
  fit.model = std::move(shape);
  fit.model.has_bias = true;
  fit.model.C = C;
  fit.model.loss = "hinge";
  fit.model.kernel_svm.kernel = "rbf";
  fit.model.kernel_svm.training_rows = n;
  if (point.active.empty()) {  // no feature: the majority class (decision −bias)
    fit.model.bias = info.n_positive >= info.n_negative ? -1.0 : 1.0;
    uint64_t majority = std::max(info.n_positive, info.n_negative);
    fit.train_accuracy = n ? static_cast<double>(majority) / static_cast<double>(n) : 0.0;
    return fit;
  }
  const SelectedKernels s = load_selected(store, alignments, point, budget);
  PrecomputedKernel kernel =
      precomputed_kernel(n, n, [&](uint64_t r) { return s.row(r); }, s.weight, s.gamma, budget);
  std::vector<double> labels(y, y + n);
  const std::unique_ptr<svm_model, ModelDeleter> svm = train_svm(kernel, labels, C);
  uint64_t correct = 0;
  for (uint64_t r = 0; r < n; ++r) correct += svm_predict(svm.get(), kernel.rows[r]) == labels[r];
  fit.train_accuracy = static_cast<double>(correct) / static_cast<double>(n);
  fit.memory = take_support_vectors(*svm, s, n, fit.model, budget);
  return fit;
}

std::vector<uint64_t> kta_rbf_held_out_correct(const std::vector<float>& train, const std::vector<int8_t>& train_labels,
                                               const std::vector<float>& held, const std::vector<int8_t>& held_labels,
                                               const std::vector<double>& weight, const std::vector<double>& gamma,
                                               const std::vector<double>& Cs, MemoryBudget& budget) {
  const uint64_t n = train_labels.size(), h = held_labels.size();
  const size_t m = weight.size();
  std::vector<uint64_t> correct(Cs.size(), 0);
  if (m == 0) {  // fit_kta_rbf_model's empty selection: the majority class
    uint64_t positives = 0;
    for (int8_t y : train_labels) positives += y > 0;
    const int8_t majority = 2 * positives >= n ? 1 : -1;
    uint64_t right = 0;
    for (int8_t y : held_labels) right += y == majority;
    correct.assign(Cs.size(), right);
    return correct;
  }
  FGM_ASSERT(train.size() == n * m && held.size() == h * m);
  // Rows of the kernel against the training rows: training rows first
  // (LIBSVM's problem), then the held rows (scored).
  PrecomputedKernel kernel = precomputed_kernel(
      n, n + h, [&](uint64_t r) { return r < n ? train.data() + r * m : held.data() + (r - n) * m; }, weight, gamma,
      budget);
  std::vector<double> labels(train_labels.begin(), train_labels.end());
  for (size_t c = 0; c < Cs.size(); ++c) {
    const std::unique_ptr<svm_model, ModelDeleter> svm = train_svm(kernel, labels, Cs[c]);
    for (uint64_t r = 0; r < h; ++r) correct[c] += svm_predict(svm.get(), kernel.rows[n + r]) == held_labels[r];
  }
  return correct;
}

}  // namespace fgm
