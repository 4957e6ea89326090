#include "engine/mslr_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "cache/selected_features.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/messages.h"
#include "engine/fgm_loop.h"
#include "engine/fgm_trainer.h"
#include "features/cached_column_dot.h"
#include "features/transformed_store.h"
#include "io/schema/mslr_checkpoint_generated.h"

namespace fgm {
namespace {

// The tag that opened the hand-rolled MSLR state of fgm before the FlatBuffers one.
constexpr char kOldStateTag[] = "MSLRSTATE1";

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
    fresh += m.score;
  }
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

// The rows of the loop on a RowSource (engine/fgm_loop.h: the single store
// as one part, or this rank's partitions): per part its ±1 labels, α, C − α,
// a = α∘y and its rows of the selected columns. Every sum over rows goes
// through the source's reduction (one part adds nothing).
class MslrRows {
 public:
  // `labels[q]`: part q's ±1 labels, kept alive by the caller, and the
  // label values (a partitioned model's); `layout`: the parts' place in the
  // partition tree (the smoothing solver's rounds); `communication`: a
  // partitioned run's log (null on one store).
  MslrRows(RowSource& source, const MslrSettings& settings, MemoryBudget& budget, std::vector<const int8_t*> labels,
           double negative = -1, double positive = 1, mslr::PartitionLayout layout = {},
           std::vector<CommunicationRecord>* communication = nullptr)
      : source_(source), settings_(settings), budget_(budget), y_(std::move(labels)), negative_(negative),
        positive_(positive), layout_(layout), communication_(communication) {
    uint64_t rows = 0;
    for (size_t q = 0; q < source.parts(); ++q) {
      rows += source.store(q).info().n_rows;
      columns_.push_back(std::make_unique<SelectedFeatureCache>(budget, source.store(q).info().n_rows));
    }
    space_ = source.make_space(settings.space, budget);
    source.open();  // as FGM: a store that fits comfortably stays resident between passes
    dual_memory_ = budget.reserve(3 * rows * sizeof(double), "dual variables", source.row_memory_remedy());
    const double C = settings.minimax.C;
    const double start = std::min(1.0, C / 2);  // strictly inside (0, C) for any C (ERRATA 001)
    for (size_t q = 0; q < source.parts(); ++q) {
      const uint64_t n = source.store(q).info().n_rows;
      alpha_.emplace_back(n, start);
      beta_.emplace_back(n, C - start);
      a_.emplace_back(n, 0.0);
    }
  }

  // c = Σ_i α_i y_i x_i: the selected columns' c_j (`selected_c`, column
  // order; a partitioned pass brings them, one store's come from the cache
  // with the pass's summation) and the top-`batch` unselected features by c_j².
  std::vector<ScoredCandidate> score(uint64_t batch, std::vector<double>& selected_c, uint64_t& bytes_streamed) {
    for (size_t q = 0; q < a_.size(); ++q)
      for (uint64_t i = 0; i < a_[q].size(); ++i) a_[q][i] = alpha_[q][i] * y_[q][i];
    SpaceScores scored = space_->score(scoring_context(source_, a_, batch, settings_.scheduler.threads, budget_));
    selected_c = scored.selected_dots ? std::move(*scored.selected_dots) : selected_column_dots(source_, columns_, a_);
    bytes_streamed += scored.pass.bytes_streamed;
    return std::move(scored.top);
  }

  // The features' columns as a new batch (one column each).
  void add_batch(const std::vector<uint64_t>& ids) {
    for (auto& cache : columns_) cache->begin_batch();
    for (uint64_t id : ids) {
      space_->mark_selected(id);
      for (size_t q = 0; q < columns_.size(); ++q) space_->materialize(source_.store(q), id, *columns_[q]);
    }
  }

  // The subproblem (9) over the constraints (selected-column positions),
  // Newton warm-started at `warm_mu`; updates α and C − α.
  mslr::MinimaxResult solve(const std::vector<std::vector<uint32_t>>& constraints, const std::vector<double>& warm_mu) {
    if (settings_.smoothing) {
      std::vector<mslr::SelectedRows> rows;
      for (const auto& cache : columns_) rows.push_back(mslr::SelectedRows::from_cache(*cache, budget_));
      std::vector<mslr::MinimaxPart> parts;
      for (size_t q = 0; q < rows.size(); ++q) parts.push_back({&rows[q], y_[q], &alpha_[q], &beta_[q]});
      return mslr::solve_smoothed_minimax(parts, layout_, source_.reduction(), constraints, settings_.minimax,
                                          &budget_);
    }
    std::vector<mslr::LatentPart> parts;
    for (size_t q = 0; q < columns_.size(); ++q) parts.push_back({columns_[q].get(), y_[q], &alpha_[q], &beta_[q]});
    return mslr::solve_minimax_newton(parts, source_.reduction(), constraints, settings_.minimax, settings_.newton,
                                      warm_mu, budget_);
  }

  const SelectedFeatureCache& columns() const { return *columns_.front(); }

  // α and C − α of a resume state: this process's rows, its parts in order.
  void restore_duals(const MslrState& s) {
    uint64_t rows = 0;
    for (const auto& alpha : alpha_) rows += alpha.size();
    if (s.alpha.size() != rows || s.beta.size() != rows)
      throw Error(ErrorKind::kCorruption,
                  fmt::format("MSLR resume state: {} dual variables for {}", s.alpha.size(),
                              communication_ ? fmt::format("the {} rows of rank {}'s partitions", rows,
                                                           source_.comm()->rank())
                                             : fmt::format("a store of {} rows", rows)));
    size_t at = 0;
    for (size_t q = 0; q < alpha_.size(); ++q) {
      std::copy_n(s.alpha.begin() + at, alpha_[q].size(), alpha_[q].begin());
      std::copy_n(s.beta.begin() + at, beta_[q].size(), beta_[q].begin());
      at += alpha_[q].size();
    }
  }

  void save_duals(MslrState& s) const {
    for (size_t q = 0; q < alpha_.size(); ++q) {
      s.alpha.insert(s.alpha.end(), alpha_[q].begin(), alpha_[q].end());
      s.beta.insert(s.beta.end(), beta_[q].begin(), beta_[q].end());
    }
  }

  // The data's part of the model: the store's provenance (a partitioned
  // store's labels are the run's) and the space's description.
  Model model_frame() const {
    Model m = source_.model_frame(negative_, positive_);
    m.solver = "mslr";
    space_->describe(m);
    return m;
  }
  void record_transforms(Model& m) const { record_feature_transforms(source_.store(0), m); }
  // The rows with a label (each adds C·ln 2 to P at w = 0).
  uint64_t fit_rows() const { return source_.total_rows(); }

  // The communication log of a partitioned run, per phase.
  void begin_phase() {
    if (communication_) phase_start_ = source_.comm()->stats();
  }
  void end_phase(int iteration, const char* phase) {
    if (communication_) communication_->push_back({iteration, phase, source_.comm()->stats() - phase_start_});
  }

 private:
  RowSource& source_;
  const MslrSettings& settings_;
  MemoryBudget& budget_;
  std::vector<const int8_t*> y_;
  const double negative_, positive_;
  const mslr::PartitionLayout layout_;
  std::vector<CommunicationRecord>* communication_;
  CommunicationStats phase_start_;
  std::vector<std::unique_ptr<SelectedFeatureCache>> columns_;
  std::unique_ptr<FeatureSpace> space_;
  Reservation dual_memory_;
  std::vector<std::vector<double>> alpha_, beta_, a_;  // per part: α, C − α, α∘y
};

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
  out_.model = make_model();
  out_.objective_no_features = settings_.minimax.C * std::log(2.0) * static_cast<double>(rows_.fit_rows());
  out_.seconds = resumed_seconds_ + seconds_since(start_);
  out_.budget_peak = budget_.peak();
  return std::move(out_);
}


flatbuffers::Offset<schema::MslrIterationRecord> write_iteration(flatbuffers::FlatBufferBuilder& fb,
                                                                 const MslrIteration& r) {
  return schema::CreateMslrIterationRecord(fb, r.iter, r.selected, r.added, r.constraint_size, r.sip_violation,
                                           r.objective, r.dual, r.relative_gap, r.q, r.stages, r.sweeps,
                                           r.newton_steps, r.bisections, r.converged, fb.CreateVector(r.mu),
                                           r.score_seconds, r.solve_seconds, r.bytes_streamed, r.peak_rss_bytes);
}

template <class T>
std::vector<T> read_vector(const flatbuffers::Vector<T>* v) {
  return v ? std::vector<T>(v->begin(), v->end()) : std::vector<T>{};
}

MslrIteration read_iteration(const schema::MslrIterationRecord& r) {
  MslrIteration it;
  it.iter = r.iter();
  it.selected = r.selected();
  it.added = r.added();
  it.constraint_size = r.constraint_size();
  it.sip_violation = r.sip_violation();
  it.objective = r.objective();
  it.dual = r.dual();
  it.relative_gap = r.relative_gap();
  it.q = r.q();
  it.stages = r.stages();
  it.sweeps = r.sweeps();
  it.newton_steps = r.newton_steps();
  it.bisections = r.bisections();
  it.converged = r.converged();
  it.mu = read_vector(r.mu());
  it.score_seconds = r.score_seconds();
  it.solve_seconds = r.solve_seconds();
  it.bytes_streamed = r.bytes_streamed();
  it.peak_rss_bytes = r.peak_rss_bytes();
  return it;
}

flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<schema::IdList>>> write_id_lists(
    flatbuffers::FlatBufferBuilder& fb, const std::vector<std::vector<uint64_t>>& lists) {
  std::vector<flatbuffers::Offset<schema::IdList>> out;
  for (const auto& ids : lists) out.push_back(schema::CreateIdList(fb, fb.CreateVector(ids)));
  return fb.CreateVector(out);
}

std::vector<std::vector<uint64_t>> read_id_lists(
    const flatbuffers::Vector<flatbuffers::Offset<schema::IdList>>* lists) {
  std::vector<std::vector<uint64_t>> out;
  if (lists)
    for (const auto* list : *lists) out.push_back(read_vector(list->ids()));
  return out;
}

// The bytes are not this format's: an MSLR state of an fgm from before it
// (hand-rolled, opening with kOldStateTag, after a length prefix for fgm
// path) is named as such.
[[noreturn]] void refuse_unknown_state(const std::string& bytes, const std::string& file) {
  const bool old = bytes.substr(0, 32).find(kOldStateTag) != std::string::npos;
  throw Error(ErrorKind::kCorruption,
              msg::not_a_checkpoint(file, old ? "MSLR state in the hand-rolled format of an earlier fgm, which this "
                                                "version no longer reads"
                                              : "MSLR state: unknown format"));
}

}  // namespace

std::string encode_mslr_state(const MslrState& s, const std::vector<MslrSavedPoint>& points, MslrStatePart part) {
  flatbuffers::FlatBufferBuilder fb;
  if (part == MslrStatePart::kDuals) {
    schema::MslrCheckpointStateBuilder duals(fb);
    duals.add_alpha(fb.CreateVector(s.alpha));
    duals.add_beta(fb.CreateVector(s.beta));
    fb.Finish(duals.Finish(), schema::MslrCheckpointStateIdentifier());
    return std::string(reinterpret_cast<const char*>(fb.GetBufferPointer()), fb.GetSize());
  }
  std::vector<flatbuffers::Offset<schema::MslrIterationRecord>> iterations;
  for (const auto& it : s.iterations) iterations.push_back(write_iteration(fb, it));
  std::vector<flatbuffers::Offset<schema::MslrPathPointState>> saved_points;
  for (const auto& p : points)
    saved_points.push_back(schema::CreateMslrPathPointState(
        fb, p.iteration, p.seconds,
        fb.CreateVector(reinterpret_cast<const uint8_t*>(p.model.data()), p.model.size())));
  const auto batches = write_id_lists(fb, s.batches);
  const auto constraints = write_id_lists(fb, s.constraints);
  const std::vector<double> none;
  const bool duals = part == MslrStatePart::kWhole;
  fb.Finish(schema::CreateMslrCheckpointState(
                fb, batches, constraints, fb.CreateVector(duals ? s.alpha : none),
                fb.CreateVector(duals ? s.beta : none), fb.CreateVector(s.weights), s.last_objective,
                s.next_checkpoint, fb.CreateVector(iterations), fb.CreateString(s.stop_reason),
                s.final_sip_violation, s.scoring_passes, s.total_bytes_streamed, s.seconds,
                fb.CreateVector(saved_points)),
            schema::MslrCheckpointStateIdentifier());
  return std::string(reinterpret_cast<const char*>(fb.GetBufferPointer()), fb.GetSize());
}

MslrState decode_mslr_state(const std::string& bytes, const std::string& file, std::vector<MslrSavedPoint>* points) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() < 8 || !schema::MslrCheckpointStateBufferHasIdentifier(data)) refuse_unknown_state(bytes, file);
  flatbuffers::Verifier verifier(data, bytes.size());
  if (!schema::VerifyMslrCheckpointStateBuffer(verifier))
    throw Error(ErrorKind::kCorruption, msg::not_a_checkpoint(file, "MSLR state: FlatBuffer verification failed"));
  const schema::MslrCheckpointState& c = *schema::GetMslrCheckpointState(data);
  MslrState s;
  s.batches = read_id_lists(c.batches());
  s.constraints = read_id_lists(c.constraints());
  if (s.constraints.size() > mslr::kMaxConstraints)
    throw Error(ErrorKind::kCorruption, msg::not_a_checkpoint(file, "MSLR state: too many constraints"));
  s.alpha = read_vector(c.alpha());
  s.beta = read_vector(c.beta());
  s.weights = read_vector(c.weights());
  s.last_objective = c.last_objective();
  s.next_checkpoint = c.next_checkpoint();
  if (c.iterations())
    for (const auto* it : *c.iterations()) s.iterations.push_back(read_iteration(*it));
  s.stop_reason = c.stop_reason() ? c.stop_reason()->str() : "";
  s.final_sip_violation = c.final_sip_violation();
  s.scoring_passes = c.scoring_passes();
  s.total_bytes_streamed = c.total_bytes_streamed();
  s.seconds = c.seconds();
  if (points && c.path_points())
    for (const auto* p : *c.path_points()) {
      if (p->iteration() < 1 || p->iteration() > s.iterations.size() || !p->model())
        throw Error(ErrorKind::kCorruption, msg::not_a_checkpoint(file, "MSLR path points: damaged"));
      points->push_back({p->iteration(), p->seconds(),
                         std::string(reinterpret_cast<const char*>(p->model()->data()), p->model()->size())});
    }
  return s;
}

MslrOutcome train_mslr(const ShardStore& store, const MslrSettings& settings, MemoryBudget& budget,
                       const MslrHooks& hooks) {
  TrainSettings streaming;  // what the store source reads: the scheduler and the block target
  streaming.scheduler = settings.scheduler;
  streaming.block_bytes = settings.block_bytes;
  const std::unique_ptr<RowSource> source = store_source(store, streaming, budget);
  MslrRows rows(*source, settings, budget, {store.labels()});
  return MslrLoop(rows, settings, budget, hooks).run();
}

MslrOutcome train_mslr_partitions(Communicator& comm, const std::string& dir, const MslrSettings& settings,
                                  MemoryBudget& budget, const MslrHooks& hooks, PartitionedRun& run) {
  const CommunicationStats before = comm.stats();  // opening the partitions and their labels: phase "labels"
  OwnPartitions own(comm, dir, settings.scheduler, settings.block_bytes, budget);
  run.describe(own);
  const std::vector<double> values = own.class_values();
  if (values.size() > 2)
    throw Error(ErrorKind::kConfig, fmt::format("{}: {} labels, but solver = \"mslr\" trains binary models only "
                                                "(relabel the data to two classes)",
                                                own.dir(), values.size()));
  const Reservation label_memory = budget.reserve(own.own_rows(), "labels of this rank's partitions",
                                                  "use more ranks (more, smaller partitions)");
  std::vector<std::vector<int8_t>> labels;  // ±1 by the classes of all partitions
  for (size_t q = 0; q < own.size(); ++q) labels.push_back(own.binary_labels(q, values[1]));
  std::vector<const int8_t*> y;
  for (const auto& part : labels) y.push_back(part.data());
  const std::unique_ptr<RowSource> source = partition_source(own, budget);
  MslrRows rows(*source, settings, budget, std::move(y), values[0], values[1],
                {own.manifest().partitions, own.range().first}, &run.communication);
  run.communication.push_back({0, "labels", comm.stats() - before});
  return MslrLoop(rows, settings, budget, hooks).run();
}

}  // namespace fgm
