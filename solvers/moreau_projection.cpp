// Algorithm 3 of Tan, Tsang & Wang (JMLR 2014), the Moreau projection
//   S_τ(u) = argmin_ω τ/2‖ω − u‖² + ½(Σ_h‖ω_h‖)²                          (34)
// (Proposition 1, after Martins et al. 2010): ω_h = (o_h/ô_h)·u_h with
// o = soft(ô, ς), ô_h = ‖u_h‖ and, for the norms sorted descending ō,
//   ρ = max{h : ō_h − s/(1+hs)·Σ_{i≤h} ō_i > 0},  ς = s/(1+ρs)·Σ_{i≤ρ} ō_i.
#include "solvers/moreau_projection.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "solvers/apg.h"

namespace fgm {
namespace detail {

double moreau_scales(const double* norms, size_t t, double s, double* scales,
                     std::vector<size_t>& order) {
  FGM_ASSERT(s >= 0);
  order.resize(t);
  std::iota(order.begin(), order.end(), size_t{0});
  // Index tie-break keeps the order (and so the sums) deterministic.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return norms[a] > norms[b] || (norms[a] == norms[b] && a < b);
  });
  // s/(1+hs) written as 1/(1/s + h): exact limits for s = 0 and s = ∞.
  const double inv_s = 1.0 / s;
  double sum = 0, sum_rho = 0;
  size_t rho = 0;
  // The largest h passing the test, not the first failure: robust to rounding
  // making the (mathematically contiguous) set of passing h non-contiguous.
  for (size_t h = 1; h <= t; ++h) {
    double o = norms[order[h - 1]];
    sum += o;
    if (o - sum / (inv_s + double(h)) > 0) {
      rho = h;
      sum_rho = sum;
    }
  }
  double threshold = rho == 0 ? 0.0 : sum_rho / (inv_s + double(rho));
  for (size_t h = 0; h < t; ++h) {
    double o = norms[h];
    // o > threshold ≥ 0 also rules out dividing by a zero norm.
    scales[h] = (rho > 0 && o > threshold) ? (o - threshold) / o : 0.0;
  }
  return threshold;
}

}  // namespace detail

std::vector<double> moreau_group_scales(const std::vector<double>& group_norms, double s) {
  std::vector<double> scales(group_norms.size());
  std::vector<size_t> order;
  detail::moreau_scales(group_norms.data(), group_norms.size(), s, scales.data(), order);
  return scales;
}

}  // namespace fgm
