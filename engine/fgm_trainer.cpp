#include "engine/fgm_trainer.h"

#include <algorithm>
#include <memory>

#include "core/error.h"
#include "engine/fgm_loop.h"
#include "engine/model_provenance.h"
#include "engine/value_span.h"
#include "solvers/apg_reduction.h"

namespace fgm {
namespace {

// The single store as the FGM loop's row source: one part, summed without
// any addition (LocalRowSums). Its stream opens after the run's state (or,
// in lockstep, after every run's), resident when it fits.
class StoreSource final : public RowSource {
 public:
  StoreSource(const ShardStore& store, const TrainSettings& settings, MemoryBudget& budget)
      : store_(store), settings_(settings), budget_(budget) {}

  size_t parts() const override { return 1; }
  const ShardStore& store(size_t) const override { return store_; }
  PartitionScoringInput input(size_t, const double* a) override { return {stream_.get(), &blocks_, a}; }
  void open() override {
    if (defer_open || stream_) return;
    SchedulerOptions scheduler = settings_.scheduler;
    resident_ = reserve_resident_store(store_.info(), budget_, scheduler);
    stream_ = std::make_unique<BlockStream>(store_, scheduler, budget_);
    blocks_ = store_.plan_blocks(
        scoring_block_bytes(settings_.block_bytes, budget_, store_.info().n_rows, scheduler.keep_resident));
  }
  RowSumReduction& reduction() override { return sums_; }
  uint64_t total_rows() const override { return store_.info().n_rows; }
  std::unique_ptr<FeatureSpace> make_space(const FeatureSpaceSettings& settings, MemoryBudget& budget) override {
    return make_feature_space(settings, store_, budget);
  }
  Model model_frame(double, double) const override { return model_of_store(store_.info(), "fgm"); }
  void observe_values() override {
    stream_->set_observer([this](const ColumnBlock& block) { span_.observe(block); });
  }
  double value_span(int degree, const std::string& kind, RunWarnings* warnings) override {
    stream_->set_observer({});
    return span_.check(degree, kind, warnings);
  }

 private:
  const ShardStore& store_;
  const TrainSettings& settings_;
  MemoryBudget& budget_;
  LocalRowSums sums_;
  Reservation resident_;  // released after the stream, which holds what it reserves
  std::unique_ptr<BlockStream> stream_;
  std::vector<BlockRef> blocks_;
  ValueSpan span_;
};

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

std::unique_ptr<RowSource> store_source(const ShardStore& store, const TrainSettings& settings, MemoryBudget& budget) {
  return std::make_unique<StoreSource>(store, settings, budget);
}

TrainOutcome train_fgm(const ShardStore& store, const TrainSettings& settings, MemoryBudget& budget,
                       const TrainHooks& hooks) {
  StoreSource source(store, settings, budget);
  FgmRows rows(source, settings, budget, hooks, {settings.labels ? settings.labels : store.labels()});
  FgmLoop loop(rows, settings, budget, hooks);
  return loop.run();
}

}  // namespace fgm
