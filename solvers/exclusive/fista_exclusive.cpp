// The three FISTA solvers of seed 002 (see the header for the problems, the
// ERRATA corrections and the stopping rules). Each algorithm is a class with
// the same four steps, driven by one loop (run_fista):
//   trial(L, first)     x' = prox_{H/L}(x̄ − ∇F(x̄)/L) and its linear images
//                       (first: ∇F(x̄) too; later trials reuse it)
//   sufficient_decrease F(x') ≤ F(x̄) + ⟨∇F(x̄), x' − x̄⟩ + (L/2)‖x' − x̄‖²
//   accept(β)           x_old ← x, x ← x', x̄ ← x + β(x − x_old) (images too)
//   converged(tol)      the stopping rule
#include "solvers/exclusive/fista_exclusive.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "core/error.h"
#include "core/interrupt.h"
#include "solvers/exclusive/cone_projection.h"
#include "solvers/exclusive/licp_coordinate.h"
#include "solvers/losses.h"

namespace fgm::exclusive {

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kPcp: return "pcp";
    case Algorithm::kLocp: return "locp";
    case Algorithm::kLicp: return "licp";
  }
  return "?";
}

const char* loss_name(ExclusiveLoss l) {
  switch (l) {
    case ExclusiveLoss::kSquared: return "squared";
    case ExclusiveLoss::kLogistic: return "logistic";
    case ExclusiveLoss::kHinge: return "hinge";
    case ExclusiveLoss::kSquaredHinge: return "squared_hinge";
  }
  return "?";
}

namespace {

using Vec = std::vector<double>;

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

double squared_distance(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
  return s;
}

// x̄ = x + β(x − x_old) after x_old ← x, x ← x_new.
void shift_and_extrapolate(Vec& x_old, Vec& x, Vec& x_new, Vec& x_bar, double beta) {
  std::swap(x_old, x);
  std::swap(x, x_new);
  for (size_t i = 0; i < x.size(); ++i) x_bar[i] = x[i] + beta * (x[i] - x_old[i]);
}

// log1p(e) for 0 ≤ e ≤ 1 from one log (glibc's log1p took a third of a
// FISTA iteration on a9a): log(u)·e/(u − 1) with u = 1 + e rounded corrects
// the rounding of u (Goldberg's identity; a few ulps).
inline double log1p_unit(double e) {
  const double u = 1.0 + e;
  return u == 1.0 ? e : std::log(u) * (e / (u - 1.0));
}

// softplus(m) = log(1 + exp(m)), overflow-safe.
inline double softplus_fast(double m) { return std::max(m, 0.0) + log1p_unit(std::exp(-std::fabs(m))); }

// ∂f/∂z_i of one row (the hinge: a subgradient).
inline double row_loss_derivative(ExclusiveLoss loss, double y, double z) {
  if (loss == ExclusiveLoss::kSquared) return z - y;
  if (loss == ExclusiveLoss::kLogistic) return -y * detail::sigmoid(-y * z);
  if (loss == ExclusiveLoss::kSquaredHinge) return y * z < 1 ? -2.0 * y * (1.0 - y * z) : 0.0;
  return y * z < 1 ? -y : 0.0;
}

// Σ over the rows [begin, end) of the loss at z.
double smooth_loss(ExclusiveLoss loss, const Vec& y, const double* z, uint64_t begin, uint64_t end) {
  double s = 0;
  for (uint64_t i = begin; i < end; ++i) {
    if (loss == ExclusiveLoss::kSquared) s += 0.5 * (z[i] - y[i]) * (z[i] - y[i]);
    else if (loss == ExclusiveLoss::kLogistic) s += softplus_fast(-y[i] * z[i]);
    else if (loss == ExclusiveLoss::kSquaredHinge) {
      const double slack = std::max(0.0, 1.0 - y[i] * z[i]);
      s += slack * slack;
    } else s += std::max(0.0, 1.0 - y[i] * z[i]);
  }
  return s;
}

// The loss summed over all rows of X (X.sum_rows: every rank's, distributed).
double smooth_loss(Design& X, ExclusiveLoss loss, const Vec& y, const double* z) {
  return X.sum_rows([&](uint64_t begin, uint64_t end, double* out) { *out = smooth_loss(loss, y, z, begin, end); });
}

// smooth_loss at z, and r = ∂f/∂z (loss_derivative), over the rows [begin,
// end) in one sweep: the logistic loss's softplus and sigmoid share one exponential.
double loss_and_derivative(ExclusiveLoss loss, const Vec& y, const double* z, double* r, uint64_t begin, uint64_t end) {
  if (loss != ExclusiveLoss::kLogistic) {
    for (uint64_t i = begin; i < end; ++i) r[i] = row_loss_derivative(loss, y[i], z[i]);
    return smooth_loss(loss, y, z, begin, end);
  }
  double s = 0;
  for (uint64_t i = begin; i < end; ++i) {
    const double m = -y[i] * z[i];  // loss softplus(m), derivative −y·σ(m)
    const double e = std::exp(-std::fabs(m));
    s += std::max(m, 0.0) + log1p_unit(e);
    r[i] = -y[i] * (m >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e));
  }
  return s;
}

// loss_and_derivative over all rows of X.
double loss_and_derivative(Design& X, ExclusiveLoss loss, const Vec& y, const double* z, double* r) {
  return X.sum_rows(
      [&](uint64_t begin, uint64_t end, double* out) { *out = loss_and_derivative(loss, y, z, r, begin, end); });
}

// Σ over all rows of X of a[i]·b[i] (a, b: row vectors).
double row_dot(Design& X, const Vec& a, const Vec& b) {
  return X.sum_rows([&](uint64_t begin, uint64_t end, double* out) {
    double s = 0;
    for (uint64_t i = begin; i < end; ++i) s += a[i] * b[i];
    *out = s;
  });
}

// (λ/2)‖w‖_e² (+ (α/2)‖w‖² for the svm losses): the objective minus the loss.
double regularizer(ExclusiveLoss loss, const ExclusiveGroups& groups, const double* w, double lambda, double ridge) {
  double reg = 0.5 * lambda * exclusive_norm_squared(groups, w);
  if (is_svm_loss(loss)) {
    double ww = 0;
    for (uint64_t k = 0; k < groups.columns; ++k) ww += w[k] * w[k];
    reg += 0.5 * ridge * ww;
  }
  return reg;
}

// Curvature bound of the per-row loss (f'' ≤ c).
double loss_curvature(ExclusiveLoss loss) { return loss == ExclusiveLoss::kLogistic ? 0.25 : 1.0; }

// Sufficient decrease with a rounding allowance relative to the values compared.
bool decrease_holds(double f_new, double f_bar, double linear, double L, double step_squared) {
  const double bound = f_bar + linear + 0.5 * L * step_squared;
  return f_new <= bound + 1e-12 * (std::fabs(f_bar) + std::fabs(f_new));
}

// ‖X‖² by the power method on XᵀX, one fused pass per iteration (the
// Rayleigh quotient ‖Xv‖²/‖v‖² never exceeds ‖X‖²; backtracking fixes an
// underestimate).
double estimate_norm_squared(Design& X, int iterations, MemoryBudget& budget) {
  const uint64_t n = X.rows(), p = X.columns();
  if (p == 0 || n == 0) return 0;
  Reservation memory = budget.reserve((2 * p + 2 * n) * sizeof(double), "exclusive: power iteration vectors");
  Vec v(p), g(p), z(n), r(n);  // r: the pass's input, apart from its output z (a pass zeroes z first)
  std::mt19937_64 rng(0x5eed);
  std::uniform_real_distribution<double> unif(0.5, 1.5);
  for (auto& e : v) e = unif(rng);
  X.multiply(v.data(), z.data());
  double estimate = 0;
  for (int it = 0; it < iterations; ++it) {
    const double vv = dot(v, v);
    estimate = vv > 0 ? row_dot(X, z, z) / vv : 0;
    if (!(estimate > 0)) break;
    r = z;
    X.transposed_update_multiply(
        r.data(), g.data(), [&](uint64_t first, uint64_t end) { std::copy(g.begin() + first, g.begin() + end, v.begin() + first); },
        v.data(), z.data());
    const double norm = std::sqrt(dot(v, v));
    if (!(norm > 0)) break;
    for (auto& e : v) e /= norm;
    for (auto& e : z) e /= norm;
  }
  const double vv = dot(v, v);
  if (vv > 0) estimate = std::max(estimate, row_dot(X, z, z) / vv);
  return estimate;
}

// The unregularised bias of pcp and locp: one more FISTA variable, with
// ∂F/∂b = Σ_i r_i, added to every margin of z' = Xw' + b'.
class BiasVariable {
 public:
  void start(Design& X, bool enabled, double warm) {
    on_ = enabled;
    b_ = bar_ = old_ = next_ = enabled ? warm : 0.0;
    // All rows of X (every rank's): the bias column's ‖1‖² for the step bound.
    rows_ = enabled ? X.sum_rows([](uint64_t begin, uint64_t end, double* out) { *out = double(end - begin); }) : 0.0;
  }
  double norm_squared() const { return rows_; }
  // ∂F/∂b at x̄ from r = ∂f/∂z (a row sum: a collective on a distributed design).
  void gradient(Design& X, const Vec& r) {
    if (!on_) return;
    grad_ = X.sum_rows([&](uint64_t begin, uint64_t end, double* out) {
      double s = 0;
      for (uint64_t i = begin; i < end; ++i) s += r[i];
      *out = s;
    });
  }
  // b' = b̄ − ∂F/∂b / L, added to the margins z' = Xw'.
  void step(double L, Vec& z_new) {
    if (!on_) return;
    next_ = bar_ - grad_ / L;
    for (double& z : z_new) z += next_;
  }
  void add_to_test(double& linear, double& step) const {
    const double d = next_ - bar_;
    linear += grad_ * d, step += d * d;
  }
  double change_squared() const { return (next_ - b_) * (next_ - b_); }
  void accept(double beta) {
    old_ = b_, b_ = next_;
    bar_ = b_ + beta * (b_ - old_);
  }
  double value() const { return b_; }

 private:
  bool on_ = false;
  double b_ = 0, bar_ = 0, old_ = 0, next_ = 0, grad_ = 0, rows_ = 0;
};

// ---------------------------------------------------------------- Fista-pcp
class PcpSolver {
 public:
  PcpSolver(Design& X, const Vec& y, const ExclusiveGroups& G, const FistaOptions& o, MemoryBudget& budget,
            const Vec& warm_w, double warm_bias)
      : X_(X), y_(y), G_(G), o_(o), n_(X.rows()), p_(X.columns()) {
    memory_ = budget.reserve((11 * p_ + 5 * n_ + 2 * G.count()) * sizeof(double), "exclusive: Fista-pcp vectors",
                             "use the working set (exclusive.working_set = true) or fewer features");
    for (Vec* v : {&up_, &um_, &up_old_, &um_old_, &upb_, &umb_, &up_new_, &um_new_, &w_new_, &g_, &reg_g_})
      v->assign(p_, 0.0);
    for (Vec* v : {&z_, &z_old_, &zb_, &z_new_, &r_}) v->assign(n_, 0.0);
    if (!warm_w.empty()) {
      for (uint64_t k = 0; k < p_; ++k) {
        up_[k] = std::max(warm_w[k], 0.0);
        um_[k] = std::max(-warm_w[k], 0.0);
        w_new_[k] = up_[k] - um_[k];
      }
      X_.multiply(w_new_.data(), z_.data());
    }
    bias_.start(X_, o.bias, warm_bias);
    for (double& z : z_) z += bias_.value();
    upb_ = up_, umb_ = um_, zb_ = z_;
  }

  double initial_lipschitz(double norm_squared) const {
    return 2.0 * loss_curvature(o_.loss) * norm_squared + loss_curvature(o_.loss) * bias_.norm_squared() +
           2.0 * o_.lambda * double(G_.max_overlap_weight());
  }

  void trial(double L, bool first) {
    if (first) {
      f_bar_ = loss_and_derivative(X_, o_.loss, y_, zb_.data(), r_.data()) + regularize(upb_, umb_, &reg_g_);
      bias_.gradient(X_, r_);
    }
    auto update = [&](uint64_t first_col, uint64_t end) {
      for (uint64_t k = first_col; k < end; ++k) {
        up_new_[k] = std::max(0.0, upb_[k] - (g_[k] + reg_g_[k]) / L);
        um_new_[k] = std::max(0.0, umb_[k] - (-g_[k] + reg_g_[k]) / L);
        w_new_[k] = up_new_[k] - um_new_[k];
      }
    };
    if (first) {
      X_.transposed_update_multiply(r_.data(), g_.data(), update, w_new_.data(), z_new_.data());
    } else {
      update(0, p_);
      X_.multiply(w_new_.data(), z_new_.data());
    }
    bias_.step(L, z_new_);
  }

  bool sufficient_decrease(double L) {
    const double f_new = smooth_loss(X_, o_.loss, y_, z_new_.data()) + regularize(up_new_, um_new_, nullptr);
    double linear = 0, step = 0;
    for (uint64_t k = 0; k < p_; ++k) {
      const double dp = up_new_[k] - upb_[k], dm = um_new_[k] - umb_[k];
      linear += (g_[k] + reg_g_[k]) * dp + (-g_[k] + reg_g_[k]) * dm;
      step += dp * dp + dm * dm;
    }
    bias_.add_to_test(linear, step);
    return decrease_holds(f_new, f_bar_, linear, L, step);
  }

  bool accept(double beta) {
    change_ = squared_distance(up_new_, up_) + squared_distance(um_new_, um_) + bias_.change_squared();
    bias_.accept(beta);
    shift_and_extrapolate(up_old_, up_, up_new_, upb_, beta);
    shift_and_extrapolate(um_old_, um_, um_new_, umb_, beta);
    shift_and_extrapolate(z_old_, z_, z_new_, zb_, beta);
    return false;
  }
  void finish() {}

  bool converged(double tol) const {
    const double norm = std::sqrt(dot(up_, up_) + dot(um_, um_) + bias_.value() * bias_.value());
    return std::sqrt(change_) <= tol * std::max(norm, 1e-12);
  }

  Vec weights() const {
    Vec w(p_);
    for (uint64_t k = 0; k < p_; ++k) w[k] = up_[k] - um_[k];
    return w;
  }
  const Vec& margins() const { return z_; }
  double bias() const { return bias_.value(); }

 private:
  // (λ/2) Σ_g (1ᵀ(u₊ + u₋)_g)², and its gradient λ Σ_{g∋k} s_g (same for u₊ and u₋).
  double regularize(const Vec& up, const Vec& um, Vec* gradient) const {
    double total = 0;
    if (gradient) std::fill(gradient->begin(), gradient->end(), 0.0);
    for (uint64_t g = 0; g < G_.count(); ++g) {
      double s = 0;
      for (uint64_t q = G_.member_ptr[g]; q < G_.member_ptr[g + 1]; ++q) s += up[G_.members[q]] + um[G_.members[q]];
      total += s * s;
      if (gradient)
        for (uint64_t q = G_.member_ptr[g]; q < G_.member_ptr[g + 1]; ++q) (*gradient)[G_.members[q]] += o_.lambda * s;
    }
    return 0.5 * o_.lambda * total;
  }

  Design& X_;
  const Vec& y_;
  const ExclusiveGroups& G_;
  const FistaOptions& o_;
  uint64_t n_, p_;
  Reservation memory_;
  Vec up_, um_, up_old_, um_old_, upb_, umb_, up_new_, um_new_, w_new_, g_, reg_g_;
  Vec z_, z_old_, zb_, z_new_, r_;
  BiasVariable bias_;
  double f_bar_ = 0, change_ = 0;
};

// ---------------------------------------------------------------- Fista-locp
class LocpSolver {
 public:
  LocpSolver(Design& X, const Vec& y, const ExclusiveGroups& G, const FistaOptions& o, MemoryBudget& budget,
             const Vec& warm_w, double warm_bias)
      : X_(X), y_(y), G_(G), o_(o), n_(X.rows()), p_(X.columns()) {
    if (!G.disjoint)
      throw_error(ErrorKind::kConfig,
                  "exclusive.algorithm = \"locp\" needs disjoint groups (its prox is the l1-cone projection per "
                  "group); these groups overlap: use \"pcp\"");
    memory_ = budget.reserve((6 * p_ + 5 * n_) * sizeof(double), "exclusive: Fista-locp vectors",
                             "use the working set (exclusive.working_set = true) or fewer features");
    for (Vec* v : {&w_, &w_old_, &wb_, &w_new_, &g_, &c_}) v->assign(p_, 0.0);
    for (Vec* v : {&z_, &z_old_, &zb_, &z_new_, &r_}) v->assign(n_, 0.0);
    if (!warm_w.empty()) {
      w_ = warm_w;
      X_.multiply(w_.data(), z_.data());
    }
    bias_.start(X_, o.bias, warm_bias);
    for (double& z : z_) z += bias_.value();
    wb_ = w_, zb_ = z_;
  }

  double initial_lipschitz(double norm_squared) const {
    return loss_curvature(o_.loss) * (norm_squared + bias_.norm_squared());
  }

  void trial(double L, bool first) {
    if (first) {
      f_bar_ = loss_and_derivative(X_, o_.loss, y_, zb_.data(), r_.data());
      X_.multiply_transposed(r_.data(), g_.data());
      bias_.gradient(X_, r_);
    }
    for (uint64_t k = 0; k < p_; ++k) c_[k] = wb_[k] - g_[k] / L;
    w_new_ = c_;  // a column in no group has no penalty: the prox leaves it
    Vec& member_c = member_c_;
    for (uint64_t g = 0; g < G_.count(); ++g) {
      const uint64_t d = G_.size(g);
      member_c.resize(d);
      for (uint64_t q = 0; q < d; ++q) member_c[q] = c_[G_.members[G_.member_ptr[g] + q]];
      prox_l1_squared(member_c.data(), d, o_.lambda / L, member_c.data(), scratch_);
      for (uint64_t q = 0; q < d; ++q) w_new_[G_.members[G_.member_ptr[g] + q]] = member_c[q];
    }
    X_.multiply(w_new_.data(), z_new_.data());
    bias_.step(L, z_new_);
  }

  bool sufficient_decrease(double L) {
    double linear = 0, step = 0;
    for (uint64_t k = 0; k < p_; ++k) {
      const double d = w_new_[k] - wb_[k];
      linear += g_[k] * d;
      step += d * d;
    }
    bias_.add_to_test(linear, step);
    return decrease_holds(smooth_loss(X_, o_.loss, y_, z_new_.data()), f_bar_, linear, L, step);
  }

  bool accept(double beta) {
    change_ = squared_distance(w_new_, w_) + bias_.change_squared();
    bias_.accept(beta);
    shift_and_extrapolate(w_old_, w_, w_new_, wb_, beta);
    shift_and_extrapolate(z_old_, z_, z_new_, zb_, beta);
    return false;
  }
  void finish() {}

  bool converged(double tol) const {
    return std::sqrt(change_) <= tol * std::max(std::sqrt(dot(w_, w_) + bias_.value() * bias_.value()), 1e-12);
  }
  Vec weights() const { return w_; }
  const Vec& margins() const { return z_; }
  double bias() const { return bias_.value(); }

 private:
  Design& X_;
  const Vec& y_;
  const ExclusiveGroups& G_;
  const FistaOptions& o_;
  uint64_t n_, p_;
  Reservation memory_;
  ProjectionScratch scratch_;
  Vec member_c_;  // one group's entries (reused: no allocation per iteration)
  Vec w_, w_old_, wb_, w_new_, g_, c_;
  Vec z_, z_old_, zb_, z_new_, r_;
  BiasVariable bias_;
  double f_bar_ = 0, change_ = 0;
};

// ---------------------------------------------------------------- Fista-licp
// Variables x = (u, v); images q = Zu − V(v) (p) and b = Xq (n), both linear
// in x. F = ‖q‖²/(2α) − 1ᵀu + c‖u‖², c = ¼ for the squared hinge (its
// conjugate's −u²/4; the hinge: c = 0), so ∇_u F = y∘b/α − 1 + 2c·u and
// ∇_{v^g} F = −q_g/α. The prox projects u onto the loss's box ([0, 1], or
// [0, ∞) for the squared hinge), intersected with yᵀu = 0 under the bias
// (project_dual_with_bias). Every trial is one fused pass: a = Xᵀ(y∘u'),
// q' = a − V(v') column by column, b' = Xq'.
class LicpSolver {
 public:
  LicpSolver(Design& X, const Vec& y, const ExclusiveGroups& G, const FistaOptions& o, MemoryBudget& budget,
             const Vec& warm_dual, double warm_bias)
      : X_(X), y_(y), G_(G), o_(o), n_(X.rows()), p_(X.columns()), m_(G.total_members()) {
    if (!(o.ridge > 0)) throw_error(ErrorKind::kConfig, "exclusive.ridge must be > 0 for exclusive.algorithm = \"licp\"");
    if (o.loss == ExclusiveLoss::kSquaredHinge) upper_ = std::numeric_limits<double>::infinity(), quad_ = 0.25;
    memory_ = budget.reserve((9 * p_ + 12 * n_ + 4 * m_) * sizeof(double), "exclusive: Fista-licp vectors",
                             "use the working set (exclusive.working_set = true) or fewer features");
    for (Vec* v : {&u_, &u_old_, &ub_, &u_new_, &grad_u_, &ry_, &z_q_}) v->assign(n_, 0.0);
    for (Vec* v : {&b_, &b_old_, &bb_, &b_new_}) v->assign(n_, 0.0);
    for (Vec* v : {&v_, &v_old_, &vb_, &v_new_}) v->assign(m_, 0.0);
    for (Vec* v : {&q_, &q_old_, &qb_, &q_new_, &a_, &V_new_, &a_current_, &w_cert_}) v->assign(p_, 0.0);
    z_cert_.assign(n_, 0.0);
    if (o.bias) {
      // best_scaled_primal needs every row's label and margin (all ranks').
      const double all = X_.sum_rows([](uint64_t begin, uint64_t end, double* out) { *out = double(end - begin); });
      bias_memory_ = budget.reserve(2 * uint64_t(all) * sizeof(double), "exclusive: Fista-licp labels and margins of all rows (bias)",
                                    "set exclusive.bias = false or use fewer rows per rank");
      X_.all_rows(y_.data(), y_all_);
      bias_ = warm_bias;
    }
    if (!warm_dual.empty()) {
      for (uint64_t i = 0; i < n_; ++i) u_[i] = std::clamp(warm_dual[i], 0.0, upper_);
      for (uint64_t i = 0; i < n_; ++i) ry_[i] = y_[i] * u_[i];
      X_.transposed_update_multiply(
          ry_.data(), a_.data(), [&](uint64_t f, uint64_t e) { std::copy(a_.begin() + f, a_.begin() + e, q_.begin() + f); },
          q_.data(), b_.data());
      a_current_ = a_;
    }
    ub_ = u_, vb_ = v_, qb_ = q_, bb_ = b_;
  }

  double initial_lipschitz(double norm_squared) const {
    return (norm_squared + double(G_.max_memberships())) / o_.ridge + 2 * quad_;
  }

  void trial(double L, bool first) {
    const double alpha = o_.ridge;
    if (first) {
      for (uint64_t i = 0; i < n_; ++i) grad_u_[i] = y_[i] * bb_[i] / alpha - 1.0 + 2 * quad_ * ub_[i];
      const RowSums at_bar = row_sums(ub_);
      f_bar_ = 0.5 * dot(qb_, qb_) / alpha - at_bar.total + quad_ * at_bar.squares;
    }
    for (uint64_t i = 0; i < n_; ++i) u_new_[i] = ub_[i] - grad_u_[i] / L;
    if (o_.bias) {
      tau_ = project_dual_with_bias(X_, y_, u_new_.data(), upper_, tau_);
    } else {
      for (uint64_t i = 0; i < n_; ++i) u_new_[i] = std::clamp(u_new_[i], 0.0, upper_);
    }
    for (uint64_t i = 0; i < n_; ++i) ry_[i] = y_[i] * u_new_[i];
    std::fill(V_new_.begin(), V_new_.end(), 0.0);
    Vec& d = member_d_;
    for (uint64_t g = 0; g < G_.count(); ++g) {
      const uint64_t first_member = G_.member_ptr[g], size = G_.size(g);
      d.resize(size);
      for (uint64_t q = 0; q < size; ++q) d[q] = vb_[first_member + q] + qb_[G_.members[first_member + q]] / (alpha * L);
      project_linf_cone(d.data(), size, 0.0, 1.0 / (L * o_.lambda), &v_new_[first_member], scratch_);
      for (uint64_t q = 0; q < size; ++q) V_new_[G_.members[first_member + q]] += v_new_[first_member + q];
    }
    X_.transposed_update_multiply(
        ry_.data(), a_.data(),
        [&](uint64_t f, uint64_t e) {
          for (uint64_t k = f; k < e; ++k) q_new_[k] = a_[k] - V_new_[k];
        },
        q_new_.data(), b_new_.data());
  }

  bool sufficient_decrease(double L) {
    const double alpha = o_.ridge;
    // Σ u', Σ u'², and the rows' parts of ⟨∇F, x' − x̄⟩ and ‖x' − x̄‖², in one row sum.
    double sums[4];
    X_.sum_rows(4, [&](uint64_t begin, uint64_t end, double* out) {
      double total = 0, linear = 0, step = 0, squares = 0;
      for (uint64_t i = begin; i < end; ++i) {
        const double d = u_new_[i] - ub_[i];
        total += u_new_[i];
        squares += u_new_[i] * u_new_[i];
        linear += grad_u_[i] * d;
        step += d * d;
      }
      out[0] = total, out[1] = linear, out[2] = step, out[3] = squares;
    }, sums);
    double f_new = 0.5 * dot(q_new_, q_new_) / alpha - sums[0];
    if (quad_ > 0) f_new += quad_ * sums[3];
    double linear = sums[1], step = sums[2];
    for (uint64_t q = 0; q < m_; ++q) {
      const double d = v_new_[q] - vb_[q];
      linear += -qb_[G_.members[q]] / alpha * d;
      step += d * d;
    }
    return decrease_holds(f_new, f_bar_, linear, L, step);
  }

  // Gradient restart (O'Donoghue & Candès 2015): when the momentum points
  // against the gradient-map step, ⟨x̄ − x', x' − x⟩ > 0, drop it (β = 0) and
  // return true so that the loop resets t = 1. The dual (11) is not strongly
  // convex; without restarts FISTA creeps at O(1/k²) for ~10⁵ iterations on a
  // 2,000-row set, with restarts it converges linearly near the optimum.
  bool accept(double beta) {
    double score = X_.sum_rows([&](uint64_t begin, uint64_t end, double* out) {
      double s = 0;
      for (uint64_t i = begin; i < end; ++i) s += (ub_[i] - u_new_[i]) * (u_new_[i] - u_[i]);
      *out = s;
    });
    for (uint64_t q = 0; q < m_; ++q) score += (vb_[q] - v_new_[q]) * (v_new_[q] - v_[q]);
    const bool restart = score > 0;
    if (restart) beta = 0;
    shift_and_extrapolate(u_old_, u_, u_new_, ub_, beta);
    shift_and_extrapolate(v_old_, v_, v_new_, vb_, beta);
    shift_and_extrapolate(q_old_, q_, q_new_, qb_, beta);
    shift_and_extrapolate(b_old_, b_, b_new_, bb_, beta);
    a_current_ = a_;  // Xᵀ(y∘u) of the accepted u (the last trial's)
    ++accepted_;
    certified_ = false;
    // Overlapping groups certify every iteration (row sums only), unless the
    // bias's best b gathers every row's margin.
    if ((!G_.disjoint && !o_.bias) || accepted_ % kCertifyEvery == 0) certify();
    return restart;
  }

  // The certificate at the final iterate (the loop may stop between checks).
  void finish() {
    if (!certified_) certify();
  }

  bool converged(double tol) const { return certified_ && gap_ <= tol * std::max(1.0, std::fabs(primal_)); }

  // The certificate's primal point: scale_·(w(u) or q/α), margins scaled, + b.
  Vec weights() const {
    Vec w(p_);
    if (G_.disjoint && !use_q_) w = w_cert_;
    else
      for (uint64_t k = 0; k < p_; ++k) w[k] = q_[k] / o_.ridge;
    if (o_.bias)
      for (double& e : w) e *= scale_;
    return w;
  }
  Vec margins() const {
    Vec z(n_);
    if (G_.disjoint && !use_q_) z = z_cert_;
    else
      for (uint64_t i = 0; i < n_; ++i) z[i] = b_[i] / o_.ridge;
    if (o_.bias)
      for (double& e : z) e = scale_ * e + bias_;
    return z;
  }
  const Vec& dual_u() const { return u_; }
  double gap() const { return gap_; }
  double bias() const { return o_.bias ? bias_ : 0.0; }

 private:
  struct RowSums {
    double total = 0, squares = 0;
  };
  // Σ u_i and Σ u_i² over all rows.
  RowSums row_sums(const Vec& u) {
    double sums[2];
    X_.sum_rows(2, [&](uint64_t begin, uint64_t end, double* out) {
      double total = 0, squares = 0;
      for (uint64_t i = begin; i < end; ++i) total += u[i], squares += u[i] * u[i];
      out[0] = total, out[1] = squares;
    }, sums);
    return {sums[0], sums[1]};
  }
  // The primal value of a candidate point w (margins z = Xw, Ω(w) = omega);
  // with the bias, of (s·w, b) with the best s ≥ 0 and b (best_scaled_primal,
  // on every row's margin), written to `scale`, `bias`.
  double candidate_primal(const Vec& z, double loss_at_z, double omega, double& scale, double& bias) {
    scale = 1, bias = 0;
    if (!o_.bias) return loss_at_z + omega;
    X_.all_rows(z.data(), z_all_);
    // From (1, the best b for w): the alternation between s and b alone can
    // stall at a kink of the hinge far from the optimum (a start at the last
    // certificate's b kept b = 1 for 400,000 iterations with a gap of 0.47).
    const double best_bias = best_svm_bias(o_.loss, y_all_, z_all_.data());
    const ScaledPrimal point = best_scaled_primal(o_.loss, y_all_, z_all_.data(), omega, true, best_bias);
    scale = point.scale, bias = point.bias;
    return point.loss + scale * scale * omega;
  }
  // The duality gap of (10) at the current dual point.
  //  * Disjoint groups: v is eliminated exactly. Ω(w) = (α/2)‖w‖² + (λ/2)‖w‖_e²
  //    is α-strongly convex and separable over the groups, so the dual of (10)
  //    is D(u) = Σ_i (u_i − c·u_i²) − Ω*(Zu) with the primal point w(u) = ∇Ω*(Zu),
  //    per group w_g = prox_{(λ/α)·½‖·‖₁²}((Zu)_g/α) (a column in no group:
  //    (Zu)_k/α). D(u) ≥ D(u, v) for every v, and the primal point is the
  //    better of w(u) and the iterate's q/α, so this gap is never looser than
  //    (11)'s; it costs one multiply, done every kCertifyEvery iterations.
  //  * Overlapping groups: Ω* has no closed form; P(q/α) − D(u, v) of (11).
  // With the bias (u feasible: yᵀu = 0 from the projection) each primal
  // point is s·w with its best s and b, as the coordinate solver's certificate.
  void certify() {
    certified_ = true;
    const double alpha = o_.ridge;
    const bool disjoint = G_.disjoint;
    if (disjoint) {
      for (uint64_t k = 0; k < p_; ++k) w_cert_[k] = a_current_[k] / alpha;  // columns in no group
      Vec& c = member_d_;
      for (uint64_t g = 0; g < G_.count(); ++g) {
        const uint64_t first_member = G_.member_ptr[g], size = G_.size(g);
        c.resize(size);
        for (uint64_t q = 0; q < size; ++q) c[q] = a_current_[G_.members[first_member + q]] / alpha;
        prox_l1_squared(c.data(), size, o_.lambda / alpha, c.data(), scratch_);
        for (uint64_t q = 0; q < size; ++q) w_cert_[G_.members[first_member + q]] = c[q];
      }
      X_.multiply(w_cert_.data(), z_cert_.data());
    }
    for (uint64_t i = 0; i < n_; ++i) z_q_[i] = b_[i] / alpha;
    // Σu, Σu², and the losses at q/α and at w(u), in one row sum.
    double sums[4];
    X_.sum_rows(4, [&](uint64_t begin, uint64_t end, double* out) {
      double total = 0, squares = 0;
      for (uint64_t i = begin; i < end; ++i) total += u_[i], squares += u_[i] * u_[i];
      out[0] = total, out[1] = squares;
      out[2] = smooth_loss(o_.loss, y_, z_q_.data(), begin, end);
      out[3] = disjoint ? smooth_loss(o_.loss, y_, z_cert_.data(), begin, end) : 0.0;
    }, sums);
    double conjugate_term = sums[0];  // Σ_i (u_i − c·u_i²)
    if (quad_ > 0) conjugate_term -= quad_ * sums[1];
    Vec w_q(p_);
    for (uint64_t k = 0; k < p_; ++k) w_q[k] = q_[k] / alpha;
    double scale_q = 1, bias_q = 0;
    const double primal_q = candidate_primal(z_q_, sums[2], regularizer(o_.loss, G_, w_q.data(), o_.lambda, alpha),
                                             scale_q, bias_q);
    if (!disjoint) {
      primal_ = primal_q, use_q_ = true, scale_ = scale_q, bias_ = bias_q;
      gap_ = primal_ - dual(conjugate_term);
      return;
    }
    // D(u) = Σ(u − c·u²) − ⟨Zu, w(u)⟩ + Ω(w(u)).
    const double omega = regularizer(o_.loss, G_, w_cert_.data(), o_.lambda, alpha);
    const double dual_value = conjugate_term - dot(a_current_, w_cert_) + omega;
    double scale_w = 1, bias_w = 0;
    const double primal_w = candidate_primal(z_cert_, sums[3], omega, scale_w, bias_w);
    // The better primal point is the answer (both are certified by D(u)).
    use_q_ = primal_q < primal_w;
    primal_ = std::min(primal_q, primal_w);
    scale_ = use_q_ ? scale_q : scale_w, bias_ = use_q_ ? bias_q : bias_w;
    gap_ = std::max(0.0, primal_ - dual_value);
  }

  // −(F + H) at (u, v): the dual objective of Theorem 4 (with the squared
  // hinge's c‖u‖² in F), from Σ_i (u_i − c·u_i²).
  double dual(double conjugate_term) const {
    double h = 0;
    for (uint64_t g = 0; g < G_.count(); ++g) {
      double m = 0;
      for (uint64_t q = G_.member_ptr[g]; q < G_.member_ptr[g + 1]; ++q) m = std::max(m, std::fabs(v_[q]));
      h += m * m;
    }
    return -(0.5 * dot(q_, q_) / o_.ridge - conjugate_term + 0.5 * h / o_.lambda);
  }

  Design& X_;
  const Vec& y_;
  const ExclusiveGroups& G_;
  const FistaOptions& o_;
  uint64_t n_, p_, m_;
  Reservation memory_, bias_memory_;
  ProjectionScratch scratch_;
  Vec u_, u_old_, ub_, u_new_, grad_u_, ry_, z_q_;
  Vec b_, b_old_, bb_, b_new_;
  Vec v_, v_old_, vb_, v_new_;
  Vec q_, q_old_, qb_, q_new_, a_, V_new_;
  Vec member_d_;  // one group's entries (reused: no allocation per iteration)
  Vec a_current_, w_cert_, z_cert_;  // disjoint groups: Zu, w(u) and Xw(u) of the certificate
  // The loss's conjugate: the hinge u ∈ [0, 1]; the squared hinge u ≥ 0 and
  // the dual's −¼u² (quad_ = ¼).
  double upper_ = 1.0, quad_ = 0.0;
  // The bias: every row's label and a candidate's margins (best_scaled_primal),
  // the last projection's τ (the next one's start), the primal point's s and b.
  Vec y_all_, z_all_;
  double tau_ = 0, scale_ = 1, bias_ = 0;
  static constexpr uint64_t kCertifyEvery = 5;
  uint64_t accepted_ = 0;
  bool certified_ = false, use_q_ = false;
  double f_bar_ = 0, gap_ = 0, primal_ = 0;
};

// `norm_squared`: ‖X‖² estimated before the solver's vectors are reserved
// (the power iteration's own vectors are released by then).
template <class Solver>
void run_fista(Solver& s, Design& X, double norm_squared, const Vec& y, const ExclusiveGroups& G, const FistaOptions& o,
               FistaResult& out) {
  double L = o.lipschitz > 0 ? o.lipschitz : s.initial_lipschitz(norm_squared);
  if (!(L > 0)) L = 1.0;  // an all-zero design: any step is exact
  double t = 1;
  for (int k = 1; k <= o.max_iterations; ++k) {
    check_interrupt();
    s.trial(L, true);
    while (!s.sufficient_decrease(L) && L < 1e300) {
      L *= 2;
      ++out.backtracks;
      s.trial(L, false);
    }
    const double t_next = o.paper_momentum_misprint ? 0.5 + 0.5 * std::sqrt(1 + 4 * t)
                                                    : 0.5 + 0.5 * std::sqrt(1 + 4 * t * t);
    t = s.accept((t - 1) / t_next) ? 1.0 : t_next;  // true: momentum restarted
    out.iterations = k;
    if (o.record_objective) {
      const Vec w = s.weights();
      const Vec z = s.margins();
      out.trace.push_back(exclusive_objective(X, o.loss, y, z.data(), G, w.data(), o.lambda, o.ridge));
    }
    if (s.converged(o.tolerance)) {
      out.converged = true;
      break;
    }
  }
  s.finish();
  out.lipschitz = L;
  out.w = s.weights();
  out.margins = s.margins();
  out.bias = s.bias();
  out.objective = exclusive_objective(X, o.loss, y, out.margins.data(), G, out.w.data(), o.lambda, o.ridge, &out.loss);
  out.regularizer = out.objective - out.loss;
}

}  // namespace

std::pair<double, double> hinge_bias_minimisers(const std::vector<double>& y, const double* z) {
  // The slope is −n₊ left of every kink and rises by 1 at each: the minimisers
  // are [k_(n₊), k_(n₊+1)] (sorted kinks, 1-based; ±∞ past the ends).
  std::vector<double> kinks(y.size());
  size_t positives = 0;
  for (size_t i = 0; i < y.size(); ++i) kinks[i] = y[i] - z[i], positives += y[i] > 0;
  const auto at = [&](size_t rank) {  // the rank-th smallest kink (0-based), without sorting them all
    std::nth_element(kinks.begin(), kinks.begin() + rank, kinks.end());
    return kinks[rank];
  };
  const double low = positives == 0 ? -std::numeric_limits<double>::infinity() : at(positives - 1);
  const double high = positives == kinks.size() ? std::numeric_limits<double>::infinity() : at(positives);
  return {low, high};
}

double best_hinge_bias(const std::vector<double>& y, const double* z) {
  // The squared hinge is strictly convex wherever a row is active, so its
  // minimiser clamped to the hinge's interval is the tie-break's (convexity).
  const auto [low, high] = hinge_bias_minimisers(y, z);
  return std::clamp(best_squared_hinge_bias(y, z), low, high);
}

double best_squared_hinge_bias(const std::vector<double>& y, const double* z) {
  // Sweep b upwards through the sorted kinks: a positive row is active left
  // of its kink, a negative one right of it; φ(b)/2 = c·b − S over the active
  // rows (c of them, S = Σ k_i) on each interval between kinks.
  const size_t n = y.size();
  std::vector<std::pair<double, bool>> kinks(n);  // (k_i, y_i > 0)
  double c = 0, S = 0;
  for (size_t i = 0; i < n; ++i) {
    kinks[i] = {y[i] - z[i], y[i] > 0};
    if (y[i] > 0) c += 1, S += kinks[i].first;
  }
  std::sort(kinks.begin(), kinks.end());
  double low = -std::numeric_limits<double>::infinity();
  for (size_t q = 0; q <= n; ++q) {
    const double high = q < n ? kinks[q].first : std::numeric_limits<double>::infinity();
    if (high > low) {  // a nonempty interval [low, high] with this active set
      if (c == 0) return std::clamp(0.0, low, high);  // φ = 0: every point a minimiser
      if (c * high - S > 0) return std::clamp(S / c, low, high);  // φ turns positive here
    }
    if (q == n) break;
    if (kinks[q].second) c -= 1, S -= kinks[q].first;  // a positive row leaves
    else c += 1, S += kinks[q].first;                  // a negative row enters
    low = high;
  }
  return std::clamp(0.0, low, std::numeric_limits<double>::infinity());  // not reached for finite margins
}

double best_svm_bias(ExclusiveLoss loss, const std::vector<double>& y, const double* z) {
  return loss == ExclusiveLoss::kSquaredHinge ? best_squared_hinge_bias(y, z) : best_hinge_bias(y, z);
}

double project_dual_with_bias(Design& X, const std::vector<double>& y, double* v, double upper, double tau) {
  // On the piece of φ holding τ: φ(τ) itself, the free rows' count c and
  // A = Σ_free y_i v_i + Σ_{at upper} y_i·upper, so that φ = A − c·τ there.
  struct Piece {
    double phi = 0, count = 0, intercept = 0;
  };
  auto piece_at = [&](double t) {
    double sums[3];
    X.sum_rows(3, [&](uint64_t begin, uint64_t end, double* out) {
      double phi = 0, count = 0, intercept = 0;
      for (uint64_t i = begin; i < end; ++i) {
        const double e = v[i] - t * y[i];
        if (e <= 0) continue;
        if (e >= upper) {
          phi += y[i] * upper, intercept += y[i] * upper;
        } else {
          phi += y[i] * e, intercept += y[i] * v[i], count += 1;
        }
      }
      out[0] = phi, out[1] = count, out[2] = intercept;
    }, sums);
    return Piece{sums[0], sums[1], sums[2]};
  };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double low = -kInf, high = kInf;  // φ(low) > 0 > φ(high)
  Piece at = piece_at(tau);
  int newton_misses = 0;
  for (int step = 0; step < 2000 && at.phi != 0; ++step) {
    (at.phi > 0 ? low : high) = tau;
    // Newton: the root of this piece's line. Safeguards: inside the bracket,
    // and a bisection after two Newton steps that missed their piece.
    double next = at.count > 0 ? at.intercept / at.count : kInf;
    bool newton = next > low && next < high && newton_misses < 2;
    if (!newton) {
      newton_misses = 0;
      if (std::isfinite(low) && std::isfinite(high)) next = low + 0.5 * (high - low);
      else if (std::isfinite(low)) next = low + std::max(1.0, 2 * std::fabs(low));
      else next = high - std::max(1.0, 2 * std::fabs(high));
      if (!(next > low && next < high)) break;  // low and high adjacent doubles
    }
    const Piece there = piece_at(next);
    tau = next;
    const bool same_piece = there.count == at.count && there.intercept == at.intercept;
    at = there;
    if (newton && same_piece) break;  // the root of the piece it lies on: exact up to rounding
    newton_misses += newton;
  }
  for (uint64_t i = 0; i < X.rows(); ++i) v[i] = std::clamp(v[i] - tau * y[i], 0.0, upper);
  return tau;
}

void balance_dual(const std::vector<double>& y, std::vector<double>& u) {
  double positive = 0, negative = 0;
  for (size_t i = 0; i < y.size(); ++i) (y[i] > 0 ? positive : negative) += u[i];
  if (positive == negative) return;
  const bool shrink_positive = positive > negative;
  const double scale = shrink_positive ? negative / positive : positive / negative;
  for (size_t i = 0; i < y.size(); ++i)
    if ((y[i] > 0) == shrink_positive) u[i] *= scale;
}

void loss_derivative(ExclusiveLoss loss, const std::vector<double>& y, const double* z, double* r) {
  for (size_t i = 0; i < y.size(); ++i) r[i] = row_loss_derivative(loss, y[i], z[i]);
}

double exclusive_objective(ExclusiveLoss loss, const std::vector<double>& y, const double* z, const ExclusiveGroups& groups,
                           const double* w, double lambda, double ridge, double* loss_out) {
  const double f = smooth_loss(loss, y, z, 0, y.size());
  if (loss_out) *loss_out = f;
  return f + regularizer(loss, groups, w, lambda, ridge);
}

double exclusive_objective(Design& X, ExclusiveLoss loss, const std::vector<double>& y, const double* z,
                           const ExclusiveGroups& groups, const double* w, double lambda, double ridge,
                           double* loss_out) {
  const double f = smooth_loss(X, loss, y, z);
  if (loss_out) *loss_out = f;
  return f + regularizer(loss, groups, w, lambda, ridge);
}

FistaResult solve_exclusive(Design& X, const std::vector<double>& y, const ExclusiveGroups& groups,
                            const FistaOptions& options, MemoryBudget& budget, const std::vector<double>& warm_w,
                            const std::vector<double>& warm_dual, double warm_bias) {
  FGM_ASSERT(y.size() == X.rows() && groups.columns == X.columns());
  if (is_svm_loss(options.loss) != (options.algorithm == Algorithm::kLicp))
    throw_error(ErrorKind::kConfig, std::string("exclusive.loss = \"") + loss_name(options.loss) +
                                        "\" does not go with exclusive.algorithm = \"" +
                                        algorithm_name(options.algorithm) +
                                        "\": licp solves the hinge and squared-hinge losses (E-SVM), pcp and locp "
                                        "the squared and logistic losses");
  if (!warm_w.empty()) FGM_ASSERT(warm_w.size() == X.columns());
  if (!warm_dual.empty()) FGM_ASSERT(warm_dual.size() == X.rows());
  if (options.algorithm == Algorithm::kLicp && options.licp_coordinate && groups.disjoint)
    if (const auto* in_memory = dynamic_cast<const InMemoryDesign*>(&X))
      return solve_licp_coordinate(*in_memory, y, groups, options, budget, warm_dual);
  FistaResult out;
  const uint64_t passes_before = X.passes();
  const double norm_squared = options.lipschitz > 0     ? 0.0
                              : options.norm_squared > 0 ? options.norm_squared
                                                         : estimate_norm_squared(X, options.power_iterations, budget);
  out.norm_squared = norm_squared;
  switch (options.algorithm) {
    case Algorithm::kPcp: {
      PcpSolver s(X, y, groups, options, budget, warm_w, warm_bias);
      run_fista(s, X, norm_squared, y, groups, options, out);
      break;
    }
    case Algorithm::kLocp: {
      LocpSolver s(X, y, groups, options, budget, warm_w, warm_bias);
      run_fista(s, X, norm_squared, y, groups, options, out);
      break;
    }
    case Algorithm::kLicp: {
      LicpSolver s(X, y, groups, options, budget, warm_dual, warm_bias);
      run_fista(s, X, norm_squared, y, groups, options, out);
      out.dual = s.dual_u();
      out.duality_gap = s.gap();
      break;
    }
  }
  out.passes = X.passes() - passes_before;
  return out;
}

}  // namespace fgm::exclusive
