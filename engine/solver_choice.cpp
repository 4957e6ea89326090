#include "engine/solver_choice.h"

#include <array>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "core/messages.h"

namespace fgm {
namespace {

constexpr std::array<std::pair<SolverKind, std::string_view>, 5> kSolverNames{{
    {SolverKind::kFgm, "fgm"},
    {SolverKind::kSifs, "sifs"},
    {SolverKind::kPnormKta, "pnorm_kta"},
    {SolverKind::kMslr, "mslr"},
    {SolverKind::kExclusive, "exclusive"},
}};

// Config sections and the solver that reads them (a solver added to the
// registry, cli/solver_registry.cpp, adds its section here). `path.*` is the
// FGM path (feature counts, B or C values); the other solvers keep their path
// grid in their own section.
constexpr std::pair<std::string_view, std::string_view> kSectionOwners[] = {
    {"fgm.", "fgm"},
    {"path.", "fgm"},
    {"sifs.", "sifs"},
    {"kta.", "pnorm_kta"},
    {"mslr.", "mslr"},
    {"exclusive.", "exclusive"},
};

}  // namespace

std::string_view solver_name(SolverKind kind) {
  for (const auto& [k, name] : kSolverNames)
    if (k == kind) return name;
  throw Error(ErrorKind::kInternal, "solver_name: unknown SolverKind");
}

std::optional<SolverKind> solver_from_name(std::string_view name) {
  for (const auto& [k, n] : kSolverNames)
    if (n == name) return k;
  return std::nullopt;
}

SolverKind solver_from_config(const Config& config) {
  const std::string name = config.get_string("solver");
  if (auto kind = solver_from_name(name)) return *kind;
  // config validation restricts `solver` to its choices; this is a bug
  throw Error(ErrorKind::kInternal, fmt::format("solver_from_config: unknown solver '{}'", name));
}

std::optional<std::string_view> solver_section_owner(std::string_view key) {
  for (const auto& [prefix, owner] : kSectionOwners)
    if (key.substr(0, prefix.size()) == prefix) return owner;
  return std::nullopt;
}

std::optional<SolverKind> solver_owning_key(std::string_view key) {
  const std::optional<std::string_view> owner = solver_section_owner(key);
  return owner ? solver_from_name(*owner) : std::nullopt;
}

void reject_other_solver_keys(const Config& config) {
  const std::string name = config.get_string("solver");
  for (const ParamSpec& spec : param_specs()) {
    if (!config.set_by_user(spec.key)) continue;
    const std::optional<std::string_view> owner = solver_section_owner(spec.key);
    // The cross-validation folds of `fgm path` are read by pnorm_kta too (engine/pnorm_kta_cv.h).
    const bool shared_with_kta = spec.key == "path.folds" || spec.key == "path.fold_seed";
    if (shared_with_kta && name == "pnorm_kta") continue;
    if (owner && *owner != name)
      throw Error(ErrorKind::kConfig,
                  msg::ignored_key(config.where_set(spec.key), spec.key,
                                   fmt::format("it belongs to solver = \"{}\" and this run uses solver = \"{}\"",
                                               *owner, name)));
  }
}

}  // namespace fgm
