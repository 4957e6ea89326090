#include "engine/distributed_path.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "core/messages.h"
#include "engine/own_partitions.h"
#include "engine/path_selection.h"

namespace fgm {

namespace {

// Rows of fold f among the `count` rows of one label dealt round-robin from
// `dealt` on (assign_folds: the shuffled row at position r gets fold (dealt + r) mod k).
uint64_t dealt_to_fold(uint64_t count, uint64_t dealt, int k, int f) {
  const uint64_t first = (uint64_t(f) + uint64_t(k) - dealt % uint64_t(k)) % uint64_t(k);  // first position of f
  return count / uint64_t(k) + (first < count % uint64_t(k) ? 1 : 0);
}

// One (decision value, label) pair of a held-out row, as gathered on rank 0.
constexpr size_t kHeldOutPairBytes = sizeof(double) + sizeof(int8_t);

// The path's FGM runs: train_fgm_distributed with its checkpoint hooks, and
// its cross-validation folds over this rank's rows.
class DistributedPathTrainer final : public PathTrainer {
 public:
  DistributedPathTrainer(Communicator& comm, const std::string& dir, const TrainSettings& base, MemoryBudget& budget,
                         DistributedPathOutcome& out)
      : comm_(comm), dir_(dir), base_(base), budget_(budget), out_(out) {}

  // The rows' label map is known once the first run has mapped the labels of all partitions.
  const Model* evaluation_shape() const override { return nullptr; }

  TrainOutcome train(const TrainSettings& s, const TrainHooks& hooks) override {
    FGM_ASSERT(s.labels == nullptr);
    DistributedHooks h;
    static_cast<TrainHooks&>(h) = hooks;
    if (fold_ >= 0) h.left_out = &left_out_;
    DistributedOutcome d = train_fgm_distributed(comm_, dir_, s, budget_, h);
    record(d);
    return std::move(static_cast<TrainOutcome&>(d));
  }

  // Each rank labels its rows as the trainer does (+1: the larger of the two
  // values of all partitions), one tree sum gives every partition's rows of
  // each label, and assign_partition_folds deals this rank's rows their folds.
  std::vector<FoldRows> assign_folds(int k, uint64_t seed) override {
    const CommunicationStats before = comm_.stats();
    OwnPartitions own(comm_, dir_, base_.scheduler, base_.block_bytes, budget_);
    const std::vector<double> values = own.class_values();
    if (values.size() > 2) throw Error(ErrorKind::kConfig, msg::multiclass_path_unsupported(dir_, values.size()));
    const uint32_t partitions = own.manifest().partitions, first = own.range().first;
    labels_memory_ = budget_.reserve(own.own_rows() * (1 + sizeof(uint8_t)), "cross-validation labels and row mask",
                                     "use more ranks (more, smaller partitions)");
    labels_.clear();
    std::vector<std::vector<double>> local;  // [partition]: 2·partitions counts, this partition's at its slots
    std::vector<const int8_t*> label_ptrs;
    std::vector<uint64_t> rows;
    for (size_t q = 0; q < own.size(); ++q) {
      std::vector<int8_t> y = own.binary_labels(q, values[1]);
      std::vector<double> counts(2 * size_t(partitions), 0.0);
      for (int8_t label : y) counts[2 * (first + q) + (label > 0)] += 1;
      labels_.push_back(std::move(y));
      local.push_back(std::move(counts));
      rows.push_back(own.rows(q));
    }
    const std::vector<double> total = own.sum(local, 2 * size_t(partitions));  // integers: exact
    std::vector<std::array<uint64_t, 2>> label_rows(partitions);
    uint64_t label_total[2] = {0, 0};
    for (uint32_t p = 0; p < partitions; ++p)
      for (int c = 0; c < 2; ++c) {
        label_rows[p][c] = static_cast<uint64_t>(total[2 * p + c]);
        label_total[c] += label_rows[p][c];
      }
    validate_folds(k, std::min(label_total[0], label_total[1]));
    for (const auto& y : labels_) label_ptrs.push_back(y.data());
    folds_ = assign_partition_folds(label_rows, first, label_ptrs, rows, k, seed, budget_);
    left_out_.assign(own.size(), {});
    out_.cv_communication += comm_.stats() - before;
    // Fold sizes from the label counts: label −1 is dealt from 0, +1 from n₋.
    std::vector<FoldRows> out(static_cast<size_t>(k));
    const uint64_t n = label_total[0] + label_total[1];
    for (int f = 0; f < k; ++f) {
      out[size_t(f)].held_out = dealt_to_fold(label_total[0], 0, k, f) + dealt_to_fold(label_total[1], label_total[0], k, f);
      out[size_t(f)].training = n - out[size_t(f)].held_out;
    }
    return out;
  }

  void set_fold(int fold) override {
    fold_ = fold;
    for (size_t q = 0; q < folds_.size(); ++q) {
      left_out_[q].resize(folds_[q].size());
      for (uint64_t i = 0; i < folds_[q].size(); ++i) left_out_[q][i] = folds_[q][i] == fold;
    }
  }

  // This rank's held-out rows' decision values and labels, gathered on rank 0
  // in rank order (= partition order = row order): 9 bytes a row.
  HeldOutEval held_out(const Checkpoint& point) override {
    const CommunicationStats before = comm_.stats();
    uint64_t held = 0;
    for (const auto& folds : folds_)
      for (uint16_t f : folds) held += f == fold_;
    Reservation mine = budget_.reserve(held * (sizeof(double) + 1 + kHeldOutPairBytes), "held-out scores",
                                       "use more ranks (more, smaller partitions)");
    std::vector<double> scores;
    std::vector<int8_t> y;
    scores.reserve(held);
    y.reserve(held);
    for (size_t q = 0; q < folds_.size(); ++q)
      append_held_out_scores(*point.rows[q].cache, point.model, labels_[q].data(), folds_[q].data(), fold_,
                             budget_, scores, y);
    std::vector<std::vector<uint8_t>> parts(static_cast<size_t>(comm_.size()));
    parts[0].resize(held * kHeldOutPairBytes);
    std::memcpy(parts[0].data(), scores.data(), held * sizeof(double));
    std::memcpy(parts[0].data() + held * sizeof(double), y.data(), held);
    std::vector<size_t> sizes;
    const std::vector<uint8_t> all = comm_.alltoallv(parts, &sizes);
    out_.cv_communication += comm_.stats() - before;
    if (comm_.rank() != 0) return {};
    const uint64_t rows = all.size() / kHeldOutPairBytes;
    Reservation gathered = budget_.reserve(rows * (2 * sizeof(double) + 1), "held-out scores of all ranks",
                                           "use more memory on rank 0");
    scores.assign(rows, 0.0);
    y.assign(rows, 0);
    uint64_t at = 0, offset = 0;
    for (size_t bytes : sizes) {  // per source rank: its scores, then its labels
      const uint64_t h = bytes / kHeldOutPairBytes;
      std::memcpy(scores.data() + at, all.data() + offset, h * sizeof(double));
      std::memcpy(y.data() + at, all.data() + offset + h * sizeof(double), h);
      at += h;
      offset += bytes;
    }
    return held_out_eval(scores, y);
  }

 private:
  void record(const DistributedOutcome& d) {
    out_.manifest = d.manifest;
    out_.ranks = d.ranks;
    out_.own_partitions = d.own_partitions;
    if (fold_ < 0) {
      out_.communication.push_back(d.communication);
      return;
    }
    for (const CommunicationRecord& c : d.communication) out_.cv_communication += c.comm;
  }

  Communicator& comm_;
  const std::string& dir_;
  const TrainSettings& base_;
  MemoryBudget& budget_;
  DistributedPathOutcome& out_;
  // Cross-validation: per own partition, the ±1 labels, the folds and the
  // current fold's row mask.
  Reservation labels_memory_;
  std::vector<std::vector<int8_t>> labels_;
  std::vector<BudgetedArray<uint16_t>> folds_;
  std::vector<std::vector<uint8_t>> left_out_;
  int fold_ = -1;
};

}  // namespace

void reject_multiclass_partitioned_path(Communicator& comm, const std::string& store_dir, MemoryBudget& budget) {
  OwnPartitions own(comm, store_dir, SchedulerOptions{}, TrainSettings{}.block_bytes, budget);
  const std::vector<double> values = own.class_values(false);
  if (values.size() > 2) throw Error(ErrorKind::kConfig, msg::multiclass_path_unsupported(store_dir, values.size()));
}

DistributedPathOutcome run_fgm_path_distributed(Communicator& comm, const std::string& store_dir,
                                                const PathSettings& settings, MemoryBudget& budget,
                                                const PathHooks& hooks) {
  PathSettings local = settings;
  if (comm.rank() != 0) {  // rank 0 alone evaluates and warns
    local.test_path.clear();
    local.validation_path.clear();
    local.point_warnings = false;
  }
  DistributedPathOutcome out;
  DistributedPathTrainer trainer(comm, store_dir, local.base, budget, out);
  const CommunicationStats before = comm.stats();
  out.path = run_path(trainer, local, budget, hooks);
  out.total_communication = comm.stats() - before;
  // The trainer's records and the cross-validation leave out what the refits at the points communicated.
  CommunicationStats recorded = out.cv_communication;
  for (const auto& run : out.communication)
    for (const CommunicationRecord& c : run) recorded += c.comm;
  out.refit_communication = out.total_communication - recorded;
  out.budget_peak = budget.peak();
  return out;
}

}  // namespace fgm
