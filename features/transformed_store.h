// A ShardStore that presents another store's values after features.transform
// (features/transforms.h), computed while streaming: nothing transformed is
// materialised. read_block transforms the values of the block it has just
// read into the caller's buffer and recomputes col_min/col_max of the
// transformed values (implicit zeros included), so every feature space, the
// selected-feature cache, de-biasing and HIK/additive scaling see transformed
// inputs through the ShardStore interface alone. Labels, info and the block
// plan pass through.
//
// Statistics: each stage that needs them (maxabs, scale, tfidf: one number
// per feature; row_l2, row_l1: one per row, over all features of the row)
// takes one streamed pass over the store with the preceding stages applied,
// and keeps its factors in memory (one per non-empty column, with its id, or
// n per-row doubles; reserved from the budget): a hashed id space costs
// nothing for its empty columns, whose factor is the absent one.
// Each stage's factors are cached in the store directory as
// transform-<key>.stats, key = XXH64 of the stage prefix ("log1p,row_l2") and
// the store checksum; the file is checksummed and written atomically, and a
// cache file that is corrupt, truncated or of another store or prefix is
// recomputed (and rewritten), never trusted. A store directory that cannot be
// written only loses the cache.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/memory_budget.h"
#include "core/partition_sum.h"
#include "features/transforms.h"
#include "io/model_file.h"
#include "io/shard_store.h"

namespace fgm {

// features.transform on the row partitions of a partitioned store (engine/
// distributed_fgm.cpp): the statistics are those of all partitions' rows.
// Per per-feature stage, each partition's statistics (keys: the columns it
// holds, increasing) are combined by `combine` into all partitions' (the sum
// in the partition tree, or the maximum for maxabs: the same result on every
// rank whatever the rank count), and the factors use `n_rows`, the rows of all
// partitions. Row statistics stay with their rows (a row lies in one
// partition). No cache file: a partition's statistics are not its own.
struct PartitionedTransformStatistics {
  uint64_t n_rows = 0;
  std::function<SparseSums(const std::vector<SparseSums>& local, bool is_max)> combine;
};

struct TransformStatsReport {
  uint64_t stages_computed = 0;   // streamed passes made
  uint64_t stages_from_cache = 0; // stages whose factors came from a cache file
};

class TransformedStore : public ShardStore {
 public:
  // Loads or computes every stage's statistics (streaming blocks of about
  // `block_bytes`).
  TransformedStore(std::unique_ptr<ShardStore> inner, std::vector<TransformKind> stages,
                   MemoryBudget& budget, uint64_t block_bytes);
  // The stages of every partition of `partitions` (this rank's), their
  // statistics over all partitions (see PartitionedTransformStatistics).
  static std::vector<std::unique_ptr<ShardStore>> over_partitions(
      std::vector<std::unique_ptr<ShardStore>> partitions, const std::vector<TransformKind>& stages,
      const PartitionedTransformStatistics& statistics, MemoryBudget& budget, uint64_t block_bytes);

  const StoreInfo& info() const override { return inner_->info(); }
  const std::string& dir() const override { return inner_->dir(); }
  const int8_t* labels() const override { return inner_->labels(); }
  const uint16_t* classes() const override { return inner_->classes(); }
  // The inner store's blocks; a unit-valued block's transformed values need
  // room of their own in the read buffer (its ones are shared and read-only).
  std::vector<BlockRef> plan_blocks(uint64_t target_bytes) const override;
  ColumnBlock read_block(const BlockRef& block, BlockBuffer& buffer) const override;
  void prefetch_block(const BlockRef& block) const override { inner_->prefetch_block(block); }
  void read_column(uint64_t feature, std::vector<uint32_t>& rows,
                   std::vector<float>& values) const override;
  float column_min(uint64_t feature) const override;
  float column_max(uint64_t feature) const override;

  // The stages with the statistics predict needs for `model`'s base features:
  // a per-feature stage records the selected base features' factors, or every
  // feature's (those whose factor is not the absent one) when a row stage
  // follows it, since a row's norm runs over all of its features.
  std::vector<ModelTransform> record_for(const Model& model) const;
  const TransformStatsReport& stats_report() const { return report_; }
  // The cache file of the statistics of stages [0, stage] (for tests).
  std::string cache_file(size_t stage) const;

 private:
  static uint64_t unit_values_bytes(const BlockRef& block);
  struct Stage {
    TransformKind kind;
    std::vector<uint64_t> ids;    // per-feature stages: the non-empty columns, increasing
    std::vector<double> factors;  // per id, or per row (n); empty: none needed
    double absent_factor = 1;     // per-feature stages: the factor of a column not in `ids`
    Reservation memory;
    double factor_of(uint64_t feature) const {
      auto it = std::lower_bound(ids.begin(), ids.end(), feature);
      return it != ids.end() && *it == feature ? factors[static_cast<size_t>(it - ids.begin())] : absent_factor;
    }
  };
  // Transforms value x of (row, feature) by stages [0, upto); feature_factor[k]
  // is stage k's factor of the feature (per-feature stages).
  double transformed(size_t upto, uint32_t row, const double* feature_factor, double x) const;
  // Every per-feature stage's factor of `feature` (one per stage).
  void factors_of(uint64_t feature, double* out) const;
  // `raw` of (feature, row) after every stage, as stored (float); a value
  // beyond the float range is an error naming them, not an inf in the data.
  float stored_value(uint64_t feature, uint32_t row, const double* feature_factor, float raw) const;
  void transform_values(uint64_t feature, const uint32_t* rows, float* values, size_t count) const;
  // Statistics before the factors are formed from them (accumulate), then the factors (finish).
  TransformedStore(std::unique_ptr<ShardStore> inner, std::vector<TransformKind> stages, MemoryBudget& budget,
                   uint64_t statistics_rows, bool);
  void accumulate_statistics(size_t stage, MemoryBudget& budget, uint64_t block_bytes);
  void finish_statistics(size_t stage);
  bool load_cache(size_t stage);
  void save_cache(size_t stage, MemoryBudget& budget) const;
  std::string prefix(size_t stage) const;

  std::unique_ptr<ShardStore> inner_;
  uint64_t statistics_rows_ = 0;  // the n of the factors: this store's rows, or all partitions'
  std::vector<Stage> stages_;
  TransformStatsReport report_;
};

// Wraps `store` in a TransformedStore when `names` is not empty.
std::unique_ptr<ShardStore> apply_feature_transforms(std::unique_ptr<ShardStore> store,
                                                     const std::vector<std::string>& names,
                                                     MemoryBudget& budget, uint64_t block_bytes);
// The same for this rank's partitions of a partitioned store.
std::vector<std::unique_ptr<ShardStore>> apply_partitioned_feature_transforms(
    std::vector<std::unique_ptr<ShardStore>> partitions, const std::vector<std::string>& names,
    const PartitionedTransformStatistics& statistics, MemoryBudget& budget, uint64_t block_bytes);
// The model's transforms if `store` is a TransformedStore (else nothing).
void record_feature_transforms(const ShardStore& store, Model& model);

}  // namespace fgm
