#include "cli/distributed_train.h"

#include <sched.h>

#include <cstring>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "cli/resume.h"
#include "cli/run_output.h"
#include "cli/runner.h"
#include "core/hash.h"
#include "core/error.h"
#include "core/json_writer.h"
#include "engine/distributed_fgm.h"
#include "engine/train_settings.h"
#include "io/partitioned_store.h"

namespace fgm::cli {
namespace {

// The rank count in a distributed run's checkpoint identity: resuming on
// another count is refused.
constexpr const char* kRanksIdentityKey = "ranks (mpirun -np)";

// The CPUs this process may run on (sched_getaffinity); 0 when unknown.
}  // namespace

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

}  // namespace fgm::cli
