#include "solvers/sifs/sifs_fista.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "solvers/sifs/sifs_reduced_rows.h"

namespace fgm {
namespace {

// The reduced sums at one point v, over every part of every process.
struct Evaluation {
  std::vector<double> z;  // z(θ(v)) on the free weights (0 elsewhere)
  double loss = 0;        // Σ_free ℓ(1 + ⟨a_d, v⟩)
  double theta_sq = 0, theta_sum = 0;
  double step_sq = 0;     // Σ_free ⟨a_d, Δ⟩² (with a step Δ)
};

class FistaProblem {
 public:
  FistaProblem(const std::vector<ReducedProblem>& parts, uint64_t n, RowSumReduction& reduction)
      : parts_(parts), reduction_(reduction), shared_(parts[0]), n_(static_cast<double>(n)) {
    for (const auto& p : parts) rows_.emplace_back(p);
    W_ = rows_[0].weights();
  }

  uint64_t weights() const { return W_; }
  bool free(uint64_t e) const { return shared_.free_weight[e] != 0; }
  int reductions() const { return reductions_; }

  // α + max_d ‖a_d‖²/(γn): a lower bound on f's curvature.
  double lipschitz_lower_bound() {
    double largest = 0;
    for (size_t q = 0; q < parts_.size(); ++q)
      for (size_t i = 0; i < parts_[q].coordinate.size(); ++i) largest = std::max(largest, rows_[q].square_norm(i));
    ++reductions_;
    return shared_.alpha + reduction_.max(largest) / (shared_.gamma * n_);
  }

  Evaluation evaluate(const std::vector<double>& v, const std::vector<double>* step) {
    std::vector<std::vector<double>> local(parts_.size());
    for (size_t q = 0; q < parts_.size(); ++q) {
      std::vector<double>& sums = local[q];
      sums.assign(W_ + 4, 0.0);
      const ReducedRows& rows = rows_[q];
      double loss = 0, theta_sq = 0, theta_sum = 0, step_sq = 0;
      for (size_t i = 0; i < parts_[q].coordinate.size(); ++i) {
        const double t = 1 + rows.dot(i, v);
        const double theta = std::clamp(t / shared_.gamma, 0.0, 1.0);
        loss += smoothed_hinge(t, shared_.gamma);
        theta_sq += theta * theta;
        theta_sum += theta;
        if (theta != 0) rows.add(i, theta, sums, [](uint64_t) {});
        if (step) {
          const double dt = rows.dot(i, *step);
          step_sq += dt * dt;
        }
      }
      sums[W_] = loss, sums[W_ + 1] = theta_sq, sums[W_ + 2] = theta_sum, sums[W_ + 3] = step_sq;
    }
    const std::vector<double> total = reduction_.sum(local, W_ + 4);
    ++reductions_;
    Evaluation ev;
    ev.z.assign(W_, 0.0);
    for (uint64_t e = 0; e < W_; ++e)
      if (free(e)) ev.z[e] = shared_.z_offset[e] - total[e] / n_;
    ev.loss = total[W_], ev.theta_sq = total[W_ + 1], ev.theta_sum = total[W_ + 2], ev.step_sq = total[W_ + 3];
    return ev;
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

  // θ(w) per part and free coordinate (no reduction).
  std::vector<std::vector<double>> theta(const std::vector<double>& w) const {
    std::vector<std::vector<double>> out(parts_.size());
    for (size_t q = 0; q < parts_.size(); ++q)
      for (size_t i = 0; i < parts_[q].coordinate.size(); ++i)
        out[q].push_back(std::clamp((1 + rows_[q].dot(i, w)) / shared_.gamma, 0.0, 1.0));
    return out;
  }

  double gamma_n() const { return shared_.gamma * n_; }
  double alpha() const { return shared_.alpha; }

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

}  // namespace

FistaResult solve_reduced_fista(const std::vector<ReducedProblem>& parts, uint64_t n, RowSumReduction& reduction,
                                std::vector<double> w0, double tol, int max_iterations) {
  FGM_ASSERT(!parts.empty());
  FistaProblem problem(parts, n, reduction);
  const uint64_t W = problem.weights();
  FGM_ASSERT(w0.size() == W);
  for (uint64_t e = 0; e < W; ++e)
    if (!problem.free(e)) w0[e] = 0;
  double L = problem.lipschitz_lower_bound();
  std::vector<double> x = std::move(w0);
  Evaluation ex = problem.evaluate(x, nullptr);
  FistaResult out;
  out.primal = problem.primal(x, ex);
  out.dual = problem.dual(ex);
  std::vector<double> y = x;
  Evaluation ey = ex;
  double t = 1;
  while (out.primal - out.dual > tol && out.iterations < max_iterations) {
    std::vector<double> next, step(W);
    Evaluation en;
    for (;;) {
      next = problem.prox_step(y, ey, L);
      double step_norm = 0;
      for (uint64_t e = 0; e < W; ++e) step[e] = next[e] - y[e], step_norm += step[e] * step[e];
      en = problem.evaluate(next, &step);
      if (step_norm == 0) break;
      const double curvature = problem.alpha() + en.step_sq / (problem.gamma_n() * step_norm);
      if (curvature <= L) break;
      L = std::max(2 * L, curvature);
    }
    ++out.iterations;
    const double primal = problem.primal(next, en), dual = problem.dual(en);
    if (next == x) {  // a fixed point at the rounding floor: no further progress
      out.primal = primal, out.dual = dual;
      break;
    }
    // Gradient restart: the step y → next points against the momentum next − x.
    std::vector<double> momentum(W);
    for (uint64_t e = 0; e < W; ++e) momentum[e] = next[e] - x[e];
    const bool restart = dot(step, momentum) < 0;
    x = std::move(next);
    ex = std::move(en);
    out.primal = primal, out.dual = dual;
    if (out.primal - out.dual <= tol) break;
    if (restart) {
      t = 1;
      y = x;
      ey = ex;
    } else {
      const double t_next = (1 + std::sqrt(1 + 4 * t * t)) / 2;
      const double beta = (t - 1) / t_next;
      for (uint64_t e = 0; e < W; ++e) y[e] = x[e] + beta * momentum[e];
      t = t_next;
      ey = problem.evaluate(y, nullptr);
    }
  }
  out.gap = out.primal - out.dual;
  out.converged = out.gap <= tol;
  out.theta = problem.theta(x);
  out.w = std::move(x);
  out.reductions = problem.reductions();
  return out;
}

}  // namespace fgm
