#include "solvers/sifs/sifs_problem.h"

#include "core/error.h"

namespace fgm {

SifsLayout SifsLayout::binary(std::vector<int8_t> labels) {
  SifsLayout l;
  l.n_ = labels.size();
  l.blocks_ = 1;
  l.labels_ = std::move(labels);
  for (int8_t y : l.labels_) FGM_ASSERT(y == 1 || y == -1);
  return l;
}

SifsLayout SifsLayout::multiclass(std::vector<uint16_t> classes, uint32_t class_count) {
  FGM_ASSERT(class_count >= 3);
  SifsLayout l;
  l.n_ = classes.size();
  l.blocks_ = class_count;
  l.cls_ = std::move(classes);
  for (uint16_t c : l.cls_) FGM_ASSERT(c < class_count);
  return l;
}

void SifsLayout::column_coefficients(const std::vector<double>& q, std::vector<double>& G) const {
  G.assign(n_ * blocks_, 0.0);
  if (!is_multiclass()) {
    for (uint64_t i = 0; i < n_; ++i) G[i] = -static_cast<double>(labels_[i]) * q[i];
    return;
  }
  const uint32_t K = blocks_;
  for (uint64_t i = 0; i < n_; ++i) {
    double sum = 0;
    for (uint32_t k = 0; k < K; ++k) {
      if (k == cls_[i]) continue;
      G[i * K + k] = q[i * K + k];
      sum += q[i * K + k];
    }
    G[i * K + cls_[i]] = -sum;
  }
}

void SifsLayout::column_square_coefficients(const std::vector<double>& h, std::vector<double>& H) const {
  H.assign(n_ * blocks_, 0.0);
  if (!is_multiclass()) {
    for (uint64_t i = 0; i < n_; ++i) H[i] = h[i];
    return;
  }
  const uint32_t K = blocks_;
  for (uint64_t i = 0; i < n_; ++i) {
    double sum = 0;
    for (uint32_t k = 0; k < K; ++k) {
      if (k == cls_[i]) continue;
      H[i * K + k] = h[i * K + k];
      sum += h[i * K + k];
    }
    H[i * K + cls_[i]] = sum;
  }
}

double SifsLayout::coordinate_dot(uint64_t d, const std::vector<double>& M) const {
  if (!is_multiclass()) return -static_cast<double>(labels_[d]) * M[d];
  const uint64_t i = d / blocks_;
  return M[d] - M[i * blocks_ + cls_[i]];
}

double SifsLayout::coordinate_square_norm(uint64_t d, const std::vector<double>& N) const {
  if (!is_multiclass()) return N[d];
  const uint64_t i = d / blocks_;
  return N[d] + N[i * blocks_ + cls_[i]];
}

const char* screening_name(SifsScreening s) {
  switch (s) {
    case SifsScreening::kSifs: return "sifs";
    case SifsScreening::kIfs: return "ifs";
    case SifsScreening::kIss: return "iss";
    case SifsScreening::kNone: return "none";
  }
  return "?";
}

std::vector<double> log_spaced(double from, double to, int points) {
  std::vector<double> v;
  if (points <= 0) return v;
  if (points == 1) return {from};
  const double a = std::log(from), b = std::log(to);
  for (int k = 0; k < points; ++k) {
    // The ends are exact (the first β is exactly beta_max_ratio·β_max).
    if (k == 0) v.push_back(from);
    else if (k == points - 1) v.push_back(to);
    else v.push_back(std::exp(a + (b - a) * k / (points - 1)));
  }
  return v;
}

}  // namespace fgm
