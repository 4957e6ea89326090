#include "engine/mslr_trainer.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <type_traits>

#include "cache/selected_features.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/messages.h"
#include "engine/fgm_trainer.h"
#include "engine/model_provenance.h"
#include "engine/mslr_loop.h"
#include "features/block_scores.h"
#include "features/cached_column_dot.h"
#include "features/transformed_store.h"

namespace fgm {
namespace {

constexpr char kStateTag[] = "MSLRSTATE1";
constexpr char kDualSliceTag[] = "MSLRDUALS1";

// Fixed-width little-endian fields (the machines fgm runs on are little-endian;
// the checkpoint is read back by the same build).
class StateWriter {
 public:
  template <class T>
  void scalar(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  template <class T>
  void vector(const std::vector<T>& v) {
    scalar<uint64_t>(v.size());
    if (!v.empty()) out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  void string(const std::string& v) {
    scalar<uint64_t>(v.size());
    out_ += v;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class StateReader {
 public:
  StateReader(const std::string& bytes, const std::string& file) : bytes_(bytes), file_(file) {}
  template <class T>
  T scalar() {
    T v;
    need(sizeof v);
    std::memcpy(&v, bytes_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  template <class T>
  std::vector<T> vector() {
    const uint64_t n = scalar<uint64_t>();
    if (n > (bytes_.size() - at_) / sizeof(T)) fail("a list runs past the end");
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), bytes_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return v;
  }
  std::string string() {
    const uint64_t n = scalar<uint64_t>();
    need(n);
    std::string v = bytes_.substr(at_, n);
    at_ += n;
    return v;
  }
  bool at_end() const { return at_ == bytes_.size(); }
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(ErrorKind::kCorruption, msg::not_a_checkpoint(file_, "MSLR state: " + why));
  }

 private:
  void need(uint64_t n) const {
    if (n > bytes_.size() - at_) fail("truncated");
  }
  const std::string& bytes_;
  const std::string& file_;
  size_t at_ = 0;
};

void write_iteration(StateWriter& w, const MslrIteration& r) {
  w.scalar<int32_t>(r.iter);
  w.scalar(r.selected);
  w.scalar(r.added);
  w.scalar(r.constraint_size);
  w.scalar(r.sip_violation);
  w.scalar(r.objective);
  w.scalar(r.dual);
  w.scalar(r.relative_gap);
  w.scalar(r.q);
  w.scalar<int32_t>(r.stages);
  w.scalar<int32_t>(r.sweeps);
  w.scalar(r.newton_steps);
  w.scalar(r.bisections);
  w.scalar<uint8_t>(r.converged);
  w.vector(r.mu);
  w.scalar(r.score_seconds);
  w.scalar(r.solve_seconds);
  w.scalar(r.bytes_streamed);
  w.scalar(r.peak_rss_bytes);
}

MslrIteration read_iteration(StateReader& r) {
  MslrIteration it;
  it.iter = r.scalar<int32_t>();
  it.selected = r.scalar<uint64_t>();
  it.added = r.scalar<uint64_t>();
  it.constraint_size = r.scalar<uint64_t>();
  it.sip_violation = r.scalar<double>();
  it.objective = r.scalar<double>();
  it.dual = r.scalar<double>();
  it.relative_gap = r.scalar<double>();
  it.q = r.scalar<double>();
  it.stages = r.scalar<int32_t>();
  it.sweeps = r.scalar<int32_t>();
  it.newton_steps = r.scalar<uint64_t>();
  it.bisections = r.scalar<uint64_t>();
  it.converged = r.scalar<uint8_t>() != 0;
  it.mu = r.vector<double>();
  it.score_seconds = r.scalar<double>();
  it.solve_seconds = r.scalar<double>();
  it.bytes_streamed = r.scalar<uint64_t>();
  it.peak_rss_bytes = r.scalar<uint64_t>();
  return it;
}

// A feature of the next constraint: its c_j², candidate id, and its position
// in the selected columns (SIZE_MAX while not selected).
struct ConstraintMember {
  double score = 0;
  uint64_t id = 0;
  size_t position = SIZE_MAX;
};

// How many new features the next constraint may bring: all r, unless
// max_features or the next path checkpoint is closer.
uint64_t new_feature_limit(const MslrSettings& settings, uint64_t selected, size_t next_checkpoint) {
  uint64_t limit = settings.r;
  if (settings.max_features > 0)
    limit = std::min(limit, settings.max_features - std::min(selected, settings.max_features));
  if (next_checkpoint < settings.checkpoints.size())
    limit = std::min(limit, settings.checkpoints[next_checkpoint] - std::min(selected, settings.checkpoints[next_checkpoint]));
  return limit;
}

// (8): the top r of `pool` (the selected features' and the pass's top
// unselected c_j², each with c_j² > 0) by score, ties to the smaller id,
// admitting at most `new_limit` unselected ones.
std::vector<ConstraintMember> choose_constraint(std::vector<ConstraintMember> pool, uint64_t r, uint64_t new_limit) {
  std::sort(pool.begin(), pool.end(), [](const ConstraintMember& x, const ConstraintMember& y) {
    return x.score != y.score ? x.score > y.score : x.id < y.id;
  });
  std::vector<ConstraintMember> chosen;
  uint64_t fresh = 0;
  for (const ConstraintMember& m : pool) {
    if (chosen.size() == r) break;
    if (m.position == SIZE_MAX) {
      if (fresh == new_limit) continue;
      ++fresh;
    }
    chosen.push_back(m);
  }
  return chosen;
}

// The stop tests that need the new constraint, with its SIP violation ½Σ_{j∈d} c_j² −
// max_s ½Σ_{j∈d^s} c_j² (`selected_c`: c_j per selected column) written to
// `sip_violation`: "no_new_constraint", "eps_outer", or "" to go on.
std::string constraint_stop(const std::vector<ConstraintMember>& members,
                            const std::vector<std::vector<size_t>>& constraints,
                            const std::vector<double>& selected_c, const MslrSettings& settings, int t,
                            double last_objective, double& sip_violation) {
  std::vector<size_t> known;
  double fresh = 0;
  for (const ConstraintMember& m : members) {
    if (m.position != SIZE_MAX) known.push_back(m.position);
  }
  for (const ConstraintMember& m : members) fresh += m.score;
  double held = 0;
  for (const auto& d : constraints) {
    double s = 0;
    for (size_t k : d) s += selected_c[k] * selected_c[k];
    held = std::max(held, 0.5 * s);
  }
  sip_violation = 0.5 * fresh - held;
  std::sort(known.begin(), known.end());
  const bool repeated = known.size() == members.size() &&
                        std::find(constraints.begin(), constraints.end(), known) != constraints.end();
  if (members.empty() || repeated) return "no_new_constraint";
  if (t > 1 && settings.eps_outer > 0 && sip_violation <= settings.eps_outer * last_objective) return "eps_outer";
  return "";
}

// The subproblem's figures into `rec`, and the warning when it did not certify.
void record_solve(MslrIteration& rec, const mslr::MinimaxResult& r, const MslrSettings& settings) {
  rec.objective = r.primal;
  rec.dual = r.dual;
  rec.relative_gap = r.relative_gap;
  rec.q = r.q;
  rec.stages = r.stages;
  rec.sweeps = r.sweeps;
  rec.newton_steps = r.newton_steps;
  rec.bisections = r.bisections;
  rec.converged = r.converged;
  rec.mu = r.mu;
  if (r.converged || !settings.warnings) return;
  if (settings.smoothing)
    settings.warnings->add("mslr_not_converged",
                           "MSLR iteration " + std::to_string(rec.iter) + ": the subproblem stopped at q = " +
                               std::to_string(r.q) + " with relative gap " + std::to_string(r.relative_gap) +
                               " above mslr.tolerance (mslr.q_max reached, or the gap stopped shrinking); raise "
                               "mslr.q_max or mslr.max_sweeps");
  else
    settings.warnings->add("mslr_not_converged",
                           "MSLR iteration " + std::to_string(rec.iter) + ": the subproblem stopped after " +
                               std::to_string(r.newton_steps) + " Newton steps with relative gap " +
                               std::to_string(r.relative_gap) +
                               " above mslr.tolerance (the step limit, or no further decrease at rounding level); "
                               "raise mslr.newton_max_iterations or mslr.tolerance");
}

// The cutting-plane loop over a backend's rows.
class MslrLoop {
 public:
  MslrLoop(MslrRows& rows, const MslrSettings& settings, MemoryBudget& budget, const MslrHooks& hooks)
      : rows_(rows), settings_(settings), budget_(budget), hooks_(hooks) {
    FGM_ASSERT(settings.max_iterations >= 1 && size_t(settings.max_iterations) <= mslr::kMaxConstraints);
  }
  MslrOutcome run();

 private:
  bool iteration(int t);
  std::vector<ConstraintMember> most_active_constraint(const std::vector<ScoredCandidate>& top, uint64_t new_limit);
  std::vector<size_t> admit(const std::vector<ConstraintMember>& members);
  void solve(MslrIteration& rec);
  uint64_t selected() const { return selected_ids_.size(); }
  Model make_model() const;
  void emit_checkpoint();
  bool stopped_short_of_checkpoint() const;
  void restore(const MslrState& state);
  MslrState state() const;

  MslrRows& rows_;
  const MslrSettings& settings_;
  MemoryBudget& budget_;
  const MslrHooks& hooks_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::vector<std::vector<uint64_t>> batches_;    // candidate ids per batch of selected columns
  std::vector<uint64_t> selected_ids_;            // candidate id per selected column
  std::vector<double> selected_c_;                // c_j per selected column for the current α
  std::vector<std::vector<size_t>> constraints_;  // selected-column positions of d^1..d^t, increasing
  std::vector<double> weights_;                   // the last subproblem's model per selected column
  double last_objective_ = 0;
  size_t next_checkpoint_ = 0;
  double resumed_seconds_ = 0;  // the interrupted run's time, when resumed
  MslrOutcome out_;
};

// (8): the top r of c_j² over all features — the pass's unselected top r and
// the selected ones' c_j (the pass's summation) — admitting at most
// `new_limit` unselected ones.
std::vector<ConstraintMember> MslrLoop::most_active_constraint(const std::vector<ScoredCandidate>& top,
                                                               uint64_t new_limit) {
  std::vector<ConstraintMember> pool;
  for (size_t k = 0; k < selected_c_.size(); ++k) {
    const double score = selected_c_[k] * selected_c_[k];
    if (score > 0) pool.push_back({score, selected_ids_[k], k});
  }
  for (const ScoredCandidate& c : top) pool.push_back({c.score, c.id, SIZE_MAX});
  return choose_constraint(std::move(pool), settings_.r, new_limit);
}

// Reads the constraint's new features (one batch); returns the constraint as
// selected-column positions, increasing.
std::vector<size_t> MslrLoop::admit(const std::vector<ConstraintMember>& members) {
  std::vector<size_t> positions;
  std::vector<uint64_t> fresh;
  for (const ConstraintMember& m : members) {
    if (m.position != SIZE_MAX) {
      positions.push_back(m.position);
      continue;
    }
    positions.push_back(selected_ids_.size());
    selected_ids_.push_back(m.id);
    fresh.push_back(m.id);
  }
  rows_.add_batch(fresh);
  batches_.push_back(std::move(fresh));
  FGM_ASSERT(rows_.columns().num_columns() == selected_ids_.size());  // linear features: one column each
  std::sort(positions.begin(), positions.end());
  return positions;
}

void MslrLoop::solve(MslrIteration& rec) {
  std::vector<std::vector<uint32_t>> constraints;
  for (const auto& d : constraints_) constraints.emplace_back(d.begin(), d.end());
  const auto t_solve = std::chrono::steady_clock::now();
  // The warm start of a Newton solve: μ of the last iteration (empty before the first).
  const mslr::MinimaxResult r =
      rows_.solve(constraints, out_.iterations.empty() ? std::vector<double>{} : out_.iterations.back().mu);
  rec.solve_seconds = seconds_since(t_solve);
  record_solve(rec, r, settings_);
  weights_ = r.weights;
  last_objective_ = r.primal;
}

// Iteration t: the most active constraint for the current α, the stop tests
// that need it, then the subproblem. Returns false when the loop ends.
bool MslrLoop::iteration(int t) {
  MslrIteration rec;
  rec.iter = t;
  rows_.begin_phase();
  const auto t_score = std::chrono::steady_clock::now();
  const uint64_t new_limit = new_feature_limit(settings_, selected(), next_checkpoint_);
  const std::vector<ScoredCandidate> top =
      rows_.score(std::max<uint64_t>(new_limit, 1), selected_c_, rec.bytes_streamed);
  ++out_.scoring_passes;
  out_.total_bytes_streamed += rec.bytes_streamed;
  rec.score_seconds = seconds_since(t_score);
  rows_.end_phase(t, "scoring");
  const std::vector<ConstraintMember> members = most_active_constraint(top, new_limit);
  out_.stop_reason = constraint_stop(members, constraints_, selected_c_, settings_, t, last_objective_,
                                     rec.sip_violation);
  out_.final_sip_violation = rec.sip_violation;
  if (!out_.stop_reason.empty()) return false;
  rows_.begin_phase();
  const size_t before = selected();
  constraints_.push_back(admit(members));
  rec.added = selected() - before;
  rec.constraint_size = constraints_.back().size();
  rec.selected = selected();
  solve(rec);
  rows_.end_phase(t, "solve");
  rec.peak_rss_bytes = peak_rss_bytes();
  out_.iterations.push_back(rec);
  if (hooks_.on_iteration) hooks_.on_iteration(out_.iterations.back());
  const auto& points = settings_.checkpoints;
  if (next_checkpoint_ < points.size() && selected() >= points[next_checkpoint_]) {
    emit_checkpoint();
    while (next_checkpoint_ < points.size() && points[next_checkpoint_] <= selected()) ++next_checkpoint_;
  }
  out_.stop_reason =
      outer_stop_rule(settings_.max_features, settings_.checkpoints, settings_.max_iterations, selected(), t);
  if (hooks_.on_state) hooks_.on_state(state());
  return out_.stop_reason.empty();
}

// A path that stopped before its next checkpoint still reports where it got
// (one more point), unless that model is a point already.
bool MslrLoop::stopped_short_of_checkpoint() const {
  const auto& points = settings_.checkpoints;
  return next_checkpoint_ < points.size() && !out_.iterations.empty() &&
         (next_checkpoint_ == 0 || points[next_checkpoint_ - 1] < selected());
}

// The selected columns re-read batch by batch in the saved order (the same
// columns at the same positions); everything else is copied.
void MslrLoop::restore(const MslrState& s) {
  rows_.restore_duals(s);
  for (const auto& batch : s.batches) {
    rows_.add_batch(batch);
    batches_.push_back(batch);
    selected_ids_.insert(selected_ids_.end(), batch.begin(), batch.end());
  }
  FGM_ASSERT(rows_.columns().num_columns() == selected_ids_.size());
  for (const auto& d : s.constraints) {
    for (uint64_t k : d) FGM_ASSERT(k < selected_ids_.size());
    constraints_.emplace_back(d.begin(), d.end());
  }
  weights_ = s.weights;
  last_objective_ = s.last_objective;
  next_checkpoint_ = static_cast<size_t>(s.next_checkpoint);
  out_.iterations = s.iterations;
  out_.stop_reason = s.stop_reason;
  out_.final_sip_violation = s.final_sip_violation;
  out_.scoring_passes = s.scoring_passes;
  out_.total_bytes_streamed = s.total_bytes_streamed;
  resumed_seconds_ = s.seconds;
}

MslrState MslrLoop::state() const {
  MslrState s;
  s.batches = batches_;
  for (const auto& d : constraints_) s.constraints.emplace_back(d.begin(), d.end());
  rows_.save_duals(s);
  s.weights = weights_;
  s.last_objective = last_objective_;
  s.next_checkpoint = next_checkpoint_;
  s.iterations = out_.iterations;
  s.stop_reason = out_.stop_reason;
  s.final_sip_violation = out_.final_sip_violation;
  s.scoring_passes = out_.scoring_passes;
  s.total_bytes_streamed = out_.total_bytes_streamed;
  s.seconds = resumed_seconds_ + seconds_since(start_);
  return s;
}

Model MslrLoop::make_model() const {
  Model m = rows_.model_frame();
  m.loss = "logistic";
  m.C = settings_.minimax.C;
  m.B = settings_.r;
  m.iterations = static_cast<uint32_t>(out_.iterations.size());
  m.has_bias = false;
  m.objective = last_objective_;
  const SelectedFeatureCache& cache = rows_.columns();
  for (size_t h = 0; h < cache.num_batches(); ++h)
    for (size_t k = cache.batch_begin(h); k < cache.batch_end(h); ++k) {
      ModelFeature f;
      f.key = cache.key(k);
      f.weight = k < weights_.size() ? weights_[k] : 0.0;
      f.batch = static_cast<uint32_t>(h + 1);
      m.features.push_back(f);
    }
  rows_.record_transforms(m);
  return m;
}

void MslrLoop::emit_checkpoint() {
  if (!hooks_.on_checkpoint) return;
  MslrCheckpoint cp;
  cp.features = selected();
  cp.model = make_model();
  cp.last = &out_.iterations.back();
  cp.seconds = resumed_seconds_ + seconds_since(start_);
  hooks_.on_checkpoint(cp);
}

MslrOutcome MslrLoop::run() {
  if (settings_.resume) restore(*settings_.resume);
  if (out_.stop_reason.empty())
    for (int t = static_cast<int>(out_.iterations.size()) + 1; t <= settings_.max_iterations; ++t)
      if (!iteration(t)) break;
  if (stopped_short_of_checkpoint()) emit_checkpoint();
  rows_.hand_out_decisions(weights_, hooks_);
  out_.model = make_model();
  out_.seconds = resumed_seconds_ + seconds_since(start_);
  out_.budget_peak = budget_.peak();
  return std::move(out_);
}

// The single store as the loop's rows: α, C − α and a = α∘y over its n
// rows, the selected-feature cache, streamed passes (resident when it fits).
class StoreMslrRows final : public MslrRows {
 public:
  StoreMslrRows(const ShardStore& store, const MslrSettings& settings, MemoryBudget& budget);

  std::vector<ScoredCandidate> score(uint64_t batch, std::vector<double>& selected_c,
                                     uint64_t& bytes_streamed) override;
  void add_batch(const std::vector<uint64_t>& ids) override;
  mslr::MinimaxResult solve(const std::vector<std::vector<uint32_t>>& constraints,
                            const std::vector<double>& warm_mu) override;
  const SelectedFeatureCache& columns() const override { return cache_; }
  void restore_duals(const MslrState& s) override;
  void save_duals(MslrState& s) const override {
    s.alpha = alpha_;
    s.beta = beta_;
  }
  Model model_frame() const override;
  void record_transforms(Model& m) const override { record_feature_transforms(store_, m); }
  void hand_out_decisions(const std::vector<double>& weights, const MslrHooks& hooks) const override;

 private:
  const ShardStore& store_;
  const MslrSettings& settings_;
  MemoryBudget& budget_;
  const uint64_t n_;
  const int8_t* y_;
  std::unique_ptr<FeatureSpace> space_;
  Reservation resident_;
  std::unique_ptr<BlockStream> stream_;
  std::vector<BlockRef> blocks_;
  Reservation dual_memory_;
  std::vector<double> alpha_, beta_, a_;  // α, C − α, α∘y
  SelectedFeatureCache cache_;
};

StoreMslrRows::StoreMslrRows(const ShardStore& store, const MslrSettings& settings, MemoryBudget& budget)
    : store_(store),
      settings_(settings),
      budget_(budget),
      n_(store.info().n_rows),
      y_(settings.labels ? settings.labels : store.labels()),
      cache_(budget, store.info().n_rows) {
  FeatureSpaceSettings space_settings = settings.space;
  space_settings.index_base = store.info().index_base;
  space_ = make_feature_space(space_settings, store, budget);
  // As FGM: a store that fits comfortably stays resident between passes.
  SchedulerOptions scheduler = settings.scheduler;
  resident_ = reserve_resident_store(store.info(), budget, scheduler);
  stream_ = std::make_unique<BlockStream>(store, scheduler, budget);
  blocks_ = store.plan_blocks(scoring_block_bytes(settings.block_bytes, budget, n_, scheduler.keep_resident));
  dual_memory_ = budget.reserve(3 * n_ * sizeof(double), "dual variables", "use fewer training rows");
  const double C = settings.minimax.C;
  const double start = std::min(1.0, C / 2);  // strictly inside (0, C) for any C (ERRATA 001)
  alpha_.assign(n_, 0.0);
  beta_.assign(n_, C);
  a_.assign(n_, 0.0);
  for (uint64_t i = 0; i < n_; ++i)
    if (y_[i] != 0) {
      alpha_[i] = start;
      beta_[i] = C - start;
    }
}

// The streamed pass's unselected top, the selected columns' c_j from the
// cache with the pass's summation.
std::vector<ScoredCandidate> StoreMslrRows::score(uint64_t batch, std::vector<double>& selected_c,
                                                  uint64_t& bytes_streamed) {
  for (uint64_t i = 0; i < n_; ++i) a_[i] = alpha_[i] * y_[i];
  SpaceScores wc = run_worst_case_analysis(*space_, *stream_, blocks_, a_.data(), batch, budget_);
  bytes_streamed = wc.pass.bytes_streamed;
  selected_c.assign(cache_.num_columns(), 0.0);
  for (size_t k = 0; k < cache_.num_columns(); ++k)
    selected_c[k] = tiled_column_dot(cache_.column(k), a_.data(), store_.info().tile_rows);
  return std::move(wc.top);
}

void StoreMslrRows::add_batch(const std::vector<uint64_t>& ids) {
  cache_.begin_batch();
  for (uint64_t id : ids) {
    space_->mark_selected(id);
    space_->materialize(store_, id, cache_);
  }
}

mslr::MinimaxResult StoreMslrRows::solve(const std::vector<std::vector<uint32_t>>& constraints,
                                         const std::vector<double>& warm_mu) {
  if (settings_.smoothing) {
    const mslr::SelectedRows rows = mslr::SelectedRows::from_cache(cache_, budget_);
    return mslr::solve_smoothed_minimax(rows, y_, constraints, settings_.minimax, alpha_, beta_, &budget_);
  }
  LocalRowSums one_process;
  return mslr::solve_minimax_newton({{&cache_, y_, &alpha_, &beta_}}, one_process, constraints, settings_.minimax,
                                    settings_.newton, warm_mu, budget_);
}

void StoreMslrRows::restore_duals(const MslrState& s) {
  if (s.alpha.size() != n_ || s.beta.size() != n_)
    throw Error(ErrorKind::kCorruption, "MSLR resume state: " + std::to_string(s.alpha.size()) +
                                            " dual variables for a store of " + std::to_string(n_) + " rows");
  alpha_ = s.alpha;
  beta_ = s.beta;
}

Model StoreMslrRows::model_frame() const {
  Model m = model_of_store(store_.info(), "mslr");
  space_->describe(m);
  return m;
}

void StoreMslrRows::hand_out_decisions(const std::vector<double>& weights, const MslrHooks& hooks) const {
  if (!hooks.on_final_decision) return;
  std::vector<double> d(n_, 0.0);
  for (size_t k = 0; k < cache_.num_columns() && k < weights.size(); ++k)
    cache_.column(k).for_each([&](uint32_t row, float value) { d[row] += weights[k] * value; });
  hooks.on_final_decision(d);
}

}  // namespace

MslrOutcome run_mslr(MslrRows& rows, const MslrSettings& settings, MemoryBudget& budget, const MslrHooks& hooks) {
  MslrLoop loop(rows, settings, budget, hooks);
  return loop.run();
}

std::string encode_mslr_state(const MslrState& s) {
  StateWriter w;
  w.string(kStateTag);
  w.scalar<uint64_t>(s.batches.size());
  for (const auto& b : s.batches) w.vector(b);
  w.scalar<uint64_t>(s.constraints.size());
  for (const auto& d : s.constraints) w.vector(d);
  w.vector(s.alpha);
  w.vector(s.beta);
  w.vector(s.weights);
  w.scalar(s.last_objective);
  w.scalar(s.next_checkpoint);
  w.scalar<uint64_t>(s.iterations.size());
  for (const auto& it : s.iterations) write_iteration(w, it);
  w.string(s.stop_reason);
  w.scalar(s.final_sip_violation);
  w.scalar(s.scoring_passes);
  w.scalar(s.total_bytes_streamed);
  w.scalar(s.seconds);
  return w.take();
}

MslrState decode_mslr_state(const std::string& bytes, const std::string& file) {
  StateReader r(bytes, file);
  if (r.string() != kStateTag) r.fail("unknown format");
  MslrState s;
  const uint64_t batches = r.scalar<uint64_t>();
  for (uint64_t h = 0; h < batches; ++h) s.batches.push_back(r.vector<uint64_t>());
  const uint64_t constraints = r.scalar<uint64_t>();
  if (constraints > mslr::kMaxConstraints) r.fail("too many constraints");
  for (uint64_t t = 0; t < constraints; ++t) s.constraints.push_back(r.vector<uint64_t>());
  s.alpha = r.vector<double>();
  s.beta = r.vector<double>();
  s.weights = r.vector<double>();
  s.last_objective = r.scalar<double>();
  s.next_checkpoint = r.scalar<uint64_t>();
  const uint64_t iterations = r.scalar<uint64_t>();
  if (iterations > mslr::kMaxConstraints) r.fail("too many iterations");
  for (uint64_t t = 0; t < iterations; ++t) s.iterations.push_back(read_iteration(r));
  s.stop_reason = r.string();
  s.final_sip_violation = r.scalar<double>();
  s.scoring_passes = r.scalar<uint64_t>();
  s.total_bytes_streamed = r.scalar<uint64_t>();
  s.seconds = r.scalar<double>();
  if (!r.at_end()) r.fail("trailing bytes");
  return s;
}

std::string encode_mslr_dual_slice(const MslrDualSlice& slice) {
  StateWriter w;
  w.string(kDualSliceTag);
  w.scalar(slice.iteration);
  w.scalar(slice.rank);
  w.scalar(slice.ranks);
  w.scalar(slice.first_partition);
  w.scalar(slice.partitions);
  w.vector(slice.alpha);
  w.vector(slice.beta);
  std::string bytes = w.take();
  const uint64_t checksum = xxh64(bytes.data(), bytes.size());
  bytes.append(reinterpret_cast<const char*>(&checksum), sizeof checksum);
  return bytes;
}

MslrDualSlice decode_mslr_dual_slice(const std::string& bytes, const std::string& file) {
  uint64_t checksum = 0;
  if (bytes.size() < sizeof checksum)
    throw Error(ErrorKind::kCorruption, msg::not_a_checkpoint(file, "MSLR dual slice: truncated"));
  const std::string body = bytes.substr(0, bytes.size() - sizeof checksum);
  std::memcpy(&checksum, bytes.data() + body.size(), sizeof checksum);
  if (checksum != xxh64(body.data(), body.size()))
    throw Error(ErrorKind::kCorruption, msg::not_a_checkpoint(file, "MSLR dual slice: checksum mismatch"));
  StateReader r(body, file);
  if (r.string() != kDualSliceTag) r.fail("not a dual slice");
  MslrDualSlice slice;
  slice.iteration = r.scalar<uint64_t>();
  slice.rank = r.scalar<int32_t>();
  slice.ranks = r.scalar<int32_t>();
  slice.first_partition = r.scalar<uint32_t>();
  slice.partitions = r.scalar<uint32_t>();
  slice.alpha = r.vector<double>();
  slice.beta = r.vector<double>();
  if (!r.at_end()) r.fail("trailing bytes");
  return slice;
}

MslrOutcome train_mslr(const ShardStore& store, const MslrSettings& settings, MemoryBudget& budget,
                       const MslrHooks& hooks) {
  StoreMslrRows rows(store, settings, budget);
  return run_mslr(rows, settings, budget, hooks);
}

}  // namespace fgm
