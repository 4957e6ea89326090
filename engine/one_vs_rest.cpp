#include "engine/one_vs_rest.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>

#include <spdlog/spdlog.h>

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

TrainingArgmax::TrainingArgmax(const std::vector<uint64_t>& part_rows, MemoryBudget& budget, const char* remedy) {
  uint64_t rows = 0;
  for (uint64_t n : part_rows) {
    rows += n;
    best_.emplace_back(n, -std::numeric_limits<double>::infinity());
    best_class_.emplace_back(n, std::numeric_limits<uint16_t>::max());
  }
  memory_ = budget.reserve(rows * (sizeof(double) + sizeof(uint16_t)), "one-vs-rest training predictions", remedy);
}

void TrainingArgmax::add(size_t c, size_t q, const std::vector<double>& decision) {
  std::vector<double>& best = best_[q];
  for (size_t i = 0; i < best.size(); ++i) {
    const double d = decision.empty() ? 0.0 : decision[i];
    if (d > best[i] || (d == best[i] && c < best_class_[q][i])) {
      best[i] = d;
      best_class_[q][i] = static_cast<uint16_t>(c);
    }
  }
}

std::vector<double> TrainingArgmax::counts(size_t q, size_t K, const std::function<size_t(uint64_t)>& class_of) const {
  std::vector<double> counts(K + 1, 0.0);
  for (uint64_t i = 0; i < best_[q].size(); ++i) {
    const size_t c = class_of(i);
    if (c == SIZE_MAX) continue;
    counts[1 + c] += 1;
    counts[0] += best_class_[q][i] == c;
  }
  return counts;
}

namespace {

// The end of one-vs-rest, from the class runs (in class order, `values`
// increasing): their models combined (with the feature transforms of every
// class, from `store`), class_rows and the chance check from `counts`
// (TrainingArgmax::counts over all rows), the run's totals. `warnings`: null
// on the ranks that do not report.
void finish_one_vs_rest(FgmOutcome& out, std::vector<TrainOutcome> classes, const std::vector<double>& values,
                        const ShardStore& store, const std::vector<double>& counts, RunWarnings* warnings) {
  std::vector<Model> models;
  for (size_t c = 0; c < classes.size(); ++c) {
    classes[c].model.positive_label = values[c];
    models.push_back(classes[c].model);
    out.objective_no_features += classes[c].objective_no_features;
    out.class_rows.push_back(static_cast<uint64_t>(counts[1 + c]));
  }
  out.model = combine_class_models(models, values);
  // Each class model recorded only its own features' transform statistics; predict needs them all.
  Model all_classes;
  for (const auto& c : out.model.classes)
    all_classes.features.insert(all_classes.features.end(), c.features.begin(), c.features.end());
  record_feature_transforms(store, all_classes);
  out.model.transforms = std::move(all_classes.transforms);
  double rows = 0, largest = 0;
  for (size_t c = 1; c < counts.size(); ++c) {
    rows += counts[c];
    largest = std::max(largest, counts[c]);
  }
  if (at_chance_level(rows, counts[0], largest, out.train_accuracy, out.majority_rate))
    add_warning(warnings, "chance_level_model", msg::chance_level_model(out.train_accuracy, out.majority_rate));
  out.class_labels = values;
  out.value_span = classes.front().value_span;
  out.classes = std::move(classes);
}

}  // namespace

FgmOutcome run_one_vs_rest(const OneVsRestBackend& backend, const TrainSettings& settings, MemoryBudget& budget) {
  const auto start = std::chrono::steady_clock::now();
  const size_t K = backend.values.size();
  std::unique_ptr<RowSource> source = backend.make_source();
  Communicator* comm = source->comm();
  const bool reports = !comm || comm->rank() == 0;
  TrainSettings class_settings = settings;
  class_settings.check_chance_level = false;  // a class against the rest is no multi-class model
  std::vector<uint64_t> part_rows;
  for (size_t q = 0; q < source->parts(); ++q) part_rows.push_back(source->store(q).info().n_rows);
  TrainingArgmax argmax(part_rows, budget, source->row_memory_remedy());
  std::vector<TrainHooks> hooks(K);
  for (size_t c = 0; c < K; ++c)
    hooks[c].on_final_decision = [&argmax, c](size_t q, const std::vector<double>& d) { argmax.add(c, q, d); };
  auto announce = [&](const char* how) {
    if (reports) spdlog::info("{} classes: one-vs-rest ({} binary runs, fgm.multiclass=ovr, {})", K, K, how);
  };
  FgmOutcome out;
  std::vector<TrainOutcome> classes;
  std::vector<CommunicationRecord> records;  // the shared passes', then each class's
  auto take_records = [&](size_t c, FgmRows& rows) {
    for (CommunicationRecord record : rows.communication()) {
      record.class_index = static_cast<int>(c);
      records.push_back(std::move(record));
    }
  };
  // The K runs' state (duals, selected columns, APG) is alive at once; the
  // attempt's warnings and counts are kept only if it succeeds.
  auto run_lockstep = [&] {
    announce("in lockstep: each scoring pass shared by the classes");
    RunWarnings attempt_warnings;
    TrainSettings attempt = class_settings;
    attempt.warnings = &attempt_warnings;
    source->defer_open = true;
    std::vector<ClassRun> runs;
    std::vector<FgmRows*> rows;
    std::vector<FgmLoop*> loops;
    for (size_t c = 0; c < K; ++c) {
      runs.push_back(backend.make_run(*source, c, attempt, hooks[c]));
      runs.back().loop = std::make_unique<FgmLoop>(*runs.back().rows, attempt, budget, hooks[c]);
      rows.push_back(runs.back().rows.get());
      loops.push_back(runs.back().loop.get());
    }
    source->defer_open = false;
    source->open();
    uint64_t passes = 0, bytes = 0;
    std::vector<CommunicationRecord> shared;
    std::vector<TrainOutcome> done = run_rows_in_lockstep(*source, rows, loops, settings.B, passes, bytes, shared);
    for (const RunWarning& w : attempt_warnings.list()) add_warning(settings.warnings, w.code, w.message);
    out.scoring_passes = passes;
    out.total_bytes_streamed = bytes;
    records = std::move(shared);
    for (size_t c = 0; c < K; ++c) take_records(c, *runs[c].rows);
    classes = std::move(done);
  };
  auto run_one_by_one = [&] {
    announce("one class after another");
    source = backend.make_source();  // a lockstep attempt's stream goes
    for (size_t c = 0; c < K; ++c) {
      ClassRun run = backend.make_run(*source, c, class_settings, hooks[c]);
      run.loop = std::make_unique<FgmLoop>(*run.rows, class_settings, budget, hooks[c]);
      classes.push_back(run.loop->run());
      out.scoring_passes += classes.back().scoring_passes;
      out.total_bytes_streamed += classes.back().total_bytes_streamed;
      take_records(c, *run.rows);
    }
  };
  // In lockstep when the backend allows it and it fits (its shortfall, or an
  // attempt that ends in an out of memory), else one after another.
  std::string lacking = backend.lockstep ? backend.shortfall.value_or("") : "";
  out.lockstep = backend.lockstep && lacking.empty();
  if (out.lockstep) {
    try {
      run_lockstep();
    } catch (const Error& e) {
      if (backend.shortfall || e.kind() != ErrorKind::kOutOfMemory) throw;
      lacking = e.what();
      out.lockstep = false;
    }
  }
  if (!out.lockstep) {
    if (backend.lockstep && reports)  // one copy: every rank takes the same decision
      add_warning(settings.warnings, "ovr_lockstep_fell_back", msg::ovr_lockstep_fell_back(K, lacking));
    run_one_by_one();
  }
  // The multi-class model on the training rows: rows per class over all parts.
  const CommunicationStats before = comm ? comm->stats() : CommunicationStats{};
  const std::vector<double> counts = backend.counts(argmax);
  if (comm) records.push_back({0, "diagnostics", comm->stats() - before});  // of no class
  out.communication = std::move(records);
  finish_one_vs_rest(out, std::move(classes), backend.values, source->store(0), counts,
                     reports ? settings.warnings : nullptr);
  out.budget_peak = budget.peak();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace fgm
