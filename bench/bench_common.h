// Helpers shared by the bench/ programs: wall clock, median, load average,
// and the memory read bandwidth reference (a uint64 array summed by threads
// over contiguous slices; SSE2 is the x86-64 baseline, so no -march).
#pragma once

#include <algorithm>
#include <random>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "core/memory_budget.h"
#include "features/block_stream.h"
#include "features/feature_space.h"
#include "io/shard_store.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline std::string loadavg() {
  FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return "";
  char buf[128] = {0};
  if (!std::fgets(buf, sizeof(buf), f)) buf[0] = 0;
  std::fclose(f);
  std::string s(buf);
  return s.substr(0, s.find(' '));
}

// ---------------------------------------------------------------- bandwidth
__attribute__((noinline)) inline uint64_t sum_slice(const uint64_t* p, size_t n) {
  size_t i = 0;
  uint64_t s = 0;
#if defined(__SSE2__)
  __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
  for (; i + 8 <= n; i += 8) {
    a0 = _mm_add_epi64(a0, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)));
    a1 = _mm_add_epi64(a1, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 2)));
    a2 = _mm_add_epi64(a2, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 4)));
    a3 = _mm_add_epi64(a3, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 6)));
  }
  alignas(16) uint64_t lanes[2];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes), _mm_add_epi64(_mm_add_epi64(a0, a1), _mm_add_epi64(a2, a3)));
  s = lanes[0] + lanes[1];
#endif
  for (; i < n; ++i) s += p[i];
  return s;
}

inline volatile uint64_t g_sink = 0;

inline double bandwidth_pass(const std::vector<uint64_t>& array, int threads) {
  const size_t n = array.size();
  std::vector<uint64_t> partial(static_cast<size_t>(threads) * 8, 0);
  auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    size_t b = n * t / threads, e = n * (t + 1) / threads;
    pool.emplace_back([&, b, e, t] { partial[t * 8] = sum_slice(array.data() + b, e - b); });
  }
  for (auto& th : pool) th.join();
  double s = seconds_since(t0);
  uint64_t total = 0;
  for (int t = 0; t < threads; ++t) total += partial[t * 8];
  g_sink = g_sink + total;
  return s;
}

// a = α∘y with α ~ U(0, C): what the trainer feeds a pass after a solve.
inline std::vector<double> random_duals(const fgm::ShardStore& store, double C, uint64_t seed) {
  std::vector<double> a(store.info().n_rows);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unif(0.0, C);
  for (uint64_t i = 0; i < a.size(); ++i) a[i] = unif(rng) * store.labels()[i];
  return a;
}

// One scoring pass as the trainer runs it (engine/fgm_trainer.cpp): the space
// streamed by the typed block stream with `threads` threads.
inline fgm::SpaceScores scoring_pass(const fgm::ShardStore& store, const std::vector<fgm::BlockRef>& blocks,
                                     fgm::FeatureSpace& space, const double* a, uint64_t B, int threads,
                                     fgm::MemoryBudget& budget) {
  fgm::SchedulerOptions o;
  o.threads = threads;
  fgm::BlockStream stream(store, o, budget);
  return fgm::run_worst_case_analysis(space, stream, blocks, a, B, budget);
}

}  // namespace bench
