// fgm train / fgm path with solver = "exclusive" (engine/exclusive_trainer.h).
// train: model.fgm (a linear model, with a bias under exclusive.bias; one-vs-rest classes on a
// multi-class store) + run.json with an "exclusive" section (per class). path: one model per exclusive.path_lambda value
// (point-<k>.fgm), path.csv, path.json and report.html (output.report). Test
// data is evaluated before anything is written, so a bad test file leaves no output.
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/run_output.h"
#include "cli/runner.h"
#include "core/error.h"
#include "core/json_writer.h"
#include "core/messages.h"
#include "engine/distributed_exclusive.h"
#include "engine/evaluate.h"
#include "engine/exclusive_trainer.h"
#include "engine/path_selection.h"

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
  j.key("store_pass_seconds").value(o.fit.full_pass_seconds);
  j.key("warm_started").value(o.warm_started);
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

// Warns of fits that stopped before their stopping rule held: `of_what`
// ("classes", "λ values") counts them; null: the one binary fit.
void warn_not_converged(RunWarnings& warnings, const std::vector<ExclusiveOutcome>& fits, const char* of_what,
                        const ExclusiveSettings& settings, const char* note = "") {
  uint64_t not_converged = 0;
  for (const auto& o : fits) not_converged += !o.fit.converged;
  if (not_converged == 0) return;
  warnings.add("exclusive_not_converged",
               fmt::format("{} stopped at exclusive.max_iterations = {} (or the working set's round limit) before "
                           "{} stopping rule held{}",
                           of_what ? fmt::format("{} of {} {}", not_converged, fits.size(), of_what)
                                   : std::string("the exclusive solver"),
                           settings.fista.max_iterations, of_what ? "the" : "its", note));
}

// run.json of a binary fit, after its opening.
void write_binary_run(JsonWriter& j, const ExclusiveSettings& settings, const ExclusiveOutcome& o) {
  write_exclusive_section(j, settings, o);
  write_rounds(j, o);
  write_selected_features(j, o.model.features, o.model.index_base);
  j.key("bias").value(o.model.bias);
}

// run.json of a one-vs-rest fit, after its opening: as the FGM solver's
// multi-class run ("classes": each class's rounds, features and objective),
// which the report reads. `labels`, `rows`: each class's label and row count.
void write_multiclass_run(JsonWriter& j, const ExclusiveSettings& settings, const std::vector<ExclusiveOutcome>& fits,
                          const Model& model, const std::vector<double>& labels, const std::vector<uint64_t>& rows,
                          const EvalResult* test) {
  uint64_t selected = 0;
  for (const auto& c : model.classes) selected += c.features.size();
  j.key("multiclass").value("ovr");
  j.key("iterations").begin_array().end_array();  // per class, below
  j.key("classes").begin_array();
  for (size_t c = 0; c < fits.size(); ++c) {
    const ExclusiveOutcome& o = fits[c];
    j.begin_object();
    j.key("label").value(labels[c]);
    j.key("rows").value(rows[c]);
    write_rounds(j, o);
    j.key("objective").value(o.model.objective);
    write_selected_features(j, o.model.features, model.index_base);
    j.key("train_seconds").value(o.seconds);
    if (test) j.key("test_auc").value(test->class_auc[c]);
    write_exclusive_section(j, settings, o);
    j.end_object();
  }
  j.end_array();
  j.key("selected_total").value(selected);
  j.key("bias").value(0.0);
}

// The data of the fits: the store, or this rank's partitions (every rank fits).
std::unique_ptr<ExclusiveData> open_data(SolverRun& run, const ExclusiveSettings& settings,
                                         DistributedExclusiveOutcome& out) {
  if (!run.partitioned()) return open_exclusive_store(*run.data->store, settings, run.budget);
  return open_exclusive_partitions(run.comm, run.dir, settings, run.budget, out);
}

}  // namespace

// solver = "exclusive" (engine/exclusive_trainer.h, engine/distributed_exclusive.h).
int train_exclusive(SolverRun& run) {
  const Config& config = run.config;
  const ExclusiveSettings settings = exclusive_settings_from_config(config, ConfigCommand::kTrain);
  if (run.comm.rank() == 0)
    spdlog::info("exclusive{}: algorithm={} loss={} lambda={} threads={}",
                 run.partitioned() ? fmt::format(" on partitioned store {} with {} rank(s)", run.dir, run.comm.size())
                                   : "",
                 exclusive::algorithm_name(settings.fista.algorithm), exclusive::loss_name(settings.fista.loss),
                 settings.fista.lambda, settings.threads);
  DistributedExclusiveOutcome outcome;
  fgm::train_exclusive(*open_data(run, settings, outcome), settings, run.budget, outcome);
  Model& model = outcome.model;
  if (!run.gather_outputs(outcome.budget_peak)) return 0;
  const bool multiclass = !model.classes.empty();
  warn_not_converged(run.warnings, outcome.classes, multiclass ? "classes" : nullptr, settings);
  const std::vector<ModelFeature> selected = all_features(model);
  return run.finish_train(
      {.solver = "exclusive",
       .model = &model,
       .partitioned = &outcome,
       .budget_peak = outcome.budget_peak,
       .train_seconds = outcome.seconds,
       .sections =
           [&](JsonWriter& j, const EvalResult* test) {
             if (multiclass)
               write_multiclass_run(j, settings, outcome.classes, model, outcome.class_values, outcome.class_counts,
                                    test);
             else
               write_binary_run(j, settings, outcome.classes.front());
           },
       .summary = multiclass ? fmt::format("classes={} selected={} objective={:.6g}", model.classes.size(),
                                           selected.size(), model.objective)
                             : fmt::format("selected={} iterations={} objective={:.6g}", model.features.size(),
                                           outcome.classes.front().fit.fista_iterations, model.objective)});
}

namespace {

// data.validation scored with every point's model and the point chosen as
// fgm path chooses (engine/path_selection.h): the sparsest point whose
// validation accuracy is within one binomial standard error of the best;
// ties in selected features go to the larger λ (more regularised).
struct ValidationChoice {
  std::vector<EvalResult> points;
  PointChoice choice;
  uint64_t chosen_groups = 0;  // the group count of the chosen point's fit
};

ValidationChoice choose_on_validation(SolverRun& run, const std::vector<const Model*>& models) {
  const std::string path = run.config.get_string("data.validation");
  ValidationChoice v;
  std::vector<uint64_t> selected, no_B(models.size(), 0);
  std::vector<double> inverse_lambda, accuracy, se;
  bool warned = false;
  for (const Model* m : models) {
    v.points.push_back(evaluate_file(path, *m, false, run.budget));
    const EvalResult& e = v.points.back();
    if (e.beyond.features > 0 && !warned)  // once: every point reads the same file
      warned = true, run.warnings.add("validation_features_beyond_model",
                                      msg::wider_than_model(path, e.beyond.first_line,
                                                            e.beyond.first_index + m->index_base, m->n_features));
    selected.push_back(m->features.size());
    inverse_lambda.push_back(1.0 / m->C);  // simplicity_order: smaller C first = larger λ first
    accuracy.push_back(e.accuracy);
    se.push_back(binomial_se(e.accuracy, e.rows));
  }
  v.choice = choose_point(accuracy, se, simplicity_order(selected, no_B, inverse_lambda));
  return v;
}

void write_choice(JsonWriter& j, const ValidationChoice& v) {
  j.key("rows").value(v.points.empty() ? uint64_t(0) : v.points.front().rows);
  j.key("best_mean_point").value(static_cast<int64_t>(v.choice.best));
  j.key("one_se_point").value(static_cast<int64_t>(v.choice.one_se));
  if (v.choice.one_se >= 0) j.key("one_se_groups").value(v.chosen_groups);
  j.key("best_mean").value(v.choice.best_mean);
  j.key("best_se").value(v.choice.best_se);
  j.key("threshold").value(v.choice.threshold);
}

// "selection": the point chosen on data.validation, and (exclusive.debias)
// the refit chosen by the same rule on its own validation accuracy.
void write_validation_selection(JsonWriter& j, ValidationChoice& v, ValidationChoice* debiased,
                                const std::vector<ExclusiveOutcome>& points) {
  auto groups_of = [&](ValidationChoice& c) {
    if (c.choice.one_se >= 0) c.chosen_groups = points[static_cast<size_t>(c.choice.one_se)].group_count;
  };
  groups_of(v);
  if (debiased) groups_of(*debiased);
  j.key("selection").begin_object();
  j.key("criterion").value("validation");
  j.key("rule").value("one_standard_error");
  j.key("metric").value("accuracy");
  j.key("chosen_point").value(static_cast<int64_t>(v.choice.one_se));
  if (v.choice.one_se >= 0) j.key("chosen_groups").value(v.chosen_groups);
  j.key("validation").begin_object();
  write_choice(j, v);
  j.end_object();
  if (debiased) {
    j.key("debiased").begin_object();
    write_choice(j, *debiased);
    j.end_object();
  }
  j.end_object();
}

// Test metrics of every point (and data.validation's, with the chosen point),
// then point-<k>.fgm, path.csv, path.json and the report.
int write_path(SolverRun& run, const ExclusiveSettings& settings, std::vector<ExclusiveOutcome>& points,
               const PartitionedRun* partitioned) {
  const Config& config = run.config;
  const bool has_test = !config.get_string("data.test").empty();
  const bool has_validation = !config.get_string("data.validation").empty();
  std::vector<EvalResult> tests(points.size());
  // Without data.validation, best_point is the best test accuracy (an oracle
  // figure, as SIFS's path) and the report's featured point; with it, the
  // best validation accuracy, and the report features the chosen point.
  int64_t best = -1;
  for (size_t k = 0; k < points.size() && has_test; ++k) {
    tests[k] = evaluate_test_file(config, points[k].model, run.budget, run.warnings);
    if (best < 0 || tests[k].accuracy > tests[static_cast<size_t>(best)].accuracy) best = static_cast<int64_t>(k);
  }
  std::vector<const Model*> models, debiased_models;
  for (const ExclusiveOutcome& o : points) {
    models.push_back(&o.model);
    if (o.has_debiased) debiased_models.push_back(&o.debiased);
  }
  const bool has_debiased = settings.debias;
  std::vector<EvalResult> debiased_tests(points.size());
  for (size_t k = 0; has_debiased && k < points.size(); ++k) {
    points[k].debiased.config = config.dump();
    points[k].debiased.config["debiased"] = "true";
    if (has_test) debiased_tests[k] = evaluate_test_file(config, points[k].debiased, run.budget, run.warnings);
    if (!points[k].debias_solve.converged)
      run.warnings.add("debias_gap_above_tolerance",
                       msg::exclusive_debias_gap_above_tolerance(static_cast<int>(k), points[k].debias_solve.iterations,
                                                                 points[k].debias_solve.relative_gap));
  }
  ValidationChoice validation, debiased_validation;
  if (has_validation) {
    validation = choose_on_validation(run, models);
    best = validation.choice.best;
    if (has_debiased) debiased_validation = choose_on_validation(run, debiased_models);
  }
  warn_not_converged(run.warnings, points, "λ values", settings, " (path.csv: converged = 0)");
  // path.csv: numbers only (the report reads it); point k's model is point-<k>.fgm.
  std::string csv = "point,lambda,selected,train_objective,fista_iterations,store_passes,working_set_size,converged,"
                    "warm_started,point_seconds,seconds,test_accuracy,test_auc,validation_accuracy,validation_auc,"
                    "debiased_test_accuracy,debiased_test_auc,debiased_validation_accuracy,debiased_validation_auc,"
                    "groups\n";
  double cumulative = 0;
  for (size_t k = 0; k < points.size(); ++k) {
    const ExclusiveOutcome& o = points[k];
    cumulative += o.seconds;
    csv += fmt::format("{},{:.17g},{},{:.17g},{},{},{},{},{},{:.6f},{:.6f}", k, o.model.C, o.model.features.size(),
                       o.model.objective, o.fit.fista_iterations, o.fit.full_passes, o.fit.working_set,
                       o.fit.converged ? 1 : 0, o.warm_started ? 1 : 0, o.seconds, cumulative);
    // Accuracy and AUC of point k in `metrics` when `has` (then it has every point's), else two empty cells.
    auto cells = [k](bool has, const std::vector<EvalResult>& metrics) {
      return has ? fmt::format(",{:.6f},{:.6f}", metrics[k].accuracy, metrics[k].auc) : std::string(",,");
    };
    csv += cells(has_test, tests) + cells(has_validation, validation.points) +
           cells(has_debiased && has_test, debiased_tests) +
           cells(has_debiased && has_validation, debiased_validation.points) + fmt::format(",{}\n", o.group_count);
  }
  JsonWriter j;
  run.begin_json(j, "exclusive", config.dump(), partitioned);
  j.key("mode").value("lambda");
  j.key("best_point").value(best);
  if (has_validation)
    write_validation_selection(j, validation, has_debiased ? &debiased_validation : nullptr, points);
  j.key("warm_start").value(settings.path_warm_start);
  j.key("seconds").value(cumulative);
  j.key("points").begin_array();
  for (size_t k = 0; k < points.size(); ++k) {
    const ExclusiveOutcome& o = points[k];
    j.begin_object();
    j.key("model").value(fmt::format("point-{}.fgm", k));
    j.key("selected").value(uint64_t(o.model.features.size()));
    if (has_test) {
      j.key("test_accuracy").value(tests[k].accuracy);
      j.key("test_auc").value(tests[k].auc);
    }
    if (has_validation) {
      j.key("validation_accuracy").value(validation.points[k].accuracy);
      j.key("validation_auc").value(validation.points[k].auc);
    }
    if (has_debiased) {
      j.key("debiased").begin_object();
      j.key("model").value(fmt::format("point-{}-debiased.fgm", k));
      j.key("C").value(settings.debias_C);
      j.key("apg_iterations").value(static_cast<int64_t>(o.debias_solve.iterations));
      j.key("relative_gap").value(o.debias_solve.relative_gap);
      j.key("converged").value(o.debias_solve.converged);
      if (has_test) j.key("test_accuracy").value(debiased_tests[k].accuracy);
      if (has_validation) j.key("validation_accuracy").value(debiased_validation.points[k].accuracy);
      j.end_object();
    }
    write_exclusive_section(j, settings, o);
    j.end_object();
  }
  j.end_array();
  for (size_t k = 0; k < points.size(); ++k) {
    run.write_point_model(std::to_string(k), points[k].model);
    if (has_debiased)  // its config keeps debiased = true
      write_model((std::filesystem::path(run.out_dir) / fmt::format("point-{}-debiased.fgm", k)).string(),
                  points[k].debiased);
  }
  std::string summary = fmt::format("points={} seconds={:.3f}", points.size(), cumulative);
  if (has_validation && validation.choice.one_se >= 0) {
    const size_t c = static_cast<size_t>(validation.choice.one_se);
    summary += fmt::format(" chosen_point={} chosen_lambda={:.6g} chosen_selected={} chosen_validation_accuracy={:.4f}",
                           c, points[c].model.C, points[c].model.features.size(), validation.points[c].accuracy);
    if (!settings.path_random_groups.empty()) summary += fmt::format(" chosen_groups={}", points[c].group_count);
  }
  if (has_debiased && has_validation && debiased_validation.choice.one_se >= 0) {
    const size_t c = static_cast<size_t>(debiased_validation.choice.one_se);
    summary += fmt::format(" chosen_debiased_point={} chosen_debiased_validation_accuracy={:.4f}", c,
                           debiased_validation.points[c].accuracy);
  }
  run.finish_path(j, csv, fmt::format("{} path={}/path.csv", summary, run.out_dir));
  return 0;
}

}  // namespace

int path_exclusive(SolverRun& run) {
  const ExclusiveSettings settings = exclusive_settings_from_config(run.config, ConfigCommand::kPath);
  if (settings.debias && run.partitioned())
    throw Error(ErrorKind::kConfig,
                fmt::format("{}exclusive.debias = true needs one store (the refit gathers its columns in memory); {} "
                            "is partitioned",
                            run.config.where_set("exclusive.debias"), run.dir));
  DistributedExclusiveOutcome outcome;
  // A line per fitted point (rank 0), as the FGM path logs its points: a long path is not silent.
  auto done = [&](size_t k, size_t total, const ExclusiveOutcome& o) {
    if (run.comm.rank() != 0) return;
    const bool licp = settings.fista.algorithm == exclusive::Algorithm::kLicp;
    spdlog::info("point {}/{}: groups={} lambda={} selected={} objective={:.6g}{} {} working_set={} iterations={} "
                 "in {:.2f}s",
                 k + 1, total, o.group_count, o.model.C, o.model.features.size(), o.model.objective,
                 licp ? fmt::format(" gap={:.3g}", o.fit.last_solve.duality_gap) : "",
                 o.fit.converged ? "converged" : "NOT converged", o.fit.working_set, o.fit.fista_iterations,
                 o.seconds);
  };
  fgm::path_exclusive(*open_data(run, settings, outcome), settings, run.budget, outcome, done);
  if (!run.gather_outputs(outcome.budget_peak)) return 0;
  return write_path(run, settings, outcome.classes, &outcome);
}

}  // namespace fgm::cli
