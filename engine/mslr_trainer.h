// The MSLR outer loop (Tan, Tsang, Wang, "Minimax sparse logistic regression
// for very high-dimensional feature selection", TNNLS 2013, Algorithm 1): a
// cutting-plane method on the SIP (7). Iteration t finds the most active
// constraint d^t of (8) — the r features with the largest c_j² =
// (Σ_i α_i y_i x_ij)² — and solves the minimax subproblem (9) over
// d^1..d^t (solvers/mslr/smoothed_minimax.h), warm-started from α.
//
// The most active constraint is exact: the streamed worst-case analysis
// (features/feature_space.h, the FGM scoring pass) gives the top-r features
// not selected yet, and the selected ones' c_j come from the selected-feature
// cache with the same summation; d^t is the top r of both (ties: smaller
// candidate id). So d^t may repeat selected features (the paper allows it) and
// adds at most r new ones. α starts at min(1, C/2) (ERRATA 001: the paper's
// α = 1 lies outside (0, C) when C ≤ 1). No bias.
//
// The subproblem is solved by the primal proximal Newton method of
// solvers/mslr/latent_newton.h (default) or by the paper's smoothing method.
//
// Stops (stop_reason): "eps_outer" when the SIP violation of the last α,
// ½Σ_{j∈d^t} c_j² − max_s ½‖w^s‖², is at most eps_outer times the last
// subproblem's objective P; "no_new_constraint" when d^t adds nothing (no
// feature with c_j ≠ 0, or d^t equals a constraint already held);
// "max_features" / "last_checkpoint" when the feature count reaches
// max_features or the last path checkpoint (the constraint that reaches it
// admits only as many new features as fit; the rest of it is the best
// selected ones, still a valid cutting plane); "max_iterations" after T_m.
//
// The model: weights d̄_j c_j (d̄ = Σ_t μ_t d^t) on the selected features,
// loss "logistic", no bias. The store is streamed once per iteration within
// the memory budget, as for FGM; the subproblem runs sequentially, so the
// result is the same for any thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/memory_budget.h"
#include "core/run_warnings.h"
#include "engine/own_partitions.h"
#include "features/block_stream.h"
#include "features/feature_space.h"
#include "io/model_file.h"
#include "io/shard_store.h"
#include "solvers/mslr/latent_newton.h"
#include "solvers/mslr/smoothed_minimax.h"

namespace fgm {

struct MslrState;

struct MslrSettings {
  uint64_t r = 10;                 // features per constraint (the paper's r, FGM's B)
  int max_iterations = 10;         // T_m
  double eps_outer = 1e-3;         // relative SIP violation stop (0: off)
  uint64_t max_features = 0;       // 0: no cap
  std::vector<uint64_t> checkpoints;  // feature counts at which a path point is taken (increasing)
  mslr::MinimaxOptions minimax;    // C, q0, q_factor, q_max, tolerances
  // How the subproblem is solved: the primal proximal Newton method
  // (solvers/mslr/latent_newton.h) or the paper's smoothing coordinate
  // descent (solvers/mslr/smoothed_minimax.h); the same problem and certificate.
  bool smoothing = false;
  mslr::LatentNewtonOptions newton;
  SchedulerOptions scheduler;
  uint64_t block_bytes = 4 << 20;
  FeatureSpaceSettings space;      // kind "linear" only
  RunWarnings* warnings = nullptr;
  const MslrState* resume = nullptr;  // continue a run from its last completed iteration
};

struct MslrIteration {
  int iter = 0;
  uint64_t selected = 0;       // features in the model after this iteration
  uint64_t added = 0;          // new features this iteration's constraint brought
  uint64_t constraint_size = 0;  // |d^t|
  double sip_violation = 0;    // of the α before this iteration (absolute)
  double objective = 0;        // P of the subproblem's model
  double dual = 0;             // D(α) (≤ P)
  double relative_gap = 0;     // (P − D)/P
  double q = 0;                // last smoothing parameter
  int stages = 0, sweeps = 0;
  uint64_t newton_steps = 0, bisections = 0;
  bool converged = false;
  std::vector<double> mu;      // the constraints' weights
  double score_seconds = 0, solve_seconds = 0;
  uint64_t bytes_streamed = 0;
  uint64_t peak_rss_bytes = 0;
};

struct MslrOutcome {
  Model model;
  std::vector<MslrIteration> iterations;
  std::string stop_reason;
  double final_sip_violation = 0;  // of the final α, when the loop measured it
  double objective_no_features = 0;  // P at w = 0: C·ln 2 per row of the fit
  uint64_t scoring_passes = 0;
  uint64_t total_bytes_streamed = 0;
  double seconds = 0;
  uint64_t budget_peak = 0;
};

struct MslrCheckpoint {
  uint64_t features = 0;
  Model model;
  const MslrIteration* last = nullptr;
  double seconds = 0;
};

// What the next cutting-plane iteration reads, after a completed one: a
// resumed run restores it and repeats the uninterrupted run's arithmetic
// exactly (α and C − α are stored themselves, not recomputed), so it ends
// with the same model bit for bit.
struct MslrState {
  std::vector<std::vector<uint64_t>> batches;      // candidate ids per cache batch (one per iteration)
  std::vector<std::vector<uint64_t>> constraints;  // cache positions of d^1..d^t
  std::vector<double> alpha, beta;                 // α and C − α
  std::vector<double> weights;                     // the last subproblem's model per cache column
  double last_objective = 0;
  uint64_t next_checkpoint = 0;
  std::vector<MslrIteration> iterations;
  std::string stop_reason;  // non-empty: the loop had ended
  double final_sip_violation = 0;
  uint64_t scoring_passes = 0, total_bytes_streamed = 0;
  double seconds = 0;       // elapsed before the interruption
};

// A point of fgm path already taken, saved with the state: the iteration
// that reached it, its elapsed time and its model file (io/model_file.h).
struct MslrSavedPoint {
  uint64_t iteration = 0;
  double seconds = 0;
  std::string model;
};

// A FlatBuffer (io/schema/mslr_checkpoint.fbs) for Checkpoint.solver_state;
// the checkpoint file around it carries the checksum and the run identity.
// A partitioned run splits the state: kShared (without α and C − α) for
// rank 0's checkpoint, kDuals (α and C − α of the rank's rows, nothing
// else) for each rank's file (engine/resume_checkpoint.h rank_checkpoint_file).
enum class MslrStatePart { kWhole, kShared, kDuals };
std::string encode_mslr_state(const MslrState& state, const std::vector<MslrSavedPoint>& points = {},
                              MslrStatePart part = MslrStatePart::kWhole);
// Throws Error(kCorruption) naming `file` if `bytes` is not a state of this
// format (an earlier fgm's hand-rolled MSLR state is named as such).
// `points`: if set, receives the saved path points.
MslrState decode_mslr_state(const std::string& bytes, const std::string& file,
                            std::vector<MslrSavedPoint>* points = nullptr);

struct MslrHooks {
  std::function<void(const MslrIteration&)> on_iteration;
  std::function<void(const MslrCheckpoint&)> on_checkpoint;
  // After every completed iteration (and its checkpoint): the state to resume from.
  std::function<void(const MslrState&)> on_state;
};

// The loop on one store.
MslrOutcome train_mslr(const ShardStore& store, const MslrSettings& settings, MemoryBudget& budget,
                       const MslrHooks& hooks = {});

// The loop on a partitioned store (io/partitioned_store.h), data-parallel
// over the ranks of `comm` (docs/distributed.md, "MSLR"), a collective. Each
// rank opens only its own partitions (engine/own_partitions.h); α and C − α
// stay with their rows. Per iteration: c = Σ_i α_i y_i x_i by column ranges
// (FGM's linear pass: sparse partition-tree sums, one allgather); each rank
// reads its rows of the new columns; the subproblem over the rank's
// partitions as row parts, every row sum reduced in the partition tree. The
// model depends on the partition count P, not on the rank count or
// engine.threads; with P = 1 it is the single store's. Binary labels. The
// hooks run on every rank; hooks.on_state's state holds α and C − α of this
// rank's rows only (its partitions in order), and a resumed run takes the
// same (settings.resume) on the same rank count. `run` records this rank's
// communication per phase and iteration.
MslrOutcome train_mslr_partitions(Communicator& comm, const std::string& dir, const MslrSettings& settings,
                                  MemoryBudget& budget, const MslrHooks& hooks, PartitionedRun& run);

}  // namespace fgm
