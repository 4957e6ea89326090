// fgm_bench_apg: seconds per APG iteration on a store, the sparse solver
// (solvers/apg.cpp) next to the dense one it replaced (kept as the test twin
// tests/solvers/dense_apg_twin.cpp), measured in one run of one program
// (issue 9 item 4). Not a test.
//
// It selects --features base features of the store (evenly spaced ids, empty
// columns skipped), materialises them through the linear feature space into
// a SelectedFeatureCache in --batches batches (as FGM's outer iterations
// would: batch h = ω_h), and solves (31) from a cold start with the store's
// labels, C, bias and loss as given, ε_in = 0 so that exactly --iterations
// iterations run. For each repetition (dense and sparse interleaved, so slow
// drift of a shared machine hits both alike) it prints one JSON line per
// solver:
//   seconds                  the whole solve_apg call (setup, iterations,
//                            final decision values and certificate)
//   seconds_per_iteration    seconds / iterations
//   cpu_seconds_per_iteration  the same in process CPU time (all threads)
//   marginal_per_iteration   (seconds of a 2K-iteration solve − seconds of a
//                            K-iteration solve) / K: the iteration alone
// and a summary line with the medians and their ratio. The objectives of the
// two solvers must agree (to 1e-9 relative); a mismatch is an error.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cache/selected_features.h"
#include "core/error.h"
#include "core/memory_budget.h"
#include "engine/resume_checkpoint.h"
#include "features/feature_space.h"
#include "io/shard_store.h"
#include "solvers/apg.h"
#include "tests/solvers/dense_apg_twin.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string load_average() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return "";
  char buf[64] = {0};
  const size_t got = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  std::string s(buf, got);
  size_t cut = 0;
  for (int fields = 0; cut < s.size() && fields < 3; ++cut) fields += s[cut] == ' ';
  return s.substr(0, cut > 0 ? cut - 1 : 0);
}

// CPU seconds of the whole process (all threads): less sensitive than wall
// time to other processes on a shared machine.
double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

struct Timed {
  fgm::ApgResult result;
  double seconds = 0;
  double cpu = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"APG seconds per iteration: sparse solver vs the dense twin, one run"};
  std::string store_dir, loss_name = "squared_hinge";
  uint64_t features = 40, batches = 4;
  int iterations = 20, reps = 3, threads = 2;
  double C = 1.0;
  bool bias = true, skip_dense = false;
  std::string pick = "spread", checkpoint, space_kind = "linear";
  app.add_option("--store", store_dir, "store directory")->required();
  app.add_option("--features", features, "selected base features (default 40)");
  app.add_option("--batches", batches, "batches they are split into (default 4)");
  app.add_option("--iterations", iterations, "APG iterations per solve K (default 20)");
  app.add_option("--reps", reps, "repetitions (default 3)");
  app.add_option("--threads", threads, "solver threads (default 2)");
  app.add_option("--C", C, "loss weight C (default 1)");
  app.add_option("--loss", loss_name, "squared_hinge or logistic");
  app.add_option("--bias", bias, "fit the bias (default true)");
  app.add_flag("--skip-dense", skip_dense, "time the sparse solver only");
  app.add_option("--pick", pick, "spread (evenly spaced ids, default) or first (the lowest ids)")
      ->check(CLI::IsMember({"spread", "first"}));
  app.add_option("--checkpoint", checkpoint,
                 "take the selected candidates from a train checkpoint (checkpoint.fgm) instead");
  app.add_option("--space", space_kind, "feature space of --checkpoint's candidates (default linear)");
  CLI11_PARSE(app, argc, argv);
  try {
    fgm::MemoryBudget budget(uint64_t(4) << 30);
    auto store = fgm::ShardStore::open(store_dir, budget);
    const uint64_t n = store->info().n_rows, m = store->info().n_features;
    fgm::FeatureSpaceSettings fs;
    fs.kind = checkpoint.empty() ? "linear" : space_kind;
    auto space = fgm::make_feature_space(fs, *store, budget);
    fgm::SelectedFeatureCache cache(budget, n);
    if (!checkpoint.empty()) {  // the batches of a real run, materialised as training did
      const fgm::ResumeCheckpoint saved = fgm::read_checkpoint(checkpoint, budget);
      if (!saved.train) throw fgm::Error(fgm::ErrorKind::kInvalidInput, checkpoint + ": no train progress");
      for (const auto& batch : saved.train->batches) {
        cache.begin_batch();
        for (uint64_t id : batch) space->materialize(*store, id, cache);
      }
      features = 0;
    }
    // Evenly spaced ids or the lowest ones (an empty column gives way to the next id;
    // with "first" an id may repeat a skipped one's successor: fine for timing).
    const uint64_t per_batch = (features + batches - 1) / batches;
    std::vector<uint32_t> rows;
    std::vector<float> values;
    for (uint64_t k = 0; k < features; ++k) {
      uint64_t id = pick == "first" ? k : k * (m / features);
      for (store->read_column(id, rows, values); rows.empty() && id + 1 < m; ++id)
        store->read_column(id + 1, rows, values);
      if (k % per_batch == 0) cache.begin_batch();
      space->materialize(*store, id, cache);
    }
    fgm::ApgOptions o;
    o.loss = loss_name == "logistic" ? fgm::Loss::kLogistic : fgm::Loss::kSquaredHinge;
    o.C = C;
    o.bias = bias;
    o.eps_inner = 0;  // exactly max_iterations
    o.threads = threads;
    const int8_t* labels = store->labels();
    std::vector<double> decision;  // kept across solves, as the trainer keeps it
    auto run = [&](bool dense, int k) {
      o.max_iterations = k;
      fgm::ApgState state;
      Timed t;
      const auto start = Clock::now();
      const double cpu_start = cpu_seconds();
      t.result = dense ? fgm::test::solve_apg_dense(cache, labels, o, state, decision, budget)
                       : fgm::solve_apg(cache, labels, o, state, decision, budget);
      t.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      t.cpu = cpu_seconds() - cpu_start;
      return t;
    };
    fmt::print("{{\"measure\":\"apg_setup\",\"store\":\"{}\",\"rows\":{},\"selected\":{},\"batches\":{},"
               "\"selected_nnz\":{},\"loss\":\"{}\",\"C\":{},\"bias\":{},\"threads\":{},\"iterations\":{},"
               "\"loadavg\":\"{}\"}}\n",
               store_dir, n, cache.num_columns(), cache.num_batches(), cache.total_nnz(), loss_name, C, bias,
               threads, iterations, load_average());
    std::vector<double> per_iteration[2], marginal[2], cpu_per_iteration[2];
    double reference = 0;  // the first objective: every other solve must agree
    for (bool dense : {true, false})  // warm-up (first touch of the solvers' memory), not timed
      if (!(dense && skip_dense)) run(dense, 1);
    for (int r = 0; r < reps; ++r) {
      for (bool dense : {true, false}) {
        if (dense && skip_dense) continue;
        Timed once = run(dense, iterations), twice = run(dense, 2 * iterations);
        const double per = once.seconds / once.result.iterations;
        const double extra = (twice.seconds - once.seconds) / (twice.result.iterations - once.result.iterations);
        per_iteration[dense].push_back(per);
        cpu_per_iteration[dense].push_back(once.cpu / once.result.iterations);
        marginal[dense].push_back(extra);
        fmt::print("{{\"measure\":\"apg_solve\",\"solver\":\"{}\",\"rep\":{},\"iterations\":{},\"seconds\":{:.4f},"
                   "\"seconds_per_iteration\":{:.6f},\"cpu_seconds_per_iteration\":{:.6f},\"marginal_per_iteration\":{:.6f},"
                   "\"line_search_steps\":{},"
                   "\"bias_line_search_steps\":{},\"touched_rows\":{},\"product_entries\":{},\"objective\":{:.12g}}}\n",
                   dense ? "dense" : "sparse", r, once.result.iterations, once.seconds, per,
                   once.cpu / once.result.iterations, extra,
                   once.result.line_search_steps, once.result.bias_line_search_steps, once.result.touched_rows,
                   once.result.product_entries, once.result.objective);
        std::fflush(stdout);
        if (reference == 0) reference = once.result.objective;
        if (std::fabs(once.result.objective - reference) > 1e-9 * reference)
          throw fgm::Error(fgm::ErrorKind::kInternal,
                           fmt::format("objectives differ: {} vs {}", once.result.objective, reference));
      }
    }
    const double dense = median(per_iteration[1]), sparse = median(per_iteration[0]);
    fmt::print("{{\"measure\":\"apg_summary\",\"rows\":{},\"selected\":{},\"selected_nnz\":{},\"threads\":{},"
               "\"dense_seconds_per_iteration\":{:.6f},\"sparse_seconds_per_iteration\":{:.6f},"
               "\"dense_cpu_seconds_per_iteration\":{:.6f},\"sparse_cpu_seconds_per_iteration\":{:.6f},"
               "\"dense_marginal\":{:.6f},\"sparse_marginal\":{:.6f},\"speedup\":{:.1f}}}\n",
               n, cache.num_columns(), cache.total_nnz(), threads, dense, sparse,
               median(cpu_per_iteration[1]), median(cpu_per_iteration[0]), median(marginal[1]),
               median(marginal[0]), sparse > 0 && dense > 0 ? dense / sparse : 0.0);
  } catch (const fgm::Error& e) {
    std::fprintf(stderr, "fgm_bench_apg: %s\n", e.what());
    return 1;
  }
  return 0;
}
