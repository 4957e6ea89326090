#include "cli/distributed_train.h"

#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/run_output.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_writer.h"
#include "core/path_checks.h"
#include "engine/distributed_fgm.h"
#include "engine/evaluate.h"
#include "engine/solver_choice.h"
#include "io/partitioned_store.h"
#include "report/report_page.h"

namespace fgm::cli {
namespace {

// Settings the distributed trainer does not have yet: refused, naming the key.
void reject_unsupported(const Config& config, const TrainSettings& settings) {
  auto refuse = [&](const char* key, const std::string& why) {
    throw Error(ErrorKind::kConfig, fmt::format("{}: {} is not supported on a partitioned store yet "
                                                "(docs/distributed.md lists what is distributed)",
                                                key, why));
  };
  if (const SolverKind solver = solver_from_config(config); solver != SolverKind::kFgm)
    refuse("solver", "solver = " + std::string(solver_name(solver)));
  if (settings.space.kind != "linear") refuse("features.kind", "features.kind = " + settings.space.kind);
  if (settings.apg.bias) refuse("fgm.bias", "a bias (fgm.bias = true)");
  if (!config.get_string_list("features.transform").empty()) refuse("features.transform", "a feature transform");
  if (settings.max_features != 0) refuse("fgm.max_features", "a feature cap");
  if (!config.get_string("data.truth").empty()) refuse("data.truth", "truth recovery");
}

void write_run_json(const std::string& path, const Config& config, const DistributedOutcome& o, const EvalResult* test,
                    double objective) {
  JsonWriter j;
  j.begin_object();
  j.key("engine_version").value(FGM_VERSION);
  j.key("solver").value("fgm");
  j.key("data").begin_object();
  j.key("train").value(config.get_string("data.train"));
  j.key("rows").value(o.manifest.n_rows);
  j.key("features").value(o.manifest.n_features);
  j.key("partitions").value(static_cast<uint64_t>(o.manifest.partitions));
  j.end_object();
  write_config_section(j, o.model.config);
  j.key("distributed").begin_object();
  j.key("ranks").value(o.ranks);
  j.key("partitions").value(static_cast<uint64_t>(o.manifest.partitions));
  j.key("partitions_per_rank").value(static_cast<uint64_t>(o.own_partitions));
  j.key("communication_of").value("rank 0: payload bytes sent plus received");
  j.key("passes").begin_array();
  for (const auto& c : o.communication) {
    j.begin_object();
    j.key("iter").value(c.iteration);
    j.key("phase").value(c.phase);
    j.key("bytes").value(c.comm.bytes);
    j.key("collectives").value(c.comm.calls);
    j.key("seconds").value(c.comm.seconds);
    j.end_object();
  }
  j.end_array();
  j.end_object();
  j.key("iterations").begin_array();
  for (const auto& r : o.iterations) write_iteration(j, r);
  j.end_array();
  j.key("stop_reason").value(o.stop_reason);
  j.key("objective").value(objective);
  j.key("objective_no_features").value(o.objective_no_features);
  j.key("final_sip_violation").value(o.final_sip_violation);
  write_selected_features(j, o.model.features, o.model.index_base);
  j.key("seconds").value(o.seconds);
  if (test) {
    j.key("test").begin_object();
    j.key("accuracy").value(test->accuracy);
    j.key("auc").value(test->auc);
    j.end_object();
  }
  j.end_object();
  write_file_atomic(path, j.str() + "\n");
}

}  // namespace

void require_partitioned_store(const Config& config, const Communicator& comm) {
  if (comm.size() == 1 || is_partitioned_store(config.get_string("data.train"))) return;
  throw Error(ErrorKind::kConfig,
              fmt::format("data.train = {} is not a partitioned store, and this run has {} ranks: ingest it with "
                          "fgm ingest INPUT --out STORE --partitions {} and set data.train = STORE "
                          "(docs/distributed.md)",
                          config.get_string("data.train"), comm.size(), comm.size()));
}

int train_partitioned(const Config& config, const TrainSettings& settings, MemoryBudget& budget, Communicator& comm) {
  reject_unsupported(config, settings);
  // Every rank must train the same thing: the first rank that differs is named.
  std::string settings_text;
  for (const auto& [key, value] : config.dump())
    if (key != "engine.threads" && key != "engine.memory_budget") settings_text += key + "=" + value + "\n";
  check_same_on_all_ranks(comm, "configuration", settings_text);
  const std::string dir = config.get_string("data.train");
  const std::string out_dir = config.get_string("output.dir");
  if (comm.rank() == 0)
    spdlog::info("training on partitioned store {} with {} rank(s), B={}, C={}, loss={}, threads={}", dir,
                 comm.size(), settings.B, settings.apg.C, loss_name(settings.apg.loss), settings.apg.threads);
  DistributedOutcome outcome = train_fgm_distributed(comm, dir, settings, budget);
  outcome.model.config = config.dump();
  if (comm.rank() != 0) return 0;
  spdlog::info("stopped: {} after {} iterations, {} features", outcome.stop_reason, outcome.iterations.size(),
               outcome.model.features.size());
  const bool has_test = !config.get_string("data.test").empty();
  EvalResult test;
  if (has_test) test = evaluate_file(config.get_string("data.test"), outcome.model, false, budget);
  create_output_directory(out_dir, "output.dir");
  write_model((std::filesystem::path(out_dir) / "model.fgm").string(), outcome.model);
  write_run_json((std::filesystem::path(out_dir) / "run.json").string(), config, outcome, has_test ? &test : nullptr,
                 outcome.model.objective);
  if (config.get_bool("output.report")) report::write_report(out_dir, {.train = true, .path = false});
  fmt::print("selected={} iterations={} objective={:.6g} ranks={}", outcome.model.features.size(),
             outcome.iterations.size(), outcome.model.objective, comm.size());
  if (has_test) fmt::print(" accuracy={:.4f} auc={:.4f}", test.accuracy, test.auc);
  fmt::print(" model={}/model.fgm\n", out_dir);
  return 0;
}

}  // namespace fgm::cli
