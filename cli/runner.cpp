#include "cli/runner.h"

#include <sched.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/solver_registry.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/messages.h"
#include "core/path_checks.h"
#include "core/simd/simd.h"
#include "engine/train_settings.h"
#include "features/transformed_store.h"
#include "io/partitioned_store.h"
#include "report/report_page.h"
#include "synth/synthetic_data.h"

namespace fgm::cli {

namespace {

// The rank count in a distributed run's checkpoint identity: resuming on
// another count is refused.
constexpr const char* kRanksIdentityKey = "ranks (mpirun -np)";

// The refusal of a checkpoint in `out_dir` written by a run on another
// number of ranks (rank 0, before its resume session reads the checkpoint).
void refuse_other_rank_count(const std::string& out_dir, bool restart, int ranks, MemoryBudget& budget) {
  const std::string file = (std::filesystem::path(out_dir) / kCheckpointFileName).string();
  std::error_code ec;
  if (restart || !std::filesystem::exists(file, ec)) return;
  const ResumeCheckpoint saved = read_checkpoint(file, budget);
  const auto it = saved.identity.config.find(kRanksIdentityKey);
  const std::string saved_ranks = it == saved.identity.config.end() ? "1 (not a distributed run)" : it->second;
  if (saved_ranks == std::to_string(ranks)) return;
  throw Error(ErrorKind::kConfig,
              fmt::format("{}: refusing to resume: the checkpoint was written by a run on {} rank(s), this run has {}. "
                          "Resume it with the same rank count (mpirun -np {} fgm train ...), or add --restart to "
                          "discard it and start from scratch on {} rank(s)",
                          file, saved_ranks, ranks, saved_ranks, ranks));
}

// run.json's "distributed": ranks, partitions, every rank's memory, and the
// communication of every phase of every outer iteration (on rank 0).
// `class_labels`: as write_communication_records.
void write_distributed_section(JsonWriter& j, const PartitionedRun& run, const std::vector<RankResources>& ranks,
                               const std::vector<double>& class_labels) {
  j.key("distributed").begin_object();
  j.key("ranks").value(run.ranks);
  j.key("partitions").value(static_cast<uint64_t>(run.manifest.partitions));
  j.key("partitions_per_rank").value(static_cast<uint64_t>(run.own_partitions));
  j.key("rank_resources").begin_array();
  for (size_t r = 0; r < ranks.size(); ++r) {
    j.begin_object();
    j.key("rank").value(static_cast<uint64_t>(r));
    j.key("peak_rss_bytes").value(ranks[r].peak_rss_bytes);
    j.key("memory_budget_peak_bytes").value(ranks[r].budget_peak_bytes);
    j.end_object();
  }
  j.end_array();
  j.key("communication_of").value("rank 0: payload bytes sent plus received");
  j.key("passes");
  write_communication_records(j, run.communication, class_labels);
  j.end_object();
}

// run.json's "data" of a single store: the training file, its store and its shape.
void write_data_section(JsonWriter& j, const Config& config, const TrainingData& data) {
  const StoreInfo& info = data.store->info();
  j.key("data").begin_object();
  j.key("train").value(config.get_string("data.train"));
  j.key("store").value(data.store_dir);
  j.key("ingested_now").value(data.ingested_now);
  j.key("ingest_seconds").value(data.ingest_seconds);
  j.key("rows").value(info.n_rows);
  j.key("features").value(info.n_features);
  j.key("nnz").value(info.nnz);
  j.key("positive_label").value(info.positive_value);
  j.key("negative_label").value(info.negative_value);
  if (info.classes() > 2) {
    j.key("classes").begin_array();
    for (size_t k = 0; k < info.classes(); ++k) {
      j.begin_object();
      j.key("label").value(info.class_values[k]);
      j.key("rows").value(info.class_counts[k]);
      j.end_object();
    }
    j.end_array();
  }
  j.key("store_checksum").value(hex64(info.store_checksum));
  j.end_object();
}

// The run's warnings as [{"code": ..., "message": ...}] (run.json and path.json).
void write_warnings(JsonWriter& j, const RunWarnings& warnings) {
  j.key("warnings").begin_array();
  for (const auto& w : warnings.list()) {
    j.begin_object();
    j.key("code").value(w.code);
    j.key("message").value(w.message);
    j.end_object();
  }
  j.end_array();
}

// run.json's "data" of a partitioned store.
void write_partitioned_data_section(JsonWriter& j, const std::string& dir, const PartitionManifest& manifest) {
  j.key("data").begin_object();
  j.key("train").value(dir);
  j.key("rows").value(manifest.n_rows);
  j.key("features").value(manifest.n_features);
  j.key("partitions").value(static_cast<uint64_t>(manifest.partitions));
  j.key("input_checksum").value(hex64(manifest.input_checksum));
  j.end_object();
}

// Every rank must run the same thing: the configuration (but engine.threads
// and engine.memory_budget) is compared across ranks, and the first rank that
// differs is named (a collective).
void check_same_configuration(Communicator& comm, const Config& config) {
  std::string settings_text;
  for (const auto& [key, value] : config.dump())
    if (key != "engine.threads" && key != "engine.memory_budget") settings_text += key + "=" + value + "\n";
  check_same_on_all_ranks(comm, "configuration", settings_text);
  // Every rank refuses a rank count that does not divide the partitions here,
  // before rank 0 creates output.dir: a rank that failed later could end the
  // job while rank 0 still held an empty directory.
  const std::string dir = config.get_string("data.train");
  if (const std::string e = partition_mismatch(dir, read_partition_manifest(dir).partitions, comm.size()); !e.empty())
    throw Error(ErrorKind::kConfig, e);
}

// Warns (log and run.json's warnings, code "threads_exceed_cpu_affinity")
// when engine.threads asks for more threads than this process may run on:
// under mpirun's default binding each rank is bound to one core, and TBB
// then runs on one thread whatever engine.threads says.
void warn_if_threads_exceed_affinity(int threads, const Communicator& comm, RunWarnings& warnings) {
  cpu_set_t set;  // the CPUs this process may run on
  CPU_ZERO(&set);
  const unsigned cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? static_cast<unsigned>(CPU_COUNT(&set)) : 0;
  if (cpus == 0 || threads <= static_cast<int>(cpus)) return;
  const std::string rank = comm.size() > 1 ? fmt::format("rank {} of {}: ", comm.rank(), comm.size()) : "";
  warnings.add("threads_exceed_cpu_affinity",
               fmt::format("{}engine.threads = {} but this process may run on {} CPU(s) only (its CPU affinity), so "
                           "the extra threads share those CPUs (TBB limits itself to them). mpirun binds each rank "
                           "to one core by default: run mpirun --bind-to none, or mpirun --map-by slot:PE={} to give "
                           "each rank {} cores; under Slurm set --cpus-per-task={} (or lower engine.threads to {})",
                           rank, threads, cpus, threads, threads, threads, cpus));
}

// Under mpirun with more than one rank, data.train must be a partitioned
// store: throws Error(kConfig) saying how to make one otherwise. A partitioned
// store meets the single store's data.index_base / data.features checks
// (reject_partitioned_store_mismatch). Called before any partitioned run,
// whatever the solver.
void require_partitioned_store(const Config& config, const Communicator& comm) {
  reject_partitioned_store_mismatch(config);
  if (comm.size() == 1 || is_partitioned_store(config.get_string("data.train"))) return;
  throw Error(ErrorKind::kConfig,
              fmt::format("data.train = {} is not a partitioned store, and this run has {} ranks: ingest it with "
                          "fgm ingest INPUT --out STORE --partitions {} and set data.train = STORE "
                          "(docs/distributed.md)",
                          config.get_string("data.train"), comm.size(), comm.size()));
}

}  // namespace

std::optional<ResumeCheckpoint> SolverRun::resume_checkpoint() {
  int32_t resuming = session && session->resuming() ? 1 : 0;
  comm.broadcast(&resuming, sizeof resuming, 0);
  if (!resuming) return std::nullopt;
  if (session) {
    ResumeCheckpoint saved;
    saved.path = std::move(*session->path());
    if (TrainProgress* train = session->train()) saved.train = std::move(*train);
    if (SolverState* solver = session->solver()) saved.solver = std::move(*solver);
    return saved;
  }
  return read_checkpoint((std::filesystem::path(out_dir) / kCheckpointFileName).string(), budget);
}

std::optional<SolverState> SolverRun::resume_solver_state(const std::string& solver, std::string& rank_share) {
  std::optional<ResumeCheckpoint> saved = resume_checkpoint();
  if (!saved) return std::nullopt;
  const std::string file = (std::filesystem::path(out_dir) / kCheckpointFileName).string();
  std::optional<SolverState>& state = saved->solver;
  if (!state || state->solver != solver)
    throw Error(ErrorKind::kCorruption,
                msg::not_a_checkpoint(file, state ? "it holds the state of solver \"" + state->solver +
                                                        "\", this run is solver \"" + solver + "\""
                                                  : "no state of solver \"" + solver + "\""));
  if (!partitioned()) return std::move(state);
  if (state->rank_files_step == 0)
    throw Error(ErrorKind::kCorruption,
                msg::not_a_checkpoint(file, "a partitioned run's checkpoint without rank files: an earlier fgm's, "
                                            "whose per-rank files (mslr-duals.rank-*) this version no longer reads"));
  const std::string mine = rank_checkpoint_file(out_dir, comm.rank(), state->rank_files_step);
  std::error_code ec;
  if (!std::filesystem::exists(mine, ec))
    throw Error(ErrorKind::kCorruption,
                msg::not_a_checkpoint(mine, fmt::format("missing: the checkpoint {} needs rank {}'s share of step {}",
                                                        file, comm.rank(), state->rank_files_step)));
  ResumeCheckpoint share = read_checkpoint(mine, budget);
  if (!identity_differences(share.identity, identity).empty() || !share.solver || share.solver->solver != solver ||
      share.solver->rank_files_step != state->rank_files_step)
    throw Error(ErrorKind::kCorruption,
                msg::not_a_checkpoint(mine, fmt::format("not rank {}'s share of step {} of this {} run", comm.rank(),
                                                        state->rank_files_step, solver)));
  rank_share = std::move(share.solver->bytes);
  return std::move(state);
}

void SolverRun::save_solver_state(SolverState state, uint64_t step, const std::string& rank_share) {
  if (partitioned()) {
    const SolverState mine{state.solver, rank_share, step};
    write_checkpoint(rank_checkpoint_file(out_dir, comm.rank(), step), identity, nullptr, nullptr, budget, &mine);
    std::error_code ec;
    if (step >= 2) std::filesystem::remove(rank_checkpoint_file(out_dir, comm.rank(), step - 2), ec);
    const uint8_t written = 1;
    comm.allgather(&written, 1);  // every rank's share of this step is on disk
    state.rank_files_step = step;
  }
  if (session) session->save_solver_state(state);
}

std::string SolverRun::ranks_suffix() const {
  return partitioned() ? fmt::format(" ranks={}", comm.size()) : std::string();
}

void SolverRun::refuse_counts_beyond_width(const char* key, uint64_t largest) const {
  const uint64_t width = partitioned() ? read_partition_manifest(dir).n_features : data->store->info().n_features;
  if (largest > width)
    throw Error(ErrorKind::kConfig,
                msg::path_counts_beyond_features(config.where_set(key) + key, largest, width, "features"));
}

bool SolverRun::gather_outputs(uint64_t budget_peak) {
  if (partitioned()) {
    const RankResources mine{peak_rss_bytes(), budget_peak};
    const std::vector<uint8_t> all = comm.allgather(&mine, sizeof mine);
    ranks.resize(all.size() / sizeof(RankResources));
    std::memcpy(ranks.data(), all.data(), ranks.size() * sizeof(RankResources));
  }
  return comm.rank() == 0;
}

void SolverRun::begin_json(JsonWriter& j, std::string_view solver, const std::map<std::string, std::string>& dump,
                           const PartitionedRun* run, const std::vector<double>& class_labels) const {
  j.begin_object();
  j.key("engine_version").value(FGM_VERSION);
  j.key("solver").value(std::string(solver));
  if (partitioned()) write_partitioned_data_section(j, dir, run->manifest);
  else write_data_section(j, config, *data);
  write_config_section(j, dump);
  if (partitioned()) write_distributed_section(j, *run, ranks, class_labels);
}

namespace {

// How many planted features (data.truth) are among `features`.
struct TruthRecovery {
  uint64_t recovered = 0, planted = 0, recovered_cross = 0, planted_cross = 0;
};

TruthRecovery recover_truth(const std::string& truth_path, const std::vector<ModelFeature>& features) {
  PlantedTruth truth = read_truth(truth_path);
  TruthRecovery r;
  r.planted = truth.ids.size();
  r.planted_cross = truth.cross_ids.size();
  std::vector<uint64_t> chosen;
  std::vector<std::pair<uint64_t, uint64_t>> chosen_cross;
  for (const auto& f : features) {
    if (f.key.kind == FeatureKind::kCross) chosen_cross.emplace_back(f.key.ids[0], f.key.ids[1]);
    else if (f.key.kind == FeatureKind::kLinear || f.key.kind == FeatureKind::kGroup) chosen.push_back(f.key.ids[0]);
  }
  std::sort(chosen.begin(), chosen.end());
  std::sort(chosen_cross.begin(), chosen_cross.end());
  for (uint64_t id : truth.ids)
    if (std::binary_search(chosen.begin(), chosen.end(), id)) ++r.recovered;
  for (const auto& pair : truth.cross_ids)
    if (std::binary_search(chosen_cross.begin(), chosen_cross.end(), pair)) ++r.recovered_cross;
  return r;
}

// data.test passed its syntax pass before training, so what fails here (a
// label the model does not know, an I/O error) must not lose the trained
// model: it is written to output.dir/model.fgm (without run.json) and the
// error says so.
EvalResult evaluate_test_file_keeping_model(const Config& config, const Model& model, MemoryBudget& budget,
                                            RunWarnings& warnings) {
  try {
    return evaluate_test_file(config, model, budget, warnings);
  } catch (const Error& e) {
    const std::string out_dir = config.get_string("output.dir");
    const std::string model_path = (std::filesystem::path(out_dir) / "model.fgm").string();
    create_output_directory(out_dir, "output.dir");
    write_model(model_path, model);
    throw Error(e.kind(), msg::evaluation_failed_model_kept(e.what(), model_path));
  }
}

}  // namespace

int SolverRun::finish_train(const TrainOutputs& out) {
  Model& model = *out.model;
  model.config = config.dump();
  std::optional<EvalResult> test;
  if (!config.get_string("data.test").empty()) test = evaluate_test_file_keeping_model(config, model, budget, warnings);
  std::optional<TruthRecovery> truth;
  if (!config.get_string("data.truth").empty())
    truth = recover_truth(config.get_string("data.truth"),
                          out.truth_among ? *out.truth_among : all_features(model));
  create_output_directory(out_dir, "output.dir");
  write_model((std::filesystem::path(out_dir) / "model.fgm").string(), model);

  JsonWriter j;
  begin_json(j, out.solver, model.config, out.partitioned,
             out.class_labels ? *out.class_labels : std::vector<double>{});
  out.sections(j, test ? &*test : nullptr);
  j.key("memory_budget_bytes").value(budget.limit());
  j.key("memory_budget_peak_bytes").value(out.budget_peak);
  j.key("peak_rss_bytes").value(peak_rss_bytes());
  j.key("simd_target").value(simd::target_name(simd::active_target()));  // FGM_SIMD or the best the CPU has
  j.key("train_seconds").value(out.train_seconds);
  j.key("total_seconds").value(out.train_seconds + ingest_seconds());
  if (test) {
    j.key("test").begin_object();
    j.key("path").value(config.get_string("data.test"));
    j.key("rows").value(test->rows);
    j.key("accuracy").value(test->accuracy);
    j.key("auc").value(test->auc);
    j.end_object();
  }
  if (truth) {
    j.key("truth").begin_object();
    j.key("planted").value(truth->planted);
    j.key("recovered").value(truth->recovered);
    j.key("planted_cross").value(truth->planted_cross);
    j.key("recovered_cross").value(truth->recovered_cross);
    j.end_object();
  }
  write_warnings(j, warnings);
  j.end_object();
  write_file_atomic((std::filesystem::path(out_dir) / "run.json").string(), j.str() + "\n");
  if (config.get_bool("output.report")) report::write_report(out_dir, {.train = true, .path = false});
  session->finish();

  if (truth) {
    fmt::print("recovered={}/{} ", truth->recovered, truth->planted);
    if (out.cross_truth && truth->planted_cross > 0)
      fmt::print("recovered_cross={}/{} ", truth->recovered_cross, truth->planted_cross);
  }
  fmt::print("{}{}", out.summary, ranks_suffix());
  if (test) fmt::print(" accuracy={:.4f} auc={:.4f}", test->accuracy, test->auc);
  fmt::print(" model={}/model.fgm\n", out_dir);
  return 0;
}

void SolverRun::write_point_model(const std::string& k, Model model) const {
  model.config = config.dump();
  write_model((std::filesystem::path(out_dir) / fmt::format("point-{}.fgm", k)).string(), model);
}

void SolverRun::finish_path(JsonWriter& j, const std::string& csv, const std::string& summary) {
  write_warnings(j, warnings);
  j.end_object();
  write_file_atomic((std::filesystem::path(out_dir) / "path.csv").string(), csv);
  write_file_atomic((std::filesystem::path(out_dir) / "path.json").string(), j.str() + "\n");
  if (config.get_bool("output.report")) report::write_report(out_dir, {.train = false, .path = true});
  session->finish();
  fmt::print("{}{}\n", summary, ranks_suffix());
}

namespace {

const char* command_name(RunKind kind) { return kind == RunKind::kTrain ? "train" : "path"; }

// The resume identity of the run (fgm train, fgm path) on a store whose
// checksum is `store_checksum`.
RunIdentity store_run_identity(const Config& config, RunKind kind, uint64_t store_checksum) {
  RunIdentity identity;
  identity.command = command_name(kind);
  identity.config = result_config(config.dump());
  identity.store_checksum = store_checksum;
  return identity;
}
const char* final_output(RunKind kind) { return kind == RunKind::kTrain ? "model.fgm" : "path.csv"; }

// A partitioned store: every rank checks it runs the same configuration;
// rank 0 alone opens output.dir (its lock and checkpoint; a checkpoint of
// another rank count refused).
void open_partitioned(const SolverEntry& entry, SolverRun& run) {
  check_same_configuration(run.comm, run.config);
  if (entry.check_data) entry.check_data(run);
  // The identity of a partitioned store, and the rank count: resuming on another count is refused.
  run.identity = store_run_identity(run.config, run.kind,
                                    partitioned_store_identity(run.dir, read_partition_manifest(run.dir)));
  run.identity.config[kRanksIdentityKey] = std::to_string(run.comm.size());
  if (run.comm.rank() != 0) return;
  refuse_other_rank_count(run.out_dir, run.restart, run.comm.size(), run.budget);
  run.session =
      std::make_unique<ResumeSession>(run.out_dir, run.identity, run.restart, final_output(run.kind), run.budget);
}

// A single store: opened (ingested when data.train is a text file) and
// checked against the config, its feature transforms applied, then output.dir.
void open_single(const SolverEntry& entry, SolverRun& run, TrainingData& data) {
  const Config& config = run.config;
  data = open_training_data(run.dir, training_data_options_from_config(config), run.budget);
  reject_store_mismatch(config, data.store->info());
  refuse_missing_capability(entry, config, run.kind, false, data.store->info().classes());
  data.store = apply_feature_transforms(std::move(data.store), config.get_string_list("features.transform"),
                                        run.budget, config.get_bytes("engine.block_bytes"));
  run.data = &data;
  if (entry.check_data) entry.check_data(run);
  run.identity = store_run_identity(config, run.kind, data.store->info().store_checksum);
  run.session =
      std::make_unique<ResumeSession>(run.out_dir, run.identity, run.restart, final_output(run.kind), run.budget);
}

// fgm train / fgm path with the config's solver; the process exit code.
int run_solver(RunKind kind, const Config& config, bool restart) {
  const SolverEntry& entry = find_solver(config.get_string("solver"));
  Communicator& world = world_communicator();
  require_partitioned_store(config, world);
  const bool partitioned = is_partitioned_store(config.get_string("data.train"));
  refuse_missing_capability(entry, config, kind, partitioned, 0);
  if (entry.check_config) entry.check_config(config, kind, partitioned);
  MemoryBudget budget(config.get_bytes("engine.memory_budget"));
  RunWarnings warnings;
  SolverRun run(config, kind, budget, warnings, world, restart);
  TrainingData data;
  if (partitioned) {
    if (kind == RunKind::kTrain)
      warn_if_threads_exceed_affinity(scheduler_options_from_config(config).threads, world, warnings);
    open_partitioned(entry, run);
  } else {
    open_single(entry, run, data);
  }
  return kind == RunKind::kTrain ? entry.train(run) : entry.path(run);
}

}  // namespace

Command add_solver_command(CLI::App& app, bool path) {
  auto* sub = path ? app.add_subcommand("path", "a path of models in one run with the configured solver (" +
                                                    solver_list(true) + "); writes path.csv and path.json")
                   : app.add_subcommand("train", "train one model with the configured solver (key `solver`: " +
                                                     solver_list(false) +
                                                     ") from a TOML config and key=value overrides; writes model.fgm "
                                                     "and run.json");
  struct Args {
    std::string config;
    std::vector<std::string> overrides;
    bool help_config = false;
    bool restart = false;
  };
  auto args = std::make_shared<Args>();
  sub->add_option("--config", args->config, path ? "TOML config file" : "TOML config file (see configs/)");
  sub->add_option("overrides", args->overrides, "key=value overrides (the command line wins)");
  if (!path) sub->add_flag("--help-config", args->help_config, "list every config key with type, default and range");
  sub->add_flag("--restart", args->restart,
                "ignore (and remove) the resume checkpoint in output.dir and start from scratch");
  return {sub, [args, path]() {
            if (args->help_config) {
              fmt::print("{}", describe_params());
              return 0;
            }
            Config config = Config::load(args->config, args->overrides);
            if (config.get_string("data.train").empty())
              throw Error(ErrorKind::kConfig,
                          msg::missing_required("data.train", path ? "the training data"
                                                                   : "the training data to select features from"));
            const ConfigCommand command = path ? ConfigCommand::kPath : ConfigCommand::kTrain;
            reject_ignored_keys(config, command);
            check_config_paths(config, command);
            return run_solver(path ? RunKind::kPath : RunKind::kTrain, config, args->restart);
          }};
}

}  // namespace fgm::cli
