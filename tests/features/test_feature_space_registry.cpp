// The feature-space registry (features/feature_space.cpp, feature_space_kinds)
// against the config table (core/config.cpp): the two lists a new space is
// added to (docs/development.md) must agree, or a kind would be accepted by
// the config and unknown to the engine, or a kind's key left unrefused.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "features/feature_space.h"

using namespace fgm;

TEST_CASE("every features.kind choice is a registered space, and each space's keys are its own",
          "[features][registry]") {
  const ParamSpec* kind = find_param("features.kind");
  REQUIRE(kind != nullptr);
  std::vector<std::string> registered;
  for (const FeatureSpaceKind& k : feature_space_kinds()) registered.push_back(k.kind);
  CHECK(registered == kind->choices);

  for (const FeatureSpaceKind& k : feature_space_kinds()) {
    INFO("features.kind = " << k.kind);
    CHECK(k.make != nullptr);
    CHECK(&feature_space_kind(k.kind) == &k);
    CHECK((k.value_degree == 1 || k.value_degree == 2));
    for (const std::string& key : k.keys) {
      INFO(key);
      const ParamSpec* spec = find_param(key);
      REQUIRE(spec != nullptr);
      CHECK(spec->description.rfind(k.kind + ":", 0) == 0);  // its help names the kind it belongs to
    }
  }
  // A features.* key documented as one kind's ("poly2: ...") is registered as
  // that kind's, so reject_ignored_keys refuses it with any other kind.
  for (const ParamSpec& spec : param_specs()) {
    if (spec.key.rfind("features.", 0) != 0) continue;
    for (const FeatureSpaceKind& k : feature_space_kinds())
      if (spec.description.rfind(k.kind + ":", 0) == 0) {
        INFO(spec.key << " belongs to " << k.kind);
        CHECK(std::find(k.keys.begin(), k.keys.end(), spec.key) != k.keys.end());
      }
  }

  // Only the linear space serves several dual vectors per pass (one-vs-rest lockstep).
  FeatureSpaceSettings s;
  for (const char* name : {"linear", "poly2", "hik", "additive"}) {
    s.kind = name;
    CHECK(scores_many(s) == (s.kind == "linear"));
  }
  try {
    feature_space_kind("cubic");
    FAIL("an unknown kind was accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("features.kind") != std::string::npos);
  }
}
