// SIMD kernel benchmark (core/simd): each kernel on every target the CPU
// supports, next to the loop it would replace, single thread, one JSON line
// per kernel and target (median of --reps).
//   gather_dot   Σ a[rows[e]]·values[e] over --nnz random rows of an --rows vector,
//                vs features/block_scores.h cell_dot (today's scoring kernel)
//   dot, axpy    over --rows doubles
//   squared_hinge_sweep, logistic_sweep   margins, r (and σ) of --rows rows,
//                vs the scalar loop with std::exp / std::log1p
//
//   fgm_bench_simd [--rows 3000000] [--nnz 6000000] [--reps 5]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "core/simd/simd.h"
#include "features/block_scores.h"

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

template <class F>
double median_seconds(int reps, F&& f) {
  std::vector<double> s;
  for (int r = 0; r < reps + 1; ++r) {
    double t = now();
    f();
    if (r > 0) s.push_back(now() - t);
  }
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

volatile double g_sink = 0;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"SIMD kernel benchmark"};
  size_t rows = 3000000, nnz = 6000000;
  int reps = 5;
  app.add_option("--rows", rows);
  app.add_option("--nnz", nnz);
  app.add_option("--reps", reps);
  CLI11_PARSE(app, argc, argv);

  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> unif(-1, 1);
  std::vector<double> a(rows), x(rows), y(rows), d(rows), m(rows), p(rows), r(rows);
  std::vector<int8_t> labels(rows);
  for (size_t i = 0; i < rows; ++i) {
    a[i] = unif(rng), x[i] = unif(rng), y[i] = unif(rng), d[i] = 3 * unif(rng);
    labels[i] = rng() % 2 ? 1 : -1;
  }
  std::vector<uint32_t> idx(nnz);
  std::vector<float> vals(nnz);
  for (size_t e = 0; e < nnz; ++e) idx[e] = static_cast<uint32_t>(rng() % rows), vals[e] = static_cast<float>(unif(rng));
  std::sort(idx.begin(), idx.end());  // a CSC column: rows ascending

  auto line = [&](const char* kernel, const char* target, double secs, size_t elements) {
    fmt::print("{{\"measure\":\"simd_kernel\",\"kernel\":\"{}\",\"simd\":\"{}\",\"seconds\":{:.5f},"
               "\"elements_per_second\":{:.4g}}}\n",
               kernel, target, secs, double(elements) / secs);
  };
  line("gather_dot", "cell_dot (baseline)", median_seconds(reps, [&] {
         g_sink = fgm::cell_dot(idx.data(), vals.data(), static_cast<uint32_t>(nnz), a.data());
       }), nnz);
  line("logistic_sweep", "std::exp loop (baseline)", median_seconds(reps, [&] {
         double s = 0;
         for (size_t i = 0; i < rows; ++i) {
           const double mi = double(labels[i]) * d[i];
           m[i] = mi;
           p[i] = 1.0 / (1.0 + std::exp(mi));
           r[i] = -0.5 * p[i] * double(labels[i]);
           s += std::max(-mi, 0.0) + std::log1p(std::exp(-std::fabs(mi)));
         }
         g_sink = s;
       }), rows);
  for (fgm::simd::Target t : fgm::simd::supported_targets()) {
    const fgm::simd::Kernels& k = fgm::simd::kernels_for(t);
    const char* name = fgm::simd::target_name(t);
    line("gather_dot", name, median_seconds(reps, [&] { g_sink = k.gather_dot(a.data(), idx.data(), vals.data(), nnz); }), nnz);
    line("dot", name, median_seconds(reps, [&] { g_sink = k.dot(x.data(), y.data(), rows); }), rows);
    line("axpy", name, median_seconds(reps, [&] { k.axpy(1e-9, x.data(), y.data(), rows); }), rows);
    line("squared_hinge_sweep", name, median_seconds(reps, [&] {
           g_sink = k.squared_hinge_sweep(labels.data(), d.data(), 0.5, m.data(), r.data(), rows);
         }), rows);
    line("logistic_sweep", name, median_seconds(reps, [&] {
           g_sink = k.logistic_sweep(labels.data(), d.data(), 0.5, m.data(), p.data(), r.data(), rows);
         }), rows);
  }
  return 0;
}
