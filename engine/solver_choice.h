// Which method a run uses: the top-level config key `solver`. Every solver
// streams the same store and shares the scheduler, caches, model files,
// run.json, reports and CLI; each owns the config section named after it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/config.h"

namespace fgm {

enum class SolverKind {
  kFgm,        // Feature Generating Machine (seed 000): cutting plane + APG
  kSifs,       // SIFS safe screening for sparse SVMs (seed 003)
  kPnormKta,   // generalized l_p kernel-target-alignment path (seed 004)
  kMslr,       // minimax sparse logistic regression (seed 001)
  kExclusive,  // exclusive sparsity norm, random groups (seed 002)
};

std::string_view solver_name(SolverKind kind);
std::optional<SolverKind> solver_from_name(std::string_view name);
SolverKind solver_from_config(const Config& config);

// The name of the solver whose section a key belongs to (`fgm.B` -> "fgm",
// `kta.p` -> "pnorm_kta"); nullopt for keys every solver reads (data.*,
// engine.*, features.*, ...). solver_owning_key: the same as a SolverKind.
std::optional<std::string_view> solver_section_owner(std::string_view key);
std::optional<SolverKind> solver_owning_key(std::string_view key);

// A user-set key owned by another solver than config's `solver` is a
// configuration error naming the key and where it was set. (The feature
// spaces a solver runs on are its registry entry's: cli/solver_registry.h.)
void reject_other_solver_keys(const Config& config);

}  // namespace fgm
