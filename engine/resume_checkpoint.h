// Resume checkpoints of `fgm train` and `fgm path`: <output.dir>/checkpoint.fgm,
// rewritten atomically (temporary name, fsync, rename) after every outer
// iteration with what the next iteration reads (io/schema/checkpoint.fbs):
// the selected candidates per batch, ω, b, L_t, the iteration log, the path
// points already emitted, and the identity of the run (command, engine
// version, the config keys that decide the result, the store checksum).
//
// Design decisions:
//  * α is not stored (the schema's `alpha` stays empty; one written by an
//    older fgm is not read): on either backend it is formed again from ω
//    exactly as the solve formed it (engine/fgm_loop.h FgmRows::restore_duals),
//    so a resumed run repeats the uninterrupted run's arithmetic bit for bit,
//    and the file does not grow with the rows.
//  * A checkpoint that fails verification (magic, length, checksum,
//    FlatBuffer, version) is an error (exit 5 naming the file, remedy
//    --restart), never silently replaced: the writes are atomic, so a crash
//    cannot produce one — a bad checkpoint means damage worth reporting.
//  * A checkpoint of another run (command, engine version, result keys or
//    store) is refused (exit 2) naming every difference; --restart discards it.
//  * A successful run removes its checkpoint after writing its outputs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/memory_budget.h"
#include "engine/fgm_path.h"
#include "engine/fgm_trainer.h"

namespace fgm {

inline constexpr uint32_t kCheckpointFormatVersion = 1;
inline constexpr const char* kCheckpointFileName = "checkpoint.fgm";

// What a checkpoint must share with the run that wants to resume it.
struct RunIdentity {
  std::string command;  // "train" or "path"
  std::string engine_version = FGM_VERSION;
  std::map<std::string, std::string> config;  // result_config() of the run's Config::dump()
  uint64_t store_checksum = 0;
};

// The state of a solver other than FGM (solver = "mslr", …), opaque to the
// checkpoint: the solver encodes and decodes `bytes` itself.
struct SolverState {
  std::string solver;  // the `solver` of the run that wrote it
  std::string bytes;
  // A partitioned run: the step whose rank files hold each rank's share of
  // the state (rank_checkpoint_file; 0: none).
  uint64_t rank_files_step = 0;
};

// A partitioned run keeps the state that stays with a rank's rows (MSLR's
// duals) out of checkpoint.fgm: each rank writes its share of step t as a
// checkpoint file of its own (same frame, checksum, version and identity),
// <out_dir>/checkpoint.rank-<r>.step-<t>.fgm, before rank 0 writes the
// checkpoint.fgm of step t that names it.
inline constexpr const char* kRankCheckpointPrefix = "checkpoint.rank-";
std::string rank_checkpoint_file(const std::string& out_dir, int rank, uint64_t step);

struct ResumeCheckpoint {
  RunIdentity identity;
  std::optional<TrainProgress> train;  // the FGM run in progress
  PathProgress path;                   // fgm path only
  std::optional<SolverState> solver;   // another solver's run in progress (train or path)
};

// False for the keys that cannot change the model, so may differ on resume:
// engine.threads, engine.blocks_in_flight (results do not depend on
// scheduling), engine.memory_budget (the model is the same under any budget
// that fits; a job killed for memory can be resumed with a different one),
// engine.progress, engine.cache_dir and output.dir (where things are kept),
// data.train (the store checksum identifies the data, wherever it lives),
// data.test, data.validation, data.truth (evaluated after selection; path
// points are re-evaluated on resume). Every other key is compared, including
// engine.block_bytes: nothing promises that block boundaries leave every sum
// in the same order.
bool key_affects_result(const std::string& key);
std::map<std::string, std::string> result_config(const std::map<std::string, std::string>& dump);

// Empty when `saved` may be resumed by `current`; else one entry per
// difference ("fgm.B: checkpoint 10, now 5", "store checksum …").
std::vector<std::string> identity_differences(const RunIdentity& saved, const RunIdentity& current);

// Atomic write. `train`, `path` and `solver` may be null. The encoding buffers are
// reserved from `budget`.
void write_checkpoint(const std::string& file, const RunIdentity& identity, const TrainProgress* train,
                      const PathProgress* path, MemoryBudget& budget, const SolverState* solver = nullptr);
// Throws Error(kCorruption) with msg::not_a_checkpoint if it fails verification.
ResumeCheckpoint read_checkpoint(const std::string& file, MemoryBudget& budget);

}  // namespace fgm
