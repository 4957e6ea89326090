#include "engine/own_partitions.h"

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"
#include "core/messages.h"
#include "engine/fgm_trainer.h"
#include "features/block_scores.h"
#include "features/feature_groups.h"

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
    : comm_(comm),
      dir_(dir),
      manifest_(read_partition_manifest(dir)),
      scheduler_(scheduler),
      block_bytes_(block_bytes),
      budget_(budget) {
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
    // A part of the same shape from another store (other values or labels)
    // must not join the run: its checksum is bound to this store at ingest.
    if (!manifest_.part_checksums.empty() && info.store_checksum != manifest_.part_checksums[p])
      throw Error(ErrorKind::kCorruption, msg::partition_not_of_store(partition_dir(dir_, p), kPartitionManifestName,
                                                                      info.store_checksum, manifest_.part_checksums[p]));
    SchedulerOptions resident_choice;
    part.resident = reserve_resident_store(info, budget, resident_choice);
    open_stream(part, resident_choice.keep_resident, budget);
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

std::vector<double> OwnPartitions::class_values(bool at_least_two) {
  std::vector<double> mine;
  for (const auto& part : own_)
    for (double v : part.store->info().class_values) mine.push_back(v);
  std::vector<double> values = sorted_union_of_ranks(comm_, mine);
  if (at_least_two && values.size() < 2)
    throw Error(ErrorKind::kConfig, fmt::format("{} has {} distinct label value(s): training needs at least two",
                                                dir_, values.size()));
  return values;
}

std::vector<int8_t> OwnPartitions::binary_labels(size_t q, double positive) const {
  const StoreInfo& info = own_[q].store->info();
  const uint16_t* classes = own_[q].store->classes();
  std::vector<int8_t> y(info.n_rows);
  for (uint64_t i = 0; i < info.n_rows; ++i) y[i] = info.class_values[classes[i]] == positive ? 1 : -1;
  return y;
}

std::vector<uint16_t> OwnPartitions::class_indices(size_t q, const std::vector<double>& values) const {
  const StoreInfo& info = own_[q].store->info();
  const uint16_t* classes = own_[q].store->classes();
  std::vector<uint16_t> index(info.n_rows);
  for (uint64_t i = 0; i < info.n_rows; ++i)
    index[i] = static_cast<uint16_t>(std::lower_bound(values.begin(), values.end(), info.class_values[classes[i]]) -
                                     values.begin());
  return index;
}

std::vector<double> OwnPartitions::sum(const std::vector<std::vector<double>>& local, size_t length) {
  return allreduce_partition_sums(comm_, manifest_.partitions, range_.first, local, length);
}

SparseSums OwnPartitions::sum(const std::vector<SparseSums>& local) {
  return allreduce_partition_sparse_sums(comm_, manifest_.partitions, range_.first, local);
}

SparseSums OwnPartitions::reduce_scatter(const std::function<SparseSums(size_t)>& partial,
                                         const std::vector<ColumnSpans>& wanted, Reservation* memory) {
  return reduce_scatter_partition_sparse_sums(
      comm_, manifest_.partitions, range_.first, range_.count, [&](uint32_t p) { return partial(p - range_.first); },
      wanted, memory);
}

SparseSums OwnPartitions::partition_column_dots(size_t q, const double* a, size_t K, uint64_t& bytes_streamed) {
  SparseSums out;
  out.keys.reserve(own_[q].store->info().nonempty_columns * K);
  out.values.reserve(own_[q].store->info().nonempty_columns * K);
  const PassStats pass = stream_blocks<SparseSums>(
      *own_[q].stream, own_[q].blocks, "scoring",
      [&](const BlockRef&, const ColumnBlock& block) {
        SparseSums dots;
        dots.keys.resize(block.column_count * K);
        for (uint32_t k = 0; k < block.column_count; ++k)
          for (size_t r = 0; r < K; ++r) dots.keys[k * K + r] = block.column_ids[k] * K + r;
        dots.values.resize(block.column_count * K);
        if (K == 1) {
          block_column_dots(block, a, dots.values.data());
        } else {
          std::vector<double> acc(5 * K);
          block_column_dots_many(block, a, K, acc.data(), dots.values.data());
        }
        return dots;
      },
      [&](SparseSums&& block) {
        if (!block.keys.empty() && !out.keys.empty() && block.keys.front() <= out.keys.back())
          throw Error(ErrorKind::kInternal, "scoring: blocks of a partition out of column order");
        out.keys.insert(out.keys.end(), block.keys.begin(), block.keys.end());
        out.values.insert(out.values.end(), block.values.begin(), block.values.end());
      },
      [K](const BlockRef& ref) { return ref.column_count * K * 2 * sizeof(double); });
  bytes_streamed += pass.bytes_streamed;
  return out;
}

namespace {

// The candidates [first, end) of rank `rank`: features, or groups.
ColumnSpans candidates_of_rank(const FeatureGroups* groups, uint64_t n_features, int ranks, int rank) {
  return column_range_of_rank(groups ? groups->n_groups : n_features, ranks, rank);
}

// Σ_i a_i x_ij of column j from a rank's sorted sums (an absent column is 0).
double dot_at(const SparseSums& dots, uint64_t j) {
  const auto it = std::lower_bound(dots.keys.begin(), dots.keys.end(), j);
  return it != dots.keys.end() && *it == j ? dots.values[static_cast<size_t>(it - dots.keys.begin())] : 0.0;
}

}  // namespace

const std::vector<ColumnSpans>& OwnPartitions::wanted_columns(const FeatureGroups* groups) {
  if (wanted_made_ && wanted_for_ == groups) return wanted_;
  wanted_.clear();
  for (int d = 0; d < comm_.size(); ++d) {
    const ColumnSpans candidates = candidates_of_rank(groups, manifest_.n_features, comm_.size(), d);
    if (!groups || candidates.spans.empty()) {
      wanted_.push_back(groups ? ColumnSpans{} : candidates);
      continue;
    }
    std::vector<uint64_t> ids;
    for (uint64_t g = candidates.spans[0].first; g < candidates.spans[0].second; ++g)
      for (uint64_t p = 0; p < groups->size(g); ++p) ids.push_back(groups->member(g, p));
    std::sort(ids.begin(), ids.end());
    wanted_.push_back(spans_of_sorted_ids(ids));
  }
  wanted_made_ = true;
  wanted_for_ = groups;
  return wanted_;
}

std::vector<ScoredCandidate> OwnPartitions::local_top(const SparseSums& dots, const FeatureGroups* groups,
                                                      const std::function<bool(uint64_t)>& is_selected, size_t B) {
  TopBCache top(B, &budget_);
  auto offer = [&](double s, uint64_t id) {
    if (s > 0 && top.may_admit(s) && !is_selected(id)) top.offer({s, id});
  };
  if (!groups) {
    for (size_t k = 0; k < dots.keys.size(); ++k) offer(dots.values[k] * dots.values[k], dots.keys[k]);
  } else {
    const ColumnSpans mine = candidates_of_rank(groups, manifest_.n_features, comm_.size(), comm_.rank());
    for (const auto& [first, end] : mine.spans)
      for (uint64_t g = first; g < end; ++g) {
        double s = 0;
        for (uint64_t p = 0; p < groups->size(g); ++p) {
          const double c = dot_at(dots, groups->member(g, p));
          s += c * c;
        }
        offer(s, g);
      }
  }
  Reservation unused;
  return top.take_sorted(&unused);
}

std::vector<int> OwnPartitions::selected_owners(const FeatureGroups* groups, const std::vector<uint64_t>& selected,
                                                const std::vector<uint64_t>& selected_group) const {
  const uint64_t n_candidates = groups ? groups->n_groups : manifest_.n_features;
  std::vector<int> owners(selected.size());
  for (size_t h = 0; h < selected.size(); ++h) {
    const uint64_t id = groups ? selected_group[h] : selected[h];
    if (id >= n_candidates) throw Error(ErrorKind::kInternal, "scoring: a selected candidate outside every rank's range");
    owners[h] = rank_of_id(id, n_candidates, comm_.size());
  }
  return owners;
}

std::vector<OwnPartitions::RangeScores> OwnPartitions::score_by_ranges(const FeatureGroups* groups,
                                                                   const std::vector<RangeRequest>& requests,
                                                                   uint64_t& bytes_streamed) {
  const size_t K = requests.size();
  FGM_ASSERT(fits_many(K));
  Reservation memory = budget_.reserve(0, "column dots of a distributed scoring pass",
                                       "use more ranks (more, smaller partitions) or more memory per rank");
  // Rank d's keys: those of its columns, for every request. Each partition's
  // dots (its non-empty columns) are made when the partition tree needs them
  // and added into their node at once.
  std::vector<ColumnSpans> wanted = wanted_columns(groups);
  for (ColumnSpans& w : wanted)
    for (auto& [first, end] : w.spans) first *= K, end *= K;
  SparseSums dots = reduce_scatter(
      [&](size_t q) {
        if (K == 1) return partition_column_dots(q, requests[0].a[q], 1, bytes_streamed);
        Reservation duals = budget_.reserve(rows(q) * K * sizeof(double), "interleaved dual vectors of a partition",
                                            "use more ranks (more, smaller partitions) or more memory per rank");
        std::vector<double> a(rows(q) * K);
        for (size_t k = 0; k < K; ++k) {
          const double* ak = requests[k].a[q];
          for (uint64_t i = 0; i < rows(q); ++i) a[i * K + k] = ak[i];
        }
        return partition_column_dots(q, a.data(), K, bytes_streamed);
      },
      wanted, &memory);
  // Each request's dots, as a pass of its own would have received them.
  std::vector<SparseSums> mine(K);
  if (K == 1) {
    memory.resize(16 * dots.keys.size());
    mine[0] = std::move(dots);
  } else {
    memory.resize(32 * dots.keys.size());
    for (SparseSums& d : mine) {
      d.keys.reserve(dots.keys.size() / K + 1);
      d.values.reserve(dots.keys.size() / K + 1);
    }
    for (size_t e = 0; e < dots.keys.size(); ++e) {
      SparseSums& d = mine[dots.keys[e] % K];
      d.keys.push_back(dots.keys[e] / K);
      d.values.push_back(dots.values[e]);
    }
  }
  // One allgather: per rank, its K top lists back to back, and [K list
  // lengths (none for one request), then each request's c_j of the selected
  // columns it owns, in increasing h].
  std::vector<std::vector<int>> owners(K);
  std::vector<ScoredCandidate> tops_mine;
  std::vector<double> second;
  for (size_t k = 0; k < K; ++k) {
    const std::vector<ScoredCandidate> top = local_top(mine[k], groups, requests[k].is_selected, requests[k].B);
    tops_mine.insert(tops_mine.end(), top.begin(), top.end());
    if (K > 1) second.push_back(static_cast<double>(top.size()));
  }
  for (size_t k = 0; k < K; ++k) {
    const std::vector<uint64_t>& selected = *requests[k].selected;
    owners[k] = selected_owners(groups, selected, *requests[k].selected_group);
    for (size_t h = 0; h < selected.size(); ++h)
      if (owners[k][h] == comm_.rank()) second.push_back(dot_at(mine[k], selected[h]));
  }
  const auto [tops, values] = allgather_lists(comm_, tops_mine, second);
  std::vector<RangeScores> out(K);
  std::vector<std::unique_ptr<TopBCache>> merged(K);
  for (size_t k = 0; k < K; ++k) {
    merged[k] = std::make_unique<TopBCache>(requests[k].B, &budget_);
    out[k].selected_dots.assign(requests[k].selected->size(), 0.0);
  }
  size_t next_top = 0, next_value = 0;
  for (int d = 0; d < comm_.size(); ++d) {
    std::vector<size_t> lengths(K, tops.size());  // one request: every rank's list in rank order
    if (K > 1)
      for (size_t k = 0; k < K; ++k) lengths[k] = static_cast<size_t>(values[next_value++]);
    for (size_t k = 0; k < K; ++k)
      for (size_t l = 0; l < lengths[k] && next_top < tops.size(); ++l) merged[k]->offer(tops[next_top++]);
    for (size_t k = 0; k < K; ++k)
      for (size_t h = 0; h < owners[k].size(); ++h)
        if (owners[k][h] == d) out[k].selected_dots[h] = values[next_value++];
  }
  for (size_t k = 0; k < K; ++k) out[k].top = merged[k]->take_sorted(&out[k].top_memory);
  return out;
}

}  // namespace fgm
