// The one-variable step of MSLR's smoothing coordinate descent (Tan, Tsang,
// Wang, "Minimax sparse logistic regression for very high-dimensional feature
// selection", TNNLS 2013, Section III-B, Algorithm 3), with the corrections of
// ERRATA 001:
//
//   min_{z ∈ (−c₁, c₂)} p(z) = g(z) + (1/q) ln Σ_t exp(q (e_t + ½a_t z² + b_t z))
//   g(z) = (c₁ + z) ln(c₁ + z) + (c₂ − z) ln(c₂ − z)
//
// where c₁ = α_i, c₂ = C − α_i, a_t = (Q_t)_ii = ‖x_i∘d^t‖², b_t = (Q_tα)_i =
// y_i w^t'(x_i∘d^t) and e_t = ½‖w^t‖² (the paper's γ_t = exp(q e_t), which is
// never formed: every exponential is max-shifted).
//
// Deviations from the printed algorithm: z_m = (c₂ − c₁)/2 (undefined in the
// paper), so the root lies in (0, s/2] of the chosen variable Z_o (Z₁ = c₁ + z
// or Z₂ = c₂ − z, s = c₁ + c₂); the output is the pair (Z₁, Z₂) = (new α_i,
// new C − α_i), both kept so that neither is computed as a difference of
// nearly equal numbers. The bracket is always kept (plain Newton leaves the
// domain at large q); a step that leaves it bisects, except that while the
// bracket still reaches Z = 0 it goes to a tenth of the bracket (the root can
// be e^(−100) and beyond when a row's margin is large).
#pragma once

#include <cstddef>

namespace fgm::mslr {

// λ_t = exp(q v_t) / Σ_s exp(q v_s) for t < T, written to `lambda`, computed
// with the largest q v_t subtracted first (finite for any q v_t). Returns
// (1/q) ln Σ_t exp(q v_t), also max-shifted. T ≥ 1, q > 0.
double softmax_weights(const double* v, size_t T, double q, double* lambda);

// The 1-D subproblem of coordinate i for T constraints.
struct CoordinateProblem {
  double c1 = 0, c2 = 0;       // α_i and C − α_i, both > 0
  const double* a = nullptr;   // T entries ≥ 0
  const double* b = nullptr;   // T entries
  const double* e = nullptr;   // T entries: ½‖w^t‖²
  size_t T = 1;
  double q = 1;
};

struct NewtonBisectionResult {
  double z1 = 0;        // c₁ + z*: the new α_i
  double z2 = 0;        // c₂ − z*: the new C − α_i
  int iterations = 0;   // Newton or bisection steps taken
  int bisections = 0;   // steps where the Newton step left the bracket
};

// p'(z) at z (for tests and the sweep's gradient): ln((c₁+z)/(c₂−z)) + Σ λ_t(z)(a_t z + b_t).
// `scratch` holds 2T doubles.
double coordinate_gradient(const CoordinateProblem& p, double z, double* scratch);

// Algorithm 3: the minimiser of p over (−c₁, c₂), to |p̂'(Z)| < tolerance or
// until the bracket cannot shrink further (at most max_iterations steps).
// `scratch` holds 2T doubles.
NewtonBisectionResult newton_bisection(const CoordinateProblem& p, double tolerance, int max_iterations,
                                       double* scratch);

}  // namespace fgm::mslr
