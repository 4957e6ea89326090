#include "cli/solver_registry.h"

#include <fmt/format.h>

#include "core/error.h"
#include "engine/solver_choice.h"

namespace fgm::cli {

// Each solver's functions (cli/<solver>_command.cpp; fgm: train_command.cpp, path_command.cpp).
int train_fgm_run(SolverRun& run);
int path_fgm_run(SolverRun& run);
void check_fgm_config(const Config& config, RunKind kind, bool partitioned);
void check_fgm_data(SolverRun& run);
int train_sifs(SolverRun& run);
int path_sifs(SolverRun& run);
int train_exclusive(SolverRun& run);
int path_exclusive(SolverRun& run);
int train_mslr(SolverRun& run);
int path_mslr(SolverRun& run);
int train_pnorm_kta(SolverRun& run);
int path_pnorm_kta(SolverRun& run);
void check_pnorm_kta_config(const Config& config, RunKind kind, bool partitioned);

const std::vector<SolverEntry>& solver_registry() {
  static const std::vector<SolverEntry> entries = {
      {"fgm", "Feature Generating Machine: cutting plane over feature groups, APG on the active set",
       "feature counts or B / C values",
       {.multiclass = true, .partitioned = true, .partitioned_path = true, .partitioned_train_transforms = true,
        .partitioned_truth = true, .every_feature_space = true, .resume = true},
       check_fgm_config, check_fgm_data, train_fgm_run, path_fgm_run},
      {"sifs", "SIFS: simultaneous safe feature and sample screening for sparse SVMs", "a (β, α) grid",
       {.multiclass = true, .multiclass_path = true, .partitioned = true, .partitioned_path = true},
       nullptr, nullptr, train_sifs, path_sifs},
      {"pnorm_kta", "generalized l_p kernel-target alignment: a path over p", "p values",
       {.partitioned = true, .partitioned_path = true}, check_pnorm_kta_config, nullptr, train_pnorm_kta,
       path_pnorm_kta},
      {"mslr", "minimax sparse logistic regression: cutting plane with a minimax subproblem", "feature counts",
       {.partitioned = true, .partitioned_path = true, .resume = true}, nullptr, nullptr, train_mslr,
       path_mslr},
      {"exclusive", "exclusive sparsity norm over feature groups (FISTA with a working set)", "λ values",
       {.multiclass = true, .partitioned = true, .partitioned_path = true}, nullptr, nullptr, train_exclusive,
       path_exclusive},
  };
  return entries;
}

const SolverEntry& find_solver(std::string_view name) {
  for (const SolverEntry& e : solver_registry())
    if (e.name == name) return e;
  // config validation restricts `solver` to its choices; this is a bug
  throw Error(ErrorKind::kInternal, fmt::format("find_solver: no solver '{}' is registered", name));
}

std::string solver_list(bool with_path_points) {
  std::string list;
  for (const SolverEntry& e : solver_registry())
    list += (list.empty() ? "" : ", ") +
            (with_path_points ? fmt::format("{} for {}", e.path_points, e.name) : std::string(e.name));
  return list;
}

std::vector<std::string> solver_keys(const SolverEntry& entry) {
  std::vector<std::string> keys;
  for (const ParamSpec& spec : param_specs())
    if (solver_section_owner(spec.key) == entry.name) keys.push_back(spec.key);
  return keys;
}

void refuse_missing_capability(const SolverEntry& entry, const Config& config, RunKind kind, bool partitioned,
                               size_t classes) {
  const SolverCapabilities& can = entry.can;
  const bool path = kind == RunKind::kPath;
  auto refuse = [&](const std::string& key, const std::string& why) {
    throw Error(ErrorKind::kConfig,
                fmt::format("{}{}: {} (solver = \"{}\")", config.where_set(key), key, why, entry.name));
  };
  if (path && !entry.path) refuse("solver", "this solver has no path: use fgm train");
  if (const std::string kind = config.get_string("features.kind"); kind != "linear" && !can.every_feature_space)
    throw Error(ErrorKind::kConfig,
                fmt::format("{}features.kind = \"{}\" is not supported by solver = \"{}\" (it runs on "
                            "features.kind = \"linear\"); remove features.kind or choose solver = \"fgm\"",
                            config.where_set("features.kind"), kind, entry.name));
  if (partitioned && !(path ? can.partitioned_path : can.partitioned))
    refuse("data.train", fmt::format("{} is a partitioned store, which fgm {} does not run on with this solver: "
                                     "use the unpartitioned store",
                                     config.get_string("data.train"), path ? "path" : "train"));
  if (partitioned) {
    auto refuse_on_partitions = [&](const char* key, const char* what) {
      throw Error(ErrorKind::kConfig,
                  path ? fmt::format("{}: {} is not supported by fgm path on a partitioned store yet (solver = {}; "
                                     "docs/distributed.md lists what is distributed)",
                                     key, what, entry.name)
                       : fmt::format("{}: {} is not supported with solver = {} on a partitioned store yet "
                                     "(docs/distributed.md lists what is distributed)",
                                     key, what, entry.name));
    };
    if (!config.get_string_list("features.transform").empty() && (path || !can.partitioned_train_transforms))
      refuse_on_partitions("features.transform", "a feature transform");
    if (!config.get_string("data.truth").empty() && !can.partitioned_truth)
      refuse_on_partitions("data.truth", "truth recovery");
  }
  if (classes <= 2) return;
  const std::string store = config.get_string("data.train");
  if (path && !can.multiclass_path)
    throw Error(ErrorKind::kConfig,
                fmt::format("{}: the store holds {} classes; fgm path supports two-label stores only with solver = "
                            "\"{}\" (relabel the data to two classes{})",
                            store, classes, entry.name,
                            can.multiclass ? ", or run fgm train, which fits one model per class" : ""));
  if (!path && !can.multiclass)
    throw Error(ErrorKind::kConfig,
                fmt::format("{}: {} labels, but solver = \"{}\" trains binary models only (relabel the data to two "
                            "classes, or use solver = \"fgm\" for one-vs-rest)",
                            store, classes, entry.name));
}

}  // namespace fgm::cli
