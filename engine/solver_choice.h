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

// The solver whose section a key belongs to (`fgm.B` -> kFgm, `sifs.gamma`
// -> kSifs); nullopt for keys every solver reads (data.*, engine.*, ...).
std::optional<SolverKind> solver_owning_key(std::string_view key);

// Whether `solver` can run on features.kind = `kind`.
bool solver_supports_kind(SolverKind solver, std::string_view kind);

// A user-set key owned by another solver than config's `solver`, or a
// features.kind the solver does not support, is a configuration error naming
// the key and where it was set.
void reject_other_solver_keys(const Config& config);

}  // namespace fgm
