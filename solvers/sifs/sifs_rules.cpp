#include "solvers/sifs/sifs_rules.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace fgm {
namespace {

// radius² from the full-ball radius and the squared distance the screened
// coordinates take away; rounding noise below 0 becomes 0.
double clamp_radius_sq(double full_radius, double removed) {
  const double r2 = full_radius * full_radius - removed;
  if (r2 >= 0) return r2;
  if (r2 >= -1e-9 * (full_radius * full_radius + 1e-300) - 1e-300) return 0;
  throw_error(ErrorKind::kInternal, "SIFS: a screening ball has negative squared radius " + std::to_string(r2) +
                                        " (full radius² " + std::to_string(full_radius * full_radius) +
                                        "): the reference solution is not accurate enough");
}

double enlargement(double alpha0, double alpha, double per_unit) {
  return std::max(alpha0, alpha) / alpha * per_unit;
}

}  // namespace

ScreenedSets empty_screened_sets(const SifsLayout& layout, uint64_t weights) {
  ScreenedSets s;
  s.weight_free.assign(weights, 1);
  s.coordinate.assign(layout.coordinates(), CoordinateStatus::kFree);
  for (uint64_t d = 0; d < layout.coordinates(); ++d)
    if (!layout.valid(d)) s.coordinate[d] = CoordinateStatus::kVoid;
  return s;
}

uint64_t apply_iss(SifsPasses& data, const SifsReference& ref, double alpha, double gamma, ScreenedSets& sets) {
  const SifsLayout& layout = data.layout();
  const std::vector<uint64_t> ends = data.part_ends();
  const uint32_t K = layout.blocks();
  std::vector<std::vector<double>> free_counts;
  for (size_t q = 0; q < ends.size(); ++q) {
    const uint64_t begin = q == 0 ? 0 : ends[q - 1];
    free_counts.push_back({static_cast<double>(std::count(sets.coordinate.begin() + begin * K,
                                                          sets.coordinate.begin() + ends[q] * K,
                                                          CoordinateStatus::kFree))});
  }
  if (data.sum_parts(free_counts, 1)[0] == 0) {
    sets.triggers.push_back({false, 0});
    return 0;
  }
  const double a0 = ref.alpha;
  const double scale = (a0 + alpha) / (2 * alpha);
  std::vector<double> center(ref.w.size(), 0.0);
  double w_sq = 0, removed = 0;
  for (uint64_t e = 0; e < ref.w.size(); ++e) {
    w_sq += ref.w[e] * ref.w[e];
    if (sets.weight_free[e]) center[e] = scale * ref.w[e];
    else removed += scale * ref.w[e] * scale * ref.w[e];
    FGM_ASSERT(sets.weight_free[e] || ref.w[e] == 0);  // IFS leaves the reference's support free
  }
  const double full = std::abs(a0 - alpha) / (2 * alpha) * std::sqrt(w_sq) +
                      enlargement(a0, alpha, std::sqrt(2 * ref.gap / a0));
  const double r = std::sqrt(clamp_radius_sq(full, removed));
  // ‖a_d on F̂ᶜ‖² = the part over the reference's support (summed with M by
  // the first trigger: same columns) + the part over the other free entries.
  std::vector<uint8_t> support(ref.w.size(), 0), rest(ref.w.size(), 0);
  bool all_free = true;
  for (uint64_t e = 0; e < ref.w.size(); ++e) {
    support[e] = ref.w[e] != 0;
    rest[e] = sets.weight_free[e] && ref.w[e] == 0;
    all_free &= sets.weight_free[e] != 0;
  }
  if (sets.iss_center_sums.empty()) data.row_pass(center, &support, sets.iss_center_sums, &sets.iss_support_norms);
  const std::vector<double>& M = sets.iss_center_sums;
  std::vector<double> N, unused;
  const std::vector<double> no_center(center.size(), 0.0);
  if (all_free) {
    data.row_pass(no_center, &sets.weight_free, unused, &N);  // every feature: the norms computed once
  } else {
    data.row_pass(no_center, &rest, unused, &N);
    for (uint64_t q = 0; q < N.size(); ++q) N[q] += sets.iss_support_norms[q];
  }
  const bool multi = layout.is_multiclass();
  std::vector<std::vector<double>> found_in(ends.size(), std::vector<double>(2, 0.0));  // per part: to R, to L
  for (uint64_t d = 0, q = 0; d < layout.coordinates(); ++d) {
    while (d >= ends[q] * K) ++q;
    if (sets.coordinate[d] != CoordinateStatus::kFree) continue;
    const double dot = layout.coordinate_dot(d, M);
    const double spread = std::sqrt(std::max(0.0, layout.coordinate_square_norm(d, N))) * r;
    const double margin = kSifsRoundingMargin * (1 + std::abs(dot) + spread);
    const double upper = 1 + dot + spread + margin;  // u_d plus the rounding margin
    const double lower = 1 + dot - spread - margin;
    const bool to_R = multi ? upper <= 0 : upper < 0;
    const bool to_L = multi ? lower >= gamma : lower > gamma;
    if (to_R) sets.coordinate[d] = CoordinateStatus::kR, ++found_in[q][0];
    else if (to_L) sets.coordinate[d] = CoordinateStatus::kL, ++found_in[q][1];
  }
  const std::vector<double> found_all = data.sum_parts(found_in, 2);  // counts: exact
  sets.in_R += static_cast<uint64_t>(found_all[0]);
  sets.in_L += static_cast<uint64_t>(found_all[1]);
  const uint64_t found = static_cast<uint64_t>(found_all[0] + found_all[1]);
  sets.triggers.push_back({false, found});
  return found;
}

uint64_t apply_ifs(SifsPasses& data, const SifsReference& ref, double alpha, double gamma, ScreenedSets& sets) {
  const SifsLayout& layout = data.layout();
  // Only the free entries outside the reference's support are tested (see the header).
  const uint64_t m = data.columns();
  std::vector<uint8_t> open_columns(m, 0);
  bool any_open = false;
  for (uint64_t e = 0; e < sets.weight_free.size(); ++e)
    if (sets.weight_free[e] && ref.w[e] == 0) open_columns[e % m] = 1, any_open = true;
  if (!any_open) {
    sets.triggers.push_back({true, 0});
    return 0;
  }
  const double a0 = ref.alpha;
  const double n = static_cast<double>(data.total_samples());
  const double c_one = (alpha - a0) / (2 * gamma * alpha);
  const double c_theta = (a0 + alpha) / (2 * alpha);
  std::vector<double> q(layout.coordinates(), 0.0), h(layout.coordinates(), 0.0);
  const std::vector<uint64_t> ends = data.part_ends();
  const uint32_t K = layout.blocks();
  // Per part: ‖θ₀ − 1/γ‖² and what the screened coordinates take from the ball.
  std::vector<std::vector<double>> parts(ends.size(), std::vector<double>(2, 0.0));
  for (uint64_t d = 0, part = 0; d < layout.coordinates(); ++d) {
    while (d >= ends[part] * K) ++part;
    if (sets.coordinate[d] == CoordinateStatus::kVoid) continue;
    double& dist_sq = parts[part][0];
    double& removed = parts[part][1];
    const double t0 = ref.theta[d];
    dist_sq += (t0 - 1 / gamma) * (t0 - 1 / gamma);
    const double c = c_one + c_theta * t0;
    switch (sets.coordinate[d]) {
      case CoordinateStatus::kFree: q[d] = c, h[d] = 1; break;
      case CoordinateStatus::kL: q[d] = 1, removed += (1 - c) * (1 - c); break;
      case CoordinateStatus::kR: removed += c * c; break;
      case CoordinateStatus::kVoid: break;
    }
  }
  const std::vector<double> sums = data.sum_parts(parts, 2);
  const double dist_sq = sums[0], removed = sums[1];
  const double full = std::abs(alpha - a0) / (2 * alpha) * std::sqrt(dist_sq) +
                      enlargement(a0, alpha, std::sqrt(2 * n * ref.gap / gamma));
  const double r = std::sqrt(clamp_radius_sq(full, removed));
  std::vector<double> G, H, dots, squares;
  layout.column_coefficients(q, G);
  layout.column_square_coefficients(h, H);
  data.column_pass(G, &H, dots, &squares, &open_columns);
  const double beta = ref.beta;
  uint64_t found = 0;
  for (uint64_t e = 0; e < dots.size(); ++e) {
    if (!sets.weight_free[e] || ref.w[e] != 0) continue;
    const double s = (std::abs(dots[e]) + std::sqrt(std::max(0.0, squares[e])) * r) / n;
    if (s * (1 + kSifsRoundingMargin) <= beta) sets.weight_free[e] = 0, ++sets.weights_screened, ++found;
  }
  sets.triggers.push_back({true, found});
  return found;
}

ScreenedSets screen(SifsPasses& data, const SifsReference& ref, double alpha, double gamma, SifsScreening mode) {
  ScreenedSets sets = empty_screened_sets(data.layout(), data.weights());
  switch (mode) {
    case SifsScreening::kNone: break;
    case SifsScreening::kIfs: apply_ifs(data, ref, alpha, gamma, sets); break;
    case SifsScreening::kIss: apply_iss(data, ref, alpha, gamma, sets); break;
    case SifsScreening::kSifs: {
      // ISS first (Algorithm 1). A trigger that finds nothing leaves the other
      // rule's ball as it was at that rule's last trigger, so it would find
      // nothing either: stop at the first empty trigger after the first ISS.
      apply_iss(data, ref, alpha, gamma, sets);
      for (bool features = true;; features = !features) {
        const uint64_t found = features ? apply_ifs(data, ref, alpha, gamma, sets)
                                        : apply_iss(data, ref, alpha, gamma, sets);
        if (found == 0) break;
      }
      break;
    }
  }
  return sets;
}

}  // namespace fgm
