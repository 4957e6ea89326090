#include "engine/pnorm_kta_rbf_svm.h"

#include <svm.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <unordered_map>

#include "core/error.h"
#include "core/messages.h"

namespace fgm {
namespace {

void silent(const char*) {}

// The selected features' kernel weights, bandwidths and training columns (dense).
struct SelectedKernels {
  std::vector<uint64_t> ids;
  std::vector<double> weight, gamma;  // w_i and 1/(2h_i²)
  std::vector<float> columns;         // feature-major, n per feature
  Reservation memory;
};

SelectedKernels load_selected(const ShardStore& store, const std::vector<kta::FeatureAlignment>& alignments,
                              const kta::PathPoint& point, MemoryBudget& budget) {
  const uint64_t n = store.info().n_rows;
  SelectedKernels s;
  const size_t m = point.active.size();
  s.memory = budget.reserve(m * n * sizeof(float), "selected columns of the KTA kernel SVM");
  double weight_sum = 0;
  for (double w : point.weights) weight_sum += w;
  s.columns.assign(m * n, 0.0f);
  std::vector<uint32_t> rows;
  std::vector<float> values;
  for (size_t k = 0; k < m; ++k) {
    const kta::FeatureAlignment& f = alignments[point.active[k]];
    s.ids.push_back(f.feature);
    s.weight.push_back(point.weights[k] / weight_sum * static_cast<double>(n) / f.trace);
    s.gamma.push_back(1.0 / (2.0 * f.bandwidth * f.bandwidth));
    store.read_column(f.feature, rows, values);
    for (size_t e = 0; e < rows.size(); ++e) s.columns[k * n + rows[e]] = values[e];
  }
  return s;
}

double kernel_value(const SelectedKernels& s, uint64_t n, const float* x, uint64_t row) {
  double k = 0;
  for (size_t i = 0; i < s.ids.size(); ++i) {
    const double d = static_cast<double>(x[i]) - s.columns[i * n + row];
    k += s.weight[i] * std::exp(-s.gamma[i] * d * d);
  }
  return k;
}

struct ModelDeleter {
  void operator()(svm_model* m) const { svm_free_and_destroy_model(&m); }
};

EvalResult score_rows(const LabeledRows& rows, const SelectedKernels& s, uint64_t n, const svm_model* model,
                      MemoryBudget& budget) {
  std::unordered_map<uint64_t, size_t> position;
  for (size_t i = 0; i < s.ids.size(); ++i) position.emplace(s.ids[i], i);
  Reservation memory = budget.reserve((n + 2) * sizeof(svm_node) + rows.rows() * 8,
                                      "kernel row of the KTA kernel SVM");
  std::vector<svm_node> nodes(n + 2);
  std::vector<float> x(s.ids.size());
  std::vector<double> scores(rows.rows());
  int labels[2];
  svm_get_labels(model, labels);
  uint64_t correct = 0;
  for (size_t t = 0; t < rows.rows(); ++t) {
    std::fill(x.begin(), x.end(), 0.0f);
    for (uint64_t e = rows.row_ptr[t]; e < rows.row_ptr[t + 1]; ++e)
      if (auto it = position.find(rows.indices[e]); it != position.end()) x[it->second] = rows.values[e];
    nodes[0] = {0, 0.0};
    for (uint64_t r = 0; r < n; ++r) nodes[r + 1] = {static_cast<int>(r + 1), kernel_value(s, n, x.data(), r)};
    nodes[n + 1] = {-1, 0.0};
    double decision = 0;
    svm_predict_values(model, nodes.data(), &decision);
    // decision > 0 means labels[0]; orient the score towards +1.
    scores[t] = labels[0] == 1 ? decision : -decision;
    const int predicted = decision > 0 ? labels[0] : labels[1];
    correct += predicted == rows.labels[t];
  }
  EvalResult r;
  r.rows = rows.rows();
  for (int8_t l : rows.labels) r.positives += l > 0;
  r.accuracy = rows.rows() ? static_cast<double>(correct) / static_cast<double>(rows.rows())
                           : std::numeric_limits<double>::quiet_NaN();
  r.auc = area_under_roc(scores, rows.labels);
  return r;
}

}  // namespace

RbfSvmEvaluation evaluate_rbf_svm(const ShardStore& store, const std::vector<kta::FeatureAlignment>& alignments,
                                  const kta::PathPoint& point, double C, const LabeledRows* test,
                                  const LabeledRows* validation, MemoryBudget& budget) {
  const uint64_t n = store.info().n_rows;
  const int8_t* y = store.labels();
  const SelectedKernels s = load_selected(store, alignments, point, budget);
  const uint64_t kernel_bytes = n * (n + 2) * sizeof(svm_node);
  Reservation kernel_memory;
  try {
    kernel_memory = budget.reserve(kernel_bytes, "training kernel of the KTA kernel SVM");
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kOutOfMemory) throw;
    throw Error(ErrorKind::kOutOfMemory, msg::kta_kernel_too_large(n, kernel_bytes, budget.limit()));
  }
  std::vector<svm_node> nodes(n * (n + 2));
  std::vector<svm_node*> row_ptrs(n);
  std::vector<double> labels(n);
  std::vector<float> x(s.ids.size());
  for (uint64_t r = 0; r < n; ++r) {
    svm_node* row = nodes.data() + r * (n + 2);
    row_ptrs[r] = row;
    labels[r] = y[r];
    row[0] = {0, static_cast<double>(r + 1)};
    for (size_t i = 0; i < s.ids.size(); ++i) x[i] = s.columns[i * n + r];
    for (uint64_t c = 0; c < n; ++c) row[c + 1] = {static_cast<int>(c + 1), kernel_value(s, n, x.data(), c)};
    row[n + 1] = {-1, 0.0};
  }
  svm_problem problem{static_cast<int>(n), labels.data(), row_ptrs.data()};
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
  std::unique_ptr<svm_model, ModelDeleter> model(svm_train(&problem, &param));
  RbfSvmEvaluation out;
  uint64_t correct = 0;
  for (uint64_t r = 0; r < n; ++r) correct += svm_predict(model.get(), row_ptrs[r]) == labels[r];
  out.train_accuracy = static_cast<double>(correct) / static_cast<double>(n);
  if (test) out.test = score_rows(*test, s, n, model.get(), budget);
  if (validation) out.validation = score_rows(*validation, s, n, model.get(), budget);
  return out;
}

}  // namespace fgm
