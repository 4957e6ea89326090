// fgm ingest, fgm synth
#include <memory>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "core/memory_budget.h"
#include "core/progress.h"
#include "io/shard_store.h"
#include "io/synthetic_data.h"

namespace fgm::cli {

Command add_ingest(CLI::App& app) {
  auto* sub = app.add_subcommand("ingest", "convert LIBSVM text (plain/gz/bz2/xz) into a column-block store");
  struct Args {
    std::string input, out, budget = "256MB", progress = "auto";
    int index_base = 1, threads = 1;
    uint64_t features = 0;
  };
  auto args = std::make_shared<Args>();
  sub->add_option("input", args->input, "LIBSVM/svmlight file")->required();
  sub->add_option("--out", args->out, "store directory to create")->required();
  sub->add_option("--memory-budget", args->budget, "peak memory, e.g. 256MB")->capture_default_str();
  sub->add_option("--index-base", args->index_base, "1 (default) or 0")->check(CLI::Range(0, 1));
  sub->add_option("--features", args->features, "declared number of features (0: infer)");
  sub->add_option("--threads", args->threads, "parser threads")->check(CLI::Range(1, 1024));
  sub->add_option("--progress", args->progress, "auto, on or off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  return {sub, [args]() {
            MemoryBudget budget(parse_byte_size(args->budget, "--memory-budget"), "--memory-budget");
            IngestOptions o;
            o.reader.index_base = args->index_base;
            o.reader.declared_features = args->features;
            o.threads = args->threads;
            o.progress = progress_enabled(parse_progress_mode(args->progress));
            IngestStats s = ingest_libsvm(args->input, args->out, o, budget);
            fmt::print("rows={} features={} nnz={} shards={} spilled_runs={} seconds={:.3f} "
                       "text_mb_per_s={:.1f}\n",
                       s.n_rows, s.n_features, s.nnz, s.shards, s.spilled_runs, s.seconds,
                       s.seconds > 0 ? s.text_bytes / 1e6 / s.seconds : 0.0);
            return 0;
          }};
}

Command add_synth(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "synth", "write Section 8.2 synthetic data: Gaussian X, planted sparse w, y = sign(Xw)");
  auto o = std::make_shared<SynthOptions>();
  auto out = std::make_shared<std::string>();
  sub->add_option("--out", *out, "output directory (train.svm, test.svm, truth.txt)")->required();
  sub->add_option("--rows", o->rows, "training rows")->capture_default_str();
  sub->add_option("--test-rows", o->test_rows, "test rows")->capture_default_str();
  sub->add_option("--features", o->features, "features m")->capture_default_str();
  sub->add_option("--relevant", o->relevant, "planted relevant features")->capture_default_str();
  sub->add_option("--seed", o->seed, "random seed")->capture_default_str();
  sub->add_option("--digits", o->digits, "significant digits per value")
      ->check(CLI::Range(1, 17))
      ->capture_default_str();
  return {sub, [o, out]() {
            PlantedTruth t = write_gaussian_synthetic(*out, *o);
            fmt::print("wrote {}/train.svm ({} rows), {}/test.svm ({} rows), {}/truth.txt ({} "
                       "relevant of {} features)\n",
                       *out, o->rows, *out, o->test_rows, *out, t.ids.size(), o->features);
            return 0;
          }};
}

}  // namespace fgm::cli
