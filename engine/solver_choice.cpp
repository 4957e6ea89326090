#include "engine/solver_choice.h"

#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "core/messages.h"

namespace fgm {
namespace {

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

std::optional<std::string_view> solver_section_owner(std::string_view key) {
  for (const auto& [prefix, owner] : kSectionOwners)
    if (key.substr(0, prefix.size()) == prefix) return owner;
  return std::nullopt;
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
