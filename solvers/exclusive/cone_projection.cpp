// Algorithms 2 and 3 of seed 002 with the ERRATA corrections (header).
#include "solvers/exclusive/cone_projection.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/error.h"

namespace fgm::exclusive {
namespace {

double sign_of(double v) { return v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0); }

void sorted_magnitudes(const double* a, size_t d, ProjectionScratch& scratch, bool decreasing) {
  auto& s = scratch.magnitudes;
  s.resize(d);
  for (size_t i = 0; i < d; ++i) s[i] = std::fabs(a[i]);
  if (decreasing)
    std::sort(s.begin(), s.end(), std::greater<double>());
  else
    std::sort(s.begin(), s.end());
}

}  // namespace

double project_l1_cone(const double* a, size_t d, double b, double zeta, double* x, ProjectionScratch& scratch) {
  if (!(b >= 0)) throw_error(ErrorKind::kInternal, "P1 cone projection called with b < 0 (only b >= 0 is exact)");
  double norm1 = 0;
  for (size_t i = 0; i < d; ++i) norm1 += std::fabs(a[i]);
  if (norm1 <= b) {  // already in the cone
    if (x != a) std::copy(a, a + d, x);
    return b;
  }
  // KKT: x = sgn(a)·max(|a| − δ, 0), y = b + δ/ζ = ‖x‖₁. With the top j
  // magnitudes s_1 ≥ … ≥ s_j above δ: δ_j = ζ(t_j − b)/(1 + ζj), t_j = Σ_{k≤j} s_k.
  // The solution's j is the largest with s_j > δ_j (Alg. 2's search, robust
  // form); j = 1 always qualifies here because b ≥ 0 and ‖a‖₁ > b.
  sorted_magnitudes(a, d, scratch, true);
  const auto& s = scratch.magnitudes;
  double t = 0, delta = 0;
  for (size_t j = 1; j <= d; ++j) {
    t += s[j - 1];
    const double candidate = zeta * (t - b) / (1.0 + zeta * double(j));
    if (s[j - 1] > candidate) delta = candidate;  // the last qualifying j wins
  }
  delta = std::max(delta, 0.0);
  double y = 0;
  for (size_t i = 0; i < d; ++i) {
    const double m = std::max(std::fabs(a[i]) - delta, 0.0);
    x[i] = sign_of(a[i]) * m;
    y += m;
  }
  return y;
}

double project_linf_cone(const double* a, size_t d, double b, double zeta, double* x, ProjectionScratch& scratch) {
  // KKT: x = sgn(a)·min(|a|, y), ζ(y − b) = Σ_i max(|a_i| − y, 0), y ≥ 0.
  sorted_magnitudes(a, d, scratch, false);  // s_1 ≤ … ≤ s_d, s_0 = 0
  const auto& s = scratch.magnitudes;
  const double largest = d ? s[d - 1] : 0.0;
  if (b >= largest) {  // already in the cone (step 4)
    if (x != a) std::copy(a, a + d, x);
    return b;
  }
  // Piece j (j = d−1 … 0) assumes the d − j largest magnitudes exceed y:
  // y_j = (ζb + t_j)/(ζ + d − j), t_j their sum. y_j > s_j exactly for the
  // pieces at or left of the solution (g(y) = ζ(y−b) − Σ(|a|−y)₊ is concave
  // increasing, each piece's line lies above it), so the solution is the
  // largest such j; none qualifies only when y* ≤ 0, the apex (0, 0).
  double y = 0, tail = 0;
  bool found = false;
  for (size_t j = d; j-- > 0;) {  // j = d−1 … 0: the first that qualifies is the largest
    tail += s[j];                 // t_j = s_{j+1} + … + s_d (1-based)
    const double candidate = (zeta * b + tail) / (zeta + double(d - j));
    const double below = j == 0 ? 0.0 : s[j - 1];
    if (candidate > below) {
      y = candidate;
      found = true;
      break;
    }
  }
  if (!found || !(y > 0)) y = 0;
  y = std::min(y, largest);
  for (size_t i = 0; i < d; ++i) x[i] = sign_of(a[i]) * std::min(std::fabs(a[i]), y);
  return y;
}

}  // namespace fgm::exclusive
