#include "core/feature_key.h"

namespace fgm {

const char* feature_kind_name(FeatureKind kind) {
  switch (kind) {
    case FeatureKind::kLinear: return "linear";
    case FeatureKind::kSquare: return "square";
    case FeatureKind::kCross: return "cross";
    case FeatureKind::kHik: return "hik";
    case FeatureKind::kAdditive: return "additive";
    case FeatureKind::kGroup: return "group";
  }
  return "unknown";
}

}  // namespace fgm
