// fgm train / fgm path with solver = "sifs" (engine/sifs_run.h).
//
// fgm train: one model at β = sifs.beta_ratio·β_max, α = sifs.alpha_ratio·α_max(β),
// reached from the closed form at α_max(β) in sifs.alpha_points log-spaced α
// steps (each the next one's screening reference); writes model.fgm and run.json.
// fgm path: the grid of Algorithm 1 (sifs.beta_* × sifs.alpha_*); path.csv has
// one row per point, path.json the totals, point-<k>.fgm the model of the
// featured point (best test accuracy, else the last); with sifs.compare the same grid is
// solved again with screening = none and path.json records the speedup and
// the largest objective difference between the two.
#include <chrono>
#include <optional>
#include <cmath>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/run_output.h"
#include "cli/runner.h"
#include "core/clock.h"
#include "core/json_writer.h"
#include "engine/distributed_sifs.h"
#include "engine/evaluate.h"
#include "engine/sifs_run.h"

namespace fgm::cli {
namespace {

void write_point(JsonWriter& j, const SifsPoint& p) {
  j.begin_object();
  j.key("beta").value(p.beta);
  j.key("alpha").value(p.alpha);
  j.key("closed_form").value(p.closed_form);
  j.key("nonzeros").value(p.nonzeros);
  j.key("objective").value(p.objective);
  j.key("gap").value(p.gap);
  j.key("converged").value(p.converged);
  j.key("epochs").value(static_cast<int64_t>(p.epochs));
  j.key("features_screened").value(p.weights_screened);
  j.key("samples_screened_R").value(p.samples_in_R);
  j.key("samples_screened_L").value(p.samples_in_L);
  j.key("reduced_features").value(p.reduced_features);
  j.key("reduced_samples").value(p.reduced_samples);
  j.key("screening_seconds").value(p.screening_seconds);
  j.key("extract_seconds").value(p.extract_seconds);
  j.key("solve_seconds").value(p.solve_seconds);
  j.end_object();
}

struct PathTotals {
  std::vector<SifsPoint> points;
  double seconds = 0, screening = 0, extract = 0, solve = 0;
  double cpu_seconds = 0;  // process CPU time of the grid (insensitive to other jobs' load at engine.threads = 1)
  bool held = false;       // the nonzeros were held column-major in memory
  uint64_t not_converged = 0;
  uint64_t weights = 0, coordinates = 0;  // K·m entries of w, valid dual coordinates
  SifsPassCounters passes;
};

// fgm train's model: from the closed form at α_max(β), sifs.alpha_points
// log-spaced α steps down to sifs.alpha_ratio·α_max (each the next one's reference).
struct TrainedPoint {
  double beta = 0, alpha_max = 0;
  SifsPoint last;
  SifsReference solution;
};

TrainedPoint train_point(SifsSolver& solver, const Config& config) {
  const SifsSettings& settings = solver.settings();
  TrainedPoint out;
  out.beta = config.get_float("sifs.beta_ratio") * solver.beta_max();
  out.solution = solver.closed_form(out.beta);
  out.alpha_max = out.solution.alpha;
  out.last.closed_form = true;
  out.last.beta = out.beta;
  out.last.alpha = out.alpha_max;
  out.last.objective = solver.closed_form_objective(out.solution);
  if (out.alpha_max > 0) {
    for (double ratio : log_spaced(1.0, config.get_float("sifs.alpha_ratio"), std::max(2, settings.alpha_points))) {
      if (ratio == 1.0) continue;
      SifsReference next;
      out.last = solver.solve(out.solution, ratio * out.alpha_max, next);
      out.solution = std::move(next);
    }
  }
  return out;
}

// run.json after "data"/"config": iterations (none), the sifs section, the objective, the features.
void write_train_sections(JsonWriter& j, const SifsSolver& solver, const TrainedPoint& trained,
                          const SifsLayout& layout, const Model& model) {
  j.key("iterations").begin_array().end_array();
  j.key("sifs").begin_object();
  j.key("beta_max").value(solver.beta_max());
  j.key("alpha_max").value(trained.alpha_max);
  j.key("classes").value(static_cast<uint64_t>(layout.is_multiclass() ? layout.blocks() : 2));
  j.key("point");
  write_point(j, trained.last);
  j.end_object();
  j.key("objective").value(trained.last.objective);
  if (!model.multiclass()) write_selected_features(j, model.features, model.index_base);
}

// The featured point's model (the report shows it; `fgm predict` reads it):
// the best test accuracy, or the last point without data.test.
struct FeaturedPoint {
  explicit FeaturedPoint(const Config& config) : has_test(!config.get_string("data.test").empty()) {}
  void offer(Model model, const Config& config, MemoryBudget& budget) {
    const int64_t k = static_cast<int64_t>(accuracy.size());
    if (has_test) {
      if (!test_rows) test_rows = load_labeled_rows(config.get_string("data.test"), model, budget, test_memory);
      const EvalResult test = evaluate_rows(*test_rows, model, false, budget);
      accuracy.push_back(test.accuracy);
      auc.push_back(test.auc);
      if (best >= 0 && !(accuracy.back() > accuracy[static_cast<size_t>(best)])) return;
    } else {
      accuracy.push_back(NAN);
      auc.push_back(NAN);
    }
    best = k;
    featured = std::move(model);
  }
  bool has_test;
  Reservation test_memory;
  std::optional<LabeledRows> test_rows;
  std::vector<double> accuracy, auc;
  Model featured;
  int64_t best = -1;
};

// The data: the store, or this rank's partitions (every rank runs the same
// solves, rank 0 writes the outputs).
std::unique_ptr<SifsBackend> open_data(SolverRun& run, PartitionedRun& partitioned) {
  if (!run.partitioned()) return open_sifs_store(*run.data->store, run.config, run.budget);
  std::unique_ptr<SifsBackend> data = open_sifs_partitions(run.comm, run.dir, run.config, run.budget, partitioned);
  spdlog::info("sifs on partitioned store {} with {} rank(s): {} rows, {} non-empty features, {} partitions", run.dir,
               run.comm.size(), partitioned.manifest.n_rows, data->passes().columns(), partitioned.manifest.partitions);
  return data;
}

// The grid of `settings`, timed with its setup; `fp` (rank 0) is offered
// each point's model unless this is the baseline.
PathTotals run_grid(SolverRun& run, SifsBackend& data, const SifsSettings& settings, FeaturedPoint* fp, int& step) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t cpu0 = std::clock();
  std::unique_ptr<SifsSolver> solver = data.solver(settings);
  data.record(step++, "setup");
  PathTotals totals;
  solver->run_path([&](const SifsPoint& p, const SifsReference& sol) {
    totals.points.push_back(p);
    totals.screening += p.screening_seconds;
    totals.extract += p.extract_seconds;
    totals.solve += p.solve_seconds;
    totals.not_converged += !p.converged;
    data.record(step++, fp ? "point" : "baseline point");
    if (fp && run.comm.rank() == 0) fp->offer(data.model(sol, p.objective), run.config, run.budget);
  });
  totals.seconds = seconds_since(t0);
  totals.cpu_seconds = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
  totals.held = data.holds_columns();
  totals.passes = data.counters();
  totals.weights = data.passes().weights();
  totals.coordinates = data.passes().total_valid_coordinates();
  return totals;
}

// path.csv, path.json, the featured model and the report (`partitioned`: on a partitioned store).
void write_path_outputs(SolverRun& run, const SifsSettings& settings, const PathTotals& screened,
                        const std::optional<PathTotals>& baseline, const FeaturedPoint& fp,
                        const PartitionedRun* partitioned) {
  const Config& config = run.config;
  RunWarnings& warnings = run.warnings;
  if (screened.not_converged > 0)
    warnings.add("sifs_not_converged",
                     fmt::format("{} grid points stopped at sifs.max_epochs = {} above sifs.tol = {:.3g} (path.csv: "
                                 "converged = 0)",
                                 screened.not_converged, settings.max_epochs, settings.tol));

  // path.csv: one row per point (point and selected are the report's x axes; seconds accumulate).
  std::string csv =
      "point,beta,alpha,beta_ratio,alpha_ratio,closed_form,selected,train_objective,gap,converged,epochs,"
      "features_screened,samples_screened_R,samples_screened_L,reduced_features,reduced_samples,reduced_nnz,"
      "screening_seconds,extract_seconds,solve_seconds,seconds,test_accuracy,test_auc\n";
  double cumulative = 0;
  for (size_t k = 0; k < screened.points.size(); ++k) {
    const SifsPoint& p = screened.points[k];
    cumulative += p.screening_seconds + p.extract_seconds + p.solve_seconds;
    csv += fmt::format("{},{:.17g},{:.17g},{:.17g},{:.17g},{},{},{:.17g},{:.6g},{},{},{},{},{},{},{},{},{:.6f},{:.6f},{:.6f},{:.6f}",
                       k, p.beta, p.alpha, p.beta_ratio, p.alpha_ratio, p.closed_form ? 1 : 0, p.nonzeros,
                       p.objective, p.gap, p.converged ? 1 : 0, p.epochs, p.weights_screened, p.samples_in_R,
                       p.samples_in_L, p.reduced_features, p.reduced_samples, p.reduced_nnz, p.screening_seconds,
                       p.extract_seconds, p.solve_seconds, cumulative);
    csv += fp.has_test ? fmt::format(",{:.6f},{:.6f}\n", fp.accuracy[k], fp.auc[k]) : ",,\n";
  }

  JsonWriter j;
  run.begin_json(j, "sifs", config.dump(), partitioned);
  j.key("mode").value("sifs");
  // The largest test accuracy (an oracle figure: chosen on the test set), -1 without data.test.
  j.key("best_point").value(fp.has_test ? fp.best : int64_t{-1});
  auto totals = [&](const PathTotals& t) {
    j.begin_object();
    j.key("screening").value(screening_name(&t == &screened ? settings.screening : SifsScreening::kNone));
    j.key("points").value(static_cast<uint64_t>(t.points.size()));
    uint64_t epochs = 0, visited = 0, solved = 0;
    for (const SifsPoint& p : t.points)
      if (!p.closed_form) epochs += static_cast<uint64_t>(p.epochs), visited += p.reduced_nnz, ++solved;
    // Per solved point: SDCA epochs and the nonzeros one epoch visits (the solve's cost is about their product).
    j.key("mean_epochs").value(solved ? static_cast<double>(epochs) / solved : 0.0);
    j.key("mean_solve_nnz").value(solved ? static_cast<double>(visited) / solved : 0.0);
    j.key("seconds").value(t.seconds);
    j.key("cpu_seconds").value(t.cpu_seconds);
    j.key("columns_held").value(t.held);
    j.key("screening_seconds").value(t.screening);
    j.key("extract_seconds").value(t.extract);
    j.key("solve_seconds").value(t.solve);
    j.key("not_converged").value(t.not_converged);
    j.key("column_passes").value(static_cast<int64_t>(t.passes.column_passes));
    j.key("row_passes").value(static_cast<int64_t>(t.passes.row_passes));
    j.key("extract_passes").value(static_cast<int64_t>(t.passes.extract_passes));
    j.key("row_norm_reuses").value(static_cast<int64_t>(t.passes.norm_reuses));
    j.key("row_passes_skipped").value(static_cast<int64_t>(t.passes.skipped_passes));
    j.key("bytes_streamed").value(t.passes.bytes_streamed);
    j.end_object();
  };
  j.key("weights").value(screened.weights);
  j.key("coordinates").value(screened.coordinates);
  j.key("totals");
  totals(screened);
  if (baseline) {
    j.key("baseline");
    totals(*baseline);
    double worst = 0;
    for (size_t k = 0; k < screened.points.size(); ++k)
      worst = std::max(worst, std::abs(screened.points[k].objective - baseline->points[k].objective) -
                                  screened.points[k].gap - baseline->points[k].gap);
    j.key("speedup").value(baseline->seconds / screened.seconds);
    j.key("cpu_speedup").value(baseline->cpu_seconds / screened.cpu_seconds);
    j.key("solve_speedup").value((baseline->extract + baseline->solve) /
                                 (screened.screening + screened.extract + screened.solve));
    j.key("max_objective_excess_over_gaps").value(worst);
  }
  run.write_point_model(std::to_string(fp.best), fp.featured);
  run.finish_path(j, csv,
                  fmt::format("solver=sifs points={} seconds={:.3f}{} path={}/path.csv", screened.points.size(),
                              screened.seconds,
                              baseline ? fmt::format(" baseline_seconds={:.3f} speedup={:.2f}", baseline->seconds,
                                                     baseline->seconds / screened.seconds)
                                       : "",
                              run.out_dir));
}

}  // namespace

// solver = "sifs" (engine/sifs_run.h; on a partitioned store every rank
// runs the same solve over engine/distributed_sifs.h, rank 0 writes the outputs).
int train_sifs(SolverRun& run) {
  const Config& config = run.config;
  const SifsSettings settings = sifs_settings_from_config(config);
  const auto t0 = std::chrono::steady_clock::now();
  PartitionedRun partitioned;
  std::unique_ptr<SifsBackend> data = open_data(run, partitioned);
  std::unique_ptr<SifsSolver> solver = data->solver(settings);
  data->record(0, "setup");
  TrainedPoint trained = train_point(*solver, config);
  data->record(1, "train");
  const double train_seconds = seconds_since(t0);
  if (!trained.last.converged)
    run.warnings.add("sifs_not_converged", fmt::format("the solve stopped at sifs.max_epochs = {} with duality gap "
                                                       "{:.3g} > sifs.tol = {:.3g}",
                                                       settings.max_epochs, trained.last.gap, settings.tol));
  Model model = data->model(trained.solution, trained.last.objective);
  if (!run.gather_outputs(run.budget.peak())) return 0;
  return run.finish_train(
      {.solver = "sifs",
       .model = &model,
       .partitioned = &partitioned,
       .budget_peak = run.budget.peak(),
       .train_seconds = train_seconds,
       .sections =
           [&](JsonWriter& j, const EvalResult*) {
             write_train_sections(j, *solver, trained, data->passes().layout(), model);
             if (!run.partitioned()) return;
             j.key("solver_reductions").value(static_cast<const DistributedSifsSolver&>(*solver).reductions());
             j.key("total_bytes_streamed")
                 .value(static_cast<DistributedSifsPasses&>(data->passes()).counters().bytes_streamed);
           },
       .summary = fmt::format("solver=sifs beta={:.6g} alpha={:.6g} nonzeros={} objective={:.6g} gap={:.3g}",
                              trained.beta, trained.last.alpha, trained.last.nonzeros, trained.last.objective,
                              trained.last.gap)});
}

int path_sifs(SolverRun& run) {
  const Config& config = run.config;
  const SifsSettings settings = sifs_settings_from_config(config);
  PartitionedRun partitioned;
  std::unique_ptr<SifsBackend> data = open_data(run, partitioned);
  FeaturedPoint fp(config);
  int step = 0;
  const PathTotals screened = run_grid(run, *data, settings, &fp, step);
  std::optional<PathTotals> baseline;
  if (config.get_bool("sifs.compare") && settings.screening != SifsScreening::kNone) {  // the grid unscreened
    SifsSettings none = settings;
    none.screening = SifsScreening::kNone;
    baseline = run_grid(run, *data, none, nullptr, step);
  }
  if (!run.gather_outputs(run.budget.peak())) return 0;
  write_path_outputs(run, settings, screened, baseline, fp, run.partitioned() ? &partitioned : nullptr);
  return 0;
}

}  // namespace fgm::cli
