// fgm_bench_tall: the engine's linear scoring pass on a tall store next to a
// naive single-loop CSC gather over the same nonzeros and the machine's
// memory read bandwidth, measured side by side in one process (issue 9).
// Not a test.
//
// Before the timed repetitions (untimed) every block of the store is read once
// (ShardStore::read_block) and its columns are appended to plain CSC arrays
// (col_ptr, row_ids, values) held in memory: the block itself on store format
// 3, csc_columns() of each block on format 4 (io/column_block.h). Then, per
// repetition, interleaved so that the drift of a shared machine hits all alike:
//   bandwidth  a --bandwidth-bytes uint64 array summed by --threads std::threads
//              (SSE2, 4 accumulators, contiguous slices); bytes / second.
//   pass       one scoring pass exactly as `fgm train` runs it with
//              engine.memory_budget = --memory-budget: the linear FeatureSpace
//              through one BlockStream kept for all passes, --threads
//              threads, B = 10, a = α∘y with α ~ U(0, C), the store kept
//              resident between passes when the trainer would keep it
//              (keeps_store_resident: resident blocks of a tall store carry
//              their row order) in the trainer's units (scoring_block_bytes
//              of --block-bytes); nonzeros / second.
//   streamed   the same pass streamed from the store in --block-bytes units
//              (what `fgm train` does when the store is more than half the
//              budget, e.g. the tall store at the default 1GB): every block
//              read with pread and verified, every pass. With --cold the
//              store's files leave the page cache before each timed pass.
//   naive      for every column j: c_j = Σ_k a[row[k]]·value[k] over the
//              in-memory CSC arrays, one plain loop, columns split evenly
//              over --naive-threads threads (by default as many as the
//              pass: a speedup compares equal thread counts); nonzeros / second.
// The naive loop's top-B columns by c_j² are checked against the pass's top B
// (same ids, or the figure is flagged), and so is the streamed pass's. One
// JSON line per measurement, then a "tall_summary" line with the medians and
// speedup = naive seconds / pass seconds (median of the per-repetition
// ratios; streamed_speedup likewise). CPU seconds (getrusage, whole process)
// are reported beside (and, on a format 6 store, the tail parts the pass left
// unread: tails_skipped): speedup_per_cpu = (naive CPU / naive threads) /
// (pass CPU / threads), the ratio that would hold on idle cores when each
// side's threads are busy alike; on a loaded machine it is the one that does
// not depend on how long the threads waited for a core.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/error.h"
#include "core/memory_budget.h"
#include "features/feature_space.h"
// The scoring pass as `fgm train` runs it: through the typed block stream.
#include "features/block_stream.h"
#include "engine/fgm_trainer.h"
#include "io/shard_store.h"

#include "bench/bench_common.h"

// Store format 4 returns the tiled block of io/column_block.h from read_block
// and declares csc_columns() beside it; format 3 returns the plain CSC block of
// io/shard_store.h. The declaration below only names the scratch type, so this
// file builds against either (see append_block).
namespace fgm {
struct CscScratch;
}

namespace {

using namespace bench;  // bench_common.h
volatile double g_dsink = 0;

// CPU seconds of the whole process (every thread): on a shared machine a pass
// whose threads wait for a core loses wall time but not CPU time.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// ------------------------------------------------------- plain CSC of a store
struct PlainCsc {
  std::vector<uint64_t> col_ptr{0};
  std::vector<uint64_t> column_ids;
  std::vector<uint32_t> row_ids;
  std::vector<float> values;
  void append(uint64_t id, const uint32_t* rows, const float* vals, uint64_t nnz) {
    column_ids.push_back(id);
    row_ids.insert(row_ids.end(), rows, rows + nnz);
    values.insert(values.end(), vals, vals + nnz);
    col_ptr.push_back(row_ids.size());
  }
};

template <class Block, class = void>
struct IsTiledBlock : std::false_type {};
template <class Block>
struct IsTiledBlock<Block, std::void_t<decltype(std::declval<const Block&>().cell_ptr)>> : std::true_type {};

// T, but spelled so that it depends on Block: only instantiated on format 4.
template <class Block, class T>
using DependentOn = std::conditional_t<sizeof(Block) != 0, T, T>;

template <class Block>
void append_block(const Block& block, PlainCsc& out) {
  if constexpr (IsTiledBlock<Block>::value) {
    // Store format 4: merge the row tiles column by column (csc_columns,
    // found by argument-dependent lookup in namespace fgm).
    static DependentOn<Block, fgm::CscScratch> scratch;
    auto csc = csc_columns(block, scratch);
    for (uint64_t c = 0; c < csc.column_count; ++c)
      out.append(csc.column_ids[c], csc.row_ids + csc.col_ptr[c], csc.values + csc.col_ptr[c],
                 csc.col_ptr[c + 1] - csc.col_ptr[c]);
  } else {
    // Store format 3: the block is plain CSC over [first_column, +column_count).
    for (uint64_t c = 0; c < block.column_count; ++c) {
      uint64_t begin = block.col_ptr[c], end = block.col_ptr[c + 1];
      if (begin == end) continue;
      out.append(block.first_column + c, block.row_ids + begin, block.values + begin, end - begin);
    }
  }
}

PlainCsc read_plain_csc(const fgm::ShardStore& store, const std::vector<fgm::BlockRef>& blocks) {
  PlainCsc csc;
  csc.row_ids.reserve(store.info().nnz);
  csc.values.reserve(store.info().nnz);
  fgm::BlockBuffer buffer;
  for (const auto& ref : blocks) append_block(store.read_block(ref, buffer), csc);
  return csc;
}

// The naive gather: one plain loop per column, columns split evenly over
// `threads` std::threads (1: no thread is started).
__attribute__((noinline)) void naive_columns(const PlainCsc& m, const double* a, double* c, uint64_t begin,
                                             uint64_t end) {
  const uint64_t* ptr = m.col_ptr.data();
  const uint32_t* rows = m.row_ids.data();
  const float* vals = m.values.data();
  for (uint64_t j = begin; j < end; ++j) {
    double s = 0;
    for (uint64_t k = ptr[j]; k < ptr[j + 1]; ++k) s += a[rows[k]] * static_cast<double>(vals[k]);
    c[j] = s;
  }
}

double naive_pass(const PlainCsc& m, const double* a, std::vector<double>& c, int threads) {
  const uint64_t cols = m.column_ids.size();
  auto t0 = Clock::now();
  if (threads == 1) {
    naive_columns(m, a, c.data(), 0, cols);
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back(naive_columns, std::cref(m), a, c.data(), cols * t / threads, cols * (t + 1) / threads);
    for (auto& th : pool) th.join();
  }
  double s = seconds_since(t0);
  g_dsink = g_dsink + c[cols / 2];
  return s;
}

// Column ids of the naive scores' top B by c², as a sorted list.
std::vector<uint64_t> naive_top(const PlainCsc& m, const std::vector<double>& c, uint64_t B) {
  std::vector<uint64_t> idx(c.size());
  for (uint64_t j = 0; j < idx.size(); ++j) idx[j] = j;
  B = std::min<uint64_t>(B, idx.size());
  std::partial_sort(idx.begin(), idx.begin() + B, idx.end(),
                    [&](uint64_t x, uint64_t y) { return c[x] * c[x] > c[y] * c[y]; });
  std::vector<uint64_t> ids;
  for (uint64_t k = 0; k < B; ++k) ids.push_back(m.column_ids[idx[k]]);
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace

// Drops the store's files from the page cache (clean pages: nothing is written).
void evict_from_page_cache(const std::string& dir) {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    const int fd = ::open(entry.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

int main(int argc, char** argv) {
  CLI::App app{"fgm_bench_tall: linear scoring pass vs a naive CSC gather vs read bandwidth (one process)"};
  std::string store_dir, budget_text = "8GB", block_text = "4MB", bw_text = "1GiB", label;
  int threads = 2, naive_threads = 0, reps = 5;
  uint64_t B = 10, seed = 1;
  double C = 10.0;
  bool no_naive = false, open_only = false, no_streamed = false, cold = false;
  app.add_option("--store", store_dir, "store directory")->required();
  app.add_option("--threads", threads, "threads of the pass and the bandwidth read")->capture_default_str();
  app.add_option("--naive-threads", naive_threads, "threads of the naive loop (0: --threads)")->capture_default_str();
  app.add_option("--reps", reps, "repetitions")->capture_default_str();
  app.add_option("--bandwidth-bytes", bw_text, "size of the bandwidth array (0: no bandwidth read)")
      ->capture_default_str();
  app.add_option("--block-bytes", block_text, "engine.block_bytes of the pass")->capture_default_str();
  app.add_option("--memory-budget", budget_text, "budget the store is opened with")->capture_default_str();
  app.add_option("--B", B, "top-B of the pass")->capture_default_str();
  app.add_option("--C", C, "alpha ~ U(0, C)")->capture_default_str();
  app.add_option("--seed", seed, "random seed for alpha")->capture_default_str();
  app.add_option("--label", label, "free text copied into every JSON line");
  app.add_flag("--no-naive", no_naive, "pass (and bandwidth) only: no in-memory CSC copy");
  app.add_flag("--no-streamed", no_streamed, "no streamed pass (e.g. to profile the resident one alone)");
  app.add_flag("--cold", cold,
               "evict the store's files from the page cache before every timed pass (a store beyond RAM)");
  app.add_flag("--open-only", open_only, "open the store, print its shape, exit (0: this build reads it)");
  CLI11_PARSE(app, argc, argv);
  if (naive_threads <= 0) naive_threads = threads;

  try {
    fgm::MemoryBudget budget(fgm::parse_byte_size(budget_text, "--memory-budget"), "--memory-budget");
    const uint64_t block_bytes = fgm::parse_byte_size(block_text, "--block-bytes");
    auto t_open = Clock::now();
    auto store = fgm::ShardStore::open(store_dir, budget);
    const double open_seconds = seconds_since(t_open);
    const fgm::StoreInfo& info = store->info();
    if (open_only) {
      fmt::print("{{\"bench\":\"tall_open\",\"store\":\"{}\",\"format\":{},\"rows\":{},\"features\":{},"
                 "\"nnz\":{},\"open_seconds\":{:.4f}}}\n",
                 store_dir, info.format_version, info.n_rows, info.n_features, info.nnz, open_seconds);
      return 0;
    }
    std::vector<fgm::BlockRef> blocks = store->plan_blocks(block_bytes);
    uint64_t pass_bytes = 0;
    for (const auto& b : blocks) pass_bytes += b.bytes;
    // The trainer's stream: resident when it would be, in its units.
    fgm::SchedulerOptions trainer_options;
    trainer_options.threads = threads;
    trainer_options.keep_resident = fgm::keeps_store_resident(info, budget);
    fgm::Reservation resident_memory;
    if (trainer_options.keep_resident)
      resident_memory = budget.reserve(fgm::resident_store_bytes(info), "store kept resident (bench)");
    const uint64_t trainer_unit =
        fgm::scoring_block_bytes(block_bytes, budget, info.n_rows, trainer_options.keep_resident);
    const std::vector<fgm::BlockRef> trainer_blocks = store->plan_blocks(trainer_unit);
    fgm::BlockStream trainer_stream(*store, trainer_options, budget);

    const std::vector<double> a = random_duals(*store, C, seed);  // a = α∘y, α ~ U(0, C)
    fgm::FeatureSpaceSettings space_settings;  // kind "linear"
    std::unique_ptr<fgm::FeatureSpace> space = fgm::make_feature_space(space_settings, *store, budget);

    const std::string common = fmt::format(
        "\"label\":\"{}\",\"store\":\"{}\",\"format\":{},\"rows\":{},\"features\":{},\"nnz\":{},"
        "\"blocks\":{},\"block_bytes\":{},\"pass_bytes\":{},\"threads\":{},\"naive_threads\":{},"
        "\"memory_budget\":{},\"resident\":{},\"pass_unit_bytes\":{},\"pass_blocks\":{}",
        label, store_dir, info.format_version, info.n_rows, info.n_features, info.nnz, blocks.size(),
        block_bytes, pass_bytes, threads, naive_threads, budget.limit(),
        trainer_options.keep_resident ? "true" : "false", trainer_unit, trainer_blocks.size());
    auto trainer_pass = [&] {
      return fgm::run_worst_case_analysis(*space, trainer_stream, trainer_blocks, a.data(), B, budget);
    };
    auto sorted_ids = [](const fgm::SpaceScores& r) {
      std::vector<uint64_t> ids;
      for (const auto& cand : r.top) ids.push_back(cand.id);
      std::sort(ids.begin(), ids.end());
      return ids;
    };

    PlainCsc csc;
    std::vector<double> c;
    double csc_seconds = 0;
    if (!no_naive) {
      auto t0 = Clock::now();
      csc = read_plain_csc(*store, blocks);
      csc_seconds = seconds_since(t0);
      c.assign(csc.column_ids.size(), 0.0);
      if (csc.row_ids.size() != info.nnz)
        throw std::runtime_error(fmt::format("the blocks hold {} nonzeros, the store says {}",
                                     csc.row_ids.size(), info.nnz));
    }
    fmt::print("{{\"bench\":\"tall_setup\",{},\"open_seconds\":{:.4f},\"csc_build_seconds\":{:.4f},"
               "\"nonempty_columns\":{}}}\n",
               common, open_seconds, csc_seconds, csc.column_ids.size());

    // Warm-up: the store into the page cache (and, resident, into memory with
    // its row orders: the first pass of `fgm train` does the same), the CSC
    // arrays and `a` touched.
    const double first_pass_seconds = trainer_pass().pass.seconds;
    const std::vector<uint64_t> pass_ids = sorted_ids(trainer_pass());
    const std::vector<uint64_t> streamed_ids =
        no_streamed ? pass_ids : sorted_ids(scoring_pass(*store, blocks, *space, a.data(), B, threads, budget));
    bool top_matches = streamed_ids == pass_ids;
    if (!no_naive) {
      naive_pass(csc, a.data(), c, naive_threads);
      top_matches = top_matches && naive_top(csc, c, pass_ids.size()) == pass_ids;
    }

    const uint64_t bw_bytes = bw_text == "0" ? 0 : fgm::parse_byte_size(bw_text, "--bandwidth-bytes");
    std::vector<uint64_t> array(bw_bytes / sizeof(uint64_t));
    for (size_t i = 0; i < array.size(); ++i) array[i] = i * 0x9E3779B97F4A7C15ull;
    if (!array.empty()) bandwidth_pass(array, threads);

    std::vector<double> bw_s, pass_s, naive_s, speedup, pass_over_bw, streamed_s, streamed_speedup;
    std::vector<double> pass_cpu, naive_cpu, streamed_cpu, speedup_cpu;
    for (int rep = 0; rep < reps; ++rep) {
      double bs = array.empty() ? 0 : bandwidth_pass(array, threads);
      if (cold) evict_from_page_cache(store_dir);
      double cpu0 = process_cpu_seconds();
      auto t0 = Clock::now();
      fgm::SpaceScores r = trainer_pass();
      double ps = seconds_since(t0);
      const double pc = process_cpu_seconds() - cpu0;
      cpu0 = process_cpu_seconds();
      double ns = no_naive ? 0 : naive_pass(csc, a.data(), c, naive_threads);
      const double nc = process_cpu_seconds() - cpu0;
      if (cold) evict_from_page_cache(store_dir);
      cpu0 = process_cpu_seconds();
      t0 = Clock::now();
      if (!no_streamed) scoring_pass(*store, blocks, *space, a.data(), B, threads, budget);
      const double ss = seconds_since(t0);
      const double sc = process_cpu_seconds() - cpu0;
      streamed_s.push_back(ss);
      pass_cpu.push_back(pc);
      streamed_cpu.push_back(sc);
      if (ns > 0) {
        naive_cpu.push_back(nc);
        speedup_cpu.push_back((nc / naive_threads) / (pc / threads));
      }
      pass_s.push_back(ps);
      if (bs > 0) {
        bw_s.push_back(bs);
        pass_over_bw.push_back((pass_bytes / ps) / (bw_bytes / bs));
      }
      if (ns > 0) {
        naive_s.push_back(ns);
        speedup.push_back(ns / ps);
        streamed_speedup.push_back(ns / ss);
      }
      fmt::print("{{\"bench\":\"tall_rep\",{},\"rep\":{},\"bandwidth_seconds\":{:.6f},\"pass_seconds\":{:.6f},"
                 "\"naive_seconds\":{:.6f},\"streamed_pass_seconds\":{:.6f},\"pass_cpu_seconds\":{:.6f},"
                 "\"naive_cpu_seconds\":{:.6f},\"streamed_cpu_seconds\":{:.6f},\"pass_bytes_streamed\":{},"
                 "\"tails_skipped\":{},\"loadavg\":\"{}\"}}\n",
                 common, rep, bs, ps, ns, ss, pc, nc, sc, r.pass.bytes_streamed, r.pass.tails_skipped, loadavg());
    }
    const double pass_med = median(pass_s), naive_med = median(naive_s), bw_med = median(bw_s);
    const double nnz = static_cast<double>(info.nnz);
    fmt::print(
        "{{\"bench\":\"tall_summary\",{},\"reps\":{},\"pass_seconds\":{:.6f},\"pass_nnz_per_s\":{:.4g},"
        "\"pass_gb_per_s\":{:.4g},\"naive_seconds\":{:.6f},\"naive_nnz_per_s\":{:.4g},"
        "\"speedup_over_naive\":{:.3f},\"speedup_ratio_of_medians\":{:.3f},\"bandwidth_gb_per_s\":{:.4g},"
        "\"pass_over_bandwidth\":{:.3f},\"top_matches_naive\":{},\"first_pass_seconds\":{:.4f},"
        "\"streamed_pass_seconds\":{:.6f},\"streamed_speedup_over_naive\":{:.3f},\"pass_cpu_seconds\":{:.6f},"
        "\"naive_cpu_seconds\":{:.6f},\"streamed_cpu_seconds\":{:.6f},\"speedup_per_cpu\":{:.3f},"
        "\"loadavg_end\":\"{}\"}}\n",
        common, reps, pass_med, nnz / pass_med, pass_bytes / pass_med / 1e9, naive_med,
        naive_med > 0 ? nnz / naive_med : 0.0, median(speedup), naive_med > 0 ? naive_med / pass_med : 0.0,
        bw_med > 0 ? bw_bytes / bw_med / 1e9 : 0.0, median(pass_over_bw), top_matches ? "true" : "false",
        first_pass_seconds, median(streamed_s), median(streamed_speedup), median(pass_cpu), median(naive_cpu),
        median(streamed_cpu), median(speedup_cpu), loadavg());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fgm_bench_tall: %s\n", e.what());
    return 1;
  }
}
