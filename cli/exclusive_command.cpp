// fgm train / fgm path with solver = "exclusive" (engine/exclusive_trainer.h).
// train: model.fgm (a linear model without bias) + run.json with an
// "exclusive" section. path: one model per exclusive.path_lambda value
// (models/lambda_<k>.fgm), path.csv and path.json. Test data is evaluated
// before anything is written, so a bad test file leaves no output.
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/run_output.h"
#include "cli/solver_commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_writer.h"
#include "core/messages.h"
#include "core/path_checks.h"
#include "engine/evaluate.h"
#include "engine/exclusive_trainer.h"

namespace fgm::cli {
namespace {

void write_exclusive_section(JsonWriter& j, const ExclusiveSettings& s, const ExclusiveOutcome& o) {
  j.key("exclusive").begin_object();
  j.key("algorithm").value(exclusive::algorithm_name(s.fista.algorithm));
  j.key("loss").value(exclusive::loss_name(s.fista.loss));
  j.key("lambda").value(o.model.C);
  if (s.fista.algorithm == exclusive::Algorithm::kLicp) j.key("ridge").value(s.fista.ridge);
  j.key("groups").begin_object();
  j.key("source").value(o.group_source);
  j.key("count").value(o.group_count);
  j.key("disjoint").value(o.groups_disjoint);
  if (o.group_source == "random") j.key("seed").value(s.group_seed);
  j.end_object();
  j.key("columns").value(o.columns);
  j.key("working_set").value(s.working_set.enabled);
  j.key("working_set_size").value(o.fit.working_set);
  j.key("working_set_rounds").value(o.fit.rounds);
  j.key("max_violation").value(o.fit.max_violation);
  j.key("fista_iterations").value(o.fit.fista_iterations);
  j.key("backtracks").value(o.fit.last_solve.backtracks);
  j.key("lipschitz").value(o.fit.last_solve.lipschitz);
  j.key("store_passes").value(o.fit.full_passes);
  j.key("converged").value(o.fit.converged);
  j.key("objective").value(o.model.objective);
  j.key("loss_value").value(o.fit.last_solve.loss);
  j.key("regularizer").value(o.fit.last_solve.regularizer);
  if (s.fista.algorithm == exclusive::Algorithm::kLicp) j.key("duality_gap").value(o.fit.last_solve.duality_gap);
  j.key("seconds").value(o.seconds);
  j.end_object();
}

// The report's per-iteration table (report/run_logs.cpp reads FGM's fields):
// one row per working-set round — selected = nonzero weights, added = features
// added to W, sip_violation = the verification pass's largest relative excess,
// score_seconds = that pass, apg_iterations = the round's FISTA iterations.
void write_rounds(JsonWriter& j, const ExclusiveOutcome& o) {
  j.key("iterations").begin_array();
  double previous = o.fit.objective_at_zero;
  int iter = 0;
  for (const auto& r : o.fit.round_log) {
    j.begin_object();
    j.key("iter").value(int64_t(++iter));
    j.key("selected").value(r.nonzeros);
    j.key("added").value(r.added);
    j.key("objective").value(r.objective);
    j.key("rel_decrease").value(previous != 0 ? (previous - r.objective) / std::fabs(previous) : 0.0);
    j.key("sip_violation").value(r.violation);
    j.key("score_seconds").value(r.check_seconds);
    j.key("solve_seconds").value(r.solve_seconds);
    j.key("apg_iterations").value(int64_t(r.fista_iterations));
    j.key("apg_stop").value(r.converged ? "converged" : "max_iterations");
    j.key("working_set").value(r.working_set);
    j.end_object();
    previous = r.objective;
  }
  j.end_array();
  j.key("stop_reason").value(o.fit.converged ? "converged" : "not_converged");
  j.key("objective_no_features").value(o.fit.objective_at_zero);
  j.key("final_sip_violation").value(o.fit.max_violation);
}

}  // namespace

int train_exclusive(SolverCommand& command) {
  const Config& config = command.config;
  const ExclusiveSettings settings = exclusive_settings_from_config(config, ConfigCommand::kTrain);
  spdlog::info("exclusive: algorithm={} loss={} lambda={} threads={}", exclusive::algorithm_name(settings.fista.algorithm),
               exclusive::loss_name(settings.fista.loss), settings.fista.lambda, settings.threads);
  ExclusiveOutcome outcome = train_exclusive_model(*command.data.store, settings, command.budget);
  outcome.model.config = config.dump();
  if (!outcome.fit.converged)
    command.warnings.add("exclusive_not_converged",
                         fmt::format("the exclusive solver stopped at exclusive.max_iterations = {} (or the "
                                     "working set's round limit) before its stopping rule held",
                                     settings.fista.max_iterations));
  const bool has_test = !config.get_string("data.test").empty();
  EvalResult test;
  if (has_test) test = evaluate_test_file(config, outcome.model, command.budget, command.warnings);
  const bool has_truth = !config.get_string("data.truth").empty();
  TruthRecovery truth;
  if (has_truth) truth = recover_truth(config.get_string("data.truth"), outcome.model.features);

  create_output_directory(command.out_dir, "output.dir");
  write_model((std::filesystem::path(command.out_dir) / "model.fgm").string(), outcome.model);
  JsonWriter j;
  begin_run_json(j, "exclusive", config, command.data, outcome.model.config);
  write_exclusive_section(j, settings, outcome);
  write_rounds(j, outcome);
  write_selected_features(j, outcome.model.features, outcome.model.index_base);
  j.key("bias").value(0.0);
  finish_run(j, command.budget, outcome.budget_peak, outcome.seconds, command.data.ingest_seconds, config,
             has_test ? &test : nullptr, has_truth ? &truth : nullptr, command.warnings, command.out_dir,
             *command.session);
  if (has_truth) fmt::print("recovered={}/{} ", truth.recovered, truth.planted);
  fmt::print("selected={} iterations={} objective={:.6g}", outcome.model.features.size(),
             outcome.fit.fista_iterations, outcome.model.objective);
  if (has_test) fmt::print(" accuracy={:.4f} auc={:.4f}", test.accuracy, test.auc);
  fmt::print(" model={}/model.fgm\n", command.out_dir);
  return 0;
}

int path_exclusive(SolverCommand& command) {
  const Config& config = command.config;
  const ExclusiveSettings settings = exclusive_settings_from_config(config, ConfigCommand::kPath);
  std::vector<ExclusiveOutcome> points = train_exclusive_path(*command.data.store, settings, command.budget);
  const bool has_test = !config.get_string("data.test").empty();
  std::vector<EvalResult> tests(points.size());
  for (size_t k = 0; k < points.size(); ++k) {
    points[k].model.config = config.dump();
    if (has_test) tests[k] = evaluate_test_file(config, points[k].model, command.budget, command.warnings);
  }
  create_output_directory(command.out_dir, "output.dir");
  const std::filesystem::path models = std::filesystem::path(command.out_dir) / "models";
  std::filesystem::create_directories(models);
  std::string csv = "lambda,selected,objective,fista_iterations,store_passes,working_set_size,converged,seconds,"
                    "test_accuracy,test_auc,model\n";
  JsonWriter j;
  begin_run_json(j, "exclusive", config, command.data, points.empty() ? std::map<std::string, std::string>{} : points.front().model.config);
  j.key("points").begin_array();
  for (size_t k = 0; k < points.size(); ++k) {
    const ExclusiveOutcome& o = points[k];
    const std::string name = fmt::format("models/lambda_{}.fgm", k);
    write_model((std::filesystem::path(command.out_dir) / name).string(), o.model);
    csv += fmt::format("{},{},{:.10g},{},{},{},{},{:.4f},{},{},{}\n", o.model.C, o.model.features.size(),
                       o.model.objective, o.fit.fista_iterations, o.fit.full_passes, o.fit.working_set,
                       o.fit.converged ? 1 : 0, o.seconds, has_test ? fmt::format("{:.6f}", tests[k].accuracy) : "",
                       has_test ? fmt::format("{:.6f}", tests[k].auc) : "", name);
    j.begin_object();
    j.key("model").value(name);
    j.key("selected").value(uint64_t(o.model.features.size()));
    if (has_test) {
      j.key("test_accuracy").value(tests[k].accuracy);
      j.key("test_auc").value(tests[k].auc);
    }
    write_exclusive_section(j, settings, o);
    j.end_object();
    spdlog::info("lambda={} selected={} objective={:.6g}", o.model.C, o.model.features.size(), o.model.objective);
  }
  j.end_array();
  write_warnings(j, command.warnings);
  j.end_object();
  write_file_atomic((std::filesystem::path(command.out_dir) / "path.csv").string(), csv);
  write_file_atomic((std::filesystem::path(command.out_dir) / "path.json").string(), j.str());
  command.session->finish();
  fmt::print("points={} path={}/path.csv\n", points.size(), command.out_dir);
  return 0;
}

}  // namespace fgm::cli
