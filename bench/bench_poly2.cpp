// Poly-2 scoring benchmark (issue 3): the machine's single-core dgemm peak
// (Eigen), then poly2 worst-case analysis passes on a store, reporting pass
// time, pair updates per second per core on the sparse path and GFLOP/s of
// the dense GEMM path — side by side, in one process. One JSON line each.
//
//   fgm_bench_poly2 --store DIR [--threads 2] [--reps 3] [--budget 1GB] [--B 10] [--alpha first|random]
#include <CLI/CLI.hpp>
#include <Eigen/Dense>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "core/memory_budget.h"
#include "features/block_stream.h"
#include "features/poly2_space.h"
#include "io/shard_store.h"

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double dgemm_gflops(int n, int reps) {
  Eigen::MatrixXd a = Eigen::MatrixXd::Random(n, n), b = Eigen::MatrixXd::Random(n, n), c(n, n);
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    double t = now();
    c.noalias() = a.transpose() * b;
    double s = now() - t;
    rates.push_back(2.0 * n * n * double(n) / s / 1e9);
  }
  if (c(0, 0) == 12345.678) std::puts("");  // keep the product alive
  return median(rates);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"poly2 scoring benchmark"};
  std::string store_dir, budget_text = "1GB", alpha_mode = "first";
  int threads = 2, reps = 3, gemm_n = 1024;
  uint64_t B = 10;
  app.add_option("--store", store_dir)->required();
  app.add_option("--threads", threads);
  app.add_option("--reps", reps);
  app.add_option("--budget", budget_text);
  app.add_option("--B", B);
  app.add_option("--alpha", alpha_mode)->check(CLI::IsMember({"first", "random"}));
  app.add_option("--gemm-n", gemm_n);
  CLI11_PARSE(app, argc, argv);

  double peak = dgemm_gflops(gemm_n, 5);
  fmt::print("{{\"measure\":\"dgemm_peak\",\"n\":{},\"gflops_per_core\":{:.2f}}}\n", gemm_n, peak);

  fgm::MemoryBudget budget(fgm::parse_byte_size(budget_text, "--budget"));
  auto store = fgm::ShardStore::open(store_dir, budget);
  const uint64_t n = store->info().n_rows;
  std::vector<double> a(n);
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  for (uint64_t i = 0; i < n; ++i) a[i] = (alpha_mode == "first" ? 1.0 : unif(rng)) * store->labels()[i];

  fgm::SchedulerOptions so;
  so.threads = threads;
  auto blocks = store->plan_blocks(4 << 20);
  fgm::BlockStream streamer(*store, so, budget);
  fgm::ScoringContext ctx;
  ctx.store = store.get();
  ctx.blocks = &blocks;
  ctx.stream = &streamer;
  ctx.a = a.data();
  ctx.B = B;
  ctx.threads = threads;
  ctx.budget = &budget;
  fgm::FeatureSpaceSettings fs;
  fs.kind = "poly2";
  std::vector<double> pass, sparse_rate, dense_rate;
  for (int r = 0; r < reps + 1; ++r) {
    fgm::Poly2Space space(*store, fs, budget);
    double t = now();
    fgm::SpaceScores s = space.score(ctx);
    double secs = now() - t;
    const auto& st = space.last_stats();
    if (r == 0) continue;  // warm-up: page cache
    pass.push_back(secs);
    if (st.sparse_seconds > 0) sparse_rate.push_back(st.sparse_updates / st.sparse_seconds / threads);
    if (st.dense_seconds > 0) dense_rate.push_back(st.dense_flops / st.dense_seconds / 1e9);
    fmt::print("{{\"measure\":\"poly2_pass\",\"rep\":{},\"seconds\":{:.3f},\"bytes_streamed\":{},"
               "\"pair_updates\":{},\"active_features\":{},\"candidate_pairs\":{},\"partitions\":{},"
               "\"dense\":{},\"sparse_seconds\":{:.3f},\"dense_seconds\":{:.3f},\"threshold\":{:.6g},"
               "\"dimension\":{:.4g},\"candidates_scored\":{},\"peak_rss\":{}}}\n",
               r, secs, s.pass.bytes_streamed, s.pair_updates, st.active_features, st.candidate_pairs,
               st.partitions, st.dense_path, st.sparse_seconds, st.dense_seconds, st.threshold,
               space.dimension(), s.candidates_scored, fgm::peak_rss_bytes());
  }
  fmt::print("{{\"measure\":\"poly2_summary\",\"store\":\"{}\",\"rows\":{},\"features\":{},\"threads\":{},"
             "\"alpha\":\"{}\",\"median_pass_seconds\":{:.3f},\"pair_updates_per_second_per_core\":{:.4g},"
             "\"dense_gflops\":{:.2f},\"dgemm_peak_gflops_per_core\":{:.2f},\"dense_over_peak\":{:.3f}}}\n",
             store_dir, n, store->info().n_features, threads, alpha_mode, median(pass),
             sparse_rate.empty() ? 0.0 : median(sparse_rate), dense_rate.empty() ? 0.0 : median(dense_rate), peak,
             dense_rate.empty() ? 0.0 : median(dense_rate) / (peak * threads));
  return 0;
}
