// The `solver` key: names, the sections each solver owns, and the errors for
// keys of another solver's section.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "core/config.h"
#include "core/error.h"
#include "engine/solver_choice.h"
#include "engine/train_settings.h"

TEST_CASE("every config section has one owner", "[solver_choice]") {
  REQUIRE(fgm::solver_section_owner("fgm.B") == "fgm");
  REQUIRE(fgm::solver_section_owner("path.features") == "fgm");
  REQUIRE(fgm::solver_section_owner("sifs.gamma") == "sifs");
  REQUIRE(fgm::solver_section_owner("kta.p_step") == "pnorm_kta");
  REQUIRE(fgm::solver_section_owner("mslr.C") == "mslr");
  REQUIRE(fgm::solver_section_owner("exclusive.lambda") == "exclusive");
  // shared sections, and prefixes that only look alike
  for (const char* key : {"data.train", "engine.threads", "features.kind", "output.dir", "store.tile_rows",
                          "solver", "fgmx.B", "pathological"})
    REQUIRE(!fgm::solver_section_owner(key).has_value());
}

TEST_CASE("solver = fgm is the default, accepts fgm and path keys, and every declared key has "
          "a section its solver can run with",
          "[solver_choice]") {
  fgm::Config defaults;
  REQUIRE(defaults.get_string("solver") == "fgm");
  fgm::Config c = fgm::Config::load("", {"solver=fgm", "fgm.B=3", "path.features=[1,2]"});
  REQUIRE_NOTHROW(fgm::reject_other_solver_keys(c));
  REQUIRE_NOTHROW(fgm::reject_ignored_keys(c, fgm::ConfigCommand::kPath));

  // A solver that cannot be chosen (not in `solver`'s choices) owns no key:
  // its section appears together with its name.
  const fgm::ParamSpec* solver = fgm::find_param("solver");
  REQUIRE(solver != nullptr);
  for (const fgm::ParamSpec& spec : fgm::param_specs()) {
    auto owner = fgm::solver_section_owner(spec.key);
    if (!owner) continue;
    CAPTURE(spec.key);
    REQUIRE(std::find(solver->choices.begin(), solver->choices.end(), std::string(*owner)) != solver->choices.end());
  }
}

TEST_CASE("an unknown solver is a configuration error naming the key and the choices", "[solver_choice]") {
  try {
    fgm::Config::load("", {"solver=svm"});
    FAIL("solver=svm accepted");
  } catch (const fgm::Error& e) {
    REQUIRE(e.kind() == fgm::ErrorKind::kConfig);
    REQUIRE(std::string(e.what()).find("solver") != std::string::npos);
    REQUIRE(std::string(e.what()).find("fgm") != std::string::npos);
  }
}
