// Exclusive-sparsity fits on a store, out of core (issue 11): FISTA over the
// whole design streams X twice per iteration (Xᵀr and Xw; once for pcp and
// licp, fused). The working set is a safe acceleration the paper does not
// have:
//   1. W = the features that can be nonzero: start from the violators at w = 0;
//   2. gather X_W into memory (one streamed pass) and solve the restricted
//      problem (the same algorithm, warm-started);
//   3. verify with one full streamed pass ρ ↦ Xᵀρ (ρ the per-row loss
//      derivative at the restricted solution; for the hinge, −y∘u with u the
//      dual of (11)): a zero weight k is optimal iff
//        |(Xᵀρ)_k| ≤ λ Σ_{g∋k} ‖w_g‖₁          (0 ∈ ∂ of (7)/(10) at w_k = 0)
//      (the ridge of (10) adds nothing at w_k = 0);
//   4. add the largest violators not in W (at most max(growth, |W|) per
//      round) and repeat; stop when the full pass finds none above
//      kkt_tolerance·‖Xᵀρ₀‖∞ (ρ₀ at w = 0). E-SVM with disjoint groups
//      stops on the full problem's certified gap instead, and until then
//      every positive violator is a candidate.
// The result is the full problem's optimum to the inner tolerance — tested
// against the plain full-gradient solve (working_set = false). X is any
// design whose restrict_columns gives the restricted problem: the store
// (StreamedDesign) or this rank's partitions (engine/distributed_exclusive.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/memory_budget.h"
#include "solvers/exclusive/design.h"
#include "solvers/exclusive/exclusive_groups.h"
#include "solvers/exclusive/fista_exclusive.h"

namespace fgm::exclusive {

struct WorkingSetOptions {
  bool enabled = true;
  uint64_t growth = 100;        // features added per round: at most max(growth, |W|)
  double kkt_tolerance = 1e-4;  // relative to ‖Xᵀρ₀‖∞
  int max_rounds = 100;
};

// One working-set round: the verification pass that found `added` violators
// (largest excess `violation`, relative) and the restricted solve that followed.
struct WorkingSetRound {
  uint64_t working_set = 0;  // |W| solved in this round
  uint64_t added = 0;
  uint64_t nonzeros = 0;
  double violation = 0;
  double objective = 0;
  int fista_iterations = 0;
  bool converged = false;
  double check_seconds = 0, solve_seconds = 0;
};

// Where a fit starts along a λ path: the previous λ's fit (its weights,
// margins, dual, working set, ‖X‖² and ‖Xᵀρ₀‖∞, which do not depend on λ).
struct ExclusiveWarmStart {
  std::vector<double> w;                // p
  std::vector<double> margins;          // Xw + b (n)
  double bias = 0;                      // b (FistaOptions::bias)
  std::vector<double> dual;             // licp: u (n), else empty
  std::vector<uint64_t> working_set;    // sorted compact columns (working set only)
  double gradient_scale = 0;            // ‖Xᵀρ₀‖∞ (working set only)
  double norm_squared = 0;              // ‖X‖² estimate of the full design (without the working set)
};

struct ExclusiveFit {
  std::vector<double> w;        // one per design column
  std::vector<double> margins;  // Xw + b
  double bias = 0;              // b (FistaOptions::bias; else 0)
  FistaResult last_solve;       // the last (restricted or full) FISTA solve
  int rounds = 0;               // restricted solves (0 without the working set)
  uint64_t working_set = 0;     // |W| at the end (p without it)
  int fista_iterations = 0;     // over all rounds
  uint64_t full_passes = 0;     // passes over the store (census excluded)
  double full_pass_seconds = 0; // their wall time
  double max_violation = 0;     // of the last verification, relative
  bool converged = false;       // inner solve converged and (with W) no violator left
  double objective_at_zero = 0; // the objective at w = 0 (the loss alone)
  std::vector<WorkingSetRound> round_log;  // one per restricted solve (one entry without W)
  std::vector<uint64_t> working_set_columns;  // W, sorted (working set only)
  double gradient_scale = 0;    // ‖Xᵀρ₀‖∞ of the first check (working set only)

  // The warm start of the next λ from this fit.
  ExclusiveWarmStart warm_start() const;
};

// `warm` (optional): start from a previous λ's fit on the same design and
// groups. With the working set, the first round solves on the previous W
// before any check; the checks and the result are those of a cold fit (tested:
// the same optimum within the tolerance).
ExclusiveFit fit_exclusive(Design& X, const std::vector<double>& y, const ExclusiveGroups& groups,
                           const FistaOptions& fista, const WorkingSetOptions& ws, MemoryBudget& budget,
                           const ExclusiveWarmStart* warm = nullptr);

}  // namespace fgm::exclusive
