// The hot loops of the APG solver (apg.cpp), one small function each, so that
// a runtime-dispatched SIMD version can replace any of them without touching
// the solver. Private to solvers/.
//
// Contract every replacement must keep (the solver's determinism and its
// tests depend on it): each output element is produced by the same sequence
// of floating-point operations as the scalar loop here, and a sum is taken
// in index order — or, where a kernel is allowed to reassociate, the order
// must still not depend on the thread count (the solver calls kernels on
// fixed row chunks and on whole columns, never on ranges a scheduler picks).
//
// The row sweeps of both losses (margins, r, p and the loss sum) run on the
// run-time dispatched SIMD kernels of core/simd/ (8 fixed lanes: the same bits
// on every target and thread count); the scatter/gather loops stay scalar (on
// this hardware gathers by scalar loads are as fast as vector gathers).
//
// Indices are uint32: compact row indices (rows some selected column touches,
// apg_layout.h) or positions inside one batch's row list R_h. Values are the
// cache's float column values, widened to double before use.
#pragma once

#include <cstddef>
#include <cstdint>

#include <type_traits>

#include "core/simd/simd.h"
#include "solvers/apg_layout.h"
#include "solvers/losses.h"

namespace fgm::kernels {

// The column and batch walks below run over the layout's entries
// (apg_layout.h): for_each_entry gives a column's entries in row order as
// (position in R_h, compact row, value), for_each_batch_row the rows of R_h in
// one row chunk as (position, compact row). Every index form of the layout
// and every column form of the cache walks the same entries in the same
// order, so these loops are the same operations, in the same order, for all.

// Σ x[compact]·value over column j's entries, in row order: one column's part
// of ∇_ω P = X'r.
template <class Layout>
double gather_dot(const Layout& layout, size_t j, const double* x) {
  double s = 0;
  detail::with_fast_popcount([&] {
    layout.for_each_entry(j, [&](uint32_t, uint32_t compact, float value) { s += x[compact] * double(value); });
  });
  return s;
}

// out[position] += a·value over column j's entries: one column's part of X_h x_h.
template <class Layout>
void scatter_axpy(double a, const Layout& layout, size_t j, double* out) {
  detail::with_fast_popcount([&] {
    layout.for_each_entry(j, [&](uint32_t position, uint32_t, float value) { out[position] += a * double(value); });
  });
}

// out[compact] += a·x[position] over batch h's rows in chunk c: one batch's
// product, scaled, added at its rows.
template <class Layout>
void scatter_scaled_add(double a, const Layout& layout, size_t h, size_t c, const double* x, double* out) {
  detail::with_fast_popcount([&] {
    layout.for_each_batch_row(h, c, [&](uint32_t position, uint32_t compact) { out[compact] += a * x[position]; });
  });
}

// out[compact] += x[position]: one batch's product added at its rows (a = 1 exactly).
template <class Layout>
void scatter_add(const Layout& layout, size_t h, size_t c, const double* x, double* out) {
  detail::with_fast_popcount([&] {
    layout.for_each_batch_row(h, c, [&](uint32_t position, uint32_t compact) { out[compact] += x[position]; });
  });
}

// δ[compact] += cv·xv[position], then δ[compact] += cg·xg[position]: one
// batch's part of a line-search trial step X_h(ω_h − v_h) from the two cached products.
template <class Layout>
void scatter_trial_step(double cv, const double* xv, double cg, const double* xg, const Layout& layout, size_t h,
                        size_t c, double* delta) {
  detail::with_fast_popcount([&] {
    layout.for_each_batch_row(h, c, [&](uint32_t position, uint32_t compact) {
      double& e = delta[compact];
      e += cv * xv[position];
      e += cg * xg[position];
    });
  });
}

// out[i] = a[i] + b[i]
inline void add(const double* a, const double* b, size_t count, double* out) {
  for (size_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
}

// x[i] −= c
inline void subtract_scalar(double c, size_t count, double* x) {
  for (size_t i = 0; i < count; ++i) x[i] -= c;
}

// With margins m_i = y_i d_i: (logistic) p_i = σ(−m_i), and with `with_r`
// also r_i = ∂P/∂d_i. The margins themselves are not stored: each kernel
// below forms y_i·d_i again (one exact multiply; a vector less per row).
template <class LossT>
void margins(double C, const int8_t* y, const double* d, size_t count, double* p, double* r,
             bool with_r) {
  static_assert(std::is_same_v<LossT, detail::SquaredHingeLoss> || std::is_same_v<LossT, detail::LogisticLoss>);
  const simd::Kernels& k = simd::kernels();
  if constexpr (LossT::kNeedsSigmoid)
    k.logistic_sweep(y, d, C, nullptr, p, with_r ? r : nullptr, count);
  else if (with_r)
    k.squared_hinge_sweep(y, d, C, nullptr, r, count);
}

// Σ_i φ(y_i d_i) over rows with a label (0: row not in this fit).
template <class LossT>
double loss_sum(double C, const int8_t* y, const double* d, size_t count) {
  static_assert(std::is_same_v<LossT, detail::SquaredHingeLoss> || std::is_same_v<LossT, detail::LogisticLoss>);
  const simd::Kernels& k = simd::kernels();
  if constexpr (LossT::kNeedsSigmoid)
    return k.logistic_sweep(y, d, C, nullptr, nullptr, nullptr, count);
  else
    return k.squared_hinge_sweep(y, d, C, nullptr, nullptr, count);
}

// Σ_i D_φ(m_i, y_i δ_i), m_i = y_i d_i: the ω line search's side of F ≤ Q.
template <class LossT>
double bregman_sum(double C, const int8_t* y, const double* d, const double* p, const double* delta,
                   size_t count) {
  double s = 0;
  for (size_t i = 0; i < count; ++i)
    s += LossT::bregman(C, double(y[i]) * d[i], LossT::kNeedsSigmoid ? p[i] : 0.0,
                        double(y[i]) * delta[i]);
  return s;
}

// Σ_i D_φ(m_i, −y_i·step), m_i = y_i d_i: the b line search's side of Armijo (36).
template <class LossT>
double bias_bregman_sum(double C, const int8_t* y, const double* d, const double* p, double step,
                        size_t count) {
  double s = 0;
  for (size_t i = 0; i < count; ++i)
    s += LossT::bregman(C, double(y[i]) * d[i], LossT::kNeedsSigmoid ? p[i] : 0.0,
                        -double(y[i]) * step);
  return s;
}

// Σ_i φ'(m_i)·y_i = Σ_i ∂P/∂d_i (so ∂P/∂b = −this), m_i = y_i d_i.
template <class LossT>
double derivative_sum(double C, const int8_t* y, const double* d, const double* p, size_t count) {
  double s = 0;
  for (size_t i = 0; i < count; ++i) {
    if constexpr (LossT::kNeedsSigmoid)
      s -= C * p[i] * double(y[i]);  // φ'(m) = −C σ(−m), σ(−m) cached
    else
      s += LossT::deriv(C, double(y[i]) * d[i]) * double(y[i]);
  }
  return s;
}

}  // namespace fgm::kernels
