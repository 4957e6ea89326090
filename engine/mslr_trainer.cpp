#include "engine/mslr_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
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
#include "features/block_scores.h"
#include "features/cached_column_dot.h"
#include "features/transformed_store.h"

namespace fgm {
namespace {

using mslr_loop::ConstraintMember;

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

class MslrRun {
 public:
  MslrRun(const ShardStore& store, const MslrSettings& settings, MemoryBudget& budget, const MslrHooks& hooks);
  MslrOutcome run();

 private:
  bool iteration(int t);
  std::vector<ConstraintMember> most_active_constraint(SpaceScores& wc, uint64_t new_limit);
  std::vector<size_t> admit(const std::vector<ConstraintMember>& members);
  void solve(MslrIteration& rec);
  Model make_model() const;
  void emit_checkpoint();
  std::vector<double> decision_values() const;
  void restore(const MslrState& state);
  MslrState state() const;

  const ShardStore& store_;
  const MslrSettings& settings_;
  MemoryBudget& budget_;
  const MslrHooks& hooks_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  const uint64_t n_;
  const int8_t* y_;
  std::unique_ptr<FeatureSpace> space_;
  Reservation resident_;
  std::unique_ptr<BlockStream> stream_;
  std::vector<BlockRef> blocks_;
  Reservation dual_memory_;
  std::vector<double> alpha_, beta_, a_;  // α, C − α, α∘y
  SelectedFeatureCache cache_;
  std::vector<uint64_t> selected_ids_;    // candidate id per cache column
  std::vector<double> selected_c_;        // c_j per cache column for the current α
  std::vector<std::vector<size_t>> constraints_;  // cache positions of d^1..d^t, increasing
  std::vector<double> weights_;           // model weights per cache column
  double last_objective_ = 0;
  size_t next_checkpoint_ = 0;
  double resumed_seconds_ = 0;  // the interrupted run's time, when resumed
  MslrOutcome out_;
};

MslrRun::MslrRun(const ShardStore& store, const MslrSettings& settings, MemoryBudget& budget,
                 const MslrHooks& hooks)
    : store_(store),
      settings_(settings),
      budget_(budget),
      hooks_(hooks),
      n_(store.info().n_rows),
      y_(settings.labels ? settings.labels : store.labels()),
      cache_(budget, store.info().n_rows) {
  FGM_ASSERT(settings.max_iterations >= 1 && size_t(settings.max_iterations) <= mslr::kMaxConstraints);
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

// (8): the top r of c_j² over all features — the pass's unselected top r and
// the selected ones' c_j from the cache (the pass's summation) — admitting at
// most `new_limit` unselected ones. Also sets selected_c_.
std::vector<ConstraintMember> MslrRun::most_active_constraint(SpaceScores& wc, uint64_t new_limit) {
  std::vector<ConstraintMember> pool;
  const uint32_t tile_rows = store_.info().tile_rows;
  selected_c_.assign(cache_.num_columns(), 0.0);
  for (size_t k = 0; k < cache_.num_columns(); ++k) {
    selected_c_[k] = tiled_column_dot(cache_.column(k), a_.data(), tile_rows);
    const double score = selected_c_[k] * selected_c_[k];
    if (score > 0) pool.push_back({score, selected_ids_[k], k});
  }
  for (const ScoredCandidate& c : wc.top) pool.push_back({c.score, c.id, SIZE_MAX});
  return mslr_loop::choose_constraint(std::move(pool), settings_.r, new_limit);
}

// Selects and materialises the constraint's new features (one cache batch);
// returns the constraint as cache positions, increasing.
std::vector<size_t> MslrRun::admit(const std::vector<ConstraintMember>& members) {
  std::vector<size_t> positions;
  cache_.begin_batch();
  for (const ConstraintMember& m : members) {
    if (m.position != SIZE_MAX) {
      positions.push_back(m.position);
      continue;
    }
    const size_t at = cache_.num_columns();
    space_->mark_selected(m.id);
    space_->materialize(store_, m.id, cache_);
    FGM_ASSERT(cache_.num_columns() == at + 1);  // linear features: one column each
    selected_ids_.push_back(m.id);
    positions.push_back(at);
  }
  std::sort(positions.begin(), positions.end());
  return positions;
}

void MslrRun::solve(MslrIteration& rec) {
  std::vector<std::vector<uint32_t>> constraints;
  for (const auto& d : constraints_) constraints.emplace_back(d.begin(), d.end());
  auto t_solve = std::chrono::steady_clock::now();
  mslr::MinimaxResult r;
  if (settings_.smoothing) {
    const mslr::SelectedRows rows = mslr::SelectedRows::from_cache(cache_, budget_);
    r = mslr::solve_smoothed_minimax(rows, y_, constraints, settings_.minimax, alpha_, beta_, &budget_);
  } else {
    LocalRowSums one_process;
    r = mslr::solve_minimax_newton({{&cache_, y_, &alpha_, &beta_}}, one_process, constraints, settings_.minimax,
                                   settings_.newton, mslr_loop::warm_mu(out_.iterations), budget_);
  }
  rec.solve_seconds = seconds_since(t_solve);
  mslr_loop::record_solve(rec, r, settings_);
  weights_ = r.weights;
  last_objective_ = r.primal;
}

// Iteration t: the most active constraint for the current α, the stop tests
// that need it, then the subproblem. Returns false when the loop ends.
bool MslrRun::iteration(int t) {
  MslrIteration rec;
  rec.iter = t;
  for (uint64_t i = 0; i < n_; ++i) a_[i] = alpha_[i] * y_[i];
  auto t_score = std::chrono::steady_clock::now();
  const uint64_t new_limit = mslr_loop::new_feature_limit(settings_, cache_.num_columns(), next_checkpoint_);
  SpaceScores wc = run_worst_case_analysis(*space_, *stream_, blocks_, a_.data(), std::max<uint64_t>(new_limit, 1),
                                           budget_);
  ++out_.scoring_passes;
  rec.score_seconds = seconds_since(t_score);
  rec.bytes_streamed = wc.pass.bytes_streamed;
  out_.total_bytes_streamed += wc.pass.bytes_streamed;
  const std::vector<ConstraintMember> members = most_active_constraint(wc, new_limit);
  out_.stop_reason = mslr_loop::constraint_stop(members, constraints_, selected_c_, settings_, t, last_objective_,
                                                rec.sip_violation);
  out_.final_sip_violation = rec.sip_violation;
  if (!out_.stop_reason.empty()) return false;
  const size_t before = cache_.num_columns();
  constraints_.push_back(admit(members));
  rec.added = cache_.num_columns() - before;
  rec.constraint_size = constraints_.back().size();
  rec.selected = cache_.num_columns();
  solve(rec);
  rec.peak_rss_bytes = peak_rss_bytes();
  out_.iterations.push_back(rec);
  if (hooks_.on_iteration) hooks_.on_iteration(out_.iterations.back());
  if (mslr_loop::reaches_checkpoint(settings_, cache_.num_columns(), next_checkpoint_)) {
    emit_checkpoint();
    next_checkpoint_ = mslr_loop::next_checkpoint_after(settings_, cache_.num_columns(), next_checkpoint_);
  }
  out_.stop_reason = mslr_loop::stop_after_solve(settings_, cache_.num_columns(), t);
  if (hooks_.on_state) hooks_.on_state(state());
  return out_.stop_reason.empty();
}

// The cache is rebuilt batch by batch in the saved order (the same columns at
// the same positions); everything else is copied.
void MslrRun::restore(const MslrState& s) {
  if (s.alpha.size() != n_ || s.beta.size() != n_)
    throw Error(ErrorKind::kCorruption, "MSLR resume state: " + std::to_string(s.alpha.size()) +
                                            " dual variables for a store of " + std::to_string(n_) + " rows");
  for (const auto& batch : s.batches) {
    cache_.begin_batch();
    for (uint64_t id : batch) {
      space_->mark_selected(id);
      space_->materialize(store_, id, cache_);
      selected_ids_.push_back(id);
    }
  }
  FGM_ASSERT(cache_.num_columns() == selected_ids_.size());
  constraints_.clear();
  for (const auto& d : s.constraints) {
    for (uint64_t k : d) FGM_ASSERT(k < cache_.num_columns());
    constraints_.emplace_back(d.begin(), d.end());
  }
  alpha_ = s.alpha;
  beta_ = s.beta;
  weights_ = s.weights;
  last_objective_ = s.last_objective;
  next_checkpoint_ = static_cast<size_t>(s.next_checkpoint);
  mslr_loop::restore_progress(s, out_);
  resumed_seconds_ = s.seconds;
}

MslrState MslrRun::state() const {
  MslrState s;
  for (size_t h = 0; h < cache_.num_batches(); ++h)
    s.batches.emplace_back(selected_ids_.begin() + cache_.batch_begin(h), selected_ids_.begin() + cache_.batch_end(h));
  for (const auto& d : constraints_) s.constraints.emplace_back(d.begin(), d.end());
  s.alpha = alpha_;
  s.beta = beta_;
  s.weights = weights_;
  s.last_objective = last_objective_;
  s.next_checkpoint = next_checkpoint_;
  mslr_loop::save_progress(out_, s);
  s.seconds = resumed_seconds_ + seconds_since(start_);
  return s;
}

Model MslrRun::make_model() const {
  const StoreInfo& info = store_.info();
  Model m = model_of_store(info, "mslr");
  m.loss = "logistic";
  m.C = settings_.minimax.C;
  m.B = settings_.r;
  m.iterations = static_cast<uint32_t>(out_.iterations.size());
  m.has_bias = false;
  space_->describe(m);
  m.objective = last_objective_;
  for (size_t h = 0; h < cache_.num_batches(); ++h)
    for (size_t k = cache_.batch_begin(h); k < cache_.batch_end(h); ++k) {
      ModelFeature f;
      f.key = cache_.key(k);
      f.weight = k < weights_.size() ? weights_[k] : 0.0;
      f.batch = static_cast<uint32_t>(h + 1);
      m.features.push_back(f);
    }
  record_feature_transforms(store_, m);
  return m;
}

void MslrRun::emit_checkpoint() {
  if (!hooks_.on_checkpoint) return;
  MslrCheckpoint cp;
  cp.features = cache_.num_columns();
  cp.model = make_model();
  cp.last = &out_.iterations.back();
  cp.seconds = resumed_seconds_ + seconds_since(start_);
  hooks_.on_checkpoint(cp);
}

std::vector<double> MslrRun::decision_values() const {
  std::vector<double> d(n_, 0.0);
  for (size_t k = 0; k < cache_.num_columns() && k < weights_.size(); ++k) {
    cache_.column(k).for_each([&](uint32_t row, float value) { d[row] += weights_[k] * value; });
  }
  return d;
}

MslrOutcome MslrRun::run() {
  if (settings_.resume) restore(*settings_.resume);
  if (out_.stop_reason.empty())
    for (int t = static_cast<int>(out_.iterations.size()) + 1; t <= settings_.max_iterations; ++t)
      if (!iteration(t)) break;
  // A path that stopped before its next checkpoint still reports where it got.
  if (hooks_.on_checkpoint && mslr_loop::stopped_short_of_checkpoint(settings_, out_, cache_.num_columns(), next_checkpoint_))
    emit_checkpoint();
  if (hooks_.on_final_decision) hooks_.on_final_decision(decision_values());
  out_.model = make_model();
  out_.seconds = resumed_seconds_ + seconds_since(start_);
  out_.budget_peak = budget_.peak();
  return std::move(out_);
}

}  // namespace

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

namespace mslr_loop {

uint64_t new_feature_limit(const MslrSettings& settings, uint64_t selected, size_t next_checkpoint) {
  uint64_t limit = settings.r;
  if (settings.max_features > 0)
    limit = std::min(limit, settings.max_features - std::min(selected, settings.max_features));
  if (next_checkpoint < settings.checkpoints.size())
    limit = std::min(limit, settings.checkpoints[next_checkpoint] - std::min(selected, settings.checkpoints[next_checkpoint]));
  return limit;
}

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

bool reaches_checkpoint(const MslrSettings& settings, uint64_t selected, size_t next_checkpoint) {
  return next_checkpoint < settings.checkpoints.size() && selected >= settings.checkpoints[next_checkpoint];
}

size_t next_checkpoint_after(const MslrSettings& settings, uint64_t selected, size_t next_checkpoint) {
  while (next_checkpoint < settings.checkpoints.size() && settings.checkpoints[next_checkpoint] <= selected)
    ++next_checkpoint;
  return next_checkpoint;
}

bool stopped_short_of_checkpoint(const MslrSettings& settings, const MslrOutcome& out, uint64_t selected,
                                 size_t next_checkpoint) {
  return next_checkpoint < settings.checkpoints.size() && !out.iterations.empty() &&
         (next_checkpoint == 0 || settings.checkpoints[next_checkpoint - 1] < selected);
}

void save_progress(const MslrOutcome& out, MslrState& s) {
  s.iterations = out.iterations;
  s.stop_reason = out.stop_reason;
  s.final_sip_violation = out.final_sip_violation;
  s.scoring_passes = out.scoring_passes;
  s.total_bytes_streamed = out.total_bytes_streamed;
}

void restore_progress(const MslrState& s, MslrOutcome& out) {
  out.iterations = s.iterations;
  out.stop_reason = s.stop_reason;
  out.final_sip_violation = s.final_sip_violation;
  out.scoring_passes = s.scoring_passes;
  out.total_bytes_streamed = s.total_bytes_streamed;
}

std::string stop_after_solve(const MslrSettings& settings, uint64_t selected, int t) {
  return outer_stop_rule(settings.max_features, settings.checkpoints, settings.max_iterations, selected, t);
}

std::vector<double> warm_mu(const std::vector<MslrIteration>& iterations) {
  return iterations.empty() ? std::vector<double>{} : iterations.back().mu;
}

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

}  // namespace mslr_loop

MslrOutcome train_mslr(const ShardStore& store, const MslrSettings& settings, MemoryBudget& budget,
                       const MslrHooks& hooks) {
  MslrRun run(store, settings, budget, hooks);
  return run.run();
}

}  // namespace fgm
