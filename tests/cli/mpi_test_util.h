// Shared by the tests of distributed runs (tests/cli/test_mpi_*.cpp): the
// comparison behind "the same model, bit for bit, for every rank count".
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "io/model_file.h"

namespace fgm::test {

inline bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

inline void require_same_features(const std::vector<ModelFeature>& a, const std::vector<ModelFeature>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    INFO("feature " << k);
    CHECK(a[k].key == b[k].key);
    CHECK(a[k].key.group == b[k].key.group);
    CHECK(a[k].batch == b[k].batch);
    CHECK(same_bits(a[k].weight, b[k].weight));
  }
}

// The model files `a` and `b` hold the same model bit for bit: features (keys,
// batches, weights), every class of a one-vs-rest model, the bias, the
// objective and the expansion's scaling. Either must select something.
inline void require_same_model(const std::string& a, const std::string& b) {
  INFO(a << " vs " << b);
  const Model ma = read_model(a), mb = read_model(b);
  REQUIRE((!ma.features.empty() || !ma.classes.empty()));
  CHECK(ma.feature_kind == mb.feature_kind);
  require_same_features(ma.features, mb.features);
  REQUIRE(ma.classes.size() == mb.classes.size());
  for (size_t c = 0; c < ma.classes.size(); ++c) {
    INFO("class " << c);
    CHECK(same_bits(ma.classes[c].label, mb.classes[c].label));
    require_same_features(ma.classes[c].features, mb.classes[c].features);
    CHECK(same_bits(ma.classes[c].bias, mb.classes[c].bias));
    CHECK(same_bits(ma.classes[c].objective, mb.classes[c].objective));
  }
  CHECK(ma.has_bias == mb.has_bias);
  CHECK(same_bits(ma.bias, mb.bias));
  CHECK(same_bits(ma.objective, mb.objective));
  CHECK(ma.scale_ids == mb.scale_ids);
  CHECK(ma.scale_min == mb.scale_min);
  CHECK(ma.scale_max == mb.scale_max);
}

}  // namespace fgm::test
