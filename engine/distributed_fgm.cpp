#include "engine/distributed_fgm.h"

#include <chrono>
#include <cstring>
#include <algorithm>
#include <memory>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/partition_sum.h"
#include "features/block_scores.h"
#include "features/block_stream.h"
#include "features/feature_groups.h"
#include "solvers/distributed_apg.h"

namespace fgm {

std::string partition_mismatch(const std::string& store_dir, uint32_t partitions, int ranks) {
  if (ranks >= 1 && partitions % static_cast<uint32_t>(ranks) == 0) return {};
  std::string divisors;
  for (uint32_t d = 1; d <= partitions; ++d)
    if (partitions % d == 0) divisors += (divisors.empty() ? "" : ", ") + std::to_string(d);
  return fmt::format(
      "{} has {} row partitions, which {} ranks cannot share evenly: run with mpirun -np K for a K that divides {} "
      "({}), or ingest again with fgm ingest INPUT --out STORE --partitions {} (the partition count fixes the "
      "summation order, so models agree bit for bit only across rank counts dividing it)",
      store_dir, partitions, ranks, partitions, divisors, ranks);
}

namespace {

CommunicationStats since(const CommunicationStats& now, const CommunicationStats& before) {
  return {now.bytes - before.bytes, now.calls - before.calls, now.seconds - before.seconds};
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// One of this rank's partitions, opened.
struct OwnPartition {
  std::unique_ptr<ShardStore> store;
  std::unique_ptr<BlockStream> stream;
  std::vector<BlockRef> blocks;
};

class DistributedRun {
 public:
  DistributedRun(Communicator& comm, const std::string& dir, const TrainSettings& settings, MemoryBudget& budget)
      : comm_(comm), dir_(dir), settings_(settings), budget_(budget) {}

  DistributedOutcome run();

 private:
  void open_partitions();
  void map_labels();
  std::vector<double> scores();
  void add_batch(const std::vector<ScoredCandidate>& top);
  void update_duals();
  std::vector<ScoredCandidate> top_candidates(const std::vector<double>& c, const std::vector<char>& is_selected,
                                              Reservation& memory);
  Model make_model(double objective) const;
  void record(int iteration, const char* phase, const CommunicationStats& before) {
    out_.communication.push_back({iteration, phase, since(comm_.stats(), before)});
  }

  Communicator& comm_;
  std::string dir_;
  const TrainSettings& settings_;
  MemoryBudget& budget_;
  DistributedOutcome out_;
  PartitionRange range_;
  std::vector<OwnPartition> own_;
  DistributedProblem problem_;
  Reservation score_memory_, row_memory_, column_memory_;
  std::vector<std::vector<double>> a_;  // α∘y per own partition
  std::vector<uint64_t> selected_;       // feature ids, cache order
  std::vector<uint64_t> column_group_;   // group of each selected column (group spaces)
  std::unique_ptr<FeatureGroups> groups_;  // features.groups; null: linear features
  std::vector<double> w_;
  double lipschitz_ = 0;
  double positive_ = 1, negative_ = -1;
  uint64_t column_bytes_ = 0;
  uint64_t bytes_streamed_ = 0;  // by this rank in the current scoring pass
};

void DistributedRun::open_partitions() {
  out_.manifest = read_partition_manifest(dir_);
  out_.ranks = comm_.size();
  if (const std::string e = partition_mismatch(dir_, out_.manifest.partitions, comm_.size()); !e.empty())
    throw Error(ErrorKind::kConfig, e);
  range_ = partitions_of_rank(out_.manifest.partitions, comm_.size(), comm_.rank());
  out_.first_partition = range_.first;
  out_.own_partitions = range_.count;
  problem_.comm = &comm_;
  problem_.partitions = out_.manifest.partitions;
  problem_.first_partition = range_.first;
  problem_.total_rows = out_.manifest.n_rows;
  SchedulerOptions scheduler = settings_.scheduler;
  scheduler.keep_resident = false;
  for (uint32_t k = 0; k < range_.count; ++k) {
    const uint32_t p = range_.first + k;
    OwnPartition part;
    part.store = ShardStore::open(partition_dir(dir_, p), budget_);
    const StoreInfo& info = part.store->info();
    const uint64_t expected = out_.manifest.first_row[p + 1] - out_.manifest.first_row[p];
    if (info.n_rows != expected || info.n_features != out_.manifest.n_features)
      throw Error(ErrorKind::kCorruption,
                  fmt::format("{}: {} rows x {} features, but {} says {} x {}", partition_dir(dir_, p), info.n_rows,
                              info.n_features, kPartitionManifestName, expected, out_.manifest.n_features));
    part.stream = std::make_unique<BlockStream>(*part.store, scheduler, budget_);
    part.blocks = part.store->plan_blocks(settings_.block_bytes);
    own_.push_back(std::move(part));
  }
}

// Labels as ±1 by the classes of ALL partitions (a partition may lack one class).
void DistributedRun::map_labels() {
  std::vector<double> mine;
  for (const auto& part : own_)
    for (double v : part.store->info().class_values) mine.push_back(v);
  const std::vector<uint8_t> all = comm_.allgather(mine.data(), mine.size() * sizeof(double));
  std::vector<double> values(all.size() / sizeof(double));
  std::memcpy(values.data(), all.data(), all.size());
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  if (values.size() != 2)
    throw Error(ErrorKind::kConfig, fmt::format("{} has {} distinct labels: training on a partitioned store is "
                                                "binary only in this version",
                                                dir_, values.size()));
  negative_ = values[0];
  positive_ = values[1];
  for (const auto& part : own_) {
    const StoreInfo& info = part.store->info();
    PartitionColumns cols;
    cols.n = info.n_rows;
    cols.y.resize(info.n_rows);
    const uint16_t* classes = part.store->classes();
    for (uint64_t i = 0; i < info.n_rows; ++i) cols.y[i] = info.class_values[classes[i]] == positive_ ? 1 : -1;
    problem_.parts.push_back(std::move(cols));
  }
  // α⁰ = C·1 (no bias): a = C·y.
  uint64_t rows = 0;
  for (const auto& part : problem_.parts) rows += part.n;
  row_memory_ = budget_.reserve(rows * (2 * sizeof(double) + 1), "dual vectors of this rank's partitions",
                                "use more ranks (more, smaller partitions)");
  for (const auto& part : problem_.parts) {
    std::vector<double> a(part.n);
    for (uint64_t i = 0; i < part.n; ++i) a[i] = settings_.apg.C * double(part.y[i]);
    a_.push_back(std::move(a));
  }
}

// c = Σ_i a_i x_i over all partitions (n_features entries), the same on every rank.
std::vector<double> DistributedRun::scores() {
  const uint64_t m = out_.manifest.n_features;
  struct BlockC {
    std::vector<uint64_t> ids;
    std::vector<double> c;
  };
  std::vector<std::vector<double>> local;
  for (size_t q = 0; q < own_.size(); ++q) {
    std::vector<double> c(m, 0.0);
    const double* a = a_[q].data();
    PassStats pass = stream_blocks<BlockC>(
        *own_[q].stream, own_[q].blocks, "scoring",
        [&](const BlockRef&, const ColumnBlock& block) {
          BlockC out;
          out.ids.assign(block.column_ids, block.column_ids + block.column_count);
          out.c.resize(block.column_count);
          block_column_dots(block, a, out.c.data());
          return out;
        },
        [&](BlockC&& block) {
          for (size_t k = 0; k < block.ids.size(); ++k) c[block.ids[k]] = block.c[k];
        },
        [](const BlockRef& ref) { return ref.column_count * 2 * sizeof(double); });
    out_.total_bytes_streamed += pass.bytes_streamed;
    bytes_streamed_ += pass.bytes_streamed;
    local.push_back(std::move(c));
  }
  return allreduce_partition_sums(comm_, problem_.partitions, problem_.first_partition, local, m);
}

void DistributedRun::add_batch(const std::vector<ScoredCandidate>& top) {
  std::vector<uint32_t> rows;
  std::vector<float> values;
  auto add_column = [&](uint64_t feature, uint64_t group) {
    selected_.push_back(feature);
    column_group_.push_back(group);
    for (size_t q = 0; q < own_.size(); ++q) {
      own_[q].store->read_column(feature, rows, values);
      column_bytes_ += rows.size() * (sizeof(uint32_t) + sizeof(float));
      problem_.parts[q].rows.push_back(rows);
      problem_.parts[q].values.push_back(values);
    }
  };
  for (const auto& c : top) {
    if (!groups_) {
      add_column(c.id, 0);
      continue;
    }
    for (uint64_t p = 0; p < groups_->size(c.id); ++p) add_column(groups_->member(c.id, p), c.id);
  }
  column_memory_ = budget_.reserve(column_bytes_, "this rank's rows of the selected columns",
                                   "use more ranks or a smaller fgm.B / fgm.max_iterations");
  problem_.batch_begin.push_back(selected_.size());
}

// α from the decision values on this rank's rows (Theorem 3), a = α∘y.
void DistributedRun::update_duals() {
  const auto decisions = partition_decisions(problem_, w_);
  std::vector<double> alpha;
  for (size_t q = 0; q < problem_.parts.size(); ++q) {
    dual_from_decision(settings_.apg.loss, settings_.apg.C, problem_.parts[q].y.data(), decisions[q], alpha);
    for (uint64_t i = 0; i < problem_.parts[q].n; ++i) a_[q][i] = alpha[i] * double(problem_.parts[q].y[i]);
  }
}

// The top-B unselected candidates by the global c, the same on every rank:
// features by s_j = c_j², or groups by s_g = Σ_{j∈g} c_j² (members in
// increasing order; every group is evaluated, which picks what the
// single-store pass picks with its tree pruning).
std::vector<ScoredCandidate> DistributedRun::top_candidates(const std::vector<double>& c,
                                                            const std::vector<char>& is_selected, Reservation& memory) {
  TopBCache top(settings_.B, &budget_);
  auto offer = [&](double s, uint64_t id) {
    if (s > 0 && !is_selected[id] && top.may_admit(s)) top.offer({s, id});
  };
  if (!groups_) {
    for (uint64_t j = 0; j < c.size(); ++j) offer(c[j] * c[j], j);
    return top.take_sorted(&memory);
  }
  for (uint64_t g = 0; g < groups_->listed_groups; ++g) {
    double s = 0;
    for (uint64_t p = groups_->member_ptr[g]; p < groups_->member_ptr[g + 1]; ++p)
      s += c[groups_->members[p]] * c[groups_->members[p]];
    offer(s, g);
  }
  for (uint64_t j = 0; j < c.size(); ++j)
    if (groups_->listed_index(j) == UINT64_MAX) offer(c[j] * c[j], groups_->singleton_group(j));
  return top.take_sorted(&memory);
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
  model.objective = objective;
  for (size_t h = 0; h + 1 < problem_.batch_begin.size(); ++h)
    for (size_t j = problem_.batch_begin[h]; j < problem_.batch_begin[h + 1]; ++j) {
      ModelFeature f;
      f.key.kind = groups_ ? FeatureKind::kGroup : FeatureKind::kLinear;
      f.key.ids[0] = selected_[j];
      if (groups_) f.key.group = column_group_[j];
      f.weight = w_[j];
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
  record(0, "labels", before);
  score_memory_ = budget_.reserve(
      out_.manifest.n_features * (sizeof(double) * (range_.count + static_cast<uint64_t>(comm_.size()) + 2) + 1),
      "score vectors of a distributed scoring pass", "use fewer features or more memory per rank");
  problem_.batch_begin = {0};
  // F_0 = P(0): the objective without features (no bias), reduced like every row sum.
  {
    std::vector<std::vector<double>> local;
    for (const auto& part : problem_.parts)
      local.push_back({loss_value(settings_.apg.loss, settings_.apg.C, part.y.data(), std::vector<double>(part.n, 0.0))});
    out_.objective_no_features =
        allreduce_partition_sums(comm_, problem_.partitions, problem_.first_partition, local, 1).front();
  }
  double objective = out_.objective_no_features;
  if (!settings_.space.groups_path.empty())
    groups_ = std::make_unique<FeatureGroups>(read_feature_groups(
        settings_.space.groups_path, out_.manifest.n_features, out_.manifest.index_base, budget_,
        parse_group_structure(settings_.space.group_structure)));
  std::vector<char> is_selected(groups_ ? groups_->n_groups : out_.manifest.n_features, 0);
  for (int t = 1;; ++t) {
    IterationRecord rec;
    rec.iter = t;
    auto phase_start = std::chrono::steady_clock::now();
    before = comm_.stats();
    bytes_streamed_ = 0;
    const std::vector<double> c = scores();
    Reservation top_memory;
    const std::vector<ScoredCandidate> fresh = top_candidates(c, is_selected, top_memory);
    // (37): ½Σ_{j∈new} c_j² − max_h ½Σ_{j∈d_h} c_j², with the current α.
    double best = 0, fresh_sum = 0;
    for (size_t h = 0; h + 1 < problem_.batch_begin.size(); ++h) {
      double s = 0;
      for (size_t j = problem_.batch_begin[h]; j < problem_.batch_begin[h + 1]; ++j) s += c[selected_[j]] * c[selected_[j]];
      best = std::max(best, 0.5 * s);
    }
    for (const auto& f : fresh) fresh_sum += f.score;
    rec.sip_violation = 0.5 * fresh_sum - best;
    rec.candidates_scored = groups_ ? groups_->n_groups : out_.manifest.n_features;
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
    for (const auto& f : fresh) is_selected[f.id] = 1;
    add_batch(fresh);
    const DistributedApgResult r = solve_distributed_apg(problem_, settings_.apg, w_, lipschitz_);
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
    rec.apg_gradient_evaluations = r.iterations;
    rec.apg_converged = r.converged;
    rec.apg_stop = r.converged ? "converged" : r.stalled ? "stalled" : "max_iterations";
    rec.peak_rss_bytes = peak_rss_bytes();
    out_.iterations.push_back(rec);
    if (comm_.rank() == 0)
      spdlog::info("iter {:3d}: selected {:6d} (+{}), objective {:.6g}, sip_violation {:.4g}, score {:.3f}s, solve "
                 "{:.3f}s ({} APG its), communicated {} B",
                 t, rec.selected, rec.added, rec.objective, rec.sip_violation, rec.score_seconds, rec.solve_seconds,
                 rec.apg_iterations, out_.communication.back().comm.bytes + out_.communication.end()[-2].comm.bytes);
  }
  out_.model = make_model(objective);
  out_.seconds = seconds_since(start);
  return std::move(out_);
}

}  // namespace

DistributedOutcome train_fgm_distributed(Communicator& comm, const std::string& store_dir,
                                         const TrainSettings& settings, MemoryBudget& budget) {
  DistributedRun run(comm, store_dir, settings, budget);
  return run.run();
}

}  // namespace fgm
