// fgm_rewrite_store: writes a store again in the current store format, from
// its own blocks (the same rows, labels, classes and column ids; the cut
// rules and layout of today's StoreWriter). Used to measure a new format on
// a large store without generating or parsing it again. Not a test.
//   fgm_rewrite_store --store OLD --out NEW [--memory-budget 2GB] [--shard-bytes 64MB]
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/hash.h"
#include "core/memory_budget.h"
#include "io/column_block.h"
#include "io/shard_store.h"
#include "io/store_files.h"
#include "io/store_writer.h"

int main(int argc, char** argv) {
  CLI::App app{"fgm_rewrite_store: a store written again in the current format"};
  std::string in_dir, out_dir, budget_text = "2GB", shard_text = "64MB";
  app.add_option("--store", in_dir, "store to read")->required();
  app.add_option("--out", out_dir, "store to write (must not exist)")->required();
  app.add_option("--memory-budget", budget_text, "budget of the copy")->capture_default_str();
  app.add_option("--shard-bytes", shard_text, "shard target of the new store")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    using namespace fgm;
    MemoryBudget budget(parse_byte_size(budget_text, "--memory-budget"), "--memory-budget");
    auto store = ShardStore::open(in_dir, budget);
    const StoreInfo& info = store->info();
    store::check_output_dir(out_dir);
    store::TempDir tmp(out_dir);
    store::StoreWriterOptions wo;
    wo.n_rows = info.n_rows;
    wo.tile_rows = info.tile_rows;
    wo.shard_target_bytes = parse_byte_size(shard_text, "--shard-bytes");
    wo.block_target_bytes = info.block_bytes;
    store::WrittenShards written;
    {
      store::StoreWriter writer(tmp, budget, wo);
      BlockBuffer buffer;
      CscScratch scratch;
      for (const BlockRef& ref : store->plan_blocks(1)) {
        const ColumnBlock block = store->read_block(ref, buffer);
        const CscColumns csc = csc_columns(block, scratch);
        for (uint64_t c = 0; c < csc.column_count; ++c)
          writer.add_column(csc.column_ids[c], csc.row_ids + csc.col_ptr[c],
                            block.unit_values ? nullptr : csc.values + csc.col_ptr[c],
                            csc.col_ptr[c + 1] - csc.col_ptr[c]);
      }
      written = writer.finish();
    }
    store::ManifestFields m;
    m.n_rows = info.n_rows;
    m.n_features = info.n_features;
    m.nnz = info.nnz;
    m.n_positive = info.n_positive;
    m.n_negative = info.n_negative;
    m.positive_value = info.positive_value;
    m.negative_value = info.negative_value;
    m.index_base = info.index_base;
    m.declared_features = info.declared_features;
    m.input_path = info.input_path;
    m.input_bytes = info.input_bytes;
    m.input_checksum = info.input_checksum;
    m.explicit_zeros = info.explicit_zeros;
    m.shard_target_bytes = wo.shard_target_bytes;
    m.tile_rows = info.tile_rows;
    m.nonempty_columns = written.nonempty_columns;
    m.block_bytes = info.block_bytes;
    m.block_count = written.block_count;
    m.shards = std::move(written.shards);
    m.class_values = info.class_values;
    m.class_counts = info.class_counts;
    m.labels_checksum = xxh64(store->labels(), info.n_rows);
    m.classes_checksum = xxh64(store->classes(), 2 * info.n_rows);
    store::write_manifest(
        tmp, m, budget, 1 << 20, [&](store::FileWriter& out) { out.write(store->labels(), info.n_rows); },
        [&](store::FileWriter& out) { out.write(store->classes(), 2 * info.n_rows); });
    tmp.commit();
    fmt::print("{{\"rewrote\":\"{}\",\"to\":\"{}\",\"format\":{},\"blocks\":{},\"nnz\":{}}}\n", in_dir, out_dir,
               kStoreFormatVersion, m.block_count, m.nnz);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fgm_rewrite_store: %s\n", e.what());
    return 1;
  }
}
