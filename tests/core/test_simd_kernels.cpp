// core/simd: every kernel of every target this CPU supports against plain
// scalar references written here (not the kernels' own scalar table), and the
// fixed-lane-order reductions bit-identical across targets.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/simd/simd.h"

using namespace fgm;
using namespace fgm::simd;

namespace {

const std::vector<size_t> kSizes = {0, 1, 2, 7, 8, 9, 15, 16, 17, 63, 1000, 1003};

// The documented order: element e into lane e mod 8, lanes combined as
// ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)), padding lanes add +0.0.
template <class Term>
double eight_lane_sum(size_t n, Term&& term) {
  double l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t e = 0;
  for (; e < n; ++e) l[e % 8] = l[e % 8] + term(e);
  for (; e % 8 != 0; ++e) l[e % 8] = l[e % 8] + 0.0;
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

struct Gathered {
  std::vector<double> a;
  std::vector<uint32_t> rows;
  std::vector<float> values;
};

// kind 0: real values; 1: small integers (every sum exact); 2: binary with ties.
Gathered make_gathered(size_t n, int kind, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unif(-1, 1);
  std::uniform_int_distribution<int> small(-3, 3);
  Gathered g;
  g.a.resize(300);
  for (double& x : g.a) x = kind == 0 ? unif(rng) : kind == 1 ? small(rng) : (small(rng) >= 0 ? 1 : -1);
  for (size_t e = 0; e < n; ++e) {
    g.rows.push_back(static_cast<uint32_t>(rng() % g.a.size()));
    g.values.push_back(kind == 0 ? static_cast<float>(unif(rng)) : kind == 1 ? static_cast<float>(small(rng)) : 1.0f);
  }
  return g;
}

bool close(double x, double ref, double scale) { return std::fabs(x - ref) <= 1e-13 * std::max(1.0, scale); }

}  // namespace

TEST_CASE("simd: target names, parsing and forcing", "[simd]") {
  REQUIRE(parse_target("scalar") == Target::kScalar);
  REQUIRE(parse_target("avx2") == Target::kAvx2);
  REQUIRE(parse_target("avx512") == Target::kAvx512);
  try {
    parse_target("sse9");
    FAIL("accepted an unknown target");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::kConfig);
    REQUIRE(std::string(e.what()).find("FGM_SIMD") != std::string::npos);
  }
  REQUIRE(cpu_supports(Target::kScalar));
  const std::vector<Target> targets = supported_targets();
  REQUIRE(targets.front() == Target::kScalar);
  const Target before = active_target();
  for (Target t : targets) {
    set_active_target(t);
    REQUIRE(active_target() == t);
    REQUIRE(kernels().target == t);
    REQUIRE(kernels_for(t).target == t);
  }
  for (Target t : {Target::kAvx2, Target::kAvx512})
    if (!cpu_supports(t)) REQUIRE_THROWS_AS(set_active_target(t), Error);
  set_active_target(before);
}

TEST_CASE("simd: gather dot and column moments equal the 8-lane reference on every target", "[simd]") {
  std::mt19937_64 rng(3);
  for (int kind : {0, 1, 2})
    for (size_t n : kSizes) {
      Gathered g = make_gathered(n, kind, rng);
      auto term = [&](size_t e) { return g.a[g.rows[e]] * static_cast<double>(g.values[e]); };
      const double ref = eight_lane_sum(n, term);
      double plain = 0, scale = 0, c = 0, q = 0, w = 0;
      for (size_t e = 0; e < n; ++e) {
        plain += term(e);
        scale += std::fabs(term(e));
      }
      const double ref_c = ref;
      const double ref_q = eight_lane_sum(n, [&](size_t e) { return term(e) * static_cast<double>(g.values[e]); });
      const double ref_w = eight_lane_sum(n, [&](size_t e) {
        return std::fabs(g.a[g.rows[e]]) * static_cast<double>(g.values[e]) * static_cast<double>(g.values[e]);
      });
      for (Target t : supported_targets()) {
        INFO("target " << target_name(t) << " kind " << kind << " n " << n);
        const Kernels& k = kernels_for(t);
        const double got = k.gather_dot(g.a.data(), g.rows.data(), g.values.data(), n);
        REQUIRE(got == ref);  // bitwise: the documented lane order
        REQUIRE(close(got, plain, scale));
        if (kind != 0) REQUIRE(got == plain);  // integer sums are exact in any order
        double m[3];
        k.gather_moments(g.a.data(), g.rows.data(), g.values.data(), n, m);
        c = m[0], q = m[1], w = m[2];
        REQUIRE(c == ref_c);
        REQUIRE(q == ref_q);
        REQUIRE(w == ref_w);
      }
    }
}

TEST_CASE("simd: inline short-cell moments are bit-identical to every target's kernel", "[simd]") {
  std::mt19937_64 rng(11);
  for (int kind : {0, 1, 2})
    for (size_t n = 0; n < 8; ++n)
      for (int rep = 0; rep < 20; ++rep) {
        Gathered g = make_gathered(n, kind, rng);
        if (rep == 0)  // negative duals with zero values: products are -0
          for (double& x : g.a) x = -std::fabs(x);
        if (rep == 0)
          for (float& v : g.values) v = 0.0f;
        double got[3];
        gather_moments_short(g.a.data(), g.rows.data(), g.values.data(), n, got);
        for (Target t : supported_targets()) {
          INFO("target " << target_name(t) << " kind " << kind << " n " << n << " rep " << rep);
          double want[3];
          kernels_for(t).gather_moments(g.a.data(), g.rows.data(), g.values.data(), n, want);
          for (int k = 0; k < 3; ++k) {
            REQUIRE(got[k] == want[k]);
            REQUIRE(std::signbit(got[k]) == std::signbit(want[k]));
          }
        }
      }
}

TEST_CASE("simd: dot, axpy and axpby against scalar loops on every target", "[simd]") {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> unif(-2, 2);
  for (size_t n : kSizes) {
    std::vector<double> x(n), y(n);
    for (size_t i = 0; i < n; ++i) x[i] = unif(rng), y[i] = unif(rng);
    const double ref = eight_lane_sum(n, [&](size_t e) { return x[e] * y[e]; });
    for (Target t : supported_targets()) {
      INFO("target " << target_name(t) << " n " << n);
      const Kernels& k = kernels_for(t);
      REQUIRE(k.dot(x.data(), y.data(), n) == ref);
      std::vector<double> z = y;
      k.axpy(0.75, x.data(), z.data(), n);
      for (size_t i = 0; i < n; ++i) REQUIRE(z[i] == y[i] + 0.75 * x[i]);
      z = y;
      k.axpby(1.5, x.data(), -0.5, z.data(), n);
      for (size_t i = 0; i < n; ++i) REQUIRE(z[i] == 1.5 * x[i] + -0.5 * y[i]);
      z = x;  // y may alias x
      k.axpy(2.0, z.data(), z.data(), n);
      for (size_t i = 0; i < n; ++i) REQUIRE(z[i] == 3.0 * x[i]);
    }
  }
}

TEST_CASE("simd: dot_f and axpy_f equal dot and axpy on the widened floats on every target", "[simd]") {
  std::mt19937_64 rng(6);
  std::uniform_real_distribution<double> unif(-2, 2);
  for (size_t n : kSizes) {
    std::vector<float> x(n);
    std::vector<double> wide(n), y(n);
    for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(unif(rng)), wide[i] = x[i], y[i] = unif(rng);
    const double ref = eight_lane_sum(n, [&](size_t e) { return wide[e] * y[e]; });
    for (Target t : supported_targets()) {
      INFO("target " << target_name(t) << " n " << n);
      const Kernels& k = kernels_for(t);
      REQUIRE(k.dot_f(x.data(), y.data(), n) == ref);
      REQUIRE(k.dot_f(x.data(), y.data(), n) == k.dot(wide.data(), y.data(), n));
      std::vector<double> z = y, zw = y;
      k.axpy_f(-1.25, x.data(), z.data(), n);
      k.axpy(-1.25, wide.data(), zw.data(), n);
      for (size_t i = 0; i < n; ++i) REQUIRE(z[i] == y[i] + -1.25 * wide[i]);
      REQUIRE(z == zw);
    }
  }
}

TEST_CASE("simd: squared hinge and logistic sweeps against libm references on every target", "[simd]") {
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> unif(-6, 6);
  const double C = 0.7;
  for (size_t n : kSizes) {
    std::vector<int8_t> y(n);
    std::vector<double> d(n);
    for (size_t i = 0; i < n; ++i) {
      y[i] = static_cast<int8_t>(i % 7 == 3 ? 0 : (rng() % 2 ? 1 : -1));  // some rows left out
      d[i] = unif(rng);
    }
    // The edges: exactly on the hinge, zero margin, huge margins both ways
    // (exp underflows to subnormals and to 0), tiny margins.
    const double edges[] = {1.0, -1.0, 0.0, 800.0, -800.0, 740.0, 709.5, -709.5, 1e-12, -1e-300, 36.0, -36.0};
    for (size_t i = 0; i < n && i < std::size(edges); ++i) d[i] = edges[i];
    double ref_hinge = 0, ref_log = 0;
    std::vector<double> ref_m(n), ref_rh(n), ref_p(n), ref_rl(n);
    for (size_t i = 0; i < n; ++i) {
      const double m = double(y[i]) * d[i];
      ref_m[i] = m;
      const double slack = std::max(1.0 - m, 0.0);
      ref_rh[i] = -C * slack * double(y[i]);
      ref_p[i] = m >= 0 ? std::exp(-m) / (1 + std::exp(-m)) : 1 / (1 + std::exp(m));
      ref_rl[i] = -C * ref_p[i] * double(y[i]);
      if (y[i] != 0) {
        ref_hinge += slack * slack;
        ref_log += std::max(-m, 0.0) + std::log1p(std::exp(-std::fabs(m)));
      }
    }
    ref_hinge *= 0.5 * C;
    ref_log *= C;
    std::vector<std::vector<double>> by_target;
    for (Target t : supported_targets()) {
      INFO("target " << target_name(t) << " n " << n);
      const Kernels& k = kernels_for(t);
      std::vector<double> m(n, -1), r(n, -1), p(n, -1), rl(n, -1);
      const double hinge = k.squared_hinge_sweep(y.data(), d.data(), C, m.data(), r.data(), n);
      REQUIRE(close(hinge, ref_hinge, ref_hinge));
      for (size_t i = 0; i < n; ++i) {
        REQUIRE(m[i] == ref_m[i]);
        REQUIRE(r[i] == ref_rh[i]);
      }
      REQUIRE(k.squared_hinge_sweep(y.data(), d.data(), C, nullptr, nullptr, n) == hinge);
      const double loss = k.logistic_sweep(y.data(), d.data(), C, m.data(), p.data(), rl.data(), n);
      REQUIRE(close(loss, ref_log, ref_log));
      for (size_t i = 0; i < n; ++i) {
        INFO("row " << i << " m " << ref_m[i]);
        REQUIRE(m[i] == ref_m[i]);
        // σ within 4 ulp of libm's (relative, also for subnormal-sized values: absolute 4·2^-1074).
        REQUIRE(std::fabs(p[i] - ref_p[i]) <= 4 * std::ldexp(1.0, -52) * ref_p[i] + 4 * std::ldexp(1.0, -1074));
        REQUIRE(std::fabs(rl[i] - ref_rl[i]) <= 8 * std::ldexp(1.0, -52) * std::fabs(ref_rl[i]) + 1e-320);
      }
      by_target.push_back({hinge, loss});
      by_target.back().insert(by_target.back().end(), p.begin(), p.end());
    }
    for (const auto& v : by_target) REQUIRE(v == by_target.front());  // the same bits on every target
  }
}

TEST_CASE("simd: poly-2 bound prefix test equals the scalar scan, ties at the threshold included", "[simd]") {
  std::mt19937_64 rng(11);
  for (size_t n : kSizes) {
    std::vector<double> u(n + 5);
    for (double& x : u) x = static_cast<double>(rng() % 8);  // many ties
    std::vector<uint32_t> idx(n);
    for (size_t e = 0; e < n; ++e) idx[e] = static_cast<uint32_t>(rng() % u.size());
    std::sort(idx.begin(), idx.end(), [&](uint32_t x, uint32_t y) { return u[x] > u[y]; });
    for (double scale : {1.0, 0.5, 3.0})
      for (double t : {0.0, 1.0, 3.0, 3.5, 7.0, 100.0}) {
        size_t ref = 0;
        while (ref < n && u[idx[ref]] * scale >= t) ++ref;
        for (Target target : supported_targets()) {
          INFO("target " << target_name(target) << " n " << n << " scale " << scale << " t " << t);
          REQUIRE(kernels_for(target).prefix_scaled_at_least(u.data(), idx.data(), n, scale, t) == ref);
        }
      }
  }
}

TEST_CASE("simd: GEMM micro-kernel equals a double loop (exact on integers)", "[simd]") {
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<double> unif(-1, 1);
  for (Target t : supported_targets()) {
    const Kernels& k = kernels_for(t);
    const size_t MR = k.gemm_mr, NR = k.gemm_nr, ldc = MR + 3;
    for (bool integer : {false, true})
      for (size_t kc : {size_t{1}, size_t{5}, size_t{256}}) {
        INFO("target " << target_name(t) << " integer " << integer << " kc " << kc);
        auto draw = [&] { return integer ? static_cast<double>(static_cast<int>(rng() % 7) - 3) : unif(rng); };
        std::vector<double> A(kc * MR), B(kc * NR), C(ldc * NR);
        for (double& x : A) x = draw();
        for (double& x : B) x = draw();
        for (double& x : C) x = draw();
        std::vector<double> ref = C;
        std::vector<double> scale(ldc * NR, 0.0);
        for (size_t j = 0; j < NR; ++j)
          for (size_t i = 0; i < MR; ++i)
            for (size_t p = 0; p < kc; ++p) {
              ref[j * ldc + i] += A[p * MR + i] * B[p * NR + j];
              scale[j * ldc + i] += std::fabs(A[p * MR + i] * B[p * NR + j]);
            }
        std::vector<double> got = C;
        k.gemm_tile(kc, A.data(), B.data(), got.data(), ldc);
        for (size_t j = 0; j < NR; ++j)
          for (size_t i = 0; i < ldc; ++i) {
            if (i >= MR) {
              REQUIRE(got[j * ldc + i] == C[j * ldc + i]);  // outside the tile: untouched
            } else if (integer) {
              REQUIRE(got[j * ldc + i] == ref[j * ldc + i]);
            } else {
              REQUIRE(std::fabs(got[j * ldc + i] - ref[j * ldc + i]) <= 4 * kc * 1.2e-16 * (scale[j * ldc + i] + 1));
            }
          }
      }
  }
}
