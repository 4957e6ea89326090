// Row access to a_d for the free coordinates of a reduced problem (sifs_sdca.h):
// ⟨a_d, w⟩, ‖a_d‖² over the free weights and v += step·a_d, for the
// binary (a_i = −y_i x_i) and multi-class (a_(i,k) = x_i ⊗ (e_k − e_{y_i})) layouts.
// Shared by Prox-SDCA and the distributed accelerated gradient (sifs_fista.h).
#pragma once

#include <cstdint>
#include <vector>

#include "solvers/sifs/sifs_sdca.h"

namespace fgm {

class ReducedRows {
 public:
  explicit ReducedRows(const ReducedProblem& p)
      : p_(p), K_(p.layout->blocks()), cols_(p.X.column_dense.size()), multi_(p.layout->is_multiclass()) {}

  uint64_t weights() const { return K_ * cols_; }

  // Sample i of coordinate q, its class block k (multi) and its label (binary).
  uint64_t sample(size_t q) const { return p_.X.row_sample[p_.coordinate_row[q]]; }

  double dot(size_t q, const std::vector<double>& w) const {
    const uint32_t r = p_.coordinate_row[q];
    const uint64_t d = p_.coordinate[q];
    double s = 0;
    if (!multi_) {
      for (uint64_t e = p_.X.row_ptr[r]; e < p_.X.row_ptr[r + 1]; ++e) s += p_.X.val[e] * w[p_.X.col[e]];
      return -static_cast<double>(p_.layout->label(d)) * s;
    }
    const uint64_t k = d % K_, y = p_.layout->class_of(d / K_);
    for (uint64_t e = p_.X.row_ptr[r]; e < p_.X.row_ptr[r + 1]; ++e)
      s += p_.X.val[e] * (w[k * cols_ + p_.X.col[e]] - w[y * cols_ + p_.X.col[e]]);
    return s;
  }

  // ‖a_d‖² over the free weights.
  double square_norm(size_t q) const {
    const uint32_t r = p_.coordinate_row[q];
    const uint64_t d = p_.coordinate[q];
    double s = 0;
    if (!multi_) {
      for (uint64_t e = p_.X.row_ptr[r]; e < p_.X.row_ptr[r + 1]; ++e)
        if (p_.free_weight[p_.X.col[e]]) s += static_cast<double>(p_.X.val[e]) * p_.X.val[e];
      return s;
    }
    const uint64_t k = d % K_, y = p_.layout->class_of(d / K_);
    for (uint64_t e = p_.X.row_ptr[r]; e < p_.X.row_ptr[r + 1]; ++e) {
      const double x2 = static_cast<double>(p_.X.val[e]) * p_.X.val[e];
      s += x2 * (p_.free_weight[k * cols_ + p_.X.col[e]] + p_.free_weight[y * cols_ + p_.X.col[e]]);
    }
    return s;
  }

  // v += step·a_d on the free weights; calls touched(entry) for each entry changed.
  template <class F>
  void add(size_t q, double step, std::vector<double>& v, F&& touched) const {
    const uint32_t r = p_.coordinate_row[q];
    const uint64_t d = p_.coordinate[q];
    if (!multi_) {
      const double s = -static_cast<double>(p_.layout->label(d)) * step;
      for (uint64_t e = p_.X.row_ptr[r]; e < p_.X.row_ptr[r + 1]; ++e) {
        const uint32_t c = p_.X.col[e];
        if (!p_.free_weight[c]) continue;
        v[c] += s * p_.X.val[e];
        touched(c);
      }
      return;
    }
    const uint64_t k = d % K_, y = p_.layout->class_of(d / K_);
    for (uint64_t e = p_.X.row_ptr[r]; e < p_.X.row_ptr[r + 1]; ++e) {
      const uint64_t ek = k * cols_ + p_.X.col[e], ey = y * cols_ + p_.X.col[e];
      if (p_.free_weight[ek]) v[ek] += step * p_.X.val[e], touched(ek);
      if (p_.free_weight[ey]) v[ey] -= step * p_.X.val[e], touched(ey);
    }
  }

 private:
  const ReducedProblem& p_;
  uint64_t K_, cols_;
  bool multi_;
};

}  // namespace fgm
