// Poly-2 scoring benchmark (issue 3): the machine's single-core dgemm peak
// (Eigen), then poly2 worst-case analysis passes on a store, reporting pass
// time, pair updates per second per core on the sparse path and GFLOP/s of
// the dense GEMM path — side by side, in one process. One JSON line each.
// Then, per SIMD target the CPU supports (core/simd, FGM_SIMD), the same passes
// next to one GEMM of the active block: Eigen's (this file is built with
// -march=native: the optimised reference, 1 and --threads threads) and the
// dispatched kernel's (poly2_dense_pairs.h: the upper triangle, as the pass computes it, --threads).
//
//   fgm_bench_poly2 --store DIR [--threads 2] [--reps 3] [--budget 1GB] [--B 10] [--alpha first|random]
//                   [--targets scalar,avx2,avx512]
#include <CLI/CLI.hpp>
#include <Eigen/Dense>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/memory_budget.h"
#include "core/simd/simd.h"
#include "features/block_stream.h"
#include "features/poly2_dense_pairs.h"
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

// The active block of a pass: the `H` columns of largest u_j² = Σ|a_i| x_ij²
// (ties: smaller id), as the poly-2 space orders them.
fgm::DenseFeatureBlock active_block(const fgm::ShardStore& store, const fgm::ScoringContext& ctx,
                                    const std::vector<double>& a, uint64_t H) {
  const uint64_t m = store.info().n_features;
  std::vector<double> u(m, 0.0);
  std::vector<uint32_t> rows, order(m);
  std::vector<float> vals;
  for (uint64_t j = 0; j < m; ++j) {
    store.read_column(j, rows, vals);
    for (size_t e = 0; e < rows.size(); ++e) u[j] += std::fabs(a[rows[e]]) * vals[e] * vals[e];
    order[j] = static_cast<uint32_t>(j);
  }
  std::sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) { return u[x] != u[y] ? u[x] > u[y] : x < y; });
  fgm::DenseFeatureBlock block;
  block.rows = store.info().n_rows;
  fgm::append_dense_columns(ctx, order.data(), static_cast<uint32_t>(std::min<uint64_t>(H, m)), block);
  return block;
}

// One Eigen GEMM G = Xᵀ (diag(a) X) of the block, output columns split over
// `threads` std::threads (Eigen has no thread pool without OpenMP).
double eigen_block_gemm_seconds(const fgm::DenseFeatureBlock& block, const std::vector<double>& a, int threads,
                                int reps) {
  const Eigen::Index n = static_cast<Eigen::Index>(block.rows), H = block.cols;
  Eigen::MatrixXd X(n, H), AX(n, H), G(H, H);
  for (Eigen::Index h = 0; h < H; ++h)
    for (Eigen::Index i = 0; i < n; ++i) {
      X(i, h) = block.at(i, static_cast<uint32_t>(h));
      AX(i, h) = a[i] * X(i, h);
    }
  std::vector<double> secs;
  for (int r = 0; r < reps + 1; ++r) {
    double t = now();
    std::vector<std::thread> pool;
    for (int w = 0; w < threads; ++w)
      pool.emplace_back([&, w] {
        const Eigen::Index c0 = H * w / threads, c1 = H * (w + 1) / threads;
        G.middleCols(c0, c1 - c0).noalias() = X.transpose() * AX.middleCols(c0, c1 - c0);
      });
    for (auto& th : pool) th.join();
    if (r > 0) secs.push_back(now() - t);
  }
  if (G(0, 0) == 12345.678) std::puts("");
  return median(secs);
}

double fgm_block_gemm_seconds(const fgm::DenseFeatureBlock& block, const std::vector<double>& a, int threads,
                              int reps, fgm::MemoryBudget& budget) {
  std::vector<double> secs;
  for (int r = 0; r < reps + 1; ++r) {
    double t = now();
    fgm::DensePairProducts G = fgm::dense_pair_products(block, block.cols, a.data(), 0, threads, budget);
    if (r > 0) secs.push_back(now() - t);
  }
  return median(secs);
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
  std::string targets_text;
  app.add_option("--targets", targets_text, "comma-separated SIMD targets (default: all this CPU supports)");
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
  std::vector<fgm::simd::Target> targets = fgm::simd::supported_targets();
  if (!targets_text.empty()) {
    targets.clear();
    std::stringstream ss(targets_text);
    for (std::string t; std::getline(ss, t, ',');) targets.push_back(fgm::simd::parse_target(t));
  }
  const fgm::simd::Target default_target = fgm::simd::active_target();
  if (std::find(targets.begin(), targets.end(), default_target) == targets.end()) targets.insert(targets.begin(), default_target);
  std::vector<std::pair<fgm::simd::Target, double>> target_pass;
  uint64_t active_features = 0;
  for (fgm::simd::Target target : targets) {
    fgm::simd::set_active_target(target);
    std::vector<double> pass, sparse_rate, dense_rate;
    for (int r = 0; r < reps + 1; ++r) {
      fgm::Poly2Space space(*store, fs, budget);
      double t = now();
      fgm::SpaceScores s = space.score(ctx);
      double secs = now() - t;
      const auto& st = space.last_stats();
      active_features = st.active_features;
      if (r == 0) continue;  // warm-up: page cache
      pass.push_back(secs);
      if (st.sparse_seconds > 0) sparse_rate.push_back(st.sparse_updates / st.sparse_seconds / threads);
      if (st.dense_seconds > 0) dense_rate.push_back(st.dense_flops / st.dense_seconds / 1e9);
      fmt::print("{{\"measure\":\"poly2_pass\",\"simd\":\"{}\",\"rep\":{},\"seconds\":{:.3f},\"bytes_streamed\":{},"
                 "\"pair_updates\":{},\"active_features\":{},\"candidate_pairs\":{},\"partitions\":{},"
                 "\"dense\":{},\"sparse_seconds\":{:.3f},\"dense_seconds\":{:.3f},\"threshold\":{:.6g},"
                 "\"dimension\":{:.4g},\"candidates_scored\":{},\"peak_rss\":{}}}\n",
                 fgm::simd::target_name(target), r, secs, s.pass.bytes_streamed, s.pair_updates, st.active_features,
                 st.candidate_pairs, st.partitions, st.dense_path, st.sparse_seconds, st.dense_seconds, st.threshold,
                 space.dimension(), s.candidates_scored, fgm::peak_rss_bytes());
    }
    target_pass.emplace_back(target, median(pass));
    if (target != default_target) continue;
    fmt::print("{{\"measure\":\"poly2_summary\",\"store\":\"{}\",\"rows\":{},\"features\":{},\"threads\":{},"
               "\"alpha\":\"{}\",\"simd\":\"{}\",\"median_pass_seconds\":{:.3f},"
               "\"pair_updates_per_second_per_core\":{:.4g},"
               "\"dense_gflops\":{:.2f},\"dgemm_peak_gflops_per_core\":{:.2f},\"dense_over_peak\":{:.3f}}}\n",
               store_dir, n, store->info().n_features, threads, alpha_mode, fgm::simd::target_name(target),
               median(pass), sparse_rate.empty() ? 0.0 : median(sparse_rate),
               dense_rate.empty() ? 0.0 : median(dense_rate), peak,
               dense_rate.empty() ? 0.0 : median(dense_rate) / (peak * threads));
  }
  // The pass next to one GEMM of its active block (dense blocks only: the
  // comparison of issue 9's target, pass ≤ 2× one optimised GEMM).
  const uint64_t H = active_features;
  if (H >= 2 && double(store->info().nnz) >= 0.2 * double(n) * double(store->info().n_features)) {
    fgm::DenseFeatureBlock block = active_block(*store, ctx, a, H);
    const double eigen_1 = eigen_block_gemm_seconds(block, a, 1, reps);
    const double eigen_t = eigen_block_gemm_seconds(block, a, threads, reps);
    for (const auto& [target, pass_seconds] : target_pass) {
      fgm::simd::set_active_target(target);
      const double fgm_t = fgm_block_gemm_seconds(block, a, threads, reps, budget);
      fmt::print("{{\"measure\":\"poly2_dense_vs_gemm\",\"simd\":\"{}\",\"rows\":{},\"active_features\":{},"
                 "\"threads\":{},\"pass_seconds\":{:.4f},\"eigen_native_gemm_seconds_1_thread\":{:.4f},"
                 "\"eigen_native_gemm_seconds\":{:.4f},\"fgm_upper_gemm_seconds\":{:.4f},"
                 "\"pass_over_eigen_gemm\":{:.2f},\"target_pass_over_gemm\":2.0}}\n",
                 fgm::simd::target_name(target), n, H, threads, pass_seconds, eigen_1, eigen_t, fgm_t,
                 pass_seconds / eigen_t);
    }
  }
  return 0;
}
