// Per-sample losses of problem (31) written in terms of the margin m = y·d
// (d = w'x − b), with the derivative and the Bregman remainder the APG line
// searches test. Private to solvers/.
//
//   squared hinge: φ(m) = (C/2)·max(1 − m, 0)²      φ'(m) = −C·max(1 − m, 0)
//   logistic:      φ(m) =  C ·log(1 + exp(−m))       φ'(m) = −C·σ(−m)
//
// ∂P/∂d_i = y_i·φ'(m_i) = −y_i·α_i with α the Theorem 3 dual variables.
#pragma once

#include <algorithm>
#include <cmath>

namespace fgm::detail {

// log(1 + exp(z)) without overflow for large z or loss of digits for very negative z.
inline double softplus(double z) {
  return z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z));
}

// 1/(1 + exp(−z)); only ever exponentiates a non-positive number.
inline double sigmoid(double z) {
  if (z >= 0) return 1.0 / (1.0 + std::exp(-z));
  double e = std::exp(z);
  return e / (1.0 + e);
}

struct SquaredHingeLoss {
  static constexpr bool kNeedsSigmoid = false;
  // Written with max/selects, not branches: margins fall on both sides of 1
  // at random, and these run over all n samples per line-search trial.
  static double value(double C, double m) {
    double a = std::max(1.0 - m, 0.0);
    return 0.5 * C * a * a;
  }
  static double deriv(double C, double m) { return -C * std::max(1.0 - m, 0.0); }
  // −φ*(−α), the dual's per-sample term: α − α²/(2C) for α ≥ 0.
  static double dual_term(double C, double alpha) { return alpha - alpha * alpha / (2.0 * C); }
  // φ(m + Δ) − φ(m) − φ'(m)·Δ with a = 1 − m, a' = a − Δ:
  //   (C/2)·[(a'₊ − a₊)² + 2 a₊ (−a')₊],
  // a sum of non-negative terms; when a, a' > 0 the difference a'₊ − a₊ is
  // taken as −Δ itself, so a tiny step keeps its relative accuracy.
  static double bregman(double C, double m, double /*p*/, double delta) {
    double a = 1.0 - m, a2 = a - delta;
    double ap = std::max(a, 0.0), a2p = std::max(a2, 0.0);
    double diff = (a > 0 && a2 > 0) ? -delta : a2p - ap;
    return 0.5 * C * (diff * diff + 2.0 * ap * std::max(-a2, 0.0));
  }
};

struct LogisticLoss {
  static constexpr bool kNeedsSigmoid = true;
  static double value(double C, double m) { return C * softplus(-m); }
  static double deriv(double C, double m) { return -C * sigmoid(-m); }
  // −φ*(−α) = C·H(α/C), H the binary entropy in nats (0 at α = 0 or C).
  static double dual_term(double C, double alpha) {
    double q = alpha / C;
    if (q <= 0 || q >= 1) return 0.0;
    return -C * (q * std::log(q) + (1.0 - q) * std::log1p(-q));
  }
  // Bregman remainder with p = σ(−m) precomputed. Using
  //   softplus(−m−Δ) − softplus(−m) = log1p(p·expm1(−Δ)),
  // the remainder is [log1p(q) − q] + p·[expm1(−Δ) + Δ], q = p·expm1(−Δ); both
  // brackets use their Taylor series when small so the O(Δ²) result keeps its
  // digits. Large |Δ| falls back to the direct difference (no overflow of expm1).
  static double bregman(double C, double m, double p, double delta) {
    double r;
    if (std::fabs(delta) <= 30.0) {
      double x = -delta;
      double e = std::expm1(x);
      double a;  // e^x − 1 − x
      if (std::fabs(x) < 1e-3)
        a = x * x * (0.5 + x * (1.0 / 6 + x * (1.0 / 24 + x * (1.0 / 120 + x * (1.0 / 720)))));
      else
        a = e - x;
      double q = p * e;
      double bq;  // log1p(q) − q
      if (std::fabs(q) < 1e-3)
        bq = q * q * (-0.5 + q * (1.0 / 3 + q * (-0.25 + q * (0.2 - q * (1.0 / 6)))));
      else
        bq = std::log1p(q) - q;
      r = bq + p * a;
    } else {
      r = softplus(-m - delta) - softplus(-m) + p * delta;
    }
    return r > 0 ? C * r : 0.0;
  }
};

// The logistic dual's scale: D(θα) = Σ_i C·H(θα_i/C) − ½θ²M is maximised over
// θ ∈ (0, θ_max] (θ_max = C / max α, the box α ≤ C) by up to three safeguarded
// Newton steps from min(1, θ_max). `add_terms(a, θ, s, weight)` adds one α's
// value and first two θ-derivatives to s; `at(θ, d1, d2)` returns D(θα) and
// its derivatives (the solver sums the terms over its rows). Shared by the
// APG and the proximal Newton solver: the same certificate.
inline void logistic_dual_terms(double C, double a, double theta, double* s, double weight) {
  const double u = theta * a;
  if (!(a > 0)) return;
  s[0] += weight * LogisticLoss::dual_term(C, u);
  if (u < C) {
    s[1] += weight * (a * std::log((C - u) / u));
    s[2] -= weight * (a * a * C / (u * (C - u)));
  }
}

template <class At>
double best_logistic_dual(double theta_max, const At& at) {
  double theta = std::min(1.0, theta_max), d1, d2;
  double best = at(theta, d1, d2);
  for (int step = 0; step < 3 && d2 < 0; ++step) {
    double next = theta - d1 / d2;
    next = std::clamp(next, 0.5 * theta, std::min(2.0 * theta, 0.5 * (theta + theta_max)));
    theta = next;
    best = std::max(best, at(theta, d1, d2));
  }
  return best;
}

}  // namespace fgm::detail
