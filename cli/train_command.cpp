// fgm train: config + overrides -> store -> FGM -> model.fgm + run.json
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/distributed_train.h"
#include "io/partitioned_store.h"
#include "cli/run_output.h"
#include "cli/solver_commands.h"
#include "cli/resume.h"
#include "core/config.h"
#include "core/error.h"
#include "core/json_writer.h"
#include "core/messages.h"
#include "core/path_checks.h"
#include "engine/one_vs_rest.h"
#include "engine/train_settings.h"
#include "features/transformed_store.h"

namespace fgm::cli {

namespace {


// fgm train on a store with more than two labels (fgm.multiclass = "ovr"):
// one binary run per class, in lockstep where the space allows
// (engine/one_vs_rest.h). No resume checkpoints:
// an interrupted multi-class run starts again.
int train_multiclass(const Config& config, const TrainSettings& settings, const TrainingData& data,
                     MemoryBudget& budget, RunWarnings& warnings, ResumeSession& session) {
  const StoreInfo& info = data.store->info();
  const std::string out_dir = config.get_string("output.dir");
  spdlog::info("{} classes: one-vs-rest ({} binary runs, fgm.multiclass=ovr)", info.classes(),
               info.classes());
  OneVsRestOutcome outcome = train_one_vs_rest(
      *data.store, settings, budget, [&](size_t c, const IterationRecord& r) {
        spdlog::info("class {} iter {:3d}: selected {:6d} (+{}), objective {:.6g}, rel_decrease {:.3g}, "
                     "score {:.3f}s, solve {:.3f}s",
                     label_text(info.class_values[c]), r.iter, r.selected, r.added, r.objective,
                     r.rel_decrease, r.score_seconds, r.solve_seconds);
      });
  spdlog::info("one-vs-rest: {} scoring passes ({}), {} streamed", outcome.scoring_passes,
               outcome.lockstep ? "shared by the classes" : "one class after another",
               format_bytes(outcome.bytes_streamed));
  Model& model = outcome.model;
  model.config = config.dump();
  const std::vector<ModelFeature> selected = all_features(model);
  const ModelResults results = score_and_write_model(config, model, &selected, budget, warnings);
  JsonWriter j;
  begin_run_json(j, "fgm", config, data, model.config);
  write_one_vs_rest_runs(j, outcome.classes, info.class_values, info.class_counts, model.index_base,
                         results.test_or_null(), outcome.lockstep, outcome.scoring_passes);
  j.key("total_bytes_streamed").value(outcome.bytes_streamed);
  finish_run(j, budget, outcome.budget_peak, outcome.seconds, data.ingest_seconds, config, results, warnings,
             out_dir, session);

  print_truth(results, false);
  fmt::print("classes={} selected={} objective={:.6g}", model.classes.size(), selected.size(), model.objective);
  print_test_and_model(results, out_dir);
  return 0;
}

}  // namespace

Command add_train(CLI::App& app) {
  auto* sub = app.add_subcommand("train", "train one model with the configured solver (key `solver`: fgm, sifs, exclusive, mslr or pnorm_kta) "
      "from a TOML config and key=value overrides; writes model.fgm and run.json");
  struct Args {
    std::string config;
    std::vector<std::string> overrides;
    bool help_config = false;
    bool restart = false;
  };
  auto args = std::make_shared<Args>();
  sub->add_option("--config", args->config, "TOML config file (see configs/)");
  sub->add_option("overrides", args->overrides, "key=value overrides (the command line wins)");
  sub->add_flag("--help-config", args->help_config, "list every config key with type, default and range");
  sub->add_flag("--restart", args->restart,
                "ignore (and remove) the resume checkpoint in output.dir and start from scratch");
  return {sub, [args]() {
    if (args->help_config) {
      fmt::print("{}", describe_params());
      return 0;
    }
    Config config = Config::load(args->config, args->overrides);
    if (config.get_string("data.train").empty())
      throw Error(ErrorKind::kConfig, msg::missing_required("data.train", "the training data to select features from"));
    reject_ignored_keys(config, ConfigCommand::kTrain);
    check_config_paths(config, ConfigCommand::kTrain);
    MemoryBudget budget(config.get_bytes("engine.memory_budget"));
    TrainSettings settings = train_settings_from_config(config);
    RunWarnings warnings;
    settings.warnings = &warnings;
    const std::string out_dir = config.get_string("output.dir");
    Communicator& world = world_communicator();
    require_partitioned_store(config, world);
    if (is_partitioned_store(config.get_string("data.train")))
      return train_partitioned(config, settings, budget, world, args->restart, warnings);

    TrainingData data = open_training_data(config.get_string("data.train"),
                                           training_data_options_from_config(config), budget);
    reject_store_mismatch(config, data.store->info());
    data.store = apply_feature_transforms(std::move(data.store), config.get_string_list("features.transform"),
                                          budget, config.get_bytes("engine.block_bytes"));
    const StoreInfo& info = data.store->info();
    ResumeSession session(out_dir, store_run_identity(config, "train", info.store_checksum), args->restart,
                          "model.fgm", budget);
    if (const SolverKind solver = solver_from_config(config); solver != SolverKind::kFgm) {
      SolverCommand command{config, data, budget, warnings, out_dir, &session};
      return dispatch_solver_train(solver, command);
    }
    spdlog::info("training on {} rows x {} features ({} nonzeros), space={}, B={}, C={}, loss={}, threads={}",
                 info.n_rows, info.n_features, info.nnz, settings.space.kind, settings.B, settings.apg.C,
                 loss_name(settings.apg.loss), settings.apg.threads);
    if (info.classes() > 2) return train_multiclass(config, settings, data, budget, warnings, session);
    uint64_t resumed_from = 0;
    if (TrainProgress* saved = session.train()) {
      resumed_from = saved->iterations.size();
      std::string of_what = fmt::format("at most {} (fgm.max_iterations)", settings.max_iterations);
      if (!saved->stop_reason.empty())
        of_what += fmt::format(" — the run had stopped ({}); what is left is the final pass and the outputs",
                               saved->stop_reason);
      spdlog::info("{}", msg::resuming_from(session.file(), resumed_from + 1, of_what, saved->apg.w.size()));
    }
    TrainHooks hooks;
    hooks.resume = session.train();
    hooks.on_progress = [&](const TrainProgress& progress) { session.save(&progress, nullptr); };
    hooks.on_iteration = [](const IterationRecord& r) {
      spdlog::info("iter {:3d}: selected {:6d} (+{}), objective {:.6g}, rel_decrease {:.3g}, "
                   "sip_violation {:.4g}, scored {} candidates, score {:.3f}s, solve {:.3f}s ({} APG its), "
                   "streamed {}",
                   r.iter, r.selected, r.added, r.objective, r.rel_decrease, r.sip_violation,
                   r.candidates_scored, r.score_seconds, r.solve_seconds, r.apg_iterations,
                   format_bytes(r.bytes_streamed));
    };
    TrainOutcome outcome = train_fgm(*data.store, settings, budget, hooks);
    spdlog::info("stopped: {} after {} iterations, {} features, final SIP violation {:.4g}",
                 outcome.stop_reason, outcome.iterations.size(), outcome.model.features.size(),
                 outcome.final_sip_violation);
    outcome.model.config = config.dump();

    // data.test passed its syntax pass before training; if evaluating it fails, the model is kept.
    const ModelResults results =
        score_and_write_model(config, outcome.model, &outcome.model.features, budget, warnings);
    JsonWriter j;
    begin_run_json(j, "fgm", config, data, outcome.model.config);
    j.key("iterations").begin_array();
    for (const auto& r : outcome.iterations) write_iteration(j, r);
    j.end_array();
    j.key("stop_reason").value(outcome.stop_reason);
    j.key("iterations_restored").value(resumed_from);
    j.key("final_sip_violation").value(outcome.final_sip_violation);
    j.key("objective_no_features").value(outcome.objective_no_features);
    write_selected_features(j, outcome.model.features, outcome.model.index_base);
    j.key("bias").value(outcome.model.bias);
    j.key("total_apg_iterations").value(outcome.total_apg_iterations);
    j.key("total_bytes_streamed").value(outcome.total_bytes_streamed);
    finish_run(j, budget, outcome.budget_peak, outcome.seconds, data.ingest_seconds, config, results, warnings,
               out_dir, session);

    print_truth(results, true);
    fmt::print("selected={} iterations={} objective={:.6g}", outcome.model.features.size(),
               outcome.iterations.size(), outcome.model.objective);
    print_test_and_model(results, out_dir);
    return 0;
  }};
}

}  // namespace fgm::cli
