#include "engine/distributed_exclusive.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/error.h"
#include "engine/model_provenance.h"

namespace fgm {

PartitionedDesign::PartitionedDesign(OwnPartitions& own, MemoryBudget& budget) : own_(own), budget_(budget) {
  std::vector<uint64_t> mine;
  for (size_t q = 0; q < own.size(); ++q) {
    auto part = std::make_unique<exclusive::StreamedDesign>(*own[q].stream, own[q].blocks, budget);
    mine.insert(mine.end(), part->column_ids().begin(), part->column_ids().end());
    parts_.push_back(std::move(part));
  }
  std::sort(mine.begin(), mine.end());
  mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
  {
    Reservation gathered = budget.reserve(2 * mine.size() * sizeof(uint64_t) * static_cast<uint64_t>(own.comm().size()),
                                          "exclusive: every rank's column ids", "use fewer ranks per node");
    ids_ = sorted_union_of_ranks(own.comm(), mine);
  }
  for (const auto& part : parts_) {
    std::vector<uint64_t> map(part->columns());
    for (uint64_t k = 0; k < part->columns(); ++k)
      map[k] = static_cast<uint64_t>(std::lower_bound(ids_.begin(), ids_.end(), part->column_id(k)) - ids_.begin());
    part_columns_.push_back(std::move(map));
  }
  reserve_buffers();
}

PartitionedDesign::PartitionedDesign(OwnPartitions& own, std::vector<std::unique_ptr<exclusive::Design>> parts,
                                     std::vector<std::vector<uint64_t>> part_columns, std::vector<uint64_t> ids,
                                     MemoryBudget& budget)
    : own_(own), budget_(budget), parts_(std::move(parts)), part_columns_(std::move(part_columns)),
      ids_(std::move(ids)) {
  FGM_ASSERT(parts_.size() == own.size() && part_columns_.size() == parts_.size());
  reserve_buffers();
}

// The ids, the column maps, one part's vector and each own partition's
// column sums (the tree reduction's input and its result).
void PartitionedDesign::reserve_buffers() {
  row_offset_.assign(1, 0);
  uint64_t mapped = 0, widest = 0;
  for (size_t q = 0; q < parts_.size(); ++q) {
    row_offset_.push_back(row_offset_.back() + parts_[q]->rows());
    mapped += part_columns_[q].size();
    widest = std::max<uint64_t>(widest, part_columns_[q].size());
  }
  const uint64_t p = ids_.size();
  memory_ = budget_.reserve((p + mapped + widest + (parts_.size() + 1) * p) * sizeof(double),
                            "exclusive: this rank's column maps and partial sums of X'r",
                            "use more ranks (fewer partitions per rank) or fewer features");
  part_vector_.resize(widest);
  part_sums_.assign(parts_.size(), std::vector<double>(p));
}

void PartitionedDesign::sum_rows(size_t count, const exclusive::RowPartial& partial, double* out) {
  std::vector<std::vector<double>> local(parts_.size(), std::vector<double>(count));
  for (size_t q = 0; q < parts_.size(); ++q) partial(row_offset_[q], row_offset_[q + 1], local[q].data());
  const std::vector<double> total = own_.sum(local, count);
  std::copy(total.begin(), total.end(), out);
}

void PartitionedDesign::all_rows(const double* local, std::vector<double>& all) {
  const std::vector<uint8_t> bytes = own_.comm().allgather(local, rows() * sizeof(double));
  all.resize(bytes.size() / sizeof(double));
  if (!bytes.empty()) std::memcpy(all.data(), bytes.data(), bytes.size());
}

void PartitionedDesign::multiply(const double* x, double* z) {
  const auto start = std::chrono::steady_clock::now();
  for (size_t q = 0; q < parts_.size(); ++q) {
    const std::vector<uint64_t>& map = part_columns_[q];
    for (size_t k = 0; k < map.size(); ++k) part_vector_[k] = x[map[k]];
    parts_[q]->multiply(part_vector_.data(), z + row_offset_[q]);
  }
  ++passes_;
  pass_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A column a partition lacks adds an exact zero in the tree.
void PartitionedDesign::multiply_transposed(const double* r, double* g) {
  const auto start = std::chrono::steady_clock::now();
  for (size_t q = 0; q < parts_.size(); ++q) {
    const std::vector<uint64_t>& map = part_columns_[q];
    parts_[q]->multiply_transposed(r + row_offset_[q], part_vector_.data());
    std::fill(part_sums_[q].begin(), part_sums_[q].end(), 0.0);
    for (size_t k = 0; k < map.size(); ++k) part_sums_[q][map[k]] = part_vector_[k];
  }
  const std::vector<double> total = own_.sum(part_sums_, ids_.size());
  std::copy(total.begin(), total.end(), g);
  ++passes_;
  pass_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Each own partition's columns among `sorted_columns`, in memory (the
// partition's own restrict_columns); no communication.
std::unique_ptr<exclusive::Design> PartitionedDesign::restrict_columns(const std::vector<uint64_t>& sorted_columns) {
  std::vector<std::unique_ptr<exclusive::Design>> parts;
  std::vector<std::vector<uint64_t>> part_columns;
  for (size_t q = 0; q < parts_.size(); ++q) {
    std::vector<uint64_t> kept, positions;
    for (uint64_t k = 0; k < part_columns_[q].size(); ++k) {
      auto it = std::lower_bound(sorted_columns.begin(), sorted_columns.end(), part_columns_[q][k]);
      if (it == sorted_columns.end() || *it != part_columns_[q][k]) continue;
      kept.push_back(k);
      positions.push_back(static_cast<uint64_t>(it - sorted_columns.begin()));
    }
    parts.push_back(parts_[q]->restrict_columns(kept));
    part_columns.push_back(std::move(positions));
  }
  std::vector<uint64_t> ids;
  ids.reserve(sorted_columns.size());
  for (uint64_t k : sorted_columns) ids.push_back(ids_[k]);
  return std::make_unique<PartitionedDesign>(own_, std::move(parts), std::move(part_columns), std::move(ids),
                                             budget_);
}

namespace {

// This rank's partitions, their design and labels, the groups, and the
// communication of each phase.
class PartitionedExclusiveData final : public ExclusiveData {
 public:
  PartitionedExclusiveData(Communicator& comm, const std::string& dir, const ExclusiveSettings& settings,
                           MemoryBudget& budget, PartitionedRun& run)
      : comm_(comm), run_(run) {
    begin_fit();
    SchedulerOptions scheduler;
    scheduler.threads = settings.threads;
    own_ = std::make_unique<OwnPartitions>(comm, dir, scheduler, settings.block_bytes, budget);
    run.describe(*own_);
    design_ = std::make_unique<PartitionedDesign>(*own_, budget);
    read_classes();
    labels_memory_ = budget.reserve(design_->rows() * sizeof(double), "exclusive: labels of this rank's rows");
    y_.resize(design_->rows());
    groups_ = exclusive_groups_for(settings, design_->column_ids(), run.manifest.n_features,
                                   run.manifest.index_base, budget, &source_);
    base_ = model_of_partitioned_store(run.manifest, class_values_.front(), class_values_.back(), "exclusive");
    end_fit(0, "setup");
  }

  const std::vector<double>& class_values() const override { return class_values_; }
  const std::vector<uint64_t>& class_counts() const override { return class_counts_; }
  const std::string& where() const override { return own_->dir(); }
  void use_random_groups(uint64_t m, uint64_t seed, MemoryBudget& budget) override {
    groups_ = exclusive::ExclusiveGroups();  // the old groups' reservation first
    groups_ = exclusive::random_groups(design_->columns(), m, seed, budget);
    source_ = "random";
  }

  ExclusiveProblemView problem_of_class(size_t c) override {
    auto y = y_.begin();
    for (size_t q = 0; q < own_->size(); ++q)
      for (int8_t label : own_->binary_labels(q, class_values_[c])) *y++ = label;
    return {*design_, y_, groups_, source_, base_};
  }

  void begin_fit() override { before_ = comm_.stats(); }
  void end_fit(int step, const char* phase) override {
    run_.communication.push_back({step, phase, comm_.stats() - before_});
  }

 private:
  // The classes of all partitions and their row counts (exact: counts are
  // integers far below 2^53).
  void read_classes() {
    class_values_ = own_->class_values();
    const size_t c = class_values_.size();
    std::vector<std::vector<double>> counts;
    for (size_t q = 0; q < own_->size(); ++q) {
      const StoreInfo& info = (*own_)[q].store->info();
      std::vector<double> mine(c, 0.0);
      for (size_t k = 0; k < info.class_values.size(); ++k) {
        const auto at = std::lower_bound(class_values_.begin(), class_values_.end(), info.class_values[k]);
        mine[static_cast<size_t>(at - class_values_.begin())] += static_cast<double>(info.class_counts[k]);
      }
      counts.push_back(std::move(mine));
    }
    for (double v : own_->sum(counts, c)) class_counts_.push_back(static_cast<uint64_t>(v));
  }

  Communicator& comm_;
  PartitionedRun& run_;
  CommunicationStats before_;
  std::unique_ptr<OwnPartitions> own_;
  std::unique_ptr<PartitionedDesign> design_;
  std::vector<double> class_values_;
  std::vector<uint64_t> class_counts_;
  Reservation labels_memory_;
  std::vector<double> y_;
  exclusive::ExclusiveGroups groups_;
  std::string source_;
  Model base_;
};

}  // namespace

std::unique_ptr<ExclusiveData> open_exclusive_partitions(Communicator& comm, const std::string& dir,
                                                         const ExclusiveSettings& settings, MemoryBudget& budget,
                                                         PartitionedRun& run) {
  return std::make_unique<PartitionedExclusiveData>(comm, dir, settings, budget, run);
}

}  // namespace fgm
