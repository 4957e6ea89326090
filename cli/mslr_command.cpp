// fgm train / fgm path with solver = "mslr" (engine/mslr_trainer.h): the
// settings from the mslr.* section, the run, model.fgm (a linear model
// without bias that predict and inspect read like any other), run.json with
// one record per cutting-plane iteration, or for the path one model per
// count of mslr.features, path.csv and path.json.
#include <filesystem>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/resume.h"
#include "cli/run_output.h"
#include "cli/runner.h"
#include "core/error.h"
#include "core/json_writer.h"
#include "core/messages.h"
#include "engine/evaluate.h"
#include "engine/mslr_trainer.h"
#include "engine/train_settings.h"

namespace fgm::cli {

namespace {

MslrSettings mslr_settings_from_config(const Config& c) {
  const TrainSettings shared = train_settings_from_config(c);  // scheduler, blocks, feature space
  MslrSettings s;
  s.r = static_cast<uint64_t>(c.get_int("mslr.r"));
  s.max_iterations = static_cast<int>(c.get_int("mslr.max_iterations"));
  s.eps_outer = c.get_float("mslr.eps_outer");
  s.max_features = static_cast<uint64_t>(c.get_int("mslr.max_features"));
  s.minimax.C = c.get_float("mslr.C");
  s.minimax.q0 = c.get_float("mslr.q0");
  s.minimax.q_factor = c.get_float("mslr.q_factor");
  s.minimax.q_max = c.get_float("mslr.q_max");
  s.minimax.tolerance = c.get_float("mslr.tolerance");
  s.minimax.gradient_tolerance = c.get_float("mslr.gradient_tolerance");
  s.minimax.max_sweeps = static_cast<int>(c.get_int("mslr.max_sweeps"));
  s.minimax.shuffle = c.get_string("mslr.order") == "shuffled";
  s.smoothing = c.get_string("mslr.subproblem") == "smoothing";
  s.newton.max_iterations = static_cast<int>(c.get_int("mslr.newton_max_iterations"));
  s.newton.threads = shared.scheduler.threads;
  s.scheduler = shared.scheduler;
  s.block_bytes = shared.block_bytes;
  s.space = shared.space;
  return s;
}

void log_iteration(const MslrIteration& r) {
  spdlog::info("iter {:3d}: selected {:6d} (+{}), |d^t| {}, objective {:.6g}, gap {:.3g}, sip_violation {:.4g}, "
               "q {:.3g}, {} sweeps, score {:.3f}s, solve {:.3f}s",
               r.iter, r.selected, r.added, r.constraint_size, r.objective, r.relative_gap, r.sip_violation, r.q,
               r.sweeps, r.score_seconds, r.solve_seconds);
}

// One run.json iteration: the fields every solver's report reads (objective,
// rel_decrease, sip_violation, timings; apg_* say that no APG ran) and MSLR's own.
void write_iteration(JsonWriter& j, const MslrIteration& r, double previous_objective, double f0) {
  j.begin_object();
  j.key("iter").value(r.iter);
  j.key("selected").value(r.selected);
  j.key("added").value(r.added);
  j.key("objective").value(r.objective);
  j.key("rel_decrease").value(f0 > 0 ? (previous_objective - r.objective) / f0 : 0.0);
  j.key("sip_violation").value(r.sip_violation);
  j.key("score_seconds").value(r.score_seconds);
  j.key("solve_seconds").value(r.solve_seconds);
  j.key("bytes_streamed").value(r.bytes_streamed);
  j.key("peak_rss_bytes").value(r.peak_rss_bytes);
  j.key("apg_iterations").value(int64_t{0});
  j.key("apg_stop").value("none (mslr)");
  j.key("constraint_size").value(r.constraint_size);
  j.key("dual").value(r.dual);
  j.key("relative_gap").value(r.relative_gap);
  j.key("converged").value(r.converged);
  j.key("q").value(r.q);
  j.key("smoothing_stages").value(static_cast<int64_t>(r.stages));
  j.key("sweeps").value(static_cast<int64_t>(r.sweeps));
  j.key("newton_steps").value(r.newton_steps);
  j.key("bisections").value(r.bisections);
  j.key("mu").begin_array();
  for (double m : r.mu) j.value(m);
  j.end_array();
  j.end_object();
}

// "iterations" of run.json and path.json (f0: P with no feature selected).
void write_iterations(JsonWriter& j, const MslrOutcome& outcome) {
  const double f0 = outcome.objective_no_features;
  j.key("iterations").begin_array();
  double previous = f0;
  for (const auto& r : outcome.iterations) {
    write_iteration(j, r, previous, f0);
    previous = r.objective;
  }
  j.end_array();
}

// run.json from "iterations" to "iterations_restored".
void write_outcome(JsonWriter& j, const MslrOutcome& outcome, uint64_t iterations_restored) {
  write_iterations(j, outcome);
  j.key("stop_reason").value(outcome.stop_reason);
  j.key("final_sip_violation").value(outcome.final_sip_violation);
  j.key("objective_no_features").value(outcome.objective_no_features);
  write_selected_features(j, outcome.model.features, outcome.model.index_base);
  j.key("bias").value(0.0);
  j.key("scoring_passes").value(outcome.scoring_passes);
  j.key("total_bytes_streamed").value(outcome.total_bytes_streamed);
  j.key("iterations_restored").value(iterations_restored);
}

// The state to resume from, on every rank (SolverRun::resume_solver_state):
// on a partitioned store with the duals of this rank's rows from its rank
// file; for fgm path (`path_points` set) rank 0 also gets the points taken
// before the interruption, and logs where the run resumes.
std::optional<MslrState> resume_state(SolverRun& run, const MslrSettings& settings,
                                      std::vector<MslrSavedPoint>* path_points) {
  std::string duals;
  const std::optional<SolverState> saved = run.resume_solver_state("mslr", duals);
  if (!saved) return std::nullopt;
  const std::string file = (std::filesystem::path(run.out_dir) / kCheckpointFileName).string();
  MslrState state = decode_mslr_state(saved->bytes, file, run.session ? path_points : nullptr);
  if (run.session) {
    uint64_t selected = 0;
    for (const auto& b : state.batches) selected += b.size();
    std::string of_what = fmt::format("at most {} (mslr.max_iterations)", settings.max_iterations);
    if (!state.stop_reason.empty())
      of_what += fmt::format(" — the run had stopped ({}); what is left is the outputs", state.stop_reason);
    spdlog::info("{}", msg::resuming_from(file, state.iterations.size() + 1, of_what, selected));
  }
  if (!run.partitioned()) return state;
  MslrState mine = decode_mslr_state(duals, rank_checkpoint_file(run.out_dir, run.comm.rank(), saved->rank_files_step));
  state.alpha = std::move(mine.alpha);
  state.beta = std::move(mine.beta);
  return state;
}

// Saves the state after an iteration (and fgm path's `points` with it); a
// partitioned run's duals stay in each rank's file.
void save_state(SolverRun& run, const MslrState& state, const std::vector<MslrSavedPoint>& points) {
  const bool split = run.partitioned();
  const MslrStatePart part = split ? MslrStatePart::kShared : MslrStatePart::kWhole;
  run.save_solver_state({"mslr", encode_mslr_state(state, points, part)}, state.iterations.size(),
                        split ? encode_mslr_state(state, {}, MslrStatePart::kDuals) : "");
}

// The points of an MSLR path as the run reaches them (each with its test
// metrics), and their model files saved with the trainer's state to resume them.
class PathPoints {
 public:
  struct Point {
    Model model;
    MslrIteration last;
    double seconds = 0;
    EvalResult test;
  };

  explicit PathPoints(SolverRun& run) : run_(run), has_test_(!run.config.get_string("data.test").empty()) {}

  // The points taken before the interruption (their models as saved; test
  // metrics evaluated again).
  void restore(const std::vector<MslrSavedPoint>& saved, const MslrState& resume, const std::string& file) {
    for (const auto& point : saved) {
      Point p;
      p.seconds = point.seconds;
      p.model = decode_model(point.model, file);
      p.last = resume.iterations[point.iteration - 1];  // decode_mslr_state checked the range
      add(std::move(p));
    }
    saved_ = saved;
  }

  void take(const MslrCheckpoint& cp) {
    Point p;
    p.model = cp.model;
    p.model.config = run_.config.dump();
    p.model.solver = "mslr";
    p.last = *cp.last;
    p.seconds = cp.seconds;
    saved_.push_back({static_cast<uint64_t>(p.last.iter), p.seconds, encode_model(p.model)});
    add(std::move(p));
  }

  const std::vector<Point>& points() const { return points_; }
  const std::vector<MslrSavedPoint>& saved() const { return saved_; }

 private:
  void add(Point p) {
    if (has_test_) p.test = evaluate_test_file(run_.config, p.model, run_.budget, run_.warnings);
    spdlog::info("point {}: {} features, objective {:.6g}, test accuracy {:.4f}", points_.size() + 1,
                 p.model.features.size(), p.last.objective, p.test.accuracy);
    points_.push_back(std::move(p));
  }

  SolverRun& run_;
  const bool has_test_;
  std::vector<Point> points_;
  std::vector<MslrSavedPoint> saved_;  // the points taken so far, as saved with the state
};

// The loop over the store or this rank's partitions, its result on every
// rank: resumed from output.dir's checkpoint when it holds a state, which is
// saved after every iteration (save_state). `path` (fgm path): rank 0 takes
// the points, the restored ones first, saved with the state. `restored`: the
// iterations the checkpoint had completed.
MslrOutcome run_resumable(SolverRun& run, MslrSettings settings, PathPoints* path, PartitionedRun& partitioned,
                          uint64_t& restored) {
  settings.warnings = &run.warnings;
  std::vector<MslrSavedPoint> saved_points;
  const std::optional<MslrState> resume = resume_state(run, settings, path ? &saved_points : nullptr);
  restored = resume ? resume->iterations.size() : 0;
  if (resume) settings.resume = &*resume;
  if (resume && path && run.session) path->restore(saved_points, *resume, run.session->file());
  MslrHooks hooks;
  if (run.session) {
    spdlog::info("MSLR on {} with {} rank(s), r={}, C={}, T_m={}, threads={}", run.dir, run.comm.size(), settings.r,
                 settings.minimax.C, settings.max_iterations, settings.scheduler.threads);
    hooks.on_iteration = log_iteration;
    if (path) hooks.on_checkpoint = [path](const MslrCheckpoint& cp) { path->take(cp); };
  }
  const std::vector<MslrSavedPoint> no_points;
  hooks.on_state = [&](const MslrState& state) { save_state(run, state, path ? path->saved() : no_points); };
  if (!run.partitioned()) return fgm::train_mslr(*run.data->store, settings, run.budget, hooks);
  return train_mslr_partitions(run.comm, run.dir, settings, run.budget, hooks, partitioned);
}

}  // namespace

// solver = "mslr" (engine/mslr_trainer.h). Resume checkpoints after every
// iteration (save_state).
int train_mslr(SolverRun& run) {
  PartitionedRun partitioned;
  uint64_t restored = 0;
  MslrOutcome outcome = run_resumable(run, mslr_settings_from_config(run.config), nullptr, partitioned, restored);
  Model& model = outcome.model;
  if (!run.gather_outputs(outcome.budget_peak)) return 0;
  spdlog::info("stopped: {} after {} iterations, {} features", outcome.stop_reason, outcome.iterations.size(),
               model.features.size());
  return run.finish_train(
      {.solver = "mslr",
       .model = &model,
       .partitioned = &partitioned,
       .budget_peak = outcome.budget_peak,
       .train_seconds = outcome.seconds,
       .sections = [&](JsonWriter& j, const EvalResult*) { write_outcome(j, outcome, restored); },
       .summary = fmt::format("selected={} iterations={} objective={:.6g}", model.features.size(),
                              outcome.iterations.size(), model.objective)});
}

namespace {
// A path never delivers fewer points for want of iterations: each iteration
// adds at most r features, so the last count needs ⌈last/r⌉ of them. An
// mslr.max_iterations below that is refused when the user set it; the
// default is raised to the most the run allows (the path stops at its last
// count anyway). Beyond that, mslr.r must grow.
void raise_iterations_for_counts(const Config& config, MslrSettings& settings) {
  const uint64_t last = settings.checkpoints.back();
  const uint64_t needed = (last + settings.r - 1) / settings.r;
  if (needed <= static_cast<uint64_t>(settings.max_iterations)) return;
  const uint64_t most = mslr::kMaxConstraints;
  if (config.set_by_user("mslr.max_iterations"))
    throw Error(ErrorKind::kConfig,
                msg::mslr_path_needs_iterations(
                    config.where_set("mslr.max_iterations") + "mslr.max_iterations", last, settings.r, needed,
                    static_cast<uint64_t>(settings.max_iterations),
                    needed <= most ? fmt::format("set mslr.max_iterations to at least {}", needed)
                                   : fmt::format("raise mslr.r to at least {}", (last + most - 1) / most)));
  if (needed > most)
    throw Error(ErrorKind::kConfig,
                msg::mslr_path_needs_iterations(config.where_set("mslr.r") + "mslr.r", last, settings.r, needed, most,
                                                fmt::format("mslr.max_iterations is at most {}; raise mslr.r to at "
                                                            "least {}",
                                                            most, (last + most - 1) / most)));
  spdlog::info("mslr.max_iterations raised from {} to {}: mslr.features asks for {} features, at most {} per iteration",
               settings.max_iterations, most, last, settings.r);
  settings.max_iterations = static_cast<int>(most);
}

// mslr.* with the path's checkpoints: the counts of mslr.features, increasing.
MslrSettings path_settings_from_config(const Config& config) {
  MslrSettings settings = mslr_settings_from_config(config);
  for (double v : config.get_list("mslr.features")) settings.checkpoints.push_back(static_cast<uint64_t>(v));
  if (settings.checkpoints.empty())
    throw Error(ErrorKind::kConfig,
                msg::missing_required("mslr.features", "the feature counts of the MSLR path (solver = \"mslr\")"));
  for (size_t k = 1; k < settings.checkpoints.size(); ++k)
    if (settings.checkpoints[k] <= settings.checkpoints[k - 1])
      throw Error(ErrorKind::kConfig, fmt::format("{}mslr.features must be increasing ({} after {})",
                                                  config.where_set("mslr.features"), settings.checkpoints[k],
                                                  settings.checkpoints[k - 1]));
  // The counts decide where the path ends (as FGM's path.features).
  settings.eps_outer = 0;
  raise_iterations_for_counts(config, settings);
  return settings;
}

// point-<k>.fgm, path.csv (point, selected, objective, test accuracy/AUC,
// seconds), path.json and the report; the session finished.
void write_path(SolverRun& run, const PathPoints& path, const MslrOutcome& outcome, const PartitionedRun& partitioned,
                int max_iterations) {
  const Config& config = run.config;
  const std::string& out_dir = run.out_dir;
  const auto& points = path.points();
  // A count the run could not reach gives no point of its own: say so.
  const std::vector<double> asked = config.get_list("mslr.features");
  if (points.size() < asked.size() ||
      (!points.empty() && static_cast<double>(points.back().model.features.size()) < asked.back())) {
    std::string missing, delivered;
    for (size_t k = std::min(points.size(), asked.size() - 1); k < asked.size(); ++k)
      missing += (missing.empty() ? "" : ", ") + fmt::format("{}", asked[k]);
    for (const auto& p : points) delivered += (delivered.empty() ? "" : ", ") + std::to_string(p.model.features.size());
    run.warnings.add("path_points_missing",
                 outcome.stop_reason == "max_iterations"
                     ? msg::mslr_path_points_missing_iterations(missing, delivered, max_iterations)
                     : msg::path_points_missing("mslr.features", missing, delivered));
  }
  // train_objective and seconds (from the start of the run) as the report reads them.
  std::string csv = "point,selected,train_objective,relative_gap,test_accuracy,test_auc,seconds\n";
  for (size_t k = 0; k < points.size(); ++k) {
    const PathPoints::Point& p = points[k];
    run.write_point_model(std::to_string(k + 1), p.model);
    csv += fmt::format("{},{},{:.10g},{:.3g},{},{},{:.3f}\n", k + 1, p.model.features.size(), p.last.objective,
                       p.last.relative_gap, csv_cell(p.test.accuracy), csv_cell(p.test.auc), p.seconds);
  }
  JsonWriter j;
  run.begin_json(j, "mslr", config.dump(), &partitioned);
  j.key("mode").value("features");
  // No point is chosen on held-out data: the report features the last one.
  j.key("best_point").value(int64_t{-1});
  j.key("points").value(static_cast<uint64_t>(points.size()));
  j.key("stop_reason").value(outcome.stop_reason);
  j.key("seconds").value(outcome.seconds);
  j.key("scoring_passes").value(outcome.scoring_passes);
  j.key("total_bytes_streamed").value(outcome.total_bytes_streamed);
  write_iterations(j, outcome);
  run.finish_path(j, csv, fmt::format("points={} seconds={:.3f} csv={}/path.csv", points.size(), outcome.seconds,
                                      out_dir));
}

}  // namespace

// One run with a checkpoint at each count of mslr.features: point-<k>.fgm,
// path.csv (point, selected, objective, test accuracy/AUC, seconds) and
// path.json. Rank 0 takes the points; resume as train_mslr, rank 0's state
// with the points taken.
int path_mslr(SolverRun& run) {
  const Config& config = run.config;
  const MslrSettings settings = path_settings_from_config(config);
  // MSLR selects linear features: a count beyond the store's width can never be reached.
  run.refuse_counts_beyond_width("mslr.features", settings.checkpoints.back());
  PathPoints path(run);
  PartitionedRun partitioned;
  uint64_t restored = 0;
  const MslrOutcome outcome = run_resumable(run, settings, &path, partitioned, restored);
  if (!run.gather_outputs(outcome.budget_peak)) return 0;
  write_path(run, path, outcome, partitioned, settings.max_iterations);
  return 0;
}

}  // namespace fgm::cli
