#include "engine/distributed_fgm.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/clock.h"
#include "core/error.h"
#include "engine/distributed_spaces.h"
#include "engine/fgm_loop.h"
#include "engine/model_provenance.h"
#include "engine/value_span.h"
#include "features/transformed_store.h"
#include "io/libsvm_reader.h"

namespace fgm {

namespace {

constexpr uint64_t kColumnMaxEntryBytes = 32;  // an unordered_map<uint64_t, float> node and its bucket

// Where a run's labels come from: the label values of all partitions
// (increasing) and the one taken as +1 (the larger of two; a class against the
// rest for one-vs-rest).
struct LabelChoice {
  std::vector<double> values;
  size_t positive = 1;
  bool one_vs_rest = false;
};

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

// This rank's partitions as the FGM loop's rows (engine/fgm_loop.h): per own
// partition its labels, its rows of the selected columns, its decision
// values and a = α∘y; every sum over rows goes through the partition tree.
class PartitionRows final : public FgmRows {
 public:
  // `labels_start`: the communication counters when this run's label phase
  // began (the label values were gathered before the run). `value_span`: this
  // run measures the value span on its first pass (one warning per store).
  PartitionRows(Communicator& comm, OwnPartitions& own, const TrainSettings& settings, MemoryBudget& budget,
                const DistributedHooks& hooks, LabelChoice labels, const CommunicationStats& labels_start,
                bool value_span);

  double fit_without_features(ApgState& state) override;
  FgmPass score(uint64_t batch, int iteration) override;
  void add_batch(const std::vector<uint64_t>& ids) override;
  ApgResult solve(const ApgOptions& apg, ApgState& state) override;
  const SelectedFeatureCache& columns() const override { return *columns_.front(); }
  uint64_t saved_duals() const override { return 0; }
  void restore_duals(TrainProgress& saved) override;
  Model model_frame() const override;
  void record_transforms(Model& model) const override;
  void describe_point(Checkpoint& cp) override {
    cp.rows = parts();
    cp.reduction = &own_.reduction();
  }
  void hand_out_decisions() override;
  bool chance_counts(double counts[3], int iteration) override;
  double value_span() const override { return value_span_; }
  bool reports_warnings() const override { return comm_.rank() == 0; }
  void begin_phase() override { phase_start_ = comm_.stats(); }
  void end_phase(int iteration, const char* phase) override { record(iteration, phase, phase_start_); }
  void after_iteration(const IterationRecord& rec) override;

  // A lockstep pass (linear features and groups): this run's request (its
  // space, duals and batch size), then its share of the scores as a pass.
  ScoreRequest scoring_request(uint64_t batch);
  FgmPass take_scores(SpaceScores scored);
  bool measures_value_span() const { return value_span_pending_; }
  void observe_values();
  void check_value_span(int iteration);
  std::vector<CommunicationRecord>& communication() { return communication_; }

 private:
  std::vector<ApgRowPart> parts();  // this rank's rows of the selected columns
  void map_labels();
  std::vector<double> selected_column_dots();
  void update_duals();
  void record(int iteration, const char* phase, const CommunicationStats& before) {
    communication_.push_back({iteration, phase, comm_.stats() - before});
  }

  Communicator& comm_;
  OwnPartitions& own_;
  const TrainSettings& settings_;
  MemoryBudget& budget_;
  const DistributedHooks& hooks_;
  LabelChoice label_choice_;
  std::vector<CommunicationRecord> communication_;
  CommunicationStats phase_start_;
  // The value span of the first pass: this rank's per-column max |value| (all
  // own partitions), filled by the streams' observers.
  bool value_span_pending_ = false;
  double value_span_ = 0;
  std::mutex column_max_mutex_;
  std::unordered_map<uint64_t, float> column_max_;  // the non-empty columns only (hashed id spaces)
  Reservation column_max_memory_;
  // Per own partition: its labels (±1), its rows of the selected columns
  // and its decision values at the last solve.
  std::vector<std::vector<int8_t>> labels_;
  std::vector<std::unique_ptr<SelectedFeatureCache>> columns_;
  std::vector<std::vector<double>> decisions_;
  Reservation row_memory_;
  std::vector<std::vector<double>> a_;  // α∘y per own partition
  std::unique_ptr<FeatureSpace> space_;
  double positive_ = 1, negative_ = -1;
};

PartitionRows::PartitionRows(Communicator& comm, OwnPartitions& own, const TrainSettings& settings,
                             MemoryBudget& budget, const DistributedHooks& hooks, LabelChoice labels,
                             const CommunicationStats& labels_start, bool value_span)
    : comm_(comm), own_(own), settings_(settings), budget_(budget), hooks_(hooks),
      label_choice_(std::move(labels)), value_span_pending_(value_span) {
  map_labels();
  space_ = make_distributed_space(settings_.space, own_, budget_);
  record(0, "labels", labels_start);
}

// Labels as ±1 by the classes of ALL partitions (a partition may lack one
// class): +1 for the chosen positive value, −1 for every other.
void PartitionRows::map_labels() {
  const std::vector<double>& values = label_choice_.values;
  positive_ = values[label_choice_.positive];
  negative_ = values[label_choice_.positive == 0 ? 1 : 0];
  row_memory_ = budget_.reserve(own_.own_rows() * (3 * sizeof(double) + 1), "dual vectors of this rank's partitions",
                                "use more ranks (more, smaller partitions)");
  for (size_t q = 0; q < own_.size(); ++q) {
    std::vector<int8_t> y = own_.binary_labels(q, positive_);
    if (hooks_.left_out)
      for (uint64_t i = 0; i < y.size(); ++i) y[i] = (*hooks_.left_out)[q][i] ? int8_t{0} : y[i];
    // α⁰ = C·1 without a bias (a = C·y); with one, fit_without_features fits b first.
    std::vector<double> a(y.size());
    for (uint64_t i = 0; i < y.size(); ++i) a[i] = settings_.apg.C * double(y[i]);
    columns_.push_back(std::make_unique<SelectedFeatureCache>(budget_, y.size()));
    labels_.push_back(std::move(y));
    a_.push_back(std::move(a));
    decisions_.emplace_back();
  }
}

// As on one store: with a bias, b alone is fitted first; else F_0 = P(0),
// reduced like every row sum.
double PartitionRows::fit_without_features(ApgState& state) {
  if (settings_.apg.bias) {
    begin_phase();
    ApgOptions apg = settings_.apg;
    apg.certify = false;
    const ApgResult r = solve(apg, state);
    end_phase(0, "solve");
    return r.objective;
  }
  std::vector<std::vector<double>> local;
  for (const auto& y : labels_)
    local.push_back({loss_value(settings_.apg.loss, settings_.apg.C, y.data(), std::vector<double>(y.size(), 0.0))});
  return own_.sum(local, 1).front();
}

// The new candidates' columns on this rank's partitions. A generated column
// empty on every partition (an expansion component no row reaches) carries no
// weight and is dropped, as the single-store cache drops it: one reduction of
// the per-partition entry counts decides, the same on every rank. The columns
// stay reserved until the cache has copied them.
void PartitionRows::add_batch(const std::vector<uint64_t>& ids) {
  std::vector<std::vector<GeneratedColumn>> fresh(own_.size());  // [partition][column]
  std::vector<std::vector<double>> counts(own_.size());
  std::vector<Reservation> held;
  for (uint64_t id : ids) {
    space_->mark_selected(id);
    for (size_t q = 0; q < own_.size(); ++q)
      for (GeneratedColumn& col : space_->columns(*own_[q].store, id)) {
        held.push_back(budget_.reserve(col.rows.capacity() * sizeof(uint32_t) + col.values.capacity() * sizeof(float),
                                       "a new batch's columns before the selected-feature cache copies them",
                                       "lower fgm.B"));
        counts[q].push_back(static_cast<double>(col.rows.size()));
        fresh[q].push_back(std::move(col));
      }
  }
  const size_t n_fresh = fresh.front().size();
  const std::vector<double> total =
      space_->keeps_empty_columns() ? std::vector<double>(n_fresh, 1.0) : own_.sum(counts, n_fresh);
  for (size_t q = 0; q < own_.size(); ++q) {
    columns_[q]->begin_batch();
    for (size_t k = 0; k < n_fresh; ++k)
      if (total[k] > 0) columns_[q]->add_column(fresh[q][k].key, fresh[q][k].rows, fresh[q][k].values);
  }
}

// c_h = Σ_i a_i x_ih of every selected column, tree-reduced (the generated
// spaces' scores of the selected features, for (37)).
std::vector<double> PartitionRows::selected_column_dots() {
  const size_t selected = columns().num_columns();
  std::vector<std::vector<double>> local;
  for (size_t q = 0; q < columns_.size(); ++q) {
    std::vector<double> dots(selected, 0.0);
    for (size_t h = 0; h < selected; ++h)
      columns_[q]->column(h).for_each([&](uint32_t row, float value) { dots[h] += a_[q][row] * double(value); });
    local.push_back(std::move(dots));
  }
  return own_.sum(local, selected);
}

// α from the decision values on this rank's rows (Theorem 3), a = α∘y.
void PartitionRows::update_duals() {
  std::vector<double> alpha;
  for (size_t q = 0; q < labels_.size(); ++q) {
    dual_from_decision(settings_.apg.loss, settings_.apg.C, labels_[q].data(), decisions_[q], alpha);
    for (uint64_t i = 0; i < labels_[q].size(); ++i) a_[q][i] = alpha[i] * double(labels_[q][i]);
  }
}

std::vector<ApgRowPart> PartitionRows::parts() {
  std::vector<ApgRowPart> out;
  for (size_t q = 0; q < columns_.size(); ++q) out.push_back({columns_[q].get(), labels_[q].data(), &decisions_[q]});
  return out;
}

// The subproblem (31) over the selected columns: the single-store APG over
// this rank's partitions, every row sum reduced in the partition tree.
ApgResult PartitionRows::solve(const ApgOptions& apg, ApgState& state) {
  const ApgResult r = solve_apg(parts(), own_.reduction(), apg, state, budget_);
  update_duals();
  return r;
}

// α formed from the checkpoint's ω exactly as the solve formed it.
void PartitionRows::restore_duals(TrainProgress& saved) {
  if (columns().num_columns() == 0) return;
  apg_decision_values(parts(), settings_.apg, saved.apg, budget_);
  update_duals();
}

Model PartitionRows::model_frame() const {
  Model model = model_of_partitioned_store(own_.manifest(), negative_, positive_, "fgm");
  space_->describe(model);
  return model;
}

void PartitionRows::record_transforms(Model& model) const { record_feature_transforms(*own_[0].store, model); }

void PartitionRows::hand_out_decisions() {
  if (hooks_.on_final_decision)
    for (size_t q = 0; q < decisions_.size(); ++q) hooks_.on_final_decision(q, decisions_[q]);
}

// The streams of this rank's partitions record each column's max |value| of
// the pass that follows (the value-span warning).
void PartitionRows::observe_values() {
  // A hash map entry costs about 32 bytes; every non-empty column of this rank's partitions may get one.
  uint64_t columns = 0;
  for (size_t q = 0; q < own_.size(); ++q) columns += own_[q].store->info().nonempty_columns;
  column_max_memory_ = budget_.reserve(columns * kColumnMaxEntryBytes, "per-column max |value| of a pass",
                                       "use fewer features or more memory per rank");
  column_max_.clear();
  column_max_.reserve(columns);
  for (size_t q = 0; q < own_.size(); ++q)
    own_[q].stream->set_observer([this](const ColumnBlock& block) {
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
void PartitionRows::check_value_span(int iteration) {
  for (size_t q = 0; q < own_.size(); ++q) own_[q].stream->set_observer({});
  value_span_pending_ = false;
  const CommunicationStats before = comm_.stats();
  SparseSums mine;
  for (const auto& [id, max] : column_max_)
    if (max > 0) {
      mine.keys.push_back(id);
      mine.values.push_back(max);
    }
  column_max_ = {};
  Reservation exchange = budget_.reserve(mine.keys.size() * 16 * (1 + static_cast<uint64_t>(comm_.size())),
                                         "value-span exchange of a pass", "use fewer features or more memory per rank");
  const SparseSums all = allreduce_partition_max(comm_, {mine});
  ValueSpan span;
  for (double max : all.values) span.add_column_max(static_cast<float>(max));
  if (comm_.rank() == 0)
    value_span_ = span.check(feature_space_kind(settings_.space.kind).value_degree, space_->kind(), settings_.warnings);
  column_max_memory_ = {};
  record(iteration, "diagnostics", before);
}

// One scoring pass against the current α: the top-`batch` unselected candidates.
FgmPass PartitionRows::score(uint64_t batch, int iteration) {
  const auto start = std::chrono::steady_clock::now();
  const CommunicationStats before = comm_.stats();
  const bool measure_span = value_span_pending_;
  if (measure_span) observe_values();
  ScoringContext context;
  context.parts = own_.scoring_inputs(a_);
  context.B = batch;
  context.threads = settings_.scheduler.threads;
  context.budget = &budget_;
  FgmPass pass = take_scores(space_->score(context));
  pass.seconds = seconds_since(start);
  record(iteration, "scoring", before);
  if (measure_span) check_value_span(iteration);
  return pass;
}

ScoreRequest PartitionRows::scoring_request(uint64_t batch) {
  ScoreRequest request;
  request.space = space_.get();
  request.parts = own_.scoring_inputs(a_);
  request.B = batch;
  return request;
}

// A pass's top-B and the SIP violation (37) of α.
FgmPass PartitionRows::take_scores(SpaceScores scored) {
  const std::vector<double> selected_c = scored.selected_dots ? *scored.selected_dots : selected_column_dots();
  return scored_pass(std::move(scored), columns(), selected_c);
}

// The final model's counts on this rank's rows, tree-summed (decision > 0 → +1).
bool PartitionRows::chance_counts(double counts[3], int iteration) {
  const CommunicationStats before = comm_.stats();
  std::vector<std::vector<double>> local(labels_.size(), std::vector<double>(3, 0.0));  // rows, positive, correct
  for (size_t q = 0; q < labels_.size(); ++q)
    count_fit(labels_[q].data(), labels_[q].size(), decisions_[q], local[q].data());
  const std::vector<double> total = own_.sum(local, 3);
  record(iteration, "diagnostics", before);
  std::copy(total.begin(), total.end(), counts);
  return true;
}

void PartitionRows::after_iteration(const IterationRecord& rec) {
  if (comm_.rank() != 0) return;
  uint64_t communicated = 0;
  for (const auto& c : communication_) communicated += c.iteration == rec.iter ? c.comm.bytes : 0;
  spdlog::info("{}iter {:3d}: selected {:6d} (+{}), objective {:.6g}, sip_violation {:.4g}, score {:.3f}s, solve "
               "{:.3f}s ({} APG its), communicated {} B",
               label_choice_.one_vs_rest ? fmt::format("class {} ", label_text(positive_)) : "", rec.iter,
               rec.selected, rec.added, rec.objective, rec.sip_violation, rec.score_seconds, rec.solve_seconds,
               rec.apg_iterations, communicated);
}

// One binary FGM run on this rank's partitions.
struct PartitionedFgmRun {
  PartitionedFgmRun(Communicator& comm, OwnPartitions& own, const TrainSettings& settings, MemoryBudget& budget,
                    const DistributedHooks& hooks, LabelChoice labels, const CommunicationStats& labels_start,
                    bool value_span)
      : own(own),
        rows(comm, own, settings, budget, hooks, std::move(labels), labels_start, value_span),
        loop(rows, settings, budget, hooks) {}

  DistributedOutcome outcome(TrainOutcome result) {
    DistributedOutcome out;
    static_cast<TrainOutcome&>(out) = std::move(result);
    out.describe(own);
    out.communication = std::move(rows.communication());
    out.iterations_restored = loop.iterations_restored();
    return out;
  }

  OwnPartitions& own;
  PartitionRows rows;
  FgmLoop loop;
};

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
    return own.sum(local);
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

// The class runs of one-vs-rest in lockstep (linear features and groups):
// every pass streams this rank's partitions once and scores the dual vectors
// of all classes still iterating or due their final certificate
// (OwnPartitions::score_by_ranges), each class getting the bits its own
// pass would give; then each served class solves its subproblem, in class
// order, exactly as it would alone. So a run makes max_c(passes of c) passes,
// not their sum, and every class's model is that of its own run.
std::vector<DistributedOutcome> run_classes_in_lockstep(Communicator& comm, OwnPartitions& own,
                                                        std::vector<std::unique_ptr<PartitionedFgmRun>>& runs,
                                                        uint64_t certificate_batch, DistributedOutcome& out) {
  auto shared_pass = [&](const std::vector<size_t>& served, const std::vector<uint64_t>& batches) {
    std::vector<ScoreRequest> requests;
    for (size_t q = 0; q < served.size(); ++q) requests.push_back(runs[served[q]]->rows.scoring_request(batches[q]));
    // The first class measures the value span on its first pass (one warning per store).
    PartitionRows& first = runs.front()->rows;
    const bool span = served.front() == 0 && first.measures_value_span();
    if (span) first.observe_values();
    const auto start = std::chrono::steady_clock::now();
    const CommunicationStats before = comm.stats();
    std::vector<SpaceScores> scores = score_many(ScoringContext{}, requests);
    const double seconds = seconds_since(start);
    CommunicationRecord record{runs[served.front()]->loop.next_iteration(), "scoring", comm.stats() - before,
                               -1};
    for (size_t r : served) record.shared_by.push_back(static_cast<int>(r));
    out.communication.push_back(std::move(record));
    out.total_bytes_streamed += scores.front().pass.bytes_streamed;
    if (span) first.check_value_span(runs.front()->loop.next_iteration());
    std::vector<FgmPass> passes;
    for (size_t q = 0; q < served.size(); ++q) {
      passes.push_back(runs[served[q]]->rows.take_scores(std::move(scores[q])));
      passes.back().seconds = seconds;
    }
    return passes;
  };
  std::vector<FgmLoop*> loops;
  for (auto& run : runs) loops.push_back(&run->loop);
  run_in_lockstep(loops, certificate_batch, shared_pass);
  std::vector<DistributedOutcome> outcomes;
  for (auto& run : runs) outcomes.push_back(run->outcome(run->loop.finish()));
  return outcomes;
}

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
  const bool lockstep = schedule == OneVsRestSchedule::kLockstepWherePossible && scores_many(settings.space) &&
                        own.fits_many(K);
  // In class 1's label phase.
  const std::string shortfall = lockstep ? lockstep_shortfall(comm, own, K, budget) : "";
  TrainSettings class_settings = settings;
  class_settings.check_chance_level = false;  // a class against the rest is no multi-class model
  std::vector<uint64_t> part_rows;
  for (size_t q = 0; q < own.size(); ++q) part_rows.push_back(own.rows(q));
  TrainingArgmax argmax(part_rows, budget, "use more ranks (more, smaller partitions)");
  DistributedOutcome out;
  std::vector<DistributedHooks> hooks(K);
  for (size_t c = 0; c < K; ++c)
    hooks[c].on_final_decision = [&argmax, c](size_t q, const std::vector<double>& d) { argmax.add(c, q, d); };
  auto announce = [&](const char* how) {
    if (comm.rank() == 0)
      spdlog::info("{} classes: one-vs-rest ({} binary runs, fgm.multiclass=ovr, {})", K, K, how);
  };
  std::vector<DistributedOutcome> outcomes;
  auto run_lockstep = [&] {
    announce("in lockstep: each scoring pass shared by the classes");
    std::vector<std::unique_ptr<PartitionedFgmRun>> runs;
    for (size_t c = 0; c < K; ++c)
      runs.push_back(std::make_unique<PartitionedFgmRun>(comm, own, class_settings, budget, hooks[c],
                                                         LabelChoice{values, c, true},
                                                         c == 0 ? labels_start : comm.stats(), c == 0));
    outcomes = run_classes_in_lockstep(comm, own, runs, settings.B, out);
  };
  auto run_one_by_one = [&] {
    announce("one class after another");
    for (size_t c = 0; c < K; ++c) {
      PartitionedFgmRun run(comm, own, class_settings, budget, hooks[c], {values, c, true}, labels_start, c == 0);
      outcomes.push_back(run.outcome(run.loop.run()));
      out.total_bytes_streamed += outcomes.back().total_bytes_streamed;  // lockstep: once per shared pass
      labels_start = comm.stats();
    }
  };
  out.lockstep = schedule_classes(K, lockstep, shortfall, run_lockstep, run_one_by_one, [&](std::string m) {
    // Rank 0 alone adds it (every rank takes the same decision: one copy in the log and run.json).
    if (comm.rank() == 0) add_warning(settings.warnings, "ovr_lockstep_fell_back", std::move(m));
  });
  std::vector<TrainOutcome> classes;
  for (size_t c = 0; c < K; ++c) {
    for (CommunicationRecord record : outcomes[c].communication) {
      record.class_index = static_cast<int>(c);
      out.communication.push_back(std::move(record));
    }
    classes.push_back(std::move(outcomes[c]));
  }
  // The multi-class model on this rank's rows: rows per class over all partitions (tree sums of counts).
  const CommunicationStats before = comm.stats();
  std::vector<std::vector<double>> counts;
  for (size_t q = 0; q < own.size(); ++q) {
    const std::vector<uint16_t> truth = own.class_indices(q, values);
    counts.push_back(argmax.counts(q, K, [&](uint64_t i) { return size_t{truth[i]}; }));
  }
  finish_one_vs_rest(out, std::move(classes), values, *own[0].store, own.sum(counts, K + 1),
                     comm.rank() == 0 ? settings.warnings : nullptr);
  out.communication.push_back({0, "diagnostics", comm.stats() - before});  // of no class
  out.describe(own);
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
  if (values.size() > 2) {
    FGM_ASSERT(hooks.resume == nullptr);
    return train_one_vs_rest_distributed(comm, own, values, settings, budget, labels_start, schedule);
  }
  PartitionedFgmRun run(comm, own, settings, budget, hooks, {values, 1, false}, labels_start, true);
  return run.outcome(run.loop.run());
}

}  // namespace fgm
