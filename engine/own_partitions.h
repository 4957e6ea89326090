// The partitions of a partitioned store (io/partitioned_store.h) that this
// rank owns, opened for streamed passes, and the collectives every
// data-parallel solver runs over them (docs/distributed.md). Rank r of K
// opens partitions [r·P/K, (r+1)·P/K) only; sums over rows go through the
// fixed partition tree (core/partition_sum.h), so their bits do not depend on
// K. Shared by the distributed FGM trainer and the other solvers' distributed
// runs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/memory_budget.h"
#include "core/partition_sum.h"
#include "features/block_stream.h"
#include "io/partitioned_store.h"
#include "io/shard_store.h"
#include "solvers/apg_reduction.h"

namespace fgm {

// The error when `ranks` cannot deal out `partitions` evenly (empty if they can).
std::string partition_mismatch(const std::string& store_dir, uint32_t partitions, int ranks);

// One of this rank's partitions, opened.
struct OwnPartition {
  Reservation resident;  // the partition's pages kept between passes, when they fit (as the single store does)
  std::unique_ptr<ShardStore> store;
  std::unique_ptr<BlockStream> stream;
  std::vector<BlockRef> blocks;
};

class OwnPartitions {
 public:
  // Reads the manifest and opens this rank's partitions, each resident when
  // it fits half of what the budget has left (as a single store is), with
  // scoring blocks of `block_bytes` (engine.block_bytes). Throws kConfig when
  // comm.size() does not divide the partition count, kCorruption when a
  // partition disagrees with the manifest.
  OwnPartitions(Communicator& comm, const std::string& dir, const SchedulerOptions& scheduler, uint64_t block_bytes,
                MemoryBudget& budget);

  const std::string& dir() const { return dir_; }
  const PartitionManifest& manifest() const { return manifest_; }
  PartitionRange range() const { return range_; }
  size_t size() const { return own_.size(); }
  OwnPartition& operator[](size_t q) { return own_[q]; }
  const OwnPartition& operator[](size_t q) const { return own_[q]; }
  uint64_t rows(size_t q) const { return own_[q].store->info().n_rows; }
  uint64_t own_rows() const;
  // The partition-tree reduction of row sums over all ranks (for solvers/apg).
  PartitionTreeRowSums& reduction() { return *reduction_; }
  Communicator& comm() { return comm_; }

  // The sorted distinct label values of all partitions (a partition may lack
  // a class); a collective.
  std::vector<double> class_values();
  // Σ over every partition's vectors (`local[q]` of own partition q, each of
  // `length`), in the partition tree, on every rank; a collective.
  std::vector<double> sum(const std::vector<std::vector<double>>& local, size_t length);
  // c = Σ_i a_i x_i over all rows of all partitions (manifest().n_features
  // entries), the same bits on every rank for every rank count: each own
  // partition is streamed with the tiled kernel (features/block_scores.h) and
  // the partitions' vectors are added in the partition tree. `a[q]` holds own
  // partition q's row weights; `bytes_streamed` grows by the shard bytes read.
  std::vector<double> column_dots(const std::vector<std::vector<double>>& a, uint64_t& bytes_streamed);
  // Replaces the stores of this rank's partitions (in order) by what `wrap`
  // makes of them (features.transform: TransformedStores over all
  // partitions' statistics), with streams and block plans over the new ones.
  using StoreWrapper =
      std::function<std::vector<std::unique_ptr<ShardStore>>(std::vector<std::unique_ptr<ShardStore>>)>;
  void wrap_stores(const StoreWrapper& wrap, MemoryBudget& budget);

 private:
  Communicator& comm_;
  std::string dir_;
  PartitionManifest manifest_;
  PartitionRange range_;
  std::vector<OwnPartition> own_;
  std::unique_ptr<PartitionTreeRowSums> reduction_;
  SchedulerOptions scheduler_;
  uint64_t block_bytes_ = 0;
  void open_stream(OwnPartition& part, bool keep_resident, MemoryBudget& budget);
};

}  // namespace fgm
