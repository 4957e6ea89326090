#include "solvers/sifs/sifs_sdca.h"
#include "solvers/sifs/sifs_reduced_rows.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "core/interrupt.h"

namespace fgm {
namespace {

struct GapParts {
  double primal = 0, dual = 0;
  double gap() const { return primal - dual; }
};

// z from θ̂ without drift, then w = S_β(z)/α and both objectives.
GapParts evaluate(const ReducedProblem& p, const ReducedRows& rows, const std::vector<double>& theta,
                  std::vector<double>& z, std::vector<double>& w) {
  const double n = static_cast<double>(p.layout->samples());
  z = p.z_offset;
  for (size_t q = 0; q < theta.size(); ++q)
    if (theta[q] != 0) rows.add(q, -theta[q] / n, z, [](uint64_t) {});
  double reg = 0, soft_sq = 0, l1 = 0, offset_dot = 0;
  for (uint64_t e = 0; e < z.size(); ++e) {
    if (!p.free_weight[e]) {
      w[e] = 0;
      continue;
    }
    const double s = soft_threshold(z[e], p.beta);
    w[e] = s / p.alpha;
    soft_sq += s * s;
    reg += w[e] * w[e];
    l1 += std::abs(w[e]);
    offset_dot += p.z_offset[e] * w[e];
  }
  double loss = 0, theta_sq = 0, theta_sum = 0;
  for (size_t q = 0; q < theta.size(); ++q) {
    loss += smoothed_hinge(1 + rows.dot(q, w), p.gamma);
    theta_sq += theta[q] * theta[q];
    theta_sum += theta[q];
  }
  const double L = static_cast<double>(p.in_L);
  // Σ_L (1 + ⟨a_d, w⟩ − γ/2) with Σ_L a_d = −n·z_L.
  loss += L * (1 - p.gamma / 2) - n * offset_dot;
  GapParts g;
  g.primal = loss / n + p.alpha / 2 * reg + p.beta * l1;
  const double D = soft_sq / (2 * p.alpha) + p.gamma / (2 * n) * (theta_sq + L) - (theta_sum + L) / n;
  g.dual = -D;
  return g;
}

// Prox-SDCA epochs until the gap is ≤ target or the epoch budget runs out;
// returns the last evaluation.
GapParts run_epochs(const ReducedProblem& p, const ReducedRows& rows, const std::vector<double>& norm, double target, int& epochs, int max_epochs, std::mt19937_64& rng,
                    std::vector<double>& theta, std::vector<double>& z, std::vector<double>& w) {
  const double n = static_cast<double>(p.layout->samples());
  GapParts g = evaluate(p, rows, theta, z, w);
  std::vector<uint32_t> order(theta.size());
  for (size_t q = 0; q < order.size(); ++q) order[q] = static_cast<uint32_t>(q);
  auto update_w = [&](uint64_t e) { w[e] = soft_threshold(z[e], p.beta) / p.alpha; };
  while (g.gap() > target && epochs < max_epochs) {
    check_interrupt();
    // Fisher–Yates with the seeded generator (std::shuffle's draws are library-defined).
    for (size_t q = order.size(); q > 1; --q) std::swap(order[q - 1], order[rng() % q]);
    for (uint32_t q : order) {
      const double denom = norm[q] / (p.alpha * n) + p.gamma;
      const double grad = 1 + rows.dot(q, w) - p.gamma * theta[q];
      const double next = std::clamp(theta[q] + grad / denom, 0.0, 1.0);
      const double delta = next - theta[q];
      if (delta == 0) continue;
      theta[q] = next;
      rows.add(q, -delta / n, z, update_w);
    }
    ++epochs;
    g = evaluate(p, rows, theta, z, w);
  }
  return g;
}

}  // namespace

SdcaResult solve_reduced(const ReducedProblem& p, std::vector<double> theta, double tol, int max_epochs) {
  FGM_ASSERT(theta.size() == p.coordinate.size());
  ReducedRows rows(p);
  for (double& t : theta) t = std::clamp(t, 0.0, 1.0);
  std::vector<double> norm(theta.size());
  for (size_t q = 0; q < theta.size(); ++q) norm[q] = rows.square_norm(q);
  std::vector<double> z(rows.weights()), w(rows.weights());
  std::mt19937_64 rng(0x5f1f5);
  SdcaResult out;
  const GapParts g = run_epochs(p, rows, norm, tol, out.epochs, max_epochs, rng, theta, z, w);
  out.gap = g.gap();
  out.converged = out.gap <= tol;
  out.primal = g.primal;
  out.dual = g.dual;
  out.w = std::move(w);
  out.theta = std::move(theta);
  return out;
}

}  // namespace fgm
