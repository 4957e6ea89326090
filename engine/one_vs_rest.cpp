#include "engine/one_vs_rest.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <tuple>

#include "core/error.h"
#include "core/messages.h"
#include "features/transformed_store.h"

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

void record_class_transforms(const ShardStore& store, Model& model) {
  Model all_classes;
  for (const auto& c : model.classes)
    all_classes.features.insert(all_classes.features.end(), c.features.begin(), c.features.end());
  record_feature_transforms(store, all_classes);
  model.transforms = std::move(all_classes.transforms);
}

namespace {

// The multi-class model's predictions on its training rows, built as the
// class runs finish (in any order): the largest decision value, a tie to the
// smaller class index (as argmax_class), for the chance-level check.
class TrainingArgmax {
 public:
  TrainingArgmax(uint64_t n, MemoryBudget& budget)
      : memory_(budget.reserve(n * (sizeof(double) + sizeof(uint16_t)), "one-vs-rest training predictions",
                               "use fewer training rows")),
        best_(n, -std::numeric_limits<double>::infinity()),
        best_class_(n, std::numeric_limits<uint16_t>::max()) {}

  // A class may report twice (a lockstep attempt that fell back reruns it):
  // the same values, so the second changes nothing.
  void add(size_t c, const std::vector<double>& decision) {
    if (c >= seen_.size()) seen_.resize(c + 1, false);
    seen_[c] = true;
    for (size_t i = 0; i < best_.size(); ++i)
      if (decision[i] > best_[i] || (decision[i] == best_[i] && c < best_class_[i])) {
        best_[i] = decision[i];
        best_class_[i] = static_cast<uint16_t>(c);
      }
  }

  // Warns when the training accuracy is no better than always predicting the
  // largest class. Skipped unless every class reported (a restored run).
  void check(const ShardStore& store, const int8_t* mask, size_t K, RunWarnings* warnings,
             OneVsRestOutcome& out) const {
    if (seen_.size() != K || std::find(seen_.begin(), seen_.end(), false) != seen_.end()) return;
    const uint16_t* truth = store.classes();
    std::vector<uint64_t> count(K, 0);
    uint64_t fit = 0, correct = 0;
    for (size_t i = 0; i < best_.size(); ++i) {
      if (mask && mask[i] == 0) continue;
      ++fit;
      ++count[truth[i]];
      correct += best_class_[i] == truth[i];
    }
    if (at_chance_level(double(fit), double(correct), double(*std::max_element(count.begin(), count.end())),
                        out.train_accuracy, out.majority_rate))
      add_warning(warnings, "chance_level_model", msg::chance_level_model(out.train_accuracy, out.majority_rate));
  }

 private:
  Reservation memory_;
  std::vector<double> best_;
  std::vector<uint16_t> best_class_;
  std::vector<bool> seen_;
};

void run_sequential(const ShardStore& store, const std::vector<TrainSettings>& settings, MemoryBudget& budget,
                    const std::vector<TrainHooks>& hooks, OneVsRestOutcome& out) {
  for (size_t c = 0; c < settings.size(); ++c) {
    TrainOutcome o = train_fgm(store, settings[c], budget, hooks[c]);
    out.scoring_passes += o.scoring_passes;
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
    add_warning(warnings, "ovr_lockstep_fell_back", msg::ovr_lockstep_fell_back(settings.size(), e.what()));
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
  TrainingArgmax argmax(info.n_rows, budget);
  for (size_t c = 0; c < K; ++c) {
    class_settings[c].check_chance_level = false;  // a class against the rest is no multi-class model
    hooks[c].on_final_decision = [&argmax, c](const std::vector<double>& d) { argmax.add(c, d); };
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
  record_class_transforms(store, out.model);
  argmax.check(store, settings.labels, K, settings.warnings, out);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace fgm
