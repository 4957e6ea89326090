// The one FGM outer loop (engine/fgm_trainer.h, Algorithm 1) over one row
// backend (RowSource): the single store as one part (engine/fgm_trainer.cpp)
// or this rank's partitions of a partitioned store
// (engine/distributed_fgm.cpp). The loop owns what does not depend on where
// the rows live: the stop rules, batch sizes, resume, path points, the model,
// the iteration records and the warnings. FgmRows owns a run's rows on the
// source: their duals, the selected columns, the scoring pass and the solve;
// the source only says where the parts are and how their sums add up.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/selected_features.h"
#include "engine/fgm_trainer.h"
#include "engine/own_partitions.h"

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

// Where an FGM run's rows live: the single store as one part
// (engine/fgm_trainer.cpp) or this rank's partitions of a partitioned store
// (engine/distributed_fgm.cpp). Every sum over rows goes through reduction():
// one part adds nothing (the single store's bits), partitions add in the
// fixed partition tree (every rank count's bits).
class RowSource {
 public:
  virtual ~RowSource() = default;
  virtual size_t parts() const = 0;
  virtual const ShardStore& store(size_t q) const = 0;
  // Part q's stream and scoring blocks against duals `a`.
  virtual PartitionScoringInput input(size_t q, const double* a) = 0;
  // Opens what the scoring passes stream (the single store: after the run's
  // state, or with defer_open after every lockstep run's, so a resident copy
  // is reserved from what that leaves).
  virtual void open() {}
  bool defer_open = false;
  virtual RowSumReduction& reduction() = 0;
  // The ranks of a partitioned run (null: one process, nothing to record or gate).
  virtual Communicator* comm() { return nullptr; }
  virtual uint64_t total_rows() const = 0;
  // What to change when the rows' duals do not fit the budget.
  virtual const char* row_memory_remedy() const { return "use fewer training rows"; }
  virtual std::unique_ptr<FeatureSpace> make_space(const FeatureSpaceSettings& settings, MemoryBudget& budget) = 0;
  // The model's store provenance; a partitioned store's labels are the run's.
  virtual Model model_frame(double negative, double positive) const = 0;
  // The value-span warning of the source's first pass (one per store): the
  // streams observe the pass, then the span of what they saw (0 on a rank
  // that does not report). A real difference: one store's blocks hold each
  // column once, partitions share columns and take the maximum over ranks.
  virtual void observe_values() = 0;
  virtual double value_span(int degree, const std::string& kind, RunWarnings* warnings) = 0;
  bool value_span_pending = true;
};

// The single store as a row source (engine/fgm_trainer.cpp); `settings`
// (its scheduler and block target) must outlive it.
std::unique_ptr<RowSource> store_source(const ShardStore& store, const TrainSettings& settings, MemoryBudget& budget);
// This rank's partitions as a row source (engine/distributed_fgm.cpp).
std::unique_ptr<RowSource> partition_source(OwnPartitions& own, MemoryBudget& budget);

// c_h = Σ_i a_i x_ih of every selected column (the scoring pass's tiled
// summation per part, part q's columns against a[q]), reduced over the parts:
// the selected features' scores (FGM's (37), MSLR's stop test).
std::vector<double> selected_column_dots(RowSource& source,
                                         const std::vector<std::unique_ptr<SelectedFeatureCache>>& columns,
                                         const std::vector<std::vector<double>>& a);

// A scoring pass over the source's parts against duals a[q] (FGM's a = α∘y,
// MSLR's): a space over the single store reads its one part as the
// context's store, a partitioned space the parts.
ScoringContext scoring_context(RowSource& source, std::vector<std::vector<double>>& a, uint64_t batch, int threads,
                               MemoryBudget& budget);

// The rows of one FGM run on a RowSource (one run per label set: one-vs-rest
// makes K on one source): per part its labels, its rows of the selected
// columns, its decision values, α and a = α∘y.
class FgmRows {
 public:
  // `labels[q]`: part q's ±1 labels (0: a row outside the fit), kept alive by
  // the caller. `negative`/`positive`: the label values (a partitioned
  // model's); `log_label`: a one-vs-rest class's name in the log.
  FgmRows(RowSource& source, const TrainSettings& settings, MemoryBudget& budget, const TrainHooks& hooks,
          std::vector<const int8_t*> labels, double negative = -1, double positive = 1, std::string log_label = "");

  // F_0, the objective of (31) with no feature selected; with a bias, b is
  // fitted first (into `state`) and α⁰ comes from its decision values.
  double fit_without_features(ApgState& state);
  // The top-`batch` unselected candidates against α, with (37).
  // `iteration` names the pass in the communication log.
  FgmPass score(uint64_t batch, int iteration);
  // Marks the candidates selected and reads their columns as a new batch.
  void add_batch(const std::vector<uint64_t>& ids);
  // (31) over the selected columns, warm-started at `state`; then α (Theorem 3).
  ApgResult solve(const ApgOptions& apg, ApgState& state);
  // The selected columns (keys and batches for the model).
  const SelectedFeatureCache& columns() const { return *columns_.front(); }
  // α after a checkpoint's batches were replayed, formed from its ω.
  void restore_duals(const TrainProgress& saved);
  Model model_frame() const;
  void record_transforms(Model& model) const;
  void describe_point(Checkpoint& cp);
  // The final decision values to the caller's hook.
  void hand_out_decisions();
  // count_fit over all rows.
  void chance_counts(double counts[3], int iteration);
  double value_span() const { return value_span_; }
  // Whether this process adds the run's warnings (rank 0 of a partitioned run).
  bool reports_warnings() const { return !comm_ || comm_->rank() == 0; }
  // The communication log of a partitioned run: begin_phase, then
  // end_phase(iteration, name) records what the phase exchanged.
  void begin_phase();
  void end_phase(int iteration, const char* phase);
  void after_iteration(const IterationRecord& rec);

  // A lockstep pass: this run's request (its space, duals and batch size),
  // then its scores as a pass.
  ScoringContext scoring_context(uint64_t batch);
  ScoreRequest scoring_request(uint64_t batch);
  FgmPass take_scores(SpaceScores scored);
  // The value span on the source's first pass: before it, and after it.
  bool observe_values();
  void check_value_span(int iteration);
  std::vector<CommunicationRecord>& communication() { return communication_; }

 private:
  std::vector<ApgRowPart> row_parts();
  void update_duals();
  void record(int iteration, const char* phase, const CommunicationStats& before);

  RowSource& source_;
  const TrainSettings& settings_;
  MemoryBudget& budget_;
  const TrainHooks& hooks_;
  Communicator* comm_;
  std::vector<const int8_t*> y_;
  double negative_, positive_;
  std::string log_label_;
  uint64_t rows_ = 0;  // this process's
  std::vector<std::unique_ptr<SelectedFeatureCache>> columns_;
  std::unique_ptr<FeatureSpace> space_;
  Reservation dual_memory_;
  std::vector<std::vector<double>> alpha_, a_, decisions_;  // per part; a = α∘y, d = w'x − b
  std::vector<CommunicationRecord> communication_;
  CommunicationStats phase_start_;
  double value_span_ = 0;
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

// Runs that differ only in their labels (one-vs-rest) on one source, in
// lockstep (run_in_lockstep): each shared pass scores the served runs'
// duals in one stream over the source (score_many). Returns each run's
// finish(); `passes`, `bytes` count the shared passes, `communication` gets
// their records (shared_by: the runs served).
std::vector<TrainOutcome> run_rows_in_lockstep(RowSource& source, const std::vector<FgmRows*>& rows,
                                               const std::vector<FgmLoop*>& loops, uint64_t certificate_batch,
                                               uint64_t& passes, uint64_t& bytes,
                                               std::vector<CommunicationRecord>& communication);

}  // namespace fgm
