#include "cli/distributed_train.h"

#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/resume.h"
#include "cli/run_output.h"
#include "core/hash.h"
#include "core/messages.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_writer.h"
#include "core/path_checks.h"
#include "engine/distributed_fgm.h"
#include "engine/evaluate.h"
#include "engine/solver_choice.h"
#include "io/partitioned_store.h"
#include "report/report_page.h"

namespace fgm::cli {
namespace {

// The rank count in a distributed run's checkpoint identity: resuming on
// another count is refused (refuse_other_rank_count says what to do).
constexpr const char* kRanksIdentityKey = "ranks (mpirun -np)";

// Settings the distributed trainer does not have yet: refused, naming the key.
void reject_unsupported(const Config& config, const TrainSettings& settings) {
  auto refuse = [&](const char* key, const std::string& why) {
    throw Error(ErrorKind::kConfig, fmt::format("{}: {} is not supported on a partitioned store yet "
                                                "(docs/distributed.md lists what is distributed)",
                                                key, why));
  };
  if (const SolverKind solver = solver_from_config(config); solver != SolverKind::kFgm && solver != SolverKind::kMslr)
    refuse("solver", "solver = " + std::string(solver_name(solver)));
  if (!config.get_string_list("features.transform").empty()) refuse("features.transform", "a feature transform");
  if (settings.max_features != 0) refuse("fgm.max_features", "a feature cap");
  if (!config.get_string("data.truth").empty()) refuse("data.truth", "truth recovery");
}

// The refusal of a checkpoint written by a run on another number of ranks,
// before the resume session reads it for everything else.
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

}  // namespace

void check_same_config_on_all_ranks(const Config& config, Communicator& comm) {
  std::string settings_text;
  for (const auto& [key, value] : config.dump())
    if (key != "engine.threads" && key != "engine.memory_budget") settings_text += key + "=" + value + "\n";
  check_same_on_all_ranks(comm, "configuration", settings_text);
}

std::vector<RankResources> gather_rank_resources(Communicator& comm, uint64_t budget_peak) {
  const RankResources mine{peak_rss_bytes(), budget_peak};
  const std::vector<uint8_t> all = comm.allgather(&mine, sizeof mine);
  std::vector<RankResources> out(all.size() / sizeof(RankResources));
  std::memcpy(out.data(), all.data(), out.size() * sizeof(RankResources));
  return out;
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

void write_distributed_section(JsonWriter& j, int ranks, const PartitionManifest& manifest,
                               uint32_t partitions_per_rank, const std::vector<CommunicationRecord>& communication,
                               const std::vector<RankResources>& rank_resources) {
  j.key("distributed").begin_object();
  j.key("ranks").value(ranks);
  j.key("partitions").value(static_cast<uint64_t>(manifest.partitions));
  j.key("partitions_per_rank").value(static_cast<uint64_t>(partitions_per_rank));
  j.key("rank_resources").begin_array();
  for (size_t r = 0; r < rank_resources.size(); ++r) {
    j.begin_object();
    j.key("rank").value(static_cast<uint64_t>(r));
    j.key("peak_rss_bytes").value(rank_resources[r].peak_rss_bytes);
    j.key("memory_budget_peak_bytes").value(rank_resources[r].budget_peak_bytes);
    j.end_object();
  }
  j.end_array();
  j.key("communication_of").value("rank 0: payload bytes sent plus received");
  j.key("passes").begin_array();
  for (const auto& c : communication) {
    j.begin_object();
    j.key("iter").value(c.iteration);
    j.key("phase").value(c.phase);
    j.key("bytes").value(c.comm.bytes);
    j.key("collectives").value(c.comm.calls);
    j.key("seconds").value(c.comm.seconds);
    j.end_object();
  }
  j.end_array();
  j.end_object();
}

void require_partitioned_store(const Config& config, const Communicator& comm) {
  if (comm.size() == 1 || is_partitioned_store(config.get_string("data.train"))) return;
  throw Error(ErrorKind::kConfig,
              fmt::format("data.train = {} is not a partitioned store, and this run has {} ranks: ingest it with "
                          "fgm ingest INPUT --out STORE --partitions {} and set data.train = STORE "
                          "(docs/distributed.md)",
                          config.get_string("data.train"), comm.size(), comm.size()));
}

int train_partitioned(const Config& config, const TrainSettings& settings, MemoryBudget& budget, Communicator& comm,
                      bool restart, RunWarnings& warnings) {
  reject_unsupported(config, settings);
  if (solver_from_config(config) == SolverKind::kMslr)
    return train_mslr_partitioned(config, budget, comm, restart, warnings);
  check_same_config_on_all_ranks(config, comm);
  const std::string dir = config.get_string("data.train");
  const std::string out_dir = config.get_string("output.dir");
  // Rank 0 alone opens the resume session (output.dir, its lock, the
  // checkpoint); it tells the others whether it resumes, and they read the
  // same checkpoint file (output.dir is on a file system all ranks share,
  // like the store).
  std::unique_ptr<ResumeSession> session;
  std::optional<TrainProgress> resume;
  int32_t resuming = 0;
  if (comm.rank() == 0) {
    RunIdentity identity;
    identity.command = "train";
    identity.config = result_config(config.dump());
    identity.config[kRanksIdentityKey] = std::to_string(comm.size());
    identity.store_checksum = read_partition_manifest(dir).input_checksum;
    refuse_other_rank_count(out_dir, restart, comm.size(), budget);
    session = std::make_unique<ResumeSession>(out_dir, identity, restart, "model.fgm", budget);
    if (TrainProgress* saved = session->train()) {
      resume = std::move(*saved);
      resuming = 1;
      spdlog::info("{}", msg::resuming_from(session->file(), resume->iterations.size() + 1,
                                            fmt::format("at most {} (fgm.max_iterations)", settings.max_iterations),
                                            resume->apg.w.size()));
    }
  }
  comm.broadcast(&resuming, sizeof resuming, 0);
  if (resuming && comm.rank() != 0) {
    ResumeCheckpoint saved = read_checkpoint((std::filesystem::path(out_dir) / kCheckpointFileName).string(), budget);
    if (!saved.train) throw Error(ErrorKind::kCorruption, "checkpoint of rank 0 has no training state");
    resume = std::move(*saved.train);
  }
  if (comm.rank() == 0)
    spdlog::info("training on partitioned store {} with {} rank(s), B={}, C={}, loss={}, threads={}", dir,
                 comm.size(), settings.B, settings.apg.C, loss_name(settings.apg.loss), settings.apg.threads);
  DistributedHooks hooks;
  if (resume) hooks.resume = &*resume;
  if (session) hooks.on_progress = [&](const TrainProgress& progress) { session->save(&progress, nullptr); };
  DistributedOutcome outcome = train_fgm_distributed(comm, dir, settings, budget, hooks);
  outcome.model.config = config.dump();
  const std::vector<RankResources> ranks = gather_rank_resources(comm, outcome.budget_peak);
  if (comm.rank() != 0) return 0;
  spdlog::info("stopped: {} after {} iterations, {} features", outcome.stop_reason, outcome.iterations.size(),
               outcome.model.features.size());
  // Evaluate before writing anything, so a bad test file leaves no output.
  const bool has_test = !config.get_string("data.test").empty();
  EvalResult test;
  if (has_test) test = evaluate_test_file(config, outcome.model, budget, warnings);
  create_output_directory(out_dir, "output.dir");
  write_model((std::filesystem::path(out_dir) / "model.fgm").string(), outcome.model);

  JsonWriter j;
  j.begin_object();
  j.key("engine_version").value(FGM_VERSION);
  j.key("solver").value("fgm");
  write_partitioned_data_section(j, dir, outcome.manifest);
  write_config_section(j, outcome.model.config);
  write_distributed_section(j, outcome.ranks, outcome.manifest, outcome.own_partitions, outcome.communication, ranks);
  j.key("iterations").begin_array();
  for (const auto& r : outcome.iterations) write_iteration(j, r);
  j.end_array();
  j.key("stop_reason").value(outcome.stop_reason);
  j.key("iterations_restored").value(outcome.iterations_restored);
  j.key("objective").value(outcome.model.objective);
  j.key("objective_no_features").value(outcome.objective_no_features);
  j.key("final_sip_violation").value(outcome.final_sip_violation);
  write_selected_features(j, outcome.model.features, outcome.model.index_base);
  j.key("bias").value(outcome.model.bias);
  j.key("total_bytes_streamed").value(outcome.total_bytes_streamed);
  j.key("seconds").value(outcome.seconds);
  finish_run(j, budget, outcome.budget_peak, outcome.seconds, 0.0, config, has_test ? &test : nullptr, nullptr,
             warnings, out_dir, *session);
  fmt::print("selected={} iterations={} objective={:.6g} ranks={}", outcome.model.features.size(),
             outcome.iterations.size(), outcome.model.objective, comm.size());
  if (has_test) fmt::print(" accuracy={:.4f} auc={:.4f}", test.accuracy, test.auc);
  fmt::print(" model={}/model.fgm\n", out_dir);
  return 0;
}

}  // namespace fgm::cli
