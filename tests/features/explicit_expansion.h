// Explicit-expansion oracle shared by the feature and engine tests: the value
// of a model's generated feature in a row, computed from the raw LIBSVM rows by
// the definitions (poly-2 map, kernel expansions of the [0,1]-scaled column
// with implicit zeros) — never through the engine's feature spaces.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "features/kernel_maps.h"
#include "io/model_file.h"
#include "tests/test_util.h"

namespace fgm::test {

class ExplicitExpansion {
 public:
  ExplicitExpansion(const InMemoryData& data, uint64_t width) : data_(data), lo_(width, 0.0), hi_(width, 0.0) {
    // Column min/max with implicit zeros, as float32 values.
    for (uint64_t j = 0; j < width; ++j) {
      bool first = true, missing = false;
      for (const auto& row : data.rows) {
        auto it = row.find(j);
        if (it == row.end()) {
          missing = true;
          continue;
        }
        double v = static_cast<float>(it->second);
        lo_[j] = first ? v : std::min(lo_[j], v);
        hi_[j] = first ? v : std::max(hi_[j], v);
        first = false;
      }
      if (missing) lo_[j] = std::min(lo_[j], 0.0), hi_[j] = std::max(hi_[j], 0.0);
    }
  }

  // Column j's min and max over all rows, implicit zeros included.
  double lo(uint64_t j) const { return lo_[j]; }
  double hi(uint64_t j) const { return hi_[j]; }

  double raw(uint64_t i, uint64_t j) const {
    auto it = data_.rows[i].find(j);
    return it == data_.rows[i].end() ? 0.0 : static_cast<double>(static_cast<float>(it->second));
  }
  double scaled(uint64_t i, uint64_t j) const {
    double range = hi_[j] - lo_[j];
    if (!(range > 0)) return 0;
    double x = (raw(i, j) - lo_[j]) / range;
    return x < 0 ? 0 : (x > 1 ? 1 : x);
  }

  // φ_f(x_i) for a selected feature of `model`.
  double value(const Model& model, const ModelFeature& f, uint64_t i) const {
    const uint64_t j = f.key.ids[0];
    if (model.feature_kind == "linear" || model.feature_kind == "group") return raw(i, j);
    if (model.feature_kind == "poly2") {
      switch (f.key.kind) {
        case FeatureKind::kLinear: return std::sqrt(2 * model.gamma * model.coef0) * raw(i, j);
        case FeatureKind::kSquare: return model.gamma * raw(i, j) * raw(i, j);
        default: return std::sqrt(2.0) * model.gamma * raw(i, j) * raw(i, f.key.ids[1]);
      }
    }
    ExpansionMap map = model.feature_kind == "hik"
                           ? ExpansionMap::hik(model.levels)
                           : ExpansionMap::additive(*parse_additive_kernel(model.kernel), model.order, model.period);
    return static_cast<float>(map.eval(scaled(i, j))[f.key.level]);
  }

  // Dense column of every selected feature of `model`.
  std::vector<std::vector<double>> columns(const Model& model) const {
    std::vector<std::vector<double>> out(model.features.size(), std::vector<double>(data_.rows.size()));
    for (size_t k = 0; k < model.features.size(); ++k)
      for (uint64_t i = 0; i < data_.rows.size(); ++i) out[k][i] = value(model, model.features[k], i);
    return out;
  }

 private:
  const InMemoryData& data_;
  std::vector<double> lo_, hi_;
};

}  // namespace fgm::test
