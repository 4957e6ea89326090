// The dense poly-2 pair path (features/poly2_dense_pairs.h) against a
// brute-force double loop: the GEMM products, the row-order sums and the
// offered top B, on binary, integer and real data with ties, for every SIMD
// target this CPU supports and threads 1/2/4.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "features/poly2_dense_pairs.h"

using namespace fgm;

namespace {

enum class Kind { kBinary, kInteger, kReal };

struct Dense {
  DenseFeatureBlock X;
  std::vector<double> a;
};

Dense make_dense(uint64_t n, uint32_t H, Kind kind, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unif(0, 1);
  Dense d;
  d.X.rows = n;
  d.X.cols = H;
  d.X.values.assign(n * H, 0.0f);
  for (uint32_t h = 0; h < H; ++h)
    for (uint64_t i = 0; i < n; ++i) {
      const double u = unif(rng);
      float v = 0;
      if (kind == Kind::kBinary) v = u < 0.5 ? 1.0f : 0.0f;
      else if (kind == Kind::kInteger) v = u < 0.2 ? 0.0f : static_cast<float>(1 + static_cast<int>(unif(rng) * 4));
      else v = static_cast<float>(2 * u - 1);
      d.X.values[h * n + i] = v;
    }
  for (uint64_t i = 0; i < n; ++i) {
    const double sign = unif(rng) < 0.5 ? -1 : 1;
    d.a.push_back(kind == Kind::kReal ? sign * unif(rng) : sign * (unif(rng) < 0.7 ? 1 : 2));  // small integers: ties
  }
  return d;
}

// Σ_i a_i x_ip x_iq and Σ_i |a_i x_ip x_iq| by a plain double loop.
std::pair<double, double> brute_pair(const Dense& d, uint32_t p, uint32_t q) {
  double s = 0, abs_sum = 0;
  for (uint64_t i = 0; i < d.X.rows; ++i) {
    const double t = d.a[i] * static_cast<double>(d.X.at(i, p)) * static_cast<double>(d.X.at(i, q));
    s += t;
    abs_sum += std::fabs(t);
  }
  return {s, abs_sum};
}

const char* kind_name(Kind k) { return k == Kind::kBinary ? "binary" : k == Kind::kInteger ? "integer" : "real"; }

}  // namespace

TEST_CASE("dense pair products equal a brute-force double loop, for every target and threads 1/2/4",
          "[features][poly2][dense][simd]") {
  const double eps = std::ldexp(1.0, -53);
  for (Kind kind : {Kind::kBinary, Kind::kInteger, Kind::kReal})
    for (auto [n, H] : {std::pair<uint64_t, uint32_t>{1, 2}, {7, 5}, {300, 17}, {600, 130}}) {
      Dense d = make_dense(n, H, kind, 31 * n + H);
      for (simd::Target target : simd::supported_targets()) {
        const simd::Kernels& k = simd::kernels_for(target);
        std::vector<double> first;
        for (int threads : {1, 2, 4}) {
          INFO(kind_name(kind) << " n " << n << " H " << H << " target " << simd::target_name(target) << " threads "
                               << threads);
          MemoryBudget budget(64 << 20);
          DensePairProducts G = dense_pair_products(d.X, H, d.a.data(), 0, threads, budget, k);
          std::vector<double> upper;
          for (uint32_t q = 0; q < H; ++q)
            for (uint32_t p = 0; p <= q; ++p) {
              const auto [ref, scale] = brute_pair(d, p, q);
              if (kind == Kind::kReal)
                REQUIRE(std::fabs(G.at(p, q) - ref) <= 2 * (n + 2) * eps * scale);
              else
                REQUIRE(G.at(p, q) == ref);  // integer sums are exact in any order
              upper.push_back(G.at(p, q));
            }
          if (first.empty()) first = upper;
          REQUIRE(upper == first);  // bitwise, for any thread count
        }
        // The skipped square is not computed; the rest is bit-identical.
        MemoryBudget budget(64 << 20);
        DensePairProducts full = dense_pair_products(d.X, H, d.a.data(), 0, 2, budget, k);
        const uint32_t skip = H / 2 + 1;
        DensePairProducts part = dense_pair_products(d.X, H, d.a.data(), skip, 2, budget, k);
        for (uint32_t q = 0; q < H; ++q)
          for (uint32_t p = 0; p < q; ++p)
            if (!(p < skip && q < skip)) REQUIRE(part.at(p, q) == full.at(p, q));
      }
    }
}

TEST_CASE("row-order pair sums are the sparse path's sums", "[features][poly2][dense]") {
  Dense d = make_dense(200, 6, Kind::kReal, 4);
  for (uint64_t i = 0; i < 200; i += 3) d.X.values[2 * 200 + i] = 0.0f;  // absent entries
  for (uint32_t p = 0; p < 6; ++p)
    for (uint32_t q = p + 1; q < 6; ++q) {
      double sparse = 0;  // the sparse path: (a_i·x_ip)·x_iq over stored entries, rows ascending
      for (uint64_t i = 0; i < 200; ++i)
        if (d.X.at(i, p) != 0 && d.X.at(i, q) != 0)
          sparse += d.a[i] * static_cast<double>(d.X.at(i, p)) * static_cast<double>(d.X.at(i, q));
      REQUIRE(row_order_pair_sum(d.X, d.a.data(), p, q) == sparse);
    }
}

TEST_CASE("dense pairs offer the brute-force top B (ties by smaller id), for every target and threads 1/2/4",
          "[features][poly2][dense][simd][ties]") {
  const double cross_scale = 2.0;
  for (Kind kind : {Kind::kBinary, Kind::kInteger, Kind::kReal})
    for (uint32_t skip : {0u, 4u}) {
      Dense d = make_dense(150, 24, kind, 77 + skip);
      const uint32_t H = d.X.cols;
      std::vector<double> uh(H);
      for (uint32_t h = 0; h < H; ++h) {
        double w = 0;
        for (uint64_t i = 0; i < d.X.rows; ++i)
          w += std::fabs(d.a[i]) * static_cast<double>(d.X.at(i, h)) * static_cast<double>(d.X.at(i, h));
        uh[h] = std::sqrt(w);
      }
      auto id = [](uint32_t p, uint32_t q) { return uint64_t{p} * 1000 + q; };
      auto excluded = [](uint32_t p, uint32_t q) { return p == 1 && q == 7; };
      for (uint64_t B : {uint64_t{1}, uint64_t{5}, uint64_t{40}}) {
        // Oracle: every pair outside the skipped square, row-order sums, sorted.
        std::vector<ScoredCandidate> oracle;
        for (uint32_t p = 0; p < H; ++p)
          for (uint32_t q = p + 1; q < H; ++q) {
            if ((p < skip && q < skip) || excluded(p, q)) continue;
            const double s = row_order_pair_sum(d.X, d.a.data(), p, q);
            if (cross_scale * s * s > 0) oracle.push_back({cross_scale * s * s, id(p, q)});
          }
        std::sort(oracle.begin(), oracle.end(), ranks_before);
        if (oracle.size() > B) oracle.resize(B);
        for (simd::Target target : simd::supported_targets())
          for (int threads : {1, 2, 4}) {
            INFO(kind_name(kind) << " skip " << skip << " B " << B << " target " << simd::target_name(target)
                                 << " threads " << threads);
            MemoryBudget budget(64 << 20);
            TopBCache top(B);
            DensePairCallbacks cb;
            cb.pair_id = id;
            cb.excluded = excluded;
            cb.offer = [&](uint32_t p, uint32_t q, double sum) {
              REQUIRE(p < q);
              REQUIRE_FALSE((p < skip && q < skip));
              REQUIRE_FALSE(excluded(p, q));
              const double s = cross_scale * sum * sum;
              if (s > 0 && top.may_admit(s)) top.offer({s, id(p, q)});
            };
            DensePairStats st = offer_dense_block_pairs(d.X, H, d.a.data(), uh, skip, cross_scale, top, threads,
                                                        budget, cb, simd::kernels_for(target));
            REQUIRE(st.rescored <= uint64_t{H} * (H - 1) / 2);
            std::vector<ScoredCandidate> got = top.take_sorted();
            REQUIRE(got.size() == oracle.size());
            for (size_t r = 0; r < got.size(); ++r) {
              REQUIRE(got[r].id == oracle[r].id);
              REQUIRE(got[r].score == oracle[r].score);
            }
          }
      }
    }
}
