// fgm path: models at several feature counts (or B / C values) in one run;
// writes <output.dir>/path.csv, path.json and one model per point.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/resume.h"
#include "cli/run_output.h"
#include "cli/runner.h"
#include "core/config.h"
#include "core/json_writer.h"
#include "core/messages.h"
#include "engine/fgm_path.h"
#include "engine/train_settings.h"

namespace fgm::cli {
namespace {

const char* kCsvHeader =
    "point,B,C,selected,nonzero,train_objective,test_accuracy,test_auc,validation_accuracy,validation_auc,"
    "debiased_test_accuracy,debiased_test_auc,debiased_validation_accuracy,debiased_validation_auc,"
    "seconds,apg_iterations,cv_accuracy,cv_accuracy_se,cv_auc,cv_auc_se\n";

int point_number(const PathOutcome& o, int index) { return index >= 0 ? o.points[size_t(index)].point : -1; }

void write_choice(JsonWriter& j, const PathOutcome& o, const PointChoice& c) {
  j.key("best_mean_point").value(static_cast<int64_t>(point_number(o, c.best)));
  j.key("one_se_point").value(static_cast<int64_t>(point_number(o, c.one_se)));
  j.key("best_mean").value(c.best_mean);
  j.key("best_se").value(c.best_se);
  j.key("threshold").value(c.threshold);
}

// "selection": the chosen point by the one-SE rule and by the best mean, for
// each criterion present, and which criterion chose.
void write_selection(JsonWriter& j, const PathOutcome& o, int folds) {
  const PathSelection& s = o.selection;
  j.key("selection").begin_object();
  j.key("criterion").value(s.criterion);
  j.key("rule").value("one_standard_error");
  j.key("metric").value("accuracy");
  j.key("chosen_point").value(static_cast<int64_t>(point_number(o, s.chosen)));
  if (s.has_cv) {
    j.key("cv").begin_object();
    j.key("folds").value(static_cast<int64_t>(folds));
    write_choice(j, o, s.cv);
    j.end_object();
  }
  if (s.has_validation) {
    j.key("validation").begin_object();
    j.key("rows").value(s.validation_rows);
    write_choice(j, o, s.validation);
    j.end_object();
  }
  j.end_object();
}

// Each fold's run in columns: per outer iteration and per point.
void write_folds(JsonWriter& j, const PathOutcome& o) {
  j.key("cv_folds").begin_array();
  for (const FoldRun& f : o.folds) {
    j.begin_object();
    j.key("fold").value(static_cast<int64_t>(f.fold));
    j.key("training_rows").value(f.training_rows);
    j.key("held_out_rows").value(f.held_out_rows);
    j.key("seconds").value(f.seconds);
    j.key("total_apg_iterations").value(f.total_apg_iterations);
    j.key("iterations").begin_object();
    write_column(j, "selected", f.selected, [](uint64_t v) { return v; });
    write_column(j, "objective", f.objective, [](double v) { return v; });
    write_column(j, "apg_iterations", f.apg_iterations, [](int v) { return static_cast<int64_t>(v); });
    j.end_object();
    j.key("points").begin_object();
    write_column(j, "held_out_accuracy", f.points, [](const HeldOutEval& p) { return p.accuracy; });
    write_column(j, "held_out_auc", f.points, [](const HeldOutEval& p) { return p.auc; });
    j.end_object();
    j.end_object();
  }
  j.end_array();
}

// Each run's outer iterations (one run for path.features, one per B/C value)
// in columns, one line per field.
void write_runs(JsonWriter& j, const PathOutcome& o) {
  j.key("runs").begin_array();
  for (const PathRunRecord& r : o.runs) {
    j.begin_object();
    j.key("B").value(r.B);
    j.key("C").value(r.C);
    j.key("stop_reason").value(r.stop_reason);
    j.key("iterations").begin_object();
    auto column = [&](const char* name, auto field) { write_column(j, name, r.iterations, field); };
    column("iter", [](const IterationRecord& it) { return static_cast<int64_t>(it.iter); });
    column("selected", [](const IterationRecord& it) { return it.selected; });
    column("added", [](const IterationRecord& it) { return it.added; });
    column("objective", [](const IterationRecord& it) { return it.objective; });
    column("rel_decrease", [](const IterationRecord& it) { return it.rel_decrease; });
    column("sip_violation", [](const IterationRecord& it) { return it.sip_violation; });
    column("score_seconds", [](const IterationRecord& it) { return it.score_seconds; });
    column("solve_seconds", [](const IterationRecord& it) { return it.solve_seconds; });
    column("apg_iterations", [](const IterationRecord& it) { return static_cast<int64_t>(it.apg_iterations); });
    column("apg_stop", [](const IterationRecord& it) { return it.apg_stop; });
    column("apg_relative_gap", [](const IterationRecord& it) { return it.apg_relative_gap; });
    column("candidates_scored", [](const IterationRecord& it) { return it.candidates_scored; });
    column("bytes_streamed", [](const IterationRecord& it) { return it.bytes_streamed; });
    j.end_object();
    j.end_object();
  }
  j.end_array();
}

// path.json's "distributed": ranks, partitions and rank 0's communication,
// in total, of the points' refits, of the cross-validation, and per FGM run
// of the full-data path and phase.
void write_distributed_path_section(JsonWriter& j, const DistributedPathOutcome& o) {
  j.key("distributed").begin_object();
  j.key("ranks").value(o.ranks);
  j.key("partitions").value(static_cast<uint64_t>(o.manifest.partitions));
  j.key("partitions_per_rank").value(static_cast<uint64_t>(o.own_partitions));
  j.key("communication_of").value("rank 0: payload bytes sent plus received");
  auto stats = [&](const CommunicationStats& c) {
    j.key("bytes").value(c.bytes);
    j.key("collectives").value(c.calls);
    j.key("seconds").value(c.seconds);
  };
  stats(o.total_communication);
  j.key("refits").begin_object();
  stats(o.refit_communication);
  j.end_object();
  j.key("cross_validation").begin_object();  // fold assignment, the folds' runs, held-out gathers
  stats(o.cv_communication);
  j.end_object();
  j.key("runs").begin_array();
  for (const auto& run : o.communication) write_communication_records(j, run);
  j.end_array();
  j.end_object();
}

// The result line.
std::string path_summary(const PathOutcome& outcome, const std::string& out_dir) {
  std::string line =
      fmt::format("points={} seconds={:.3f} csv={}/path.csv", outcome.points.size(), outcome.seconds, out_dir);
  if (outcome.best >= 0) {
    const auto& b = outcome.points[static_cast<size_t>(outcome.best)];
    line += fmt::format(" best_point={} best_selected={} best_validation_accuracy={:.4f}", b.point, b.selected,
                        b.validation.accuracy);
  }
  if (outcome.selection.chosen >= 0) {
    const auto& c = outcome.points[static_cast<size_t>(outcome.selection.chosen)];
    line += fmt::format(" chosen_point={} chosen_by={} chosen_selected={}", c.point, outcome.selection.criterion,
                        c.selected);
    if (outcome.selection.has_cv)
      line += fmt::format(" chosen_cv_accuracy={:.4f}+-{:.4f}", c.cv.accuracy.mean, c.cv.accuracy.se);
  }
  return line;
}

// The points' models (each atomic), then path.csv and path.json that name
// them, the report and the result line; the session closed. On a partitioned store path.json
// has the "distributed" section of `distributed`.
void write_path_outputs(SolverRun& run, PathOutcome& outcome, int folds, const DistributedPathOutcome* distributed) {
  const std::string& out_dir = run.out_dir;
  const auto config_dump = run.config.dump();
  // Models first (each atomic), then the table and log that name them.
  for (auto& p : outcome.points) {
    run.write_point_model(std::to_string(p.point), p.model);
    if (p.has_debiased) {
      p.debiased.config = config_dump;
      p.debiased.config["debiased"] = "true";
      write_model(fmt::format("{}/point-{}-debiased.fgm", out_dir, p.point), p.debiased);
    }
  }
  std::string csv = kCsvHeader;
  for (const auto& p : outcome.points) {
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3f},{},{},{},{},{}\n", p.point, p.B, p.C,
                       p.selected,
                       p.nonzero,
                       csv_cell(p.train_objective), csv_cell(p.test.accuracy), csv_cell(p.test.auc),
                       csv_cell(p.validation.accuracy), csv_cell(p.validation.auc),
                       csv_cell(p.test_debiased.accuracy), csv_cell(p.test_debiased.auc),
                       csv_cell(p.validation_debiased.accuracy), csv_cell(p.validation_debiased.auc),
                       p.seconds, p.apg_iterations, csv_cell(p.cv.accuracy.mean), csv_cell(p.cv.accuracy.se),
                       csv_cell(p.cv.auc.mean), csv_cell(p.cv.auc.se));
  }
  JsonWriter j;
  j.begin_object();
  j.key("solver").value("fgm");
  j.key("mode").value(outcome.mode);
  j.key("points").value(static_cast<uint64_t>(outcome.points.size()));
  j.key("best_point").value(static_cast<int64_t>(outcome.best >= 0 ? outcome.points[outcome.best].point : -1));
  j.key("total_apg_iterations").value(outcome.total_apg_iterations);
  j.key("total_gradient_evaluations").value(outcome.total_gradient_evaluations);
  j.key("seconds").value(outcome.seconds);
  j.key("ingest_seconds").value(run.ingest_seconds());
  j.key("peak_rss_bytes").value(peak_rss_bytes());
  write_selection(j, outcome, folds);
  write_runs(j, outcome);
  write_folds(j, outcome);
  if (distributed) write_distributed_path_section(j, *distributed);
  write_config_section(j, config_dump);
  run.finish_path(j, csv, path_summary(outcome, out_dir));
}

void log_point(const PathPoint& p) {
  spdlog::info("point {}: B={} C={} selected {} objective {:.6g} test acc {} (debiased {}) valid acc {} at {:.2f}s",
               p.point, p.B, p.C, p.selected, p.train_objective, csv_cell(p.test.accuracy),
               csv_cell(p.test_debiased.accuracy), csv_cell(p.validation.accuracy), p.seconds);
}

void log_fold_start(const FoldRun& f, int folds) {
  spdlog::info("cv fold {}/{}: training on {} rows, {} held out", f.fold, folds, f.training_rows, f.held_out_rows);
}

void log_fold_end(const FoldRun& f, int folds) {
  std::string acc;
  for (const auto& p : f.points) acc += (acc.empty() ? "" : " ") + csv_cell(p.accuracy);
  spdlog::info("cv fold {}/{}: {} outer iterations in {:.2f}s; held-out accuracy by point: {}", f.fold, folds,
               f.selected.size(), f.seconds, acc);
}

// fgm path's settings (path.* and the fgm.* of every run), checked.
PathSettings path_settings_from_config(const Config& config) {
  PathSettings ps;
  ps.base = train_settings_from_config(config);
  for (double v : config.get_list("path.features")) ps.feature_counts.push_back(static_cast<uint64_t>(v));
  for (double v : config.get_list("path.B")) ps.B_values.push_back(static_cast<uint64_t>(v));
  ps.C_values = config.get_list("path.C");
  ps.debias = config.get_bool("path.debias");
  ps.debias_C = config.get_float("path.debias_C");
  ps.test_path = config.get_string("data.test");
  ps.validation_path = config.get_string("data.validation");
  ps.folds = static_cast<int>(config.get_int("path.folds"));
  ps.fold_seed = static_cast<uint64_t>(config.get_int("path.fold_seed"));
  validate_path_settings(ps);
  return ps;
}

}  // namespace

void check_fgm_config(const Config& config, RunKind kind, bool partitioned) {
  if (kind == RunKind::kPath) path_settings_from_config(config);
}

// Before the output directory: the folds fit the rows, the counts the width;
// a multi-class partitioned store is refused (as on one store).
void check_fgm_data(SolverRun& run) {
  if (run.kind != RunKind::kPath) return;
  const PathSettings ps = path_settings_from_config(run.config);
  if (run.partitioned()) check_partitioned_path_data(run.comm, run.dir, ps.folds, run.budget);
  else validate_folds(ps, *run.data->store);
  // Linear features without groups: a count beyond the store's width can
  // never be reached (issue 23 item 9).
  if (!ps.feature_counts.empty() && ps.base.space.kind == "linear" && ps.base.space.groups_path.empty())
    run.refuse_counts_beyond_width("path.features", ps.feature_counts.back());
}

// solver = "fgm": the path (engine/fgm_path.h). On a partitioned store every
// rank runs it; rank 0 holds the resume checkpoint, evaluates the points and
// writes every output.
int path_fgm_run(SolverRun& run) {
  PathSettings ps = path_settings_from_config(run.config);
  ps.base.warnings = &run.warnings;
  ResumeSession* session = run.session.get();
  if (session && run.partitioned())
    spdlog::info("path on partitioned store {} with {} rank(s)", run.dir, run.comm.size());
  std::optional<ResumeCheckpoint> saved = run.resume_checkpoint();
  PathHooks hooks;
  if (saved) {
    hooks.resume = &saved->path;
    hooks.resume_train = saved->train ? &*saved->train : nullptr;
    const uint64_t runs = std::max({ps.feature_counts.empty() ? 0 : uint64_t{1}, uint64_t{ps.B_values.size()},
                                    uint64_t{ps.C_values.size()}});
    if (session)
      spdlog::info("{}", msg::resuming_from(session->file(), (hooks.resume_train ? saved->train->iterations.size() : 0) + 1,
                                            fmt::format("path run {} of {} with {} points done",
                                                        std::min(saved->path.run + 1, runs), runs,
                                                        saved->path.points.size()),
                                            hooks.resume_train ? saved->train->apg.w.size() : 0));
  }
  if (session) {
    hooks.on_point = log_point;
    hooks.on_fold_start = log_fold_start;
    hooks.on_fold_end = log_fold_end;
    hooks.on_progress = [&](const PathProgress& progress, const TrainProgress* train) {
      session->save(train, &progress);
    };
  }
  DistributedPathOutcome outcome =
      run_fgm_path(run.comm, run.partitioned() ? nullptr : run.data->store.get(), run.dir, ps, run.budget, hooks);
  if (!session) return 0;
  write_path_outputs(run, outcome.path, ps.folds, run.partitioned() ? &outcome : nullptr);
  return 0;
}

}  // namespace fgm::cli
