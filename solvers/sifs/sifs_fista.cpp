#include "solvers/sifs/sifs_fista.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/interrupt.h"
#include "solvers/sifs/sifs_reduced_rows.h"

namespace fgm {
namespace {

// The reduced sums at one point v (over every part of every process).
struct Evaluation {
  std::vector<double> z;  // z(θ(v)) on the free weights (0 elsewhere)
  double loss = 0;        // Σ_free ℓ(1 + ⟨a_d, v⟩)
  double theta_sq = 0, theta_sum = 0;
};

// Margins t_d = 1 + ⟨a_d, v⟩ of every free coordinate, per part.
using Margins = std::vector<std::vector<double>>;

class FistaProblem {
 public:
  FistaProblem(const std::vector<ReducedProblem>& parts, uint64_t n, RowSumReduction& reduction)
      : parts_(parts), reduction_(reduction), shared_(parts[0]), n_(static_cast<double>(n)) {
    for (const auto& p : parts) rows_.emplace_back(p);
    W_ = rows_[0].weights();
  }

  uint64_t weights() const { return W_; }
  size_t parts() const { return parts_.size(); }
  size_t coordinates(size_t q) const { return parts_[q].coordinate.size(); }
  const ReducedRows& rows(size_t q) const { return rows_[q]; }
  bool free(uint64_t e) const { return shared_.free_weight[e] != 0; }
  double alpha() const { return shared_.alpha; }
  double gamma() const { return shared_.gamma; }
  double gamma_n() const { return shared_.gamma * n_; }
  int reductions() const { return reductions_; }

  // α + max_d ‖a_d‖²/(γn): a lower bound on f's curvature.
  double lipschitz_lower_bound() {
    double largest = 0;
    for (size_t q = 0; q < parts_.size(); ++q)
      for (size_t i = 0; i < coordinates(q); ++i) largest = std::max(largest, rows_[q].square_norm(i));
    ++reductions_;
    return shared_.alpha + reduction_.max(largest) / (shared_.gamma * n_);
  }

  Margins margins(const std::vector<double>& v) const {
    Margins t(parts_.size());
    for (size_t q = 0; q < parts_.size(); ++q)
      for (size_t i = 0; i < coordinates(q); ++i) t[q].push_back(1 + rows_[q].dot(i, v));
    return t;
  }

  // Adds part q's sums at margins t to sums[at .. at + W + 3): Σθ_d a_d, Σℓ, Σθ², Σθ.
  void add_sums(size_t q, const std::vector<double>& t, std::vector<double>& sums, size_t at) const {
    std::vector<double> a(W_, 0.0);
    double loss = 0, theta_sq = 0, theta_sum = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      const double theta = std::clamp(t[i] / shared_.gamma, 0.0, 1.0);
      loss += smoothed_hinge(t[i], shared_.gamma);
      theta_sq += theta * theta;
      theta_sum += theta;
      if (theta != 0) rows_[q].add(i, theta, a, [](uint64_t) {});
    }
    std::copy(a.begin(), a.end(), sums.begin() + static_cast<int64_t>(at));
    sums[at + W_] = loss, sums[at + W_ + 1] = theta_sq, sums[at + W_ + 2] = theta_sum;
  }

  // The evaluation in total[at .. at + W + 3).
  Evaluation evaluation(const std::vector<double>& total, size_t at) const {
    Evaluation ev;
    ev.z.assign(W_, 0.0);
    for (uint64_t e = 0; e < W_; ++e)
      if (free(e)) ev.z[e] = shared_.z_offset[e] - total[at + e] / n_;
    ev.loss = total[at + W_], ev.theta_sq = total[at + W_ + 1], ev.theta_sum = total[at + W_ + 2];
    return ev;
  }

  // Every part's sums (`length` numbers each, filled by fill(q, sums)), reduced.
  template <class F>
  std::vector<double> reduce(size_t length, F&& fill) {
    std::vector<std::vector<double>> local(parts_.size());
    for (size_t q = 0; q < parts_.size(); ++q) {
      local[q].assign(length, 0.0);
      fill(q, local[q]);
    }
    ++reductions_;
    return reduction_.sum(local, length);
  }

  Evaluation evaluate(const Margins& t) {
    const std::vector<double> total = reduce(W_ + 3, [&](size_t q, std::vector<double>& s) { add_sums(q, t[q], s, 0); });
    return evaluation(total, 0);
  }

  double primal(const std::vector<double>& v, const Evaluation& ev) const {
    double offset_dot = 0, sq = 0, l1 = 0;
    for (uint64_t e = 0; e < W_; ++e) {
      offset_dot += shared_.z_offset[e] * v[e];
      sq += v[e] * v[e];
      l1 += std::abs(v[e]);
    }
    const double L = static_cast<double>(shared_.in_L);
    return (ev.loss + L * (1 - shared_.gamma / 2)) / n_ - offset_dot + shared_.alpha / 2 * sq + shared_.beta * l1;
  }

  // −D̂(θ(v)), a lower bound on min P̂.
  double dual(const Evaluation& ev) const {
    double soft_sq = 0;
    for (uint64_t e = 0; e < W_; ++e) {
      const double s = soft_threshold(ev.z[e], shared_.beta);
      soft_sq += s * s;
    }
    const double L = static_cast<double>(shared_.in_L);
    return -(soft_sq / (2 * shared_.alpha) + shared_.gamma / (2 * n_) * (ev.theta_sq + L) - (ev.theta_sum + L) / n_);
  }

  // The prox-gradient step from y with ∇f(y) = −z + αy.
  std::vector<double> prox_step(const std::vector<double>& y, const Evaluation& ey, double L) const {
    std::vector<double> x(W_, 0.0);
    for (uint64_t e = 0; e < W_; ++e)
      if (free(e)) x[e] = soft_threshold(y[e] - (shared_.alpha * y[e] - ey.z[e]) / L, shared_.beta / L);
    return x;
  }

 private:
  const std::vector<ReducedProblem>& parts_;
  RowSumReduction& reduction_;
  const ReducedProblem& shared_;
  double n_;
  std::vector<ReducedRows> rows_;
  uint64_t W_ = 0;
  int reductions_ = 0;
};

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t e = 0; e < a.size(); ++e) s += a[e] * b[e];
  return s;
}

// Margins are carried from iterate to iterate by their linear updates
// (t(x + Δ) = t(x) + ⟨a, Δ⟩); they are recomputed from the iterate this
// often, and always before a gap is reported, so the certificate is exact.
constexpr int kMarginRefresh = 50;

}  // namespace

FistaResult solve_reduced_fista(const std::vector<ReducedProblem>& parts, uint64_t n, RowSumReduction& reduction,
                                std::vector<double> w0, double tol, int max_iterations) {
  FGM_ASSERT(!parts.empty());
  FistaProblem problem(parts, n, reduction);
  const uint64_t W = problem.weights();
  const size_t P = problem.parts();
  FGM_ASSERT(w0.size() == W);
  for (uint64_t e = 0; e < W; ++e)
    if (!problem.free(e)) w0[e] = 0;
  double L = problem.lipschitz_lower_bound();
  std::vector<double> x = std::move(w0), y = x;
  Margins tx = problem.margins(x), ty = tx;
  Evaluation ex = problem.evaluate(tx), ey = ex;
  FistaResult out;
  out.primal = problem.primal(x, ex);
  out.dual = problem.dual(ex);
  bool exact = true;  // tx are x's margins computed afresh (not carried)
  double t = 1;
  int since_refresh = 0;
  while (out.primal - out.dual > tol && out.iterations < max_iterations) {
    check_interrupt();
    // One reduction per trial: the trial point's sums, Σ⟨a_d, Δ⟩² for the
    // step test, and the sums at the next extrapolated point (when no restart).
    std::vector<double> next, step(W), momentum(W);
    Margins tn(P), ty_next(P);
    bool restart = false;
    double momentum_weight = 0;
    std::vector<double> total;
    for (;;) {
      next = problem.prox_step(y, ey, L);
      double step_norm = 0;
      for (uint64_t e = 0; e < W; ++e) {
        step[e] = next[e] - y[e], step_norm += step[e] * step[e];
        momentum[e] = next[e] - x[e];
      }
      // Gradient restart: the step y → next points against the momentum next − x.
      restart = dot(step, momentum) < 0;
      const double t_next = restart ? 1 : (1 + std::sqrt(1 + 4 * t * t)) / 2;
      momentum_weight = restart ? 0 : (t - 1) / t_next;
      const size_t length = 2 * (W + 3) + 1;
      total = problem.reduce(length, [&](size_t q, std::vector<double>& s) {
        const ReducedRows& rows = problem.rows(q);
        tn[q].resize(problem.coordinates(q));
        ty_next[q].resize(problem.coordinates(q));
        double step_sq = 0;
        for (size_t i = 0; i < tn[q].size(); ++i) {
          const double dt = rows.dot(i, step);
          step_sq += dt * dt;
          tn[q][i] = ty[q][i] + dt;
          ty_next[q][i] = tn[q][i] + momentum_weight * (tn[q][i] - tx[q][i]);
        }
        problem.add_sums(q, tn[q], s, 0);
        if (!restart) problem.add_sums(q, ty_next[q], s, W + 3);
        s[2 * (W + 3)] = step_sq;
      });
      if (step_norm == 0) break;
      const double curvature = problem.alpha() + total[2 * (W + 3)] / (problem.gamma_n() * step_norm);
      if (curvature <= L) break;
      L = std::max(2 * L, curvature);
    }
    ++out.iterations;
    const bool stalled = next == x;  // a fixed point at the rounding floor
    t = restart ? 1 : (1 + std::sqrt(1 + 4 * t * t)) / 2;
    x = std::move(next);
    tx = std::move(tn);
    ex = problem.evaluation(total, 0);
    exact = false;
    if (restart) {
      y = x, ty = tx, ey = ex;
    } else {
      for (uint64_t e = 0; e < W; ++e) y[e] = x[e] + momentum_weight * momentum[e];
      ty = std::move(ty_next);
      ey = problem.evaluation(total, W + 3);
    }
    out.primal = problem.primal(x, ex), out.dual = problem.dual(ex);
    const bool last = out.primal - out.dual <= tol || stalled || out.iterations >= max_iterations;
    if (last || ++since_refresh >= kMarginRefresh) {
      // Fresh margins: an exact certificate, and no drift carried on.
      tx = problem.margins(x);
      ty = problem.margins(y);
      ex = problem.evaluate(tx);
      out.primal = problem.primal(x, ex), out.dual = problem.dual(ex);
      exact = true;
      since_refresh = 0;
      if (restart) ey = ex;
    }
    if (stalled) break;
  }
  FGM_ASSERT(exact);
  out.gap = out.primal - out.dual;
  out.converged = out.gap <= tol;
  out.theta.resize(P);
  for (size_t q = 0; q < P; ++q)
    for (double m : tx[q]) out.theta[q].push_back(std::clamp(m / problem.gamma(), 0.0, 1.0));
  out.w = std::move(x);
  out.reductions = problem.reductions();
  return out;
}

}  // namespace fgm
