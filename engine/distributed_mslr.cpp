#include "engine/distributed_mslr.h"
#include "core/clock.h"
#include "engine/model_provenance.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <unordered_set>

#include <fmt/format.h>

#include "cache/selected_features.h"
#include "core/error.h"
#include "engine/own_partitions.h"
#include "solvers/mslr/latent_newton.h"
#include "solvers/mslr/smoothed_minimax.h"

namespace fgm {
namespace {

using mslr_loop::ConstraintMember;

class DistributedMslrRun {
 public:
  DistributedMslrRun(Communicator& comm, const std::string& dir, const MslrSettings& settings, MemoryBudget& budget,
                     const MslrHooks& hooks)
      : comm_(comm), dir_(dir), settings_(settings), budget_(budget), hooks_(hooks) {}

  DistributedMslrOutcome run();

 private:
  void open_partitions();
  std::vector<ConstraintMember> most_active_constraint(uint64_t new_limit, MslrIteration& rec);
  std::vector<size_t> admit(const std::vector<ConstraintMember>& members);
  void solve(MslrIteration& rec);
  void add_column(uint64_t id);
  bool iteration(int t);
  Model make_model() const;
  void emit_checkpoint();
  void restore(const MslrState& s);
  MslrState state() const;
  void record(int iteration, const char* phase, const CommunicationStats& before) {
    const CommunicationStats& now = comm_.stats();
    out_.communication.push_back(
        {iteration, phase, {now.bytes - before.bytes, now.calls - before.calls, now.seconds - before.seconds}});
  }

  Communicator& comm_;
  std::string dir_;
  const MslrSettings& settings_;
  MemoryBudget& budget_;
  const MslrHooks& hooks_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  DistributedMslrOutcome out_;
  std::unique_ptr<OwnPartitions> own_;
  double positive_ = 1, negative_ = -1;
  Reservation row_memory_;
  // Per own partition: labels (±1), α, C − α, a = α∘y, its rows of the selected columns.
  std::vector<std::vector<int8_t>> labels_;
  std::vector<std::vector<double>> alpha_, beta_, a_;
  std::vector<std::unique_ptr<SelectedFeatureCache>> columns_;
  std::vector<uint64_t> selected_ids_;            // feature id per selected column
  std::unordered_set<uint64_t> is_selected_;      // the selected feature ids
  std::vector<double> selected_c_;                // c_j per selected column for the current α
  std::vector<std::vector<size_t>> constraints_;  // selected-column positions of d^1..d^t, increasing
  std::vector<double> weights_;                   // the last subproblem's model per selected column
  double last_objective_ = 0;
  size_t next_checkpoint_ = 0;
  double resumed_seconds_ = 0;  // the interrupted run's time, when resumed
};

// This rank's partitions, labels as ±1 by the classes of all partitions, α⁰.
void DistributedMslrRun::open_partitions() {
  own_ = std::make_unique<OwnPartitions>(comm_, dir_, settings_.scheduler, settings_.block_bytes, budget_);
  out_.describe(*own_);
  const std::vector<double> values = own_->class_values();
  if (values.size() != 2)
    throw Error(ErrorKind::kConfig, fmt::format("{}: {} labels, but solver = \"mslr\" trains binary models only "
                                                "(relabel the data to two classes)",
                                                dir_, values.size()));
  negative_ = values[0];
  positive_ = values[1];
  row_memory_ = budget_.reserve(own_->own_rows() * (3 * sizeof(double) + 1), "dual variables of this rank's partitions",
                                "use more ranks (more, smaller partitions)");
  const double C = settings_.minimax.C;
  const double start = std::min(1.0, C / 2);  // strictly inside (0, C) for any C (ERRATA 001)
  for (size_t q = 0; q < own_->size(); ++q) {
    const ShardStore& store = *(*own_)[q].store;
    const uint64_t rows = store.info().n_rows;
    std::vector<int8_t> y(rows);
    for (uint64_t i = 0; i < rows; ++i) y[i] = store.info().class_values[store.classes()[i]] == positive_ ? 1 : -1;
    labels_.push_back(std::move(y));
    alpha_.emplace_back(rows, start);
    beta_.emplace_back(rows, C - start);
    a_.emplace_back(rows, 0.0);
    columns_.push_back(std::make_unique<SelectedFeatureCache>(budget_, rows));
  }
}

// (8) from the global c of this α: the selected columns' c_j and the top
// unselected c_j² (ties to the smaller id), chosen by the single-store rules.
// Scored by column ranges as FGM's linear pass (OwnPartitions::score_by_ranges):
// only non-empty columns travel, no rank holds a length-m vector.
std::vector<ConstraintMember> DistributedMslrRun::most_active_constraint(uint64_t new_limit, MslrIteration& rec) {
  for (size_t q = 0; q < a_.size(); ++q)
    for (uint64_t i = 0; i < a_[q].size(); ++i) a_[q][i] = alpha_[q][i] * labels_[q][i];
  OwnPartitions::RangeScores scored = own_->score_by_ranges(
      a_, nullptr, [&](uint64_t id) { return is_selected_.count(id) > 0; }, selected_ids_, selected_ids_,
      std::max<uint64_t>(new_limit, 1), rec.bytes_streamed);
  selected_c_ = std::move(scored.selected_dots);
  std::vector<ConstraintMember> pool;
  for (size_t k = 0; k < selected_ids_.size(); ++k) {
    const double score = selected_c_[k] * selected_c_[k];
    if (score > 0) pool.push_back({score, selected_ids_[k], k});
  }
  for (const ScoredCandidate& candidate : scored.top) pool.push_back({candidate.score, candidate.id, SIZE_MAX});
  return mslr_loop::choose_constraint(std::move(pool), settings_.r, new_limit);
}

// The constraint's new features read from this rank's partitions (one batch);
// returns the constraint as selected-column positions, increasing.
std::vector<size_t> DistributedMslrRun::admit(const std::vector<ConstraintMember>& members) {
  std::vector<size_t> positions;
  for (auto& cache : columns_) cache->begin_batch();
  for (const ConstraintMember& m : members) {
    if (m.position != SIZE_MAX) {
      positions.push_back(m.position);
      continue;
    }
    positions.push_back(selected_ids_.size());
    add_column(m.id);
  }
  std::sort(positions.begin(), positions.end());
  return positions;
}

// Feature `id` as the next selected column: its rows in this rank's partitions.
void DistributedMslrRun::add_column(uint64_t id) {
  std::vector<uint32_t> rows;
  std::vector<float> values;
  FeatureKey key;
  key.ids[0] = id;
  for (size_t q = 0; q < own_->size(); ++q) {
    (*own_)[q].store->read_column(id, rows, values);
    columns_[q]->add_column(key, rows, values);
  }
  selected_ids_.push_back(id);
  is_selected_.insert(id);
}

// The subproblem over this rank's partitions as row parts, every row sum
// reduced in the partition tree (solvers/mslr/smoothed_minimax.h).
void DistributedMslrRun::solve(MslrIteration& rec) {
  std::vector<std::vector<uint32_t>> constraints;
  for (const auto& d : constraints_) constraints.emplace_back(d.begin(), d.end());
  const auto t_solve = std::chrono::steady_clock::now();
  mslr::MinimaxResult r;
  if (settings_.smoothing) {
    std::vector<mslr::SelectedRows> rows;
    for (const auto& cache : columns_) rows.push_back(mslr::SelectedRows::from_cache(*cache, budget_));
    std::vector<mslr::MinimaxPart> parts;
    for (size_t q = 0; q < rows.size(); ++q) parts.push_back({&rows[q], labels_[q].data(), &alpha_[q], &beta_[q]});
    r = mslr::solve_smoothed_minimax(parts, {out_.manifest.partitions, own_->range().first}, own_->reduction(),
                                     constraints, settings_.minimax, &budget_);
  } else {
    std::vector<mslr::LatentPart> parts;
    for (size_t q = 0; q < columns_.size(); ++q)
      parts.push_back({columns_[q].get(), labels_[q].data(), &alpha_[q], &beta_[q]});
    r = mslr::solve_minimax_newton(parts, own_->reduction(), constraints, settings_.minimax, settings_.newton,
                                   mslr_loop::warm_mu(out_.result.iterations), budget_);
  }
  rec.solve_seconds = seconds_since(t_solve);
  mslr_loop::record_solve(rec, r, settings_);
  weights_ = r.weights;
  last_objective_ = r.primal;
}

// Iteration t: scoring, the stop tests that need the constraint, the
// subproblem. Returns false when the loop ends.
bool DistributedMslrRun::iteration(int t) {
  MslrIteration rec;
  rec.iter = t;
  CommunicationStats before = comm_.stats();
  const auto t_score = std::chrono::steady_clock::now();
  const uint64_t new_limit = mslr_loop::new_feature_limit(settings_, selected_ids_.size(), next_checkpoint_);
  const std::vector<ConstraintMember> members = most_active_constraint(new_limit, rec);
  ++out_.result.scoring_passes;
  out_.result.total_bytes_streamed += rec.bytes_streamed;
  rec.score_seconds = seconds_since(t_score);
  record(t, "scoring", before);
  out_.result.stop_reason =
      mslr_loop::constraint_stop(members, constraints_, selected_c_, settings_, t, last_objective_, rec.sip_violation);
  out_.result.final_sip_violation = rec.sip_violation;
  if (!out_.result.stop_reason.empty()) return false;
  before = comm_.stats();
  const size_t selected_before = selected_ids_.size();
  constraints_.push_back(admit(members));
  rec.added = selected_ids_.size() - selected_before;
  rec.constraint_size = constraints_.back().size();
  rec.selected = selected_ids_.size();
  solve(rec);
  record(t, "solve", before);
  rec.peak_rss_bytes = peak_rss_bytes();
  out_.result.iterations.push_back(rec);
  if (hooks_.on_iteration) hooks_.on_iteration(out_.result.iterations.back());
  if (mslr_loop::reaches_checkpoint(settings_, selected_ids_.size(), next_checkpoint_)) {
    emit_checkpoint();
    next_checkpoint_ = mslr_loop::next_checkpoint_after(settings_, selected_ids_.size(), next_checkpoint_);
  }
  out_.result.stop_reason = mslr_loop::stop_after_solve(settings_, selected_ids_.size(), t);
  if (hooks_.on_state) hooks_.on_state(state());
  return out_.result.stop_reason.empty();
}

void DistributedMslrRun::emit_checkpoint() {
  if (!hooks_.on_checkpoint) return;
  MslrCheckpoint cp;
  cp.features = selected_ids_.size();
  cp.model = make_model();
  cp.last = &out_.result.iterations.back();
  cp.seconds = resumed_seconds_ + seconds_since(start_);
  hooks_.on_checkpoint(cp);
}

// The selected columns re-read batch by batch in the saved order (the same
// columns at the same positions); α and C − α are this rank's slice, split
// over its partitions in order; everything else is copied.
void DistributedMslrRun::restore(const MslrState& s) {
  if (s.alpha.size() != own_->own_rows() || s.beta.size() != own_->own_rows())
    throw Error(ErrorKind::kCorruption,
                fmt::format("MSLR resume state: {} dual variables for the {} rows of rank {}'s partitions",
                            s.alpha.size(), own_->own_rows(), comm_.rank()));
  for (const auto& batch : s.batches) {
    for (auto& cache : columns_) cache->begin_batch();
    for (uint64_t id : batch) {
      if (id >= out_.manifest.n_features || is_selected_.count(id))
        throw Error(ErrorKind::kCorruption, fmt::format("MSLR resume state: feature {} out of range or repeated", id));
      add_column(id);
    }
  }
  constraints_.clear();
  for (const auto& d : s.constraints) {
    for (uint64_t k : d) FGM_ASSERT(k < selected_ids_.size());
    constraints_.emplace_back(d.begin(), d.end());
  }
  size_t at = 0;
  for (size_t q = 0; q < alpha_.size(); ++q) {
    std::copy_n(s.alpha.begin() + at, alpha_[q].size(), alpha_[q].begin());
    std::copy_n(s.beta.begin() + at, beta_[q].size(), beta_[q].begin());
    at += alpha_[q].size();
  }
  weights_ = s.weights;
  last_objective_ = s.last_objective;
  next_checkpoint_ = static_cast<size_t>(s.next_checkpoint);
  mslr_loop::restore_progress(s, out_.result);
  resumed_seconds_ = s.seconds;
}

// The state after a completed iteration; alpha and beta are this rank's rows only.
MslrState DistributedMslrRun::state() const {
  MslrState s;
  const SelectedFeatureCache& cache = *columns_.front();
  for (size_t h = 0; h < cache.num_batches(); ++h)
    s.batches.emplace_back(selected_ids_.begin() + cache.batch_begin(h), selected_ids_.begin() + cache.batch_end(h));
  for (const auto& d : constraints_) s.constraints.emplace_back(d.begin(), d.end());
  for (size_t q = 0; q < alpha_.size(); ++q) {
    s.alpha.insert(s.alpha.end(), alpha_[q].begin(), alpha_[q].end());
    s.beta.insert(s.beta.end(), beta_[q].begin(), beta_[q].end());
  }
  s.weights = weights_;
  s.last_objective = last_objective_;
  s.next_checkpoint = next_checkpoint_;
  mslr_loop::save_progress(out_.result, s);
  s.seconds = resumed_seconds_ + seconds_since(start_);
  return s;
}

Model DistributedMslrRun::make_model() const {
  Model m = model_of_partitioned_store(out_.manifest, negative_, positive_, "mslr");
  m.loss = "logistic";
  m.C = settings_.minimax.C;
  m.B = settings_.r;
  m.iterations = static_cast<uint32_t>(out_.result.iterations.size());
  m.has_bias = false;
  m.feature_kind = "linear";
  m.objective = last_objective_;
  const SelectedFeatureCache& cache = *columns_.front();
  for (size_t h = 0; h < cache.num_batches(); ++h)
    for (size_t k = cache.batch_begin(h); k < cache.batch_end(h); ++k) {
      ModelFeature f;
      f.key = cache.key(k);
      f.weight = k < weights_.size() ? weights_[k] : 0.0;
      f.batch = static_cast<uint32_t>(h + 1);
      m.features.push_back(f);
    }
  return m;
}

DistributedMslrOutcome DistributedMslrRun::run() {
  FGM_ASSERT(!settings_.labels);
  FGM_ASSERT(settings_.max_iterations >= 1 && size_t(settings_.max_iterations) <= mslr::kMaxConstraints);
  const CommunicationStats before = comm_.stats();
  open_partitions();
  record(0, "labels", before);
  out_.objective_no_features = settings_.minimax.C * std::log(2.0) * static_cast<double>(out_.manifest.n_rows);
  if (settings_.resume) restore(*settings_.resume);
  if (out_.result.stop_reason.empty())
    for (int t = static_cast<int>(out_.result.iterations.size()) + 1; t <= settings_.max_iterations; ++t)
      if (!iteration(t)) break;
  if (hooks_.on_checkpoint &&
      mslr_loop::stopped_short_of_checkpoint(settings_, out_.result, selected_ids_.size(), next_checkpoint_))
    emit_checkpoint();
  out_.result.model = make_model();
  out_.result.seconds = resumed_seconds_ + seconds_since(start_);
  out_.result.budget_peak = budget_.peak();
  return std::move(out_);
}

}  // namespace

DistributedMslrOutcome train_mslr_distributed(Communicator& comm, const std::string& store_dir,
                                              const MslrSettings& settings, MemoryBudget& budget,
                                              const MslrHooks& hooks) {
  DistributedMslrRun run(comm, store_dir, settings, budget, hooks);
  return run.run();
}

}  // namespace fgm
