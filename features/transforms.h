// Feature transforms (features.transform): a list of stages applied in order
// to the base feature values x_ij (row i, feature j). Every stage maps 0 to 0,
// so sparsity survives and implicit zeros stay zero:
//   log1p   sign(x)·log(1+|x|)              (element-wise)
//   binary  1 if x ≠ 0, else 0              (element-wise)
//   maxabs  x_ij / max_i |x_ij|             (per feature, to [-1,1])
//   scale   x_ij / sqrt(Σ_i x_ij² / n)      (per feature: unit uncentred standard
//                                            deviation over all n rows, zeros included)
//   tfidf   x_ij · (log((1+n)/(1+df_j)) + 1) (per feature; df_j = rows with x_ij ≠ 0;
//                                            scikit-learn's smooth_idf form)
//   row_l2  x_ij / sqrt(Σ_j x_ij²)           (per row, over all features of the row)
//   row_l1  x_ij / Σ_j |x_ij|                (per row)
// Statistics are those of the training data after the preceding stages. A
// per-feature statistic of 0 (a feature that is zero everywhere) and a row of
// zeros leave the values unchanged (factor 1). Values are transformed in
// double and rounded to float once, after the last stage, in training and in
// predict alike.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "io/model_file.h"

namespace fgm {

enum class TransformKind { kLog1p, kBinary, kMaxAbs, kScale, kTfidf, kRowL2, kRowL1 };

// Throws Error(kConfig) naming features.transform for an unknown name.
TransformKind parse_transform(const std::string& name);
const char* transform_name(TransformKind kind);
std::vector<TransformKind> parse_transforms(const std::vector<std::string>& names);

inline bool is_per_feature(TransformKind k) {
  return k == TransformKind::kMaxAbs || k == TransformKind::kScale || k == TransformKind::kTfidf;
}
inline bool is_row_norm(TransformKind k) { return k == TransformKind::kRowL2 || k == TransformKind::kRowL1; }
inline bool needs_statistics(TransformKind k) { return is_per_feature(k) || is_row_norm(k); }

inline double apply_elementwise(TransformKind k, double x) {
  if (k == TransformKind::kLog1p) return std::copysign(std::log1p(std::fabs(x)), x);
  return x != 0 ? 1.0 : 0.0;  // kBinary
}

// What a statistics pass accumulates per feature (per-feature stages) or per
// row (row stages) from one transformed value x: |x| (max for maxabs, sum for
// row_l1), x² (scale, row_l2) or 1 for a nonzero (tfidf).
inline double statistic_term(TransformKind k, double x) {
  switch (k) {
    case TransformKind::kMaxAbs:
    case TransformKind::kRowL1: return std::fabs(x);
    case TransformKind::kScale:
    case TransformKind::kRowL2: return x * x;
    case TransformKind::kTfidf: return x != 0 ? 1.0 : 0.0;
    default: return 0;
  }
}
inline bool statistic_is_max(TransformKind k) { return k == TransformKind::kMaxAbs; }

// The factor a value is multiplied by, from its feature's (or row's)
// accumulated statistic; n = rows of the training data.
double transform_factor(TransformKind k, double statistic, uint64_t n_rows);

// Applies a model's recorded transforms to raw rows (predict). Rows are given
// as increasing 0-based indices with their values.
class RowTransformer {
 public:
  // Throws Error(kCorruption) with msg::not_a_model(`path`) for an unknown
  // transform name or statistics on a stage that takes none.
  RowTransformer(const std::vector<ModelTransform>& transforms, const std::string& path);
  bool empty() const { return stages_.empty(); }
  // out[k] = the transformed value of values[k].
  void apply(const uint64_t* indices, const float* values, size_t nnz, std::vector<float>& out) const;

 private:
  struct Stage {
    TransformKind kind;
    const ModelTransform* recorded;
  };
  std::vector<Stage> stages_;
};

}  // namespace fgm
