#include "engine/fgm_path.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"
#include "core/messages.h"
#include "engine/debias.h"
#include "engine/model_provenance.h"

namespace fgm {

void validate_path_settings(const PathSettings& s) {
  int lists = !s.feature_counts.empty() + !s.B_values.empty() + !s.C_values.empty();
  if (lists != 1)
    throw Error(ErrorKind::kConfig,
                msg::missing_required("path.features | path.B | path.C",
                                      fmt::format("give exactly one list of operating points ({} given)", lists)));
  for (size_t i = 1; i < s.feature_counts.size(); ++i)
    if (s.feature_counts[i] <= s.feature_counts[i - 1])
      throw Error(ErrorKind::kConfig, msg::out_of_range("", "path.features",
                                                        std::to_string(s.feature_counts[i]),
                                                        "strictly increasing feature counts"));
}

void validate_folds(const PathSettings& s, const ShardStore& store) {
  if (s.folds < 2) return;
  const int8_t* labels = s.base.labels ? s.base.labels : store.labels();
  uint64_t count[256] = {};
  for (uint64_t i = 0; i < store.info().n_rows; ++i) ++count[static_cast<uint8_t>(labels[i])];
  uint64_t smallest = std::numeric_limits<uint64_t>::max();
  for (int v = 0; v < 256; ++v)
    if (v != 0 && count[v] > 0) smallest = std::min(smallest, count[v]);
  if (smallest == std::numeric_limits<uint64_t>::max()) smallest = 0;
  validate_folds(s.folds, smallest);
}

void validate_folds(int folds, uint64_t smallest_label_rows) {
  if (folds >= 2 && smallest_label_rows < static_cast<uint64_t>(folds))
    throw Error(ErrorKind::kConfig,
                msg::out_of_range("", "path.folds", std::to_string(folds),
                                  fmt::format("at most the {} training rows of the smallest class, so that "
                                              "every fold holds each class",
                                              smallest_label_rows)));
}

namespace {

// train_fgm on one store; a fold's run has its held-out rows at label 0.
class StorePathTrainer final : public PathTrainer {
 public:
  // `labels`: the rows' labels (TrainSettings::labels or the store's).
  StorePathTrainer(const ShardStore& store, const int8_t* labels, MemoryBudget& budget)
      : store_(store), labels_(labels), budget_(budget), shape_(model_of_store(store.info(), "fgm")) {}
  const Model* evaluation_shape() const override { return &shape_; }

  TrainOutcome train(const TrainSettings& settings, const TrainHooks& hooks) override {
    TrainSettings s = settings;
    if (fold_ >= 0) s.labels = training_labels_.data();  // the fold's rows at 0
    return train_fgm(store_, s, budget_, hooks);
  }

  std::vector<FoldRows> assign_folds(int k, uint64_t seed) override {
    const uint64_t n = store_.info().n_rows;
    folds_ = fgm::assign_folds(labels_, n, k, seed, budget_);
    training_labels_ = BudgetedArray<int8_t>(budget_, n, "fold training labels", "use fewer training rows");
    std::vector<FoldRows> out(static_cast<size_t>(k));
    uint64_t in_folds = 0;
    for (uint64_t i = 0; i < n; ++i)
      if (folds_[i] != kNoFold) {
        ++out[folds_[i]].held_out;
        ++in_folds;
      }
    for (FoldRows& f : out) f.training = in_folds - f.held_out;
    return out;
  }

  void set_fold(int fold) override {
    fold_ = fold;
    if (fold >= 0) fold_training_labels(labels_, folds_, fold, training_labels_);
  }

  HeldOutEval held_out(const Checkpoint& point) override {
    return evaluate_held_out(*point.rows.front().cache, point.model, labels_, folds_, fold_, budget_);
  }

 private:
  const ShardStore& store_;
  const int8_t* labels_;
  MemoryBudget& budget_;
  Model shape_;
  BudgetedArray<uint16_t> folds_;
  BudgetedArray<int8_t> training_labels_;
  int fold_ = -1;
};

// One `fgm path` run: the evaluation rows, the points so far, and the steps
// of each mode.
class PathRun {
 public:
  // `fold_run`: a fold's path, each point evaluated on the fold's held-out rows.
  PathRun(PathTrainer& trainer, const PathSettings& settings, MemoryBudget& budget, const PathHooks& hooks,
          bool fold_run = false, IterationCallback on_iteration = {});
  PathOutcome run();

 private:
  void load_evaluation_rows(const Model& shape);
  void evaluate_point(PathPoint& p);
  void add_point(const Checkpoint& point, uint64_t B, double C);
  uint64_t restore();
  void report_progress(uint64_t run, const TrainProgress* train);
  void warn(std::string code, std::string message) const;
  void warn_about_point(const PathPoint& p) const;
  void warn_about_missing_points() const;
  void account(const TrainOutcome& t, const TrainSettings& s);
  void run_feature_counts();
  void run_value_list(uint64_t first_run);
  void pick_best();
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  PathTrainer& trainer_;
  const PathSettings& settings_;
  MemoryBudget& budget_;
  const PathHooks& hooks_;
  const bool fold_run_;
  const IterationCallback on_iteration_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  bool evaluation_rows_loaded_ = false;
  Reservation test_mem_, validation_mem_;
  std::unique_ptr<LabeledRows> test_, validation_;
  PathOutcome out_;
};

PathRun::PathRun(PathTrainer& trainer, const PathSettings& settings, MemoryBudget& budget,
                 const PathHooks& hooks, bool fold_run, IterationCallback on_iteration)
    : trainer_(trainer),
      settings_(settings),
      budget_(budget),
      hooks_(hooks),
      fold_run_(fold_run),
      on_iteration_(std::move(on_iteration)) {}

// Label map and width come from the training data; the rows are loaded once.
void PathRun::load_evaluation_rows(const Model& shape) {
  evaluation_rows_loaded_ = true;
  if (!settings_.test_path.empty())
    test_ = std::make_unique<LabeledRows>(load_labeled_rows(settings_.test_path, shape, budget_, test_mem_));
  if (!settings_.validation_path.empty())
    validation_ = std::make_unique<LabeledRows>(
        load_labeled_rows(settings_.validation_path, shape, budget_, validation_mem_));
}

void PathRun::evaluate_point(PathPoint& p) {
  if (!evaluation_rows_loaded_) load_evaluation_rows(p.model);
  if (test_) {
    p.test = evaluate_rows(*test_, p.model, false, budget_);
    if (p.has_debiased) p.test_debiased = evaluate_rows(*test_, p.debiased, false, budget_);
  }
  if (validation_) {
    p.validation = evaluate_rows(*validation_, p.model, false, budget_);
    if (p.has_debiased) p.validation_debiased = evaluate_rows(*validation_, p.debiased, false, budget_);
  }
}

void PathRun::add_point(const Checkpoint& point, uint64_t B, double C) {
  const Model& model = point.model;
  PathPoint p;
  p.point = static_cast<int>(out_.points.size()) + 1;
  p.B = B;
  p.C = C;
  p.selected = model.features.size();
  for (const auto& f : model.features) p.nonzero += f.weight != 0.0;
  p.train_objective = point.last ? point.last->objective : model.objective;
  p.apg_iterations = point.apg_iterations;
  p.gradient_evaluations = point.gradient_evaluations;
  p.model = model;
  if (settings_.debias) {
    ApgOptions o = settings_.base.apg;
    if (settings_.debias_C > 0) o.C = settings_.debias_C;
    o.certify = true;  // stops on apg.gap_tolerance (a fixed eps_inner = 1e-10 cost 5–10× the path)
    DebiasResult d = debias_refit(point.rows, *point.reduction, model, o, budget_);
    if (!d.solve.converged)
      add_warning(settings_.base.warnings, "debias_gap_above_tolerance",
                  msg::debias_gap_above_tolerance(p.point, d.solve.iterations, d.solve.relative_gap));
    p.debiased = std::move(d.model);
    p.has_debiased = true;
  }
  evaluate_point(p);
  warn_about_point(p);
  if (fold_run_) p.held_out = trainer_.held_out(point);
  p.seconds = elapsed();
  out_.points.push_back(std::move(p));
  if (hooks_.on_point) hooks_.on_point(out_.points.back());
}

void PathRun::warn(std::string code, std::string message) const {
  if (fold_run_ || !settings_.point_warnings || settings_.base.warnings == nullptr) return;
  settings_.base.warnings->add(std::move(code), std::move(message));
}

// A point whose model has fewer nonzero weights than selected features, or
// that does no better on held-out data than always predicting the majority
// class there, is reported: path.csv's `selected` alone reads as the count.
void PathRun::warn_about_point(const PathPoint& p) const {
  if (p.nonzero < p.selected) warn("path_point_zero_weights", msg::path_point_zero_weights(p.point, p.selected, p.nonzero));
  auto chance = [&](const EvalResult& e, const char* set, bool debiased) {
    if (e.rows == 0 || e.positives > e.rows) return;
    const double majority =
        static_cast<double>(std::max(e.positives, e.rows - e.positives)) / static_cast<double>(e.rows);
    if (e.accuracy <= majority)
      warn("chance_level_point", msg::chance_level_point(p.point, p.selected, set, debiased, e.accuracy, majority));
  };
  if (test_) {
    chance(p.test, "data.test", false);
    if (p.has_debiased) chance(p.test_debiased, "data.test", true);
  }
  if (validation_) {
    chance(p.validation, "data.validation", false);
    if (p.has_debiased) chance(p.validation_debiased, "data.validation", true);
  }
}

// path.features: a count the run could not reach (it ran out of new features
// first) has no point of its own (the point where the run ran out holds fewer).
void PathRun::warn_about_missing_points() const {
  std::string missing, delivered;
  for (uint64_t count : settings_.feature_counts)
    if (std::none_of(out_.points.begin(), out_.points.end(), [&](const PathPoint& p) { return p.selected == count; }))
      missing += (missing.empty() ? "" : ", ") + std::to_string(count);
  if (missing.empty()) return;
  for (const auto& p : out_.points) delivered += (delivered.empty() ? "" : ", ") + std::to_string(p.selected);
  warn("path_points_missing", msg::path_points_missing("path.features", missing, delivered));
}

// Points restored from a checkpoint: their models as they were emitted, the
// evaluations recomputed (the same rows give the same numbers). Returns the
// B/C run to continue with.
uint64_t PathRun::restore() {
  if (!hooks_.resume) return 0;
  for (auto& p : hooks_.resume->points) {
    p.selected = p.model.features.size();
    p.nonzero = 0;
    for (const auto& f : p.model.features) p.nonzero += f.weight != 0.0;
    evaluate_point(p);
    warn_about_point(p);
    out_.points.push_back(std::move(p));
  }
  out_.total_apg_iterations = hooks_.resume->total_apg_iterations;
  out_.total_gradient_evaluations = hooks_.resume->total_gradient_evaluations;
  out_.runs = std::move(hooks_.resume->runs);
  return hooks_.resume->run;
}

void PathRun::report_progress(uint64_t run, const TrainProgress* train) {
  if (!hooks_.on_progress) return;
  PathProgress state;
  state.run = run;
  state.total_apg_iterations = out_.total_apg_iterations;
  state.total_gradient_evaluations = out_.total_gradient_evaluations;
  state.points = out_.points;  // the models are small next to the selected columns
  state.runs = out_.runs;
  hooks_.on_progress(state, train);
}

// A finished run: its totals and its iteration log (a resumed run's log
// holds the restored iterations too).
void PathRun::account(const TrainOutcome& t, const TrainSettings& s) {
  out_.total_apg_iterations += t.total_apg_iterations;
  out_.total_gradient_evaluations += t.total_gradient_evaluations;
  out_.runs.push_back({s.B, s.apg.C, t.stop_reason, t.iterations});
}

// path.features: one FGM run with a point at each count.
void PathRun::run_feature_counts() {
  out_.mode = "features";
  TrainSettings s = settings_.base;
  s.checkpoints = settings_.feature_counts;
  s.max_features = 0;
  s.eps_outer = 0;  // the counts decide where the path ends
  s.max_iterations = std::numeric_limits<int>::max();
  s.final_certificate = false;
  TrainHooks train_hooks;
  train_hooks.on_progress = [&](const TrainProgress& progress) { report_progress(0, &progress); };
  train_hooks.on_iteration = on_iteration_;
  train_hooks.on_checkpoint = [&](const Checkpoint& point) { add_point(point, s.B, s.apg.C); };
  train_hooks.resume = hooks_.resume_train;
  account(trainer_.train(s, train_hooks), s);
}

// path.B / path.C: one FGM run per value, from `first_run` on.
void PathRun::run_value_list(uint64_t first_run) {
  const bool by_B = !settings_.B_values.empty();
  out_.mode = by_B ? "B" : "C";
  size_t count = by_B ? settings_.B_values.size() : settings_.C_values.size();
  for (size_t i = first_run; i < count; ++i) {
    TrainSettings s = settings_.base;
    if (by_B) s.B = settings_.B_values[i];
    else s.apg.C = settings_.C_values[i];
    TrainHooks train_hooks;
    train_hooks.on_progress = [&](const TrainProgress& progress) { report_progress(i, &progress); };
    train_hooks.on_iteration = on_iteration_;
    train_hooks.on_final = [&](const Checkpoint& point) { add_point(point, s.B, s.apg.C); };
    if (i == first_run) train_hooks.resume = hooks_.resume_train;
    account(trainer_.train(s, train_hooks), s);
    report_progress(i + 1, nullptr);
  }
}

// The highest validation accuracy; ties: fewer features, then the earlier point.
void PathRun::pick_best() {
  if (!validation_) return;
  auto better = [](const PathPoint& p, const PathPoint& b) {
    return p.validation.accuracy > b.validation.accuracy ||
           (p.validation.accuracy == b.validation.accuracy && p.selected < b.selected);
  };
  for (size_t i = 0; i < out_.points.size(); ++i)
    if (out_.best < 0 || better(out_.points[i], out_.points[static_cast<size_t>(out_.best)]))
      out_.best = static_cast<int>(i);
}

PathOutcome PathRun::run() {
  if (const Model* shape = trainer_.evaluation_shape()) load_evaluation_rows(*shape);
  uint64_t first_run = restore();
  if (!settings_.feature_counts.empty()) run_feature_counts();
  else run_value_list(first_run);
  warn_about_missing_points();
  pick_best();
  out_.seconds = elapsed();
  return std::move(out_);
}

// One fold of path.folds: the same path on the fold's training rows (no
// de-biasing, no test or validation set, no resume state), each point
// evaluated on the fold's held-out rows.
FoldRun run_fold(PathTrainer& trainer, const PathSettings& settings, MemoryBudget& budget, int fold,
                 const FoldRows& rows, const PathHooks& hooks) {
  FoldRun rec;
  rec.fold = fold + 1;
  rec.training_rows = rows.training;
  rec.held_out_rows = rows.held_out;
  if (hooks.on_fold_start) hooks.on_fold_start(rec, settings.folds);
  PathSettings fs = settings;
  fs.base.warnings = nullptr;  // the full-data run's warnings are the run's; a fold's are logged
  fs.debias = false;
  fs.test_path.clear();
  fs.validation_path.clear();
  fs.folds = 0;
  PathHooks none;
  trainer.set_fold(fold);
  PathRun run(trainer, fs, budget, none, true, [&](const IterationRecord& it) {
    rec.selected.push_back(it.selected);
    rec.objective.push_back(it.objective);
    rec.apg_iterations.push_back(it.apg_iterations);
  });
  PathOutcome o = run.run();
  trainer.set_fold(-1);
  for (const auto& p : o.points) rec.points.push_back(p.held_out);
  rec.total_apg_iterations = o.total_apg_iterations;
  rec.seconds = o.seconds;
  if (hooks.on_fold_end) hooks.on_fold_end(rec, settings.folds);
  return rec;
}

// Point i of the full path against point i of each fold's path. A fold whose
// path ran out of new features early has fewer points: its last model is its
// model at every later point.
void attach_cv_estimates(PathOutcome& out) {
  for (size_t i = 0; i < out.points.size(); ++i) {
    std::vector<double> accuracy, auc;
    for (const FoldRun& f : out.folds) {
      if (f.points.empty()) continue;
      const HeldOutEval& e = f.points[std::min(i, f.points.size() - 1)];
      accuracy.push_back(e.accuracy);
      auc.push_back(e.auc);
    }
    out.points[i].cv.accuracy = mean_and_se(accuracy);
    out.points[i].cv.auc = mean_and_se(auc);
  }
}

// The one-SE choice by CV accuracy and by validation accuracy (binomial SE).
void select_point(PathOutcome& out, bool has_validation) {
  std::vector<uint64_t> selected, B;
  std::vector<double> C, cv_mean, cv_se, val_mean, val_se;
  for (const auto& p : out.points) {
    selected.push_back(p.selected);
    B.push_back(p.B);
    C.push_back(p.C);
    cv_mean.push_back(p.cv.accuracy.mean);
    cv_se.push_back(p.cv.accuracy.se);
    val_mean.push_back(p.validation.accuracy);
    val_se.push_back(binomial_se(p.validation.accuracy, p.validation.rows));
  }
  const std::vector<int> order = simplicity_order(selected, B, C);
  PathSelection& sel = out.selection;
  if (!out.folds.empty()) {
    sel.has_cv = true;
    sel.cv = choose_point(cv_mean, cv_se, order);
  }
  if (has_validation && !out.points.empty()) {
    sel.has_validation = true;
    sel.validation = choose_point(val_mean, val_se, order);
    sel.validation_rows = out.points.front().validation.rows;
  }
  if (sel.has_cv) {
    sel.criterion = "cv";
    sel.chosen = sel.cv.one_se;
  } else if (sel.has_validation) {
    sel.criterion = "validation";
    sel.chosen = sel.validation.one_se;
  }
}

}  // namespace

PathOutcome run_fgm_path(const ShardStore& store, const PathSettings& settings, MemoryBudget& budget,
                         const PathHooks& hooks) {
  validate_path_settings(settings);
  validate_folds(settings, store);
  StorePathTrainer trainer(store, settings.base.labels ? settings.base.labels : store.labels(), budget);
  return run_path(trainer, settings, budget, hooks);
}

PathOutcome run_path(PathTrainer& trainer, const PathSettings& settings, MemoryBudget& budget,
                     const PathHooks& hooks) {
  validate_path_settings(settings);
  // The folds first: a partitioned store learns only here that a label has too few rows.
  std::vector<FoldRows> fold_rows;
  if (settings.folds >= 2) fold_rows = trainer.assign_folds(settings.folds, settings.fold_seed);
  PathOutcome out;
  {
    PathRun run(trainer, settings, budget, hooks);  // frees its test/validation rows before the folds
    out = run.run();
  }
  // After the full-data path (which a resume continues): the folds are not
  // checkpointed, a resumed run redoes them all.
  for (int f = 0; f < static_cast<int>(fold_rows.size()); ++f)
    out.folds.push_back(run_fold(trainer, settings, budget, f, fold_rows[static_cast<size_t>(f)], hooks));
  if (!out.folds.empty()) {
    attach_cv_estimates(out);
    out.seconds += std::accumulate(out.folds.begin(), out.folds.end(), 0.0,
                                   [](double s, const FoldRun& f) { return s + f.seconds; });
  }
  select_point(out, !settings.validation_path.empty());
  return out;
}

}  // namespace fgm
