#include "solvers/pnorm_kta/kta_path.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/messages.h"
#include "core/interrupt.h"

namespace fgm::kta {

void check_path_options(const PathOptions& o) {
  if (!(o.lambda1 > 0) || !std::isfinite(o.lambda1))
    throw Error(ErrorKind::kConfig, msg::kta_option_out_of_range("kta.lambda1", o.lambda1, "must be > 0 (finite)"));
  if (!(o.lambda2 >= 0) || !std::isfinite(o.lambda2))
    throw Error(ErrorKind::kConfig, msg::kta_option_out_of_range("kta.lambda2", o.lambda2, "must be >= 0 (finite)"));
  if (!(o.epsilon > 0 && o.epsilon < std::exp(-1.0)))
    throw Error(ErrorKind::kConfig,
                msg::kta_option_out_of_range("kta.epsilon", o.epsilon,
                                             "must be in (0, 1/e): Theorem 2's monotonicity needs ε < 1/e"));
  if (!(o.p_start >= 1 && o.p_start <= 2))
    throw Error(ErrorKind::kConfig, msg::kta_option_out_of_range("kta.p_start", o.p_start, "must be in [1, 2]"));
  if (!(o.p_end >= 1 && o.p_end <= o.p_start))
    throw Error(ErrorKind::kConfig,
                msg::kta_option_out_of_range("kta.p_end", o.p_end, "must be in [1, kta.p_start]"));
  if (!(o.p_step > 0) || (o.p_start - o.p_end) / o.p_step > 1e6)
    throw Error(ErrorKind::kConfig,
                msg::kta_option_out_of_range("kta.p_step", o.p_step,
                                             "must be > 0 and give at most 10^6 path points"));
}

std::vector<double> path_grid(const PathOptions& o) {
  std::vector<double> grid;
  const double span = o.p_start - o.p_end;
  // Whole steps that stay above p_end (a step landing within 1e-9·Δp of
  // p_end counts as p_end), then p_end itself.
  const uint64_t steps = span <= 0 ? 0 : static_cast<uint64_t>(std::floor(span / o.p_step + 1e-9));
  for (uint64_t k = 0; k <= steps; ++k) {
    const double p = o.p_start - static_cast<double>(k) * o.p_step;
    if (k > 0 && p - o.p_end <= 1e-9 * o.p_step) break;
    grid.push_back(p);
  }
  if (grid.empty() || grid.back() != o.p_end) grid.push_back(o.p_end);
  return grid;
}

double optimality_residual(double eta, double a, double p, const PathOptions& o) {
  return 2 * o.lambda1 * eta + o.lambda2 * p * std::pow(eta, p - 1) - a;
}

double residual_slope(double eta, double p, const PathOptions& o) {
  // p = 1: the η^(p−2) term has the factor p − 1 = 0 (and η > 0 here).
  const double curvature = p == 1 ? 0.0 : o.lambda2 * p * (p - 1) * std::pow(eta, p - 2);
  return 2 * o.lambda1 + curvature;
}

double weight_slope(double eta, double p, const PathOptions& o) {
  return -o.lambda2 * std::pow(eta, p - 1) * (1 + p * std::log(eta)) / residual_slope(eta, p, o);
}

double active_threshold(double p, const PathOptions& o) {
  return 2 * o.lambda1 * o.epsilon + o.lambda2 * p * std::pow(o.epsilon, p - 1);
}

double solve_weight(double a, double p, const PathOptions& o, double guess, SolveCounts& counts) {
  if (!(a > 0)) return 0;
  // G(0+, p) = −a < 0 for p > 1; = λ₂ − a at p = 1, where η* = 0 unless a > λ₂.
  if (p == 1 && a <= o.lambda2) return 0;
  double lo = 0, hi = a / (2 * o.lambda1);  // G(hi) = λ₂p·hi^(p−1) ≥ 0
  double eta = guess > lo && guess < hi ? guess : 0.5 * (lo + hi);
  for (int iteration = 0; iteration < 400; ++iteration) {
    const double g = optimality_residual(eta, a, p, o);
    if (g == 0) return eta;
    if (g < 0)
      lo = eta;
    else
      hi = eta;
    const double newton = eta - g / residual_slope(eta, p, o);
    double next;
    if (newton > lo && newton < hi) {
      next = newton;
      ++counts.newton_steps;
    } else {
      next = 0.5 * (lo + hi);
      ++counts.bisection_steps;
    }
    const double tolerance = 1e-15 * next;
    if (std::fabs(next - eta) <= tolerance || hi - lo <= tolerance) return next;
    eta = next;
  }
  return eta;
}

void follow_path(const std::vector<double>& alignments, const PathOptions& o,
                 const std::function<void(const PathPoint&)>& visit) {
  check_path_options(o);
  if (alignments.size() > std::numeric_limits<uint32_t>::max())
    throw Error(ErrorKind::kInternal, "follow_path: more than 2^32 features");
  const std::vector<double> grid = path_grid(o);
  PathPoint point;
  // Solve at p_start from scratch; keep the features at or above ε.
  point.p = grid.front();
  for (uint32_t i = 0; i < alignments.size(); ++i) {
    const double eta = solve_weight(alignments[i], point.p, o, -1, point.counts);
    if (eta >= o.epsilon) {
      point.active.push_back(i);
      point.weights.push_back(eta);
    }
  }
  visit(point);
  for (size_t step = 1; step < grid.size(); ++step) {
    check_interrupt();
    const double previous_p = grid[step - 1], p = grid[step];
    point.p = p;
    point.counts = {};
    size_t kept = 0;
    for (size_t k = 0; k < point.active.size(); ++k) {
      const double eta = point.weights[k];
      const double predicted = eta + (p - previous_p) * weight_slope(eta, previous_p, o);
      const double corrected = solve_weight(alignments[point.active[k]], p, o, predicted, point.counts);
      if (corrected < o.epsilon) continue;  // a juncture point: out for the rest of the path
      point.active[kept] = point.active[k];
      point.weights[kept] = corrected;
      ++kept;
    }
    point.active.resize(kept);
    point.weights.resize(kept);
    visit(point);
  }
}

}  // namespace fgm::kta
