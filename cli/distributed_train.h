// What runs on a partitioned store (io/partitioned_store.h), with or without
// mpirun, share: rank 0's resume session and the rank-count check, the ranks'
// resources, run.json's "data" and "distributed" sections, the same-config
// check. The runner (cli/runner.h) and the solvers' partitioned paths use them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/resume.h"
#include "core/communicator.h"
#include "core/config.h"
#include "core/json_writer.h"
#include "core/memory_budget.h"
#include "core/run_warnings.h"
#include "engine/distributed_fgm.h"
#include "engine/fgm_trainer.h"
#include "io/partitioned_store.h"

namespace fgm::cli {

// The refusal of a checkpoint in `out_dir` written by a run on another
// number of ranks (rank 0, before its resume session reads the checkpoint).
void refuse_other_rank_count(const std::string& out_dir, bool restart, int ranks, MemoryBudget& budget);

// The ranks' peak RSS and budget peaks (a collective: every rank calls it).
struct RankResources {
  uint64_t peak_rss_bytes = 0, budget_peak_bytes = 0;
};
std::vector<RankResources> gather_rank_resources(Communicator& comm, uint64_t budget_peak);

// run.json's "distributed": ranks, partitions, every rank's memory, and the
// communication of every phase of every outer iteration (on rank 0).
// `class_labels`: as write_communication_records.
void write_distributed_section(JsonWriter& j, const PartitionedRun& run, const std::vector<RankResources>& ranks,
                               const std::vector<double>& class_labels = {});

// run.json's "data" of a partitioned store.
void write_partitioned_data_section(JsonWriter& j, const std::string& dir, const PartitionManifest& manifest);
// The resume identity of `command` (train, path) on `ranks` ranks of the partitioned store data.train.
RunIdentity partitioned_run_identity(const Config& config, int ranks, std::string_view command = "train");

// The checkpoint a run resumes from, on every rank (a single store: one): rank 0's
// session (opened by the runner) decides and tells the others, which read the
// same file (output.dir is on a file system all ranks share, like the
// store). Empty: start from scratch.
std::optional<ResumeCheckpoint> shared_checkpoint(Communicator& comm, ResumeSession* session,
                                                  const std::string& out_dir, MemoryBudget& budget);

// Every rank must run the same thing: the configuration (but engine.threads
// and engine.memory_budget) is compared across ranks, and the first rank that
// differs is named (a collective).
void check_same_configuration(Communicator& comm, const Config& config);

// A JSON array of communication records (run.json's and path.json's "passes").
// `class_labels`: one-vs-rest runs' labels, named by the records' class_index.
void write_communication_records(JsonWriter& j, const std::vector<CommunicationRecord>& records,
                                 const std::vector<double>& class_labels = {});

// Under mpirun with more than one rank, data.train must be a partitioned
// store: throws Error(kConfig) saying how to make one otherwise. A partitioned
// store meets the single store's data.index_base / data.features checks
// (reject_partitioned_store_mismatch). Called by fgm train and fgm path
// before any partitioned run, whatever the solver.
void require_partitioned_store(const Config& config, const Communicator& comm);

// Warns (log and run.json's warnings, code "threads_exceed_cpu_affinity")
// when engine.threads asks for more threads than this process may run on:
// under mpirun's default binding each rank is bound to one core, and TBB
// then runs on one thread whatever engine.threads says.
void warn_if_threads_exceed_affinity(int threads, const Communicator& comm, RunWarnings& warnings);

}  // namespace fgm::cli
