#include "engine/distributed_fgm.h"
#include "core/clock.h"
#include "engine/model_provenance.h"

#include <chrono>
#include <cstring>
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/partition_sum.h"
#include "engine/distributed_spaces.h"
#include "engine/own_partitions.h"
#include "engine/fgm_trainer.h"
#include "engine/one_vs_rest.h"
#include "engine/value_span.h"
#include "features/block_scores.h"
#include "features/block_stream.h"
#include "features/feature_groups.h"
#include "features/transformed_store.h"
#include "core/messages.h"
#include "io/libsvm_reader.h"
#include "solvers/apg.h"
#include "solvers/apg_reduction.h"

namespace fgm {

namespace {

constexpr uint64_t kColumnMaxEntryBytes = 32;  // an unordered_map<uint64_t, float> node and its bucket

CommunicationStats since(const CommunicationStats& now, const CommunicationStats& before) {
  return {now.bytes - before.bytes, now.calls - before.calls, now.seconds - before.seconds};
}

// Where a run's labels come from: the label values of all partitions
// (increasing) and the one taken as +1 (the larger of two; a class against the
// rest for one-vs-rest).
struct LabelChoice {
  std::vector<double> values;
  size_t positive = 1;
  bool one_vs_rest = false;
};

// Rank 0 alone adds a warning (every rank takes the same decision; one copy in
// the log and in run.json).
void warn(const Communicator& comm, RunWarnings* warnings, std::string code, std::string message) {
  if (comm.rank() != 0) return;
  RunWarnings log_only;
  (warnings ? *warnings : log_only).add(std::move(code), std::move(message));
}

class DistributedRun {
 public:
  // `labels_start`: the communication counters when this run's label phase
  // began (the label values were gathered before the run). `value_span`: this
  // run measures the value span on its first pass (one warning per store).
  DistributedRun(Communicator& comm, OwnPartitions& own, const TrainSettings& settings, MemoryBudget& budget,
                 const DistributedHooks& hooks, LabelChoice labels, const CommunicationStats& labels_start,
                 bool value_span)
      : comm_(comm), dir_(own.dir()), settings_(settings), budget_(budget), hooks_(hooks), own_(&own),
        label_choice_(std::move(labels)), labels_start_(labels_start), value_span_pending_(value_span) {}

  DistributedOutcome run();

  // run() in steps, for one-vs-rest in lockstep (several runs sharing each
  // scoring pass): begin(); while (start_iteration()) { score; if
  // (!after_scoring(top)) break; } then the certificate pass if
  // needs_certificate(), and finish().
  void begin();
  bool start_iteration();  // false: a stop rule ended the loop
  bool after_scoring(std::vector<ScoredCandidate> fresh);  // false: the loop ended (no new features, eps_outer)
  bool needs_certificate() const;
  DistributedOutcome finish(bool certified);
  // This run's request in a shared pass: its duals, selection and batch size
  // (settings.B for the certificate pass).
  OwnPartitions::RangeRequest range_request(bool certificate) const;
  const FeatureGroups* groups() const { return groups_.get(); }
  bool linear_or_groups() const { return space_ == nullptr; }
  // The shared pass's scores of this run: the top-B and the SIP violation,
  // as scoring_pass would have taken them.
  std::vector<ScoredCandidate> take_shared_scores(OwnPartitions::RangeScores&& scored, double seconds,
                                                  uint64_t bytes_streamed, bool certificate);
  bool measures_value_span() const { return value_span_pending_; }
  void observe_values();
  void check_value_span(int iteration);
  int iteration() const { return t_; }

 private:
  void open_partitions();
  void map_labels();
  OwnPartitions::RangeScores scores(const std::unordered_set<uint64_t>& is_selected, uint64_t batch);
  void add_batch(const std::vector<ScoredCandidate>& top);
  void add_generated_batch(const std::vector<ScoredCandidate>& top);
  double best_batch_score(const std::vector<double>& c) const;
  std::vector<double> selected_column_dots();
  void update_duals();
  std::vector<ApgRowPart> parts();
  ApgResult solve(bool certify);
  bool solve_is_final() const;
  void polish_final_solve();
  int restore(TrainProgress& saved, std::unordered_set<uint64_t>& is_selected, double& objective);
  void save_progress() const;
  std::vector<ScoredCandidate> scoring_pass(uint64_t batch, const std::unordered_set<uint64_t>& is_selected,
                                            IterationRecord& rec, Reservation& top_memory);
  uint64_t selected_units() const;
  std::string stop_rule(int t) const;
  std::vector<ScoredCandidate> take_range_scores(OwnPartitions::RangeScores& scored, IterationRecord& rec,
                                                 Reservation& top_memory);
  void check_chance_level();
  std::string space_kind() const { return space_ ? settings_.space.kind : groups_ ? "group" : "linear"; }
  Model make_model(double objective) const;
  void emit_point(const std::function<void(const DistributedPoint&)>& hook, double objective);
  void record(int iteration, const char* phase, const CommunicationStats& before) {
    out_.communication.push_back({iteration, phase, since(comm_.stats(), before)});
  }

  Communicator& comm_;
  std::string dir_;
  const TrainSettings& settings_;
  MemoryBudget& budget_;
  const DistributedHooks& hooks_;
  DistributedOutcome out_;
  OwnPartitions* own_;
  LabelChoice label_choice_;
  CommunicationStats labels_start_;
  // The value span of the first pass: this rank's per-column max |value| (all
  // own partitions), filled by the streams' observers.
  bool value_span_pending_ = false;
  std::mutex column_max_mutex_;
  std::unordered_map<uint64_t, float> column_max_;  // the non-empty columns only (hashed id spaces)
  Reservation column_max_memory_;
  // Per own partition: its labels (±1), its rows of the selected columns
  // and its decision values at the last solve.
  std::vector<std::vector<int8_t>> labels_;
  std::vector<std::unique_ptr<SelectedFeatureCache>> columns_;
  std::vector<std::vector<double>> decisions_;
  std::vector<size_t> batch_begin_;  // batch h: selected columns [batch_begin_[h], batch_begin_[h+1])
  ApgState state_;
  Reservation row_memory_;
  std::vector<std::vector<double>> a_;  // α∘y per own partition
  std::vector<std::vector<uint64_t>> batches_;  // candidate ids (features or groups) per outer iteration
  std::vector<uint64_t> selected_;       // feature ids, cache order
  std::vector<uint64_t> column_group_;   // group of each selected column (group spaces)
  std::unique_ptr<FeatureGroups> groups_;  // features.groups; null: linear features
  std::unique_ptr<DistributedSpace> space_;  // poly2, hik, additive; null: linear features and groups
  std::vector<FeatureKey> selected_keys_;    // key of each selected column (generated spaces)
  double positive_ = 1, negative_ = -1;
  uint64_t bytes_streamed_ = 0;  // by this rank in the current scoring pass
  uint64_t batch_ = 0;           // this outer iteration's B (shortened before a path checkpoint)
  uint64_t next_checkpoint_ = 0, last_point_units_ = 0;  // settings.checkpoints: the next, the units at the last point
  // The outer loop's state between the steps of run().
  std::chrono::steady_clock::time_point start_;
  int t_ = 1;
  std::unordered_set<uint64_t> is_selected_;  // selected features or groups
  double objective_ = 0;
  IterationRecord rec_;  // the current outer iteration
  Reservation top_memory_;
};

void DistributedRun::open_partitions() {
  out_.describe(*own_);
}

// Labels as ±1 by the classes of ALL partitions (a partition may lack one
// class): +1 for the chosen positive value, −1 for every other.
void DistributedRun::map_labels() {
  const std::vector<double>& values = label_choice_.values;
  positive_ = values[label_choice_.positive];
  negative_ = values[label_choice_.positive == 0 ? 1 : 0];
  row_memory_ = budget_.reserve(own_->own_rows() * (3 * sizeof(double) + 1), "dual vectors of this rank's partitions",
                                "use more ranks (more, smaller partitions)");
  for (size_t q = 0; q < own_->size(); ++q) {
    const ShardStore& store = *(*own_)[q].store;
    const StoreInfo& info = store.info();
    std::vector<int8_t> y(info.n_rows);
    const uint16_t* classes = store.classes();
    for (uint64_t i = 0; i < info.n_rows; ++i) y[i] = info.class_values[classes[i]] == positive_ ? 1 : -1;
    if (hooks_.left_out)
      for (uint64_t i = 0; i < info.n_rows; ++i) y[i] = (*hooks_.left_out)[q][i] ? int8_t{0} : y[i];
    // α⁰ = C·1 without a bias (a = C·y); with one, run() fits b first.
    std::vector<double> a(info.n_rows);
    for (uint64_t i = 0; i < info.n_rows; ++i) a[i] = settings_.apg.C * double(y[i]);
    labels_.push_back(std::move(y));
    a_.push_back(std::move(a));
    decisions_.emplace_back();
    columns_.push_back(std::make_unique<SelectedFeatureCache>(budget_, info.n_rows));
  }
}

// The top-B unselected features or groups and the selected columns' c_j,
// the same on every rank, scored by column ranges (OwnPartitions::score_by_ranges).
OwnPartitions::RangeScores DistributedRun::scores(const std::unordered_set<uint64_t>& is_selected, uint64_t batch) {
  uint64_t bytes = 0;
  OwnPartitions::RangeScores scored = own_->score_by_ranges(
      a_, groups_.get(), [&](uint64_t id) { return is_selected.count(id) > 0; }, selected_, column_group_,
      batch, bytes);
  out_.total_bytes_streamed += bytes;
  bytes_streamed_ += bytes;
  return scored;
}

void DistributedRun::add_batch(const std::vector<ScoredCandidate>& top) {
  std::vector<uint32_t> rows;
  std::vector<float> values;
  for (auto& columns : columns_) columns->begin_batch();
  batches_.emplace_back();
  for (const auto& c : top) batches_.back().push_back(c.id);
  auto add_column = [&](uint64_t feature, uint64_t group) {
    selected_.push_back(feature);
    column_group_.push_back(group);
    FeatureKey key;
    key.ids[0] = feature;
    if (groups_) {
      key.kind = FeatureKind::kGroup;
      key.group = group;
    }
    for (size_t q = 0; q < own_->size(); ++q) {
      (*own_)[q].store->read_column(feature, rows, values);
      columns_[q]->add_column(key, rows, values);
    }
  };
  for (const auto& c : top) {
    if (!groups_) {
      add_column(c.id, 0);
      continue;
    }
    for (uint64_t p = 0; p < groups_->size(c.id); ++p) add_column(groups_->member(c.id, p), c.id);
  }
  batch_begin_.push_back(selected_.size());
}

// The generated columns of the new candidates on this rank's partitions. A
// column empty on every partition (an expansion component no row reaches)
// carries no weight and is dropped, as the single-store cache drops it: one
// reduction of the per-partition entry counts decides, the same on every rank.
void DistributedRun::add_generated_batch(const std::vector<ScoredCandidate>& top) {
  std::vector<std::vector<std::vector<GeneratedColumn>>> fresh(own_->size());  // [partition][candidate][column]
  std::vector<FeatureKey> keys;
  std::vector<std::vector<double>> counts(own_->size());
  batches_.emplace_back();
  for (const auto& c : top) {
    batches_.back().push_back(c.id);
    space_->mark_selected(c.id);
    for (size_t q = 0; q < own_->size(); ++q) {
      fresh[q].push_back(space_->columns(*(*own_)[q].store, c.id));
      for (const auto& col : fresh[q].back()) {
        counts[q].push_back(static_cast<double>(col.rows.size()));
        if (q == 0) keys.push_back(col.key);
      }
    }
  }
  const std::vector<double> total =
      own_->sum(counts, keys.size());
  for (size_t q = 0; q < own_->size(); ++q) {
    columns_[q]->begin_batch();
    size_t k = 0;
    for (const auto& candidate : fresh[q])
      for (const auto& col : candidate)
        if (total[k++] > 0) columns_[q]->add_column(col.key, col.rows, col.values);
  }
  for (size_t k = 0; k < keys.size(); ++k)
    if (total[k] > 0) {
      selected_keys_.push_back(keys[k]);
      selected_.push_back(keys[k].ids[0]);
      column_group_.push_back(keys[k].group);
    }
  batch_begin_.push_back(selected_.size());
}

// c_h = Σ_i a_i x_ih of every selected column, tree-reduced (the generated
// spaces' scores of the selected features, for (37)).
std::vector<double> DistributedRun::selected_column_dots() {
  std::vector<std::vector<double>> local;
  for (size_t q = 0; q < columns_.size(); ++q) {
    std::vector<double> dots(selected_.size(), 0.0);
    for (size_t h = 0; h < selected_.size(); ++h) {
      columns_[q]->column(h).for_each([&](uint32_t row, float value) { dots[h] += a_[q][row] * double(value); });
    }
    local.push_back(std::move(dots));
  }
  return own_->sum(local, selected_.size());
}

// max_h ½Σ_{j∈d_h} c_j² over the batches so far, c indexed by selected column.
double DistributedRun::best_batch_score(const std::vector<double>& c) const {
  double best = 0;
  for (size_t h = 0; h + 1 < batch_begin_.size(); ++h) {
    double s = 0;
    for (size_t j = batch_begin_[h]; j < batch_begin_[h + 1]; ++j) s += c[j] * c[j];
    best = std::max(best, 0.5 * s);
  }
  return best;
}

// α from the decision values on this rank's rows (Theorem 3), a = α∘y.
void DistributedRun::update_duals() {
  std::vector<double> alpha;
  for (size_t q = 0; q < labels_.size(); ++q) {
    dual_from_decision(settings_.apg.loss, settings_.apg.C, labels_[q].data(), decisions_[q], alpha);
    for (uint64_t i = 0; i < labels_[q].size(); ++i) a_[q][i] = alpha[i] * double(labels_[q][i]);
  }
}

// The subproblem (31) over the selected columns: the single-store APG over
// this rank's partitions, every row sum reduced in the partition tree.
std::vector<ApgRowPart> DistributedRun::parts() {
  std::vector<ApgRowPart> out;
  for (size_t q = 0; q < columns_.size(); ++q) out.push_back({columns_[q].get(), labels_[q].data(), &decisions_[q]});
  return out;
}

// certify: stop on apg.gap_tolerance (the run's final solve, a path point's), else on apg.eps_inner.
ApgResult DistributedRun::solve(bool certify) {
  ApgOptions apg = settings_.apg;
  apg.certify = certify;
  return solve_apg(parts(), own_->reduction(), apg, state_, budget_);
}

// As FgmRun::solve_is_final on one store: the batch just added ends the run
// or reaches a path checkpoint, so its solve is certified.
bool DistributedRun::solve_is_final() const {
  if (next_checkpoint_ < settings_.checkpoints.size() && selected_units() >= settings_.checkpoints[next_checkpoint_])
    return true;
  return !stop_rule(t_ + 1).empty();
}

// As FgmRun::polish_final_solve: eps_outer or no_new_features ended the run
// after an inexact solve, so the model comes from a certified solve
// warm-started at it, recorded with the last outer iteration.
void DistributedRun::polish_final_solve() {
  if (out_.iterations.empty() || out_.iterations.back().apg_certified) return;
  IterationRecord& rec = out_.iterations.back();
  const auto phase_start = std::chrono::steady_clock::now();
  const CommunicationStats before = comm_.stats();
  const ApgResult r = solve(true);
  update_duals();
  record(rec.iter, "solve", before);
  record_polished_solve(r, seconds_since(phase_start), rec);
  objective_ = r.objective;
  if (comm_.rank() == 0) warn_apg_stop(rec, settings_.warnings);
}

// The state after the checkpoint's last outer iteration: its batches read
// again from this rank's partitions, ω and L_t, the iteration log, and α
// formed from ω as the solve formed it. Returns the next iteration.
int DistributedRun::restore(TrainProgress& saved, std::unordered_set<uint64_t>& is_selected, double& objective) {
  const uint64_t candidates = groups_ ? groups_->n_groups : out_.manifest.n_features;
  for (const auto& batch : saved.batches) {
    std::vector<ScoredCandidate> top;
    for (uint64_t id : batch) {
      if (!space_ && id >= candidates)
        throw Error(ErrorKind::kCorruption, fmt::format("checkpoint: candidate {} is beyond the {} candidates of {}", id,
                                                        candidates, dir_));
      if (!space_) is_selected.insert(id);
      top.push_back({0.0, id});
    }
    if (space_)
      add_generated_batch(top);
    else
      add_batch(top);
  }
  if (saved.apg.w.size() != selected_.size())
    throw Error(ErrorKind::kCorruption, fmt::format("checkpoint: {} weights for {} selected columns", saved.apg.w.size(),
                                                    selected_.size()));
  state_ = std::move(saved.apg);
  next_checkpoint_ = saved.next_path_point;
  last_point_units_ = saved.last_path_point_features;
  out_.iterations = std::move(saved.iterations);
  out_.iterations_restored = out_.iterations.size();
  if (!out_.iterations.empty()) objective = out_.iterations.back().objective;
  if (!selected_.empty()) {
    apg_decision_values(parts(), settings_.apg, state_, budget_);
    update_duals();
  }
  return static_cast<int>(out_.iterations.size()) + 1;
}

void DistributedRun::save_progress() const {
  if (!hooks_.on_progress) return;
  TrainProgress progress;
  progress.batches = batches_;
  progress.apg = state_;
  progress.iterations = out_.iterations;
  progress.next_path_point = next_checkpoint_;
  progress.last_path_point_features = last_point_units_;
  hooks_.on_progress(progress);
}

Model DistributedRun::make_model(double objective) const {
  Model model = model_of_partitioned_store(out_.manifest, negative_, positive_, "fgm");
  model.loss = loss_name(settings_.apg.loss);
  model.C = settings_.apg.C;
  model.B = settings_.B;
  model.iterations = static_cast<uint32_t>(out_.iterations.size());
  model.feature_kind = groups_ ? "group" : "linear";
  if (space_) space_->describe(model);
  model.objective = objective;
  model.has_bias = settings_.apg.bias;
  model.bias = settings_.apg.bias ? state_.b : 0.0;
  for (size_t h = 0; h + 1 < batch_begin_.size(); ++h)
    for (size_t j = batch_begin_[h]; j < batch_begin_[h + 1]; ++j) {
      ModelFeature f;
      f.key.kind = groups_ ? FeatureKind::kGroup : FeatureKind::kLinear;
      f.key.ids[0] = selected_[j];
      if (groups_) f.key.group = column_group_[j];
      if (space_) f.key = selected_keys_[j];
      f.weight = state_.w[j];
      f.batch = static_cast<uint32_t>(h + 1);  // outer iterations count from 1, as in engine/fgm_trainer.cpp
      model.features.push_back(f);
    }
  record_feature_transforms(*(*own_)[0].store, model);  // predict applies them to raw rows
  return model;
}

// fgm.max_features and the stop rules count selection units, what one top-B
// slot holds: a feature (linear, poly2) or a group (group, hik, additive), as
// the single-store trainer does.
uint64_t DistributedRun::selected_units() const {
  uint64_t units = 0;
  for (const auto& batch : batches_) units += batch.size();
  return units;
}

// The outer stop rules checked before iteration t scores ("" to go on): the
// single-store trainer's, taken after iteration t − 1's solve.
std::string DistributedRun::stop_rule(int t) const {
  return outer_stop_rule(settings_.max_features, settings_.checkpoints, settings_.max_iterations, selected_units(),
                         t - 1);
}

bool DistributedRun::needs_certificate() const {
  return settings_.final_certificate && !scoring_stop_measured_violation(out_.stop_reason) &&
         !out_.iterations.empty();
}

// The streams of this rank's partitions record each column's max |value| of
// the pass that follows (the value-span warning).
void DistributedRun::observe_values() {
  // A hash map entry costs about 32 bytes; every non-empty column of this rank's partitions may get one.
  uint64_t columns = 0;
  for (size_t q = 0; q < own_->size(); ++q) columns += (*own_)[q].store->info().nonempty_columns;
  column_max_memory_ = budget_.reserve(columns * kColumnMaxEntryBytes, "per-column max |value| of a pass",
                                       "use fewer features or more memory per rank");
  column_max_.clear();
  column_max_.reserve(columns);
  for (size_t q = 0; q < own_->size(); ++q)
    (*own_)[q].stream->set_observer([this](const ColumnBlock& block) {
      const std::vector<float> m = block_column_max_abs(block);
      std::lock_guard<std::mutex> lock(column_max_mutex_);
      for (uint32_t k = 0; k < block.column_count; ++k) {
        float& slot = column_max_[block.column_ids[k]];
        slot = std::max(slot, m[k]);
      }
    });
}

// The value span over all partitions: each rank's nonzero column maxima
// (id, max) gathered, the maximum per column (exact in any order), then the
// single-store trainer's measure and warning (engine/value_span.h).
void DistributedRun::check_value_span(int iteration) {
  for (size_t q = 0; q < own_->size(); ++q) (*own_)[q].stream->set_observer({});
  value_span_pending_ = false;
  const CommunicationStats before = comm_.stats();
  struct ColumnMax {  // 16 bytes, no padding
    uint64_t id;
    double max;
  };
  std::vector<ColumnMax> mine;
  for (const auto& [id, max] : column_max_)
    if (max > 0) mine.push_back({id, max});
  Reservation exchange = budget_.reserve(mine.size() * sizeof(ColumnMax), "value-span exchange of a pass",
                                         "use fewer features or more memory per rank");
  const std::vector<uint8_t> all = comm_.allgather(mine.data(), mine.size() * sizeof(ColumnMax));
  exchange.resize((mine.size() + all.size() / sizeof(ColumnMax)) * sizeof(ColumnMax));
  for (size_t k = 0; k < all.size() / sizeof(ColumnMax); ++k) {
    ColumnMax c;
    std::memcpy(&c, all.data() + k * sizeof(ColumnMax), sizeof c);
    column_max_[c.id] = std::max(column_max_[c.id], static_cast<float>(c.max));
  }
  ValueSpan span;
  for (const auto& [id, max] : column_max_) span.add_column_max(max);
  if (comm_.rank() == 0) out_.value_span = span.check(space_kind() == "poly2" ? 2 : 1, space_kind(), settings_.warnings);
  column_max_ = {};
  column_max_memory_ = {};
  record(iteration, "diagnostics", before);
}

// One scoring pass against the current α: the top-`batch` unselected
// candidates (empty: nothing left to add), with rec's scoring fields and the
// SIP violation (37) of α: ½Σ_{j∈new} s_j − max_h ½Σ_{j∈d_h} c_j².
std::vector<ScoredCandidate> DistributedRun::scoring_pass(uint64_t batch, const std::unordered_set<uint64_t>& is_selected,
                                                          IterationRecord& rec, Reservation& top_memory) {
  const auto phase_start = std::chrono::steady_clock::now();
  const CommunicationStats before = comm_.stats();
  const bool measure_span = value_span_pending_;
  if (measure_span) observe_values();
  bytes_streamed_ = 0;
  std::vector<ScoredCandidate> fresh;
  double best = 0, fresh_sum = 0;
  if (space_) {
    std::vector<PartitionScoringInput> inputs;
    for (size_t q = 0; q < own_->size(); ++q) inputs.push_back({(*own_)[q].stream.get(), &(*own_)[q].blocks, a_[q].data()});
    DistributedScores scored = space_->score(inputs, batch);
    fresh = std::move(scored.top);
    top_memory = std::move(scored.top_memory);
    best = best_batch_score(selected_column_dots());
    rec.candidates_scored = scored.candidates_scored;
    rec.pair_updates = scored.pair_updates;
    bytes_streamed_ += scored.bytes_streamed;
    out_.total_bytes_streamed += scored.bytes_streamed;
  } else {
    OwnPartitions::RangeScores scored = scores(is_selected, batch);
    fresh = take_range_scores(scored, rec, top_memory);
  }
  if (space_) {
    for (const auto& f : fresh) fresh_sum += f.score;
    rec.sip_violation = 0.5 * fresh_sum - best;
  }
  rec.score_seconds = seconds_since(phase_start);
  rec.bytes_streamed = bytes_streamed_;
  record(rec.iter, "scoring", before);
  if (measure_span) check_value_span(rec.iter);
  return fresh;
}

// A linear or group pass's top-B, with rec's candidates and the SIP violation
// (37) of α: ½Σ_{j∈new} s_j − max_h ½Σ_{j∈d_h} c_j².
std::vector<ScoredCandidate> DistributedRun::take_range_scores(OwnPartitions::RangeScores& scored,
                                                               IterationRecord& rec, Reservation& top_memory) {
  std::vector<ScoredCandidate> fresh = std::move(scored.top);
  top_memory = std::move(scored.top_memory);
  const double best = best_batch_score(scored.selected_dots);
  rec.candidates_scored = groups_ ? groups_->n_groups : out_.manifest.n_features;
  double fresh_sum = 0;
  for (const auto& f : fresh) fresh_sum += f.score;
  rec.sip_violation = 0.5 * fresh_sum - best;
  return fresh;
}

OwnPartitions::RangeRequest DistributedRun::range_request(bool certificate) const {
  OwnPartitions::RangeRequest r;
  r.a = &a_;
  r.is_selected = [this](uint64_t id) { return is_selected_.count(id) > 0; };
  r.selected = &selected_;
  r.selected_group = &column_group_;
  r.B = certificate ? settings_.B : batch_;
  return r;
}

std::vector<ScoredCandidate> DistributedRun::take_shared_scores(OwnPartitions::RangeScores&& scored, double seconds,
                                                                uint64_t bytes_streamed, bool certificate) {
  IterationRecord certificate_rec;
  IterationRecord& rec = certificate ? certificate_rec : rec_;
  rec.iter = t_;
  Reservation certificate_memory;
  std::vector<ScoredCandidate> fresh =
      take_range_scores(scored, rec, certificate ? certificate_memory : top_memory_);
  rec.score_seconds = seconds;
  rec.bytes_streamed = bytes_streamed;
  if (certificate) out_.final_sip_violation = rec.sip_violation;
  return fresh;
}

// Warns when the final model does no better on its training rows than always
// predicting the larger class (decision > 0 → +1; the counts are tree sums).
void DistributedRun::check_chance_level() {
  const CommunicationStats before = comm_.stats();
  std::vector<std::vector<double>> local;  // per partition: rows, positive rows, correct
  for (size_t q = 0; q < labels_.size(); ++q) {
    double fit = 0, positive = 0, correct = 0;
    for (size_t i = 0; i < labels_[q].size(); ++i) {
      if (labels_[q][i] == 0) continue;  // a row left out of the fit
      const double d = decisions_[q].empty() ? 0.0 : decisions_[q][i];
      fit += 1;
      positive += labels_[q][i] > 0;
      correct += (d > 0) == (labels_[q][i] > 0);
    }
    local.push_back({fit, positive, correct});
  }
  const std::vector<double> total = own_->sum(local, 3);
  record(static_cast<int>(out_.iterations.size()), "diagnostics", before);
  if (at_chance_level(total[0], total[2], std::max(total[1], total[0] - total[1]), out_.train_accuracy,
                      out_.majority_rate))
    warn(comm_, settings_.warnings, "chance_level_model", msg::chance_level_model(out_.train_accuracy, out_.majority_rate));
}

void DistributedRun::emit_point(const std::function<void(const DistributedPoint&)>& hook, double objective) {
  last_point_units_ = selected_units();
  if (!hook) return;
  DistributedPoint p;
  p.point.features = selected_units();
  p.point.model = make_model(objective);
  if (!out_.iterations.empty()) p.point.last = &out_.iterations.back();
  for (const IterationRecord& r : out_.iterations) {
    p.point.apg_iterations += r.apg_iterations;
    p.point.line_search_steps += r.apg_line_search_steps;
    p.point.gradient_evaluations += r.apg_gradient_evaluations;
  }
  p.rows = parts();
  p.reduction = &own_->reduction();
  hook(p);
}

DistributedOutcome DistributedRun::run() {
  begin();
  while (start_iteration())
    if (!after_scoring(scoring_pass(batch_, is_selected_, rec_, top_memory_))) break;
  const bool certified = needs_certificate();
  if (certified) {
    // One more pass for the SIP violation (37) of the final α, as on one store.
    IterationRecord rec;
    rec.iter = t_;
    Reservation top_memory;
    scoring_pass(settings_.B, is_selected_, rec, top_memory);
    out_.final_sip_violation = rec.sip_violation;
  }
  return finish(certified);
}

void DistributedRun::begin() {
  start_ = std::chrono::steady_clock::now();
  CommunicationStats before = labels_start_;
  open_partitions();
  map_labels();
  if (settings_.space.kind != "linear") {
    std::vector<const ShardStore*> stores;
    for (size_t q = 0; q < own_->size(); ++q) stores.push_back((*own_)[q].store.get());
    space_ = make_distributed_space(settings_.space, comm_,
                                    {out_.manifest.partitions, own_->range().first, out_.manifest.n_rows,
                                     out_.manifest.n_features},
                                    stores, budget_);
  }
  record(0, "labels", before);
  batch_begin_ = {0};
  // F_0 and α⁰: the solution of (31) with no feature selected. With a bias
  // that is b alone, fitted first as the single-store trainer does
  // (engine/fgm_trainer.cpp fit_without_features); else F_0 = P(0), reduced
  // like every row sum.
  if (settings_.apg.bias) {
    before = comm_.stats();
    const ApgResult r = solve(false);
    update_duals();
    out_.objective_no_features = r.objective;
    record(0, "solve", before);
  } else {
    std::vector<std::vector<double>> local;
    for (const auto& y : labels_)
      local.push_back({loss_value(settings_.apg.loss, settings_.apg.C, y.data(), std::vector<double>(y.size(), 0.0))});
    out_.objective_no_features = own_->sum(local, 1).front();
  }
  objective_ = out_.objective_no_features;
  if (!settings_.space.groups_path.empty())
    groups_ = std::make_unique<FeatureGroups>(read_feature_groups(
        settings_.space.groups_path, out_.manifest.n_features, out_.manifest.index_base, budget_,
        parse_group_structure(settings_.space.group_structure)));
  t_ = hooks_.resume ? restore(*hooks_.resume, is_selected_, objective_) : 1;
  if (comm_.rank() == 0)
    for (const auto& rec : out_.iterations) warn_iteration(rec, settings_.warnings);  // restored ones, as on one store
}

bool DistributedRun::start_iteration() {
  out_.stop_reason = stop_rule(t_);
  if (!out_.stop_reason.empty()) return false;
  rec_ = IterationRecord{};
  rec_.iter = t_;
  top_memory_ = Reservation{};
  batch_ = next_batch_size(settings_, selected_units(), next_checkpoint_);
  return true;
}

bool DistributedRun::after_scoring(std::vector<ScoredCandidate> fresh) {
  IterationRecord& rec = rec_;
  const int t = t_;
  out_.final_sip_violation = rec.sip_violation;
  out_.stop_reason = scoring_stop_rule(settings_, fresh.empty(), t, rec.sip_violation, objective_);
  if (!out_.stop_reason.empty()) {
    polish_final_solve();
    return false;
  }
  const auto phase_start = std::chrono::steady_clock::now();
  const CommunicationStats before = comm_.stats();
  if (space_) {
    add_generated_batch(fresh);
  } else {
    for (const auto& f : fresh) is_selected_.insert(f.id);
    add_batch(fresh);
  }
  const ApgResult r = solve(solve_is_final());
  update_duals();
  rec.solve_seconds = seconds_since(phase_start);
  record(t, "solve", before);
  rec.selected = selected_.size();
  rec.added = fresh.size();
  rec.rel_decrease = out_.objective_no_features > 0 ? (objective_ - r.objective) / out_.objective_no_features : 0;  // (38)
  objective_ = r.objective;
  rec.objective = r.objective;
  record_apg_result(r, rec);
  rec.peak_rss_bytes = peak_rss_bytes();
  if (comm_.rank() == 0) warn_iteration(rec, settings_.warnings);
  out_.iterations.push_back(rec);
  if (next_checkpoint_ < settings_.checkpoints.size() &&
      selected_units() >= settings_.checkpoints[next_checkpoint_])
    emit_point(hooks_.on_checkpoint, objective_);
  save_progress();
  uint64_t communicated = 0;
  for (const auto& c : out_.communication) communicated += c.iteration == t ? c.comm.bytes : 0;
  if (comm_.rank() == 0)
    spdlog::info("{}iter {:3d}: selected {:6d} (+{}), objective {:.6g}, sip_violation {:.4g}, score {:.3f}s, solve "
                 "{:.3f}s ({} APG its), communicated {} B",
                 label_choice_.one_vs_rest ? fmt::format("class {} ", label_text(positive_)) : "",
                 t, rec.selected, rec.added, rec.objective, rec.sip_violation, rec.score_seconds, rec.solve_seconds,
                 rec.apg_iterations, communicated);
  ++t_;
  return true;
}

DistributedOutcome DistributedRun::finish(bool certified) {
  if (!certified && !scoring_stop_measured_violation(out_.stop_reason))
    out_.final_sip_violation = std::numeric_limits<double>::quiet_NaN();
  // A path that ran out of new features before its next checkpoint still reports the model it reached.
  if (next_checkpoint_ < settings_.checkpoints.size() && !out_.iterations.empty() &&
      selected_units() > last_point_units_)
    emit_point(hooks_.on_checkpoint, objective_);
  emit_point(hooks_.on_final, objective_);
  if (hooks_.on_final_decisions) hooks_.on_final_decisions(decisions_);
  if (settings_.check_chance_level) check_chance_level();
  out_.model = make_model(objective_);
  for (const IterationRecord& r : out_.iterations) {
    out_.total_apg_iterations += r.apg_iterations;
    out_.total_line_search_steps += r.apg_line_search_steps;
    out_.total_gradient_evaluations += r.apg_gradient_evaluations;
  }
  out_.budget_peak = budget_.peak();
  out_.seconds = seconds_since(start_);
  return std::move(out_);
}

// The maximum of sparse per-partition statistics over all partitions: each
// rank's entries (the maximum over its partitions) gathered, merged by key.
// The maximum is exact, so any order gives the same bits.
SparseSums allreduce_partition_max(Communicator& comm, const std::vector<SparseSums>& local) {
  std::map<uint64_t, double> mine;
  for (const auto& part : local)
    for (size_t k = 0; k < part.keys.size(); ++k) {
      auto [it, fresh] = mine.emplace(part.keys[k], part.values[k]);
      if (!fresh) it->second = std::max(it->second, part.values[k]);
    }
  struct Entry {
    uint64_t key;
    double value;
  };
  std::vector<Entry> entries;
  for (const auto& [key, value] : mine) entries.push_back({key, value});
  const std::vector<uint8_t> all = comm.allgather(entries.data(), entries.size() * sizeof(Entry));
  for (size_t k = 0; k < all.size() / sizeof(Entry); ++k) {
    Entry e;
    std::memcpy(&e, all.data() + k * sizeof e, sizeof e);
    auto [it, fresh] = mine.emplace(e.key, e.value);
    if (!fresh) it->second = std::max(it->second, e.value);
  }
  SparseSums out;
  for (const auto& [key, value] : mine) {
    out.keys.push_back(key);
    out.values.push_back(value);
  }
  return out;
}

// features.transform on this rank's partitions, with the statistics of all
// partitions: sums (scale, tfidf) in the sparse partition tree, maxima
// (maxabs) exactly; each partition's stores are then read transformed.
void apply_transforms(OwnPartitions& own, const std::vector<std::string>& names, uint64_t block_bytes,
                      MemoryBudget& budget) {
  Communicator& comm = own.comm();
  PartitionedTransformStatistics statistics;
  statistics.n_rows = own.manifest().n_rows;
  statistics.combine = [&](const std::vector<SparseSums>& local, bool is_max) {
    if (is_max) return allreduce_partition_max(comm, local);
    return allreduce_partition_sparse_sums(comm, own.manifest().partitions, own.range().first, local);
  };
  own.wrap_stores(
      [&](std::vector<std::unique_ptr<ShardStore>> stores) {
        return apply_partitioned_feature_transforms(std::move(stores), names, statistics, budget, block_bytes);
      },
      budget);
  if (comm.rank() == 0) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    spdlog::info("feature transforms [{}]: statistics over all {} partitions", list, own.manifest().partitions);
  }
}

// The multi-class model's predictions on this rank's rows, built as the class
// runs finish: the largest decision value, a tie to the smaller class index
// (as the single-store one-vs-rest check), for the chance-level warning.
class DistributedArgmax {
 public:
  DistributedArgmax(OwnPartitions& own, MemoryBudget& budget)
      : memory_(budget.reserve(own.own_rows() * (sizeof(double) + sizeof(uint16_t)),
                               "one-vs-rest training predictions", "use more ranks (more, smaller partitions)")) {
    for (size_t q = 0; q < own.size(); ++q) {
      best_.emplace_back(own.rows(q), -std::numeric_limits<double>::infinity());
      best_class_.emplace_back(own.rows(q), uint16_t{0});
    }
  }

  void add(size_t c, const std::vector<std::vector<double>>& decisions) {
    for (size_t q = 0; q < best_.size(); ++q)
      for (size_t i = 0; i < best_[q].size(); ++i) {
        const double d = decisions[q].empty() ? 0.0 : decisions[q][i];
        if (d > best_[q][i]) {  // classes arrive in increasing order: a tie keeps the smaller
          best_[q][i] = d;
          best_class_[q][i] = static_cast<uint16_t>(c);
        }
      }
  }

  // Rows per class over all partitions (tree sums of counts), the training
  // accuracy and the largest class's share; warns when the accuracy is no
  // better than that share.
  void check(Communicator& comm, OwnPartitions& own, const std::vector<double>& labels, RunWarnings* warnings,
             DistributedOutcome& out) const {
    const size_t K = labels.size();
    std::vector<std::vector<double>> local;  // per partition: correct, then rows of each class
    for (size_t q = 0; q < own.size(); ++q) {
      const ShardStore& store = *own[q].store;
      const uint16_t* classes = store.classes();
      std::vector<double> counts(K + 1, 0.0);
      for (uint64_t i = 0; i < store.info().n_rows; ++i) {
        const double value = store.info().class_values[classes[i]];
        const size_t c = static_cast<size_t>(std::lower_bound(labels.begin(), labels.end(), value) - labels.begin());
        counts[1 + c] += 1;
        counts[0] += best_class_[q][i] == c;
      }
      local.push_back(std::move(counts));
    }
    const std::vector<double> total = own.sum(local, K + 1);
    double rows = 0, largest = 0;
    for (size_t c = 0; c < K; ++c) {
      out.class_rows.push_back(static_cast<uint64_t>(total[1 + c]));
      rows += total[1 + c];
      largest = std::max(largest, total[1 + c]);
    }
    if (at_chance_level(rows, total[0], largest, out.train_accuracy, out.majority_rate))
      warn(comm, warnings, "chance_level_model", msg::chance_level_model(out.train_accuracy, out.majority_rate));
  }

 private:
  Reservation memory_;
  std::vector<std::vector<double>> best_;
  std::vector<std::vector<uint16_t>> best_class_;
};

// The class runs of one-vs-rest in lockstep (linear features and groups):
// every pass streams this rank's partitions once and scores the dual vectors
// of all classes still iterating or due their final certificate
// (OwnPartitions::score_by_ranges_many), each class getting the bits its own
// pass would give; then each served class solves its subproblem, in class
// order, exactly as it would alone. So a run makes max_c(passes of c) passes,
// not their sum, and every class's model is that of its own run.
class LockstepClassRuns {
 public:
  LockstepClassRuns(Communicator& comm, OwnPartitions& own, DistributedOutcome& out)
      : comm_(comm), own_(own), out_(out) {}

  void add(std::unique_ptr<DistributedRun> run) {
    run->begin();
    runs_.push_back(std::move(run));
    phase_.push_back(Phase::kIterating);
    certified_.push_back(false);
    if (!runs_.back()->start_iteration()) leave_loop(runs_.size() - 1);
  }

  // Shared passes until every run is done; then each run's outcome.
  std::vector<DistributedOutcome> run() {
    while (shared_pass()) {
    }
    std::vector<DistributedOutcome> outcomes;
    for (size_t r = 0; r < runs_.size(); ++r) outcomes.push_back(runs_[r]->finish(certified_[r]));
    return outcomes;
  }

 private:
  enum class Phase { kIterating, kCertificate, kDone };

  void leave_loop(size_t r) {
    phase_[r] = runs_[r]->needs_certificate() ? Phase::kCertificate : Phase::kDone;
    certified_[r] = phase_[r] == Phase::kCertificate;
  }

  bool shared_pass() {
    std::vector<size_t> served;
    std::vector<OwnPartitions::RangeRequest> requests;
    for (size_t r = 0; r < runs_.size(); ++r) {
      if (phase_[r] == Phase::kDone) continue;
      served.push_back(r);
      requests.push_back(runs_[r]->range_request(phase_[r] == Phase::kCertificate));
    }
    if (served.empty()) return false;
    // The first class measures the value span on its first pass (one warning per store).
    DistributedRun& first = *runs_.front();
    const bool span = phase_.front() != Phase::kDone && first.measures_value_span();
    if (span) first.observe_values();
    const auto start = std::chrono::steady_clock::now();
    const CommunicationStats before = comm_.stats();
    uint64_t bytes = 0;
    std::vector<OwnPartitions::RangeScores> scores =
        own_.score_by_ranges_many(runs_[served.front()]->groups(), requests, bytes);
    const double seconds = seconds_since(start);
    CommunicationRecord record{runs_[served.front()]->iteration(), "scoring", since(comm_.stats(), before), -1};
    for (size_t r : served) record.shared_by.push_back(static_cast<int>(r));
    out_.communication.push_back(std::move(record));
    out_.total_bytes_streamed += bytes;
    if (span) first.check_value_span(first.iteration());
    for (size_t q = 0; q < served.size(); ++q) {
      const size_t r = served[q];
      const bool certificate = phase_[r] == Phase::kCertificate;
      std::vector<ScoredCandidate> fresh = runs_[r]->take_shared_scores(std::move(scores[q]), seconds, bytes, certificate);
      if (certificate) {
        phase_[r] = Phase::kDone;
        continue;
      }
      if (!runs_[r]->after_scoring(std::move(fresh)) || !runs_[r]->start_iteration()) leave_loop(r);
    }
    return true;
  }

  Communicator& comm_;
  OwnPartitions& own_;
  DistributedOutcome& out_;
  std::vector<std::unique_ptr<DistributedRun>> runs_;
  std::vector<Phase> phase_;
  std::vector<bool> certified_;  // the run had its final certificate pass
};

// Lockstep holds the K class runs' row state at once (duals, labels and
// decision values: 3·8 + 1 bytes per own row each), the duals interleaved for
// one partition, K dots per non-empty column in the scoring tree (up to three
// vectors of 16 bytes per key alive, a node holding at most min(m, the own
// partitions' columns) columns) and, in the first pass, the value span's
// per-column maxima; one class after another holds one run's. Every rank
// checks what it has left and all agree (one allgather): if any rank is
// short, the classes go one after another (the same models), with a warning.
// Returns "" when lockstep fits, else the shortfall of the first rank short.
std::string lockstep_shortfall(Communicator& comm, OwnPartitions& own, size_t K, const MemoryBudget& budget) {
  uint64_t rows = 0, columns = 0;
  for (size_t q = 0; q < own.size(); ++q) {
    rows = std::max(rows, own.rows(q));
    columns += own[q].store->info().nonempty_columns;
  }
  const uint64_t node_columns = std::min<uint64_t>(columns, own.manifest().n_features);
  const uint64_t need = K * own.own_rows() * (3 * sizeof(double) + 1) + K * rows * sizeof(double) +
                        3 * 16 * K * node_columns + kColumnMaxEntryBytes * columns;
  const uint64_t mine[2] = {need, budget.available()};
  const std::vector<uint8_t> all = comm.allgather(mine, sizeof mine);
  for (size_t r = 0; r < all.size() / sizeof mine; ++r) {
    uint64_t theirs[2];
    std::memcpy(theirs, all.data() + r * sizeof mine, sizeof mine);
    if (theirs[0] > theirs[1])
      return fmt::format("rank {} would need about {} for the shared passes and has {} left", r,
                         format_bytes(theirs[0]), format_bytes(theirs[1]));
  }
  return "";
}

// One-vs-rest over the partitions: for each label value c (increasing), the
// binary distributed run of c against the rest on the same open partitions,
// in lockstep where the space allows (linear features and groups) or one
// after another, combined as the single-store one-vs-rest trainer combines
// its class runs (engine/one_vs_rest.h). No resume checkpoints, as on one store.
DistributedOutcome train_one_vs_rest_distributed(Communicator& comm, OwnPartitions& own, const std::vector<double>& values,
                                     const TrainSettings& settings, MemoryBudget& budget,
                                     CommunicationStats labels_start, OneVsRestSchedule schedule) {
  const auto start = std::chrono::steady_clock::now();
  const size_t K = values.size();
  bool lockstep = schedule == OneVsRestSchedule::kLockstepWherePossible && settings.space.kind == "linear" &&
                  own.fits_many(K);
  if (lockstep) {
    const std::string shortfall = lockstep_shortfall(comm, own, K, budget);  // in class 1's label phase
    if (!shortfall.empty()) {
      lockstep = false;
      warn(comm, settings.warnings, "ovr_lockstep_fell_back", msg::ovr_lockstep_fell_back(K, shortfall));
    }
  }
  if (comm.rank() == 0)
    spdlog::info("{} classes: one-vs-rest ({} binary runs, fgm.multiclass=ovr, {})", K, K,
                 lockstep ? "in lockstep: each scoring pass shared by the classes" : "one class after another");
  TrainSettings class_settings = settings;
  class_settings.check_chance_level = false;  // a class against the rest is no multi-class model
  DistributedArgmax argmax(own, budget);
  DistributedOutcome out;
  out.class_labels = values;
  out.lockstep = lockstep;
  std::vector<DistributedHooks> hooks(K);
  for (size_t c = 0; c < K; ++c)
    hooks[c].on_final_decisions = [&argmax, c](const std::vector<std::vector<double>>& d) { argmax.add(c, d); };
  std::vector<DistributedOutcome> outcomes;
  if (lockstep) {
    LockstepClassRuns runs(comm, own, out);
    for (size_t c = 0; c < K; ++c)
      runs.add(std::make_unique<DistributedRun>(comm, own, class_settings, budget, hooks[c], LabelChoice{values, c, true},
                                                c == 0 ? labels_start : comm.stats(), c == 0));
    outcomes = runs.run();
  } else {
    for (size_t c = 0; c < K; ++c) {
      DistributedRun run(comm, own, class_settings, budget, hooks[c], {values, c, true}, labels_start, c == 0);
      outcomes.push_back(run.run());
      labels_start = comm.stats();
    }
  }
  std::vector<Model> models;
  for (size_t c = 0; c < K; ++c) {
    DistributedOutcome& o = outcomes[c];
    for (CommunicationRecord record : o.communication) {
      record.class_index = static_cast<int>(c);
      out.communication.push_back(std::move(record));
    }
    out.total_bytes_streamed += o.total_bytes_streamed;
    if (c == 0) out.value_span = o.value_span;
    models.push_back(o.model);
    out.classes.push_back(std::move(o));
  }
  out.model = combine_class_models(models, values);
  record_class_transforms(*own[0].store, out.model);
  const CommunicationStats before = comm.stats();
  argmax.check(comm, own, values, settings.warnings, out);
  out.communication.push_back({0, "diagnostics", since(comm.stats(), before)});  // of no class
  const DistributedOutcome& first = out.classes.front();
  out.manifest = first.manifest;
  out.ranks = first.ranks;
  out.first_partition = first.first_partition;
  out.own_partitions = first.own_partitions;
  out.objective_no_features = 0;
  for (const auto& o : out.classes) out.objective_no_features += o.objective_no_features;
  out.budget_peak = budget.peak();
  out.seconds = seconds_since(start);
  return out;
}

}  // namespace

DistributedOutcome train_fgm_distributed(Communicator& comm, const std::string& store_dir,
                                         const TrainSettings& settings, MemoryBudget& budget,
                                         const DistributedHooks& hooks, const std::vector<std::string>& transforms,
                                         OneVsRestSchedule schedule) {
  const CommunicationStats labels_start = comm.stats();
  OwnPartitions own(comm, store_dir, settings.scheduler, settings.block_bytes, budget);
  if (!transforms.empty()) apply_transforms(own, transforms, settings.block_bytes, budget);
  const std::vector<double> values = own.class_values();
  if (values.size() < 2)
    throw Error(ErrorKind::kConfig, fmt::format("{} has {} distinct label value(s): training needs at least two",
                                                store_dir, values.size()));
  if (values.size() > 2) {
    FGM_ASSERT(hooks.resume == nullptr);
    return train_one_vs_rest_distributed(comm, own, values, settings, budget, labels_start, schedule);
  }
  DistributedRun run(comm, own, settings, budget, hooks, {values, 1, false}, labels_start, true);
  return run.run();
}

}  // namespace fgm
