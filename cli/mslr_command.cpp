// fgm train / fgm path with solver = "mslr" (engine/mslr_trainer.h): the
// settings from the mslr.* section, the run, model.fgm (a linear model
// without bias that predict and inspect read like any other), run.json with
// one record per cutting-plane iteration, or for the path one model per
// count of mslr.features, path.csv and path.json.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/distributed_train.h"
#include "cli/resume.h"
#include "cli/run_output.h"
#include "cli/solver_commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_writer.h"
#include "core/messages.h"
#include "core/path_checks.h"
#include "io/partitioned_store.h"
#include "engine/distributed_mslr.h"
#include "engine/evaluate.h"
#include "engine/mslr_trainer.h"
#include "engine/train_settings.h"
#include "report/report_page.h"

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
  s.scheduler = shared.scheduler;
  s.block_bytes = shared.block_bytes;
  s.space = shared.space;
  return s;
}

// A store with more than two labels: MSLR is binary (the paper has no multi-class form).
void require_binary(const SolverCommand& command) {
  const StoreInfo& info = command.data.store->info();
  if (info.classes() > 2)
    throw Error(ErrorKind::kConfig,
                fmt::format("{}: {} labels, but solver = \"mslr\" trains binary models only (relabel the data "
                            "to two classes, or use solver = \"fgm\" for one-vs-rest)",
                            command.data.store_dir, info.classes()));
}

// P with no feature selected (w = 0): C·ln 2 per row of the fit.
double objective_no_features(const ShardStore& store, double C) {
  uint64_t fit = 0;
  for (uint64_t i = 0; i < store.info().n_rows; ++i) fit += store.labels()[i] != 0;
  return C * std::log(2.0) * static_cast<double>(fit);
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

// run.json from "iterations" to "iterations_restored": what single-store and partitioned runs share.
void write_outcome(JsonWriter& j, const MslrOutcome& outcome, double f0, uint64_t iterations_restored) {
  j.key("iterations").begin_array();
  double previous = f0;
  for (const auto& r : outcome.iterations) {
    write_iteration(j, r, previous, f0);
    previous = r.objective;
  }
  j.end_array();
  j.key("stop_reason").value(outcome.stop_reason);
  j.key("final_sip_violation").value(outcome.final_sip_violation);
  j.key("objective_no_features").value(f0);
  write_selected_features(j, outcome.model.features, outcome.model.index_base);
  j.key("bias").value(0.0);
  j.key("scoring_passes").value(outcome.scoring_passes);
  j.key("total_bytes_streamed").value(outcome.total_bytes_streamed);
  j.key("iterations_restored").value(iterations_restored);
}

// The saved state of an interrupted run of this command, if any (logged).
std::optional<MslrState> saved_state(SolverCommand& command, const MslrSettings& settings,
                                     std::string* path_points = nullptr) {
  const SolverState* saved = command.session->solver_state("mslr");
  if (!saved) return std::nullopt;
  std::string bytes = saved->bytes;
  if (path_points) {  // fgm path: the trainer's state, then the points already taken
    uint64_t length = 0;
    if (bytes.size() < 8) throw Error(ErrorKind::kCorruption, msg::not_a_checkpoint(command.session->file(), "MSLR path state: truncated"));
    std::memcpy(&length, bytes.data(), 8);
    if (length > bytes.size() - 8)
      throw Error(ErrorKind::kCorruption, msg::not_a_checkpoint(command.session->file(), "MSLR path state: truncated"));
    *path_points = bytes.substr(8 + length);
    bytes = bytes.substr(8, length);
  }
  MslrState state = decode_mslr_state(bytes, command.session->file());
  uint64_t selected = 0;
  for (const auto& b : state.batches) selected += b.size();
  std::string of_what = fmt::format("at most {} (mslr.max_iterations)", settings.max_iterations);
  if (!state.stop_reason.empty())
    of_what += fmt::format(" — the run had stopped ({}); what is left is the outputs", state.stop_reason);
  spdlog::info("{}", msg::resuming_from(command.session->file(), state.iterations.size() + 1, of_what, selected));
  return state;
}

}  // namespace

int train_mslr(SolverCommand& command) {
  require_binary(command);
  const Config& config = command.config;
  MslrSettings settings = mslr_settings_from_config(config);
  settings.warnings = &command.warnings;
  const ShardStore& store = *command.data.store;
  spdlog::info("MSLR on {} rows x {} features ({} nonzeros), r={}, C={}, T_m={}, threads={}", store.info().n_rows,
               store.info().n_features, store.info().nnz, settings.r, settings.minimax.C, settings.max_iterations,
               settings.scheduler.threads);
  const std::optional<MslrState> resume = saved_state(command, settings);
  if (resume) settings.resume = &*resume;
  MslrHooks hooks;
  hooks.on_iteration = log_iteration;
  hooks.on_state = [&](const MslrState& state) {
    command.session->save_solver_state({"mslr", encode_mslr_state(state)});
  };
  MslrOutcome outcome = fgm::train_mslr(store, settings, command.budget, hooks);
  spdlog::info("stopped: {} after {} iterations, {} features", outcome.stop_reason, outcome.iterations.size(),
               outcome.model.features.size());
  Model& model = outcome.model;
  model.config = config.dump();
  model.solver = "mslr";

  // Evaluate before writing anything, so a bad test file leaves no output.
  const bool has_test = !config.get_string("data.test").empty();
  EvalResult test;
  if (has_test) test = evaluate_test_file(config, model, command.budget, command.warnings);
  const bool has_truth = !config.get_string("data.truth").empty();
  TruthRecovery truth;
  if (has_truth) truth = recover_truth(config.get_string("data.truth"), model.features);

  create_output_directory(command.out_dir, "output.dir");
  write_model((std::filesystem::path(command.out_dir) / "model.fgm").string(), model);
  const double f0 = objective_no_features(store, settings.minimax.C);
  JsonWriter j;
  begin_run_json(j, "mslr", config, command.data, model.config);
  write_outcome(j, outcome, f0, resume ? resume->iterations.size() : 0);
  finish_run(j, command.budget, outcome.budget_peak, outcome.seconds, command.data.ingest_seconds, config,
             has_test ? &test : nullptr, has_truth ? &truth : nullptr, command.warnings, command.out_dir,
             *command.session);

  if (has_truth) fmt::print("recovered={}/{} ", truth.recovered, truth.planted);
  fmt::print("selected={} iterations={} objective={:.6g}", model.features.size(), outcome.iterations.size(),
             model.objective);
  if (has_test) fmt::print(" accuracy={:.4f} auc={:.4f}", test.accuracy, test.auc);
  fmt::print(" model={}/model.fgm\n", command.out_dir);
  return 0;
}

// What the partitioned MSLR run does not have yet: refused, naming the key.
static void reject_unsupported_mslr_on_partitions(const Config& config) {
  auto refuse = [](const char* key, const char* what) {
    throw Error(ErrorKind::kConfig, fmt::format("{}: {} is not supported with solver = mslr on a partitioned store "
                                                "yet (docs/distributed.md lists what is distributed)",
                                                key, what));
  };
  if (!config.get_string_list("features.transform").empty()) refuse("features.transform", "a feature transform");
  if (!config.get_string("data.truth").empty()) refuse("data.truth", "truth recovery");
}

// fgm train with solver = "mslr" on a partitioned store, with or without
// mpirun (engine/distributed_mslr.h). Rank 0 writes model.fgm, run.json (the
// single-store shape with the partitioned "data" and "distributed") and the
// report. No resume checkpoints: the duals live on the ranks, and an
// interrupted run starts again (said in the log).
int train_mslr_partitioned(const Config& config, MemoryBudget& budget, Communicator& comm, bool restart,
                           RunWarnings& warnings) {
  check_same_configuration(comm, config);
  reject_unsupported_mslr_on_partitions(config);
  MslrSettings settings = mslr_settings_from_config(config);
  settings.warnings = &warnings;
  const std::string dir = config.get_string("data.train");
  const std::string out_dir = config.get_string("output.dir");
  std::unique_ptr<ResumeSession> session;  // rank 0: output.dir's lock; closed by finish_run
  if (comm.rank() == 0) {
    session = std::make_unique<ResumeSession>(out_dir, partitioned_run_identity(config, comm.size()), restart,
                                              "model.fgm", budget);
    spdlog::info("MSLR on partitioned store {} with {} rank(s), r={}, C={}, T_m={}, threads={} (no resume "
                 "checkpoints on a partitioned store: an interrupted run starts again)",
                 dir, comm.size(), settings.r, settings.minimax.C, settings.max_iterations, settings.scheduler.threads);
  }
  MslrHooks hooks;
  if (comm.rank() == 0) hooks.on_iteration = log_iteration;
  DistributedMslrOutcome outcome = train_mslr_distributed(comm, dir, settings, budget, hooks);
  Model& model = outcome.result.model;
  model.config = config.dump();
  const std::vector<RankResources> ranks = gather_rank_resources(comm, outcome.result.budget_peak);
  if (comm.rank() != 0) return 0;
  spdlog::info("stopped: {} after {} iterations, {} features", outcome.result.stop_reason,
               outcome.result.iterations.size(), model.features.size());
  // Evaluate before writing anything, so a bad test file leaves no output.
  const bool has_test = !config.get_string("data.test").empty();
  EvalResult test;
  if (has_test) test = evaluate_test_file(config, model, budget, warnings);
  create_output_directory(out_dir, "output.dir");
  write_model((std::filesystem::path(out_dir) / "model.fgm").string(), model);
  JsonWriter j;
  begin_partitioned_run_json(j, "mslr", dir, outcome.manifest, model.config);
  write_distributed_section(j, outcome.ranks, outcome.manifest, outcome.own_partitions, outcome.communication, ranks);
  write_outcome(j, outcome.result, outcome.objective_no_features, 0);
  finish_run(j, budget, outcome.result.budget_peak, outcome.result.seconds, 0.0, config, has_test ? &test : nullptr,
             nullptr, warnings, out_dir, *session);
  fmt::print("selected={} iterations={} objective={:.6g} ranks={}", model.features.size(),
             outcome.result.iterations.size(), model.objective, comm.size());
  if (has_test) fmt::print(" accuracy={:.4f} auc={:.4f}", test.accuracy, test.auc);
  fmt::print(" model={}/model.fgm\n", out_dir);
  return 0;
}

// One run with a checkpoint at each count of mslr.features: point-<k>.fgm,
// path.csv (point, selected, objective, test accuracy/AUC, seconds) and path.json.
int path_mslr(SolverCommand& command) {
  require_binary(command);
  const Config& config = command.config;
  MslrSettings settings = mslr_settings_from_config(config);
  settings.warnings = &command.warnings;
  for (double v : config.get_list("mslr.features")) settings.checkpoints.push_back(static_cast<uint64_t>(v));
  if (settings.checkpoints.empty())
    throw Error(ErrorKind::kConfig,
                msg::missing_required("mslr.features", "the feature counts of the MSLR path (solver = \"mslr\")"));
  for (size_t k = 1; k < settings.checkpoints.size(); ++k)
    if (settings.checkpoints[k] <= settings.checkpoints[k - 1])
      throw Error(ErrorKind::kConfig, fmt::format("{}mslr.features must be increasing ({} after {})",
                                                  config.where_set("mslr.features"), settings.checkpoints[k],
                                                  settings.checkpoints[k - 1]));
  const bool has_test = !config.get_string("data.test").empty();
  struct Point {
    Model model;
    MslrIteration last;
    double seconds = 0;
    EvalResult test;
  };
  std::vector<Point> points;
  auto take_point = [&](Point p) {
    if (has_test) p.test = evaluate_test_file(config, p.model, command.budget, command.warnings);
    spdlog::info("point {}: {} features, objective {:.6g}, test accuracy {:.4f}", points.size() + 1,
                 p.model.features.size(), p.last.objective, p.test.accuracy);
    points.push_back(std::move(p));
  };
  // Resume: the trainer's state and the points taken before the
  // interruption (their models as saved; test metrics evaluated again).
  std::string saved_points;
  const std::optional<MslrState> resume = saved_state(command, settings, &saved_points);
  if (resume) {
    settings.resume = &*resume;
    for (size_t at = 0; at < saved_points.size();) {
      auto u64 = [&]() {
        uint64_t v = 0;
        if (saved_points.size() - at < 8)
          throw Error(ErrorKind::kCorruption, msg::not_a_checkpoint(command.session->file(), "MSLR path points: truncated"));
        std::memcpy(&v, saved_points.data() + at, 8);
        at += 8;
        return v;
      };
      Point p;
      const uint64_t iteration = u64();
      const uint64_t seconds_bits = u64();
      std::memcpy(&p.seconds, &seconds_bits, 8);
      const uint64_t length = u64();
      if (iteration < 1 || iteration > resume->iterations.size() || length > saved_points.size() - at)
        throw Error(ErrorKind::kCorruption, msg::not_a_checkpoint(command.session->file(), "MSLR path points: damaged"));
      p.model = decode_model(saved_points.substr(at, length), command.session->file());
      at += length;
      p.last = resume->iterations[iteration - 1];
      take_point(std::move(p));
    }
  }
  std::string points_bytes;  // the points taken so far, as saved with the state
  if (resume) points_bytes = saved_points;
  MslrHooks hooks;
  hooks.on_iteration = log_iteration;
  hooks.on_checkpoint = [&](const MslrCheckpoint& cp) {
    Point p;
    p.model = cp.model;
    p.model.config = config.dump();
    p.model.solver = "mslr";
    p.last = *cp.last;
    p.seconds = cp.seconds;
    auto u64 = [&](uint64_t v) { points_bytes.append(reinterpret_cast<const char*>(&v), 8); };
    const std::string model = encode_model(p.model);
    uint64_t seconds_bits = 0;
    std::memcpy(&seconds_bits, &p.seconds, 8);
    u64(static_cast<uint64_t>(p.last.iter));
    u64(seconds_bits);
    u64(model.size());
    points_bytes += model;
    take_point(std::move(p));
  };
  hooks.on_state = [&](const MslrState& state) {
    const std::string trainer = encode_mslr_state(state);
    std::string bytes(8, '\0');
    const uint64_t length = trainer.size();
    std::memcpy(bytes.data(), &length, 8);
    command.session->save_solver_state({"mslr", bytes + trainer + points_bytes});
  };
  MslrOutcome outcome = fgm::train_mslr(*command.data.store, settings, command.budget, hooks);

  create_output_directory(command.out_dir, "output.dir");
  // train_objective and seconds (from the start of the run) as the report reads them.
  std::string csv = "point,selected,train_objective,relative_gap,test_accuracy,test_auc,seconds\n";
  for (size_t k = 0; k < points.size(); ++k) {
    const Point& p = points[k];
    write_model(fmt::format("{}/point-{}.fgm", command.out_dir, k + 1), p.model);
    auto cell = [](double v) { return std::isnan(v) ? std::string() : fmt::format("{:.6g}", v); };
    csv += fmt::format("{},{},{:.10g},{:.3g},{},{},{:.3f}\n", k + 1, p.model.features.size(), p.last.objective,
                       p.last.relative_gap, cell(p.test.accuracy), cell(p.test.auc), p.seconds);
  }
  write_file_atomic(command.out_dir + "/path.csv", csv);
  JsonWriter j;
  j.begin_object();
  j.key("engine_version").value(FGM_VERSION);
  j.key("solver").value("mslr");
  j.key("mode").value("features");
  // No point is chosen on held-out data: the report features the last one.
  j.key("best_point").value(int64_t{-1});
  write_data_section(j, config, command.data);
  j.key("points").value(static_cast<uint64_t>(points.size()));
  j.key("stop_reason").value(outcome.stop_reason);
  j.key("seconds").value(outcome.seconds);
  j.key("scoring_passes").value(outcome.scoring_passes);
  j.key("total_bytes_streamed").value(outcome.total_bytes_streamed);
  j.key("iterations").begin_array();
  const double f0 = objective_no_features(*command.data.store, settings.minimax.C);
  double previous = f0;
  for (const auto& r : outcome.iterations) {
    write_iteration(j, r, previous, f0);
    previous = r.objective;
  }
  j.end_array();
  write_config_section(j, config.dump());
  write_warnings(j, command.warnings);
  j.end_object();
  write_file_atomic(command.out_dir + "/path.json", j.str() + "\n");
  if (config.get_bool("output.report")) report::write_report(command.out_dir, {.train = false, .path = true});
  command.session->finish();
  fmt::print("points={} seconds={:.3f} csv={}/path.csv\n", points.size(), outcome.seconds, command.out_dir);
  return 0;
}

}  // namespace fgm::cli
