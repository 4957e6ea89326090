// E-SVM (10) with disjoint groups on an in-memory design, by dual coordinate
// ascent (Hsieh et al., ICML 2008, the linear SVM's dual CD, with the ridge's
// conjugate replaced by that of Ω = (α/2)‖·‖² + (λ/2)‖·‖_e²):
//
//   max_u D(u) = 1ᵀu − Ω*(Zu),  u ∈ [0,1]^n,  Z = Xᵀdiag(y)
//   w(u) = ∇Ω*(Zu): per group w_g = soft((Zu)_g/α, τ_g), τ_g = μ‖w_g‖₁,
//   μ = λ/α (the prox of μ·½‖·‖₁²); a column in no group: w_k = (Zu)_k/α.
//
// This is Fista-licp's problem with v eliminated (the paper's (11) keeps v
// and runs FISTA; on a 2,000 × 20,000 planted set that stopped at 10⁵
// iterations with a gap of 2.65). Ω* is piecewise quadratic, so each
// coordinate step is a Newton step with the local curvature
//   h_i = (1/α)[Σ_{k∈S} x_ik² − Σ_g μ/(1 + μ|S_g|)·(Σ_{k∈S_g} sgn(w_k)x_ik)²]
// (S: the support of w), accepted when it increases D (computed exactly from
// the groups' Ω*), else replaced by the safe step with h = ‖x_i‖²/α (Ω* has a
// 1/α-Lipschitz gradient, so that step never decreases D). Coordinates go in
// a seeded random order per epoch (deterministic); after every epoch Zu is
// recomputed from u, a damped projected Newton step on the rows free to move
// follows (CG on the support of w only; the dual is degenerate when more rows
// are free than w has nonzeros), and the gap P(s·w(u)) − D(u) certifies the stop
// (s: best_scaled_primal; the returned weights are s·w(u)):
// gap ≤ tolerance·max(1, P), as Fista-licp. max_iterations counts epochs.
//
// The squared hinge (FistaOptions::loss = kSquaredHinge, the L2-SVM loss
// Σ max(0, 1 − y_i x_iᵀw)², LIBLINEAR -s 5's): max(0, 1 − m)² =
// max_{u ≥ 0} u(1 − m) − u²/4, so the dual is
//   max_u D(u) = Σ_i (u_i − u_i²/4) − Ω*(Zu),  u ≥ 0 (no upper bound),
// the same w(u); every step, the Newton system and the certificate gain the
// term's curvature ½ (gradient 1 − u_i/2 − y_i x_iᵀw), and at the optimum
// u_i = 2·max(0, 1 − y_i x_iᵀw). The bias is handled alike (best b:
// best_squared_hinge_bias).
//
// With FistaOptions::bias (margins x_iᵀw + b) the dual gains yᵀu = 0. The
// steps then ascend the augmented Lagrangian 1ᵀu − Ω*(Zu) − b·s − (ρ/2)s²,
// s = yᵀu (coordinate gradient 1 − y_i(x_iᵀw + b + ρs), curvature + ρ), and
// b += ρs after each epoch (the method of multipliers). The certificate stays
// exact: P at s·w(u) with its best b (best_scaled_primal), D at u scaled to yᵀu = 0
// (balance_dual); the returned dual is that feasible u, the bias that b.
#pragma once

#include <vector>

#include "core/memory_budget.h"
#include "solvers/exclusive/design.h"
#include "solvers/exclusive/exclusive_groups.h"
#include "solvers/exclusive/fista_exclusive.h"

namespace fgm::exclusive {

// `groups` must be disjoint; `warm_dual` (n, may be empty) is clipped to the
// dual's box ([0,1], or [0,∞) for the squared hinge).
FistaResult solve_licp_coordinate(const InMemoryDesign& X, const std::vector<double>& y, const ExclusiveGroups& groups,
                                  const FistaOptions& options, MemoryBudget& budget,
                                  const std::vector<double>& warm_dual = {});

// The certificate's primal point (the coordinate solver's): Ω is
// 2-homogeneous, so along the ray s·w, s ≥ 0,
//   P(s·w, b) = Σ_i ℓ(1 − y_i(s·z_i + b)) + s²·Ω(w),   z = Xw,
// ℓ the hinge or squared hinge. w(u) from a nearly optimal u is a poor primal
// point when Ω*'s Hessian on the free rows is ill-conditioned (the planted
// set: D within 10⁻⁶ of the optimum while P(w(u)) is 10⁻³ above it); the
// best s cuts that gap ~10×. Without the bias s is exact (the sorted-kinks
// sweep of best_loss_scale); with it (s, b) alternate twice between the two
// exact one-dimensional minimisations, starting from `bias` (every iterate
// lowers P). omega = Ω(w); omega = 0 keeps s = 1.
struct ScaledPrimal {
  double scale = 1, bias = 0, loss = 0;  // the loss Σ_i ℓ at (s·w, b)
};
ScaledPrimal best_scaled_primal(ExclusiveLoss loss, const std::vector<double>& y, const double* z, double omega,
                                bool with_bias, double bias);
// argmin_{s ≥ 0} Σ_i ℓ(c_i − s·m_i) + s²·omega (omega > 0), exactly: the
// derivative is nondecreasing and piecewise linear between the kinks
// c_i/m_i; its sign change is found by sweeping them in order.
double best_loss_scale(ExclusiveLoss loss, const double* c, const double* m, size_t n, double omega);

// Per-group prox of μ·½‖·‖₁²: w = sgn(c)·max(|c| − τ, 0) with τ = μ‖w‖₁,
// found by Newton on τ − μΣ max(|c_j| − τ, 0) (concave, increasing; from any
// start the iterates reach the root's piece and stop there exactly).
// `tau` is the start and receives τ; returns |support|.
size_t prox_l1_squared_newton(const double* c, size_t d, double mu, double* w, double& tau);

}  // namespace fgm::exclusive
