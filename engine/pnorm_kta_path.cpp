#include "engine/pnorm_kta_path.h"

#include <chrono>
#include <cmath>
#include <memory>

#include "cache/selected_features.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/messages.h"
#include "engine/model_provenance.h"
#include "features/transformed_store.h"

namespace fgm {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<double> alignment_values(const std::vector<kta::FeatureAlignment>& features) {
  std::vector<double> a;
  a.reserve(features.size());
  for (const auto& f : features) a.push_back(f.alignment);
  return a;
}

// Test and validation rows, loaded once for every point.
struct EvaluationRows {
  std::unique_ptr<LabeledRows> test, validation;
  Reservation test_memory, validation_memory;
  EvaluationRows(const Model& shape, const KtaSettings& s, MemoryBudget& budget) {
    if (!s.test_path.empty())
      test = std::make_unique<LabeledRows>(load_labeled_rows(s.test_path, shape, budget, test_memory));
    if (!s.validation_path.empty())
      validation =
          std::make_unique<LabeledRows>(load_labeled_rows(s.validation_path, shape, budget, validation_memory));
  }
};

// The model every point and `fgm train` start from: label map, width and provenance.
Model kta_model_shape(const ShardStore& store) {
  Model m = model_of_store(store.info(), "pnorm_kta");
  m.feature_kind = "linear";
  record_feature_transforms(store, m);
  return m;
}

void evaluate_point(KtaData& data, const KtaSettings& settings, const KtaRun& run, const kta::PathPoint& point,
                    const EvaluationRows& rows, MemoryBudget& budget, KtaPoint& out) {
  KtaPointModel fitted = data.fit(settings, run.alignments, point);
  if (rows.test) out.test = evaluate_rows(*rows.test, fitted.model, false, budget);
  if (rows.validation) out.validation = evaluate_rows(*rows.validation, fitted.model, false, budget);
  out.train_accuracy = fitted.train_accuracy;
  // RBF points keep no model (n_support × features values each).
  if (settings.kernel == kta::KernelKind::kLinear) {
    out.model = std::move(fitted.model);
    out.has_model = true;
  }
}

// One store's rows: its alignment pass, and its SVMs: the linear one over
// its rows, or LIBSVM's.
class StoreKta final : public KtaData {
 public:
  StoreKta(const ShardStore& store, MemoryBudget& budget) : store_(store), budget_(budget) {}
  // One streamed pass (solvers/pnorm_kta/alignment_pass.h).
  KtaRun align(const KtaSettings& settings) override {
    if (store_.info().classes() > 2)
      throw Error(ErrorKind::kConfig, msg::kta_needs_two_labels(store_.dir(), store_.info().classes()));
    kta::check_path_options(settings.path);
    const auto start = Clock::now();
    KtaRun run;
    BlockStream stream(store_, settings.scheduler, budget_);
    kta::AlignmentPass pass =
        kta::stream_alignments(stream, store_.plan_blocks(settings.block_bytes), settings.kernel, budget_);
    run.alignments = std::move(pass.features);
    run.alignment_pass = pass.pass;
    run.alignment_seconds = seconds_since(start);
    return run;
  }
  Model shape() const override { return kta_model_shape(store_); }
  KtaPointModel fit(const KtaSettings& settings, const std::vector<kta::FeatureAlignment>& alignments,
                    const kta::PathPoint& point) override {
    if (settings.kernel == kta::KernelKind::kRbf)
      return fit_kta_rbf_model(store_, alignments, point, settings.C, kta_model_shape(store_), budget_);
    const StoreInfo& info = store_.info();
    LocalRowSums one_process;
    const KtaRows rows{{&store_}, {store_.labels()}, &one_process, info.n_rows, info.n_positive, info.n_negative,
                       kta_model_shape(store_)};
    KtaPointModel out;
    out.model = fit_kta_linear_model(rows, settings, alignments, point, budget_);
    return out;
  }

 private:
  const ShardStore& store_;
  MemoryBudget& budget_;
};

}  // namespace

std::unique_ptr<KtaData> open_kta_store(const ShardStore& store, MemoryBudget& budget) {
  return std::make_unique<StoreKta>(store, budget);
}

void run_kta_path(KtaData& data, const KtaSettings& settings, MemoryBudget& budget, KtaRun& run,
                  const std::function<void(const KtaPoint&, const kta::PathPoint&)>& on_point) {
  const auto start = Clock::now();
  const EvaluationRows rows(data.shape(), settings, budget);
  Reservation path_memory = budget.reserve(run.alignments.size() * (sizeof(double) + 12),
                                           "KTA path: alignments, active set and weights");
  const std::vector<double> a = alignment_values(run.alignments);
  auto mark = Clock::now();
  kta::follow_path(a, settings.path, [&](const kta::PathPoint& point) {
    KtaPoint p;
    p.point = static_cast<int>(run.points.size()) + 1;
    p.p = point.p;
    p.selected = point.active.size();
    for (double w : point.weights) p.weight_sum += w;
    p.newton_steps = point.counts.newton_steps;
    p.bisection_steps = point.counts.bisection_steps;
    p.path_seconds = seconds_since(mark);
    run.path_seconds += p.path_seconds;
    const auto svm_start = Clock::now();
    if (settings.evaluate) evaluate_point(data, settings, run, point, rows, budget, p);
    p.svm_seconds = seconds_since(svm_start);
    run.points.push_back(p);
    const int index = static_cast<int>(run.points.size()) - 1;
    auto better = [&](int best, auto field) {
      return std::isfinite(field(run.points[index])) &&
             (best < 0 || field(run.points[index]) > field(run.points[best]));
    };
    if (better(run.best_test_point, [](const KtaPoint& q) { return q.test.accuracy; })) run.best_test_point = index;
    if (better(run.best_validation_point, [](const KtaPoint& q) { return q.validation.accuracy; }))
      run.best_validation_point = index;
    if (on_point) on_point(run.points.back(), point);
    mark = Clock::now();
  });
  run.total_seconds = run.alignment_seconds + seconds_since(start);
}

Model fit_kta_linear_model(const KtaRows& rows, const KtaSettings& settings,
                           const std::vector<kta::FeatureAlignment>& alignments, const kta::PathPoint& point,
                           MemoryBudget& budget, const KtaRowSubsetColumns* subset) {
  const uint64_t n = rows.n;
  Model m = rows.shape;
  m.loss = loss_name(Loss::kSquaredHinge);
  m.C = settings.C;
  m.has_bias = true;
  if (point.active.empty()) {  // no feature: the majority class (decision −bias)
    m.bias = rows.n_positive >= rows.n_negative ? -1.0 : 1.0;
    return m;
  }
  // Column i scaled by sqrt(w_i), w_i = (η_i/Ση)(n/tr_i): the linear kernel Σ w_i x_i z_i.
  std::vector<double> scale = kta_kernel_weights(alignments, point, n);
  for (double& w : scale) w = std::sqrt(w);
  // Each part's rows of the scaled columns (a part may lack a column: no rows).
  std::vector<std::unique_ptr<SelectedFeatureCache>> caches;
  std::vector<std::vector<double>> decisions(rows.parts.size());
  std::vector<ApgRowPart> parts;
  std::vector<uint32_t> column_rows;
  std::vector<float> values;
  for (size_t q = 0; q < rows.parts.size(); ++q) {
    const ShardStore& store = *rows.parts[q];
    caches.push_back(
        std::make_unique<SelectedFeatureCache>(budget, subset ? subset->part_rows[q] : store.info().n_rows));
    caches.back()->begin_batch();
    for (size_t k = 0; k < point.active.size(); ++k) {
      const uint64_t feature = alignments[point.active[k]].feature;
      if (subset)
        subset->read_column(q, feature, column_rows, values);
      else
        store.read_column(feature, column_rows, values);
      for (float& v : values) v = static_cast<float>(v * scale[k]);
      FeatureKey key;
      key.ids[0] = feature;
      caches.back()->add_column(key, column_rows, values);
    }
    parts.push_back({caches.back().get(), rows.labels[q], &decisions[q]});
  }
  ApgOptions apg = settings.apg;
  apg.loss = Loss::kSquaredHinge;
  apg.bias = true;
  apg.C = settings.C;
  apg.certify = true;  // the point's model: held to apg.gap_tolerance
  ApgState state;
  const ApgResult result = solve_apg(parts, *rows.reduction, apg, state, budget);
  if (!result.converged)
    add_warning(settings.warnings, "kta_svm_gap_above_tolerance",
                msg::kta_svm_gap_above_tolerance(point.p, result.iterations, result.relative_gap));
  m.objective = result.objective;
  m.iterations = static_cast<uint32_t>(result.iterations);
  m.bias = state.b;
  for (size_t k = 0; k < point.active.size(); ++k) {
    ModelFeature f;
    f.key.ids[0] = alignments[point.active[k]].feature;
    // The weight of the scaled column, moved onto the raw feature. The
    // stored value was rounded to float; the model uses the exact scale.
    f.weight = state.w[k] * scale[k];
    f.batch = 1;
    m.features.push_back(f);
  }
  return m;
}

KtaTrained train_kta_model(KtaData& data, const KtaSettings& settings, MemoryBudget& budget, KtaRun& run) {
  KtaSettings to_train_p = settings;
  to_train_p.path.p_end = settings.train_p;
  to_train_p.evaluate = false;
  to_train_p.test_path.clear();
  to_train_p.validation_path.clear();
  kta::PathPoint last;
  run_kta_path(data, to_train_p, budget, run, [&](const KtaPoint&, const kta::PathPoint& point) { last = point; });
  return data.fit(to_train_p, run.alignments, last);
}

}  // namespace fgm
