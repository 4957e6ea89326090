// The p-norm path of the Generalized ℓ_p-KTA (Jawanpuria, Varma, Nath, ICML
// 2014, Section 5, Algorithm 1), for the squared Euclidean Bregman divergence
// with x₀ = 0 (their experimental setting; shared/notes/ERRATA.md 004).
//
// Given the alignments a_i (solvers/pnorm_kta/alignment.h), problem (1)
// separates per feature:
//
//   η_i*(p) = argmin_{η ≥ 0}  λ₁η² + λ₂η^p − a_i η,      1 ≤ p ≤ 2, λ₁ > 0.
//
// For p > 1 and a_i > 0 the minimiser is the root in (0, a_i/(2λ₁)] of the
// optimality condition (5),  G(η, p) = 2λ₁η + λ₂pη^(p−1) − a_i = 0;  G is
// increasing and concave in η. At p = 1 the root exists only when a_i > λ₂
// (otherwise η* = 0). Along the path (6) gives the slope
//
//   dη/dp = −λ₂η^(p−1)(1 + p ln η) / (2λ₁ + λ₂p(p−1)η^(p−2)).
//
// Algorithm 1: solve at p_start, drop every feature with η < ε; then for p =
// p_start − kΔp down to p_end: first-order predictor η ← η − Δp·dη/dp (at the
// previous p), Newton corrector on G(·, p) kept inside a bracket [lo, hi] ∋
// η* (η > 0: a step leaving the bracket is replaced by bisection), and drop
// the features whose η < ε for the rest of the path (Theorem 2: with ε < 1/e
// a weight below ε only decreases as p decreases). Since G is increasing in
// η, η_i*(p) > ε exactly when a_i > t(p) = 2λ₁ε + λ₂pε^(p−1): the closed-form
// active set that the tests check the path against at every p.
//
// Deviations: the paper gives no Newton tolerance; the corrector stops when a
// step changes η by at most 1e-15·η (or the bracket shrinks to that width),
// so η is accurate to a few ulps. The last p is p_end itself even when
// (p_start − p_end)/Δp is not a whole number.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace fgm::kta {

struct PathOptions {
  double lambda1 = 1.0;   // λ₁ > 0 (strong convexity; the corrector's bracket needs it)
  double lambda2 = 1.0;   // λ₂ ≥ 0
  double epsilon = 0.05;  // ε: weights below it are set to 0 (ε < 1/e, Theorem 2)
  double p_start = 2.0;
  double p_end = 1.0;
  double p_step = 0.01;
};

// Throws a config error naming the kta.* key when an option is out of range.
void check_path_options(const PathOptions& options);

// The p values of the path: p_start, p_start − Δp, …, p_end.
std::vector<double> path_grid(const PathOptions& options);

// G(η, p) and ∂G/∂η.
double optimality_residual(double eta, double a, double p, const PathOptions& o);
double residual_slope(double eta, double p, const PathOptions& o);
// dη*/dp at (η, p), equation (6).
double weight_slope(double eta, double p, const PathOptions& o);
// t(p): η*(p) > ε ⇔ a > t(p).
double active_threshold(double p, const PathOptions& o);

struct SolveCounts {
  uint64_t newton_steps = 0;
  uint64_t bisection_steps = 0;
};

// η*(p) for alignment a by the bracketed Newton iteration from `guess`
// (any value; outside the bracket it is ignored).
double solve_weight(double a, double p, const PathOptions& o, double guess, SolveCounts& counts);

// One point of the path: the active features (indices into the alignment
// vector, increasing) and their weights.
struct PathPoint {
  double p = 0;
  std::vector<uint32_t> active;
  std::vector<double> weights;
  SolveCounts counts;  // corrector work at this p
};

// Follows the path over `alignments` and calls visit(point) at every p of
// path_grid, in decreasing p. Memory: O(active features) per point.
void follow_path(const std::vector<double>& alignments, const PathOptions& options,
                 const std::function<void(const PathPoint&)>& visit);

}  // namespace fgm::kta
