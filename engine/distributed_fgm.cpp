#include "engine/distributed_fgm.h"

#include <chrono>
#include <cstring>
#include <algorithm>
#include <memory>
#include <unordered_set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/partition_sum.h"
#include "engine/distributed_spaces.h"
#include "engine/own_partitions.h"
#include "engine/fgm_trainer.h"
#include "features/block_scores.h"
#include "features/block_stream.h"
#include "features/feature_groups.h"
#include "solvers/apg.h"
#include "solvers/apg_reduction.h"

namespace fgm {

namespace {

CommunicationStats since(const CommunicationStats& now, const CommunicationStats& before) {
  return {now.bytes - before.bytes, now.calls - before.calls, now.seconds - before.seconds};
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

class DistributedRun {
 public:
  DistributedRun(Communicator& comm, const std::string& dir, const TrainSettings& settings, MemoryBudget& budget,
                 const DistributedHooks& hooks)
      : comm_(comm), dir_(dir), settings_(settings), budget_(budget), hooks_(hooks) {}

  DistributedOutcome run();

 private:
  void open_partitions();
  void map_labels();
  OwnPartitions::RangeScores scores(const std::unordered_set<uint64_t>& is_selected);
  void add_batch(const std::vector<ScoredCandidate>& top);
  void add_generated_batch(const std::vector<ScoredCandidate>& top);
  double best_batch_score(const std::vector<double>& c) const;
  std::vector<double> selected_column_dots();
  void update_duals();
  std::vector<ApgRowPart> parts();
  ApgResult solve();
  int restore(TrainProgress& saved, std::unordered_set<uint64_t>& is_selected, double& objective);
  void save_progress() const;
  Model make_model(double objective) const;
  void record(int iteration, const char* phase, const CommunicationStats& before) {
    out_.communication.push_back({iteration, phase, since(comm_.stats(), before)});
  }

  Communicator& comm_;
  std::string dir_;
  const TrainSettings& settings_;
  MemoryBudget& budget_;
  const DistributedHooks& hooks_;
  DistributedOutcome out_;
  std::unique_ptr<OwnPartitions> own_;
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
};

void DistributedRun::open_partitions() {
  own_ = std::make_unique<OwnPartitions>(comm_, dir_, settings_.scheduler, settings_.block_bytes, budget_);
  out_.manifest = own_->manifest();
  out_.ranks = comm_.size();
  out_.first_partition = own_->range().first;
  out_.own_partitions = own_->range().count;
}

// Labels as ±1 by the classes of ALL partitions (a partition may lack one class).
void DistributedRun::map_labels() {
  const std::vector<double> values = own_->class_values();
  if (values.size() != 2)
    throw Error(ErrorKind::kConfig, fmt::format("{} has {} distinct labels: training on a partitioned store is "
                                                "binary only in this version",
                                                dir_, values.size()));
  negative_ = values[0];
  positive_ = values[1];
  row_memory_ = budget_.reserve(own_->own_rows() * (3 * sizeof(double) + 1), "dual vectors of this rank's partitions",
                                "use more ranks (more, smaller partitions)");
  for (size_t q = 0; q < own_->size(); ++q) {
    const ShardStore& store = *(*own_)[q].store;
    const StoreInfo& info = store.info();
    std::vector<int8_t> y(info.n_rows);
    const uint16_t* classes = store.classes();
    for (uint64_t i = 0; i < info.n_rows; ++i) y[i] = info.class_values[classes[i]] == positive_ ? 1 : -1;
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
OwnPartitions::RangeScores DistributedRun::scores(const std::unordered_set<uint64_t>& is_selected) {
  uint64_t bytes = 0;
  OwnPartitions::RangeScores scored = own_->score_by_ranges(
      a_, groups_.get(), [&](uint64_t id) { return is_selected.count(id) > 0; }, selected_, column_group_,
      settings_.B, bytes);
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
      const SparseColumnView col = columns_[q]->column(h);
      for (uint64_t e = 0; e < col.nnz; ++e) dots[h] += a_[q][col.rows[e]] * double(col.values[e]);
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

ApgResult DistributedRun::solve() { return solve_apg(parts(), own_->reduction(), settings_.apg, state_, budget_); }

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
  hooks_.on_progress(progress);
}

Model DistributedRun::make_model(double objective) const {
  Model model;
  model.engine_version = FGM_VERSION;
  model.solver = "fgm";
  model.loss = loss_name(settings_.apg.loss);
  model.C = settings_.apg.C;
  model.B = settings_.B;
  model.iterations = static_cast<uint32_t>(out_.iterations.size());
  model.n_features = out_.manifest.n_features;
  model.index_base = out_.manifest.index_base;
  model.positive_label = positive_;
  model.negative_label = negative_;
  model.input_checksum = out_.manifest.input_checksum;
  model.input_path = out_.manifest.input_path;
  model.feature_kind = groups_ ? "group" : "linear";
  if (space_) space_->describe(model);
  model.objective = objective;
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
  return model;
}

DistributedOutcome DistributedRun::run() {
  const auto start = std::chrono::steady_clock::now();
  CommunicationStats before = comm_.stats();
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
    const ApgResult r = solve();
    update_duals();
    out_.objective_no_features = r.objective;
    record(0, "solve", before);
  } else {
    std::vector<std::vector<double>> local;
    for (const auto& y : labels_)
      local.push_back({loss_value(settings_.apg.loss, settings_.apg.C, y.data(), std::vector<double>(y.size(), 0.0))});
    out_.objective_no_features = own_->sum(local, 1).front();
  }
  double objective = out_.objective_no_features;
  if (!settings_.space.groups_path.empty())
    groups_ = std::make_unique<FeatureGroups>(read_feature_groups(
        settings_.space.groups_path, out_.manifest.n_features, out_.manifest.index_base, budget_,
        parse_group_structure(settings_.space.group_structure)));
  std::unordered_set<uint64_t> is_selected;  // selected features or groups
  const int first = hooks_.resume ? restore(*hooks_.resume, is_selected, objective) : 1;
  for (int t = first;; ++t) {
    IterationRecord rec;
    rec.iter = t;
    auto phase_start = std::chrono::steady_clock::now();
    before = comm_.stats();
    bytes_streamed_ = 0;
    Reservation top_memory;
    std::vector<ScoredCandidate> fresh;
    double best = 0, fresh_sum = 0;  // (37): ½Σ_{j∈new} s_j − max_h ½Σ_{j∈d_h} c_j², with the current α
    if (space_) {
      std::vector<PartitionScoringInput> inputs;
      for (size_t q = 0; q < own_->size(); ++q) inputs.push_back({(*own_)[q].stream.get(), &(*own_)[q].blocks, a_[q].data()});
      DistributedScores scored = space_->score(inputs, settings_.B);
      fresh = std::move(scored.top);
      top_memory = std::move(scored.top_memory);
      best = best_batch_score(selected_column_dots());
      rec.candidates_scored = scored.candidates_scored;
      rec.pair_updates = scored.pair_updates;
      bytes_streamed_ += scored.bytes_streamed;
      out_.total_bytes_streamed += scored.bytes_streamed;
    } else {
      OwnPartitions::RangeScores scored = scores(is_selected);
      fresh = std::move(scored.top);
      top_memory = std::move(scored.top_memory);
      best = best_batch_score(scored.selected_dots);
      rec.candidates_scored = groups_ ? groups_->n_groups : out_.manifest.n_features;
    }
    for (const auto& f : fresh) fresh_sum += f.score;
    rec.sip_violation = 0.5 * fresh_sum - best;
    rec.score_seconds = seconds_since(phase_start);
    rec.bytes_streamed = bytes_streamed_;
    record(t, "scoring", before);
    out_.final_sip_violation = rec.sip_violation;
    if (fresh.empty()) {
      out_.stop_reason = "no_new_features";
      break;
    }
    if (t > 1 && settings_.eps_outer > 0 && rec.sip_violation <= settings_.eps_outer * objective) {
      out_.stop_reason = "eps_outer";
      break;
    }
    if (t > settings_.max_iterations) {
      out_.stop_reason = "max_iterations";
      break;
    }
    phase_start = std::chrono::steady_clock::now();
    before = comm_.stats();
    if (space_) {
      add_generated_batch(fresh);
    } else {
      for (const auto& f : fresh) is_selected.insert(f.id);
      add_batch(fresh);
    }
    const ApgResult r = solve();
    update_duals();
    rec.solve_seconds = seconds_since(phase_start);
    record(t, "solve", before);
    rec.selected = selected_.size();
    rec.added = fresh.size();
    rec.rel_decrease = out_.objective_no_features > 0 ? (objective - r.objective) / out_.objective_no_features : 0;  // (38)
    objective = r.objective;
    rec.objective = r.objective;
    rec.apg_iterations = r.iterations;
    rec.apg_line_search_steps = r.line_search_steps;
    rec.apg_gradient_evaluations = r.gradient_evaluations;
    rec.apg_recomputed_products = r.recomputed_products;
    rec.apg_converged = r.converged;
    rec.apg_relative_gap = r.relative_gap;
    rec.apg_stop = r.converged ? "converged" : r.stalled ? "stalled" : "max_iterations";
    rec.peak_rss_bytes = peak_rss_bytes();
    out_.iterations.push_back(rec);
    save_progress();
    if (comm_.rank() == 0)
      spdlog::info("iter {:3d}: selected {:6d} (+{}), objective {:.6g}, sip_violation {:.4g}, score {:.3f}s, solve "
                 "{:.3f}s ({} APG its), communicated {} B",
                 t, rec.selected, rec.added, rec.objective, rec.sip_violation, rec.score_seconds, rec.solve_seconds,
                 rec.apg_iterations, out_.communication.back().comm.bytes + out_.communication.end()[-2].comm.bytes);
  }
  out_.model = make_model(objective);
  out_.budget_peak = budget_.peak();
  out_.seconds = seconds_since(start);
  return std::move(out_);
}

}  // namespace

DistributedOutcome train_fgm_distributed(Communicator& comm, const std::string& store_dir,
                                         const TrainSettings& settings, MemoryBudget& budget,
                                         const DistributedHooks& hooks) {
  DistributedRun run(comm, store_dir, settings, budget, hooks);
  return run.run();
}

}  // namespace fgm
