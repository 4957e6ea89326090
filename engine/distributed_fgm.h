// The FGM outer loop (engine/fgm_trainer.h) on a partitioned store
// (io/partitioned_store.h), data-parallel over the ranks of a Communicator
// (docs/distributed.md). Each rank opens only its own partitions. Per outer
// iteration:
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
#include <functional>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/memory_budget.h"
#include "engine/fgm_trainer.h"
#include "engine/one_vs_rest.h"
#include "engine/own_partitions.h"
#include "io/partitioned_store.h"

namespace fgm {

// A run of solver "fgm" (engine/one_vs_rest.h FgmOutcome) and the
// partitioned run; one-vs-rest: `communication` holds every
// class run's records (class_index set).
struct DistributedOutcome : FgmOutcome, PartitionedRun {};

// The hooks of a distributed run, on every rank (TrainHooks: the path points
// carry this rank's rows). Resume checkpoints (the CLI: rank 0 writes them,
// every rank reads the same one): a TrainProgress of a distributed run holds
// the batches, ω, L_t and the iteration log, not α: α lives with its rows,
// and is formed again on each rank from ω exactly as the solve formed it
// (apg_decision_values), so a resumed run repeats the uninterrupted run's
// arithmetic bit for bit.
struct DistributedHooks : TrainHooks {
  // Rows left out of the fit (fgm path's cross-validation folds): per own
  // partition, one entry per row, nonzero = left out (its label is 0, as with
  // TrainSettings::labels on one store: α_i = 0, in no sum). Null: every row.
  // Binary stores only.
  const std::vector<std::vector<uint8_t>>* left_out = nullptr;
};

// A binary store trains one model; more label values train one-vs-rest
// (no resume checkpoints then, as on one store: hooks.resume must be null),
// with linear features and groups in lockstep (the classes share each
// scoring pass; kSequential: one class after another, the same models).
// `transforms`: features.transform, its statistics over all partitions
// (features/transformed_store.h PartitionedTransformStatistics).
DistributedOutcome train_fgm_distributed(Communicator& comm, const std::string& store_dir,
                                         const TrainSettings& settings, MemoryBudget& budget,
                                         const DistributedHooks& hooks = {},
                                         const std::vector<std::string>& transforms = {},
                                         OneVsRestSchedule schedule = OneVsRestSchedule::kLockstepWherePossible);

}  // namespace fgm
