// solver = "pnorm_kta" with kta.kernel = "linear" on a partitioned store,
// data-parallel over the ranks of a Communicator (docs/distributed.md,
// "p-norm KTA"). The linear alignment a_i = (xᵀỹ)² / ‖x − μ1‖²
// (solvers/pnorm_kta/alignment.h) needs, per column, Σx, Σxỹ and the stored
// entries' count (first streamed pass over each own partition), then
// Σ_nz (x − μ)² with the global mean μ (second pass), each added over the
// partitions in the fixed partition tree (core/partition_sum.h, sparse: only
// the partitions' non-empty columns travel), and whether the column is
// constant (its min and max over all partitions, exact: one allgather). ỹ
// comes from the global class counts, so every row's ỹ is the same for every
// rank count. The alignments are then the same bits on every rank for every
// rank count dividing the partition count; the p-path follows in memory,
// identically on every rank, and the linear SVM of each point is the
// engine's APG over this rank's partitions (solve_apg over ApgRowPart parts,
// sums in the partition tree), the same model on every rank.
#pragma once

#include <memory>
#include <string>

#include "core/communicator.h"
#include "core/memory_budget.h"
#include "engine/own_partitions.h"
#include "engine/pnorm_kta_path.h"

namespace fgm {

// This rank's partitions as a KTA run's rows (engine/pnorm_kta_path.h
// KtaData, run_kta_path and train_kta_model over them are collectives);
// kernel must be linear. `run` records the communication's phases: iteration
// 0 "labels" and "alignments"; a path's point k (1-based) "svm" as iteration
// k; fgm train's model "svm" as iteration 1.
std::unique_ptr<KtaData> open_kta_partitions(Communicator& comm, const std::string& dir, const KtaSettings& settings,
                                             MemoryBudget& budget, PartitionedRun& run);

}  // namespace fgm
