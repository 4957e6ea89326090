// fgm train with solver = "fgm": store -> FGM (one-vs-rest on more than two
// labels) -> model.fgm + run.json
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/runner.h"
#include "core/config.h"
#include "core/error.h"
#include "core/json_writer.h"
#include "core/messages.h"
#include "engine/distributed_fgm.h"
#include "engine/one_vs_rest.h"
#include "engine/train_settings.h"

namespace fgm::cli {

namespace {

void log_iteration(const IterationRecord& r) {
  spdlog::info("iter {:3d}: selected {:6d} (+{}), objective {:.6g}, rel_decrease {:.3g}, sip_violation {:.4g}, "
               "scored {} candidates, score {:.3f}s, solve {:.3f}s ({} APG its), streamed {}",
               r.iter, r.selected, r.added, r.objective, r.rel_decrease, r.sip_violation, r.candidates_scored,
               r.score_seconds, r.solve_seconds, r.apg_iterations, format_bytes(r.bytes_streamed));
}

// The log line of a run that resumes from `saved`.
void log_resume(const ResumeSession& session, const TrainProgress& saved, const TrainSettings& settings) {
  std::string of_what = fmt::format("at most {} (fgm.max_iterations)", settings.max_iterations);
  if (!saved.stop_reason.empty())
    of_what += fmt::format(" — the run had stopped ({}); what is left is the final pass and the outputs",
                           saved.stop_reason);
  spdlog::info("{}", msg::resuming_from(session.file(), saved.iterations.size() + 1, of_what, saved.apg.w.size()));
}

// FGM on either backend (engine/one_vs_rest.h, engine/distributed_fgm.h):
// one binary run resumed from the checkpoint (on a partitioned store rank 0's
// session tells the others whether it resumes, and they read the same file),
// or one-vs-rest on more than two labels, whose classes keep no checkpoint.
DistributedOutcome train_on_data(SolverRun& run, const TrainSettings& settings) {
  if (!run.partitioned()) {
    const StoreInfo& info = run.data->store->info();
    spdlog::info("training on {} rows x {} features ({} nonzeros), space={}, B={}, C={}, loss={}, threads={}",
                 info.n_rows, info.n_features, info.nnz, settings.space.kind, settings.B, settings.apg.C,
                 loss_name(settings.apg.loss), settings.apg.threads);
  } else if (run.session) {
    spdlog::info("training on partitioned store {} with {} rank(s), B={}, C={}, loss={}, threads={}", run.dir,
                 run.comm.size(), settings.B, settings.apg.C, loss_name(settings.apg.loss), settings.apg.threads);
  }
  std::optional<ResumeCheckpoint> saved = run.resume_checkpoint();
  if (saved && !saved->train) throw Error(ErrorKind::kCorruption, "checkpoint of rank 0 has no training state");
  if (saved && run.session) log_resume(*run.session, *saved->train, settings);
  DistributedHooks hooks;
  if (saved) hooks.resume = &*saved->train;
  if (run.session) hooks.on_progress = [&](const TrainProgress& progress) { run.session->save(&progress, nullptr); };
  if (run.partitioned())
    return train_fgm_distributed(run.comm, run.dir, settings, run.budget, hooks,
                                 run.config.get_string_list("features.transform"));
  hooks.on_iteration = log_iteration;
  const std::vector<double>& classes = run.data->store->info().class_values;
  DistributedOutcome out;
  static_cast<FgmOutcome&>(out) =
      train_fgm_store(*run.data->store, settings, run.budget, hooks, [&](size_t c, const IterationRecord& r) {
        spdlog::info("class {} iter {:3d}: selected {:6d} (+{}), objective {:.6g}, rel_decrease {:.3g}, score "
                     "{:.3f}s, solve {:.3f}s",
                     label_text(classes[c]), r.iter, r.selected, r.added, r.objective, r.rel_decrease,
                     r.score_seconds, r.solve_seconds);
      });
  if (!out.classes.empty())
    spdlog::info("one-vs-rest: {} scoring passes ({}), {} streamed", out.scoring_passes,
                 out.lockstep ? "shared by the classes" : "one class after another",
                 format_bytes(out.total_bytes_streamed));
  return out;
}

}  // namespace

// solver = "fgm": one model on either backend; rank 0 writes model.fgm,
// run.json (on a partitioned store with the communication of every phase and
// every rank's peak RSS), the report and the result line.
int train_fgm_run(SolverRun& run) {
  const Config& config = run.config;
  TrainSettings settings = train_settings_from_config(config);
  settings.warnings = &run.warnings;
  DistributedOutcome outcome = train_on_data(run, settings);
  Model& model = outcome.model;
  if (!run.gather_outputs(outcome.budget_peak)) return 0;
  const bool multiclass = !outcome.classes.empty();
  if (!multiclass)
    spdlog::info("stopped: {} after {} iterations, {} features, final SIP violation {:.4g}", outcome.stop_reason,
                 outcome.iterations.size(), model.features.size(), outcome.final_sip_violation);
  const std::vector<ModelFeature> selected = all_features(model);
  return run.finish_train(
      {.solver = "fgm",
       .model = &model,
       .partitioned = &outcome,
       .budget_peak = outcome.budget_peak,
       .train_seconds = outcome.seconds,
       .sections =
           [&](JsonWriter& j, const EvalResult* test) {
             if (multiclass)
               write_one_vs_rest_runs(j, outcome.classes, outcome.class_labels, outcome.class_rows, model.index_base,
                                      test, outcome.lockstep, outcome.scoring_passes);
             else
               write_fgm_run(j, outcome, model.index_base, &outcome.iterations_restored);
             j.key("objective").value(model.objective);
             j.key("total_bytes_streamed").value(outcome.total_bytes_streamed);
             j.key("seconds").value(outcome.seconds);
           },
       .cross_truth = true,
       .class_labels = &outcome.class_labels,
       .summary = fmt::format("{} objective={:.6g}",
                              multiclass ? fmt::format("classes={} selected={}", model.classes.size(), selected.size())
                                         : fmt::format("selected={} iterations={}", model.features.size(),
                                                       outcome.iterations.size()),
                              model.objective)});
}

}  // namespace fgm::cli
