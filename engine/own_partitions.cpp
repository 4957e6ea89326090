#include "engine/own_partitions.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "engine/fgm_trainer.h"
#include "features/block_scores.h"

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

OwnPartitions::OwnPartitions(Communicator& comm, const std::string& dir, const SchedulerOptions& scheduler,
                             uint64_t block_bytes, MemoryBudget& budget)
    : comm_(comm), dir_(dir), manifest_(read_partition_manifest(dir)), scheduler_(scheduler), block_bytes_(block_bytes) {
  if (const std::string e = partition_mismatch(dir_, manifest_.partitions, comm_.size()); !e.empty())
    throw Error(ErrorKind::kConfig, e);
  range_ = partitions_of_rank(manifest_.partitions, comm_.size(), comm_.rank());
  reduction_ = std::make_unique<PartitionTreeRowSums>(comm_, manifest_.partitions, range_.first);
  for (uint32_t k = 0; k < range_.count; ++k) {
    const uint32_t p = range_.first + k;
    OwnPartition part;
    part.store = ShardStore::open(partition_dir(dir_, p), budget);
    const StoreInfo& info = part.store->info();
    const uint64_t expected = manifest_.first_row[p + 1] - manifest_.first_row[p];
    if (info.n_rows != expected || info.n_features != manifest_.n_features)
      throw Error(ErrorKind::kCorruption,
                  fmt::format("{}: {} rows x {} features, but {} says {} x {}", partition_dir(dir_, p), info.n_rows,
                              info.n_features, kPartitionManifestName, expected, manifest_.n_features));
    const bool keep_resident = keeps_store_resident(info, budget);
    if (keep_resident)
      part.resident = budget.reserve(resident_store_bytes(info), "store pages kept resident between passes");
    open_stream(part, keep_resident, budget);
    own_.push_back(std::move(part));
  }
}

void OwnPartitions::open_stream(OwnPartition& part, bool keep_resident, MemoryBudget& budget) {
  SchedulerOptions options = scheduler_;
  options.keep_resident = keep_resident;
  part.stream = std::make_unique<BlockStream>(*part.store, options, budget);
  part.blocks = part.store->plan_blocks(
      scoring_block_bytes(block_bytes_, budget, part.store->info().n_rows, options.keep_resident));
}

void OwnPartitions::wrap_stores(const StoreWrapper& wrap, MemoryBudget& budget) {
  std::vector<std::unique_ptr<ShardStore>> stores;
  for (auto& part : own_) {
    part.stream.reset();
    stores.push_back(std::move(part.store));
  }
  stores = wrap(std::move(stores));
  for (size_t q = 0; q < own_.size(); ++q) {
    own_[q].store = std::move(stores[q]);
    open_stream(own_[q], own_[q].resident.bytes() > 0, budget);
  }
}

uint64_t OwnPartitions::own_rows() const {
  uint64_t rows = 0;
  for (const auto& part : own_) rows += part.store->info().n_rows;
  return rows;
}

std::vector<double> OwnPartitions::class_values() {
  std::vector<double> mine;
  for (const auto& part : own_)
    for (double v : part.store->info().class_values) mine.push_back(v);
  const std::vector<uint8_t> all = comm_.allgather(mine.data(), mine.size() * sizeof(double));
  std::vector<double> values(all.size() / sizeof(double));
  std::memcpy(values.data(), all.data(), all.size());
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

std::vector<double> OwnPartitions::sum(const std::vector<std::vector<double>>& local, size_t length) {
  return allreduce_partition_sums(comm_, manifest_.partitions, range_.first, local, length);
}

std::vector<double> OwnPartitions::column_dots(const std::vector<std::vector<double>>& a, uint64_t& bytes_streamed) {
  const uint64_t m = manifest_.n_features;
  struct BlockDots {
    std::vector<uint64_t> ids;
    std::vector<double> c;
  };
  std::vector<std::vector<double>> local;
  for (size_t q = 0; q < own_.size(); ++q) {
    std::vector<double> c(m, 0.0);
    const double* weights = a[q].data();
    const PassStats pass = stream_blocks<BlockDots>(
        *own_[q].stream, own_[q].blocks, "scoring",
        [&](const BlockRef&, const ColumnBlock& block) {
          BlockDots out;
          out.ids.assign(block.column_ids, block.column_ids + block.column_count);
          out.c.resize(block.column_count);
          block_column_dots(block, weights, out.c.data());
          return out;
        },
        [&](BlockDots&& block) {
          for (size_t k = 0; k < block.ids.size(); ++k) c[block.ids[k]] = block.c[k];
        },
        [](const BlockRef& ref) { return ref.column_count * 2 * sizeof(double); });
    bytes_streamed += pass.bytes_streamed;
    local.push_back(std::move(c));
  }
  return sum(local, m);
}

}  // namespace fgm
