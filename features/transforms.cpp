#include "features/transforms.h"

#include <algorithm>

#include "core/error.h"
#include "core/messages.h"

namespace fgm {
namespace {

struct NamedTransform {
  const char* name;
  TransformKind kind;
};
constexpr NamedTransform kTransforms[] = {
    {"log1p", TransformKind::kLog1p},   {"binary", TransformKind::kBinary},
    {"maxabs", TransformKind::kMaxAbs}, {"scale", TransformKind::kScale},
    {"tfidf", TransformKind::kTfidf},   {"row_l2", TransformKind::kRowL2},
    {"row_l1", TransformKind::kRowL1},
};

bool find_transform(const std::string& name, TransformKind& kind) {
  for (const auto& t : kTransforms)
    if (name == t.name) {
      kind = t.kind;
      return true;
    }
  return false;
}

std::string allowed_names() {
  std::string out;
  for (const auto& t : kTransforms) out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}

}  // namespace

TransformKind parse_transform(const std::string& name) {
  TransformKind kind;
  if (!find_transform(name, kind))
    throw Error(ErrorKind::kConfig, msg::bad_enum("", "features.transform", name, allowed_names()));
  return kind;
}

const char* transform_name(TransformKind kind) {
  for (const auto& t : kTransforms)
    if (t.kind == kind) return t.name;
  return "?";
}

std::vector<TransformKind> parse_transforms(const std::vector<std::string>& names) {
  std::vector<TransformKind> out;
  for (const auto& n : names) out.push_back(parse_transform(n));
  return out;
}

double transform_factor(TransformKind k, double statistic, uint64_t n_rows) {
  const double n = static_cast<double>(n_rows);
  switch (k) {
    case TransformKind::kMaxAbs:
    case TransformKind::kRowL1: return statistic > 0 ? 1.0 / statistic : 1.0;
    case TransformKind::kScale: return statistic > 0 && n > 0 ? 1.0 / std::sqrt(statistic / n) : 1.0;
    case TransformKind::kRowL2: return statistic > 0 ? 1.0 / std::sqrt(statistic) : 1.0;
    case TransformKind::kTfidf: return std::log((1.0 + n) / (1.0 + statistic)) + 1.0;
    default: return 1.0;
  }
}

RowTransformer::RowTransformer(const std::vector<ModelTransform>& transforms, const std::string& path) {
  for (const auto& t : transforms) {
    Stage s;
    if (!find_transform(t.name, s.kind))
      throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "unknown feature transform '" + t.name + "'"));
    if (!is_per_feature(s.kind) && !t.ids.empty())
      throw Error(ErrorKind::kCorruption,
                  msg::not_a_model(path, "transform '" + t.name + "' carries per-feature statistics"));
    s.recorded = &t;
    stages_.push_back(s);
  }
}

void RowTransformer::apply(const uint64_t* indices, const float* values, size_t nnz,
                           std::vector<float>& out) const {
  std::vector<double> x(values, values + nnz);
  for (const Stage& s : stages_) {
    if (is_row_norm(s.kind)) {
      double sum = 0;
      for (double v : x) sum += statistic_term(s.kind, v);
      const double f = transform_factor(s.kind, sum, 0);
      for (double& v : x) v *= f;
    } else if (is_per_feature(s.kind)) {
      // Merge walk: indices and the recorded ids are both increasing.
      const auto& ids = s.recorded->ids;
      size_t at = 0;
      for (size_t k = 0; k < nnz; ++k) {
        at = static_cast<size_t>(std::lower_bound(ids.begin() + at, ids.end(), indices[k]) - ids.begin());
        const bool recorded = at < ids.size() && ids[at] == indices[k];
        x[k] *= recorded ? s.recorded->factors[at] : s.recorded->absent_factor;
      }
    } else {
      for (double& v : x) v = apply_elementwise(s.kind, v);
    }
  }
  out.resize(nnz);
  for (size_t k = 0; k < nnz; ++k) out[k] = static_cast<float>(x[k]);
}

}  // namespace fgm
