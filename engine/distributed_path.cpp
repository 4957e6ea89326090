#include "engine/distributed_path.h"

#include <fmt/format.h>

#include "core/error.h"

namespace fgm {

namespace {

// The path's FGM runs: train_fgm_distributed with its checkpoint hooks.
class DistributedPathTrainer final : public PathTrainer {
 public:
  DistributedPathTrainer(Communicator& comm, const std::string& dir, MemoryBudget& budget, DistributedPathOutcome& out)
      : comm_(comm), dir_(dir), budget_(budget), out_(out) {}

  // The rows' label map is known once the first run has mapped the labels of all partitions.
  const Model* evaluation_shape() const override { return nullptr; }

  TrainOutcome train(const TrainSettings& s, bool rows, const std::function<void(const RunPoint&)>& on_point,
                     const TrainHooks& hooks) override {
    FGM_ASSERT(s.labels == nullptr);
    DistributedHooks h;
    h.resume = hooks.resume;
    h.on_progress = hooks.on_progress;
    auto hand_out = [&](const DistributedPoint& p) {
      const PointRows point_rows{p.rows, p.reduction};
      const double objective = p.point.last ? p.point.last->objective : p.point.model.objective;
      on_point({&p.point.model, objective, p.point.apg_iterations, p.point.gradient_evaluations,
                rows ? &point_rows : nullptr});
    };
    // path.features: a point at each count; path.B / path.C: one at the end.
    if (s.checkpoints.empty()) h.on_final = hand_out;
    else h.on_checkpoint = hand_out;
    DistributedOutcome d = train_fgm_distributed(comm_, dir_, s, budget_, h);
    if (hooks.on_iteration)
      for (const IterationRecord& r : d.iterations) hooks.on_iteration(r);
    record(d);
    TrainOutcome t;
    t.model = std::move(d.model);
    t.iterations = std::move(d.iterations);
    t.stop_reason = d.stop_reason;
    t.final_sip_violation = d.final_sip_violation;
    t.objective_no_features = d.objective_no_features;
    for (const IterationRecord& r : t.iterations) {
      t.total_apg_iterations += r.apg_iterations;
      t.total_line_search_steps += r.apg_line_search_steps;
      t.total_gradient_evaluations += r.apg_gradient_evaluations;
    }
    t.total_bytes_streamed = d.total_bytes_streamed;
    t.seconds = d.seconds;
    t.budget_peak = d.budget_peak;
    return t;
  }

 private:
  void record(const DistributedOutcome& d) {
    out_.manifest = d.manifest;
    out_.ranks = d.ranks;
    out_.own_partitions = d.own_partitions;
    out_.communication.push_back(d.communication);
  }

  Communicator& comm_;
  const std::string& dir_;
  MemoryBudget& budget_;
  DistributedPathOutcome& out_;
};

}  // namespace

void check_distributed_path_settings(const PathSettings& settings) {
  // The folds are stratified over the labels of all rows (engine/path_selection.h
  // assign_folds), which no rank holds.
  if (settings.folds >= 2)
    throw Error(ErrorKind::kConfig, fmt::format("path.folds = {}: cross-validation is not supported on a partitioned "
                                                "store yet (docs/distributed.md lists what is distributed); set "
                                                "path.folds = 0, or run fgm path on a store ingested without "
                                                "--partitions",
                                                settings.folds));
}

DistributedPathOutcome run_fgm_path_distributed(Communicator& comm, const std::string& store_dir,
                                                const PathSettings& settings, MemoryBudget& budget,
                                                const PathHooks& hooks) {
  check_distributed_path_settings(settings);
  PathSettings local = settings;
  if (comm.rank() != 0) {  // rank 0 alone evaluates
    local.test_path.clear();
    local.validation_path.clear();
  }
  DistributedPathOutcome out;
  DistributedPathTrainer trainer(comm, store_dir, budget, out);
  const CommunicationStats before = comm.stats();
  out.path = run_path(trainer, local, budget, hooks);
  const CommunicationStats after = comm.stats();
  out.total_communication = {after.bytes - before.bytes, after.calls - before.calls, after.seconds - before.seconds};
  // The trainer's records leave out what the refits at the points communicated.
  out.refit_communication = out.total_communication;
  for (const auto& run : out.communication)
    for (const CommunicationRecord& c : run) {
      out.refit_communication.bytes -= c.comm.bytes;
      out.refit_communication.calls -= c.comm.calls;
      out.refit_communication.seconds -= c.comm.seconds;
    }
  out.budget_peak = budget.peak();
  return out;
}

}  // namespace fgm
