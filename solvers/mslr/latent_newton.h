// MSLR's subproblem (9) solved in the primal (mslr.subproblem = "newton",
// the default): the second-order alternative to the smoothing coordinate
// descent of smoothed_minimax.h, for the same problem and the same
// certificate.
//
// By the minimax theorem (each f_t convex in α, the max linear in μ ∈ Δ),
//   −min_α max_t f_t(α) = min_{μ∈Δ} max_α [H(α) − ½Σ_j d̄_j(μ) c_j(α)²],
// and the inner max is the dual of the weighted logistic regression
// min_w ½Σ_j w_j²/d̄_j + C Σ_i ln(1 + exp(−y_i w'x_i)). Minimising over μ
// with w = Σ_t v_t, v_t supported on d^t, gives (Cauchy–Schwarz, equality at
// μ_t ∝ ‖v_t‖) the latent squared group norm
//   F(v) = ½(Σ_t ‖v_t‖₂)² + C Σ_i ln(1 + exp(−y_i Σ_t v_t'(x_i∘d^t))),
// FGM's problem (31) with one group per constraint. Constraints may share
// features (d^t repeats selected ones), so each constraint gets its own copy
// of its columns (r·T columns at most: a few hundred). F is minimised by the
// proximal Newton solver of solvers/prox_newton.h (the APG beyond
// kProxNewtonMaxColumns copies), which stops on its certified relative gap
// (F − D)/F ≤ tolerance, D(α) = H(α) − max_t ½‖c∘d^t‖² at the rescaled
// α_i = C σ(−y_i w'x_i) — the smoothing solver's D. So "converged" is the same
// certificate as there; the optimum is the same (α* is unique: H is strictly
// concave).
//
// Outputs in MinimaxResult: primal = F, dual = D, μ_t = ‖v_t‖/Σ_s‖v_s‖
// (uniform if v = 0), d̄ = Σ_t μ_t d^t, the model w_j = Σ_{t∋j} v_tj (at the
// optimum v_t = μ_t c∘d^t, the smoothing solver's d̄∘c), α_i = C σ(−y_i w'x_i)
// and C − α_i = C σ(y_i w'x_i) written back (each computed on its own, kept
// ≥ the smallest normal double so both stay inside (0, C)); q = 0, stages = 1,
// sweeps = passes over the selected columns, newton_steps = Newton
// (or APG) iterations.
//
// Warm start: with `warm_mu` (the previous solve's μ over the first
// constraints, which it left α optimal for), v_t = μ_t c(α)∘d^t for those and
// 0 for the new ones — the previous optimum's own decomposition; without it
// v = 0. Both inputs are in a resume state, so a resumed run repeats the
// solve exactly. Row parts
// and the reduction as solve_apg: the same bits for any thread count and,
// with the partition-tree reduction, any rank count; one part with
// LocalRowSums is the single-store solve.
#pragma once

#include <cstdint>
#include <vector>

#include "cache/selected_features.h"
#include "core/memory_budget.h"
#include "solvers/apg_reduction.h"
#include "solvers/mslr/smoothed_minimax.h"

namespace fgm::mslr {

// One row part: its rows of the selected columns, labels, α and C − α.
struct LatentPart {
  const SelectedFeatureCache* columns = nullptr;
  const int8_t* labels = nullptr;
  std::vector<double>* alpha = nullptr;
  std::vector<double>* beta = nullptr;
};

// Settings of the primal solve (MinimaxOptions: C, tolerance).
struct LatentNewtonOptions {
  int max_iterations = 500;  // Newton steps (APG iterations beyond kProxNewtonMaxColumns copies: ×20)
  int threads = 1;           // results do not depend on it
};

MinimaxResult solve_minimax_newton(const std::vector<LatentPart>& parts, RowSumReduction& reduction,
                                   const std::vector<std::vector<uint32_t>>& constraints,
                                   const MinimaxOptions& options, const LatentNewtonOptions& newton,
                                   const std::vector<double>& warm_mu, MemoryBudget& budget);

}  // namespace fgm::mslr
