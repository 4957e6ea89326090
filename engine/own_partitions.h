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
#include "cache/top_b_cache.h"
#include "core/partition_sum.h"
#include "features/block_stream.h"
#include "features/feature_space.h"
#include "io/partitioned_store.h"
#include "io/shard_store.h"
#include "solvers/apg_reduction.h"

namespace fgm {

struct FeatureGroups;

// The error when `ranks` cannot deal out `partitions` evenly (empty if they can).
std::string partition_mismatch(const std::string& store_dir, uint32_t partitions, int ranks);

// One of this rank's partitions, opened.
struct OwnPartition {
  Reservation resident;  // the partition's pages kept between passes, when they fit (as the single store does)
  std::unique_ptr<ShardStore> store;
  std::unique_ptr<BlockStream> stream;
  std::vector<BlockRef> blocks;
};

class OwnPartitions final : public SpacePartitions {
 public:
  // Reads the manifest and opens this rank's partitions, each resident when
  // it fits half of what the budget has left (as a single store is), with
  // scoring blocks of `block_bytes` (engine.block_bytes). Throws kConfig when
  // comm.size() does not divide the partition count, kCorruption when a
  // partition disagrees with the manifest.
  OwnPartitions(Communicator& comm, const std::string& dir, const SchedulerOptions& scheduler, uint64_t block_bytes,
                MemoryBudget& budget);

  const std::string& dir() const override { return dir_; }
  const PartitionManifest& manifest() const override { return manifest_; }
  PartitionRange range() const { return range_; }
  size_t size() const override { return own_.size(); }
  const ShardStore& store(size_t q) const override { return *own_[q].store; }
  OwnPartition& operator[](size_t q) { return own_[q]; }
  const OwnPartition& operator[](size_t q) const { return own_[q]; }
  uint64_t rows(size_t q) const { return own_[q].store->info().n_rows; }
  uint64_t own_rows() const;
  // The partition-tree reduction of row sums over all ranks (for solvers/apg).
  PartitionTreeRowSums& reduction() { return *reduction_; }
  Communicator& comm() override { return comm_; }

  // The sorted distinct label values of all partitions (a partition may lack
  // a class); a collective. `at_least_two`: fewer are a config error naming the store.
  std::vector<double> class_values(bool at_least_two = true);
  // Own partition q's rows as ±1 (+1: label `positive`), and as indices into
  // `values` (all partitions' class values, increasing).
  std::vector<int8_t> binary_labels(size_t q, double positive) const;
  std::vector<uint16_t> class_indices(size_t q, const std::vector<double>& values) const;
  // Σ over every partition's vectors (`local[q]` of own partition q, each of
  // `length`), in the partition tree, on every rank; a collective.
  std::vector<double> sum(const std::vector<std::vector<double>>& local, size_t length);
  // The same for sparse sums (core/partition_sum.h), and its reduce-scatter:
  // rank d gets the keys of `wanted[d]`, own partition q's sums made by
  // `partial(q)` when the tree needs them.
  SparseSums sum(const std::vector<SparseSums>& local) override;
  SparseSums reduce_scatter(const std::function<SparseSums(size_t)>& partial, const std::vector<ColumnSpans>& wanted,
                            Reservation* memory) override;
  // Replaces the stores of this rank's partitions (in order) by what `wrap`
  // makes of them (features.transform: TransformedStores over all
  // partitions' statistics), with streams and block plans over the new ones.
  using StoreWrapper =
      std::function<std::vector<std::unique_ptr<ShardStore>>(std::vector<std::unique_ptr<ShardStore>>)>;
  void wrap_stores(const StoreWrapper& wrap, MemoryBudget& budget);

  // Own partition q's Σ_i a_i x_ij over its non-empty columns only, as
  // (column id, value) with increasing ids (the partition's column directory,
  // so an id space of 2^63 costs what the partition's columns cost); for K
  // dual vectors interleaved row by row (a[i·K + k]), key j·K + k holds
  // vector k's dot of column j, the bits of a single vector's.
  SparseSums partition_column_dots(size_t q, const double* a, size_t K, uint64_t& bytes_streamed);

  // The scoring pass of linear features (groups == nullptr) or groups by
  // column ranges (docs/distributed.md, "Scoring by column ranges") for one
  // dual vector or several (one-vs-rest in lockstep). Request k scores its
  // duals a[k] (per own partition) with its own selection and batch size B:
  // rank r scores the candidates [⌊r·N/K⌋, ⌊(r+1)·N/K⌋) (N features or
  // groups) from the tree sums of their columns only (a reduce-scatter of the
  // sparse per-partition dots; several requests' dots of column j travel as
  // keys j·K + k, added as a single vector's), keeps its top-B of those not
  // `is_selected`, and one allgather of the lists gives every rank the same
  // top-B, equal to the top-B over all candidates (score s_j = c_j²,
  // s_g = Σ_{j∈g} c_j² with members in increasing order; ties to the smaller
  // id). The same allgather carries c_j of the `selected` columns (for (37)),
  // each from the rank that owns it (`selected_group[h]`: the group of
  // selected column h). Each request gets the bits a pass of its own would
  // give. Requires n_features·K < 2^64 (fits_many). Collectives: 2
  // (alltoallv, allgather); every buffer is reserved from the budget.
  std::vector<RangeScores> score_by_ranges(const FeatureGroups* groups, const std::vector<RangeRequest>& requests,
                                           uint64_t& bytes_streamed) override;
  // Whether K dual vectors' keys j·K + k fit 64 bits.
  bool fits_many(size_t K) const { return K >= 1 && manifest_.n_features <= UINT64_MAX / K; }

 private:
  // The columns whose sums rank d needs (the members of its candidates), every d.
  const std::vector<ColumnSpans>& wanted_columns(const FeatureGroups* groups);
  // The rank scoring each selected column's candidate.
  std::vector<int> selected_owners(const FeatureGroups* groups, const std::vector<uint64_t>& selected,
                                   const std::vector<uint64_t>& selected_group) const;
  std::vector<ScoredCandidate> local_top(const SparseSums& dots, const FeatureGroups* groups,
                                         const std::function<bool(uint64_t)>& is_selected, size_t B);

  Communicator& comm_;
  std::string dir_;
  PartitionManifest manifest_;
  PartitionRange range_;
  std::vector<OwnPartition> own_;
  std::unique_ptr<PartitionTreeRowSums> reduction_;
  SchedulerOptions scheduler_;
  uint64_t block_bytes_ = 0;
  void open_stream(OwnPartition& part, bool keep_resident, MemoryBudget& budget);
  MemoryBudget& budget_;
  bool wanted_made_ = false;
  const FeatureGroups* wanted_for_ = nullptr;  // the groups wanted_ was made for
  std::vector<ColumnSpans> wanted_;
};

// The communication of one phase of one outer iteration on this rank.
struct CommunicationRecord {
  int iteration = 0;
  std::string phase;  // "labels", "scoring", "solve", "diagnostics" (value span, chance level)
  CommunicationStats comm;
  int class_index = -1;  // one-vs-rest: the class run (FgmOutcome::classes) it belongs to
  std::vector<int> shared_by = {};  // one-vs-rest in lockstep: the classes a shared scoring pass served
};

// What every partitioned run reports besides its result (run.json's
// "distributed"): the store, the rank count, this rank's partitions and its
// communication.
struct PartitionedRun {
  std::vector<CommunicationRecord> communication;
  PartitionManifest manifest;
  int ranks = 1;
  uint32_t own_partitions = 0;
  // The store and the partitions that `own` opened.
  void describe(OwnPartitions& own) {
    manifest = own.manifest();
    ranks = own.comm().size();
    own_partitions = own.range().count;
  }
};

}  // namespace fgm
