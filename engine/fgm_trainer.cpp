#include "engine/fgm_trainer.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <ctime>
#include <memory>
#include <mutex>
#include <set>

#include "core/clock.h"
#include "engine/model_provenance.h"
#include "engine/value_span.h"
#include "cache/selected_features.h"
#include "core/error.h"
#include "core/messages.h"
#include "features/block_scores.h"
#include "features/cached_column_dot.h"
#include "features/transformed_store.h"

namespace fgm {
namespace {

void warn(RunWarnings* warnings, std::string code, std::string message) {
  RunWarnings log_only;
  (warnings ? *warnings : log_only).add(std::move(code), std::move(message));
}

}  // namespace

// The warning of a solve that did not meet its rule, if any.
void warn_apg_stop(const IterationRecord& rec, RunWarnings* warnings) {
  // "converged" (certified) and "inexact" (an intermediate solve that met apg.eps_inner) met their rule.
  const bool stalled = rec.apg_stop == "stalled";
  if (rec.apg_certified && !rec.apg_converged) {
    warn(warnings, "apg_gap_above_tolerance",
         msg::apg_gap_above_tolerance(rec.iter, rec.apg_iterations, rec.apg_relative_gap,
                                      stalled ? "stalled (rounding floor reached)" : "stopped at apg.max_iterations"));
  } else if (!rec.apg_certified && rec.apg_stop != "inexact" && rec.apg_stop != "converged") {
    if (stalled) warn(warnings, "apg_stalled", msg::apg_stalled(rec.iter, rec.apg_iterations));
    else warn(warnings, "apg_max_iterations", msg::apg_iteration_cap(rec.iter, rec.apg_iterations));
  }
}

void warn_iteration(const IterationRecord& rec, RunWarnings* warnings) {
  warn_apg_stop(rec, warnings);
  if (rec.iter == 1 && rec.rel_decrease < kFirstSolveLimit)
    warn(warnings, "first_solve_no_progress", msg::first_solve_no_progress(rec.rel_decrease, kFirstSolveLimit));
}

namespace {

// One run of Algorithm 1. The state that outlives an outer iteration lives in
// `progress_` (what a resume restores); the rest is rebuilt from it.
// run() = begin(); outer iterations while iterating(); end_iterations(); the
// final certificate if needs_certificate(); finish(). An outer iteration is
// scoring_request(), its scoring pass, after_scoring(): LockstepRuns makes
// one pass for several runs' requests.
class FgmRun {
 public:
  // shared_stream: the store is streamed for this run by a LockstepRuns.
  FgmRun(const ShardStore& store, const TrainSettings& settings, MemoryBudget& budget,
         const TrainHooks& hooks, bool shared_stream = false);
  TrainOutcome run();

  void begin();
  bool iterating() const;
  ScoreRequest scoring_request();
  bool after_scoring(SpaceScores wc, double score_seconds);
  void end_iterations();
  bool needs_certificate() const;
  ScoreRequest certificate_request();
  void record_certificate(const SpaceScores& wc);
  TrainOutcome finish();
  // Makes `stream` observe the values of this process's first pass (the
  // value-span warning); after_first_pass() checks what it saw and stops it.
  void observe_values(BlockStream& stream);
  void after_first_pass(BlockStream& stream);

 private:
  void restore(TrainProgress& saved);
  bool outer_iteration(int t);
  uint64_t batch_size();
  void update_dual_product();
  SpaceScores worst_case_analysis(uint64_t batch);
  double batch_violation_terms(const SpaceScores& wc) const;
  void add_batch(const SpaceScores& wc);
  void record_solve(const ApgResult& r, IterationRecord& rec);
  std::string stop_reason(int t) const;
  bool solve_is_final(int t) const;
  void polish_final_solve();
  void final_certificate();
  Model make_model() const;
  void emit_path_point(uint64_t features);
  uint64_t selected_units() const;
  void check_value_span();
  void check_chance_level();
  void fit_without_features();

  const ShardStore& store_;
  const TrainSettings& settings_;
  MemoryBudget& budget_;
  const TrainHooks& hooks_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  const uint64_t n_;
  const int8_t* y_;
  std::unique_ptr<FeatureSpace> space_;
  SchedulerOptions scheduler_;
  Reservation resident_;
  std::unique_ptr<BlockStream> stream_;  // null when a LockstepRuns streams for this run
  Reservation dual_mem_;
  std::vector<double> a_, decision_;  // a = α∘y; d = w'x − b
  SelectedFeatureCache cache_;
  std::vector<BlockRef> blocks_;
  TrainProgress progress_;
  TrainOutcome out_;
  double f0_ = 0, f_prev_ = 0;
  // Observes the first scoring pass of this process (null once checked).
  std::unique_ptr<ValueSpan> value_span_ = std::make_unique<ValueSpan>();
  // decision_ holds the current model's values: true for a fresh run (0, the
  // empty model's) and after any solve; not after restoring a checkpoint.
  bool solved_ = true;
};

FgmRun::FgmRun(const ShardStore& store, const TrainSettings& settings, MemoryBudget& budget,
               const TrainHooks& hooks, bool shared_stream)
    : store_(store),
      settings_(settings),
      budget_(budget),
      hooks_(hooks),
      n_(store.info().n_rows),
      y_(settings.labels ? settings.labels : store.labels()),
      cache_(budget, store.info().n_rows) {
  const StoreInfo& info = store.info();
  FeatureSpaceSettings space_settings = settings.space;
  space_settings.index_base = info.index_base;
  space_ = make_feature_space(space_settings, store, budget);
  // A store that fits comfortably in the budget stays in memory between passes
  // (reserved as such; the streamer frees it before `resident` is released);
  // a larger one is streamed block by block.
  scheduler_ = settings.scheduler;
  if (!shared_stream) {
    resident_ = reserve_resident_store(info, budget, scheduler_);
    stream_ = std::make_unique<BlockStream>(store, scheduler_, budget);
  }
  // Dual variables, decision values and a = α∘y: O(n) each.
  dual_mem_ = budget.reserve(3 * n_ * sizeof(double), "dual variables", "use fewer training rows");
  progress_.alpha.assign(n_, settings.apg.C);  // α⁰ = C·1 (no feature selected ⇒ ξ = 1)
  for (uint64_t i = 0; i < n_; ++i)
    if (y_[i] == 0) progress_.alpha[i] = 0;    // a row outside the fit
  a_.resize(n_);
  decision_.assign(n_, 0.0);
  blocks_ = store.plan_blocks(scoring_block_bytes(settings.block_bytes, budget, n_, scheduler_.keep_resident));
  fit_without_features();
}

// F_0 and α⁰: the solution of (31) with no feature selected. Without a bias
// that is ω = 0, b = 0, so α⁰ = C·1 (Algorithm 1). With a bias, b is fitted
// first: on unbalanced labels (a small class against the rest) α = C·1 would
// make the first worst-case analysis pick the features of the larger class —
// the bias's job — instead of the ones that tell the classes apart. With the
// fitted b, Σ_i α_i y_i = 0 (the optimality condition of b), so every score
// measures what a feature adds beyond the class balance.
void FgmRun::fit_without_features() {
  if (settings_.apg.bias && n_ > 0) {
    ApgResult r = solve_apg(cache_, y_, settings_.apg, progress_.apg, decision_, budget_);
    dual_from_decision(settings_.apg.loss, settings_.apg.C, y_, decision_, progress_.alpha);
    f0_ = r.objective;
  } else {
    f0_ = loss_value(settings_.apg.loss, settings_.apg.C, y_, decision_);
  }
  f_prev_ = f0_;
  out_.objective_no_features = f0_;
}

// Rebuilds the run after iteration saved.iterations.size(): the batches are
// re-selected and re-materialised in their order, so the space's exclusions
// and the cache's columns are those of the uninterrupted run.
void FgmRun::restore(TrainProgress& saved) {
  solved_ = saved.iterations.empty();
  for (const auto& batch : saved.batches) {
    cache_.begin_batch();
    for (uint64_t id : batch) {
      space_->mark_selected(id);
      space_->materialize(store_, id, cache_);
    }
  }
  if (saved.apg.w.size() != cache_.num_columns() || saved.alpha.size() != n_ ||
      saved.batches.size() != saved.iterations.size())
    throw Error(ErrorKind::kCorruption,
                msg::checkpoint_inconsistent(saved.apg.w.size(), cache_.num_columns(),
                                             saved.alpha.size(), n_));
  progress_ = std::move(saved);
  for (const auto& rec : progress_.iterations) warn_iteration(rec, settings_.warnings);
  if (!progress_.iterations.empty()) f_prev_ = progress_.iterations.back().objective;
}

// fgm.max_features and the path checkpoints count selection units, what one
// top-B slot holds: a feature (linear, poly2) or a group (group, hik,
// additive), however many columns the group materialises.
uint64_t FgmRun::selected_units() const {
  uint64_t units = 0;
  for (const auto& batch : progress_.batches) units += batch.size();
  return units;
}

uint64_t FgmRun::batch_size() { return next_batch_size(settings_, selected_units(), progress_.next_path_point); }

void FgmRun::update_dual_product() {
  for (uint64_t i = 0; i < n_; ++i) a_[i] = progress_.alpha[i] * y_[i];
}

// Algorithm 2 against the current α: the top-`batch` unselected candidates.
SpaceScores FgmRun::worst_case_analysis(uint64_t batch) {
  update_dual_product();
  observe_values(*stream_);
  SpaceScores wc = run_worst_case_analysis(*space_, *stream_, blocks_, a_.data(), batch, budget_);
  ++out_.scoring_passes;
  after_first_pass(*stream_);
  return wc;
}

// The first pass of this process also measures the value span (of what the
// space scores); later passes stream as they are.
void FgmRun::observe_values(BlockStream& stream) {
  if (!value_span_) return;
  ValueSpan* span = value_span_.get();
  stream.set_observer([span](const ColumnBlock& block) { span->observe(block); });
}

void FgmRun::after_first_pass(BlockStream& stream) {
  if (!value_span_) return;
  stream.set_observer({});
  check_value_span();
}

// Warns when the values the space scores span more than kValueSpanLimit:
// largest over typical per-column max |value|, squared for poly2 (its
// generated features are products of two values).
void FgmRun::check_value_span() {
  out_.value_span = value_span_->check(space_->kind() == "poly2" ? 2 : 1, space_->kind(), settings_.warnings);
  value_span_.reset();
}

// Warns when the final model does no better on its own training rows than
// always predicting the larger class: never report a chance-level model silently.
void FgmRun::check_chance_level() {
  if (!solved_) return;
  if (hooks_.on_final_decision) hooks_.on_final_decision(decision_);
  if (!settings_.check_chance_level) return;
  uint64_t fit = 0, positive = 0, correct = 0;
  for (uint64_t i = 0; i < n_; ++i) {
    if (y_[i] == 0) continue;
    ++fit;
    positive += y_[i] > 0;
    correct += (decision_[i] > 0) == (y_[i] > 0);
  }
  if (at_chance_level(double(fit), double(correct), double(std::max(positive, fit - positive)), out_.train_accuracy,
                      out_.majority_rate))
    warn(settings_.warnings, "chance_level_model", msg::chance_level_model(out_.train_accuracy, out_.majority_rate));
}

// (37): ½ Σ_{j∈d_new} c_j² − max_h ½ Σ_{j∈d_h} c_j², with the current α. The
// cached columns give c_j exactly (same summation as the scoring pass).
double FgmRun::batch_violation_terms(const SpaceScores& wc) const {
  double best = 0;
  for (size_t h = 0; h < cache_.num_batches(); ++h) {
    double s = 0;
    for (size_t k = cache_.batch_begin(h); k < cache_.batch_end(h); ++k) {
      double c = tiled_column_dot(cache_.column(k), a_.data(), store_.info().tile_rows);
      s += c * c;
    }
    best = std::max(best, 0.5 * s);
  }
  double fresh = 0;
  for (const auto& c : wc.top) fresh += c.score;
  return 0.5 * fresh - best;
}

// Adds the new batch to the selected-feature cache (a new ω_h of (31)).
void FgmRun::add_batch(const SpaceScores& wc) {
  cache_.begin_batch();
  progress_.batches.emplace_back();
  for (const auto& c : wc.top) {
    space_->mark_selected(c.id);
    space_->materialize(store_, c.id, cache_);
    progress_.batches.back().push_back(c.id);
  }
}

void FgmRun::record_solve(const ApgResult& r, IterationRecord& rec) {
  rec.selected = cache_.num_columns();
  rec.objective = r.objective;
  rec.rel_decrease = f0_ > 0 ? (f_prev_ - r.objective) / f0_ : 0.0;
  record_apg_result(r, rec);
  warn_iteration(rec, settings_.warnings);
  rec.peak_rss_bytes = peak_rss_bytes();
  progress_.total_apg_iterations += r.iterations;
  progress_.total_line_search_steps += r.line_search_steps;
  progress_.total_gradient_evaluations += r.gradient_evaluations;
  f_prev_ = r.objective;
}

// The outer stopping rules after iteration t's solve; "" to go on.
std::string FgmRun::stop_reason(int t) const {
  return outer_stop_rule(settings_.max_features, settings_.checkpoints, settings_.max_iterations, selected_units(),
                         t);
}

// Outer iteration t: score, add the batch, solve (31) warm-started, update α.
// Returns false when the loop ends.
bool FgmRun::outer_iteration(int t) {
  FGM_ASSERT(t == static_cast<int>(progress_.iterations.size()) + 1);
  auto t_score = std::chrono::steady_clock::now();
  SpaceScores wc = worst_case_analysis(batch_size());
  return after_scoring(std::move(wc), seconds_since(t_score));
}

bool FgmRun::iterating() const {
  return progress_.stop_reason.empty() &&
         static_cast<int>(progress_.iterations.size()) < settings_.max_iterations;
}

// The next outer iteration's scoring: this run's a = α∘y and batch size.
ScoreRequest FgmRun::scoring_request() {
  ScoreRequest request;
  request.space = space_.get();
  request.B = batch_size();
  update_dual_product();
  request.a = a_.data();
  return request;
}

// The rest of the outer iteration, given its worst-case analysis `wc`.
bool FgmRun::after_scoring(SpaceScores wc, double score_seconds) {
  const int t = static_cast<int>(progress_.iterations.size()) + 1;
  progress_.total_bytes_streamed += wc.pass.bytes_streamed;
  IterationRecord rec;
  rec.iter = t;
  rec.score_seconds = score_seconds;
  rec.bytes_streamed = wc.pass.bytes_streamed;
  rec.candidates_scored = wc.candidates_scored;
  rec.pair_updates = wc.pair_updates;
  rec.sip_violation = batch_violation_terms(wc);
  progress_.stop_reason = scoring_stop_rule(settings_, wc.top.empty(), t, rec.sip_violation, f_prev_);
  if (!progress_.stop_reason.empty()) {
    out_.final_sip_violation = rec.sip_violation;
    polish_final_solve();
    return false;
  }

  add_batch(wc);
  rec.added = cache_.batch_end(cache_.num_batches() - 1) - cache_.batch_begin(cache_.num_batches() - 1);
  auto t_solve = std::chrono::steady_clock::now();
  ApgOptions apg = settings_.apg;
  apg.certify = solve_is_final(t);
  ApgResult r = solve_apg(cache_, y_, apg, progress_.apg, decision_, budget_);
  rec.solve_seconds = seconds_since(t_solve);
  solved_ = true;
  dual_from_decision(settings_.apg.loss, settings_.apg.C, y_, decision_, progress_.alpha);
  record_solve(r, rec);
  progress_.iterations.push_back(rec);
  if (hooks_.on_iteration) hooks_.on_iteration(rec);

  const auto& points = settings_.checkpoints;
  if (hooks_.on_checkpoint && progress_.next_path_point < points.size() &&
      selected_units() >= points[progress_.next_path_point]) {
    emit_path_point(points[progress_.next_path_point]);
    progress_.last_path_point_features = selected_units();
  }
  progress_.stop_reason = stop_reason(t);
  if (hooks_.on_progress) hooks_.on_progress(progress_);
  return progress_.stop_reason.empty();
}

// Whether outer iteration t's solve (its batch added) gives the run's model
// or a path point's: such a solve is certified (apg.gap_tolerance), the
// others are inexact (apg.eps_inner; the paper's Inexact FGM). Known before
// the solve when max_iterations, max_features or a path checkpoint decides
// it; when eps_outer or no_new_features ends the run, polish_final_solve.
bool FgmRun::solve_is_final(int t) const {
  const auto& points = settings_.checkpoints;
  if (progress_.next_path_point < points.size() && selected_units() >= points[progress_.next_path_point])
    return true;
  return !stop_reason(t).empty();
}

// The run ended after an inexact solve (eps_outer, no_new_features): the
// model is certified by a solve warm-started at it, recorded with the last
// outer iteration (its APG counts add up both solves).
void FgmRun::polish_final_solve() {
  if (progress_.iterations.empty() || progress_.iterations.back().apg_certified) return;
  IterationRecord& rec = progress_.iterations.back();
  ApgOptions apg = settings_.apg;
  apg.certify = true;
  auto t_solve = std::chrono::steady_clock::now();
  ApgResult r = solve_apg(cache_, y_, apg, progress_.apg, decision_, budget_);
  solved_ = true;
  dual_from_decision(settings_.apg.loss, settings_.apg.C, y_, decision_, progress_.alpha);
  record_polished_solve(r, seconds_since(t_solve), rec);
  warn_apg_stop(rec, settings_.warnings);
  progress_.total_apg_iterations += r.iterations;
  progress_.total_line_search_steps += r.line_search_steps;
  progress_.total_gradient_evaluations += r.gradient_evaluations;
  f_prev_ = r.objective;
}

// One more pass for the SIP violation (37) of the final α: the certificate.
void FgmRun::final_certificate() { record_certificate(worst_case_analysis(settings_.B)); }

bool FgmRun::needs_certificate() const {
  return settings_.final_certificate && !scoring_stop_measured_violation(progress_.stop_reason) &&
         !progress_.iterations.empty();
}

ScoreRequest FgmRun::certificate_request() {
  ScoreRequest request;
  request.space = space_.get();
  request.B = settings_.B;
  update_dual_product();
  request.a = a_.data();
  return request;
}

void FgmRun::record_certificate(const SpaceScores& wc) {
  progress_.total_bytes_streamed += wc.pass.bytes_streamed;
  out_.final_sip_violation = batch_violation_terms(wc);
}

// The model of the current state (also used for path points).
Model FgmRun::make_model() const {
  const StoreInfo& info = store_.info();
  const ApgOptions& apg = settings_.apg;
  const ApgState& state = progress_.apg;
  Model m = model_of_store(info, "fgm");
  m.loss = loss_name(apg.loss);
  m.C = apg.C;
  m.B = settings_.B;
  m.iterations = static_cast<uint32_t>(progress_.iterations.size());
  m.has_bias = apg.bias;
  m.bias = apg.bias ? state.b : 0.0;
  space_->describe(m);
  m.objective = progress_.iterations.empty() ? f0_ : progress_.iterations.back().objective;
  for (size_t h = 0; h < cache_.num_batches(); ++h) {
    for (size_t k = cache_.batch_begin(h); k < cache_.batch_end(h); ++k) {
      ModelFeature f;
      f.key = cache_.key(k);
      f.weight = k < state.w.size() ? state.w[k] : 0.0;
      f.batch = static_cast<uint32_t>(h + 1);
      m.features.push_back(f);
    }
  }
  record_feature_transforms(store_, m);  // predict applies them to raw rows
  return m;
}

void FgmRun::emit_path_point(uint64_t features) {
  Checkpoint cp;
  cp.features = features;
  cp.model = make_model();
  cp.last = &progress_.iterations.back();
  cp.seconds = seconds_since(start_);
  cp.apg_iterations = progress_.total_apg_iterations;
  cp.line_search_steps = progress_.total_line_search_steps;
  cp.gradient_evaluations = progress_.total_gradient_evaluations;
  cp.cache = &cache_;
  cp.labels = y_;
  hooks_.on_checkpoint(cp);
}

TrainOutcome FgmRun::run() {
  begin();
  while (iterating())
    if (!outer_iteration(static_cast<int>(progress_.iterations.size()) + 1)) break;
  end_iterations();
  if (needs_certificate()) final_certificate();
  return finish();
}

void FgmRun::begin() {
  if (hooks_.resume) restore(*hooks_.resume);
}

void FgmRun::end_iterations() {
  // A path that ran out of new features before its next checkpoint still
  // reports the model it reached.
  const auto& points = settings_.checkpoints;
  if (hooks_.on_checkpoint && progress_.next_path_point < points.size() && !progress_.iterations.empty() &&
      selected_units() > progress_.last_path_point_features)
    emit_path_point(selected_units());
}

TrainOutcome FgmRun::finish() {
  check_chance_level();
  out_.model = make_model();
  out_.iterations = progress_.iterations;
  out_.stop_reason = progress_.stop_reason;
  out_.total_apg_iterations = progress_.total_apg_iterations;
  out_.total_line_search_steps = progress_.total_line_search_steps;
  out_.total_gradient_evaluations = progress_.total_gradient_evaluations;
  out_.total_bytes_streamed = progress_.total_bytes_streamed;
  out_.seconds = seconds_since(start_);
  out_.budget_peak = budget_.peak();
  return std::move(out_);
}

// Runs that differ only in their labels, advanced together: each shared pass
// scores every run still iterating (and the final certificates of the runs
// that just stopped) with one stream over the store.
class LockstepRuns {
 public:
  LockstepRuns(const ShardStore& store, const std::vector<TrainSettings>& settings, MemoryBudget& budget,
               const std::vector<TrainHooks>& hooks);
  LockstepOutcome run();

 private:
  enum class Phase { kIterating, kCertificate, kDone };
  void leave_loop(size_t r);
  bool shared_pass();

  const ShardStore& store_;
  const TrainSettings& first_;
  MemoryBudget& budget_;
  Reservation resident_;
  std::unique_ptr<BlockStream> stream_;
  std::vector<BlockRef> blocks_;
  std::vector<std::unique_ptr<FgmRun>> runs_;
  std::vector<Phase> phase_;
  LockstepOutcome out_;
};

LockstepRuns::LockstepRuns(const ShardStore& store, const std::vector<TrainSettings>& settings,
                           MemoryBudget& budget, const std::vector<TrainHooks>& hooks)
    : store_(store), first_(settings.front()), budget_(budget) {
  FGM_ASSERT(settings.size() == hooks.size());
  for (size_t r = 0; r < settings.size(); ++r) {
    runs_.push_back(std::make_unique<FgmRun>(store, settings[r], budget, hooks[r], true));
    phase_.push_back(Phase::kIterating);
  }
  // As FgmRun does for itself, once for all runs, after their state: the
  // store stays resident only if that leaves room.
  SchedulerOptions scheduler = first_.scheduler;
  resident_ = reserve_resident_store(store.info(), budget, scheduler);
  stream_ = std::make_unique<BlockStream>(store, scheduler, budget);
  blocks_ = store.plan_blocks(
      scoring_block_bytes(first_.block_bytes, budget, store.info().n_rows, scheduler.keep_resident));
}

// Run r's outer loop ended: its certificate joins the next pass, if it needs one.
void LockstepRuns::leave_loop(size_t r) {
  runs_[r]->end_iterations();
  phase_[r] = runs_[r]->needs_certificate() ? Phase::kCertificate : Phase::kDone;
}

// One stream over the store for every run that needs scoring; false when none does.
bool LockstepRuns::shared_pass() {
  std::vector<size_t> served;
  std::vector<ScoreRequest> requests;
  for (size_t r = 0; r < runs_.size(); ++r) {
    if (phase_[r] == Phase::kDone) continue;
    served.push_back(r);
    requests.push_back(phase_[r] == Phase::kIterating ? runs_[r]->scoring_request()
                                                      : runs_[r]->certificate_request());
  }
  if (requests.empty()) return false;
  ScoringContext ctx;
  ctx.store = &store_;
  ctx.blocks = &blocks_;
  // The first run measures the value span of the first pass (one store, one warning).
  runs_.front()->observe_values(*stream_);
  ctx.stream = stream_.get();
  ctx.threads = first_.scheduler.threads;
  ctx.budget = &budget_;
  std::vector<SpaceScores> scores = score_many(ctx, requests);
  runs_.front()->after_first_pass(*stream_);
  ++out_.scoring_passes;
  out_.bytes_streamed += scores.front().pass.bytes_streamed;
  for (size_t q = 0; q < served.size(); ++q) {
    const size_t r = served[q];
    if (phase_[r] == Phase::kCertificate) {
      runs_[r]->record_certificate(scores[q]);
      phase_[r] = Phase::kDone;
      continue;
    }
    const double seconds = scores[q].pass.seconds;
    if (!runs_[r]->after_scoring(std::move(scores[q]), seconds) || !runs_[r]->iterating()) leave_loop(r);
  }
  return true;
}

LockstepOutcome LockstepRuns::run() {
  for (size_t r = 0; r < runs_.size(); ++r) {
    runs_[r]->begin();
    if (!runs_[r]->iterating()) leave_loop(r);
  }
  while (shared_pass()) {
  }
  for (auto& run : runs_) out_.runs.push_back(run->finish());
  return std::move(out_);
}

}  // namespace

// The block target of the scoring passes. A small budget gets smaller blocks,
// so that several stay in flight. A store kept resident is scored in blocks of
// about 16·n bytes (~2n nonzeros) when that is larger: a tile's dual slice
// (tile_rows·8 bytes) is then reused by ~16 nonzeros per cache line within a
// block, where 4 MB blocks of a tall store (n = 3·10^6) touch each line about
// once. Scores do not depend on how the columns are cut into blocks.
void record_apg_result(const ApgResult& r, IterationRecord& rec) {
  rec.apg_iterations = r.iterations;
  rec.apg_line_search_steps = r.line_search_steps;
  rec.apg_gradient_evaluations = r.gradient_evaluations;
  rec.apg_recomputed_products = r.recomputed_products;
  rec.apg_certified = r.certified;
  rec.apg_converged = r.certified && r.converged;
  rec.apg_relative_gap = r.relative_gap;
  rec.apg_stop = rec.apg_converged ? "converged" : r.converged ? "inexact" : r.stalled ? "stalled" : "max_iterations";
}

std::string scoring_stop_rule(const TrainSettings& settings, bool nothing_new, int t, double sip_violation,
                              double last_objective) {
  if (nothing_new) return "no_new_features";
  if (t > 1 && settings.eps_outer > 0 && sip_violation <= settings.eps_outer * last_objective) return "eps_outer";
  return "";
}

bool scoring_stop_measured_violation(const std::string& stop_reason) {
  return stop_reason == "no_new_features" || stop_reason == "eps_outer";
}

bool at_chance_level(double rows, double correct, double largest_class, double& train_accuracy,
                     double& majority_rate) {
  if (rows == 0) return false;
  train_accuracy = correct / rows;
  majority_rate = largest_class / rows;
  return train_accuracy <= majority_rate;
}

void record_polished_solve(const ApgResult& r, double seconds, IterationRecord& rec) {
  const IterationRecord inexact = rec;
  record_apg_result(r, rec);
  rec.solve_seconds = inexact.solve_seconds + seconds;
  rec.objective = r.objective;
  rec.apg_iterations += inexact.apg_iterations;
  rec.apg_line_search_steps += inexact.apg_line_search_steps;
  rec.apg_gradient_evaluations += inexact.apg_gradient_evaluations;
  rec.apg_recomputed_products += inexact.apg_recomputed_products;
}

uint64_t next_batch_size(const TrainSettings& settings, uint64_t selected_units, uint64_t& next_checkpoint) {
  // Land exactly on the next checkpoint and never pass max_features.
  const auto& points = settings.checkpoints;
  while (next_checkpoint < points.size() && points[next_checkpoint] <= selected_units) ++next_checkpoint;
  uint64_t limit = UINT64_MAX;
  if (next_checkpoint < points.size()) limit = points[next_checkpoint];
  if (settings.max_features > 0) limit = std::min(limit, settings.max_features);
  if (limit != UINT64_MAX) return std::min<uint64_t>(settings.B, limit - selected_units);
  return settings.B;
}

std::string outer_stop_rule(uint64_t max_features, const std::vector<uint64_t>& checkpoints, int max_iterations,
                            uint64_t selected_units, int iterations) {
  if (max_features > 0 && selected_units >= max_features) return "max_features";
  if (!checkpoints.empty() && selected_units >= checkpoints.back()) return "last_checkpoint";
  if (iterations >= max_iterations) return "max_iterations";
  return "";
}

uint64_t scoring_block_bytes(uint64_t block_bytes, const MemoryBudget& budget, uint64_t n_rows, bool resident) {
  uint64_t target = std::min(block_bytes, budget.limit() / 16);
  // Units of ~16 bytes per row: a tiled pass reuses each dual-slice line for
  // several nonzeros only when a unit holds about one nonzero per row or more
  // (a tall store in 4 MB units touches each line ~once per unit, and the
  // tile walk is then slower than a plain gather). A streamed unit is read
  // into one buffer per thread, at most a 32nd of the budget.
  target = std::max(target, std::min<uint64_t>(16 * n_rows, budget.limit() / (resident ? 16 : 32)));
  return std::max<uint64_t>(64 << 10, target);
}

bool keeps_store_resident(const StoreInfo& info, const MemoryBudget& budget) {
  return resident_store_bytes(info) <= budget.available() / 2;
}

Reservation reserve_resident_store(const StoreInfo& info, MemoryBudget& budget, SchedulerOptions& scheduler) {
  scheduler.keep_resident = keeps_store_resident(info, budget);
  if (!scheduler.keep_resident) return Reservation{};
  return budget.reserve(resident_store_bytes(info), "store pages kept resident between passes");
}


LockstepOutcome train_fgm_lockstep(const ShardStore& store, const std::vector<TrainSettings>& settings,
                                   MemoryBudget& budget, const std::vector<TrainHooks>& hooks) {
  FGM_ASSERT(!settings.empty());
  LockstepRuns runs(store, settings, budget, hooks);
  return runs.run();
}

TrainOutcome train_fgm(const ShardStore& store, const TrainSettings& settings, MemoryBudget& budget,
                       const TrainHooks& hooks) {
  FgmRun run(store, settings, budget, hooks);
  return run.run();
}

}  // namespace fgm
