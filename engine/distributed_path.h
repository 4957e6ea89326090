// `fgm path` (solver = fgm) on a partitioned store, data-parallel over the
// ranks of a Communicator, with or without mpirun (docs/distributed.md,
// section "fgm path"). The path's steps are engine/fgm_path.h's (PathTrainer);
// its FGM runs are engine/distributed_fgm.h's: path.features is one
// distributed run with checkpoints at the counts, path.B / path.C one run per
// value. Each point is de-biased data-parallel (engine/debias.h over the
// rank's partitions, row sums in the partition tree), so every point's model
// and refit are the same bits for every rank count dividing the partition
// count and any engine.threads. Every rank runs the whole path (the
// collectives need all of them); only rank 0 reads data.test and
// data.validation and evaluates the points on them. path.folds = k: the folds
// of engine/path_selection.h assign_folds over all rows (each rank computes
// its own rows' folds from the per-partition label counts), each fold's path
// trained with its held-out rows left out (DistributedHooks::left_out), each
// point's held-out decision values and labels gathered on rank 0 in row order
// for its accuracy and AUC: the single store's numbers for the same models. A
// run resumes from the PathHooks' state (every rank reads the same
// checkpoint; rank 0 writes it from on_progress) as the single-store path
// does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/memory_budget.h"
#include "engine/distributed_fgm.h"
#include "engine/fgm_path.h"

namespace fgm {

struct DistributedPathOutcome {
  PathOutcome path;  // evaluations and the choice on rank 0 only
  PartitionManifest manifest;
  int ranks = 1;
  uint32_t own_partitions = 0;
  // This rank's communication: per FGM run of the path and phase (the
  // trainer's records; `iteration` counts within its run), in total, of the
  // cross-validation (fold assignment, the folds' runs, the held-out
  // gathers) and of the points' refits (the rest).
  std::vector<std::vector<CommunicationRecord>> communication;
  CommunicationStats total_communication, cv_communication, refit_communication;
  uint64_t budget_peak = 0;  // this rank's MemoryBudget peak
};

// Throws Error(kConfig) msg::multiclass_path_unsupported when the partitions
// of `store_dir` hold more than two label values together (a path is binary,
// as on one store). Collective: every rank opens its own partitions' stores
// and the label values are gathered; call before anything is written.
void reject_multiclass_partitioned_path(Communicator& comm, const std::string& store_dir, MemoryBudget& budget);

DistributedPathOutcome run_fgm_path_distributed(Communicator& comm, const std::string& store_dir,
                                                const PathSettings& settings, MemoryBudget& budget,
                                                const PathHooks& hooks = {});

}  // namespace fgm
