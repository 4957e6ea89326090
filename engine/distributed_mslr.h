// The MSLR cutting-plane loop (engine/mslr_trainer.h) on a partitioned store
// (io/partitioned_store.h), data-parallel over the ranks of a Communicator
// (docs/distributed.md, "MSLR"). Each rank opens only its own partitions
// (engine/own_partitions.h); α and C − α stay with their rows. Per iteration:
//   1. scoring: c = Σ_i α_i y_i x_i over all rows by column ranges
//      (OwnPartitions::score_by_ranges, as FGM's linear pass: sparse
//      partition-tree sums, each rank's top list, one allgather); the
//      constraint d^t is the top r of c_j² by the single-store rules
//      (engine/mslr_loop.h);
//   2. each rank reads its rows of the new columns;
//   3. the subproblem over the rank's partitions as row parts
//      (solvers/mslr/smoothed_minimax.h: CoCoA+ rounds with σ' = P, every row
//      sum reduced in the partition tree).
// The model depends on the partition count P, not on the rank count or
// engine.threads; with P = 1 it is the single-store model. Linear features,
// binary labels. Path checkpoints (settings.checkpoints, hooks.on_checkpoint)
// as on one store. Resume: hooks.on_state gives, on every rank, the state
// with alpha and beta of this rank's rows only (its partitions in order); a
// resumed run takes the same (settings.resume) on the same rank count.
#pragma once

#include <memory>
#include <string>

#include "core/communicator.h"
#include "core/memory_budget.h"
#include "engine/own_partitions.h"
#include "engine/mslr_loop.h"

namespace fgm {

// This rank's partitions as the loop's rows (engine/mslr_loop.h run_mslr over
// them is a collective; the hooks run on every rank, on_final_decision is not
// called). `settings.labels` must be unset. `run` records this rank's
// communication per phase and iteration.
std::unique_ptr<MslrRows> open_mslr_partitions(Communicator& comm, const std::string& dir, const MslrSettings& settings,
                                               MemoryBudget& budget, PartitionedRun& run);

}  // namespace fgm
