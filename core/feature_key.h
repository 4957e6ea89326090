// Identity of a selected feature: a base feature, or a generated one (square,
// exact cross pair (j,k), expansion level of a HIK/additive group). Shared by
// the cache, the solvers, the model file and predict.
#pragma once

#include <cstdint>

namespace fgm {

enum class FeatureKind : uint8_t { kLinear = 0, kSquare = 1, kCross = 2, kHik = 3, kAdditive = 4, kGroup = 5 };
const char* feature_kind_name(FeatureKind kind);

struct FeatureKey {
  FeatureKind kind = FeatureKind::kLinear;
  uint64_t ids[2] = {0, 0};     // base feature ids (0-based); ids[1] used by kCross
  uint32_t level = 0;           // expansion component (hik/additive)
  uint64_t group = UINT64_MAX;  // group id when selected as part of a group
  bool operator==(const FeatureKey& o) const {
    return kind == o.kind && ids[0] == o.ids[0] && ids[1] == o.ids[1] && level == o.level;
  }
};

}  // namespace fgm
