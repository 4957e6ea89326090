#include "cli/distributed_train.h"

#include <sched.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/resume.h"
#include "cli/run_output.h"
#include "cli/solver_commands.h"
#include "core/hash.h"
#include "core/messages.h"
#include "core/error.h"
#include "core/json_writer.h"
#include "engine/distributed_fgm.h"
#include "engine/solver_choice.h"
#include "engine/train_settings.h"
#include "io/partitioned_store.h"

namespace fgm::cli {

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

std::vector<RankResources> gather_rank_resources(Communicator& comm, uint64_t budget_peak) {
  const RankResources mine{peak_rss_bytes(), budget_peak};
  const std::vector<uint8_t> all = comm.allgather(&mine, sizeof mine);
  std::vector<RankResources> out(all.size() / sizeof(RankResources));
  std::memcpy(out.data(), all.data(), out.size() * sizeof(RankResources));
  return out;
}

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

void write_communication_records(JsonWriter& j, const std::vector<CommunicationRecord>& records,
                                 const std::vector<double>& class_labels) {
  j.begin_array();
  for (const auto& c : records) {
    j.begin_object();
    // A class without a label in `class_labels` is named by its index (never read past the labels).
    auto class_value = [&](int k) {
      if (k >= 0 && static_cast<size_t>(k) < class_labels.size()) j.value(class_labels[static_cast<size_t>(k)]);
      else j.value(static_cast<int64_t>(k));
    };
    if (c.class_index >= 0) {
      j.key("class");
      class_value(c.class_index);
    }
    if (!c.shared_by.empty()) {  // a scoring pass shared by these classes (lockstep)
      j.key("classes").begin_array();
      for (int k : c.shared_by) class_value(k);
      j.end_array();
    }
    j.key("iter").value(c.iteration);
    j.key("phase").value(c.phase);
    j.key("bytes").value(c.comm.bytes);
    j.key("collectives").value(c.comm.calls);
    j.key("seconds").value(c.comm.seconds);
    j.end_object();
  }
  j.end_array();
}

void write_partitioned_data_section(JsonWriter& j, const std::string& dir, const PartitionManifest& manifest) {
  j.key("data").begin_object();
  j.key("train").value(dir);
  j.key("rows").value(manifest.n_rows);
  j.key("features").value(manifest.n_features);
  j.key("partitions").value(static_cast<uint64_t>(manifest.partitions));
  j.key("input_checksum").value(hex64(manifest.input_checksum));
  j.end_object();
}

void begin_partitioned_run_json(JsonWriter& j, std::string_view solver, const std::string& dir,
                                const std::map<std::string, std::string>& config, const PartitionedRun& run,
                                const std::vector<RankResources>& ranks,
                                const std::vector<double>& class_labels) {
  j.begin_object();
  j.key("engine_version").value(FGM_VERSION);
  j.key("solver").value(std::string(solver));
  write_partitioned_data_section(j, dir, run.manifest);
  write_config_section(j, config);
  write_distributed_section(j, run, ranks, class_labels);
}

std::unique_ptr<ResumeSession> open_rank0_session(const Config& config, Communicator& comm, std::string_view command,
                                                  const std::string& final_output, bool restart, MemoryBudget& budget) {
  if (comm.rank() != 0) return nullptr;
  return std::make_unique<ResumeSession>(config.get_string("output.dir"),
                                         partitioned_run_identity(config, comm.size(), command), restart,
                                         final_output, budget);
}

std::optional<ResumeCheckpoint> shared_checkpoint(Communicator& comm, ResumeSession* session,
                                                  const std::string& out_dir, MemoryBudget& budget) {
  int32_t resuming = session && session->resuming() ? 1 : 0;
  comm.broadcast(&resuming, sizeof resuming, 0);
  if (!resuming) return std::nullopt;
  if (session) {
    ResumeCheckpoint saved;
    saved.path = std::move(*session->path());
    if (TrainProgress* train = session->train()) saved.train = std::move(*train);
    return saved;
  }
  return read_checkpoint((std::filesystem::path(out_dir) / kCheckpointFileName).string(), budget);
}

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

RunIdentity partitioned_run_identity(const Config& config, int ranks, std::string_view command) {
  const std::string dir = config.get_string("data.train");
  RunIdentity identity =
      store_run_identity(config, command, partitioned_store_identity(dir, read_partition_manifest(dir)));
  identity.config[kRanksIdentityKey] = std::to_string(ranks);
  return identity;
}

namespace {

// run.json of a binary model: the single-store keys.
void write_binary_run(JsonWriter& j, const DistributedOutcome& o) {
  j.key("iterations").begin_array();
  for (const auto& r : o.iterations) write_iteration(j, r);
  j.end_array();
  j.key("stop_reason").value(o.stop_reason);
  j.key("iterations_restored").value(o.iterations_restored);
  j.key("objective_no_features").value(o.objective_no_features);
  j.key("final_sip_violation").value(o.final_sip_violation);
  write_selected_features(j, o.model.features, o.model.index_base);
  j.key("bias").value(o.model.bias);
}

}  // namespace

void reject_transform_and_truth_on_partitions(const Config& config, std::string_view solver) {
  auto refuse = [&](const char* key, const char* what) {
    throw Error(ErrorKind::kConfig, fmt::format("{}: {} is not supported with solver = {} on a partitioned store "
                                                "yet (docs/distributed.md lists what is distributed)",
                                                key, what, solver));
  };
  if (!config.get_string_list("features.transform").empty()) refuse("features.transform", "a feature transform");
  if (!config.get_string("data.truth").empty()) refuse("data.truth", "truth recovery");
}

unsigned allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  return static_cast<unsigned>(CPU_COUNT(&set));
}

void warn_if_threads_exceed_affinity(int threads, const Communicator& comm, RunWarnings& warnings) {
  const unsigned cpus = allowed_cpus();
  if (cpus == 0 || threads <= static_cast<int>(cpus)) return;
  const std::string rank = comm.size() > 1 ? fmt::format("rank {} of {}: ", comm.rank(), comm.size()) : "";
  warnings.add("threads_exceed_cpu_affinity",
               fmt::format("{}engine.threads = {} but this process may run on {} CPU(s) only (its CPU affinity), so "
                           "the extra threads share those CPUs (TBB limits itself to them). mpirun binds each rank "
                           "to one core by default: run mpirun --bind-to none, or mpirun --map-by slot:PE={} to give "
                           "each rank {} cores; under Slurm set --cpus-per-task={} (or lower engine.threads to {})",
                           rank, threads, cpus, threads, threads, threads, cpus));
}

void require_partitioned_store(const Config& config, const Communicator& comm) {
  reject_partitioned_store_mismatch(config);
  if (comm.size() == 1 || is_partitioned_store(config.get_string("data.train"))) return;
  throw Error(ErrorKind::kConfig,
              fmt::format("data.train = {} is not a partitioned store, and this run has {} ranks: ingest it with "
                          "fgm ingest INPUT --out STORE --partitions {} and set data.train = STORE "
                          "(docs/distributed.md)",
                          config.get_string("data.train"), comm.size(), comm.size()));
}

int train_partitioned(const Config& config, const TrainSettings& settings, MemoryBudget& budget, Communicator& comm,
                      bool restart, RunWarnings& warnings) {
  warn_if_threads_exceed_affinity(settings.scheduler.threads, comm, warnings);
  // Each solver's partitioned run checks that every rank has its configuration (one collective).
  switch (solver_from_config(config)) {
    case SolverKind::kSifs:
      return train_sifs_partitioned(config, budget, comm, restart, warnings);
    case SolverKind::kExclusive:
      return train_exclusive_partitioned(config, budget, comm, restart, warnings);
    case SolverKind::kMslr:
      return train_mslr_partitioned(config, budget, comm, restart, warnings);
    case SolverKind::kPnormKta:
      return train_pnorm_kta_partitioned(config, budget, comm, restart, warnings);
    case SolverKind::kFgm:
      break;
  }
  check_same_configuration(comm, config);
  const std::string dir = config.get_string("data.train");
  const std::string out_dir = config.get_string("output.dir");
  // Rank 0 alone opens the resume session (output.dir, its lock, the
  // checkpoint); it tells the others whether it resumes, and they read the
  // same checkpoint file (output.dir is on a file system all ranks share,
  // like the store).
  if (comm.rank() == 0) refuse_other_rank_count(out_dir, restart, comm.size(), budget);
  std::unique_ptr<ResumeSession> session = open_rank0_session(config, comm, "train", "model.fgm", restart, budget);
  std::optional<ResumeCheckpoint> saved = shared_checkpoint(comm, session.get(), out_dir, budget);
  if (saved && !saved->train) throw Error(ErrorKind::kCorruption, "checkpoint of rank 0 has no training state");
  if (saved && session)
    spdlog::info("{}", msg::resuming_from(session->file(), saved->train->iterations.size() + 1,
                                          fmt::format("at most {} (fgm.max_iterations)", settings.max_iterations),
                                          saved->train->apg.w.size()));
  if (comm.rank() == 0)
    spdlog::info("training on partitioned store {} with {} rank(s), B={}, C={}, loss={}, threads={}", dir,
                 comm.size(), settings.B, settings.apg.C, loss_name(settings.apg.loss), settings.apg.threads);
  DistributedHooks hooks;
  if (saved) hooks.resume = &*saved->train;
  if (session) hooks.on_progress = [&](const TrainProgress& progress) { session->save(&progress, nullptr); };
  DistributedOutcome outcome =
      train_fgm_distributed(comm, dir, settings, budget, hooks, config.get_string_list("features.transform"));
  outcome.model.config = config.dump();
  const std::vector<RankResources> ranks = gather_rank_resources(comm, outcome.budget_peak);
  if (comm.rank() != 0) return 0;
  const bool multiclass = !outcome.classes.empty();
  if (!multiclass)
    spdlog::info("stopped: {} after {} iterations, {} features", outcome.stop_reason, outcome.iterations.size(),
                 outcome.model.features.size());
  const std::vector<ModelFeature> selected = all_features(outcome.model);
  // data.test passed its syntax pass before training; if evaluating it fails, the model is kept.
  const ModelResults results = score_and_write_model(config, outcome.model, &selected, budget, warnings);
  JsonWriter j;
  begin_partitioned_run_json(j, "fgm", dir, outcome.model.config, outcome, ranks, outcome.class_labels);
  if (multiclass) {
    uint64_t passes = 0;
    for (const auto& r : outcome.communication) passes += r.phase == "scoring";
    write_one_vs_rest_runs(j, outcome.classes, outcome.class_labels, outcome.class_rows, outcome.model.index_base,
                           results.test_or_null(), outcome.lockstep, passes);
  } else {
    write_binary_run(j, outcome);
  }
  j.key("objective").value(outcome.model.objective);
  j.key("total_bytes_streamed").value(outcome.total_bytes_streamed);
  j.key("seconds").value(outcome.seconds);
  finish_run(j, budget, outcome.budget_peak, outcome.seconds, 0.0, config, results, warnings, out_dir, *session);
  print_truth(results, true);
  if (multiclass)
    fmt::print("classes={} selected={}", outcome.model.classes.size(), selected.size());
  else
    fmt::print("selected={} iterations={}", outcome.model.features.size(), outcome.iterations.size());
  fmt::print(" objective={:.6g} ranks={}", outcome.model.objective, comm.size());
  print_test_and_model(results, out_dir);
  return 0;
}

}  // namespace fgm::cli
