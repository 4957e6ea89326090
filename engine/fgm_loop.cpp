#include "engine/fgm_loop.h"

#include <spdlog/spdlog.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/messages.h"
#include "features/cached_column_dot.h"
#include "features/transformed_store.h"

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
  // "converged" (certified) and "inexact" (an intermediate solve that met its rule) met their rule.
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

FgmRows::FgmRows(RowSource& source, const TrainSettings& settings, MemoryBudget& budget, const TrainHooks& hooks,
                 std::vector<const int8_t*> labels, double negative, double positive, std::string log_label)
    : source_(source), settings_(settings), budget_(budget), hooks_(hooks), comm_(source.comm()),
      y_(std::move(labels)), negative_(negative), positive_(positive), log_label_(std::move(log_label)) {
  for (size_t q = 0; q < source.parts(); ++q) {
    rows_ += source.store(q).info().n_rows;
    columns_.push_back(std::make_unique<SelectedFeatureCache>(budget, source.store(q).info().n_rows));
  }
  space_ = source.make_space(settings.space, budget);
  source.open();
  // α, a = α∘y and the decision values: O(n) each.
  dual_memory_ = budget.reserve(3 * rows_ * sizeof(double), "dual variables", source.row_memory_remedy());
  for (size_t q = 0; q < source.parts(); ++q) {
    const uint64_t n = source.store(q).info().n_rows;
    alpha_.emplace_back(n, settings.apg.C);  // α⁰ = C·1 (no feature selected ⇒ ξ = 1)
    a_.emplace_back(n);
    decisions_.emplace_back(n, 0.0);
    for (uint64_t i = 0; i < n; ++i) {
      if (y_[q][i] == 0) alpha_[q][i] = 0;  // a row outside the fit
      a_[q][i] = alpha_[q][i] * double(y_[q][i]);
    }
  }
}

// F_0 and α⁰: the solution of (31) with no feature selected. Without a bias
// that is ω = 0, b = 0, so α⁰ = C·1 (Algorithm 1). With a bias, b is fitted
// first: on unbalanced labels (a small class against the rest) α = C·1 would
// make the first worst-case analysis pick the features of the larger class —
// the bias's job — instead of the ones that tell the classes apart. With the
// fitted b, Σ_i α_i y_i = 0 (the optimality condition of b), so every score
// measures what a feature adds beyond the class balance.
double FgmRows::fit_without_features(ApgState& state) {
  if (settings_.apg.bias && source_.total_rows() > 0) {
    begin_phase();
    ApgOptions apg = settings_.apg;
    apg.certify = false;
    const ApgResult r = solve(apg, state);
    end_phase(0, "solve");
    return r.objective;
  }
  std::vector<std::vector<double>> local;
  for (size_t q = 0; q < y_.size(); ++q)
    local.push_back({loss_value(settings_.apg.loss, settings_.apg.C, y_[q], decisions_[q])});
  return source_.reduction().sum(local, 1).front();
}

// The new candidates' columns on every part. A generated column empty on
// every part (an expansion component no row reaches) carries no weight and is
// dropped: one reduction of the per-part entry counts decides, the same on
// every rank, once per batch (partitions) or per candidate (one part: no
// exchange). The columns stay reserved until the cache has copied them.
void FgmRows::add_batch(const std::vector<uint64_t>& ids) {
  for (auto& cache : columns_) cache->begin_batch();
  std::vector<std::vector<GeneratedColumn>> fresh(columns_.size());  // [part][column]
  std::vector<std::vector<double>> counts(columns_.size());
  std::vector<Reservation> held;
  auto flush = [&] {
    const size_t n_fresh = fresh.front().size();
    const std::vector<double> total =
        space_->keeps_empty_columns() ? std::vector<double>(n_fresh, 1.0) : source_.reduction().sum(counts, n_fresh);
    for (size_t q = 0; q < columns_.size(); ++q) {
      for (size_t k = 0; k < n_fresh; ++k)
        if (total[k] > 0) columns_[q]->add_column(fresh[q][k].key, fresh[q][k].rows, fresh[q][k].values);
      fresh[q].clear();
      counts[q].clear();
    }
    held.clear();
  };
  for (uint64_t id : ids) {
    space_->mark_selected(id);
    for (size_t q = 0; q < columns_.size(); ++q)
      for (GeneratedColumn& col : space_->columns(source_.store(q), id)) {
        held.push_back(budget_.reserve(col.rows.capacity() * sizeof(uint32_t) + col.values.capacity() * sizeof(float),
                                       "a new batch's columns before the selected-feature cache copies them",
                                       "lower fgm.B"));
        counts[q].push_back(static_cast<double>(col.rows.size()));
        fresh[q].push_back(std::move(col));
      }
    if (!source_.reduction().batched()) flush();
  }
  flush();
}

std::vector<double> selected_column_dots(RowSource& source,
                                         const std::vector<std::unique_ptr<SelectedFeatureCache>>& columns,
                                         const std::vector<std::vector<double>>& a) {
  const size_t selected = columns.front()->num_columns();
  std::vector<std::vector<double>> local;
  for (size_t q = 0; q < columns.size(); ++q) {
    std::vector<double> dots(selected);
    for (size_t h = 0; h < selected; ++h)
      dots[h] = tiled_column_dot(columns[q]->column(h), a[q].data(), source.store(q).info().tile_rows);
    local.push_back(std::move(dots));
  }
  return source.reduction().sum(local, selected);
}

// α from the decision values (Theorem 3), a = α∘y.
void FgmRows::update_duals() {
  for (size_t q = 0; q < y_.size(); ++q) {
    dual_from_decision(settings_.apg.loss, settings_.apg.C, y_[q], decisions_[q], alpha_[q]);
    for (uint64_t i = 0; i < alpha_[q].size(); ++i) a_[q][i] = alpha_[q][i] * double(y_[q][i]);
  }
}

std::vector<ApgRowPart> FgmRows::row_parts() {
  std::vector<ApgRowPart> out;
  for (size_t q = 0; q < columns_.size(); ++q) out.push_back({columns_[q].get(), y_[q], &decisions_[q]});
  return out;
}

// The subproblem (31) over the selected columns: APG over the parts, every
// row sum reduced by the source.
ApgResult FgmRows::solve(const ApgOptions& apg, ApgState& state) {
  const ApgResult r = solve_apg(row_parts(), source_.reduction(), apg, state, budget_);
  update_duals();
  return r;
}

// α formed from the checkpoint's ω exactly as the solve formed it (a resumed
// run repeats the arithmetic, on every backend); a checkpoint's own α (the
// single store's files before this) is not read.
void FgmRows::restore_duals(const TrainProgress& saved) {
  if (columns().num_columns() == 0) return;
  apg_decision_values(row_parts(), settings_.apg, saved.apg, budget_);
  update_duals();
}

// Algorithm 2 against the current α: the top-`batch` unselected candidates.
FgmPass FgmRows::score(uint64_t batch, int iteration) {
  const auto start = std::chrono::steady_clock::now();
  begin_phase();
  const bool measure_span = observe_values();
  FgmPass pass = take_scores(space_->score(scoring_context(batch)));
  pass.seconds = seconds_since(start);
  end_phase(iteration, "scoring");
  if (measure_span) check_value_span(iteration);
  return pass;
}

ScoringContext scoring_context(RowSource& source, std::vector<std::vector<double>>& a, uint64_t batch, int threads,
                               MemoryBudget& budget) {
  ScoringContext context;
  for (size_t q = 0; q < a.size(); ++q) context.parts.push_back(source.input(q, a[q].data()));
  context.store = &source.store(0);
  context.stream = context.parts[0].stream;
  context.blocks = context.parts[0].blocks;
  context.a = a[0].data();
  context.B = batch;
  context.threads = threads;
  context.budget = &budget;
  return context;
}

ScoringContext FgmRows::scoring_context(uint64_t batch) {
  return fgm::scoring_context(source_, a_, batch, settings_.scheduler.threads, budget_);
}

ScoreRequest FgmRows::scoring_request(uint64_t batch) {
  ScoreRequest request;
  request.space = space_.get();
  for (size_t q = 0; q < a_.size(); ++q) request.parts.push_back(source_.input(q, a_[q].data()));
  request.a = a_[0].data();
  request.B = batch;
  return request;
}

// A pass's top-B and the SIP violation (37) of α (c_j of the selected
// columns from the pass when it computed them on the way).
FgmPass FgmRows::take_scores(SpaceScores scored) {
  const std::vector<double> selected_c =
      scored.selected_dots ? *scored.selected_dots : selected_column_dots(source_, columns_, a_);
  return scored_pass(std::move(scored), columns(), selected_c);
}

bool FgmRows::observe_values() {
  if (!source_.value_span_pending) return false;
  source_.observe_values();
  return true;
}

// The span of what the space scores: largest over typical per-column max
// |value|, squared for poly2, whose features are products of two values.
void FgmRows::check_value_span(int iteration) {
  source_.value_span_pending = false;
  begin_phase();
  value_span_ = source_.value_span(feature_space_kind(settings_.space.kind).value_degree, space_->kind(),
                                   reports_warnings() ? settings_.warnings : nullptr);
  end_phase(iteration, "diagnostics");
}

Model FgmRows::model_frame() const {
  Model model = source_.model_frame(negative_, positive_);
  space_->describe(model);
  return model;
}

void FgmRows::record_transforms(Model& model) const { record_feature_transforms(source_.store(0), model); }

void FgmRows::describe_point(Checkpoint& cp) {
  cp.rows = row_parts();
  cp.reduction = &source_.reduction();
}

void FgmRows::hand_out_decisions() {
  if (hooks_.on_final_decision)
    for (size_t q = 0; q < decisions_.size(); ++q) hooks_.on_final_decision(q, decisions_[q]);
}

// The final model's counts over all rows, reduced (decision > 0 → +1).
void FgmRows::chance_counts(double counts[3], int iteration) {
  begin_phase();
  std::vector<std::vector<double>> local(y_.size(), std::vector<double>(3, 0.0));  // rows, positive, correct
  for (size_t q = 0; q < y_.size(); ++q) count_fit(y_[q], decisions_[q].size(), decisions_[q], local[q].data());
  const std::vector<double> total = source_.reduction().sum(local, 3);
  end_phase(iteration, "diagnostics");
  std::copy(total.begin(), total.end(), counts);
}

void FgmRows::begin_phase() {
  if (comm_) phase_start_ = comm_->stats();
}

void FgmRows::end_phase(int iteration, const char* phase) {
  if (comm_) record(iteration, phase, phase_start_);
}

void FgmRows::record(int iteration, const char* phase, const CommunicationStats& before) {
  communication_.push_back({iteration, phase, comm_->stats() - before});
}

// The iteration's log line, on the process that reports (a partitioned run:
// rank 0, with what this iteration communicated).
void FgmRows::after_iteration(const IterationRecord& rec) {
  if (!reports_warnings()) return;
  std::string communicated;
  if (comm_) {
    uint64_t bytes = 0;
    for (const auto& c : communication_) bytes += c.iteration == rec.iter ? c.comm.bytes : 0;
    communicated = fmt::format(", communicated {} B", bytes);
  }
  spdlog::info("{}iter {:3d}: selected {:6d} (+{}), objective {:.6g}, rel_decrease {:.3g}, sip_violation {:.4g}, "
               "scored {} candidates, score {:.3f}s, solve {:.3f}s ({} APG its), streamed {}{}",
               log_label_, rec.iter, rec.selected, rec.added, rec.objective, rec.rel_decrease, rec.sip_violation,
               rec.candidates_scored, rec.score_seconds, rec.solve_seconds, rec.apg_iterations,
               format_bytes(rec.bytes_streamed), communicated);
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
  if (saved.apg.w.size() != columns || saved.batches.size() != saved.iterations.size())
    throw Error(ErrorKind::kCorruption, msg::checkpoint_inconsistent(saved.apg.w.size(), columns));
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
// others are inexact (apg.eps_inner, proximal Newton apg.intermediate_gap;
// the paper's Inexact FGM). Known before
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
  rows_.chance_counts(c, static_cast<int>(progress_.iterations.size()));
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

std::vector<TrainOutcome> run_rows_in_lockstep(RowSource& source, const std::vector<FgmRows*>& rows,
                                               const std::vector<FgmLoop*>& loops, uint64_t certificate_batch,
                                               uint64_t& passes, uint64_t& bytes,
                                               std::vector<CommunicationRecord>& communication) {
  Communicator* comm = source.comm();
  auto shared_pass = [&](const std::vector<size_t>& served, const std::vector<uint64_t>& batches) {
    std::vector<ScoreRequest> requests;
    for (size_t q = 0; q < served.size(); ++q) requests.push_back(rows[served[q]]->scoring_request(batches[q]));
    // The first run served measures the value span on the source's first pass (one warning per store).
    FgmRows& first = *rows[served.front()];
    const int iteration = loops[served.front()]->next_iteration();
    const bool span = first.observe_values();
    const auto start = std::chrono::steady_clock::now();
    const CommunicationStats before = comm ? comm->stats() : CommunicationStats{};
    std::vector<SpaceScores> scores = score_many(first.scoring_context(0), requests);
    const double seconds = seconds_since(start);
    if (comm) {
      communication.push_back({iteration, "scoring", comm->stats() - before, -1});
      for (size_t r : served) communication.back().shared_by.push_back(static_cast<int>(r));
    }
    ++passes;
    bytes += scores.front().pass.bytes_streamed;
    if (span) first.check_value_span(iteration);
    std::vector<FgmPass> out;
    for (size_t q = 0; q < served.size(); ++q) {
      out.push_back(rows[served[q]]->take_scores(std::move(scores[q])));
      out.back().seconds = seconds;
    }
    return out;
  };
  run_in_lockstep(loops, certificate_batch, shared_pass);
  std::vector<TrainOutcome> outcomes;
  for (FgmLoop* loop : loops) outcomes.push_back(loop->finish());
  return outcomes;
}

}  // namespace fgm
