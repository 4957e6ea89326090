// Time per streamed FISTA iteration of solver = "exclusive" against one FGM
// scoring pass on the same store, the same blocks and the same resident
// stream, as `fgm train` sets them up (engine/exclusive_trainer.cpp and
// engine/fgm_trainer.cpp: resident when it fits half the budget, blocks of
// scoring_block_bytes). Prints one CSV row per measurement: the median wall
// seconds of the passes and the mean process CPU seconds (all threads), each
// also as a ratio to the scoring pass:
//   scoring_pass      FGM's worst-case analysis (Xᵀa, top-B), the reference
//   xtr_pass          StreamedDesign::multiply_transposed (g = Xᵀr)
//   xw_pass           StreamedDesign::multiply (z = Xw, w dense)
//   fused_pass        transposed_update_multiply (Xᵀr → update → Xw, one pass)
//   fista_iteration   a Fista-pcp (logistic) iteration on the whole design,
//                     seconds / iterations (fixed L: no power iteration);
//                     wall: a mean, not a median
// Usage: fgm_bench_exclusive_streamed <store> [threads=2] [passes=20] [budget_mb=1024]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <vector>

#include "engine/fgm_trainer.h"
#include "features/block_stream.h"
#include "features/feature_space.h"
#include "io/shard_store.h"
#include "solvers/exclusive/design.h"
#include "solvers/exclusive/exclusive_groups.h"
#include "solvers/exclusive/fista_exclusive.h"

using namespace fgm;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// CPU seconds of the process (all threads): on a shared, loaded machine the
// wall time of a millisecond pass is mostly time spent descheduled.
double process_cpu() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

struct Timing {
  double wall_median = 0, cpu_mean = 0;
};

template <class F>
Timing timed(int passes, F&& f) {
  std::vector<double> t;
  const double cpu0 = process_cpu();
  for (int p = 0; p < passes; ++p) {
    const auto start = Clock::now();
    f();
    t.push_back(since(start));
  }
  Timing out;
  out.cpu_mean = (process_cpu() - cpu0) / std::max(1, passes);
  std::sort(t.begin(), t.end());
  out.wall_median = t.empty() ? 0.0 : t[t.size() / 2];
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <store> [threads=2] [passes=20] [budget_mb=1024]\n", argv[0]);
    return 2;
  }
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int passes = argc > 3 ? std::atoi(argv[3]) : 20;
  const uint64_t budget_bytes = (argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 1024) << 20;
  MemoryBudget budget(budget_bytes);
  auto store = ShardStore::open(argv[1], budget);
  const StoreInfo& info = store->info();
  const uint64_t n = info.n_rows;
  const bool resident = keeps_store_resident(info, budget);
  Reservation resident_memory;
  if (resident) resident_memory = budget.reserve(resident_store_bytes(info), "resident store");
  SchedulerOptions so;
  so.threads = threads;
  so.keep_resident = resident;
  const auto blocks = store->plan_blocks(scoring_block_bytes(4 << 20, budget, n, resident));
  std::printf("# store=%s n=%lu features=%lu nnz=%lu tile_rows=%u blocks=%zu resident=%d threads=%d passes=%d\n",
              argv[1], (unsigned long)n, (unsigned long)info.n_features, (unsigned long)info.nnz, info.tile_rows,
              blocks.size(), int(resident), threads, passes);
  std::printf("measurement,wall_seconds,wall_ratio,cpu_seconds,cpu_ratio\n");
  {
    BlockStream stream(*store, so, budget);
    std::vector<double> y(n), a(n);
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> unif(0.0, 1.0);
    for (uint64_t i = 0; i < n; ++i) y[i] = store->labels()[i], a[i] = unif(rng) * y[i];
    // The design's census pass is also the first (reading) pass of the stream.
    exclusive::StreamedDesign X(stream, blocks, budget);
    auto space = make_feature_space(FeatureSpaceSettings{}, *store, budget);
    const Timing scoring = timed(passes, [&] { run_worst_case_analysis(*space, stream, blocks, a.data(), 10, budget); });
    const uint64_t p = X.columns();
    std::vector<double> g(p), w(p), z(n);
    for (uint64_t k = 0; k < p; ++k) w[k] = unif(rng) - 0.5;
    const Timing xtr = timed(passes, [&] { X.multiply_transposed(a.data(), g.data()); });
    const Timing xw = timed(passes, [&] { X.multiply(w.data(), z.data()); });
    const Timing fused = timed(passes, [&] {
      X.transposed_update_multiply(
          a.data(), g.data(), [&](uint64_t f, uint64_t e) { for (uint64_t k = f; k < e; ++k) w[k] = 1e-3 * g[k]; },
          w.data(), z.data());
    });
    const exclusive::ExclusiveGroups G = exclusive::random_groups(p, std::max<uint64_t>(1, p / 20), 1, budget);
    exclusive::FistaOptions o;
    o.algorithm = exclusive::Algorithm::kPcp;
    o.loss = exclusive::ExclusiveLoss::kLogistic;
    o.lambda = 1.0;
    o.tolerance = 0;  // run every iteration
    o.max_iterations = passes;
    o.lipschitz = 1e6;  // fixed: no power iteration (backtracking may still raise it)
    const auto start = Clock::now();
    const double cpu0 = process_cpu();
    const exclusive::FistaResult r = exclusive::solve_exclusive(X, y, G, o, budget);
    Timing iteration;
    iteration.wall_median = since(start) / std::max(1, r.iterations);  // a mean: iterations are not timed one by one
    iteration.cpu_mean = (process_cpu() - cpu0) / std::max(1, r.iterations);
    auto row = [&](const char* name, Timing t) {
      std::printf("%s,%.6f,%.2f,%.6f,%.2f\n", name, t.wall_median, t.wall_median / scoring.wall_median, t.cpu_mean,
                  t.cpu_mean / scoring.cpu_mean);
    };
    row("scoring_pass", scoring);
    row("xtr_pass", xtr);
    row("xw_pass", xw);
    row("fused_pass", fused);
    row("fista_iteration", iteration);
    std::printf("# fista: iterations=%d passes=%lu backtracks=%d\n", r.iterations, (unsigned long)r.passes,
                r.backtracks);
  }
  return 0;
}
