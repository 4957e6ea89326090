// FISTA solvers of seed 002 (Huang & Liu, "Exclusive Sparsity Norm
// Minimization with Random Groups via Cone Projection"), over a Design X
// (n × p, solvers/exclusive/design.h) and groups G (exclusive_groups.h):
//
//   (7)  min_w  f(w) + (λ/2)‖w‖_e²,   ‖w‖_e² = Σ_g ‖w_g‖₁²
//        f(w) = ½ Σ_i (x_iᵀw − y_i)²           (squared; y real)
//        f(w) =   Σ_i log(1 + exp(−y_i x_iᵀw)) (logistic; y = ±1)
//   Fista-pcp  (Section 3.2, (8)): w = w₊ − w₋, w± ≥ 0, F = f(w₊ − w₋) +
//              (λ/2) Σ_g (1ᵀ(w₊+w₋)_g)², prox = positive part. Any groups.
//   Fista-locp (Section 3.2, (9)): prox of (λ/2)‖·‖_e² = P1^{λ/L}(c_g, 0) per
//              group (Alg. 2). Disjoint groups only.
//   (10) min_w  Σ_i max(1 − y_i x_iᵀw, 0) + (α/2)‖w‖² + (λ/2)‖w‖_e²   (E-SVM, β = λ)
//        and its squared-hinge variant Σ_i max(1 − y_i x_iᵀw, 0)² (the L2-SVM
//        loss of LIBLINEAR -s 5)
//   Fista-licp (Section 3.3, Theorem 4): FISTA on the dual (11) in
//              (u ∈ [0,1]^n, v^g ∈ R^{|g|}): F = (1/2α)‖Zu − Σ_g v̄^g‖² − 1ᵀu,
//              Z = Xᵀdiag(y); prox = clip u, v^g = P∞^{1/(Lλ)}(·, 0) (Alg. 3);
//              w = (Zu − Σ_g v̄^g)/α. Any groups. The squared hinge
//              (max(0, 1 − m)² = max_{u ≥ 0} u(1 − m) − u²/4): u ≥ 0 (no upper
//              bound) and F gains ¼‖u‖² (∇_u F gains u/2, L gains ½).
// Losses are sums over the rows, as in the paper. The paper has no bias;
// FistaOptions::bias adds an unregularised b to every margin (x_iᵀw + b):
// pcp and locp take b as one more, unpenalised FISTA variable; licp's dual
// then carries yᵀu = 0 (licp_coordinate.h: an augmented Lagrangian; the FISTA
// licp: every prox projects u exactly onto its box ∩ {yᵀu = 0},
// project_dual_with_bias, and the certificate's primal point takes its best
// scale and b, best_scaled_primal, from every row's margin).
//
// FISTA (Algorithm 1) with the ERRATA 002 momentum t' = ½ + ½√(1 + 4t²) (the
// printed √(1 + 4t) loses the O(1/k²) rate), and Beck–Teboulle backtracking:
// the step 1/L is accepted when F(x') ≤ F(x̄) + ⟨∇F(x̄), x' − x̄⟩ + (L/2)‖x' − x̄‖²,
// else L doubles. Every quantity of that test comes from the linear images
// (Xw, or Zu and Xq for licp) that the iteration computes anyway, extrapolated
// linearly, so a trial costs one multiply (pcp: the first trial is one fused
// pass Xᵀr → prox → Xw; licp: every trial is one fused pass). L starts from a
// power-iteration estimate of ‖X‖² (exclusive.power_iterations fused passes).
//
// Stopping (the paper gives none, ERRATA 002): pcp and locp stop when
// ‖x_k − x_{k−1}‖ ≤ tolerance·max(‖x_k‖, 1e-12)... on the solver's variables;
// licp stops when the primal–dual gap of (10) is ≤ tolerance·max(1, P(w)).
// Both also stop at max_iterations (converged = false).
// licp deviations (fista_exclusive.cpp, LicpSolver): gradient-restarted
// momentum (O'Donoghue & Candès), and with disjoint groups the gap uses the
// dual with v eliminated, D(u) = 1ᵀu − Ω*(Zu) ≥ D(u, v), certified every 5
// iterations, with the better of w(u) = ∇Ω*(Zu) and q/α as the answer.
// With disjoint groups on an in-memory design (the working set's restricted
// problems) licp runs dual coordinate ascent on D(u) instead
// (licp_coordinate.h; FistaOptions::licp_coordinate), same stopping rule.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/memory_budget.h"
#include "solvers/exclusive/design.h"
#include "solvers/exclusive/exclusive_groups.h"

namespace fgm::exclusive {

enum class Algorithm { kPcp, kLocp, kLicp };
enum class ExclusiveLoss { kSquared, kLogistic, kHinge, kSquaredHinge };
// The E-SVM losses (hinge, squared hinge): solved by licp, with the ridge α.
inline bool is_svm_loss(ExclusiveLoss l) { return l == ExclusiveLoss::kHinge || l == ExclusiveLoss::kSquaredHinge; }
const char* algorithm_name(Algorithm a);
const char* loss_name(ExclusiveLoss l);

struct FistaOptions {
  Algorithm algorithm = Algorithm::kPcp;
  ExclusiveLoss loss = ExclusiveLoss::kSquared;  // licp: the svm losses; pcp/locp: not
  double lambda = 1.0;                           // λ of (7), β of (10)
  double ridge = 1.0;                            // α of (10) (licp only), > 0
  double tolerance = 1e-6;
  int max_iterations = 5000;
  int power_iterations = 10;
  double lipschitz = 0;  // > 0: start L here instead of estimating it
  double norm_squared = 0;  // > 0: ‖X‖² known (a previous solve's estimate): no power iteration
  // The paper's printed momentum t' = ½ + ½√(1 + 4t), for the rate test only.
  bool paper_momentum_misprint = false;
  bool record_objective = false;  // objective of every iterate in FistaResult::trace
  // licp with disjoint groups on an in-memory design (the working set's
  // restricted problems): dual coordinate ascent (licp_coordinate.h) instead
  // of FISTA; false: FISTA always (the tests' second, independent solver).
  bool licp_coordinate = true;
  bool bias = false;  // an unregularised bias b (margins x_iᵀw + b)
  // licp's coordinate solver: threads for its Newton products and margins
  // (engine.threads; the result does not depend on it).
  int threads = 1;
};

struct FistaResult {
  std::vector<double> w;        // p weights
  std::vector<double> dual;     // licp: u (n entries), the warm start of the next solve
  double objective = 0;         // (7) or (10) at w
  double loss = 0;
  double regularizer = 0;       // (λ/2)‖w‖_e² (+ (α/2)‖w‖² for licp)
  double duality_gap = 0;       // licp: P(w) − D(u, v) ≥ 0
  int iterations = 0;
  int backtracks = 0;
  bool converged = false;
  double lipschitz = 0;         // final L
  double norm_squared = 0;      // the ‖X‖² estimate L started from (0 when options.lipschitz was given)
  uint64_t passes = 0;          // passes over X by this solve
  std::vector<double> trace;    // record_objective: objective after each iteration
  std::vector<double> margins;  // Xw + b at w (n entries)
  double bias = 0;              // b (0 without FistaOptions::bias)
};

// `y`: n labels (±1 for logistic and hinge). `warm_w` (p) / `warm_dual` (n)
// may be empty. Throws Error(kConfig) naming exclusive.algorithm / exclusive.loss
// for an unsupported combination (locp on overlapping groups, licp without an svm loss).
// `warm_bias`: b's start (options.bias: pcp and locp's iterate, the FISTA licp's
// best-b search).
FistaResult solve_exclusive(Design& X, const std::vector<double>& y, const ExclusiveGroups& groups,
                            const FistaOptions& options, MemoryBudget& budget,
                            const std::vector<double>& warm_w = {}, const std::vector<double>& warm_dual = {},
                            double warm_bias = 0);

// The minimisers of Σ_i max(0, 1 − y_i(z_i + b)) over b (y = ±1; z: n =
// y.size() margins), exactly: the sum is convex piecewise linear in b with its
// kinks at y_i − z_i, so they are an interval [low, high] (±∞ with one class).
std::pair<double, double> hinge_bias_minimisers(const std::vector<double>& y, const double* z);
// The hinge's best b: of its minimisers the one with the least squared hinge
// Σ_i max(0, 1 − y_i(z_i + b))². The interval is wide when w is small (large
// λ: every |z_i| < 1 and the classes balanced, about [−1, 1]), and any fixed
// pick (0, the nearest to 0) leaves the scores uncentred, while the squared
// hinge's tie-break centres them: b = mean(y_i − z_i) when every row is active.
double best_hinge_bias(const std::vector<double>& y, const double* z);
// argmin_b Σ_i max(0, 1 − y_i(z_i + b))², exactly: the derivative is
// 2Σ_{active}(b − k_i), k_i = y_i − z_i, row i active while y_i(k_i − b) > 0,
// piecewise linear and nondecreasing; its root is found on the interval
// between sorted kinks where it changes sign (of a flat interval of
// minimisers, the point nearest 0).
double best_squared_hinge_bias(const std::vector<double>& y, const double* z);
// The best bias of an svm loss (hinge or squared hinge).
double best_svm_bias(ExclusiveLoss loss, const std::vector<double>& y, const double* z);

// The Euclidean projection of v (X's rows; y = ±1) onto {u : 0 ≤ u_i ≤ upper,
// yᵀu = 0}, in place (upper may be ∞): u_i = clip(v_i − τy_i, 0, upper) with τ
// the root of φ(τ) = Σ_i y_i clip(v_i − τy_i, 0, upper), nonincreasing and
// piecewise linear (a continuous quadratic knapsack). Newton steps on φ's
// pieces inside a bracket, a bisection after two that miss their piece; it
// stops when a step lands on the piece it came from (its root: exact up to
// rounding), at φ = 0, or when the bracket is two adjacent doubles. Every φ is
// one X.sum_rows, so on a distributed design every rank takes the same steps
// (the same bits for any rank count). `tau`: the start (the previous
// projection's τ); returns τ.
double project_dual_with_bias(Design& X, const std::vector<double>& y, double* v, double upper, double tau = 0);

// Scales the u of the class with the larger Σu so that yᵀu = 0 (u stays in [0,1]^n).
void balance_dual(const std::vector<double>& y, std::vector<double>& u);

// The objective of (7) (pcp/locp losses) or (10) (hinge) at w, from the margins
// z = Xw: used by the solvers and by the tests' oracles.
double exclusive_objective(ExclusiveLoss loss, const std::vector<double>& y, const double* z, const ExclusiveGroups& groups,
                           const double* w, double lambda, double ridge, double* loss_out = nullptr);
// The same with the loss summed over X's rows by X.sum_rows (y and z: X's
// rows; for a distributed design this rank's, and the call is a collective).
double exclusive_objective(Design& X, ExclusiveLoss loss, const std::vector<double>& y, const double* z,
                           const ExclusiveGroups& groups, const double* w, double lambda, double ridge,
                           double* loss_out = nullptr);

// ∂f/∂z_i for the smooth losses (the per-row factor of ∇f = Xᵀr).
void loss_derivative(ExclusiveLoss loss, const std::vector<double>& y, const double* z, double* r);

}  // namespace fgm::exclusive
