#include "solvers/mslr/newton_bisection.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace fgm::mslr {

double softmax_weights(const double* v, size_t T, double q, double* lambda) {
  double top = v[0];
  for (size_t t = 1; t < T; ++t) top = std::max(top, v[t]);
  double sum = 0;
  for (size_t t = 0; t < T; ++t) {
    lambda[t] = std::exp(q * (v[t] - top));  // ≤ 1; the largest is exactly 1
    sum += lambda[t];
  }
  for (size_t t = 0; t < T; ++t) lambda[t] /= sum;
  return top + std::log(sum) / q;
}

namespace {

// Derivatives of p̂_o at Z: o = 1 works on Z₁ = c₁ + z (z = Z − c₁), o = 2 on
// Z₂ = c₂ − z (z = c₂ − Z, so p̂₂'(Z) = −p'(z)). In both, the entropy part is
// ln(Z/(s − Z)) and s/(Z(s − Z)), where Z is the small one of the pair.
struct Derivatives {
  double first = 0, second = 0;
};

Derivatives transformed_derivatives(const CoordinateProblem& p, int o, double Z, double* scratch) {
  const double s = p.c1 + p.c2;
  const double z = o == 1 ? Z - p.c1 : p.c2 - Z;
  double* v = scratch;
  double* lambda = scratch + p.T;
  for (size_t t = 0; t < p.T; ++t) v[t] = p.e[t] + z * (0.5 * p.a[t] * z + p.b[t]);
  softmax_weights(v, p.T, p.q, lambda);
  double mean_slope = 0, mean_curvature = 0;
  for (size_t t = 0; t < p.T; ++t) {
    mean_slope += lambda[t] * (p.a[t] * z + p.b[t]);
    mean_curvature += lambda[t] * p.a[t];
  }
  double variance = 0;  // Σλ h'² − (Σλ h')², as a sum of squares
  for (size_t t = 0; t < p.T; ++t) {
    const double d = p.a[t] * z + p.b[t] - mean_slope;
    variance += lambda[t] * d * d;
  }
  const double sign = o == 1 ? 1.0 : -1.0;
  Derivatives out;
  out.first = std::log(Z / (s - Z)) + sign * mean_slope;
  out.second = s / (Z * (s - Z)) + mean_curvature + p.q * variance;
  return out;
}

}  // namespace

double coordinate_gradient(const CoordinateProblem& p, double z, double* scratch) {
  double* v = scratch;
  double* lambda = scratch + p.T;
  for (size_t t = 0; t < p.T; ++t) v[t] = p.e[t] + z * (0.5 * p.a[t] * z + p.b[t]);
  softmax_weights(v, p.T, p.q, lambda);
  double slope = 0;
  for (size_t t = 0; t < p.T; ++t) slope += lambda[t] * (p.a[t] * z + p.b[t]);
  return std::log((p.c1 + z) / (p.c2 - z)) + slope;
}

NewtonBisectionResult newton_bisection(const CoordinateProblem& p, double tolerance, int max_iterations,
                                       double* scratch) {
  const double s = p.c1 + p.c2;
  // Step 0: which half holds the root. At z_m the entropy term is ln 1 = 0.
  const double z_m = 0.5 * (p.c2 - p.c1);
  const double at_middle = coordinate_gradient(p, z_m, scratch);
  NewtonBisectionResult out;
  if (at_middle == 0) {
    out.z1 = out.z2 = 0.5 * s;
    return out;
  }
  const int o = at_middle > 0 ? 1 : 2;
  double lower = 0, upper = 0.5 * s;
  // Step 1: start from the current point (z = 0) when it is in the bracket.
  const double current = o == 1 ? p.c1 : p.c2;
  double Z = current > lower && current < upper ? current : 0.5 * (lower + upper);
  for (; out.iterations < max_iterations; ++out.iterations) {
    const Derivatives d = transformed_derivatives(p, o, Z, scratch);
    if (std::fabs(d.first) < tolerance) break;
    // p̂' increases: its sign says on which side of Z the root is.
    if (d.first < 0) lower = std::max(lower, Z);
    else upper = std::min(upper, Z);
    const double newton = Z - d.first / d.second;
    double next = newton;
    if (!(newton > lower && newton < upper)) {
      // Bisection; towards the open end Z = 0 a tenth of the bracket instead
      // (as LIBLINEAR's dual LR step): roots there can be as small as e^(−|b|)
      // and halving from s/2 would need hundreds of steps.
      next = lower > 0 ? 0.5 * (lower + upper) : 0.1 * upper;
      ++out.bisections;
    }
    if (next == Z) break;  // the bracket is down to rounding
    Z = next;
  }
  // Keep the pair strictly inside (0, s): roots below the smallest normal
  // double (e^(−|b|) with |b| in the thousands) would round to 0 and make
  // ln Z, and the dual bound, non-finite (news20 iteration 7).
  Z = std::max(Z, std::numeric_limits<double>::min());
  if (o == 1) {
    out.z1 = Z;
    out.z2 = s - Z;
  } else {
    out.z2 = Z;
    out.z1 = s - Z;
  }
  return out;
}

}  // namespace fgm::mslr
