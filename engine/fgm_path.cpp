#include "engine/fgm_path.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"
#include "core/messages.h"
#include "engine/debias.h"
#include "engine/distributed_fgm.h"
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

// Rows of fold f among the `count` rows of one label dealt round-robin from
// `dealt` on (assign_folds: the shuffled row at position r gets fold (dealt + r) mod k).
uint64_t dealt_to_fold(uint64_t count, uint64_t dealt, int k, int f) {
  const uint64_t first = (uint64_t(f) + uint64_t(k) - dealt % uint64_t(k)) % uint64_t(k);  // first position of f
  return count / uint64_t(k) + (first < count % uint64_t(k) ? 1 : 0);
}

// One cross-validation fold's rows, over all rows of the store.
struct FoldRows {
  uint64_t training = 0, held_out = 0;
};

// One (decision value, label) pair of a held-out row, as gathered on rank 0.
constexpr size_t kHeldOutPairBytes = sizeof(double) + sizeof(int8_t);

// The labels cross-validation deals into folds: this process's parts' (±1,
// 0 for a row outside the fit) and every part's rows of −1 and of +1.
struct FoldLabels {
  std::vector<std::vector<int8_t>> own;
  std::vector<std::array<uint64_t, 2>> label_rows;
  uint32_t first = 0;  // index of the first own part among all parts
  Reservation memory;  // the labels and the fold's row mask
};

using LeftOut = std::vector<std::vector<uint8_t>>;  // per own part, nonzero = out of the fit

// What differs between the single store (one part) and this rank's
// partitions for a path: where the labels are and how a run is trained.
struct PathBackend {
  const Model* shape = nullptr;   // the evaluation rows' label map and width; null: the first point's model
  Communicator* comm = nullptr;   // partitions: held-out figures gathered on rank 0
  const char* remedy = "use fewer training rows";
  std::function<FoldLabels()> labels;
  // One FGM run; `left_out` during a fold's path, else null.
  std::function<TrainOutcome(const TrainSettings&, const TrainHooks&, const LeftOut* left_out)> train;
  CommunicationStats* cv_communication = nullptr;  // partitions: what the folds exchange
};

// The FGM runs behind a path, on either backend, and its cross-validation:
// the stratified folds of all rows (engine/path_selection.h: the same folds
// on one store and on partitions), each fold's runs with its held-out rows
// left out, and a point's accuracy and AUC on them (decision values from the
// point's rows of its selected columns, gathered on rank 0 in row order).
class PathTrainer {
 public:
  PathTrainer(PathBackend backend, MemoryBudget& budget) : backend_(std::move(backend)), budget_(budget) {}
  const Model* evaluation_shape() const { return backend_.shape; }
  TrainOutcome train(const TrainSettings& s, const TrainHooks& hooks) {
    return backend_.train(s, hooks, fold_ >= 0 ? &left_out_ : nullptr);
  }
  // Throws a config error naming path.folds when a label has fewer than k rows.
  std::vector<FoldRows> assign_folds(int k, uint64_t seed);
  // train() then fits all rows but those of fold `fold` (−1: all rows).
  void set_fold(int fold);
  HeldOutEval held_out(const Checkpoint& point);

 private:
  CommunicationStats stats() const { return backend_.comm ? backend_.comm->stats() : CommunicationStats{}; }
  void add_cv_communication(const CommunicationStats& before) {
    if (backend_.cv_communication) *backend_.cv_communication += stats() - before;
  }
  HeldOutEval gather_on_rank0(const std::vector<double>& scores, const std::vector<int8_t>& y);

  PathBackend backend_;
  MemoryBudget& budget_;
  FoldLabels labels_;
  std::vector<BudgetedArray<uint16_t>> folds_;  // per own part
  LeftOut left_out_;
  int fold_ = -1;
};

std::vector<FoldRows> PathTrainer::assign_folds(int k, uint64_t seed) {
  const CommunicationStats before = stats();
  labels_ = backend_.labels();
  uint64_t total[2] = {0, 0};
  for (const auto& rows : labels_.label_rows)
    for (int c = 0; c < 2; ++c) total[c] += rows[c];
  validate_folds(k, total[0] > 0 && total[1] > 0 ? std::min(total[0], total[1]) : std::max(total[0], total[1]));
  std::vector<const int8_t*> label_ptrs;
  std::vector<uint64_t> rows;
  for (const auto& y : labels_.own) {
    label_ptrs.push_back(y.data());
    rows.push_back(y.size());
  }
  folds_.clear();
  if (labels_.label_rows.size() == 1)  // one part: its O(n) shuffle, not the replay of a partition's share
    folds_.push_back(fgm::assign_folds(label_ptrs[0], rows[0], k, seed, budget_));
  else
    folds_ = assign_partition_folds(labels_.label_rows, labels_.first, label_ptrs, rows, k, seed, budget_);
  left_out_.assign(folds_.size(), {});
  add_cv_communication(before);
  // Fold sizes from the label counts: label −1 is dealt from 0, +1 from n₋.
  std::vector<FoldRows> out(static_cast<size_t>(k));
  for (int f = 0; f < k; ++f) {
    out[size_t(f)].held_out = dealt_to_fold(total[0], 0, k, f) + dealt_to_fold(total[1], total[0], k, f);
    out[size_t(f)].training = total[0] + total[1] - out[size_t(f)].held_out;
  }
  return out;
}

void PathTrainer::set_fold(int fold) {
  fold_ = fold;
  for (size_t q = 0; q < folds_.size(); ++q) {
    left_out_[q].resize(folds_[q].size());
    for (uint64_t i = 0; i < folds_[q].size(); ++i) left_out_[q][i] = folds_[q][i] == fold;
  }
}

// The own held-out rows' decision values and labels; on partitions gathered
// on rank 0 in rank order (= partition order = row order), 9 bytes a row.
HeldOutEval PathTrainer::held_out(const Checkpoint& point) {
  const CommunicationStats before = stats();
  uint64_t held = 0;
  for (const auto& folds : folds_)
    for (uint16_t f : folds) held += f == fold_;
  // Scores and labels, and the AUC's rank order or the gather's bytes.
  Reservation mine = budget_.reserve(held * (sizeof(double) + 1 + (backend_.comm ? kHeldOutPairBytes : sizeof(double))),
                                     "held-out scores", backend_.remedy);
  std::vector<double> scores;
  std::vector<int8_t> y;
  scores.reserve(held);
  y.reserve(held);
  for (size_t q = 0; q < folds_.size(); ++q)
    append_held_out_scores(*point.rows[q].cache, point.model, labels_.own[q].data(), folds_[q].data(), fold_,
                           budget_, scores, y);
  if (!backend_.comm) return held_out_eval(scores, y);
  HeldOutEval out = gather_on_rank0(scores, y);
  add_cv_communication(before);
  return out;
}

HeldOutEval PathTrainer::gather_on_rank0(const std::vector<double>& scores, const std::vector<int8_t>& y) {
  Communicator& comm = *backend_.comm;
  const uint64_t held = scores.size();
  std::vector<std::vector<uint8_t>> parts(static_cast<size_t>(comm.size()));
  parts[0].resize(held * kHeldOutPairBytes);
  std::memcpy(parts[0].data(), scores.data(), held * sizeof(double));
  std::memcpy(parts[0].data() + held * sizeof(double), y.data(), held);
  std::vector<size_t> sizes;
  const std::vector<uint8_t> all = comm.alltoallv(parts, &sizes);
  if (comm.rank() != 0) return {};
  const uint64_t rows = all.size() / kHeldOutPairBytes;
  Reservation gathered = budget_.reserve(rows * (2 * sizeof(double) + 1), "held-out scores of all ranks",
                                         "use more memory on rank 0");
  std::vector<double> all_scores(rows, 0.0);
  std::vector<int8_t> all_y(rows, 0);
  uint64_t at = 0, offset = 0;
  for (size_t bytes : sizes) {  // per source rank: its scores, then its labels
    const uint64_t h = bytes / kHeldOutPairBytes;
    std::memcpy(all_scores.data() + at, all.data() + offset, h * sizeof(double));
    std::memcpy(all_y.data() + at, all.data() + offset + h * sizeof(double), h);
    at += h;
    offset += bytes;
  }
  return held_out_eval(all_scores, all_y);
}

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
  chance(p.test, "data.test", false);  // an evaluation not made has no rows
  chance(p.test_debiased, "data.test", true);
  chance(p.validation, "data.validation", false);
  chance(p.validation_debiased, "data.validation", true);
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

// The path over `trainer`: its points, refits, evaluations, the folds'
// paths (settings.folds ≥ 2) and the chosen point.
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

// The single store as one part.
PathBackend store_backend(const ShardStore& store, const int8_t* labels, const Model& shape, MemoryBudget& budget) {
  PathBackend backend;
  backend.shape = &shape;
  backend.labels = [&store, labels, &budget] {
    const uint64_t n = store.info().n_rows;
    FoldLabels f;
    f.memory = budget.reserve(2 * n, "cross-validation labels and row mask", "use fewer training rows");
    f.own.emplace_back(labels, labels + n);
    f.label_rows.push_back({0, 0});
    for (int8_t y : f.own[0])
      if (y != 0) ++f.label_rows[0][y > 0];
    return f;
  };
  return backend;
}

// This rank's partitions: each rank labels its rows as the trainer does (+1:
// the larger of the two values of all partitions) and one tree sum gives
// every partition's rows of each label.
PathBackend partition_backend(Communicator& comm, const std::string& dir, const TrainSettings& base,
                              MemoryBudget& budget, DistributedPathOutcome& out) {
  PathBackend backend;
  backend.comm = &comm;
  backend.remedy = "use more ranks (more, smaller partitions)";
  backend.cv_communication = &out.cv_communication;
  backend.labels = [&comm, &dir, &base, &budget] {
    OwnPartitions own(comm, dir, base.scheduler, base.block_bytes, budget);
    const std::vector<double> values = own.class_values();
    if (values.size() > 2) throw Error(ErrorKind::kConfig, msg::multiclass_path_unsupported(dir, values.size()));
    const uint32_t partitions = own.manifest().partitions;
    FoldLabels f;
    f.first = own.range().first;
    f.memory = budget.reserve(own.own_rows() * 2, "cross-validation labels and row mask",
                              "use more ranks (more, smaller partitions)");
    std::vector<std::vector<double>> local;  // [partition]: 2·partitions counts, this partition's at its slots
    for (size_t q = 0; q < own.size(); ++q) {
      f.own.push_back(own.binary_labels(q, values[1]));
      local.emplace_back(2 * size_t(partitions), 0.0);
      for (int8_t label : f.own.back()) local.back()[2 * (f.first + q) + (label > 0)] += 1;
    }
    const std::vector<double> total = own.sum(local, 2 * size_t(partitions));  // integers: exact
    for (uint32_t p = 0; p < partitions; ++p)
      f.label_rows.push_back({static_cast<uint64_t>(total[2 * p]), static_cast<uint64_t>(total[2 * p + 1])});
    return f;
  };
  return backend;
}

// One FGM run on either backend (engine/distributed_fgm.h train_fgm_on), a
// fold's rows left out; this rank's communication recorded in `out`.
TrainOutcome train_path_run(const FgmData& data, const TrainSettings& s, const TrainHooks& hooks,
                            const LeftOut* left_out, MemoryBudget& budget, DistributedPathOutcome& out) {
  DistributedHooks h;
  static_cast<TrainHooks&>(h) = hooks;
  h.left_out = left_out;
  FgmOutcome d = train_fgm_on(data, s, budget, h);
  out.manifest = d.manifest;
  out.ranks = d.ranks;
  out.own_partitions = d.own_partitions;
  if (left_out)
    for (const CommunicationRecord& c : d.communication) out.cv_communication += c.comm;
  else
    out.communication.push_back(std::move(d.communication));
  return std::move(static_cast<TrainOutcome&>(d));
}

}  // namespace

void check_partitioned_path_data(Communicator& comm, const std::string& store_dir, int folds, MemoryBudget& budget) {
  OwnPartitions own(comm, store_dir, SchedulerOptions{}, TrainSettings{}.block_bytes, budget);
  const std::vector<double> values = own.class_values(false);
  if (values.size() > 2) throw Error(ErrorKind::kConfig, msg::multiclass_path_unsupported(store_dir, values.size()));
  if (folds < 2) return;
  uint64_t own_count[2] = {0, 0};  // this rank's rows of values.front(), values.back()
  for (size_t q = 0; q < own.size(); ++q)
    for (const int8_t y : own.binary_labels(q, values.back())) ++own_count[y > 0 ? 1 : 0];
  const std::vector<uint8_t> all = comm.allgather(own_count, sizeof own_count);
  uint64_t total[2] = {0, 0};
  for (size_t r = 0; r < all.size() / sizeof own_count; ++r)
    for (int c = 0; c < 2; ++c) {
      uint64_t v;
      std::memcpy(&v, all.data() + r * sizeof own_count + c * sizeof v, sizeof v);
      total[c] += v;
    }
  validate_folds(folds, values.size() == 2 ? std::min(total[0], total[1]) : total[0] + total[1]);
}

DistributedPathOutcome run_fgm_path(Communicator& comm, const ShardStore* store, const std::string& store_dir,
                                    const PathSettings& settings, MemoryBudget& budget, const PathHooks& hooks) {
  PathSettings local = settings;
  if (comm.rank() != 0) {  // rank 0 alone evaluates and warns
    local.test_path.clear();
    local.validation_path.clear();
    local.point_warnings = false;
  }
  DistributedPathOutcome out;
  const Model shape = store ? model_of_store(store->info(), "fgm") : Model{};
  PathBackend backend =
      store ? store_backend(*store, settings.base.labels ? settings.base.labels : store->labels(), shape, budget)
            : partition_backend(comm, store_dir, local.base, budget, out);
  const FgmData data{comm, store, store_dir};
  backend.train = [&](const TrainSettings& s, const TrainHooks& hooks, const LeftOut* left_out) {
    return train_path_run(data, s, hooks, left_out, budget, out);
  };
  PathTrainer trainer(std::move(backend), budget);
  const CommunicationStats before = comm.stats();
  out.path = run_path(trainer, local, budget, hooks);
  out.total_communication = comm.stats() - before;
  // The trainer's records and the cross-validation leave out what the refits at the points communicated.
  CommunicationStats recorded = out.cv_communication;
  for (const auto& run : out.communication)
    for (const CommunicationRecord& c : run) recorded += c.comm;
  out.refit_communication = out.total_communication - recorded;
  out.budget_peak = budget.peak();
  return out;
}

PathOutcome run_fgm_path(const ShardStore& store, const PathSettings& settings, MemoryBudget& budget,
                         const PathHooks& hooks) {
  SingleRankCommunicator one;
  return run_fgm_path(one, &store, "", settings, budget, hooks).path;
}

}  // namespace fgm
