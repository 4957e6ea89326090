#include "cli/solver_commands.h"

#include <fmt/format.h>

#include "core/error.h"

namespace fgm::cli {

// Each solver adds its case (and its train_<name>/path_<name> declared above)
// when it lands; `solver`'s choices in core/config.cpp list only those.
int dispatch_solver_train(SolverKind solver, SolverCommand& command) {
  switch (solver) {
    case SolverKind::kPnormKta:
      return train_pnorm_kta(command);
    case SolverKind::kSifs:
      return train_sifs(command);
    case SolverKind::kExclusive:
      return train_exclusive(command);
    case SolverKind::kMslr:
      return train_mslr(command);
    default:
      throw Error(ErrorKind::kInternal,
                  fmt::format("fgm train: solver '{}' has no train command", solver_name(solver)));
  }
}

int dispatch_solver_path(SolverKind solver, SolverCommand& command) {
  switch (solver) {
    case SolverKind::kPnormKta:
      return path_pnorm_kta(command);
    case SolverKind::kSifs:
      return path_sifs(command);
    case SolverKind::kExclusive:
      return path_exclusive(command);
    case SolverKind::kMslr:
      return path_mslr(command);
    default:
      throw Error(ErrorKind::kInternal,
                  fmt::format("fgm path: solver '{}' has no path command", solver_name(solver)));
  }
}

}  // namespace fgm::cli
