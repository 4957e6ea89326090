#include "engine/fgm_trainer.h"

#include <algorithm>
#include <memory>

#include "cache/selected_features.h"
#include "core/error.h"
#include "engine/fgm_loop.h"
#include "engine/model_provenance.h"
#include "engine/value_span.h"
#include "features/block_scores.h"
#include "features/cached_column_dot.h"
#include "features/transformed_store.h"
#include "solvers/apg_reduction.h"

namespace fgm {
namespace {

// The single store as the FGM loop's rows (engine/fgm_loop.h): its feature
// space, the selected-feature cache and α over all n rows. A LockstepRuns
// streams the store for several of these (shared_stream); otherwise each
// keeps its own stream, resident when it fits.
class StoreRows final : public FgmRows {
 public:
  StoreRows(const ShardStore& store, const TrainSettings& settings, MemoryBudget& budget, const TrainHooks& hooks,
            bool shared_stream);

  double fit_without_features(ApgState& state) override;
  FgmPass score(uint64_t batch, int iteration) override;
  void add_batch(const std::vector<uint64_t>& ids) override;
  ApgResult solve(const ApgOptions& apg, ApgState& state) override;
  const SelectedFeatureCache& columns() const override { return cache_; }
  uint64_t saved_duals() const override { return n_; }
  void restore_duals(TrainProgress& saved) override;
  void save_duals(TrainProgress& progress) const override { progress.alpha = alpha_; }
  Model model_frame() const override;
  void record_transforms(Model& model) const override { record_feature_transforms(store_, model); }
  void describe_point(Checkpoint& cp) override;
  void hand_out_decisions() override;
  bool chance_counts(double counts[3], int iteration) override;
  double value_span() const override { return value_span_result_; }

  // A lockstep pass: this run's a = α∘y and batch size; then its scores as a pass.
  ScoreRequest scoring_request(uint64_t batch);
  FgmPass take_scores(SpaceScores wc);
  // Makes `stream` observe the values of this process's first pass (the
  // value-span warning); after_first_pass() checks what it saw and stops it.
  void observe_values(BlockStream& stream);
  void after_first_pass(BlockStream& stream);

 private:
  void update_dual_product();

  const ShardStore& store_;
  const TrainSettings& settings_;
  MemoryBudget& budget_;
  const TrainHooks& hooks_;
  const uint64_t n_;
  const int8_t* y_;
  LocalRowSums local_sums_;  // a point's refit over the one part
  std::unique_ptr<FeatureSpace> space_;
  SchedulerOptions scheduler_;
  Reservation resident_;
  std::unique_ptr<BlockStream> stream_;  // null when a LockstepRuns streams for this run
  Reservation dual_mem_;
  std::vector<double> alpha_, a_, decision_;  // a = α∘y; d = w'x − b
  SelectedFeatureCache cache_;
  std::vector<BlockRef> blocks_;
  // Observes the first scoring pass of this process (null once checked).
  std::unique_ptr<ValueSpan> value_span_ = std::make_unique<ValueSpan>();
  double value_span_result_ = 0;
  // decision_ holds the current model's values: true for a fresh run (0, the
  // empty model's) and after any solve; not after restoring a checkpoint.
  bool solved_ = true;
};

StoreRows::StoreRows(const ShardStore& store, const TrainSettings& settings, MemoryBudget& budget,
                     const TrainHooks& hooks, bool shared_stream)
    : store_(store),
      settings_(settings),
      budget_(budget),
      hooks_(hooks),
      n_(store.info().n_rows),
      y_(settings.labels ? settings.labels : store.labels()),
      cache_(budget, store.info().n_rows) {
  const StoreInfo& info = store.info();
  FeatureSpaceSettings space_settings = settings.space;
  space_settings.index_base = info.index_base;
  space_ = make_feature_space(space_settings, store, budget);
  // A store that fits comfortably in the budget stays in memory between passes
  // (reserved as such; the streamer frees it before `resident` is released);
  // a larger one is streamed block by block.
  scheduler_ = settings.scheduler;
  if (!shared_stream) {
    resident_ = reserve_resident_store(info, budget, scheduler_);
    stream_ = std::make_unique<BlockStream>(store, scheduler_, budget);
  }
  // Dual variables, decision values and a = α∘y: O(n) each.
  dual_mem_ = budget.reserve(3 * n_ * sizeof(double), "dual variables", "use fewer training rows");
  alpha_.assign(n_, settings.apg.C);  // α⁰ = C·1 (no feature selected ⇒ ξ = 1)
  for (uint64_t i = 0; i < n_; ++i)
    if (y_[i] == 0) alpha_[i] = 0;    // a row outside the fit
  a_.resize(n_);
  decision_.assign(n_, 0.0);
  blocks_ = store.plan_blocks(scoring_block_bytes(settings.block_bytes, budget, n_, scheduler_.keep_resident));
}

// F_0 and α⁰: the solution of (31) with no feature selected. Without a bias
// that is ω = 0, b = 0, so α⁰ = C·1 (Algorithm 1). With a bias, b is fitted
// first: on unbalanced labels (a small class against the rest) α = C·1 would
// make the first worst-case analysis pick the features of the larger class —
// the bias's job — instead of the ones that tell the classes apart. With the
// fitted b, Σ_i α_i y_i = 0 (the optimality condition of b), so every score
// measures what a feature adds beyond the class balance.
double StoreRows::fit_without_features(ApgState& state) {
  if (!settings_.apg.bias || n_ == 0) return loss_value(settings_.apg.loss, settings_.apg.C, y_, decision_);
  return solve(settings_.apg, state).objective;
}

ApgResult StoreRows::solve(const ApgOptions& apg, ApgState& state) {
  ApgResult r = solve_apg(cache_, y_, apg, state, decision_, budget_);
  solved_ = true;
  dual_from_decision(settings_.apg.loss, settings_.apg.C, y_, decision_, alpha_);
  return r;
}

void StoreRows::restore_duals(TrainProgress& saved) {
  solved_ = saved.iterations.empty();
  alpha_ = std::move(saved.alpha);
}

void StoreRows::add_batch(const std::vector<uint64_t>& ids) {
  cache_.begin_batch();
  for (uint64_t id : ids) {
    space_->mark_selected(id);
    space_->materialize(store_, id, cache_);
  }
}

void StoreRows::update_dual_product() {
  for (uint64_t i = 0; i < n_; ++i) a_[i] = alpha_[i] * y_[i];
}

// Algorithm 2 against the current α: the top-`batch` unselected candidates.
FgmPass StoreRows::score(uint64_t batch, int) {
  update_dual_product();
  observe_values(*stream_);
  FgmPass pass = take_scores(run_worst_case_analysis(*space_, *stream_, blocks_, a_.data(), batch, budget_));
  after_first_pass(*stream_);
  return pass;
}

ScoreRequest StoreRows::scoring_request(uint64_t batch) {
  ScoreRequest request;
  request.space = space_.get();
  request.B = batch;
  update_dual_product();
  request.a = a_.data();
  return request;
}

// (37) with the current α: the cached columns give c_j exactly (the scoring
// pass's summation).
FgmPass StoreRows::take_scores(SpaceScores wc) {
  std::vector<double> selected_c(cache_.num_columns());
  for (size_t k = 0; k < selected_c.size(); ++k)
    selected_c[k] = tiled_column_dot(cache_.column(k), a_.data(), store_.info().tile_rows);
  return scored_pass(std::move(wc), cache_, selected_c);
}

// The first pass of this process also measures the value span (of what the
// space scores: largest over typical per-column max |value|, squared for
// poly2, whose features are products of two values); later passes stream as
// they are.
void StoreRows::observe_values(BlockStream& stream) {
  if (!value_span_) return;
  ValueSpan* span = value_span_.get();
  stream.set_observer([span](const ColumnBlock& block) { span->observe(block); });
}

void StoreRows::after_first_pass(BlockStream& stream) {
  if (!value_span_) return;
  stream.set_observer({});
  value_span_result_ =
      value_span_->check(feature_space_kind(settings_.space.kind).value_degree, space_->kind(), settings_.warnings);
  value_span_.reset();
}

Model StoreRows::model_frame() const {
  Model m = model_of_store(store_.info(), "fgm");
  space_->describe(m);
  return m;
}

void StoreRows::describe_point(Checkpoint& cp) {
  cp.rows = {ApgRowPart{&cache_, y_, nullptr}};
  cp.reduction = &local_sums_;
}

void StoreRows::hand_out_decisions() {
  if (solved_ && hooks_.on_final_decision) hooks_.on_final_decision(0, decision_);
}

bool StoreRows::chance_counts(double counts[3], int) {
  if (!solved_) return false;
  count_fit(y_, n_, decision_, counts);
  return true;
}

// Runs that differ only in their labels, advanced together (run_in_lockstep):
// each shared pass scores every run served with one stream over the store.
class LockstepRuns {
 public:
  LockstepRuns(const ShardStore& store, const std::vector<TrainSettings>& settings, MemoryBudget& budget,
               const std::vector<TrainHooks>& hooks);
  LockstepOutcome run();

 private:
  std::vector<FgmPass> shared_pass(const std::vector<size_t>& served, const std::vector<uint64_t>& batches);

  const ShardStore& store_;
  const TrainSettings& first_;
  MemoryBudget& budget_;
  std::vector<std::unique_ptr<StoreRows>> rows_;
  std::vector<std::unique_ptr<FgmLoop>> runs_;
  Reservation resident_;
  std::unique_ptr<BlockStream> stream_;
  std::vector<BlockRef> blocks_;
  LockstepOutcome out_;
};

LockstepRuns::LockstepRuns(const ShardStore& store, const std::vector<TrainSettings>& settings,
                           MemoryBudget& budget, const std::vector<TrainHooks>& hooks)
    : store_(store), first_(settings.front()), budget_(budget) {
  FGM_ASSERT(settings.size() == hooks.size());
  for (size_t r = 0; r < settings.size(); ++r) {
    rows_.push_back(std::make_unique<StoreRows>(store, settings[r], budget, hooks[r], true));
    runs_.push_back(std::make_unique<FgmLoop>(*rows_.back(), settings[r], budget, hooks[r]));
  }
  // As a single run does for itself, once for all runs, after their state:
  // the store stays resident only if that leaves room.
  SchedulerOptions scheduler = first_.scheduler;
  resident_ = reserve_resident_store(store.info(), budget, scheduler);
  stream_ = std::make_unique<BlockStream>(store, scheduler, budget);
  blocks_ = store.plan_blocks(
      scoring_block_bytes(first_.block_bytes, budget, store.info().n_rows, scheduler.keep_resident));
}

std::vector<FgmPass> LockstepRuns::shared_pass(const std::vector<size_t>& served,
                                               const std::vector<uint64_t>& batches) {
  std::vector<ScoreRequest> requests;
  for (size_t q = 0; q < served.size(); ++q) requests.push_back(rows_[served[q]]->scoring_request(batches[q]));
  ScoringContext ctx;
  ctx.store = &store_;
  ctx.blocks = &blocks_;
  // The first run measures the value span of the first pass (one store, one warning).
  rows_.front()->observe_values(*stream_);
  ctx.stream = stream_.get();
  ctx.threads = first_.scheduler.threads;
  ctx.budget = &budget_;
  std::vector<SpaceScores> scores = score_many(ctx, requests);
  rows_.front()->after_first_pass(*stream_);
  ++out_.scoring_passes;
  out_.bytes_streamed += scores.front().pass.bytes_streamed;
  std::vector<FgmPass> passes;
  for (size_t q = 0; q < served.size(); ++q) passes.push_back(rows_[served[q]]->take_scores(std::move(scores[q])));
  return passes;
}

LockstepOutcome LockstepRuns::run() {
  std::vector<FgmLoop*> loops;
  for (auto& run : runs_) loops.push_back(run.get());
  run_in_lockstep(loops, first_.B, [this](const std::vector<size_t>& served, const std::vector<uint64_t>& batches) {
    return shared_pass(served, batches);
  });
  for (auto& run : runs_) out_.runs.push_back(run->finish());
  return std::move(out_);
}

}  // namespace

bool at_chance_level(double rows, double correct, double largest_class, double& train_accuracy,
                     double& majority_rate) {
  if (rows == 0) return false;
  train_accuracy = correct / rows;
  majority_rate = largest_class / rows;
  return train_accuracy <= majority_rate;
}

std::string outer_stop_rule(uint64_t max_features, const std::vector<uint64_t>& checkpoints, int max_iterations,
                            uint64_t selected_units, int iterations) {
  if (max_features > 0 && selected_units >= max_features) return "max_features";
  if (!checkpoints.empty() && selected_units >= checkpoints.back()) return "last_checkpoint";
  if (iterations >= max_iterations) return "max_iterations";
  return "";
}

// The block target of the scoring passes. A small budget gets smaller blocks,
// so that several stay in flight. A store kept resident is scored in blocks of
// about 16·n bytes (~2n nonzeros) when that is larger: a tile's dual slice
// (tile_rows·8 bytes) is then reused by ~16 nonzeros per cache line within a
// block, where 4 MB blocks of a tall store (n = 3·10^6) touch each line about
// once. Scores do not depend on how the columns are cut into blocks.
uint64_t scoring_block_bytes(uint64_t block_bytes, const MemoryBudget& budget, uint64_t n_rows, bool resident) {
  uint64_t target = std::min(block_bytes, budget.limit() / 16);
  // Resident units of ~16 bytes per row: a tiled pass reuses each dual-slice
  // line for several nonzeros only when a unit holds about one nonzero per
  // row or more (a tall store in 4 MB units touches each line ~once per
  // unit, and the tile walk is then slower than a plain gather). A streamed
  // unit stays at engine.block_bytes: merging stored blocks beyond it costs
  // a copy of every byte, which on the kddb shape took more CPU (~20 %)
  // than the reuse saved.
  if (resident) target = std::max(target, std::min<uint64_t>(16 * n_rows, budget.limit() / 16));
  return std::max<uint64_t>(64 << 10, target);
}

bool keeps_store_resident(const StoreInfo& info, const MemoryBudget& budget) {
  return resident_store_bytes(info) <= budget.available() / 2;
}

Reservation reserve_resident_store(const StoreInfo& info, MemoryBudget& budget, SchedulerOptions& scheduler) {
  scheduler.keep_resident = keeps_store_resident(info, budget);
  if (!scheduler.keep_resident) return Reservation{};
  return budget.reserve(resident_store_bytes(info), "store pages kept resident between passes");
}

LockstepOutcome train_fgm_lockstep(const ShardStore& store, const std::vector<TrainSettings>& settings,
                                   MemoryBudget& budget, const std::vector<TrainHooks>& hooks) {
  FGM_ASSERT(!settings.empty());
  LockstepRuns runs(store, settings, budget, hooks);
  return runs.run();
}

TrainOutcome train_fgm(const ShardStore& store, const TrainSettings& settings, MemoryBudget& budget,
                       const TrainHooks& hooks) {
  StoreRows rows(store, settings, budget, hooks, false);
  FgmLoop loop(rows, settings, budget, hooks);
  return loop.run();
}

}  // namespace fgm
