// Solver "fgm" over its data: the single store, or a partitioned store
// (io/partitioned_store.h) data-parallel over the ranks of a Communicator
// (docs/distributed.md), where each rank opens only its own partitions. Per
// outer iteration on partitions:
//   1. scoring: the space's pass over this rank's partitions
//      (features/feature_space.h), every sum over rows added in the fixed
//      partition tree (core/partition_sum.h): the same top-B on every rank;
//   2. each rank reads its rows of the new columns;
//   3. the subproblem is solved by the single-store APG (solvers/apg.h) over
//      this rank's partitions, every row sum reduced in the partition tree;
//   4. each rank forms α (Theorem 3) on its own rows.
// Same store and settings give the same model bit for bit for every rank
// count dividing the partition count and any engine.threads. What runs on
// partitions, and what the CLI refuses naming the key: docs/distributed.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/memory_budget.h"
#include "engine/fgm_trainer.h"
#include "engine/one_vs_rest.h"
#include "engine/own_partitions.h"

namespace fgm {

// The hooks of a run on either backend, on every rank (TrainHooks: the path
// points carry this rank's rows; a resume checkpoint, written by rank 0 and
// read by every rank, holds no α: engine/resume_checkpoint.h).
struct DistributedHooks : TrainHooks {
  // Rows left out of the fit (fgm path's cross-validation folds): per own
  // part (the single store: one), one entry per row, nonzero = left out (its
  // label is 0: α_i = 0, in no sum). Null: every row. Binary stores only.
  const std::vector<std::vector<uint8_t>>* left_out = nullptr;
};

// The data solver "fgm" trains on: the single store (the one-partition
// case, as the caller opened it: ingested, transformed, resident when it
// fits) or, with `store` null, this rank's partitions of the partitioned
// store `store_dir` over `comm`.
struct FgmData {
  Communicator& comm;
  const ShardStore* store = nullptr;
  std::string store_dir = {};
  // features.transform on partitions, its statistics over all partitions
  // (features/transformed_store.h PartitionedTransformStatistics).
  std::vector<std::string> transforms = {};
};

// Solver "fgm" on either backend: a binary store trains one model (resumed
// from hooks.resume, hooks.left_out's rows left out); more label values
// train one-vs-rest (no resume checkpoints: hooks.resume must be null), with
// linear features and groups in lockstep (the classes share each scoring
// pass; kSequential: one class after another, the same models).
FgmOutcome train_fgm_on(const FgmData& data, const TrainSettings& settings, MemoryBudget& budget,
                        const DistributedHooks& hooks = {},
                        OneVsRestSchedule schedule = OneVsRestSchedule::kLockstepWherePossible);

}  // namespace fgm
