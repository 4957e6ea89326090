// fgm train / fgm path with solver = "pnorm_kta" (engine/pnorm_kta_path.h).
//
// fgm path: path.csv (one row per p: p, selected features, Σ η, test and
// validation accuracy and AUC, training accuracy, seconds since the start,
// the path-following and SVM seconds of the point, Newton and bisection
// steps) and path.json (totals, the time per path point, the point with the
// best validation accuracy, and the best test accuracy labelled as an oracle
// figure); with the linear kernel also point-<n>.fgm, the linear SVM of each
// point (RBF points write no model files: n_support × features values each).
// fgm train: the SVM at p = kta.p as model.fgm and run.json — linear, a linear
// model (predict and inspect read it unchanged); rbf, a kernel-SVM model
// (io/model_file.h KernelSvm: selected features with kernel weights and
// bandwidths, support vectors, dual coefficients, bias).
// On a partitioned store (with or without mpirun) the linear kernel runs
// data-parallel (engine/distributed_kta.h); rank 0 writes the same outputs
// plus the distributed sections. The RBF kernel is refused there.
#include <functional>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/run_output.h"
#include "cli/runner.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_writer.h"
#include "core/messages.h"
#include "core/progress.h"
#include "engine/distributed_kta.h"
#include "engine/pnorm_kta_cv.h"
#include "engine/pnorm_kta_path.h"
#include "engine/train_settings.h"

namespace fgm::cli {
namespace {

// Keys this command would ignore (the shared checks ran already).
void reject_kta_ignored_keys(const Config& c, RunKind kind) {
  if (kind == RunKind::kTrain) {
    reject_if_set(c, "kta.p_end", "fgm train's path ends at kta.p (kta.p_end is fgm path's)");
    for (const char* key : {"kta.lambda1_grid", "kta.lambda2_grid", "kta.C_grid"})
      reject_if_set(c, key, "it is a grid of fgm path's cross-validation (path.folds); fgm train makes one model");
  } else {
    reject_if_set(c, "kta.p", "it picks the model of fgm train; fgm path reports every p down to kta.p_end");
    // The grids of the cross-validation (engine/pnorm_kta_cv.h), and the one value each replaces.
    const bool cv = c.get_int("path.folds") >= 2;
    for (const auto& [grid, one] : {std::pair{"kta.lambda1_grid", "kta.lambda1"},
                                    std::pair{"kta.lambda2_grid", "kta.lambda2"}, std::pair{"kta.C_grid", "kta.C"}}) {
      if (!cv) reject_if_set(c, grid, "it is a grid of the cross-validation, which path.folds (< 2) turns off");
      if (cv && c.set_by_user(grid)) reject_if_set(c, one, fmt::format("{} lists the values to choose from", grid));
    }
  }
  if (c.get_string("kta.kernel") == "rbf")
    for (const char* key : {"apg.eps_inner", "apg.gap_tolerance", "apg.eta", "apg.max_iterations"})
      reject_if_set(c, key, "kta.kernel = \"rbf\" measures accuracy with LIBSVM, not the APG solver");
}

KtaSettings kta_settings_from_config(const Config& c, RunKind kind) {
  KtaSettings s;
  s.kernel = c.get_string("kta.kernel") == "rbf" ? kta::KernelKind::kRbf : kta::KernelKind::kLinear;
  s.path.lambda1 = c.get_float("kta.lambda1");
  s.path.lambda2 = c.get_float("kta.lambda2");
  s.path.epsilon = c.get_float("kta.epsilon");
  s.path.p_start = c.get_float("kta.p_start");
  s.path.p_end = c.get_float("kta.p_end");
  s.path.p_step = c.get_float("kta.p_step");
  s.train_p = c.get_float("kta.p");
  s.C = c.get_float("kta.C");
  read_apg_keys(c, s.apg);
  s.scheduler = scheduler_options_from_config(c);
  s.block_bytes = c.get_bytes("engine.block_bytes");
  if (kind == RunKind::kPath) {
    s.test_path = c.get_string("data.test");
    s.validation_path = c.get_string("data.validation");
  } else {
    if (s.train_p > s.path.p_start)
      throw Error(ErrorKind::kConfig,
                  msg::kta_option_out_of_range("kta.p", s.train_p, "must be in [1, kta.p_start]"));
    s.path.p_end = s.train_p;
  }
  kta::check_path_options(s.path);
  return s;
}

KtaCvOptions kta_cv_options_from_config(const Config& c) {
  KtaCvOptions o;
  o.folds = static_cast<int>(c.get_int("path.folds"));
  o.seed = static_cast<uint64_t>(c.get_int("path.fold_seed"));
  auto grid = [&](const char* key, const char* one) {
    std::vector<double> v = c.get_list(key);
    return v.empty() ? std::vector<double>{c.get_float(one)} : v;
  };
  o.lambda1s = grid("kta.lambda1_grid", "kta.lambda1");
  o.lambda2s = grid("kta.lambda2_grid", "kta.lambda2");
  o.Cs = grid("kta.C_grid", "kta.C");
  return o;
}

// "kta": the settings and the alignment pass, shared by run.json and path.json.
void write_kta_section(JsonWriter& j, const KtaSettings& s, const KtaRun& run) {
  j.key("kta").begin_object();
  j.key("kernel").value(kta::kernel_name(s.kernel));
  j.key("lambda1").value(s.path.lambda1);
  j.key("lambda2").value(s.path.lambda2);
  j.key("epsilon").value(s.path.epsilon);
  j.key("p_start").value(s.path.p_start);
  j.key("p_end").value(s.path.p_end);
  j.key("p_step").value(s.path.p_step);
  j.key("C").value(s.C);
  j.key("features_aligned").value(static_cast<uint64_t>(run.alignments.size()));
  j.key("alignment_seconds").value(run.alignment_seconds);
  j.key("alignment_bytes_streamed").value(run.alignment_pass.bytes_streamed);
  j.key("path_seconds").value(run.path_seconds);
  j.key("points").value(static_cast<uint64_t>(run.points.size()));
  // Table 4's measure: (alignments + path following) / points, without the SVMs.
  j.key("seconds_per_point")
      .value(run.points.empty() ? 0.0 : (run.alignment_seconds + run.path_seconds) / run.points.size());
  j.end_object();
}

const char* kCsvHeader =
    "point,p,selected,weight_sum,test_accuracy,test_auc,validation_accuracy,validation_auc,train_accuracy,"
    "seconds,path_seconds,svm_seconds,newton_steps,bisection_steps\n";

std::string csv_row(const KtaPoint& p, double seconds_since_start) {
  return fmt::format("{},{:.6g},{},{},{},{},{},{},{},{:.4f},{:.6f},{:.4f},{},{}\n", p.point, p.p, p.selected,
                     csv_cell(p.weight_sum), csv_cell(p.test.accuracy), csv_cell(p.test.auc), csv_cell(p.validation.accuracy),
                     csv_cell(p.validation.auc), csv_cell(p.train_accuracy), seconds_since_start, p.path_seconds,
                     p.svm_seconds, p.newton_steps, p.bisection_steps);
}

void write_point_ref(JsonWriter& j, const char* name, const KtaRun& run, int index, const char* note) {
  j.key(name).begin_object();
  if (index >= 0) {
    const KtaPoint& p = run.points[static_cast<size_t>(index)];
    j.key("point").value(static_cast<int64_t>(p.point));
    j.key("p").value(p.p);
    j.key("selected").value(p.selected);
    j.key("test_accuracy").value(p.test.accuracy);
    j.key("validation_accuracy").value(p.validation.accuracy);
  } else {
    j.key("point").value(int64_t{-1});
  }
  j.key("note").value(note);
  j.end_object();
}

void log_point(const KtaPoint& p) {
  spdlog::info("p={:.4g}: selected {} test acc {} valid acc {} (path {:.4f}s, svm {:.3f}s)", p.p, p.selected,
               csv_cell(p.test.accuracy), csv_cell(p.validation.accuracy), p.path_seconds, p.svm_seconds);
}

// A path's outputs: point-<n>.fgm (the linear SVMs), path.csv, path.json
// (`extra_json` adds sections), the report, the closed session and the
// result line (`summary_extra` ends it).
void write_path_outputs(const KtaSettings& settings, const KtaRun& run, SolverRun& solver_run,
                        const PartitionedRun* partitioned, const std::function<void(JsonWriter&)>& extra_json,
                        const std::string& summary_extra) {
  // Models first (each atomic), then the table and log that name them.
  bool point_models = false;
  std::string csv = kCsvHeader;
  double seconds = run.alignment_seconds;
  for (const KtaPoint& p : run.points) {
    if (p.has_model) {
      solver_run.write_point_model(std::to_string(p.point), p.model);
      point_models = true;
    }
    seconds += p.path_seconds + p.svm_seconds;
    csv += csv_row(p, seconds);
  }
  JsonWriter j;
  solver_run.begin_json(j, "pnorm_kta", result_config(solver_run.config.dump()), partitioned);
  j.key("mode").value("p");
  j.key("points").value(static_cast<uint64_t>(run.points.size()));
  j.key("point_models").value(point_models);  // point-<n>.fgm (linear kernel)
  const int best_point = run.best_validation_point >= 0 ? run.points[run.best_validation_point].point : -1;
  j.key("best_point").value(static_cast<int64_t>(best_point));
  write_kta_section(j, settings, run);
  write_point_ref(j, "best_validation", run, run.best_validation_point,
                  "the point with the best validation accuracy (data.validation)");
  write_point_ref(j, "oracle_best_test", run, run.best_test_point,
                  "ORACLE: the best test accuracy along the path, chosen on the test set itself (as in the "
                  "paper's Tables 2 and 3); not an estimate of generalisation");
  j.key("seconds").value(run.total_seconds);
  j.key("ingest_seconds").value(solver_run.ingest_seconds());
  j.key("peak_rss_bytes").value(peak_rss_bytes());
  if (extra_json) extra_json(j);
  std::string summary =
      fmt::format("points={} seconds={:.3f} seconds_per_point={:.4f} csv={}/path.csv", run.points.size(),
                  run.total_seconds,
                  run.points.empty() ? 0.0 : (run.alignment_seconds + run.path_seconds) / run.points.size(),
                  solver_run.out_dir);
  if (run.best_validation_point >= 0) {
    const KtaPoint& b = run.points[run.best_validation_point];
    summary += fmt::format(" best_point={} best_p={:.4g} best_selected={} best_validation_accuracy={:.4f}", b.point,
                           b.p, b.selected, b.validation.accuracy);
  }
  if (run.best_test_point >= 0) {
    const KtaPoint& o = run.points[run.best_test_point];
    summary += fmt::format(" oracle_best_test_accuracy={:.4f} oracle_p={:.4g} oracle_selected={}", o.test.accuracy,
                           o.p, o.selected);
  }
  solver_run.finish_path(j, csv, summary + summary_extra);
}

// model.fgm, run.json, the report and the result line (SolverRun::finish_train).
int write_train_outputs(SolverRun& solver_run, const KtaSettings& settings, const KtaRun& run, KtaTrained& trained,
                        const PartitionedRun& partitioned, double train_seconds) {
  Model& model = trained.model;
  // The selected features: a linear model's weights, or a kernel SVM's
  // features with their kernel weights d_j.
  std::vector<ModelFeature> selected = model.features;
  if (model.has_kernel_svm()) {
    for (size_t k = 0; k < model.kernel_svm.feature_ids.size(); ++k) {
      ModelFeature f;
      f.key.ids[0] = model.kernel_svm.feature_ids[k];
      f.weight = model.kernel_svm.kernel_weights[k];
      f.batch = 1;
      selected.push_back(f);
    }
  }
  spdlog::info("pnorm_kta at p={:.4g}: {} features selected", run.points.back().p, selected.size());
  auto sections = [&](JsonWriter& j, const EvalResult*) {
    write_kta_section(j, settings, run);
    j.key("p").value(run.points.back().p);
    j.key("iterations").begin_array().end_array();  // FGM's outer iterations: none here
    j.key("objective").value(model.objective);
    j.key("objective_no_features").value(std::nan(""));
    j.key("final_sip_violation").value(std::nan(""));
    write_selected_features(j, selected, model.index_base);
    j.key("bias").value(model.bias);
    if (model.has_kernel_svm()) {
      j.key("kernel_svm").begin_object();
      j.key("kernel").value(model.kernel_svm.kernel);
      j.key("support_vectors").value(static_cast<uint64_t>(model.kernel_svm.n_support()));
      j.key("training_rows").value(model.kernel_svm.training_rows);
      j.key("train_accuracy").value(trained.train_accuracy);
      j.key("C").value(model.C);
      j.end_object();
    }
  };
  return solver_run.finish_train(
      {.solver = "pnorm_kta",
       .model = &model,
       .truth_among = &selected,
       .partitioned = &partitioned,
       .budget_peak = solver_run.budget.peak(),
       .train_seconds = train_seconds,
       .sections = sections,
       .summary = fmt::format("p={:.4g} selected={} {}", run.points.back().p, selected.size(),
                              model.has_kernel_svm()
                                  ? fmt::format("support_vectors={}", model.kernel_svm.n_support())
                                  : fmt::format("objective={:.6g}", model.objective))});
}

// The rows: the store, or this rank's partitions (every rank runs the same
// path, rank 0 writes the outputs).
std::unique_ptr<KtaData> open_data(SolverRun& run, const KtaSettings& settings, PartitionedRun& partitioned) {
  if (run.partitioned()) return open_kta_partitions(run.comm, run.dir, settings, run.budget, partitioned);
  return open_kta_store(*run.data->store, run.budget);
}

}  // namespace

void check_pnorm_kta_config(const Config& config, RunKind kind, bool partitioned) {
  reject_kta_ignored_keys(config, kind);
  // What needs every row at once: refused on a partitioned store, naming the key.
  if (partitioned && config.get_int("path.folds") >= 2)
    throw Error(ErrorKind::kConfig,
                fmt::format("{}path.folds: the cross-validation of solver = \"pnorm_kta\" is not supported on a "
                            "partitioned store yet (it needs each fold's rows of every partition); run it on the "
                            "unpartitioned store or set path.folds = 0",
                            config.where_set("path.folds")));
  if (partitioned && config.get_string("kta.kernel") == "rbf")
    throw Error(ErrorKind::kConfig,
                fmt::format("{}kta.kernel = \"rbf\" is not supported on a partitioned store: the RBF kernels' "
                            "median-heuristic bandwidths and the kernel SVM's n x n training kernel need every row of "
                            "every partition at once, which no rank holds; use kta.kernel = \"linear\" or the "
                            "unpartitioned store (docs/distributed.md, \"p-norm KTA\")",
                            config.where_set("kta.kernel")));
}

// solver = "pnorm_kta" (engine/pnorm_kta_path.h; linear kernel on a partitioned store: engine/distributed_kta.h).
int train_pnorm_kta(SolverRun& run) {
  KtaSettings settings = kta_settings_from_config(run.config, RunKind::kTrain);
  settings.warnings = &run.warnings;
  const auto start = std::chrono::steady_clock::now();
  PartitionedRun partitioned;
  std::unique_ptr<KtaData> data = open_data(run, settings, partitioned);
  KtaRun kta = data->align(settings);
  KtaTrained trained = train_kta_model(*data, settings, run.budget, kta);
  const double train_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!run.gather_outputs(run.budget.peak())) return 0;
  return write_train_outputs(run, settings, kta, trained, partitioned, train_seconds);
}

int path_pnorm_kta(SolverRun& run) {
  KtaSettings settings = kta_settings_from_config(run.config, RunKind::kPath);
  if (run.comm.rank() != 0) {  // rank 0 evaluates the points (the models are the same on every rank)
    settings.test_path.clear();
    settings.validation_path.clear();
  }
  settings.warnings = &run.warnings;
  if (run.session)
    spdlog::info("pnorm_kta path on {} with {} rank(s): kernel {}, p {} -> {} step {}", run.dir, run.comm.size(),
                 kta::kernel_name(settings.kernel), settings.path.p_start, settings.path.p_end, settings.path.p_step);
  auto on_point = [&](const KtaPoint& p, const kta::PathPoint&) {
    if (run.comm.rank() == 0) log_point(p);
  };
  PartitionedRun partitioned;
  std::unique_ptr<KtaData> data = open_data(run, settings, partitioned);
  KtaRun kta = data->align(settings);
  if (run.session)
    spdlog::info("alignments of {} features in {:.3f}s ({} streamed)", kta.alignments.size(), kta.alignment_seconds,
                 format_bytes(kta.alignment_pass.bytes_streamed));
  // path.folds >= 2 (one store; refused on partitions): choose lambda1,
  // lambda2, C and the point by cross-validation, then refit with them.
  const KtaCvOptions cv_options = kta_cv_options_from_config(run.config);
  std::optional<KtaCvResult> cv;
  if (cv_options.folds >= 2) {
    cv = cross_validate_kta(*run.data->store, settings, cv_options, run.budget);
    const KtaCvCandidate& chosen = cv->candidates[static_cast<size_t>(cv->chosen)];
    spdlog::info("{}-fold cross-validation over {} candidates in {:.3f}s: lambda1 {} lambda2 {} C {} p {:.4g} "
                 "(cv accuracy {:.4f})",
                 cv->folds, cv->candidates.size(), cv->seconds, chosen.lambda1, chosen.lambda2, chosen.C, chosen.p,
                 chosen.accuracy());
    settings.path.lambda1 = chosen.lambda1;
    settings.path.lambda2 = chosen.lambda2;
    settings.C = chosen.C;
  }
  run_kta_path(*data, settings, run.budget, kta, on_point);
  if (!run.gather_outputs(run.budget.peak())) return 0;
  std::function<void(JsonWriter&)> cv_json;
  std::string cv_summary;
  if (cv) {
    write_file_atomic(run.out_dir + "/cv.csv", kta_cv_csv(*cv));
    cv_json = [&](JsonWriter& j) { write_kta_cv_section(j, cv_options, *cv, kta); };
    const KtaCvCandidate& c = cv->candidates[static_cast<size_t>(cv->chosen)];
    const KtaPoint& refit = kta.points[static_cast<size_t>(c.point - 1)];
    cv_summary = fmt::format(" cv_accuracy={:.4f} cv_lambda1={} cv_lambda2={} cv_C={} cv_p={:.4g} cv_selected={} "
                             "cv_test_accuracy={}",
                             c.accuracy(), c.lambda1, c.lambda2, c.C, c.p, refit.selected,
                             csv_cell(refit.test.accuracy));
  }
  write_path_outputs(settings, kta, run, run.partitioned() ? &partitioned : nullptr, cv_json, cv_summary);
  return 0;
}

}  // namespace fgm::cli
