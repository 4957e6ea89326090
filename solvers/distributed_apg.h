// The FGM subproblem (31) solved data-parallel over row partitions
// (docs/distributed.md): accelerated proximal gradient (Algorithm 4) with the
// Moreau projection of ½(Σ_h ‖ω_h‖)² (Algorithm 3), where every quantity
// summed over rows — the loss P, the gradient ∇_ω P (one entry per selected
// column) and the column norms behind L₀ — is summed per partition and the
// partitions' sums added in the fixed tree of core/partition_sum.h. Every
// rank then holds the same reduced numbers and takes the same steps, so ω is
// the same bit for bit on any number of ranks that divides the partition
// count, and for any engine.threads (the sweeps are serial per partition).
// Rows, margins and dual variables stay on the rank that holds their
// partition. No bias (fgm.bias = false) in this first version.
#pragma once

#include <cstdint>
#include <vector>

#include "core/communicator.h"
#include "core/memory_budget.h"
#include "solvers/apg.h"

namespace fgm {

// One partition's rows of the selected columns.
struct PartitionColumns {
  uint64_t n = 0;                             // rows of the partition
  std::vector<int8_t> y;                      // ±1, n entries
  std::vector<std::vector<uint32_t>> rows;    // per selected column (partition-local rows, increasing)
  std::vector<std::vector<float>> values;
};

// This rank's share of the problem: its partitions [first_partition,
// first_partition + parts.size()) of `partitions`, and the batches of the
// selected columns (batch h: columns [batch_begin[h], batch_begin[h+1])).
struct DistributedProblem {
  Communicator* comm = nullptr;
  uint32_t partitions = 1;
  uint32_t first_partition = 0;
  std::vector<PartitionColumns> parts;
  std::vector<size_t> batch_begin;  // batches + 1 entries
  uint64_t total_rows = 0;          // rows over all partitions (all labelled)
  size_t columns() const { return batch_begin.empty() ? 0 : batch_begin.back(); }
};

struct DistributedApgResult {
  double objective = 0;
  double loss = 0;
  double regularizer = 0;
  int iterations = 0;
  int line_search_steps = 0;
  int restarts = 0;
  int reductions = 0;  // allreduce_partition_sums calls
  bool converged = false;
  bool stalled = false;
};

// Solves (31) over the problem's columns from ω = `w` (resized to the column
// count, new columns 0) and L = `lipschitz` (0: max_j C‖x_j‖²); writes ω and
// the L for the next solve back. options.bias must be false.
DistributedApgResult solve_distributed_apg(const DistributedProblem& problem, const ApgOptions& options,
                                           std::vector<double>& w, double& lipschitz);

// d = X_p ω for each of this rank's partitions (n_p entries each).
std::vector<std::vector<double>> partition_decisions(const DistributedProblem& problem, const std::vector<double>& w);

}  // namespace fgm
