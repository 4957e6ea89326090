// The config sections of the solvers (the top-level key `solver` picks one;
// their entries are in cli/solver_registry.cpp): each owns the section named
// after it, and a run refuses a key of another solver's section.
#pragma once

#include <optional>
#include <string_view>

#include "core/config.h"

namespace fgm {

// The name of the solver whose section a key belongs to (`fgm.B` -> "fgm",
// `kta.p` -> "pnorm_kta"); nullopt for keys every solver reads (data.*,
// engine.*, features.*, ...).
std::optional<std::string_view> solver_section_owner(std::string_view key);

// A user-set key owned by another solver than config's `solver` is a
// configuration error naming the key and where it was set. (The feature
// spaces a solver runs on are its registry entry's: cli/solver_registry.h.)
void reject_other_solver_keys(const Config& config);

}  // namespace fgm
