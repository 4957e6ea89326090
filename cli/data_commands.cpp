// fgm ingest, fgm synth
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "core/error.h"
#include "core/memory_budget.h"
#include "core/path_checks.h"
#include "core/progress.h"
#include "io/ingest.h"
#include "io/partitioned_store.h"
#include "io/shard_store.h"
#include "synth/synthetic_data.h"
#include "synth/synthetic_sparse.h"

namespace fgm::cli {

Command add_ingest(CLI::App& app) {
  auto* sub = app.add_subcommand("ingest", "convert LIBSVM text (plain/gz/bz2/xz) into a column-block store");
  sub->option_defaults()->always_capture_default();  // --help shows each option's default
  struct Args {
    std::string input, out, budget = "256MB", progress = "auto", max_store = "1TB";
    int index_base = 1, threads = 1;
    uint64_t features = 0;
    uint32_t tile_rows = kDefaultTileRows;
    std::string block_bytes = "16MB";
    uint32_t partitions = 0;
  };
  auto args = std::make_shared<Args>();
  sub->add_option("input", args->input, "LIBSVM/svmlight file")->required();
  sub->add_option("--out", args->out, "store directory to create")->required();
  sub->add_option("--memory-budget", args->budget, "peak memory, e.g. 256MB");
  sub->add_option("--index-base", args->index_base, "1 (default) or 0")->check(CLI::Range(0, 1));
  sub->add_option("--features", args->features, "declared number of features (0: infer)");
  sub->add_option("--threads", args->threads, "parser threads")->check(CLI::Range(1, 1024));
  sub->add_option("--progress", args->progress, "auto, on or off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  sub->add_option("--max-store-bytes", args->max_store,
                  "refuse a store estimated larger than this (store.max_bytes); free space is "
                  "always checked too");
  sub->add_option("--tile-rows", args->tile_rows,
                  "rows per tile of the stored column blocks (store.tile_rows)")
      ->check(CLI::Range(1u, 2147483647u));
  sub->add_option("--block-bytes", args->block_bytes,
                  "target size of a stored column block (store.block_bytes)");
  sub->add_option("--partitions", args->partitions,
                  "write P row partitions (STORE/part-NNNN, STORE/partitions.json) for `mpirun -np K fgm "
                  "train` with K dividing P (docs/distributed.md)")
      ->check(CLI::Range(1u, 65536u));
  return {sub, [args]() {
            MemoryBudget budget(parse_byte_size(args->budget, "--memory-budget"), "--memory-budget");
            check_regular_input_file(args->input, "input");
            check_output_directory(args->out, "--out");
            IngestOptions o;
            o.reader.index_base = args->index_base;
            o.reader.declared_features = args->features;
            o.threads = args->threads;
            o.progress = progress_enabled(parse_progress_mode(args->progress));
            o.max_store_bytes = parse_byte_size(args->max_store, "--max-store-bytes");
            o.tile_rows = args->tile_rows;
            o.block_bytes = parse_byte_size(args->block_bytes, "--block-bytes");
            if (args->partitions > 0) {
              const PartitionedIngestStats p = ingest_partitioned(args->input, args->out, args->partitions, o, budget);
              fmt::print("rows={} features={} partitions={} seconds={:.3f}\n", p.manifest.n_rows,
                         p.manifest.n_features, p.manifest.partitions, p.seconds);
              return 0;
            }
            IngestStats s = ingest_libsvm(args->input, args->out, o, budget);
            fmt::print("rows={} features={} nnz={} shards={} blocks={} nonempty_columns={} "
                       "spilled_runs={} seconds={:.3f} text_mb_per_s={:.1f}\n",
                       s.n_rows, s.n_features, s.nnz, s.shards, s.blocks, s.nonempty_columns,
                       s.spilled_runs, s.seconds,
                       s.seconds > 0 ? s.text_bytes / 1e6 / s.seconds : 0.0);
            return 0;
          }};
}

Command add_synth(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "synth",
      "write synthetic data with a planted truth: --kind gaussian (Section 8.2: Gaussian X, "
      "planted sparse w, y = sign(Xw)), --kind groups (Section 8.6.1: the same X, consecutive "
      "groups of features, a few planted groups; writes groups.txt and planted_groups.txt too) or "
      "--kind sparse (kddb-like: Zipf feature popularity, ~29 nonzeros per row, planted linear and "
      "cross terms)");
  sub->option_defaults()->always_capture_default();  // --help shows each option's default
  auto o = std::make_shared<SynthOptions>();
  auto sp = std::make_shared<SparseSynthOptions>();
  struct Args {
    std::string out, kind = "gaussian", values = "binary", budget = "256MB";
  };
  auto args = std::make_shared<Args>();
  sub->add_option("--out", args->out, "output directory (train.svm or store/, test.svm, truth.txt)")
      ->required();
  sub->add_option("--kind", args->kind, "gaussian (default), groups or sparse")
      ->check(CLI::IsMember({"gaussian", "groups", "sparse"}));
  sub->add_option("--rows", o->rows, "training rows");
  sub->add_option("--test-rows", o->test_rows, "test rows");
  sub->add_option("--features", o->features, "features m");
  sub->add_option("--seed", o->seed, "random seed");
  // gaussian only
  sub->add_option("--relevant", o->relevant, "gaussian: planted relevant features");
  sub->add_option("--digits", o->digits, "gaussian, groups: significant digits per value")
      ->check(CLI::Range(1, 17));
  // groups only
  const std::vector<std::string> groups_only = {"--features-per-group", "--relevant-groups", "--group-overlap"};
  sub->add_option("--features-per-group", o->features_per_group,
                  "groups: features per group (consecutive ids; the last group takes the remainder)");
  sub->add_option("--relevant-groups", o->relevant_groups, "groups: planted relevant groups");
  sub->add_option("--group-overlap", o->group_overlap,
                  "groups: features each group shares with the next (sliding windows; train with "
                  "features.group_structure = overlapping)");
  // sparse only
  const std::vector<std::string> sparse_only = {
      "--nnz-per-row", "--zipf",          "--cooccur", "--group-size",      "--planted-linear",
      "--planted-cross", "--min-term-frequency", "--values", "--label-noise", "--store", "--tile-rows", "--block-bytes",
      "--gzip",        "--threads",       "--memory-budget", "--shard-target"};
  sub->add_option("--nnz-per-row", sp->nnz_per_row, "sparse: mean nonzeros per row (Poisson)");
  sub->add_option("--zipf", sp->zipf, "sparse: feature popularity exponent, P(rank r) ~ r^-s");
  sub->add_option("--cooccur", sp->cooccur,
                  "sparse: probability that a drawn feature brings a companion of similar "
                  "popularity");
  sub->add_option("--group-size", sp->group_size, "sparse: popularity group of companions");
  sub->add_option("--planted-linear", sp->planted_linear, "sparse: planted linear features");
  sub->add_option("--planted-cross", sp->planted_cross, "sparse: planted cross pairs x_j*x_k");
  sub->add_option("--min-term-frequency", sp->min_term_frequency,
                  "sparse: share of rows each planted term occurs in, at least");
  sub->add_option("--values", args->values, "sparse: binary (1, as kddb) or real (k/1000)")
      ->check(CLI::IsMember({"binary", "real"}));
  sub->add_option("--label-noise", sp->label_noise, "sparse: probability of a flipped label");
  sub->add_flag("--store", sp->store,
                "sparse: write the training set as <out>/store (shard form, as fgm ingest) "
                "instead of <out>/train.svm");
  sub->add_flag("--gzip", sp->gzip, "sparse: gzip the text files (.svm.gz)");
  sub->add_option("--threads", sp->threads, "sparse: generation threads (same output for any)")
      ->check(CLI::Range(1, 1024));
  sub->add_option("--memory-budget", args->budget, "sparse: peak memory, e.g. 256MB");
  sub->add_option("--shard-target", sp->shard_target_bytes,
                  "sparse --store: shard size in bytes (0: as fgm ingest)");
  sub->add_option("--tile-rows", sp->tile_rows,
                  "sparse --store: rows per tile of the stored blocks (as fgm ingest --tile-rows)")
      ->check(CLI::Range(1u, 2147483647u));
  sub->add_option("--block-bytes", sp->block_bytes,
                  "sparse --store: stored block target in bytes (0: as fgm ingest)");
  return {sub, [o, sp, args, sub, sparse_only, groups_only]() {
            auto misplaced = [&](const std::vector<std::string>& names, const char* kind) {
              for (const auto& name : names)
                if (sub->count(name) > 0)
                  throw Error(ErrorKind::kConfig,
                              fmt::format("synth: {} applies to --kind {} only", name, kind));
            };
            if (args->kind != "groups") misplaced(groups_only, "groups");
            if (args->kind == "groups") {
              misplaced(sparse_only, "sparse");
              misplaced({"--relevant"}, "gaussian");
              check_output_directory(args->out, "--out");
              GroupedTruth t = write_grouped_synthetic(args->out, *o);
              fmt::print("wrote {0}/train.svm ({1} rows), {0}/test.svm ({2} rows), {0}/truth.txt "
                         "({3} planted features), {0}/groups.txt, {0}/planted_groups.txt ({4} "
                         "planted groups of {5} features each, {6} features{7})\n",
                         args->out, o->rows, o->test_rows, t.features.ids.size(), t.groups.size(),
                         o->features_per_group, o->features,
                         o->group_overlap ? fmt::format(", neighbours sharing {}", o->group_overlap) : "");
              return 0;
            }
            if (args->kind == "gaussian") {
              misplaced(sparse_only, "sparse");
              check_output_directory(args->out, "--out");
              PlantedTruth t = write_gaussian_synthetic(args->out, *o);
              fmt::print("wrote {}/train.svm ({} rows), {}/test.svm ({} rows), {}/truth.txt ({} "
                         "relevant of {} features)\n",
                         args->out, o->rows, args->out, o->test_rows, args->out, t.ids.size(),
                         o->features);
              return 0;
            }
            misplaced({"--relevant"}, "gaussian");
            misplaced({"--digits"}, "gaussian or groups");
            check_output_directory(args->out, "--out");
            sp->rows = o->rows;
            sp->test_rows = o->test_rows;
            sp->features = o->features;
            sp->seed = o->seed;
            sp->values = args->values == "real" ? SynthValues::kReal : SynthValues::kBinary;
            MemoryBudget budget(parse_byte_size(args->budget, "--memory-budget"), "--memory-budget");
            SparseSynthResult r = write_sparse_synthetic(args->out, *sp, budget);
            fmt::print("wrote {} ({} rows, {} nonzeros, {} positive{}), {} ({} rows), {} ({} linear, "
                       "{} cross terms)\n",
                       r.train_path, sp->rows, r.train_nnz, r.train_positive,
                       sp->store ? fmt::format(", {} shards", r.shards) : std::string(),
                       r.test_path.empty() ? "no test set" : r.test_path, sp->test_rows,
                       r.truth_path, r.truth.ids.size(), r.truth.cross_ids.size());
            fmt::print("rows={} features={} nnz={} positive={} test_rows={} test_nnz={} shards={} "
                       "output_bytes={} passes={} seconds={:.3f} budget_peak_bytes={} "
                       "peak_rss_bytes={}\n",
                       sp->rows, sp->features, r.train_nnz, r.train_positive, sp->test_rows,
                       r.test_nnz, r.shards, r.output_bytes, r.generation_passes, r.seconds,
                       budget.peak(), peak_rss_bytes());
            return 0;
          }};
}

}  // namespace fgm::cli
