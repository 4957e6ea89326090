// fgm_bench_scoring: scoring-pass throughput next to the machine's memory read
// bandwidth, measured side by side in one process (issue 2). Not a test.
//
// For every repetition and every thread count t (interleaved, so slow drift of
// a shared machine hits both sides alike) it measures
//   bandwidth  a >= 1 GiB uint64 array summed by t std::threads (vectorised
//              sum over contiguous slices); bytes / second.
//   pass       one scoring pass exactly as `fgm train` runs it: the linear
//              FeatureSpace (features/feature_space.h) streamed by the chunk
//              typed block stream (features/block_stream.h, BlockStream) with
//              SchedulerOptions{threads = t}, a = α∘y with α ~ U(0, C) random,
//              B = 10, nothing selected yet: PassStats.bytes_streamed / wall s.
// and, as a breakdown of where pass time goes (1 thread),
//   kernel_resident  block_column_dots over every column of blocks already read into
//                    memory (read_block once, untimed; no TBB): the kernel alone.
//   kernel_stream    the same loop, but each block read (pread + piece checksum
//                    verification + bounds checks, ShardStore::read_block) into a
//                    per-thread buffer after prefetch_block, no TBB: kernel +
//                    read cost.
// One JSON line per measurement (every repetition), then one summary line per
// kind and thread count with the medians and the pass/bandwidth ratios.
//
// --callgrind runs one 1-thread pass between CALLGRIND_START/STOP_INSTRUMENTATION
// (run under `valgrind --tool=callgrind --instr-atstart=no`), for instructions
// per nonzero.
// The whole file builds at the project's Release flags (-O2); only the
// bandwidth loop is hand-vectorised (SSE2), so the kernel measured here is
// compiled exactly as the engine's.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/error.h"
#include "core/memory_budget.h"
#include "features/block_scores.h"
#include "features/block_stream.h"
#include "features/feature_space.h"
#include "io/shard_store.h"

#include "bench/bench_common.h"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#define CALLGRIND_ZERO_STATS
#endif

namespace {

using namespace bench;  // bench_common.h

// "VmRSS", "RssAnon", "RssFile", "VmHWM" from /proc/self/status, in bytes.
uint64_t status_bytes(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kb = 0;
  size_t n = std::strlen(key);
  while (std::fgets(line, sizeof(line), f))
    if (std::strncmp(line, key, n) == 0 && line[n] == ':') {
      kb = std::strtoull(line + n + 1, nullptr, 10);
      break;
    }
  std::fclose(f);
  return kb * 1024;
}

std::string rss_json(const char* stage) {
  return fmt::format("{{\"bench\":\"rss\",\"stage\":\"{}\",\"vm_rss\":{},\"rss_anon\":{},"
                     "\"rss_file\":{},\"vm_hwm\":{}}}",
                     stage, status_bytes("VmRSS"), status_bytes("RssAnon"), status_bytes("RssFile"),
                     status_bytes("VmHWM"));
}

// Samples VmRSS / RssFile every `period` on a background thread: the peak
// resident memory *during* a pass, and how much of it is mapped shard pages.
class RssSampler {
 public:
  explicit RssSampler(std::chrono::microseconds period = std::chrono::microseconds(500))
      : thread_([this, period] {
          while (!stop_.load()) {
            max_rss_ = std::max(max_rss_, status_bytes("VmRSS"));
            max_file_ = std::max(max_file_, status_bytes("RssFile"));
            ++samples_;
            std::this_thread::sleep_for(period);
          }
        }) {}
  ~RssSampler() { finish(); }
  void finish() {
    if (thread_.joinable()) {
      stop_ = true;
      thread_.join();
    }
  }
  uint64_t max_rss() const { return max_rss_; }
  uint64_t max_file() const { return max_file_; }
  uint64_t samples() const { return samples_; }

 private:
  std::atomic<bool> stop_{false};
  uint64_t max_rss_ = 0, max_file_ = 0, samples_ = 0;
  std::thread thread_;
};

// User + system CPU seconds of the whole process (all threads) so far.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}


uint64_t minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<uint64_t>(u.ru_minflt);
}

struct Kernel {
  uint64_t nnz = 0;
  uint64_t bytes = 0;
  double checksum = 0;
};

// Every block read once into its own buffer (kernel_resident).
struct ReadBlocks {
  std::vector<fgm::BlockBuffer> buffers;
  std::vector<fgm::ColumnBlock> views;
  ReadBlocks(const fgm::ShardStore& store, const std::vector<fgm::BlockRef>& blocks)
      : buffers(blocks.size()) {
    for (size_t i = 0; i < blocks.size(); ++i) views.push_back(store.read_block(blocks[i], buffers[i]));
  }
};

// block_column_dots over every column of the given blocks, by `threads` std::threads
// (thread k takes blocks k, k+threads, ...); with `stream`, each block is read
// (prefetch_block, read_block) as the pipeline does, else taken from `read`.
Kernel kernel_loop(const fgm::ShardStore& store, const std::vector<fgm::BlockRef>& blocks,
                   const double* a, bool stream, int threads, const ReadBlocks* read) {
  std::vector<Kernel> part(static_cast<size_t>(threads));
  auto work = [&](int tid) {
    Kernel& k = part[static_cast<size_t>(tid)];
    fgm::BlockBuffer buffer;
    for (size_t i = static_cast<size_t>(tid); i < blocks.size(); i += static_cast<size_t>(threads)) {
      const fgm::BlockRef& ref = blocks[i];
      if (stream && i + threads < blocks.size()) store.prefetch_block(blocks[i + threads]);
      const fgm::ColumnBlock block = stream ? store.read_block(ref, buffer) : read->views[i];
      double acc = 0;
      std::vector<double> c(block.column_count);
      fgm::block_column_dots(block, a, c.data());
      for (uint64_t k = 0; k < block.column_count; ++k) acc += c[k] * c[k];
      k.checksum += acc;
      k.nnz += ref.nnz;
      k.bytes += ref.bytes;
    }
  };
  if (threads == 1) {
    work(0);
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(work, t);
    for (auto& th : pool) th.join();
  }
  Kernel k;
  for (const auto& p : part) {
    k.nnz += p.nnz;
    k.bytes += p.bytes;
    k.checksum += p.checksum;
  }
  return k;
}

std::string ids_of(const fgm::SpaceScores& r) {
  std::string s;
  for (const auto& c : r.top) s += fmt::format("{},", c.id);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fgm_bench_scoring: scoring-pass throughput vs memory read bandwidth (one process)"};
  std::string store_dir, budget_text = "4GB", block_text = "4MB", bw_text = "1GiB";
  std::vector<int> thread_counts = {1, 2};
  int reps = 7;
  uint64_t B = 10, seed = 1;
  double C = 10.0;
  bool callgrind = false, no_breakdown = false;
  std::string label;
  app.add_option("--store", store_dir, "store directory (fgm ingest --out)")->required();
  app.add_option("--threads", thread_counts, "thread counts, e.g. --threads 1 2")->capture_default_str();
  app.add_option("--reps", reps, "repetitions (>= 5 recommended)")->capture_default_str();
  app.add_option("--bandwidth-bytes", bw_text, "size of the bandwidth array")->capture_default_str();
  app.add_option("--block-bytes", block_text, "engine.block_bytes of the pass")->capture_default_str();
  app.add_option("--memory-budget", budget_text, "budget the store is opened with")->capture_default_str();
  app.add_option("--B", B, "top-B of the pass")->capture_default_str();
  app.add_option("--C", C, "alpha ~ U(0, C)")->capture_default_str();
  app.add_option("--seed", seed, "random seed for alpha")->capture_default_str();
  app.add_option("--label", label, "free text copied into every JSON line");
  app.add_flag("--callgrind", callgrind, "one instrumented 1-thread pass only (run under callgrind)");
  app.add_flag("--no-breakdown", no_breakdown, "skip the kernel_resident / kernel_stream runs");
  CLI11_PARSE(app, argc, argv);

  try {
    fmt::print("{}\n", rss_json("start"));
    fgm::MemoryBudget budget(fgm::parse_byte_size(budget_text, "--memory-budget"), "--memory-budget");
    const uint64_t block_bytes = fgm::parse_byte_size(block_text, "--block-bytes");
    auto store = fgm::ShardStore::open(store_dir, budget);
    const fgm::StoreInfo& info = store->info();
    fmt::print("{}\n", rss_json("store_opened"));
    std::vector<fgm::BlockRef> blocks = store->plan_blocks(block_bytes);
    fmt::print("{}\n", rss_json("blocks_planned"));
    uint64_t pass_bytes = 0;
    for (const auto& b : blocks) pass_bytes += b.bytes;

    const std::vector<double> a = random_duals(*store, C, seed);  // a = α∘y, α ~ U(0, C)
    fgm::FeatureSpaceSettings space_settings;  // kind "linear"
    std::unique_ptr<fgm::FeatureSpace> space = fgm::make_feature_space(space_settings, *store, budget);

    const std::string common = fmt::format(
        "\"label\":\"{}\",\"store\":\"{}\",\"rows\":{},\"features\":{},\"nnz\":{},"
        "\"blocks\":{},\"block_bytes\":{},\"pass_bytes\":{}",
        label, store_dir, info.n_rows, info.n_features, info.nnz, blocks.size(), block_bytes,
        pass_bytes);

    if (callgrind) {
      scoring_pass(*store, blocks, *space, a.data(), B, 1, budget);  // warm-up, not counted
      CALLGRIND_ZERO_STATS;
      CALLGRIND_START_INSTRUMENTATION;
      fgm::SpaceScores r = scoring_pass(*store, blocks, *space, a.data(), B, 1, budget);
      CALLGRIND_STOP_INSTRUMENTATION;
      fmt::print("{{\"bench\":\"callgrind_pass\",{},\"threads\":1,\"top\":{}}}\n", common, r.top.size());
      return 0;
    }


    std::map<int, std::vector<double>> bw_s, pass_s, ratio;
    std::map<int, std::vector<double>> faults, bw_cpu, pass_cpu;
    std::map<int, std::string> top_ids;
    std::map<int, std::vector<double>> kres_s, kstream_s;

    // Warm-up: page the store into the page cache, one pass per thread count
    // (the resident-memory probes after them show what a pass leaves mapped
    // and its high-water mark, before the bandwidth array exists).
    for (int t : thread_counts) {
      RssSampler sampler;
      top_ids[t] = ids_of(scoring_pass(*store, blocks, *space, a.data(), B, t, budget));
      sampler.finish();
      fmt::print("{}\n", rss_json(fmt::format("after_pass_threads_{}", t).c_str()));
      fmt::print("{{\"bench\":\"rss_during_pass\",\"threads\":{},\"max_vm_rss\":{},"
                 "\"max_rss_file\":{},\"samples\":{}}}\n",
                 t, sampler.max_rss(), sampler.max_file(), sampler.samples());
    }
    fmt::print("{{\"bench\":\"budget\",\"budget_peak_bytes\":{},\"budget_limit_bytes\":{}}}\n",
               budget.peak(), budget.limit());

    // Bandwidth array: initialised (touched) once, so reps read resident memory.
    const uint64_t bw_bytes = fgm::parse_byte_size(bw_text, "--bandwidth-bytes");
    std::vector<uint64_t> array(bw_bytes / sizeof(uint64_t));
    for (size_t i = 0; i < array.size(); ++i) array[i] = i * 0x9E3779B97F4A7C15ull;
    for (int t : thread_counts) bandwidth_pass(array, t);
    bool deterministic = true;
    for (const auto& [t, ids] : top_ids) deterministic = deterministic && ids == top_ids.begin()->second;

    for (int rep = 0; rep < reps; ++rep) {
      for (int t : thread_counts) {
        double c0 = cpu_seconds();
        double bs = bandwidth_pass(array, t);
        double bc = cpu_seconds() - c0;
        bw_s[t].push_back(bs);
        bw_cpu[t].push_back(bc);
        fmt::print("{{\"bench\":\"memory_read_bandwidth\",\"rep\":{},\"threads\":{},\"bytes\":{},"
                   "\"seconds\":{:.6f},\"gb_per_s\":{:.3f},\"cpu_seconds\":{:.6f},\"loadavg\":\"{}\"}}\n",
                   rep, t, bw_bytes, bs, bw_bytes / bs / 1e9, bc, loadavg());

        uint64_t f0 = minor_faults();
        double c1 = cpu_seconds();
        auto t0 = Clock::now();
        fgm::SpaceScores r = scoring_pass(*store, blocks, *space, a.data(), B, t, budget);
        double ps = seconds_since(t0);
        double pc = cpu_seconds() - c1;
        uint64_t df = minor_faults() - f0;
        pass_s[t].push_back(ps);
        pass_cpu[t].push_back(pc);
        faults[t].push_back(static_cast<double>(df));
        ratio[t].push_back((r.pass.bytes_streamed / ps) / (bw_bytes / bs));
        fmt::print("{{\"bench\":\"scoring_pass\",\"rep\":{},\"threads\":{},{},\"bytes_streamed\":{},"
                   "\"seconds\":{:.6f},\"gb_per_s\":{:.3f},\"nnz_per_s\":{:.4g},"
                   "\"ratio_to_bandwidth_same_rep\":{:.4f},\"minor_faults\":{},\"cpu_seconds\":{:.6f}}}\n",
                   rep, t, common, r.pass.bytes_streamed, ps, r.pass.bytes_streamed / ps / 1e9,
                   info.nnz / ps, ratio[t].back(), df, pc);
      }
      if (!no_breakdown) {
        for (int t : thread_counts) {
          // Kernel on blocks already in memory: read once (untimed), then time.
          Kernel k;
          double ks = 0;
          {
            ReadBlocks read(*store, blocks);
            kernel_loop(*store, blocks, a.data(), false, t, &read);
            auto t0 = Clock::now();
            k = kernel_loop(*store, blocks, a.data(), false, t, &read);
            ks = seconds_since(t0);
          }
          kres_s[t].push_back(ks);
          fmt::print("{{\"bench\":\"kernel_resident\",\"rep\":{},\"threads\":{},{},\"seconds\":{:.6f},"
                     "\"gb_per_s\":{:.3f},\"ns_per_nnz\":{:.4f}}}\n",
                     rep, t, common, ks, k.bytes / ks / 1e9, ks * 1e9 / k.nnz);
          uint64_t f0 = minor_faults();
          auto t0 = Clock::now();
          kernel_loop(*store, blocks, a.data(), true, t, nullptr);
          ks = seconds_since(t0);
          uint64_t df = minor_faults() - f0;
          kstream_s[t].push_back(ks);
          fmt::print("{{\"bench\":\"kernel_stream\",\"rep\":{},\"threads\":{},{},\"seconds\":{:.6f},"
                     "\"gb_per_s\":{:.3f},\"ns_per_nnz\":{:.4f},\"minor_faults\":{}}}\n",
                     rep, t, common, ks, k.bytes / ks / 1e9, ks * 1e9 / k.nnz, df);
        }
      }
    }

    for (int t : thread_counts) {
      double bw = bw_bytes / median(bw_s[t]);
      double ps = median(pass_s[t]);
      double tp = pass_bytes / ps;
      fmt::print("{{\"bench\":\"summary\",\"threads\":{},{},\"reps\":{},"
                 "\"bandwidth_gb_per_s\":{:.3f},\"pass_seconds\":{:.6f},\"pass_gb_per_s\":{:.3f},"
                 "\"pass_nnz_per_s\":{:.4g},\"ratio\":{:.4f},\"ratio_median_of_reps\":{:.4f},"
                 "\"minor_faults_per_pass\":{:.0f},\"pages_per_pass\":{},\"deterministic_top\":{},"
                 "\"bandwidth_cpu_seconds\":{:.6f},\"pass_cpu_seconds\":{:.6f},"
                 "\"ratio_per_cpu_second\":{:.4f},\"loadavg_end\":\"{}\"}}\n",
                 t, common, reps, bw / 1e9, ps, tp / 1e9, info.nnz / ps, tp / bw, median(ratio[t]),
                 median(faults[t]), pass_bytes / 4096, deterministic ? "true" : "false",
                 median(bw_cpu[t]), median(pass_cpu[t]),
                 (pass_bytes / median(pass_cpu[t])) / (bw_bytes / median(bw_cpu[t])), loadavg());
    }
    if (!no_breakdown) {
      for (int t : thread_counts) {
        double kr = median(kres_s[t]), ks = median(kstream_s[t]);
        double bw = bw_bytes / median(bw_s[t]);
        double ps = median(pass_s[t]);
        fmt::print("{{\"bench\":\"breakdown\",\"threads\":{},{},\"bandwidth_gb_per_s\":{:.3f},"
                   "\"kernel_resident_seconds\":{:.6f},\"kernel_resident_gb_per_s\":{:.3f},"
                   "\"kernel_resident_ns_per_nnz\":{:.4f},\"kernel_resident_ratio\":{:.4f},"
                   "\"kernel_stream_seconds\":{:.6f},\"kernel_stream_gb_per_s\":{:.3f},"
                   "\"kernel_stream_ratio\":{:.4f},\"pass_seconds\":{:.6f},\"pass_gb_per_s\":{:.3f},"
                   "\"pass_ratio\":{:.4f}}}\n",
                   t, common, bw / 1e9, kr, pass_bytes / kr / 1e9, kr * 1e9 * t / info.nnz,
                   pass_bytes / kr / bw, ks, pass_bytes / ks / 1e9, pass_bytes / ks / bw, ps,
                   pass_bytes / ps / 1e9, pass_bytes / ps / bw);
      }
    }
  } catch (const fgm::Error& e) {
    std::fprintf(stderr, "fgm_bench_scoring: %s\n", e.what());
    return 1;
  }
  return 0;
}
