#include "engine/one_vs_rest.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <tuple>

#include "core/error.h"
#include "core/messages.h"

namespace fgm {

std::vector<int8_t> one_vs_rest_labels(const ShardStore& store, size_t c, const int8_t* mask) {
  const uint64_t n = store.info().n_rows;
  FGM_ASSERT(c < store.info().classes());
  const uint16_t* classes = store.classes();
  std::vector<int8_t> y(n);
  for (uint64_t i = 0; i < n; ++i)
    y[i] = mask && mask[i] == 0 ? 0 : (classes[i] == c ? 1 : -1);
  return y;
}

Model combine_class_models(const std::vector<Model>& models, const std::vector<double>& labels) {
  FGM_ASSERT(models.size() == labels.size() && models.size() >= 2);
  Model m = models.front();
  m.features.clear();
  m.bias = 0;
  m.objective = 0;
  m.iterations = 0;
  m.positive_label = labels.back();
  m.negative_label = labels.front();
  // Scalings of hik/additive groups are the store's column min/max: the same
  // for every class, so the union by base feature id is consistent.
  std::map<uint64_t, std::pair<float, float>> scales;
  for (size_t k = 0; k < models.size(); ++k) {
    const Model& c = models[k];
    ClassModel cm;
    cm.label = labels[k];
    cm.features = c.features;
    cm.bias = c.bias;
    cm.objective = c.objective;
    cm.iterations = c.iterations;
    m.classes.push_back(std::move(cm));
    m.objective += c.objective;
    m.iterations = std::max(m.iterations, c.iterations);
    m.created_unix = std::max(m.created_unix, c.created_unix);
    for (size_t j = 0; j < c.scale_ids.size(); ++j)
      scales[c.scale_ids[j]] = {c.scale_min[j], c.scale_max[j]};
  }
  if (!m.scale_ids.empty() || std::any_of(models.begin(), models.end(),
                                          [](const Model& c) { return !c.scale_ids.empty(); })) {
    m.scale_ids.clear();
    m.scale_min.clear();
    m.scale_max.clear();
    for (const auto& [id, range] : scales) {
      m.scale_ids.push_back(id);
      m.scale_min.push_back(range.first);
      m.scale_max.push_back(range.second);
    }
  }
  return m;
}

namespace {

// The passes a run streamed by itself: its outer iterations, the pass that
// ended the loop without an iteration (no new feature, or the eps_outer test,
// which reads the violation of that pass), the final certificate.
uint64_t passes_of(const TrainOutcome& o, const TrainSettings& settings) {
  const bool ended_in_pass = o.stop_reason == "no_new_features" || o.stop_reason == "eps_outer";
  const bool certificate = settings.final_certificate && !ended_in_pass && !o.iterations.empty();
  return o.iterations.size() + (ended_in_pass ? 1 : 0) + (certificate ? 1 : 0);
}

void run_sequential(const ShardStore& store, const std::vector<TrainSettings>& settings, MemoryBudget& budget,
                    const std::vector<TrainHooks>& hooks, OneVsRestOutcome& out) {
  for (size_t c = 0; c < settings.size(); ++c) {
    TrainOutcome o = train_fgm(store, settings[c], budget, hooks[c]);
    out.scoring_passes += passes_of(o, settings[c]);
    out.bytes_streamed += o.total_bytes_streamed;
    out.classes.push_back(std::move(o));
  }
}

// Lockstep keeps the K runs' state (duals, selected columns, APG) at once;
// when that exceeds the budget, the K runs go one after another instead
// (a run warning says so). The attempt's warnings are kept only if it succeeds.
void run_lockstep(const ShardStore& store, std::vector<TrainSettings> settings, MemoryBudget& budget,
                  const std::vector<TrainHooks>& hooks, OneVsRestOutcome& out) {
  RunWarnings* warnings = settings.front().warnings;
  RunWarnings attempt_warnings;
  for (auto& s : settings) s.warnings = &attempt_warnings;
  LockstepOutcome o;
  try {
    o = train_fgm_lockstep(store, settings, budget, hooks);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kOutOfMemory) throw;
    RunWarnings log_only;
    (warnings ? *warnings : log_only).add("ovr_lockstep_fell_back", msg::ovr_lockstep_fell_back(settings.size(), e.what()));
    for (auto& s : settings) s.warnings = warnings;
    run_sequential(store, settings, budget, hooks, out);
    return;
  }
  for (const RunWarning& w : attempt_warnings.list())
    if (warnings) warnings->add(w.code, w.message);
  out.lockstep = true;
  out.scoring_passes = o.scoring_passes;
  out.bytes_streamed = o.bytes_streamed;
  out.classes = std::move(o.runs);
}

}  // namespace

OneVsRestOutcome train_one_vs_rest(const ShardStore& store, const TrainSettings& settings,
                                   MemoryBudget& budget, const ClassIterationCallback& on_iteration,
                                   OneVsRestSchedule schedule) {
  const auto start = std::chrono::steady_clock::now();
  const StoreInfo& info = store.info();
  const size_t K = info.classes();
  // n bytes of labels per class problem (all alive in lockstep).
  Reservation labels_mem = budget.reserve(K * info.n_rows, "one-vs-rest labels", "use fewer training rows");
  std::vector<std::vector<int8_t>> labels(K);
  std::vector<TrainSettings> class_settings(K, settings);
  std::vector<TrainHooks> hooks(K);
  for (size_t c = 0; c < K; ++c) {
    labels[c] = one_vs_rest_labels(store, c, settings.labels);
    class_settings[c].labels = labels[c].data();
    if (on_iteration) hooks[c].on_iteration = [&on_iteration, c](const IterationRecord& r) { on_iteration(c, r); };
  }
  OneVsRestOutcome out;
  if (schedule == OneVsRestSchedule::kLockstepWherePossible && scores_many(settings.space))
    run_lockstep(store, class_settings, budget, hooks, out);
  else
    run_sequential(store, class_settings, budget, hooks, out);

  std::vector<Model> models;
  for (size_t c = 0; c < K; ++c) {
    out.classes[c].model.positive_label = info.class_values[c];
    models.push_back(out.classes[c].model);
  }
  out.budget_peak = budget.peak();
  out.model = combine_class_models(models, info.class_values);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace fgm
