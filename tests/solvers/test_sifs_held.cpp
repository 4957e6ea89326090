// The shortcuts of the SIFS passes (solvers/sifs/sifs_passes.h) against a
// dense computation straight from the definitions: columns held in memory
// (SifsData::hold_columns) and streamed, column passes restricted to some
// columns, row passes restricted to the columns with a nonzero c or mask
// entry, the row norms computed once and reused (and a row pass skipped when
// nothing is left to compute), the z_L offset summed in the extraction pass.
// Then whole paths: held columns give the same path as streamed ones (and
// the same for 1 and 2 threads).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "features/block_stream.h"
#include "solvers/sifs/sifs_path.h"
#include "tests/solvers/sifs_oracle.h"

using namespace fgm;
using test::DenseSifs;
using test::SifsKind;

namespace {

struct Rig {
  SifsLayout layout;
  MemoryBudget budget{256ull << 20};
  std::unique_ptr<test::TiledMemoryStore> store;
  std::unique_ptr<BlockStream> stream;
  std::unique_ptr<SifsData> data;
  Rig(const DenseSifs& d, bool held, int threads = 1) : layout(d.layout()), store(d.store(7)) {
    SchedulerOptions so;
    so.threads = threads;
    stream = std::make_unique<BlockStream>(*store, so, budget);
    data = std::make_unique<SifsData>(*stream, store->plan_blocks(300), layout, budget);
    if (held) REQUIRE(data->hold_columns());
    REQUIRE(data->holds_columns() == held);
  }
};

bool close(double a, double b) { return std::abs(a - b) <= 1e-12 * (1 + std::abs(a) + std::abs(b)); }

}  // namespace

TEST_CASE("SIFS passes: held and streamed, restricted, cached and fused passes equal a dense computation",
          "[solvers][sifs][held]") {
  for (uint32_t classes : {2u, 3u}) {
    CAPTURE(classes);
    const DenseSifs d(70, 23, SifsKind::kDegenerate, classes, 31);
    const auto cols = d.nonempty_columns();
    const uint64_t m = cols.size(), n = d.n, K = d.K;
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> unif(-1.0, 1.0);
    std::vector<double> G(n * K), H(n * K);
    for (auto& v : G) v = rng() % 4 == 0 ? 0.0 : unif(rng);
    for (auto& v : H) v = std::abs(unif(rng));
    for (uint64_t k = 0; k < K; ++k) G[5 * K + k] = 0, H[5 * K + k] = 0;  // a row with zero coefficients
    std::vector<uint8_t> some_columns(m, 0);
    for (uint64_t j = 0; j < m; j += 2) some_columns[j] = 1;
    std::vector<double> c(K * m, 0.0);  // sparse, as a reference's support
    for (uint64_t e = 0; e < c.size(); e += 5) c[e] = unif(rng);
    std::vector<uint8_t> full_mask(K * m, 1), mask(K * m, 0);
    for (uint64_t e = 0; e < mask.size(); e += 3) mask[e] = 1;
    std::vector<uint8_t> keep_column(m, 0), keep_row(n, 0);
    for (uint64_t j = 1; j < m; j += 3) keep_column[j] = 1;
    for (uint64_t i = 0; i < n; i += 2) keep_row[i] = 1;

    std::vector<double> dots[2], squares[2], M[2], N[2], N_again[2], M_zero[2], offset[2];
    ReducedMatrix X[2];
    for (int held = 0; held < 2; ++held) {
      CAPTURE(held);
      Rig rig(d, held == 1);
      SifsData& data = *rig.data;
      data.column_pass(G, &H, dots[held], &squares[held], &some_columns);
      for (uint64_t k = 0; k < K; ++k)
        for (uint64_t j = 0; j < m; ++j) {
          double dd = 0, qq = 0;
          for (uint64_t i = 0; i < n; ++i) {
            const double x = d.X[i][cols[j]];
            dd += x * G[i * K + k], qq += x * x * H[i * K + k];
          }
          CAPTURE(k, j);
          if (!some_columns[j]) {
            REQUIRE(dots[held][k * m + j] == 0);
            REQUIRE(squares[held][k * m + j] == 0);
          } else {
            REQUIRE(close(dots[held][k * m + j], dd));
            REQUIRE(close(squares[held][k * m + j], qq));
          }
        }

      // Full mask: the first pass computes the norms, the second reuses them.
      data.row_pass(c, &full_mask, M[held], &N[held]);
      REQUIRE(data.counters().norm_reuses == 0);
      std::vector<double> M2;
      data.row_pass(c, &full_mask, M2, &N_again[held]);
      REQUIRE(data.counters().norm_reuses == 1);
      REQUIRE(N_again[held] == N[held]);
      REQUIRE(M2 == M[held]);
      const int passes = data.counters().row_passes;
      data.row_pass(std::vector<double>(K * m, 0.0), &full_mask, M_zero[held], &N_again[held]);
      REQUIRE(data.counters().row_passes == passes);  // nothing left to compute: no pass
      REQUIRE(data.counters().skipped_passes == 1);
      REQUIRE(N_again[held] == N[held]);
      for (double v : M_zero[held]) REQUIRE(v == 0);
      std::vector<double> Mm, Nm;
      data.row_pass(c, &mask, Mm, &Nm);
      for (uint64_t i = 0; i < n; ++i)
        for (uint64_t k = 0; k < K; ++k) {
          double mm = 0, nn = 0, full = 0;
          for (uint64_t j = 0; j < m; ++j) {
            const double x = d.X[i][cols[j]];
            mm += x * c[k * m + j];
            nn += x * x * mask[k * m + j];
            full += x * x;
          }
          CAPTURE(i, k);
          REQUIRE(close(M[held][i * K + k], mm));
          REQUIRE(close(Mm[i * K + k], mm));
          REQUIRE(close(N[held][i * K + k], full));
          REQUIRE(close(Nm[i * K + k], nn));
        }

      // Extraction with the z_L offset summed over every row (kept or not).
      X[held] = data.extract(keep_column, keep_row, &G, &offset[held]);
      uint64_t r = 0;
      for (uint64_t i = 0; i < n; ++i) {
        if (!keep_row[i]) continue;
        REQUIRE(X[held].row_sample[r] == i);
        std::vector<std::pair<uint32_t, float>> expect;
        uint32_t rc = 0;
        for (uint64_t j = 0; j < m; ++j) {
          if (!keep_column[j]) continue;
          if (d.X[i][cols[j]] != 0) expect.push_back({rc, static_cast<float>(d.X[i][cols[j]])});
          ++rc;
        }
        REQUIRE(X[held].row_ptr[r + 1] - X[held].row_ptr[r] == expect.size());
        for (size_t q = 0; q < expect.size(); ++q) {
          REQUIRE(X[held].col[X[held].row_ptr[r] + q] == expect[q].first);
          REQUIRE(X[held].val[X[held].row_ptr[r] + q] == expect[q].second);
        }
        ++r;
      }
      REQUIRE(r == X[held].row_sample.size());
      for (uint64_t k = 0; k < K; ++k)
        for (uint64_t j = 0; j < m; ++j) {
          double dd = 0;
          for (uint64_t i = 0; i < n; ++i) dd += d.X[i][cols[j]] * G[i * K + k];
          CAPTURE(k, j);
          REQUIRE(close(offset[held][k * m + j], keep_column[j] ? dd : 0.0));
        }
    }
    // Column sums add the rows in the same order held or streamed: bit for bit.
    REQUIRE(dots[0] == dots[1]);
    REQUIRE(squares[0] == squares[1]);
    REQUIRE(offset[0] == offset[1]);
    REQUIRE(X[0].col == X[1].col);
    REQUIRE(X[0].val == X[1].val);
    REQUIRE(X[0].row_ptr == X[1].row_ptr);
  }
}

TEST_CASE("SIFS path with held columns equals the streamed path; held runs are the same for 1 and 2 threads",
          "[solvers][sifs][held]") {
  for (uint32_t classes : {2u, 4u}) {
    for (SifsKind kind : {SifsKind::kReal, SifsKind::kTied}) {
      CAPTURE(classes, test::sifs_kind_name(kind));
      const DenseSifs d(classes == 2 ? 150 : 80, 20, kind, classes, 3);
      std::vector<SifsPoint> runs[3];
      std::vector<std::vector<double>> ws[3];
      for (int r = 0; r < 3; ++r) {  // streamed, held, held with 2 threads
        Rig rig(d, r > 0, r == 2 ? 2 : 1);
        SifsSettings s;
        s.tol = 1e-11;
        s.max_epochs = 200000;
        s.beta_max_ratio = 0.7;
        s.beta_min_ratio = 0.2;
        s.beta_points = 2;
        s.alpha_min_ratio = 0.1;
        s.alpha_points = 12;
        SifsSolver solver(*rig.data, s);
        solver.run_path([&](const SifsPoint& p, const SifsReference& sol) {
          runs[r].push_back(p);
          ws[r].push_back(sol.w);
        });
        if (r > 0) REQUIRE(rig.data->counters().norm_reuses > 0);
      }
      uint64_t screened = 0;
      for (size_t k = 0; k < runs[0].size(); ++k) {
        CAPTURE(k);
        const SifsPoint &a = runs[0][k], &b = runs[1][k], &b2 = runs[2][k];
        REQUIRE(a.converged);
        REQUIRE(b.converged);
        // The held passes add the row sums in another order: the screened
        // sets agree (the rules keep a margin far above rounding), the
        // solutions agree within their gaps and have the same support.
        REQUIRE(b.weights_screened == a.weights_screened);
        REQUIRE(b.samples_in_R == a.samples_in_R);
        REQUIRE(b.samples_in_L == a.samples_in_L);
        REQUIRE(std::abs(b.objective - a.objective) <= a.gap + b.gap + 1e-12);
        for (size_t e = 0; e < ws[0][k].size(); ++e) REQUIRE((ws[0][k][e] != 0) == (ws[1][k][e] != 0));
        REQUIRE(b2.objective == b.objective);
        REQUIRE(b2.gap == b.gap);
        REQUIRE(ws[2][k] == ws[1][k]);
        screened += a.weights_screened + a.samples_in_R + a.samples_in_L;
      }
      REQUIRE(screened > 0);
    }
  }
}

TEST_CASE("SIFS reused extraction gives the same path, bit for bit, as extracting every point",
          "[solvers][sifs][held]") {
  for (uint32_t classes : {2u, 3u}) {
    for (SifsKind kind : {SifsKind::kReal, SifsKind::kBinary, SifsKind::kDegenerate}) {
      CAPTURE(classes, test::sifs_kind_name(kind));
      const DenseSifs d(classes == 2 ? 140 : 70, 24, kind, classes, 8);
      std::vector<SifsPoint> runs[2];
      std::vector<std::vector<double>> ws[2], thetas[2];
      uint64_t reused = 0;
      for (int r = 0; r < 2; ++r) {
        Rig rig(d, true);
        SifsSettings s;
        s.tol = 1e-10;
        s.max_epochs = 200000;
        s.beta_max_ratio = 0.8;
        s.beta_min_ratio = 0.15;
        s.beta_points = 3;
        s.alpha_min_ratio = 0.05;
        s.alpha_points = 15;
        s.reuse_extraction = r == 1;
        SifsSolver solver(*rig.data, s);
        solver.run_path([&](const SifsPoint& p, const SifsReference& sol) {
          runs[r].push_back(p);
          ws[r].push_back(sol.w);
          thetas[r].push_back(sol.theta);
        });
        if (r == 0) REQUIRE(solver.extractions_reused() == 0);
        else reused = solver.extractions_reused();
      }
      REQUIRE(reused > 0);  // the shortcut was taken
      REQUIRE(runs[0].size() == runs[1].size());
      for (size_t k = 0; k < runs[0].size(); ++k) {
        CAPTURE(k);
        REQUIRE(runs[1][k].objective == runs[0][k].objective);
        REQUIRE(runs[1][k].gap == runs[0][k].gap);
        REQUIRE(runs[1][k].epochs == runs[0][k].epochs);
        REQUIRE(runs[1][k].reduced_features == runs[0][k].reduced_features);
        REQUIRE(runs[1][k].reduced_samples == runs[0][k].reduced_samples);
        REQUIRE(ws[1][k] == ws[0][k]);
        REQUIRE(thetas[1][k] == thetas[0][k]);
      }
    }
  }
}

TEST_CASE("SIFS reused extraction: when every row does not fit, the kept rows are extracted instead",
          "[solvers][sifs][held]") {
  const DenseSifs d(2000, 10, SifsKind::kReal, 2, 21);
  double objective[2] = {0, 0};
  std::vector<double> w[2];
  for (int r = 0; r < 2; ++r) {  // 0: no reuse, roomy; 1: reuse, with the budget nearly used up
    Rig rig(d, true);
    SifsSettings s;
    s.tol = 1e-10;
    s.reuse_extraction = r == 1;
    SifsSolver solver(*rig.data, s);
    SifsReference ref = solver.closed_form(0.5 * solver.beta_max());
    // Near α_max almost every sample stays in L: the kept rows are few, every row is 2000.
    Reservation ballast;
    if (r == 1) ballast = rig.budget.reserve(rig.budget.available() - (16 << 10), "test ballast");
    SifsReference next;
    const SifsPoint p = solver.solve(ref, 0.97 * ref.alpha, next);
    CAPTURE(p.reduced_samples);
    REQUIRE(p.converged);
    REQUIRE(p.reduced_samples < 200);
    REQUIRE(p.samples_in_L > 0);
    REQUIRE(solver.extractions_reused() == 0);
    objective[r] = p.objective;
    w[r] = next.w;
  }
  REQUIRE(objective[1] == objective[0]);
  REQUIRE(w[1] == w[0]);
}
