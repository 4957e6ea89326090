#include "engine/distributed_kta.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "core/messages.h"
#include "core/partition_sum.h"
#include "engine/model_provenance.h"

namespace fgm {
namespace {

using Clock = std::chrono::steady_clock;

// One partition's first-pass statistics of one column.
struct ColumnSums {
  uint64_t id = 0;
  kta::LinearColumnSums sums;
  uint64_t nnz = 0;
  float min = 0, max = 0;  // over the partition's rows, implicit zeros included
};

// A column's value range, exchanged between ranks (16 bytes, no padding).
struct ColumnRange {
  uint64_t id;
  float min, max;
};

// One pass over partition `part`'s column blocks: `column(id, entries)` per
// non-empty column, results in column order.
template <class Result, class PerColumn>
std::vector<Result> per_column_pass(const OwnPartition& part, const char* label, PerColumn&& column,
                                    PassStats& pass) {
  const CscBytes csc_bytes(part.store->info());
  std::vector<Result> out;
  pass += stream_blocks<std::vector<Result>>(
      *part.stream, part.blocks, label,
      [&](const BlockRef&, const ColumnBlock& block) {
        CscScratch merged;  // reserved by the stream (scratch)
        const CscColumns cols = csc_columns(block, merged);
        std::vector<Result> result;
        result.reserve(cols.column_count);
        for (uint64_t k = 0; k < cols.column_count; ++k) {
          kta::ColumnEntries entries;
          entries.rows = cols.row_ids + cols.col_ptr[k];
          entries.values = cols.values + cols.col_ptr[k];
          entries.nnz = cols.col_ptr[k + 1] - cols.col_ptr[k];
          entries.col_min = cols.col_min[k];
          entries.col_max = cols.col_max[k];
          result.push_back(column(cols.column_ids[k], entries));
        }
        return result;
      },
      [&](std::vector<Result>&& result) { out.insert(out.end(), result.begin(), result.end()); },
      [&](const BlockRef& ref) { return csc_bytes(ref) + ref.column_count * sizeof(Result); });
  return out;
}

// This rank's partitions with their ±1 labels (by the classes of all
// partitions: a partition may lack one) and centred unit labels ỹ.
class KtaPartitions final : public KtaData {
 public:
  KtaPartitions(Communicator& comm, const std::string& dir, const KtaSettings& settings, MemoryBudget& budget,
                PartitionedRun& out)
      : comm_(comm), budget_(budget), own_(comm, dir, settings.scheduler, settings.block_bytes, budget), out_(out) {
    out_.describe(own_);
    const CommunicationStats before = comm.stats();
    read_labels();
    out_.communication.push_back({0, "labels", comm.stats() - before});
  }

  // The models' label map and provenance (no store checksum: the partitions have their own).
  Model shape() const override {
    Model m = model_of_partitioned_store(out_.manifest, negative_, positive_, "pnorm_kta");
    m.feature_kind = "linear";
    return m;
  }

  // The linear SVM of a point over this rank's partitions, its communication
  // recorded as phase "svm" of the next iteration (a path's point k: k;
  // fgm train's one model: 1).
  KtaPointModel fit(const KtaSettings& settings, const std::vector<kta::FeatureAlignment>& alignments,
                    const kta::PathPoint& point) override {
    const CommunicationStats before = comm_.stats();
    KtaPointModel fitted;
    fitted.model = fit_kta_linear_model(rows(), settings, alignments, point, budget_);
    out_.communication.push_back({svm_iteration_++, "svm", comm_.stats() - before});
    return fitted;
  }

  KtaRows rows() {
    KtaRows r;
    for (size_t q = 0; q < own_.size(); ++q) {
      r.parts.push_back(own_[q].store.get());
      r.labels.push_back(labels_[q].data());
    }
    r.reduction = &own_.reduction();
    r.n = n_;
    r.n_positive = n_positive_;
    r.n_negative = n_negative_;
    r.shape = shape();
    return r;
  }

  // The alignments of all non-empty columns (increasing id), the same bits on every rank.
  KtaRun align(const KtaSettings& settings) override {
    kta::check_path_options(settings.path);
    const auto start = Clock::now();
    const CommunicationStats before = comm_.stats();
    KtaRun run;
    std::vector<std::vector<ColumnSums>> firsts;
    uint64_t own_columns = 0;
    for (size_t q = 0; q < own_.size(); ++q)
      for (const BlockRef& ref : own_[q].blocks) own_columns += ref.column_count;
    Reservation first_memory =
        budget_.reserve(own_columns * (sizeof(ColumnSums) + 3 * 16), "KTA: column sums of this rank's partitions",
                        "use more ranks (fewer partitions per rank)");
    for (size_t q = 0; q < own_.size(); ++q)
      firsts.push_back(per_column_pass<ColumnSums>(
          own_[q], "KTA column sums (linear)",
          [&](uint64_t id, const kta::ColumnEntries& c) {
            return ColumnSums{id, kta::linear_column_sums(c, unit_labels_[q].data()), c.nnz, c.col_min, c.col_max};
          },
          run.alignment_pass));
    auto tree_sum = [&](auto field) {
      std::vector<SparseSums> local(firsts.size());
      for (size_t q = 0; q < firsts.size(); ++q)
        for (const ColumnSums& c : firsts[q]) {
          local[q].keys.push_back(c.id);
          local[q].values.push_back(field(c));
        }
      return own_.sum(local);
    };
    const SparseSums sum = tree_sum([](const ColumnSums& c) { return c.sums.sum; });
    const SparseSums label_dot = tree_sum([](const ColumnSums& c) { return c.sums.label_dot; });
    const SparseSums nnz = tree_sum([](const ColumnSums& c) { return static_cast<double>(c.nnz); });
    const std::vector<uint64_t>& ids = sum.keys;
    FGM_ASSERT(label_dot.keys == ids && nnz.keys == ids);  // every partition gave every statistic of its columns
    // The tree sums (3 and 1 sparse vectors), means, ranges and the alignments.
    Reservation column_memory =
        budget_.reserve(ids.size() * (4 * 16 + 2 * sizeof(double) + sizeof(kta::FeatureAlignment)),
                        "KTA: statistics and alignments of the features");
    const std::vector<bool> constant = constant_columns(firsts, ids, nnz);
    firsts.clear();
    first_memory.release();
    std::vector<double> mean(ids.size());
    for (size_t k = 0; k < ids.size(); ++k) mean[k] = sum.values[k] / static_cast<double>(n_);
    const SparseSums centred = centred_square_sums(ids, mean, run.alignment_pass);
    run.alignments.clear();
    run.alignments.reserve(ids.size());
    for (size_t k = 0; k < ids.size(); ++k) {
      const double zeros = (static_cast<double>(n_) - nnz.values[k]) * mean[k] * mean[k];
      const kta::LinearColumnSums sums{sum.values[k], label_dot.values[k]};
      run.alignments.push_back(
          kta::linear_alignment_from_sums(ids[k], constant[k], sums, zeros + centred.values[k], n_));
    }
    run.alignment_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    out_.communication.push_back({0, "alignments", comm_.stats() - before});
    return run;
  }

 private:
  void read_labels() {
    const std::vector<double> values = own_.class_values(false);
    if (values.size() > 2) throw Error(ErrorKind::kConfig, msg::kta_needs_two_labels(own_.dir(), values.size()));
    if (values.size() < 2)
      throw Error(ErrorKind::kInvalidInput,
                  fmt::format("{}: the store's rows all have one label: no alignment with the target", own_.dir()));
    negative_ = values.front();
    positive_ = values.back();  // the larger label is +1, as in a binary store
    labels_memory_ = budget_.reserve(own_.own_rows() * (1 + sizeof(double)), "KTA: labels of this rank's rows",
                                     "use more ranks (more, smaller partitions)");
    std::vector<std::vector<double>> counts;
    for (size_t q = 0; q < own_.size(); ++q) {
      labels_.push_back(own_.binary_labels(q, positive_));
      const double positives = static_cast<double>(std::count(labels_.back().begin(), labels_.back().end(), 1));
      counts.push_back({static_cast<double>(own_.rows(q)), positives});
    }
    const std::vector<double> total = own_.sum(counts, 2);  // exact: integers far below 2^53
    n_ = static_cast<uint64_t>(total[0]);
    n_positive_ = static_cast<uint64_t>(total[1]);
    n_negative_ = n_ - n_positive_;
    // ỹ = (y − m)/‖y − m1‖ with m and the norm from the class counts: a
    // row's ỹ depends on its label only, whatever the rank count.
    const kta::UnitLabelScale s = kta::unit_label_scale(n_positive_, n_negative_);
    for (const std::vector<int8_t>& y : labels_) {
      std::vector<double> unit(y.size());
      for (size_t i = 0; i < y.size(); ++i) unit[i] = (y[i] - s.mean) * s.scale;
      unit_labels_.push_back(std::move(unit));
    }
  }

  // col_min = col_max over all rows of all partitions: the partitions' ranges
  // (exact min and max, one allgather), and 0 where some row has no entry.
  std::vector<bool> constant_columns(const std::vector<std::vector<ColumnSums>>& firsts,
                                     const std::vector<uint64_t>& ids, const SparseSums& nnz) {
    std::vector<ColumnRange> mine;
    for (const auto& part : firsts)
      for (const ColumnSums& c : part) mine.push_back({c.id, c.min, c.max});
    Reservation exchange = budget_.reserve(mine.size() * sizeof(ColumnRange) * (1 + comm_.size()),
                                           "KTA: the column ranges of every rank", "use fewer ranks per node");
    const std::vector<uint8_t> all = comm_.allgather(mine.data(), mine.size() * sizeof(ColumnRange));
    std::vector<float> lo(ids.size()), hi(ids.size());
    for (size_t k = 0; k < ids.size(); ++k) {
      const bool has_zero = nnz.values[k] < static_cast<double>(n_);
      lo[k] = has_zero ? 0.0f : std::numeric_limits<float>::infinity();
      hi[k] = has_zero ? 0.0f : -std::numeric_limits<float>::infinity();
    }
    for (size_t e = 0; e < all.size() / sizeof(ColumnRange); ++e) {
      ColumnRange r;
      std::memcpy(&r, all.data() + e * sizeof(ColumnRange), sizeof r);
      const size_t k = static_cast<size_t>(std::lower_bound(ids.begin(), ids.end(), r.id) - ids.begin());
      lo[k] = std::min(lo[k], r.min);
      hi[k] = std::max(hi[k], r.max);
    }
    std::vector<bool> constant(ids.size());
    for (size_t k = 0; k < ids.size(); ++k) constant[k] = lo[k] == hi[k];
    return constant;
  }

  // Σ_nz (x − μ)² of every column (second pass), in the partition tree.
  SparseSums centred_square_sums(const std::vector<uint64_t>& ids, const std::vector<double>& mean, PassStats& pass) {
    std::vector<SparseSums> local(own_.size());
    for (size_t q = 0; q < own_.size(); ++q) {
      using Entry = std::pair<uint64_t, double>;
      const std::vector<Entry> entries = per_column_pass<Entry>(
          own_[q], "KTA centred sums (linear)",
          [&](uint64_t id, const kta::ColumnEntries& c) {
            const size_t k = static_cast<size_t>(std::lower_bound(ids.begin(), ids.end(), id) - ids.begin());
            return Entry{id, kta::centred_square_sum(c, mean[k])};
          },
          pass);
      for (const auto& [id, value] : entries) {
        local[q].keys.push_back(id);
        local[q].values.push_back(value);
      }
    }
    return own_.sum(local);
  }

  Communicator& comm_;
  MemoryBudget& budget_;
  OwnPartitions own_;
  PartitionedRun& out_;
  int svm_iteration_ = 1;
  std::vector<std::vector<int8_t>> labels_;
  std::vector<std::vector<double>> unit_labels_;
  Reservation labels_memory_;
  uint64_t n_ = 0, n_positive_ = 0, n_negative_ = 0;
  double positive_ = 1, negative_ = -1;
};

}  // namespace

std::unique_ptr<KtaData> open_kta_partitions(Communicator& comm, const std::string& dir, const KtaSettings& settings,
                                             MemoryBudget& budget, PartitionedRun& run) {
  if (settings.kernel != kta::KernelKind::kLinear)
    throw Error(ErrorKind::kConfig, "kta.kernel: only \"linear\" runs on a partitioned store");
  return std::make_unique<KtaPartitions>(comm, dir, settings, budget, run);
}

}  // namespace fgm
