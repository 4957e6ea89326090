// fgm_bench_pruning: what the pruned linear pass (features/column_pruning.h)
// skips on a store, and what a layout that kept small columns apart could
// avoid reading. Not a test.
//
// Every block of the store is read once (one thread, --block-bytes units) and
// summed exactly (block_column_dots) against three dual vectors:
//   random    a = α∘y, α ~ U(0, C) (fgm_bench_tall's)
//   equal     a = y (α = 1: FGM's first pass without a bias)
//   balanced  a_i = y_i / n_{y_i} (α constant per class with Σ α_i y_i = 0:
//             the first pass with a fitted bias, and the shape of later ones)
// For each: the final floor F (the B-th best c²), and the share of columns,
// nonzeros, cells and stored bytes (4 per nonzero, 8 per cell, 16 per column)
// of the columns whose bound (‖a‖∞·n_k·max|x|)²·(1+2^-18) is below F (what an
// oracle floor would skip), then the same with the floor the pruned pass
// reaches block by block in stream order (offer_block_top, one thread).
// Then, per count threshold τ: the share of the store in columns of fewer
// than τ nonzeros, and whether a tail part of such columns could be skipped
// (τ·‖a‖∞·max|x| below √F) for each dual.
// --deferred-mb: the emulated pass hands its popular columns to a
// DeferredColumns batch of that size (columns summed in blocks, deferred,
// flushed). --popular N: the columns of at least N nonzeros summed column
// by column and tile by tile (thread CPU seconds, same bits checked).
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/memory_budget.h"
#include "features/block_scores.h"
#include "features/column_pruning.h"
#include "io/shard_store.h"

namespace {

struct Shares {
  uint64_t columns = 0, nnz = 0, cells = 0, bytes = 0;
  void add(uint64_t n, uint64_t cells_k) {
    columns += 1;
    nnz += n;
    cells += cells_k;
    bytes += 4 * n + 8 * cells_k + 16;
  }
};

std::string shares_json(const Shares& part, const Shares& all) {
  auto r = [](uint64_t x, uint64_t y) { return y == 0 ? 0.0 : static_cast<double>(x) / static_cast<double>(y); };
  return fmt::format("{{\"columns\":{:.4f},\"nnz\":{:.4f},\"cells\":{:.4f},\"bytes\":{:.4f}}}", r(part.columns, all.columns),
                     r(part.nnz, all.nnz), r(part.cells, all.cells), r(part.bytes, all.bytes));
}

// Sums the columns (rows in pop_rows[ptr[j], ptr[j+1])) two ways with the same
// adds per column: column by column (each column walks its tiles: the dual is
// swept once per column) and tile by tile (every column's cell of tile t, then
// t + 1: the dual once for all).
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void time_popular(const std::vector<uint64_t>& ptr, const std::vector<uint32_t>& rows, const double* a,
                  uint32_t tile_rows) {
  const uint64_t J = ptr.size() - 1;
  std::vector<double> by_column(J), by_tile(J, 0.0);
  double t0 = thread_cpu_seconds();
  for (uint64_t j = 0; j < J; ++j) {
    const uint32_t* r = rows.data() + ptr[j];
    double c = 0;
    for (uint64_t b = 0, n = ptr[j + 1] - ptr[j]; b < n;) {
      const uint64_t end_row = (uint64_t{r[b]} / tile_rows + 1) * tile_rows;
      uint64_t e = b + 1;
      while (e < n && r[e] < end_row) ++e;
      c += fgm::cell_sum(r + b, static_cast<uint32_t>(e - b), a);
      b = e;
    }
    by_column[j] = c;
  }
  const double column_seconds = thread_cpu_seconds() - t0;
  // Cell boundaries per column and tile (outside the timing).
  std::vector<uint64_t> at(J);
  for (uint64_t j = 0; j < J; ++j) at[j] = ptr[j];
  t0 = thread_cpu_seconds();
  for (uint64_t t = 0;; ++t) {
    bool any = false;
    const uint64_t end_row = (t + 1) * tile_rows;
    for (uint64_t j = 0; j < J; ++j) {
      uint64_t b = at[j], e = b;
      const uint64_t stop = ptr[j + 1];
      while (e < stop && rows[e] < end_row) ++e;
      if (e > b) by_tile[j] += fgm::cell_sum(rows.data() + b, static_cast<uint32_t>(e - b), a);
      at[j] = e;
      any = any || e < stop;
    }
    if (!any) break;
  }
  const double tile_seconds = thread_cpu_seconds() - t0;
  bool same = true;
  for (uint64_t j = 0; j < J; ++j) same = same && by_column[j] == by_tile[j];
  fmt::print("{{\"bench\":\"pruning_popular\",\"columns\":{},\"nnz\":{},\"by_column_seconds\":{:.4f},"
             "\"by_tile_seconds\":{:.4f},\"same_bits\":{}}}\n",
             J, rows.size(), column_seconds, tile_seconds, same ? "true" : "false");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fgm_bench_pruning: what the pruned scoring pass skips on a store"};
  std::string store_dir, block_text = "16MB";
  uint64_t B = 10, seed = 1;
  double C = 10.0;
  uint64_t popular = 0, deferred_mb = 0;
  app.add_option("--deferred-mb", deferred_mb, "emulated pass: a DeferredColumns batch of this many MiB per dual")
      ->capture_default_str();
  app.add_option("--popular", popular, "also time summing the columns of at least this many nonzeros column by "
                 "column against tile by tile (0: no)")->capture_default_str();
  app.add_option("--store", store_dir, "store directory")->required();
  app.add_option("--block-bytes", block_text, "pass units")->capture_default_str();
  app.add_option("--B", B, "top-B")->capture_default_str();
  app.add_option("--C", C, "alpha ~ U(0, C) of the random dual")->capture_default_str();
  app.add_option("--seed", seed, "seed of the random dual")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    fgm::MemoryBudget budget(uint64_t{64} << 30, "--memory-budget");
    auto store = fgm::ShardStore::open(store_dir, budget);
    const fgm::StoreInfo& info = store->info();
    const uint64_t n = info.n_rows;
    constexpr int kDuals = 3;
    const char* names[kDuals] = {"random", "equal", "balanced"};
    std::vector<std::vector<double>> a(kDuals, std::vector<double>(n));
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> unif(0.0, C);
    for (uint64_t i = 0; i < n; ++i) {
      const int8_t y = store->labels()[i];
      a[0][i] = unif(rng) * y;
      a[1][i] = y;
      a[2][i] = y > 0 ? 1.0 / static_cast<double>(info.n_positive) : -1.0 / static_cast<double>(info.n_negative);
    }
    double a_max[kDuals];
    for (int d = 0; d < kDuals; ++d) a_max[d] = fgm::max_abs(a[d].data(), n);
    const std::vector<fgm::BlockRef> refs = store->plan_blocks(fgm::parse_byte_size(block_text, "--block-bytes"));

    // Per listed column (store order): nonzeros, cells, x_max, c² per dual.
    std::vector<uint32_t> count, cells;
    std::vector<float> x_max;
    std::vector<double> score[kDuals];
    std::vector<uint64_t> block_begin;
    fgm::BlockBuffer buffer;
    std::vector<double> c;
    std::vector<uint32_t> block_count;
    // The running pass of each dual (one thread, stream order).
    fgm::ScoreFloor floors[kDuals];
    std::vector<fgm::TopBCache> globals;
    for (int d = 0; d < kDuals; ++d) globals.emplace_back(B, &budget);
    fgm::PruningScratch scratch;
    const uint64_t tiles = (n + info.tile_rows - 1) / info.tile_rows;
    std::vector<std::unique_ptr<fgm::DeferredColumns>> batches;
    for (int d = 0; d < kDuals; ++d)
      batches.push_back(deferred_mb > 0 ? std::make_unique<fgm::DeferredColumns>(deferred_mb << 20, 16 * tiles) : nullptr);
    uint64_t deferred_cols[kDuals] = {0, 0, 0}, flushed[kDuals] = {0, 0, 0}, short_summed[kDuals] = {0, 0, 0};
    uint64_t summed[kDuals] = {0, 0, 0}, summed_nnz[kDuals] = {0, 0, 0}, whole_blocks[kDuals] = {0, 0, 0};
    std::vector<uint64_t> pop_ptr{0};
    std::vector<uint32_t> pop_rows;
    fgm::CscScratch csc_scratch;
    for (const auto& ref : refs) {
      const fgm::ColumnBlock block = store->read_block(ref, buffer);
      if (popular > 0) {
        const fgm::CscColumns csc = fgm::csc_columns(block, csc_scratch);
        for (uint64_t k = 0; k < csc.column_count; ++k)
          if (csc.col_ptr[k + 1] - csc.col_ptr[k] >= popular) {
            pop_rows.insert(pop_rows.end(), csc.row_ids + csc.col_ptr[k], csc.row_ids + csc.col_ptr[k + 1]);
            pop_ptr.push_back(pop_rows.size());
          }
      }
      const uint64_t base = count.size();
      block_begin.push_back(base);
      block_count.resize(block.column_count);
      fgm::column_nonzeros(block, block_count.data());
      count.insert(count.end(), block_count.begin(), block_count.end());
      cells.resize(base + block.column_count, 0);
      for (uint32_t x = 0; x < block.cell_count(); ++x) ++cells[base + block.cell_column[x]];
      for (uint64_t k = 0; k < block.column_count; ++k)
        x_max.push_back(std::max(std::fabs(block.col_min[k]), std::fabs(block.col_max[k])));
      c.resize(block.column_count);
      for (int d = 0; d < kDuals; ++d) {
        fgm::block_column_dots(block, a[d].data(), c.data());
        for (uint64_t k = 0; k < block.column_count; ++k) score[d].push_back(c[k] * c[k]);
        fgm::TopBCache local(B, &budget);
        const fgm::PruningCounts pc =
            fgm::offer_block_top(block, a[d].data(), a_max[d], floors[d], local, [](uint64_t) { return false; },
                                 scratch, batches[d].get());
        deferred_cols[d] += pc.columns_deferred;
        flushed[d] += pc.flushed_summed;
        short_summed[d] += pc.whole_block ? 0 : pc.columns_summed;
        summed[d] += pc.columns_summed;
        whole_blocks[d] += pc.whole_block ? 1 : 0;
        if (pc.whole_block) {
          summed_nnz[d] += block.nnz();
        } else {
          // The summed columns are the ones whose bound reached the floor of
          // their stage; recount from the scratch's bounds against the floor
          // after the block (a lower bound of what was summed).
          for (uint64_t k = 0; k < block.column_count; ++k)
            if (!(scratch.bound2[k] < floors[d].get())) summed_nnz[d] += block_count[k];
        }
        globals[d].merge(local);
        floors[d].raise_from(globals[d]);
      }
    }
    for (int d = 0; d < kDuals; ++d) {
      if (batches[d]) flushed[d] += batches[d]->flush(a[d].data(), floors[d], globals[d]);
      fmt::print("{{\"bench\":\"pruning_deferred\",\"dual\":\"{}\",\"deferred_columns\":{},\"flushed_summed\":{},"
                 "\"summed_in_blocks_not_whole\":{},\"whole_blocks\":{}}}\n",
                 names[d], deferred_cols[d], flushed[d], short_summed[d], whole_blocks[d]);
    }
    Shares all;
    for (uint64_t k = 0; k < count.size(); ++k) all.add(count[k], cells[k]);
    fmt::print("{{\"bench\":\"pruning_store\",\"store\":\"{}\",\"format\":{},\"rows\":{},\"features\":{},\"nnz\":{},"
               "\"listed_columns\":{},\"cells\":{},\"column_bytes\":{},\"units\":{},\"positive\":{},\"negative\":{}}}\n",
               store_dir, info.format_version, n, info.n_features, info.nnz, all.columns, all.cells, all.bytes,
               refs.size(), info.n_positive, info.n_negative);
    constexpr double kMargin = 1.0 + 0x1p-18;
    double floor_of[kDuals];
    for (int d = 0; d < kDuals; ++d) {
      std::vector<double> s = score[d];
      const uint64_t b = std::min<uint64_t>(B, s.size());
      std::nth_element(s.begin(), s.begin() + (b - 1), s.end(), std::greater<double>());
      const double F = s[b - 1];
      floor_of[d] = F;
      Shares skipped;
      for (uint64_t k = 0; k < count.size(); ++k) {
        const double bound = static_cast<double>(count[k]) * x_max[k] * a_max[d];
        if (bound * bound * kMargin < F) skipped.add(count[k], cells[k]);
      }
      fmt::print("{{\"bench\":\"pruning_dual\",\"dual\":\"{}\",\"a_max\":{:.6g},\"floor\":{:.6g},"
                 "\"count_reaching_floor\":{:.1f},\"oracle_skipped\":{},\"pass_summed_columns\":{:.4f},"
                 "\"pass_summed_nnz_at_least\":{:.4f},\"pass_whole_blocks\":{},\"units\":{}}}\n",
                 names[d], a_max[d], F, std::sqrt(F) / a_max[d], shares_json(skipped, all),
                 static_cast<double>(summed[d]) / all.columns, static_cast<double>(summed_nnz[d]) / all.nnz,
                 whole_blocks[d], refs.size());
    }
    for (uint64_t tau : {2, 3, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384}) {
      Shares tail;
      for (uint64_t k = 0; k < count.size(); ++k)
        if (count[k] < tau) tail.add(count[k], cells[k]);
      std::string skippable;
      for (int d = 0; d < kDuals; ++d) {
        const double bound = static_cast<double>(tau - 1) * a_max[d];  // binary x: max|x| = 1 (x_max ≤ 1 checked below)
        skippable += fmt::format(",\"skippable_{}\":{}", names[d], bound * bound * kMargin < floor_of[d] ? "true" : "false");
      }
      fmt::print("{{\"bench\":\"pruning_tail\",\"tau\":{},\"tail\":{}{}}}\n", tau, shares_json(tail, all), skippable);
    }
    if (popular > 0) time_popular(pop_ptr, pop_rows, a[0].data(), info.tile_rows);
    float xm = 0;
    for (float v : x_max) xm = std::max(xm, v);
    fmt::print("{{\"bench\":\"pruning_values\",\"max_abs_value\":{}}}\n", xm);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fgm_bench_pruning: %s\n", e.what());
    return 1;
  }
}
