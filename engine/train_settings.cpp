#include "engine/train_settings.h"
#include "engine/solver_choice.h"
#include "engine/sifs_run.h"

#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "core/messages.h"
#include "core/path_checks.h"
#include "core/progress.h"
#include "io/libsvm_reader.h"
#include "io/partitioned_store.h"

namespace fgm {

void reject_if_set(const Config& c, const std::string& key, const std::string& why) {
  if (c.set_by_user(key)) throw Error(ErrorKind::kConfig, msg::ignored_key(c.where_set(key), key, why));
}

namespace {

// features.tree_pruning switches the tree search of FGM's GroupSpace; no
// other search reads it.
void reject_misplaced_tree_pruning(const Config& c) {
  const std::string key = "features.tree_pruning";
  if (!c.set_by_user(key)) return;
  if (c.get_string("solver") != "fgm")
    reject_if_set(c, key, "it switches the tree-group search of solver = \"fgm\"");
  if (!c.set_by_user("features.groups") || c.get_string("features.group_structure") != "tree")
    reject_if_set(c, key, "it applies to features.group_structure = \"tree\" only");
  const std::string train = c.get_string("data.train");
  if (!train.empty() && is_partitioned_store(train))
    reject_if_set(c, key, "a partitioned store's run scores every group (it has no Remark 2 pruning)");
}

// The checks of reject_store_mismatch, for a store of either kind that was
// ingested with `index_base` and is `n_features` wide (`declared_features`:
// the width --features gave, accepted too; 0: none).
void reject_ingest_key_mismatch(const Config& c, const std::string& train, int64_t store_index_base,
                                uint64_t n_features, uint64_t declared_features) {
  const int64_t index_base = c.get_int("data.index_base");
  if (c.set_by_user("data.index_base") && index_base != store_index_base)
    throw Error(ErrorKind::kConfig,
                msg::store_key_mismatch(c.where_set("data.index_base"), "data.index_base",
                                        std::to_string(index_base), train,
                                        std::to_string(store_index_base), "--index-base"));
  const uint64_t width = static_cast<uint64_t>(c.get_int("data.features"));
  if (c.set_by_user("data.features") && width != 0 && width != n_features && width != declared_features)
    throw Error(ErrorKind::kConfig,
                msg::store_key_mismatch(c.where_set("data.features"), "data.features",
                                        std::to_string(width), train,
                                        std::to_string(n_features), "--features"));
}

// A first pass over a file read only after training (data.test,
// data.validation): its syntax errors (file:line:column) and an empty file
// are found before any work, not after the classes were trained.
void check_evaluation_file(const Config& c, const char* key, bool train_is_store) {
  if (!c.set_by_user(key)) return;
  const std::string path = c.get_string(key);
  ReaderOptions options;
  // A store's index base is the model's; only a text input's base (the
  // config's) is known here, so with a store any index from 0 passes.
  options.index_base = train_is_store && !c.set_by_user("data.index_base")
                           ? 0
                           : static_cast<int>(c.get_int("data.index_base"));
  LibsvmReader reader(path, options);
  SparseRow row;
  uint64_t rows = 0;
  while (reader.next(row)) ++rows;
  if (rows == 0) throw Error(ErrorKind::kInvalidInput, msg::empty_input(path));
}

}  // namespace

void reject_ignored_keys(const Config& c, ConfigCommand command) {
  reject_other_solver_keys(c);  // first: its message names the solver the key belongs to
  if (c.get_string("solver") == "sifs") reject_sifs_ignored_keys(c, command == ConfigCommand::kTrain);
  if (command == ConfigCommand::kTrain) {
    for (const char* key : {"path.features", "path.B", "path.C", "path.debias", "path.debias_C", "path.folds",
                            "path.fold_seed"})
      reject_if_set(c, key, "path.* keys are read by `fgm path` only (fgm train makes one model)");
    reject_if_set(c, "data.validation",
                  "only `fgm path` uses a validation set (to pick its best point); fgm train "
                  "reports data.test");
  } else {
    reject_if_set(c, "data.truth", "only `fgm train` reports planted features recovered");
    if (c.get_int("path.folds") < 2)
      reject_if_set(c, "path.fold_seed", "it seeds the folds of path.folds, which is off (0 or 1)");
    // fgm.max_features = 0 is the documented "no cap": it cannot conflict with the path's counts.
    if (c.set_by_user("path.features") && c.get_int("fgm.max_features") != 0)
      reject_if_set(c, "fgm.max_features",
                    "with path.features the path's largest count is where the run stops");
  }
  if (c.get_string("solver") == "mslr") {
    for (const ParamSpec& spec : param_specs())
      if (spec.key.rfind("apg.", 0) == 0)
        reject_if_set(c, spec.key, "solver = \"mslr\" has no APG solve (its subproblem is read from mslr.*)");
    reject_if_set(c, "features.groups",
                  "solver = \"mslr\" selects single features (the paper's d ∈ [0,1]^m); groups are read by "
                  "solver = \"fgm\"");
    if (command == ConfigCommand::kTrain) {
      reject_if_set(c, "mslr.features",
                    "it lists the points of `fgm path`; fgm train makes one model (mslr.max_features caps it)");
    } else {
      reject_if_set(c, "data.validation", "the MSLR path reports data.test only");
      if (c.set_by_user("mslr.features") && c.get_int("mslr.max_features") != 0)
        reject_if_set(c, "mslr.max_features", "with mslr.features the path's largest count is where the run stops");
    }
  }
  const std::string kind = c.get_string("features.kind");
  if (kind != "linear")
    reject_if_set(c, "features.groups",
                  fmt::format("features.kind = {} generates its own features; groups from a file "
                              "apply to features.kind = linear only",
                              kind));
  if (!c.set_by_user("features.groups"))
    reject_if_set(c, "features.group_structure",
                  "it describes the groups of features.groups, which is not set");
  reject_misplaced_tree_pruning(c);
  for (const FeatureSpaceKind& owner : feature_space_kinds())
    for (const std::string& key : owner.keys)
      if (kind != owner.kind)
        reject_if_set(c, key, fmt::format("it applies to features.kind = {} only (this run uses {})", owner.kind, kind));
}

void reject_store_mismatch(const Config& c, const StoreInfo& info) {
  const std::string train = c.get_string("data.train");
  if (train.empty() || !is_store_directory(train)) return;  // text: ingested with these keys
  reject_ingest_key_mismatch(c, train, info.index_base, info.n_features, info.declared_features);
}

void reject_partitioned_store_mismatch(const Config& c) {
  const std::string train = c.get_string("data.train");
  if (train.empty() || !is_partitioned_store(train)) return;
  // Every partition was ingested with the manifest's base and width (a width
  // --features gave is the width).
  const PartitionManifest manifest = read_partition_manifest(train);
  reject_ingest_key_mismatch(c, train, manifest.index_base, manifest.n_features, manifest.n_features);
}

void check_config_paths(const Config& c, ConfigCommand command) {
  auto input = [&](const char* key) {
    if (c.set_by_user(key)) check_input_file(c.get_string(key), key);
  };
  const std::string train = c.get_string("data.train");
  if (!train.empty()) check_input_file_or_directory(train, "data.train");
  if (!train.empty() && !std::filesystem::is_directory(train)) check_regular_input_file(train, "data.train");
  input("data.test");
  input("features.groups");
  const char* third = command == ConfigCommand::kTrain ? "data.truth" : "data.validation";
  input(third);
  const bool train_is_store = !train.empty() && (is_store_directory(train) || is_partitioned_store(train));
  check_evaluation_file(c, "data.test", train_is_store);
  if (command != ConfigCommand::kTrain) check_evaluation_file(c, "data.validation", train_is_store);
  check_output_directory(c.get_string("output.dir"), "output.dir");
  if (!train.empty() && !is_store_directory(train)) {
    const std::string cache_dir = c.get_string("engine.cache_dir");
    create_output_directory(cache_dir, "engine.cache_dir");
    check_output_directory(cache_dir, "engine.cache_dir");
  }
}

SchedulerOptions scheduler_options_from_config(const Config& c) {
  SchedulerOptions so;
  so.threads = static_cast<int>(c.get_int("engine.threads"));
  so.blocks_in_flight = static_cast<int>(c.get_int("engine.blocks_in_flight"));
  so.progress = progress_enabled(parse_progress_mode(c.get_string("engine.progress")));
  return so;
}

void read_apg_keys(const Config& c, ApgOptions& apg) {
  const std::string method = c.get_string("apg.method");
  apg.method = method == "newton" ? SubproblemMethod::kNewton
               : method == "auto" ? SubproblemMethod::kAuto
                                  : SubproblemMethod::kApg;
  apg.eps_inner = c.get_float("apg.eps_inner");
  apg.gap_tolerance = c.get_float("apg.gap_tolerance");
  apg.intermediate_gap = c.get_float("apg.intermediate_gap");
  apg.eta = c.get_float("apg.eta");
  apg.max_iterations = static_cast<int>(c.get_int("apg.max_iterations"));
  apg.threads = static_cast<int>(c.get_int("engine.threads"));
}

TrainSettings train_settings_from_config(const Config& c) {
  TrainSettings s;
  s.B = static_cast<uint64_t>(c.get_int("fgm.B"));
  s.max_iterations = static_cast<int>(c.get_int("fgm.max_iterations"));
  s.eps_outer = c.get_float("fgm.eps_outer");
  s.final_certificate = c.get_bool("fgm.final_certificate");
  s.apg.loss = c.get_string("fgm.loss") == "logistic" ? Loss::kLogistic : Loss::kSquaredHinge;
  s.apg.C = c.get_float("fgm.C");
  s.apg.bias = c.get_bool("fgm.bias");
  read_apg_keys(c, s.apg);
  s.scheduler = scheduler_options_from_config(c);
  s.block_bytes = c.get_bytes("engine.block_bytes");
  s.space = feature_space_settings(c);
  s.max_features = static_cast<uint64_t>(c.get_int("fgm.max_features"));
  return s;
}

TrainingDataOptions training_data_options_from_config(const Config& c) {
  TrainingDataOptions o;
  o.index_base = static_cast<int>(c.get_int("data.index_base"));
  o.declared_features = static_cast<uint64_t>(c.get_int("data.features"));
  o.cache_dir = c.get_string("engine.cache_dir");
  o.max_store_bytes = c.get_bytes("store.max_bytes");
  o.tile_rows = static_cast<uint32_t>(c.get_int("store.tile_rows"));
  o.block_bytes = c.get_bytes("store.block_bytes");
  o.threads = static_cast<int>(c.get_int("engine.threads"));
  o.progress = progress_enabled(parse_progress_mode(c.get_string("engine.progress")));
  return o;
}

}  // namespace fgm
