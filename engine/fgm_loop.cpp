#include "engine/fgm_loop.h"

#include "core/clock.h"
#include "core/error.h"
#include "core/messages.h"

namespace fgm {

namespace {

// The next batch of a run that has `selected_units` selection units: B,
// shortened to land exactly on the next of settings.checkpoints and never to
// pass settings.max_features. `next_checkpoint` (index into checkpoints)
// moves past the counts already reached.
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

// The stop rules iteration t's scoring pass decides before its batch is added
// ("" to go on): nothing new to add ("no_new_features"), then α^{t−1}'s SIP
// violation at most eps_outer·F_{t−1} ("eps_outer", from t = 2; a relative gap
// of the cutting-plane relaxation, known here at no extra pass). Either
// measured the final α's violation: scoring_stop_measured_violation.
std::string scoring_stop_rule(const TrainSettings& settings, bool nothing_new, int t, double sip_violation,
                              double last_objective) {
  if (nothing_new) return "no_new_features";
  if (t > 1 && settings.eps_outer > 0 && sip_violation <= settings.eps_outer * last_objective) return "eps_outer";
  return "";
}

bool scoring_stop_measured_violation(const std::string& stop_reason) {
  return stop_reason == "no_new_features" || stop_reason == "eps_outer";
}

// An APG solve's figures in an outer iteration's record (apg_* fields).
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

// A certified solve that polished the last iteration's inexact one into its
// record: r's figures and objective, both solves' APG work and time summed.
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

// The warning of a solve that did not meet its rule: a certified solve above
// apg.gap_tolerance (apg_gap_above_tolerance), an inexact one at the cap or stalled.
void warn_apg_stop(const IterationRecord& rec, RunWarnings* warnings) {
  // "converged" (certified) and "inexact" (an intermediate solve that met apg.eps_inner) met their rule.
  const bool stalled = rec.apg_stop == "stalled";
  if (rec.apg_certified && !rec.apg_converged) {
    add_warning(warnings, "apg_gap_above_tolerance",
         msg::apg_gap_above_tolerance(rec.iter, rec.apg_iterations, rec.apg_relative_gap,
                                      stalled ? "stalled (rounding floor reached)" : "stopped at apg.max_iterations"));
  } else if (!rec.apg_certified && rec.apg_stop != "inexact" && rec.apg_stop != "converged") {
    if (stalled) add_warning(warnings, "apg_stalled", msg::apg_stalled(rec.iter, rec.apg_iterations));
    else add_warning(warnings, "apg_max_iterations", msg::apg_iteration_cap(rec.iter, rec.apg_iterations));
  }
}

// The warnings an outer iteration's solve raises (also replayed for iterations
// restored from a checkpoint, so a resumed run reports the same warnings): a
// solve that ended at the iteration cap or in a stall is not converged; a
// first solve that barely lowers F_0 (with a converged solve, the selected
// features cannot fit the labels: usually a few huge features).
void warn_iteration(const IterationRecord& rec, RunWarnings* warnings) {
  warn_apg_stop(rec, warnings);
  if (rec.iter == 1 && rec.rel_decrease < kFirstSolveLimit)
    add_warning(warnings, "first_solve_no_progress", msg::first_solve_no_progress(rec.rel_decrease, kFirstSolveLimit));
}

}  // namespace

FgmPass scored_pass(SpaceScores scored, const SelectedFeatureCache& columns, const std::vector<double>& selected_c) {
  double best = 0;
  for (size_t h = 0; h < columns.num_batches(); ++h) {
    double s = 0;
    for (size_t j = columns.batch_begin(h); j < columns.batch_end(h); ++j) s += selected_c[j] * selected_c[j];
    best = std::max(best, 0.5 * s);
  }
  FgmPass pass;
  double fresh = 0;
  for (const auto& c : scored.top) fresh += c.score;
  pass.sip_violation = 0.5 * fresh - best;
  pass.top = std::move(scored.top);
  pass.top_memory = std::move(scored.top_memory);
  pass.seconds = scored.pass.seconds;
  pass.bytes_streamed = scored.pass.bytes_streamed;
  pass.candidates_scored = scored.candidates_scored;
  pass.pair_updates = scored.pair_updates;
  return pass;
}

void count_fit(const int8_t* y, uint64_t n, const std::vector<double>& decision, double counts[3]) {
  for (uint64_t i = 0; i < n; ++i) {
    if (y[i] == 0) continue;  // a row left out of the fit
    const double d = decision.empty() ? 0.0 : decision[i];
    counts[0] += 1;
    counts[1] += y[i] > 0;
    counts[2] += (d > 0) == (y[i] > 0);
  }
}

FgmLoop::FgmLoop(FgmRows& rows, const TrainSettings& settings, MemoryBudget& budget, const TrainHooks& hooks)
    : rows_(rows), settings_(settings), budget_(budget), hooks_(hooks) {
  f0_ = f_prev_ = out_.objective_no_features = rows.fit_without_features(progress_.apg);
}

// A loop alone is the lockstep of one: its passes are its own.
TrainOutcome FgmLoop::run() {
  run_in_lockstep({this}, settings_.B, [this](const std::vector<size_t>&, const std::vector<uint64_t>& batches) {
    ++out_.scoring_passes;
    std::vector<FgmPass> pass;
    pass.push_back(rows_.score(batches.front(), next_iteration()));
    return pass;
  });
  return finish();
}

void FgmLoop::begin() {
  if (hooks_.resume) restore(*hooks_.resume);
}

// Rebuilds the run after iteration saved.iterations.size(): the batches are
// re-selected and re-read in their order, so the space's exclusions and the
// selected columns are those of the uninterrupted run.
void FgmLoop::restore(TrainProgress& saved) {
  for (const auto& batch : saved.batches) rows_.add_batch(batch);
  const uint64_t columns = rows_.columns().num_columns();
  if (saved.apg.w.size() != columns || saved.alpha.size() != rows_.saved_duals() ||
      saved.batches.size() != saved.iterations.size())
    throw Error(ErrorKind::kCorruption, msg::checkpoint_inconsistent(saved.apg.w.size(), columns, saved.alpha.size(),
                                                                     rows_.saved_duals()));
  progress_ = std::move(saved);
  // A checkpoint that predates the stop rule's record ends where that rule says.
  if (progress_.stop_reason.empty()) progress_.stop_reason = stop_reason(static_cast<int>(progress_.iterations.size()));
  rows_.restore_duals(progress_);
  restored_ = progress_.iterations.size();
  for (const auto& rec : progress_.iterations) warn_iteration_if_reporting(rec);
  if (!progress_.iterations.empty()) f_prev_ = progress_.iterations.back().objective;
}

void FgmLoop::warn_iteration_if_reporting(const IterationRecord& rec) const {
  if (rows_.reports_warnings()) warn_iteration(rec, settings_.warnings);
}

// fgm.max_features and the path checkpoints count selection units, what one
// top-B slot holds: a feature (linear, poly2) or a group (group, hik,
// additive), however many columns the group materialises.
uint64_t FgmLoop::selected_units() const {
  uint64_t units = 0;
  for (const auto& batch : progress_.batches) units += batch.size();
  return units;
}

uint64_t FgmLoop::batch_size() { return next_batch_size(settings_, selected_units(), progress_.next_path_point); }

bool FgmLoop::iterating() const {
  return progress_.stop_reason.empty() && static_cast<int>(progress_.iterations.size()) < settings_.max_iterations;
}

// The outer stopping rules after iteration t's solve; "" to go on.
std::string FgmLoop::stop_reason(int t) const {
  return outer_stop_rule(settings_.max_features, settings_.checkpoints, settings_.max_iterations, selected_units(),
                         t);
}

// Whether outer iteration t's solve (its batch added) gives the run's model
// or a path point's: such a solve is certified (apg.gap_tolerance), the
// others are inexact (apg.eps_inner; the paper's Inexact FGM). Known before
// the solve when max_iterations, max_features or a path checkpoint decides
// it; when eps_outer or no_new_features ends the run, polish_final_solve.
bool FgmLoop::solve_is_final(int t) const {
  const auto& points = settings_.checkpoints;
  if (progress_.next_path_point < points.size() && selected_units() >= points[progress_.next_path_point])
    return true;
  return !stop_reason(t).empty();
}

// The rest of outer iteration t, given its scoring pass: the scoring stop
// rules, the new batch, the solve of (31) warm-started, α, a path point.
bool FgmLoop::after_scoring(FgmPass pass) {
  const int t = next_iteration();
  progress_.total_bytes_streamed += pass.bytes_streamed;
  IterationRecord rec;
  rec.iter = t;
  rec.score_seconds = pass.seconds;
  rec.bytes_streamed = pass.bytes_streamed;
  rec.candidates_scored = pass.candidates_scored;
  rec.pair_updates = pass.pair_updates;
  rec.sip_violation = pass.sip_violation;
  progress_.stop_reason = scoring_stop_rule(settings_, pass.top.empty(), t, rec.sip_violation, f_prev_);
  if (!progress_.stop_reason.empty()) {
    out_.final_sip_violation = rec.sip_violation;
    polish_final_solve();
    return false;
  }

  const auto t_solve = std::chrono::steady_clock::now();
  rows_.begin_phase();
  const uint64_t columns_before = rows_.columns().num_columns();
  progress_.batches.emplace_back();
  for (const auto& c : pass.top) progress_.batches.back().push_back(c.id);
  rows_.add_batch(progress_.batches.back());
  rec.added = rows_.columns().num_columns() - columns_before;
  ApgOptions apg = settings_.apg;
  apg.certify = solve_is_final(t);
  const ApgResult r = rows_.solve(apg, progress_.apg);
  rows_.end_phase(t, "solve");
  rec.solve_seconds = seconds_since(t_solve);
  record_solve(r, rec);
  progress_.iterations.push_back(rec);
  if (hooks_.on_iteration) hooks_.on_iteration(rec);
  rows_.after_iteration(rec);

  const auto& points = settings_.checkpoints;
  if (hooks_.on_checkpoint && progress_.next_path_point < points.size() &&
      selected_units() >= points[progress_.next_path_point]) {
    emit_point(hooks_.on_checkpoint, points[progress_.next_path_point]);
    progress_.last_path_point_features = selected_units();
  }
  progress_.stop_reason = stop_reason(t);
  if (hooks_.on_progress) {
    sum_apg_work(progress_);
    rows_.save_duals(progress_);
    hooks_.on_progress(progress_);
  }
  return progress_.stop_reason.empty();
}

void FgmLoop::record_solve(const ApgResult& r, IterationRecord& rec) {
  rec.selected = rows_.columns().num_columns();
  rec.objective = r.objective;
  rec.rel_decrease = f0_ > 0 ? (f_prev_ - r.objective) / f0_ : 0.0;  // (38)
  record_apg_result(r, rec);
  warn_iteration_if_reporting(rec);
  rec.peak_rss_bytes = peak_rss_bytes();
  f_prev_ = r.objective;
}

// The run ended after an inexact solve (eps_outer, no_new_features): the
// model is certified by a solve warm-started at it, recorded with the last
// outer iteration (its APG counts add up both solves).
void FgmLoop::polish_final_solve() {
  if (progress_.iterations.empty() || progress_.iterations.back().apg_certified) return;
  IterationRecord& rec = progress_.iterations.back();
  ApgOptions apg = settings_.apg;
  apg.certify = true;
  const auto t_solve = std::chrono::steady_clock::now();
  rows_.begin_phase();
  const ApgResult r = rows_.solve(apg, progress_.apg);
  rows_.end_phase(rec.iter, "solve");
  record_polished_solve(r, seconds_since(t_solve), rec);
  if (rows_.reports_warnings()) warn_apg_stop(rec, settings_.warnings);
  f_prev_ = r.objective;
}

// The APG work so far: the sum over the iteration records (a polished solve
// is in its iteration's record), so a restored run counts what it restored.
void FgmLoop::sum_apg_work(TrainProgress& totals) const {
  totals.total_apg_iterations = totals.total_line_search_steps = totals.total_gradient_evaluations = 0;
  for (const IterationRecord& r : progress_.iterations) {
    totals.total_apg_iterations += r.apg_iterations;
    totals.total_line_search_steps += r.apg_line_search_steps;
    totals.total_gradient_evaluations += r.apg_gradient_evaluations;
  }
}

bool FgmLoop::needs_certificate() const {
  return settings_.final_certificate && !scoring_stop_measured_violation(progress_.stop_reason) &&
         !progress_.iterations.empty();
}

void FgmLoop::record_certificate(const FgmPass& pass) {
  progress_.total_bytes_streamed += pass.bytes_streamed;
  out_.final_sip_violation = pass.sip_violation;
}

// A path that ran out of new features before its next checkpoint still
// reports the model it reached.
void FgmLoop::end_iterations() {
  const auto& points = settings_.checkpoints;
  if (hooks_.on_checkpoint && progress_.next_path_point < points.size() && !progress_.iterations.empty() &&
      selected_units() > progress_.last_path_point_features)
    emit_point(hooks_.on_checkpoint, selected_units());
}

// The model of the current state (also used for path points).
Model FgmLoop::make_model() const {
  const ApgOptions& apg = settings_.apg;
  const ApgState& state = progress_.apg;
  Model m = rows_.model_frame();
  m.loss = loss_name(apg.loss);
  m.C = apg.C;
  m.B = settings_.B;
  m.iterations = static_cast<uint32_t>(progress_.iterations.size());
  m.has_bias = apg.bias;
  m.bias = apg.bias ? state.b : 0.0;
  m.objective = progress_.iterations.empty() ? f0_ : progress_.iterations.back().objective;
  const SelectedFeatureCache& cache = rows_.columns();
  for (size_t h = 0; h < cache.num_batches(); ++h) {
    for (size_t k = cache.batch_begin(h); k < cache.batch_end(h); ++k) {
      ModelFeature f;
      f.key = cache.key(k);
      f.weight = k < state.w.size() ? state.w[k] : 0.0;
      f.batch = static_cast<uint32_t>(h + 1);
      m.features.push_back(f);
    }
  }
  rows_.record_transforms(m);  // predict applies them to raw rows
  return m;
}

void FgmLoop::emit_point(const CheckpointCallback& hook, uint64_t features) {
  Checkpoint cp;
  cp.features = features;
  cp.model = make_model();
  if (!progress_.iterations.empty()) cp.last = &progress_.iterations.back();
  cp.seconds = seconds_since(start_);
  TrainProgress work;
  sum_apg_work(work);
  cp.apg_iterations = work.total_apg_iterations;
  cp.line_search_steps = work.total_line_search_steps;
  cp.gradient_evaluations = work.total_gradient_evaluations;
  rows_.describe_point(cp);
  hook(cp);
}

// Warns when the final model does no better on its own training rows than
// always predicting the larger class: never report a chance-level model silently.
void FgmLoop::check_chance_level() {
  double c[3] = {0, 0, 0};  // rows of the fit, positive, right
  if (!rows_.chance_counts(c, static_cast<int>(progress_.iterations.size()))) return;
  if (at_chance_level(c[0], c[2], std::max(c[1], c[0] - c[1]), out_.train_accuracy, out_.majority_rate) &&
      rows_.reports_warnings())
    add_warning(settings_.warnings, "chance_level_model", msg::chance_level_model(out_.train_accuracy, out_.majority_rate));
}

TrainOutcome FgmLoop::finish() {
  if (hooks_.on_final) emit_point(hooks_.on_final, selected_units());
  rows_.hand_out_decisions();
  if (settings_.check_chance_level) check_chance_level();
  out_.model = make_model();
  out_.value_span = rows_.value_span();
  sum_apg_work(progress_);
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

void run_in_lockstep(const std::vector<FgmLoop*>& loops, uint64_t certificate_batch, const SharedPass& shared_pass) {
  enum class Phase { kIterating, kCertificate, kDone };
  std::vector<Phase> phase(loops.size(), Phase::kIterating);
  // Loop r's iterations ended: its certificate joins the next pass, if it needs one.
  auto leave_loop = [&](size_t r) {
    loops[r]->end_iterations();
    phase[r] = loops[r]->needs_certificate() ? Phase::kCertificate : Phase::kDone;
  };
  for (size_t r = 0; r < loops.size(); ++r) {
    loops[r]->begin();
    if (!loops[r]->iterating()) leave_loop(r);
  }
  for (;;) {
    std::vector<size_t> served;
    std::vector<uint64_t> batches;
    for (size_t r = 0; r < loops.size(); ++r) {
      if (phase[r] == Phase::kDone) continue;
      served.push_back(r);
      batches.push_back(phase[r] == Phase::kIterating ? loops[r]->batch_size() : certificate_batch);
    }
    if (served.empty()) return;
    std::vector<FgmPass> passes = shared_pass(served, batches);
    for (size_t q = 0; q < served.size(); ++q) {
      const size_t r = served[q];
      if (phase[r] == Phase::kCertificate) {
        loops[r]->record_certificate(passes[q]);
        phase[r] = Phase::kDone;
      } else if (!loops[r]->after_scoring(std::move(passes[q])) || !loops[r]->iterating()) {
        leave_loop(r);
      }
    }
  }
}

}  // namespace fgm
