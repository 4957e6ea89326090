// The two cone projections of Huang & Liu, "Exclusive Sparsity Norm
// Minimization with Random Groups via Cone Projection" (seed 002), Lemmas 2–3:
//
//   P1^ζ(a, b)  = argmin_{x, y} ½‖x − a‖² + (ζ/2)(y − b)²  s.t. ‖x‖₁ ≤ y   (5)
//   P∞^ζ(a, b)  = argmin_{x, y} ½‖x − a‖² + (ζ/2)(y − b)²  s.t. ‖x‖∞ ≤ y   (6)
//
// and the prox of (κ/2)‖w‖_e² over disjoint groups built from P1 (Section 3.2).
// Deviations from Algorithms 2 and 3 (ERRATA 002), each for a reason:
//  * The interval tests of step 6 (Alg. 2) / step 13 (Alg. 3) are replaced by
//    "the largest index j whose candidate is consistent": with exact
//    arithmetic it is the same j (the candidate of piece j lies on the correct
//    side of the j-th sorted value exactly for the pieces left of the
//    solution), but rounding can make every interval test fail, and the paper
//    then silently returns the unprojected point.
//  * δ = ζ(t − b)/(1 + ζj) instead of (t − b)/(ζ⁻¹ + j): the same number for
//    ζ > 0, and no division by zero as ζ → 0 (ζ = 0 gives x = a).
//  * Alg. 3 step 14 is x_i = sgn(a_i)·min(|a_i|, y) (the proof's (18)); the
//    printed sgn(a)⊙min(|a| − y, 0) is a misprint.
//  * P1 is exact only for b ≥ 0 (with b < 0 the paper's search can return an
//    infeasible point); it throws for b < 0. The solvers only call it with b = 0.
#pragma once

#include <cstddef>
#include <vector>

namespace fgm::exclusive {

// Sorted-magnitude scratch reused across calls (no allocation per group once grown).
struct ProjectionScratch {
  std::vector<double> magnitudes;
};

// Writes x (d entries, may alias a) and returns y of P1^ζ(a, b); ζ ≥ 0, b ≥ 0.
double project_l1_cone(const double* a, size_t d, double b, double zeta, double* x, ProjectionScratch& scratch);

// Writes x (d entries, may alias a) and returns y of P∞^ζ(a, b); ζ ≥ 0, any b.
double project_linf_cone(const double* a, size_t d, double b, double zeta, double* x, ProjectionScratch& scratch);

// argmin_w ½‖w − c‖² + (κ/2)(‖w‖₁)² for one group: P1^κ(c, 0), x only.
inline void prox_l1_squared(const double* c, size_t d, double kappa, double* w, ProjectionScratch& scratch) {
  project_l1_cone(c, d, 0.0, kappa, w, scratch);
}

}  // namespace fgm::exclusive
