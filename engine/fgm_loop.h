// The one FGM outer loop (engine/fgm_trainer.h, Algorithm 1) over a data
// backend: the single store (engine/fgm_trainer.cpp) or this rank's
// partitions of a partitioned store (engine/distributed_fgm.cpp). The loop
// owns what does not depend on where the rows live: the stop rules, batch
// sizes, resume, path points, the model, the iteration records and the
// warnings. The backend owns the rows: their duals, the selected columns, the
// scoring pass and the solve with its row-sum reduction.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "cache/selected_features.h"
#include "engine/fgm_trainer.h"

namespace fgm {

// One scoring pass against the current duals α (Algorithm 2).
struct FgmPass {
  std::vector<ScoredCandidate> top;  // the best unselected candidates (empty: nothing new)
  Reservation top_memory;            // covers `top`
  double sip_violation = 0;          // (37) of α
  double seconds = 0;
  uint64_t bytes_streamed = 0, candidates_scored = 0, pair_updates = 0;
};

// A pass from a space's scores: its top-B and the SIP violation (37) of α,
// ½Σ_{j∈new} s_j − max_h ½Σ_{j∈d_h} c_j², with `selected_c` the c_j of the
// selected columns (cache order).
FgmPass scored_pass(SpaceScores scored, const SelectedFeatureCache& columns, const std::vector<double>& selected_c);

// The rows of a fit (y ≠ 0), the positive ones and those the decision values
// (empty: all 0) get right (d > 0 → +1), added to `counts`.
void count_fit(const int8_t* y, uint64_t n, const std::vector<double>& decision, double counts[3]);

class FgmRows {
 public:
  virtual ~FgmRows() = default;
  // F_0, the objective of (31) with no feature selected; with a bias, b is
  // fitted first (into `state`) and α⁰ comes from its decision values.
  virtual double fit_without_features(ApgState& state) = 0;
  // The top-`batch` unselected candidates against α, with (37).
  // `iteration` names the pass in the communication log.
  virtual FgmPass score(uint64_t batch, int iteration) = 0;
  // Marks the candidates selected and reads their columns as a new batch.
  virtual void add_batch(const std::vector<uint64_t>& ids) = 0;
  // (31) over the selected columns, warm-started at `state`; then α (Theorem 3).
  virtual ApgResult solve(const ApgOptions& apg, ApgState& state) = 0;
  // The selected columns on these rows (keys and batches for the model).
  virtual const SelectedFeatureCache& columns() const = 0;
  // A checkpoint's α entries: n for the single store, none for partitions
  // (α lives with its rows and is formed again from ω).
  virtual uint64_t saved_duals() const = 0;
  // α after a checkpoint's batches were replayed (`saved` holds ω).
  virtual void restore_duals(TrainProgress& saved) = 0;
  virtual void save_duals(TrainProgress&) const {}
  // The data's part of the model: store provenance and the space's description.
  virtual Model model_frame() const = 0;
  virtual void record_transforms(Model& model) const = 0;
  virtual void describe_point(Checkpoint&) {}
  // The final decision values to the caller's hook.
  virtual void hand_out_decisions() = 0;
  // count_fit over all rows; false when the decision values are unknown (a restored run).
  virtual bool chance_counts(double counts[3], int iteration) = 0;
  virtual double value_span() const = 0;
  // Whether this process adds the run's warnings (rank 0 of a partitioned run).
  virtual bool reports_warnings() const { return true; }
  // The communication log of a partitioned run: begin_phase, then
  // end_phase(iteration, name) records what the phase exchanged.
  virtual void begin_phase() {}
  virtual void end_phase(int iteration, const char* phase) {}
  virtual void after_iteration(const IterationRecord&) {}
};

// run() = begin(); outer iterations while iterating(); end_iterations(); the
// final certificate if needs_certificate(); finish(). An outer iteration is a
// scoring pass of batch_size() and after_scoring(): a lockstep driver makes
// one pass for several loops.
class FgmLoop {
 public:
  FgmLoop(FgmRows& rows, const TrainSettings& settings, MemoryBudget& budget, const TrainHooks& hooks);
  TrainOutcome run();

  void begin();
  bool iterating() const;
  uint64_t batch_size();
  int next_iteration() const { return static_cast<int>(progress_.iterations.size()) + 1; }
  bool after_scoring(FgmPass pass);  // false: the loop ended
  void end_iterations();
  bool needs_certificate() const;
  void record_certificate(const FgmPass& pass);
  TrainOutcome finish();
  uint64_t iterations_restored() const { return restored_; }

 private:
  void restore(TrainProgress& saved);
  uint64_t selected_units() const;
  std::string stop_reason(int t) const;
  bool solve_is_final(int t) const;
  void record_solve(const ApgResult& r, IterationRecord& rec);
  void polish_final_solve();
  void sum_apg_work(TrainProgress& totals) const;
  Model make_model() const;
  void emit_point(const CheckpointCallback& hook, uint64_t features);
  void check_chance_level();
  void warn_iteration_if_reporting(const IterationRecord& rec) const;

  FgmRows& rows_;
  const TrainSettings& settings_;
  MemoryBudget& budget_;
  const TrainHooks& hooks_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  TrainProgress progress_;
  TrainOutcome out_;
  double f0_ = 0, f_prev_ = 0;
  uint64_t restored_ = 0;
};

// Loops that differ only in their labels (one-vs-rest), advanced outer
// iteration by outer iteration together: each shared pass serves every loop
// still iterating or due its final certificate (of `certificate_batch`); a
// loop stops by its own rules and drops out. `shared_pass(served, batches)`
// scores the loops `served` with their batch sizes in one pass over the data
// and returns each one's pass, the bits its own pass would give. Each loop's
// finish() is the caller's.
using SharedPass =
    std::function<std::vector<FgmPass>(const std::vector<size_t>& served, const std::vector<uint64_t>& batches)>;
void run_in_lockstep(const std::vector<FgmLoop*>& loops, uint64_t certificate_batch, const SharedPass& shared_pass);

}  // namespace fgm
