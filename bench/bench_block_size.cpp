// How the stored block size (IngestOptions::block_bytes, chosen at ingest)
// affects a linear scoring pass with the tiled kernel: for each stored block,
// for each tile, for each cell, sum a[row]·value over the cell and add it to
// the column's score. Stored blocks are streamed from the store (pread +
// piece checks + bounds checks, as the engine reads them), split round-robin
// over the threads. Used to pick kDefaultBlockBytes (io/ingest.h).
//   fgm_bench_block_size <store> [<store> ...] [--threads 2] [--repeat 3]
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/memory_budget.h"
#include "io/shard_store.h"

namespace {

// CPU seconds of the whole process (the machine may be shared: wall time
// then measures the neighbours too).
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double tiled_pass(const fgm::ShardStore& store, const std::vector<fgm::BlockRef>& blocks,
                  const double* a, int threads) {
  std::vector<double> sums(static_cast<size_t>(threads), 0.0);
  auto work = [&](int tid) {
    fgm::BlockBuffer buffer;
    std::vector<double> score;
    double total = 0;
    for (size_t i = static_cast<size_t>(tid); i < blocks.size(); i += static_cast<size_t>(threads)) {
      if (i + threads < blocks.size()) store.prefetch_block(blocks[i + threads]);
      const fgm::ColumnBlock c = store.read_block(blocks[i], buffer);
      score.assign(c.column_count, 0.0);
      for (uint32_t t = 0; t < c.tile_count; ++t)
        for (uint32_t x = c.tile_cells[t]; x < c.tile_cells[t + 1]; ++x) {
          double s = 0;
          for (uint32_t p = c.cell_ptr[x]; p < c.cell_ptr[x + 1]; ++p) s += a[c.row_ids[p]] * c.values[p];
          score[c.cell_column[x]] += s;
        }
      for (double v : score) total += v * v;
    }
    sums[static_cast<size_t>(tid)] = total;
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work, t);
  for (auto& t : pool) t.join();
  double total = 0;
  for (double s : sums) total += s;
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, repeat = 3;
  std::vector<std::string> stores;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (arg == "--repeat" && i + 1 < argc) repeat = std::atoi(argv[++i]);
    else stores.push_back(arg);
  }
  std::printf("%-44s %10s %8s %8s %10s %10s %10s %12s\n", "store", "block_MiB", "blocks", "tiles",
              "store_MB", "best_s", "best_cpu_s", "nnz_per_cpu_s");
  for (const auto& dir : stores) {
    fgm::MemoryBudget budget(uint64_t{4} << 30);
    auto store = fgm::ShardStore::open(dir, budget);
    const fgm::StoreInfo& info = store->info();
    std::vector<double> a(info.n_rows);
    std::mt19937_64 rng(1);
    for (double& v : a) v = std::uniform_real_distribution<double>(-1, 1)(rng);
    const auto blocks = store->plan_blocks(1);  // every stored block alone
    double best = 1e30, best_cpu = 1e30, check = 0;
    for (int r = 0; r < repeat; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      const double c0 = cpu_seconds();
      check += tiled_pass(*store, blocks, a.data(), threads);
      best_cpu = std::min(best_cpu, cpu_seconds() - c0);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("%-44s %10.2f %8zu %8llu %10.1f %10.3f %10.3f %12.3g  (checksum %.6g)\n", dir.c_str(),
                info.block_bytes / 1048576.0, blocks.size(),
                static_cast<unsigned long long>((info.n_rows + info.tile_rows - 1) / info.tile_rows),
                info.shard_bytes / 1e6, best, best_cpu, info.nnz / best_cpu, check / repeat);
  }
  return 0;
}
