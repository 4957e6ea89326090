#include "cli/runner.h"

#include <filesystem>

#include <fmt/format.h>

#include "cli/solver_registry.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "engine/train_settings.h"
#include "features/transformed_store.h"
#include "io/partitioned_store.h"
#include "report/report_page.h"

namespace fgm::cli {

std::string SolverRun::ranks_suffix() const {
  return partitioned() ? fmt::format(" ranks={}", comm.size()) : std::string();
}

bool SolverRun::gather_outputs(uint64_t budget_peak) {
  if (partitioned()) ranks = gather_rank_resources(comm, budget_peak);
  return comm.rank() == 0;
}

void SolverRun::write_data(JsonWriter& j, const PartitionedRun* run) const {
  if (!partitioned()) return write_data_section(j, config, *data);
  write_partitioned_data_section(j, dir, run->manifest);
  write_distributed_section(j, *run, ranks);
}

void SolverRun::begin_json(JsonWriter& j, std::string_view solver, const std::map<std::string, std::string>& dump,
                           const PartitionedRun* run, const std::vector<double>& class_labels) const {
  j.begin_object();
  j.key("engine_version").value(FGM_VERSION);
  j.key("solver").value(std::string(solver));
  if (partitioned()) write_partitioned_data_section(j, dir, run->manifest);
  else write_data_section(j, config, *data);
  write_config_section(j, dump);
  if (partitioned()) write_distributed_section(j, *run, ranks, class_labels);
}

void SolverRun::finish_train(JsonWriter& j, const ModelResults& results, uint64_t budget_peak, double train_seconds) {
  finish_run_json(j, budget, budget_peak, train_seconds, ingest_seconds(), config, results, warnings, out_dir);
  session->finish();
}

void SolverRun::finish_path(JsonWriter& j, const std::string& csv) {
  write_warnings(j, warnings);
  j.end_object();
  write_file_atomic((std::filesystem::path(out_dir) / "path.csv").string(), csv);
  write_file_atomic((std::filesystem::path(out_dir) / "path.json").string(), j.str() + "\n");
  if (config.get_bool("output.report")) report::write_report(out_dir, {.train = false, .path = true});
  session->finish();
}

namespace {

const char* command_name(RunKind kind) { return kind == RunKind::kTrain ? "train" : "path"; }
const char* final_output(RunKind kind) { return kind == RunKind::kTrain ? "model.fgm" : "path.csv"; }

// A partitioned store: every rank checks it runs the same configuration;
// rank 0 alone opens output.dir (its lock and checkpoint; a checkpoint of
// another rank count refused).
void open_partitioned(const SolverEntry& entry, SolverRun& run) {
  check_same_configuration(run.comm, run.config);
  if (entry.check_data) entry.check_data(run);
  if (run.comm.rank() != 0) return;
  refuse_other_rank_count(run.out_dir, run.restart, run.comm.size(), run.budget);
  run.session = std::make_unique<ResumeSession>(
      run.out_dir, partitioned_run_identity(run.config, run.comm.size(), command_name(run.kind)), run.restart,
      final_output(run.kind), run.budget);
}

// A single store: opened (ingested when data.train is a text file) and
// checked against the config, its feature transforms applied, then output.dir.
void open_single(const SolverEntry& entry, SolverRun& run, TrainingData& data) {
  const Config& config = run.config;
  data = open_training_data(run.dir, training_data_options_from_config(config), run.budget);
  reject_store_mismatch(config, data.store->info());
  refuse_missing_capability(entry, config, run.kind, false, data.store->info().classes());
  data.store = apply_feature_transforms(std::move(data.store), config.get_string_list("features.transform"),
                                        run.budget, config.get_bytes("engine.block_bytes"));
  run.data = &data;
  if (entry.check_data) entry.check_data(run);
  run.session = std::make_unique<ResumeSession>(
      run.out_dir, store_run_identity(config, command_name(run.kind), data.store->info().store_checksum), run.restart,
      final_output(run.kind), run.budget);
}

}  // namespace

int run_solver(RunKind kind, const Config& config, bool restart) {
  const SolverEntry& entry = find_solver(config.get_string("solver"));
  Communicator& world = world_communicator();
  require_partitioned_store(config, world);
  const bool partitioned = is_partitioned_store(config.get_string("data.train"));
  refuse_missing_capability(entry, config, kind, partitioned, 0);
  if (entry.check_config) entry.check_config(config, kind, partitioned);
  MemoryBudget budget(config.get_bytes("engine.memory_budget"));
  RunWarnings warnings;
  SolverRun run(config, kind, budget, warnings, world, restart);
  TrainingData data;
  if (partitioned) {
    if (kind == RunKind::kTrain)
      warn_if_threads_exceed_affinity(scheduler_options_from_config(config).threads, world, warnings);
    open_partitioned(entry, run);
  } else {
    open_single(entry, run, data);
  }
  return kind == RunKind::kTrain ? entry.train(run) : entry.path(run);
}

}  // namespace fgm::cli
