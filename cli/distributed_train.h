// fgm train on a partitioned store (io/partitioned_store.h), with or without
// mpirun: engine/distributed_fgm.h over the world communicator; rank 0 writes
// model.fgm, run.json (with the communication of every phase and every
// rank's peak RSS), the report and the resume checkpoints (every rank reads
// the same checkpoint to resume; a checkpoint of another rank count is refused).
#pragma once

#include <vector>

#include "core/communicator.h"
#include "core/json_writer.h"
#include "core/config.h"
#include "core/memory_budget.h"
#include "core/run_warnings.h"
#include "engine/distributed_fgm.h"
#include "engine/fgm_trainer.h"
#include "io/partitioned_store.h"

namespace fgm::cli {

// `restart`: --restart (discard output.dir's checkpoint).
int train_partitioned(const Config& config, const TrainSettings& settings, MemoryBudget& budget, Communicator& comm,
                      bool restart, RunWarnings& warnings);

// Under mpirun with more than one rank, data.train must be a partitioned
// store: throws Error(kConfig) saying how to make one otherwise.
void require_partitioned_store(const Config& config, const Communicator& comm);

// Shared with the other solvers' partitioned runs (cli/mslr_command.cpp).
// Every rank must train the same thing: the first rank whose configuration
// differs (engine.threads and engine.memory_budget aside) is named.
void check_same_config_on_all_ranks(const Config& config, Communicator& comm);
// A rank's peak RSS and budget peak, gathered from every rank (a collective).
struct RankResources {
  uint64_t peak_rss_bytes = 0, budget_peak_bytes = 0;
};
std::vector<RankResources> gather_rank_resources(Communicator& comm, uint64_t budget_peak);
// run.json's "data" of a partitioned store: its directory, shape, partitions, input checksum.
void write_partitioned_data_section(JsonWriter& j, const std::string& dir, const PartitionManifest& manifest);
// run.json's "distributed": ranks, partitions, every rank's memory, and the
// communication of every phase of every outer iteration (on rank 0).
void write_distributed_section(JsonWriter& j, int ranks, const PartitionManifest& manifest,
                               uint32_t partitions_per_rank, const std::vector<CommunicationRecord>& communication,
                               const std::vector<RankResources>& rank_resources);

// fgm train with solver = "mslr" on a partitioned store (cli/mslr_command.cpp).
int train_mslr_partitioned(const Config& config, MemoryBudget& budget, Communicator& comm, bool restart,
                           RunWarnings& warnings);

}  // namespace fgm::cli
