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
#include "engine/train_settings.h"

namespace fgm::cli {

namespace {

// An FGM run in run.json: its iterations, stop reason, features and APG
// work; a binary run (`iterations_restored` given) says how many iterations
// came from a checkpoint, a one-vs-rest class run its objective.
void write_fgm_run(JsonWriter& j, const TrainOutcome& o, int index_base,
                   const uint64_t* iterations_restored = nullptr) {
  j.key("iterations").begin_array();
  for (const auto& r : o.iterations) write_iteration(j, r);
  j.end_array();
  j.key("stop_reason").value(o.stop_reason);
  if (iterations_restored) j.key("iterations_restored").value(*iterations_restored);
  j.key("final_sip_violation").value(o.final_sip_violation);
  j.key("objective_no_features").value(o.objective_no_features);
  if (!iterations_restored) j.key("objective").value(o.model.objective);
  write_selected_features(j, o.model.features, index_base);
  j.key("bias").value(o.model.bias);
  j.key("total_apg_iterations").value(o.total_apg_iterations);
}

// run.json of a one-vs-rest run after its opening: "multiclass", each class
// run (test_auc when data.test was scored) and their totals; scoring_passes
// counts the data's streams, which classes in lockstep share.
void write_one_vs_rest_runs(JsonWriter& j, const FgmOutcome& o, int index_base, const EvalResult* test) {
  j.key("multiclass").value("ovr");
  j.key("iterations").begin_array().end_array();  // per class, below
  j.key("classes").begin_array();
  uint64_t selected = 0, total_apg = 0;
  for (size_t c = 0; c < o.classes.size(); ++c) {
    selected += o.classes[c].model.features.size();
    total_apg += o.classes[c].total_apg_iterations;
    j.begin_object();
    j.key("label").value(o.class_labels[c]);
    j.key("rows").value(o.class_rows[c]);
    write_fgm_run(j, o.classes[c], index_base);
    j.key("train_seconds").value(o.classes[c].seconds);
    if (test) j.key("test_auc").value(test->class_auc[c]);
    j.end_object();
  }
  j.end_array();
  j.key("selected_total").value(selected);
  j.key("iterations_restored").value(uint64_t{0});
  j.key("total_apg_iterations").value(total_apg);
  j.key("lockstep").value(o.lockstep);
  j.key("scoring_passes").value(o.scoring_passes);
}

// The log line of a run that resumes from `saved`.
void log_resume(const ResumeSession& session, const TrainProgress& saved, const TrainSettings& settings) {
  std::string of_what = fmt::format("at most {} (fgm.max_iterations)", settings.max_iterations);
  if (!saved.stop_reason.empty())
    of_what += fmt::format(" — the run had stopped ({}); what is left is the final pass and the outputs",
                           saved.stop_reason);
  spdlog::info("{}", msg::resuming_from(session.file(), saved.iterations.size() + 1, of_what, saved.apg.w.size()));
}

// FGM on either backend (engine/distributed_fgm.h): one binary run resumed
// from the checkpoint (on a partitioned store rank 0's session tells the
// others whether it resumes, and they read the same file), or one-vs-rest on
// more than two labels, whose classes keep no checkpoint.
FgmOutcome train_on_data(SolverRun& run, const TrainSettings& settings) {
  if (run.session) {  // rank 0
    const std::string rows =
        run.partitioned() ? fmt::format("partitioned store {} with {} rank(s)", run.dir, run.comm.size())
                          : fmt::format("{} rows x {} features ({} nonzeros)", run.data->store->info().n_rows,
                                        run.data->store->info().n_features, run.data->store->info().nnz);
    spdlog::info("training on {}, space={}, B={}, C={}, loss={}, threads={}", rows, settings.space.kind, settings.B,
                 settings.apg.C, loss_name(settings.apg.loss), settings.apg.threads);
  }
  std::optional<ResumeCheckpoint> saved = run.resume_checkpoint();
  if (saved && !saved->train) throw Error(ErrorKind::kCorruption, "checkpoint of rank 0 has no training state");
  if (saved && run.session) log_resume(*run.session, *saved->train, settings);
  DistributedHooks hooks;
  if (saved) hooks.resume = &*saved->train;
  if (run.session) hooks.on_progress = [&](const TrainProgress& progress) { run.session->save(&progress, nullptr); };
  FgmData data{run.comm, run.partitioned() ? nullptr : run.data->store.get(), run.dir};
  if (run.partitioned()) data.transforms = run.config.get_string_list("features.transform");
  FgmOutcome out = train_fgm_on(data, settings, run.budget, hooks);
  if (!out.classes.empty() && run.session)
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
  FgmOutcome outcome = train_on_data(run, settings);
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
               write_one_vs_rest_runs(j, outcome, model.index_base, test);
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
