#include "solvers/exclusive/working_set.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "core/clock.h"
#include "core/error.h"
#include "solvers/exclusive/licp_coordinate.h"

namespace fgm::exclusive {
namespace {

// E-SVM's working set drops a zero weight whose |gradient| is below this
// fraction of its threshold θ_k (far from re-entering).
constexpr double kPruneRatio = 0.5;

// The E-SVM dual before any solve: the optimal u at w = 0, b = 0 (hinge 1,
// squared hinge 2·max(0, 1 − 0)).
double dual_at_zero(ExclusiveLoss loss) { return loss == ExclusiveLoss::kSquaredHinge ? 2.0 : 1.0; }

// u_i = u0 for every row, the larger class scaled so that yᵀu = 0 (balance_dual's
// rule) with the class sums over ALL rows of X (a distributed design: every
// rank's, where balance_dual would balance each rank's rows alone). The sums
// are u0 times row counts, exact, so one store gets balance_dual's bits.
std::vector<double> balanced_dual_at_zero(Design& X, const std::vector<double>& y, double u0) {
  double sums[2];
  X.sum_rows(2, [&](uint64_t begin, uint64_t end, double* out) {
    double positive = 0, negative = 0;
    for (uint64_t i = begin; i < end; ++i) (y[i] > 0 ? positive : negative) += u0;
    out[0] = positive, out[1] = negative;
  }, sums);
  std::vector<double> u(y.size(), u0);
  const double positive = sums[0], negative = sums[1];
  if (positive == negative) return u;
  const bool shrink_positive = positive > negative;
  const double scale = shrink_positive ? negative / positive : positive / negative;
  for (size_t i = 0; i < y.size(); ++i)
    if ((y[i] > 0) == shrink_positive) u[i] *= scale;
  return u;
}

// ρ: per-row derivative of the loss at the current solution (svm losses: −y∘u).
void row_derivative(const FistaOptions& o, const std::vector<double>& y, const std::vector<double>& margins,
                    const std::vector<double>& dual, std::vector<double>& rho) {
  if (is_svm_loss(o.loss)) {
    const double u0 = dual_at_zero(o.loss);
    for (size_t i = 0; i < y.size(); ++i) rho[i] = dual.empty() ? -y[i] * u0 : -y[i] * dual[i];
  } else {
    loss_derivative(o.loss, y, margins.data(), rho.data());
  }
}

struct Violator {
  double excess;
  uint64_t column;
};

// Zero weights whose |gradient| exceeds λ·Σ_{g∋k}‖w_g‖₁ by more than `floor`, largest first.
std::vector<Violator> find_violators(const ExclusiveGroups& G, const std::vector<double>& gradient,
                                     const std::vector<double>& w, double lambda, double floor) {
  std::vector<double> group_l1;
  exclusive_norm_squared(G, w.data(), &group_l1);
  std::vector<Violator> out;
  for (uint64_t k = 0; k < G.columns; ++k) {
    if (w[k] != 0) continue;
    double theta = 0;
    for (uint64_t q = G.membership_ptr[k]; q < G.membership_ptr[k + 1]; ++q) theta += lambda * group_l1[G.memberships[q]];
    const double excess = std::fabs(gradient[k]) - theta;
    if (excess > floor) out.push_back({excess, k});
  }
  std::sort(out.begin(), out.end(), [](const Violator& a, const Violator& b) {
    return a.excess != b.excess ? a.excess > b.excess : a.column < b.column;
  });
  return out;
}

// E-SVM with disjoint groups: the dual D(u) = 1ᵀu − Ω*(Zu) (squared hinge:
// Σ(u_i − u_i²/4) − Ω*(Zu)) of the FULL problem (licp_coordinate.h) from
// Zu = −`gradient` of the check pass, u the restricted solve's dual
// (dual_at_zero before any solve). Any u in the dual's box gives a lower
// bound on the full optimum, so P(w) − D(u) certifies w.
double full_svm_dual(Design& X, const ExclusiveGroups& G, const FistaOptions& o, const std::vector<double>& gradient,
                     const std::vector<double>& dual) {
  const double quadratic = o.loss == ExclusiveLoss::kSquaredHinge ? 0.25 : 0.0, u0 = dual_at_zero(o.loss);
  const double sum_u = X.sum_rows([&](uint64_t begin, uint64_t end, double* out) {
    double s = 0;
    for (uint64_t i = begin; i < end; ++i) {
      const double u = dual.empty() ? u0 : dual[i];
      s += u - quadratic * u * u;
    }
    *out = s;
  });
  const double alpha = o.ridge, mu = o.lambda / o.ridge;
  double conjugate = 0;
  std::vector<double> c, w;
  for (uint64_t g = 0; g < G.count(); ++g) {
    c.clear();
    for (uint64_t q = G.member_ptr[g]; q < G.member_ptr[g + 1]; ++q) c.push_back(-gradient[G.members[q]] / alpha);
    w.resize(c.size());
    double tau = 0;
    prox_l1_squared_newton(c.data(), c.size(), mu, w.data(), tau);
    double cw = 0, ww = 0, l1 = 0;
    for (size_t j = 0; j < c.size(); ++j) cw += c[j] * w[j], ww += w[j] * w[j], l1 += std::fabs(w[j]);
    conjugate += alpha * cw - 0.5 * alpha * ww - 0.5 * o.lambda * l1 * l1;  // ⟨a, w⟩ − Ω_g(w), a = αc
  }
  for (uint64_t k = 0; k < G.columns; ++k)
    if (G.membership_ptr[k] == G.membership_ptr[k + 1]) conjugate += 0.5 * gradient[k] * gradient[k] / alpha;
  return sum_u - conjugate;
}

uint64_t count_nonzeros(const std::vector<double>& w) {
  uint64_t c = 0;
  for (double v : w) c += v != 0;
  return c;
}

}  // namespace

ExclusiveWarmStart ExclusiveFit::warm_start() const {
  ExclusiveWarmStart s;
  s.w = w;
  s.margins = margins;
  s.bias = bias;
  s.dual = last_solve.dual;
  s.working_set = working_set_columns;
  s.gradient_scale = gradient_scale;
  s.norm_squared = working_set_columns.empty() ? last_solve.norm_squared : 0.0;
  return s;
}

ExclusiveFit fit_exclusive(Design& X, const std::vector<double>& y, const ExclusiveGroups& groups,
                           const FistaOptions& fista, const WorkingSetOptions& ws, MemoryBudget& budget,
                           const ExclusiveWarmStart* warm) {
  const bool svm = is_svm_loss(fista.loss);  // E-SVM: licp, warm-started by its dual
  ExclusiveFit fit;
  const uint64_t passes_before = X.passes();
  const double pass_seconds_before = X.pass_seconds();
  const uint64_t n = X.rows(), p = X.columns();
  {
    const std::vector<double> zeros(n, 0.0);
    fit.objective_at_zero = exclusive_objective(X, fista.loss, y, zeros.data(), groups, std::vector<double>(p, 0.0).data(),
                                                fista.lambda, fista.ridge);
  }
  if (!ws.enabled) {
    const auto start = std::chrono::steady_clock::now();
    FistaOptions options = fista;
    if (warm && warm->norm_squared > 0) options.norm_squared = warm->norm_squared;
    fit.last_solve = solve_exclusive(X, y, groups, options, budget, warm && !svm ? warm->w : std::vector<double>{},
                                     warm && svm ? warm->dual : std::vector<double>{}, warm ? warm->bias : 0.0);
    WorkingSetRound r;
    r.working_set = p;
    r.nonzeros = count_nonzeros(fit.last_solve.w);
    r.objective = fit.last_solve.objective;
    r.fista_iterations = fit.last_solve.iterations;
    r.converged = fit.last_solve.converged;
    r.solve_seconds = seconds_since(start);
    fit.round_log.push_back(r);
    fit.w = fit.last_solve.w;
    fit.margins = fit.last_solve.margins;
    fit.bias = fit.last_solve.bias;
    fit.working_set = p;
    fit.fista_iterations = fit.last_solve.iterations;
    fit.converged = fit.last_solve.converged;
    fit.full_passes = X.passes() - passes_before;
    fit.full_pass_seconds = X.pass_seconds() - pass_seconds_before;
    return fit;
  }
  Reservation memory = budget.reserve((2 * p + n) * sizeof(double), "exclusive: working-set check vectors");
  fit.w.assign(p, 0.0);
  fit.margins.assign(n, 0.0);
  std::vector<double> rho(n), gradient(p), dual;
  std::vector<uint64_t> W;  // sorted compact columns
  double scale = 0;
  double full_gap = -1;  // E-SVM, disjoint groups: the full problem's certified gap at the last check
  double last_inner_tolerance = fista.tolerance;
  bool tighten = false;  // the next restricted solve is a tight re-solve of the same W
  // A warm start solves on the previous λ's W first (its weights, margins and
  // dual are the restricted solve's start); the checks then run as usual.
  bool solve_first = false;
  if (warm && !warm->working_set.empty()) {
    FGM_ASSERT(warm->w.size() == p && warm->margins.size() == n && warm->gradient_scale > 0);
    W = warm->working_set;
    fit.w = warm->w;
    fit.margins = warm->margins;
    fit.bias = warm->bias;
    dual = warm->dual;
    scale = warm->gradient_scale;
    solve_first = true;
  }
  // E-SVM with the bias: the check's dual must satisfy yᵀu = 0 (the restricted
  // solves return such a u); before any solve, all ones balanced.
  if (svm && fista.bias && dual.empty()) dual = balanced_dual_at_zero(X, y, dual_at_zero(fista.loss));
  for (int round = 0;; ++round) {
    auto start = std::chrono::steady_clock::now();
    WorkingSetRound log;
    if (!(round == 0 && solve_first)) {
      row_derivative(fista, y, fit.margins, dual, rho);
      X.multiply_transposed(rho.data(), gradient.data());
      if (scale == 0) {  // the first check of a cold fit is at w = 0
        for (double g : gradient) scale = std::max(scale, std::fabs(g));
        if (!(scale > 0)) scale = 1;
      }
      // E-SVM, disjoint groups: the full problem's gap decides (a certificate,
      // where the KKT floor below is a heuristic).
      const bool certify = svm && groups.disjoint;
      bool certified = false;
      if (certify) {
        const double primal = fit.rounds > 0 ? fit.last_solve.objective : fit.objective_at_zero;
        full_gap = std::max(0.0, primal - full_svm_dual(X, groups, fista, gradient, dual));
        certified = full_gap <= fista.tolerance * std::max(1.0, primal);
      }
      // Violators outside W: a zero weight in W that still violates (after a
      // loose restricted solve) is the next solve's to move, and adding it
      // again would put its column twice into the restricted design.
      auto outside_working_set = [&](std::vector<Violator> found) {
        found.erase(std::remove_if(found.begin(), found.end(),
                                   [&](const Violator& v) { return std::binary_search(W.begin(), W.end(), v.column); }),
                    found.end());
        return found;
      };
      // Not certified yet: every positive violator, largest first (the gap,
      // not the KKT floor, decides; with the floor a few violators just above
      // it trickled in per round, each round a restricted solve, until none
      // was left above it and the hundreds below came at once).
      auto violators = outside_working_set(find_violators(groups, gradient, fit.w, fista.lambda,
                                                          certify && !certified ? 0.0 : ws.kkt_tolerance * scale));
      fit.max_violation = violators.empty() ? 0.0 : violators.front().excess / scale;
      // Nothing to add but not certified after a loose restricted solve: solve W again, tightly.
      tighten = certify && !certified && violators.empty() && last_inner_tolerance > fista.tolerance;
      if (!tighten && (certified || violators.empty())) {
        fit.converged = certify ? certified : fit.rounds > 0 ? fit.last_solve.converged : true;
        break;
      }
      if (round >= ws.max_rounds) break;
      // E-SVM (certified): W keeps its nonzero weights only (celer's pruned
      // working set). A zero weight that is no violator is optimal at zero in
      // the restricted problem too, so dropping it keeps the restricted
      // optimum; W then stays near twice the support (the planted set: 5,486
      // columns for 1,639 nonzeros without it, every epoch paying for all).
      if (certify && !tighten) {
        std::vector<double> group_l1;
        exclusive_norm_squared(groups, fit.w.data(), &group_l1);
        auto far_from_boundary = [&](uint64_t k) {  // a zero weight with |g_k| < θ_k / 2
          if (fit.w[k] != 0) return false;
          double theta = 0;
          for (uint64_t q = groups.membership_ptr[k]; q < groups.membership_ptr[k + 1]; ++q)
            theta += fista.lambda * group_l1[groups.memberships[q]];
          return std::fabs(gradient[k]) < kPruneRatio * theta;
        };
        W.erase(std::remove_if(W.begin(), W.end(), far_from_boundary), W.end());
      }
      // Add the largest violators; W stays sorted.
      const uint64_t add =
          tighten ? 0 : std::min<uint64_t>(violators.size(), std::max<uint64_t>(ws.growth, W.size()));
      log.added = add;
      log.violation = fit.max_violation;
      log.check_seconds = seconds_since(start);
      start = std::chrono::steady_clock::now();
      for (uint64_t q = 0; q < add; ++q) W.push_back(violators[q].column);
      std::sort(W.begin(), W.end());
    }
    // Restricted solve, warm-started from the current weights (and dual).
    const std::unique_ptr<Design> XW = X.restrict_columns(W);
    ExclusiveGroups GW = restrict_groups(groups, W, budget);
    std::vector<double> warm_w(W.size());
    for (size_t q = 0; q < W.size(); ++q) warm_w[q] = fit.w[W[q]];
    // With a certified full gap, the restricted solve needs only a fraction
    // of it (celer's rule): early rounds, whose W will grow, stop sooner.
    FistaOptions inner = fista;
    if (full_gap > 0 && !tighten) {
      const double primal = fit.rounds > 0 ? fit.last_solve.objective : fit.objective_at_zero;
      // At most 1e-2: right after W grows the full gap can exceed P, and a
      // looser stop would accept the previous round's dual unchanged.
      inner.tolerance = std::clamp(0.1 * full_gap / std::max(1.0, primal), fista.tolerance, std::max(fista.tolerance, 1e-2));
    }
    last_inner_tolerance = inner.tolerance;
    fit.last_solve = solve_exclusive(*XW, y, GW, inner, budget, svm ? std::vector<double>{} : warm_w,
                                     svm ? dual : std::vector<double>{}, fit.bias);
    fit.rounds = round + 1;
    fit.fista_iterations += fit.last_solve.iterations;
    std::fill(fit.w.begin(), fit.w.end(), 0.0);
    for (size_t q = 0; q < W.size(); ++q) fit.w[W[q]] = fit.last_solve.w[q];
    fit.margins = fit.last_solve.margins;
    fit.bias = fit.last_solve.bias;
    dual = fit.last_solve.dual;
    log.working_set = W.size();
    log.nonzeros = count_nonzeros(fit.w);
    log.objective = fit.last_solve.objective;
    log.fista_iterations = fit.last_solve.iterations;
    log.converged = fit.last_solve.converged;
    log.solve_seconds = seconds_since(start);
    fit.round_log.push_back(log);
  }
  // The gap reported for the fit is the full problem's when it was certified.
  if (full_gap >= 0) fit.last_solve.duality_gap = full_gap;
  fit.working_set = W.size();
  fit.working_set_columns = W;
  fit.gradient_scale = scale;
  fit.full_passes = X.passes() - passes_before;
  fit.full_pass_seconds = X.pass_seconds() - pass_seconds_before;
  return fit;
}

}  // namespace fgm::exclusive
