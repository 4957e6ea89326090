#include "engine/distributed_fgm.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "engine/fgm_loop.h"
#include "engine/model_provenance.h"
#include "engine/value_span.h"
#include "features/transformed_store.h"
#include "io/libsvm_reader.h"

namespace fgm {

namespace {

constexpr uint64_t kColumnMaxEntryBytes = 32;  // an unordered_map<uint64_t, float> node and its bucket

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

// This rank's partitions as the FGM loop's row source: every sum over rows
// goes through the partition tree; the value span takes each column's
// maximum over all partitions (a column spans several).
class PartitionSource final : public RowSource {
 public:
  PartitionSource(OwnPartitions& own, MemoryBudget& budget) : own_(own), budget_(budget) {}

  size_t parts() const override { return own_.size(); }
  const ShardStore& store(size_t q) const override { return *own_[q].store; }
  PartitionScoringInput input(size_t q, const double* a) override {
    return {own_[q].stream.get(), &own_[q].blocks, a};
  }
  RowSumReduction& reduction() override { return own_.reduction(); }
  Communicator* comm() override { return &own_.comm(); }
  uint64_t total_rows() const override { return own_.manifest().n_rows; }
  const char* row_memory_remedy() const override { return "use more ranks (more, smaller partitions)"; }
  std::unique_ptr<FeatureSpace> make_space(const FeatureSpaceSettings& settings, MemoryBudget& budget) override {
    return make_feature_space(settings, own_, budget);
  }
  Model model_frame(double negative, double positive) const override {
    return model_of_partitioned_store(own_.manifest(), negative, positive, "fgm");
  }
  void observe_values() override;
  double value_span(int degree, const std::string& kind, RunWarnings* warnings) override;

 private:
  OwnPartitions& own_;
  MemoryBudget& budget_;
  // This rank's per-column max |value| (all own partitions), filled by the streams' observers.
  std::mutex column_max_mutex_;
  std::unordered_map<uint64_t, float> column_max_;  // the non-empty columns only (hashed id spaces)
  Reservation column_max_memory_;
};

// The streams of this rank's partitions record each column's max |value| of
// the pass that follows (the value-span warning).
void PartitionSource::observe_values() {
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
// single store's measure and warning (engine/value_span.h), on rank 0.
double PartitionSource::value_span(int degree, const std::string& kind, RunWarnings* warnings) {
  for (size_t q = 0; q < own_.size(); ++q) own_[q].stream->set_observer({});
  Communicator& comm = own_.comm();
  SparseSums mine;
  for (const auto& [id, max] : column_max_)
    if (max > 0) {
      mine.keys.push_back(id);
      mine.values.push_back(max);
    }
  column_max_ = {};
  Reservation exchange = budget_.reserve(mine.keys.size() * 16 * (1 + static_cast<uint64_t>(comm.size())),
                                         "value-span exchange of a pass", "use fewer features or more memory per rank");
  const SparseSums all = allreduce_partition_max(comm, {mine});
  column_max_memory_ = {};
  if (comm.rank() != 0) return 0;
  ValueSpan span;
  for (double max : all.values) span.add_column_max(static_cast<float>(max));
  return span.check(degree, kind, warnings);
}

// One binary FGM run's rows on this rank's partitions: labels as ±1 by
// `values`, the classes of ALL partitions (a partition may lack one class), +1
// for values[c] (the larger of two; a class against the rest for
// `one_vs_rest`), −1 for every other, 0 for a row left out. `labels_start`:
// the communication counters when its label phase began.
ClassRun partition_run(PartitionSource& source, OwnPartitions& own, const TrainSettings& settings,
                       MemoryBudget& budget, const TrainHooks& hooks, const std::vector<double>& values, size_t c,
                       bool one_vs_rest, const CommunicationStats& labels_start,
                       const std::vector<std::vector<uint8_t>>* left_out) {
  const double positive = values[c], negative = values[c == 0 ? 1 : 0];
  ClassRun run;
  run.labels_memory = budget.reserve(own.own_rows(), "labels of this rank's partitions",
                                     "use more ranks (more, smaller partitions)");
  std::vector<const int8_t*> y;
  for (size_t q = 0; q < own.size(); ++q) {
    run.labels.push_back(own.binary_labels(q, positive));
    if (left_out)
      for (uint64_t i = 0; i < run.labels[q].size(); ++i)
        run.labels[q][i] = (*left_out)[q][i] ? int8_t{0} : run.labels[q][i];
    y.push_back(run.labels[q].data());
  }
  run.rows = std::make_unique<FgmRows>(source, settings, budget, hooks, std::move(y), negative, positive,
                                       one_vs_rest ? fmt::format("class {} ", label_text(positive)) : "");
  run.rows->communication().push_back({0, "labels", own.comm().stats() - labels_start});
  return run;
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

// Lockstep holds the K class runs' row state at once (duals, labels and
// decision values: 3·8 + 1 bytes per own row each), the duals interleaved for
// one partition, K dots per non-empty column in the scoring tree (up to three
// vectors of 16 bytes per key alive, a node holding at most min(m, the own
// partitions' columns) columns) and, in the first pass, the value span's
// per-column maxima; one class after another holds one run's. Every rank
// checks what it has left and all agree (one allgather): if any rank is
// short, the classes go one after another (the same models), with a warning.
// Returns "" when lockstep fits, else the shortfall of the first rank short.
std::string lockstep_shortfall(OwnPartitions& own, size_t K, const MemoryBudget& budget) {
  uint64_t rows = 0, columns = 0;
  for (size_t q = 0; q < own.size(); ++q) {
    rows = std::max(rows, own.rows(q));
    columns += own[q].store->info().nonempty_columns;
  }
  const uint64_t node_columns = std::min<uint64_t>(columns, own.manifest().n_features);
  const uint64_t need = K * own.own_rows() * (3 * sizeof(double) + 1) + K * rows * sizeof(double) +
                        3 * 16 * K * node_columns + kColumnMaxEntryBytes * columns;
  const uint64_t mine[2] = {need, budget.available()};
  const std::vector<uint8_t> all = own.comm().allgather(mine, sizeof mine);
  for (size_t r = 0; r < all.size() / sizeof mine; ++r) {
    uint64_t theirs[2];
    std::memcpy(theirs, all.data() + r * sizeof mine, sizeof mine);
    if (theirs[0] > theirs[1])
      return fmt::format("rank {} would need about {} for the shared passes and has {} left", r,
                         format_bytes(theirs[0]), format_bytes(theirs[1]));
  }
  return "";
}

// One-vs-rest (engine/one_vs_rest.h) on the single store or this rank's
// partitions (`own`): the class runs on one source, the multi-class model's
// counts over all rows. No resume checkpoints. `labels_start`: the
// communication counters when class 1's label phase began.
FgmOutcome train_one_vs_rest(const FgmData& data, OwnPartitions* own, const std::vector<double>& values,
                             const TrainSettings& settings, MemoryBudget& budget, CommunicationStats labels_start,
                             OneVsRestSchedule schedule) {
  const size_t K = values.size();
  OneVsRestBackend backend;
  backend.values = values;
  backend.lockstep = schedule == OneVsRestSchedule::kLockstepWherePossible && scores_many(settings.space) &&
                     (!own || own->fits_many(K));
  // Partitions check in class 1's label phase; one store's attempt finds out.
  if (own) backend.shortfall = backend.lockstep ? lockstep_shortfall(*own, K, budget) : "";
  backend.make_source = [&]() -> std::unique_ptr<RowSource> {
    if (own) return std::make_unique<PartitionSource>(*own, budget);
    return store_source(*data.store, settings, budget);
  };
  bool first = true;
  backend.make_run = [&](RowSource& source, size_t c, const TrainSettings& s, const TrainHooks& hooks) {
    if (own) {
      const CommunicationStats start = first ? labels_start : own->comm().stats();
      first = false;
      auto& partitions = static_cast<PartitionSource&>(source);
      return partition_run(partitions, *own, s, budget, hooks, values, c, true, start, nullptr);
    }
    ClassRun run;
    run.labels_memory = budget.reserve(data.store->info().n_rows, "one-vs-rest labels", "use fewer training rows");
    run.labels.push_back(one_vs_rest_labels(*data.store, c, settings.labels));
    run.rows = std::make_unique<FgmRows>(source, s, budget, hooks, std::vector<const int8_t*>{run.labels[0].data()},
                                         -1, 1, fmt::format("class {} ", label_text(values[c])));
    return run;
  };
  backend.counts = [&](const TrainingArgmax& argmax) {
    if (!own) {  // a row outside the fit (settings.labels 0) is of no class
      const uint16_t* truth = data.store->classes();
      const int8_t* mask = settings.labels;
      return argmax.counts(0, K, [&](uint64_t i) { return mask && mask[i] == 0 ? SIZE_MAX : size_t{truth[i]}; });
    }
    std::vector<std::vector<double>> counts;
    for (size_t q = 0; q < own->size(); ++q) {
      const std::vector<uint16_t> truth = own->class_indices(q, values);
      counts.push_back(argmax.counts(q, K, [&](uint64_t i) { return size_t{truth[i]}; }));
    }
    return own->sum(counts, K + 1);
  };
  return run_one_vs_rest(backend, settings, budget);
}

}  // namespace

FgmOutcome train_fgm_on(const FgmData& data, const TrainSettings& settings, MemoryBudget& budget,
                        const DistributedHooks& hooks, OneVsRestSchedule schedule) {
  const CommunicationStats labels_start = data.comm.stats();
  std::optional<OwnPartitions> own;
  if (!data.store) {
    FGM_ASSERT(settings.labels == nullptr);  // partitions leave rows out by hooks.left_out
    own.emplace(data.comm, data.store_dir, settings.scheduler, settings.block_bytes, budget);
    if (!data.transforms.empty()) apply_transforms(*own, data.transforms, settings.block_bytes, budget);
  }
  const std::vector<double> values = own ? own->class_values() : data.store->info().class_values;
  FgmOutcome out;
  if (values.size() > 2) {
    FGM_ASSERT(hooks.resume == nullptr);
    out = train_one_vs_rest(data, own ? &*own : nullptr, values, settings, budget, labels_start, schedule);
  } else {
    std::unique_ptr<RowSource> source;
    ClassRun run;
    if (own) {
      auto partitions = std::make_unique<PartitionSource>(*own, budget);
      run = partition_run(*partitions, *own, settings, budget, hooks, values, 1, false, labels_start, hooks.left_out);
      source = std::move(partitions);
    } else {
      source = store_source(*data.store, settings, budget);
      const int8_t* y = settings.labels ? settings.labels : data.store->labels();
      if (hooks.left_out) {  // a copy with the fold's rows at 0
        const uint64_t n = data.store->info().n_rows;
        run.labels_memory = budget.reserve(n, "fold training labels", "use fewer training rows");
        run.labels.emplace_back(n);
        for (uint64_t i = 0; i < n; ++i) run.labels[0][i] = (*hooks.left_out)[0][i] ? int8_t{0} : y[i];
        y = run.labels[0].data();
      }
      run.rows = std::make_unique<FgmRows>(*source, settings, budget, hooks, std::vector<const int8_t*>{y});
    }
    FgmLoop loop(*run.rows, settings, budget, hooks);
    static_cast<TrainOutcome&>(out) = loop.run();
    out.communication = std::move(run.rows->communication());
    out.iterations_restored = loop.iterations_restored();
  }
  if (own) out.describe(*own);
  return out;
}

std::unique_ptr<RowSource> partition_source(OwnPartitions& own, MemoryBudget& budget) {
  return std::make_unique<PartitionSource>(own, budget);
}

}  // namespace fgm
