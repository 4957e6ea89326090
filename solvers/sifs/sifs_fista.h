// The reduced SIFS problem (sifs_sdca.h) solved data-parallel: an accelerated
// proximal gradient (FISTA, Beck & Teboulle 2009, with O'Donoghue & Candès's
// gradient restart) on the primal
//   P̂(w) = f(w) + β‖w‖₁,  f(w) = (1/n)[Σ_free ℓ(1 + ⟨a_d, w⟩) + |L̂|(1 − γ/2)] − ⟨z_L, w⟩ + (α/2)‖w‖²,
// whose only sums over samples are ∇f(w) = −z(θ(w)) + αw with
// θ_d(w) = ℓ'(1 + ⟨a_d, w⟩) = clip((1 + ⟨a_d, w⟩)/γ, 0, 1) and
// z(θ) = z_L − (1/n) Σ_free θ_d a_d, and a few scalars. The samples are
// split into parts (a rank's row partitions); each part sums its own
// samples serially and a RowSumReduction (solvers/apg_reduction.h) adds the
// parts — in the fixed partition tree for a partitioned store, so every
// iterate is the same bits for every rank count.
//
// The sums at a point v (K·cols + 3 numbers) give ∇f(v), P̂(v) and, with
// θ(v), the dual D̂(θ(v)): the duality gap of the pair (v, θ(v)) certifies v
// (the reference's gap that sifs_rules.h enlarges the balls by). Step size:
// ℓ is 1/γ-smooth, so f(x) ≤ f(y) + ⟨∇f(y), x−y⟩ + (L/2)‖x−y‖² holds whenever
// L ≥ α + Σ_d⟨a_d, x−y⟩²/(γn‖x−y‖²); L starts at the lower bound
// α + max_d‖a_d‖²/(γn) and doubles (at least to that quotient) until it holds.
// One reduction per iteration carries the trial point x's sums (its gap is
// checked at every iteration: x has the exact zeros of the soft threshold),
// the step test's sum and the sums at the next extrapolated point y. Margins
// 1 + ⟨a_d, ·⟩ are carried by their linear updates (one pass of ⟨a_d, x−y⟩
// per iteration) and recomputed from the iterate every 50 iterations and
// before a gap is reported, so the certificate is exact.
#pragma once

#include <cstdint>
#include <vector>

#include "solvers/apg_reduction.h"
#include "solvers/sifs/sifs_sdca.h"

namespace fgm {

struct FistaResult {
  std::vector<double> w;                   // reduced weights [k·cols + c]
  std::vector<std::vector<double>> theta;  // θ(w) per part, per free coordinate
  double primal = 0, dual = 0, gap = 0;
  int iterations = 0;
  int reductions = 0;
  bool converged = false;
};

// `parts` share alpha, beta, gamma, free_weight, z_offset and in_L (those of
// parts[0] are used) and the reduced columns (X.column_dense); each has its
// own samples (X, coordinate, coordinate_row, layout: the part's samples).
// `n` is the whole problem's sample count. Starts from w0 (zero on screened
// entries); stops at gap ≤ tol or after max_iterations.
FistaResult solve_reduced_fista(const std::vector<ReducedProblem>& parts, uint64_t n, RowSumReduction& reduction,
                                std::vector<double> w0, double tol, int max_iterations);

}  // namespace fgm
