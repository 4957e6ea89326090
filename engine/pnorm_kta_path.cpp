#include "engine/pnorm_kta_path.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <memory>

#include "cache/selected_features.h"
#include "core/error.h"
#include "core/messages.h"
#include "engine/model_provenance.h"
#include "engine/pnorm_kta_rbf_svm.h"
#include "features/transformed_store.h"

namespace fgm {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

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
  EvaluationRows(const ShardStore& store, const KtaSettings& s, MemoryBudget& budget) {
    const Model shape = model_of_store(store.info(), "pnorm_kta");
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

void evaluate_point(const ShardStore& store, const KtaSettings& settings, const KtaRun& run,
                    const kta::PathPoint& point, const EvaluationRows& rows, MemoryBudget& budget, KtaPoint& out) {
  if (settings.kernel == kta::KernelKind::kRbf) {
    // Scored by the model file's scorer, as `fgm predict` scores it.
    const KtaRbfFit fit =
        fit_kta_rbf_model(store, run.alignments, point, settings.C, kta_model_shape(store), budget);
    if (rows.test) out.test = evaluate_rows(*rows.test, fit.model, false, budget);
    if (rows.validation) out.validation = evaluate_rows(*rows.validation, fit.model, false, budget);
    out.train_accuracy = fit.train_accuracy;
    return;
  }
  out.model = fit_kta_linear_model(store, settings, run.alignments, point, budget);
  out.has_model = true;
  if (rows.test) out.test = evaluate_rows(*rows.test, out.model, false, budget);
  if (rows.validation) out.validation = evaluate_rows(*rows.validation, out.model, false, budget);
}

}  // namespace

KtaRun compute_alignments(const ShardStore& store, const KtaSettings& settings, MemoryBudget& budget) {
  if (store.info().classes() > 2)
    throw Error(ErrorKind::kConfig, msg::kta_needs_two_labels(store.dir(), store.info().classes()));
  kta::check_path_options(settings.path);
  const auto start = Clock::now();
  KtaRun run;
  BlockStream stream(store, settings.scheduler, budget);
  kta::AlignmentPass pass =
      kta::stream_alignments(stream, store.plan_blocks(settings.block_bytes), settings.kernel, budget);
  run.alignments = std::move(pass.features);
  run.alignment_pass = pass.pass;
  run.alignment_seconds = seconds_since(start);
  return run;
}

void run_kta_path(const ShardStore& store, const KtaSettings& settings, MemoryBudget& budget, KtaRun& run,
                  const std::function<void(const KtaPoint&, const kta::PathPoint&)>& on_point) {
  const auto start = Clock::now();
  const EvaluationRows rows(store, settings, budget);
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
    if (settings.evaluate) evaluate_point(store, settings, run, point, rows, budget, p);
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

Model fit_kta_linear_model(const ShardStore& store, const KtaSettings& settings,
                           const std::vector<kta::FeatureAlignment>& alignments, const kta::PathPoint& point,
                           MemoryBudget& budget) {
  const StoreInfo& info = store.info();
  const uint64_t n = info.n_rows;
  Model m = kta_model_shape(store);
  m.loss = loss_name(Loss::kSquaredHinge);
  m.C = settings.C;
  m.has_bias = true;
  if (point.active.empty()) {  // no feature: the majority class (decision −bias)
    m.bias = info.n_positive >= info.n_negative ? -1.0 : 1.0;
    return m;
  }
  double weight_sum = 0;
  for (double w : point.weights) weight_sum += w;
  // Column i scaled by sqrt(w_i), w_i = (η_i/Ση)(n/tr_i): the linear kernel Σ w_i x_i z_i.
  SelectedFeatureCache cache(budget, n);
  cache.begin_batch();
  std::vector<double> scale(point.active.size());
  std::vector<uint32_t> rows;
  std::vector<float> values;
  for (size_t k = 0; k < point.active.size(); ++k) {
    const kta::FeatureAlignment& f = alignments[point.active[k]];
    scale[k] = std::sqrt(point.weights[k] / weight_sum * static_cast<double>(n) / f.trace);
    store.read_column(f.feature, rows, values);
    for (float& v : values) v = static_cast<float>(v * scale[k]);
    FeatureKey key;
    key.ids[0] = f.feature;
    cache.add_column(key, rows, values);
  }
  ApgOptions apg = settings.apg;
  apg.loss = Loss::kSquaredHinge;
  apg.bias = true;
  apg.C = settings.C;
  ApgState state;
  std::vector<double> decision;
  const ApgResult result = solve_apg(cache, store.labels(), apg, state, decision, budget);
  m.objective = result.objective;
  m.iterations = static_cast<uint32_t>(result.iterations);
  m.bias = state.b;
  for (size_t k = 0; k < point.active.size(); ++k) {
    ModelFeature f;
    f.key = cache.key(k);
    // The weight of the scaled column, moved onto the raw feature. The
    // stored value was rounded to float; the model uses the exact scale.
    f.weight = state.w[k] * scale[k];
    f.batch = 1;
    m.features.push_back(f);
  }
  return m;
}

KtaTrained train_kta_model(const ShardStore& store, const KtaSettings& settings, MemoryBudget& budget,
                           KtaRun& run) {
  KtaSettings to_train_p = settings;
  to_train_p.path.p_end = settings.train_p;
  to_train_p.evaluate = false;
  to_train_p.test_path.clear();
  to_train_p.validation_path.clear();
  kta::PathPoint last;
  run_kta_path(store, to_train_p, budget, run, [&](const KtaPoint&, const kta::PathPoint& point) { last = point; });
  KtaTrained out;
  if (settings.kernel == kta::KernelKind::kRbf) {
    KtaRbfFit fit = fit_kta_rbf_model(store, run.alignments, last, settings.C, kta_model_shape(store), budget);
    out.model = std::move(fit.model);
    out.memory = std::move(fit.memory);
    out.train_accuracy = fit.train_accuracy;
  } else {
    out.model = fit_kta_linear_model(store, settings, run.alignments, last, budget);
  }
  return out;
}

}  // namespace fgm
