// The FGM outer loop (Tan, Tsang, Wang, JMLR 2014, Algorithm 1): a cutting-
// plane method on the SIP reformulation of ℓ0-constrained SVM/LR. Each outer
// iteration streams the store once (worst-case analysis, Algorithm 2), adds the
// B most violating features (or groups) to the selected-feature cache, and
// solves the ℓ2,1²-regularised subproblem (31) over them by APG (Algorithm 4),
// warm-started. α⁰ = C·1 without a bias; with one (FGM-SHIFT), α⁰ comes from the
// fitted bias-only model (engine/fgm_loop.cpp FgmRows). α^t from Theorem 3.
// Stops when the SIP violation (37) of α^t is at most eps_outer times the
// objective F_t (eps_outer = 0: never), after T iterations, or when the
// worst-case analysis finds nothing new. The violation is the gap of the
// cutting-plane relaxation (the new batch's ½‖c‖² over the best selected
// batch's, which at the subproblem's optimum is ½(Σ_h‖ω_h‖)²), so the test is
// a relative gap and does not depend on the scale of the data, unlike the
// paper's (38), which badly scaled data (tiny APG steps) satisfied at once.
// Warnings for badly scaled data go to settings.warnings: a feature value span
// above kValueSpanLimit (first scoring pass), a first solve that lowers F_0 by
// less than kFirstSolveLimit, and a final model at chance level on its
// training rows.
// After every outer iteration the run's TrainProgress is handed out (for the
// resume checkpoint, engine/resume_checkpoint.h); a run given one continues
// from it exactly.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/run_warnings.h"
#include "features/block_stream.h"
#include "features/feature_space.h"
#include "io/model_file.h"
#include "io/shard_store.h"
#include "solvers/apg.h"

namespace fgm {

// How `fgm train` streams a store for its scoring passes. A store whose
// resident copy (resident_store_bytes) fits in half of what the budget has
// left stays in memory between passes; the block target (engine.block_bytes,
// smaller under a small budget; about 16 bytes per row when larger, up to a
// 16th of the budget for a resident store, a 32nd for a streamed one) is the
// unit of one parallel task. Exposed for bench/.
bool keeps_store_resident(const StoreInfo& info, const MemoryBudget& budget);
// When keeps_store_resident: reserves what the resident stream may hold
// (resident_store_bytes, not just the shard bytes) and sets
// scheduler.keep_resident; else an empty reservation. The one place every
// resident stream (FGM, lockstep, MSLR, SIFS, each own partition) reserves.
Reservation reserve_resident_store(const StoreInfo& info, MemoryBudget& budget, SchedulerOptions& scheduler);
uint64_t scoring_block_bytes(uint64_t block_bytes, const MemoryBudget& budget, uint64_t n_rows, bool resident);

struct TrainSettings {
  uint64_t B = 10;
  int max_iterations = 10;
  double eps_outer = 1e-3;         // relative SIP violation stop (0: off)
  bool final_certificate = true;
  ApgOptions apg;                  // loss, C, bias, eps_inner, eta, threads
  SchedulerOptions scheduler;      // threads, blocks in flight, progress
  uint64_t block_bytes = 4 << 20;  // scoring block target
  FeatureSpaceSettings space;      // what the worst-case analysis searches
  // 0: no cap; else stop once this many selection units are selected — features
  // (linear, poly2) or groups (group, hik, additive); the last batch is shortened.
  uint64_t max_features = 0;
  // Selection-unit counts (as max_features) at which a snapshot is taken (fgm
  // path). The batch before a checkpoint is shortened so the count lands on it
  // exactly. Increasing.
  std::vector<uint64_t> checkpoints;
  // Training labels, n entries: ±1, or 0 for a row left out of this fit (a
  // cross-validation fold, one-vs-rest relabelling). Null: the store's labels.
  // The rows' α is 0, so they add nothing to scores, objective or gradients.
  const int8_t* labels = nullptr;
  // Warn (chance_level_model) when the final model's training accuracy is no
  // better than the majority class. One-vs-rest turns it off for its class
  // runs and checks the multi-class model instead.
  bool check_chance_level = true;
  // Where the run's warnings go (APG non-convergence, ...); null: logged only.
  RunWarnings* warnings = nullptr;
};

// The outer stop rules after an iteration's solve, in their one order ("" to
// go on): `selected_units` reached max_features (0: no cap), then the last of
// `checkpoints` (a path's end), then `iterations` reached max_iterations.
// The one definition for FGM on one store and on partitions, and for MSLR on
// both (its mslr.* counterparts), so their stop_reason cannot drift apart.
std::string outer_stop_rule(uint64_t max_features, const std::vector<uint64_t>& checkpoints, int max_iterations,
                            uint64_t selected_units, int iterations);

struct IterationRecord {
  int iter = 0;
  uint64_t selected = 0;          // features in the model after this iteration
  uint64_t added = 0;             // features added by this iteration
  double objective = 0;           // F(ω_t, b_t) of (31)
  double rel_decrease = 0;        // (38): (F_{t-1} - F_t) / F_0
  double sip_violation = 0;       // (37) for α^{t-1}: f(α, d_t) - max_{h<t} f(α, d_h)
  double score_seconds = 0;
  double solve_seconds = 0;
  uint64_t bytes_streamed = 0;
  uint64_t peak_rss_bytes = 0;
  uint64_t candidates_scored = 0;  // generated features (or groups) scored by this pass
  uint64_t pair_updates = 0;
  int apg_iterations = 0;
  int apg_line_search_steps = 0;
  int apg_gradient_evaluations = 0;
  // A certified solve (apg_certified: the run's final solve, a path point)
  // is "converged" only with apg_relative_gap ≤ apg.gap_tolerance; an
  // intermediate solve that met apg.eps_inner (proximal Newton:
  // apg.intermediate_gap) is "inexact". Either may end at
  // "max_iterations" or "stalled" (a warning).
  bool apg_converged = false;     // apg_stop == "converged"
  bool apg_certified = false;
  double apg_relative_gap = 0;    // certified (F − D)/F of this solve (solvers/apg.h)
  std::string apg_stop;           // "converged", "inexact", "max_iterations" or "stalled"
  uint64_t apg_recomputed_products = 0;  // inner-product cache misses (the budget had no room)
};

struct TrainOutcome {
  Model model;
  std::vector<IterationRecord> iterations;
  std::string stop_reason;  // "eps_outer", "max_iterations", "no_new_features", ...
  double final_sip_violation = std::numeric_limits<double>::quiet_NaN();
  double objective_no_features = 0;  // F_0
  uint64_t total_apg_iterations = 0;
  uint64_t total_line_search_steps = 0;
  uint64_t total_gradient_evaluations = 0;
  uint64_t total_bytes_streamed = 0;
  // Streams over the store this run made by itself (0 when a lockstep driver
  // streamed for it): outer iterations, the pass that ended the loop, the
  // final certificate. Not restored from a checkpoint.
  uint64_t scoring_passes = 0;
  double seconds = 0;
  uint64_t budget_peak = 0;
  // Scaling diagnostics (the warnings' inputs).
  double value_span = 0;          // largest / median per-column max |value|, to the space's degree
  double train_accuracy = 0;      // final model on the rows of this fit (decision > 0 → +1)
  double majority_rate = 0;       // the larger class's share of those rows
};

// A final model's training accuracy (`correct` of `rows`) and the largest
// class's share; true when it does no better (chance_level_model). Shared by
// binary and one-vs-rest runs on one store and on partitions (tree-summed counts).
bool at_chance_level(double rows, double correct, double largest_class, double& train_accuracy,
                     double& majority_rate);

// Warning thresholds (see the header comment; chosen in bench/README.md).
constexpr double kValueSpanLimit = 1e4;
constexpr double kFirstSolveLimit = 1e-3;

// The state of the run when a checkpoint count is reached (a `fgm path`
// point; not the resume checkpoint, which stores a TrainProgress).
struct Checkpoint {
  uint64_t features = 0;          // the checkpoint (selection units, as max_features)
  Model model;                    // the model at this point
  const IterationRecord* last = nullptr;
  double seconds = 0;             // since the start of train_fgm
  uint64_t apg_iterations = 0;    // cumulative APG work so far
  uint64_t line_search_steps = 0;
  uint64_t gradient_evaluations = 0;
  // This process's rows of the selected columns (one part on one store, a
  // rank's partitions) and their row-sum reduction, for refits on the
  // selected features (engine/debias.h), which use their own decision values.
  std::vector<ApgRowPart> rows;
  class RowSumReduction* reduction = nullptr;
};

// Everything the next outer iteration reads, after iteration
// `iterations.size()`: a run restored from it continues exactly as the
// uninterrupted run would (engine/resume_checkpoint.h stores it on disk).
struct TrainProgress {
  // Candidate ids (FeatureSpace ids) selected by each outer iteration, in
  // selection order: replaying mark_selected + materialize rebuilds the
  // space's exclusions and the selected-feature cache column for column.
  std::vector<std::vector<uint64_t>> batches;
  ApgState apg;                       // ω (cache order), b, L_t; α^t is formed again from them
  std::vector<IterationRecord> iterations;
  std::string stop_reason;            // set when the last iteration ended the loop
  // fgm path bookkeeping: index of the next feature-count checkpoint and the
  // feature count at the last one emitted.
  uint64_t next_path_point = 0;
  uint64_t last_path_point_features = 0;
  uint64_t total_apg_iterations = 0;
  uint64_t total_line_search_steps = 0;
  uint64_t total_gradient_evaluations = 0;
  uint64_t total_bytes_streamed = 0;
};

using IterationCallback = std::function<void(const IterationRecord&)>;
using CheckpointCallback = std::function<void(const Checkpoint&)>;
using ProgressCallback = std::function<void(const TrainProgress&)>;

struct TrainHooks {
  IterationCallback on_iteration;    // after each outer iteration, for logs
  CheckpointCallback on_checkpoint;  // at each of settings.checkpoints (fgm path)
  CheckpointCallback on_final;       // at the end of the run, its final state
  // After each outer iteration, once its path point (if any) was emitted and
  // the stop decision was taken: the state to persist for a resume.
  ProgressCallback on_progress;
  // At the end of the run: the final model's decision values d = w'x − b of
  // part q's rows (one store: part 0, n entries; partitions: each own
  // partition, empty for the empty model: all 0).
  std::function<void(size_t q, const std::vector<double>& d)> on_final_decision;
  // Start from this state instead of from scratch (it must come from a run of
  // the same settings on the same store). Moved from.
  TrainProgress* resume = nullptr;
};

TrainOutcome train_fgm(const ShardStore& store, const TrainSettings& settings, MemoryBudget& budget,
                       const TrainHooks& hooks = {});

}  // namespace fgm
