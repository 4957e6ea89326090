// Multi-class SIFS (Section 5) on news20, 20 classes (../shared/data/news20):
// the screened solution against the KKT conditions of (m-P)/(m-D), computed
// column by column through ShardStore::read_column (not through the SIFS
// passes): m-KKT-1 with ERRATA's sign, w = S_β(−Xθ/n)/α; m-KKT-2 from the
// margins; and the full-problem duality gap.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>

#include "features/block_stream.h"
#include "io/column_block.h"
#include "io/ingest.h"
#include "solvers/sifs/sifs_path.h"
#include "tests/test_util.h"

using namespace fgm;

TEST_CASE("SIFS multi-class on news20 (20 classes) satisfies m-KKT on the full problem", "[solvers][sifs][news20]") {
  const std::string raw = std::string(FGM_SHARED_DATA_DIR) + "/news20/news20.bz2";
  if (!std::filesystem::exists(raw)) {
    WARN("news20 not present: " << raw);
    return;
  }
  test::TempDir dir("fgm-sifs-news20");
  MemoryBudget budget(1ull << 30);
  IngestOptions o;
  o.threads = 2;
  ingest_libsvm(raw, dir.file("store"), o, budget);
  auto store = ShardStore::open(dir.file("store"), budget);
  const StoreInfo& info = store->info();
  REQUIRE(info.classes() == 20);
  const uint64_t n = info.n_rows;
  const uint32_t K = 20;
  std::vector<uint16_t> cls(store->classes(), store->classes() + n);
  SifsLayout layout = SifsLayout::multiclass(cls, K);
  SchedulerOptions so;
  so.threads = 2;
  BlockStream stream(*store, so, budget);
  SifsData data(stream, store->plan_blocks(4 << 20), layout, budget);
  SifsSettings s;
  s.tol = 1e-9;
  SifsSolver solver(data, s);
  const double beta = 0.4 * solver.beta_max();
  SifsReference ref = solver.closed_form(beta);
  SifsPoint pt;
  for (double ratio : {0.8, 0.6}) {
    SifsReference next;
    pt = solver.solve(ref, ratio * ref.alpha, next);
    REQUIRE(pt.converged);
    ref = std::move(next);
  }
  REQUIRE(pt.weights_screened + pt.samples_in_L + pt.samples_in_R > 0);
  const double alpha = ref.alpha, gamma = s.gamma;
  const uint64_t m = data.columns();

  // Class scores s_ik = Σ_j x_ij w_kj and z_kj = −(1/n) Σ_i x_ij G_ik, column by column.
  std::vector<double> score(n * K, 0.0), G(n * K, 0.0);
  for (uint64_t i = 0; i < n; ++i) {
    double sum = 0;
    for (uint32_t k = 0; k < K; ++k)
      if (k != cls[i]) G[i * K + k] = ref.theta[i * K + k], sum += ref.theta[i * K + k];
    G[i * K + cls[i]] = -sum;
  }
  double kkt1 = 0, l1 = 0, sq = 0, soft_sq = 0;
  uint64_t nonzeros = 0, j = 0;
  BlockBuffer buffer;
  CscScratch scratch;
  for (const BlockRef& ref_block : store->plan_blocks(4 << 20)) {
    const ColumnBlock block = store->read_block(ref_block, buffer);
    const CscColumns cols = csc_columns(block, scratch);
    for (uint64_t c = 0; c < cols.column_count; ++c, ++j) {
      REQUIRE(cols.column_ids[c] == data.column_id(j));
      const uint32_t* rows = cols.row_ids + cols.col_ptr[c];
      const float* values = cols.values + cols.col_ptr[c];
      const uint32_t count = cols.col_ptr[c + 1] - cols.col_ptr[c];
      for (uint32_t k = 0; k < K; ++k) {
        double z = 0;
        for (uint32_t q = 0; q < count; ++q) z -= values[q] * G[rows[q] * K + k];
        z /= static_cast<double>(n);
        const double w = ref.w[k * m + j];
        kkt1 = std::max(kkt1, std::abs(alpha * w - soft_threshold(z, beta)));
        soft_sq += soft_threshold(z, beta) * soft_threshold(z, beta);
        l1 += std::abs(w), sq += w * w, nonzeros += w != 0;
        if (w != 0)
          for (uint32_t q = 0; q < count; ++q) score[rows[q] * K + k] += values[q] * w;
      }
    }
  }
  REQUIRE(j == m);
  REQUIRE(nonzeros == pt.nonzeros);
  // Full-problem objectives (m-P), (m-D) and m-KKT-2.
  double loss = 0, theta_sq = 0, theta_sum = 0, worst_R2 = 0;
  uint64_t theta_outside = 0;
  for (uint64_t i = 0; i < n; ++i) {
    for (uint32_t k = 0; k < K; ++k) {
      if (k == cls[i]) continue;
      const double t = 1 + score[i * K + k] - score[i * K + cls[i]];
      const double th = ref.theta[i * K + k];
      loss += smoothed_hinge(t, gamma);
      theta_sq += th * th, theta_sum += th;
      theta_outside += th < 0 || th > 1;
      worst_R2 = std::max(worst_R2, std::abs(th - std::clamp(t / gamma, 0.0, 1.0)));
    }
  }
  const double P = loss / static_cast<double>(n) + alpha / 2 * sq + beta * l1;
  const double D = soft_sq / (2 * alpha) + gamma / (2 * static_cast<double>(n)) * theta_sq -
                   theta_sum / static_cast<double>(n);
  CAPTURE(P, D, pt.gap, kkt1, worst_R2);
  REQUIRE(theta_outside == 0);
  REQUIRE(P == Approx(pt.objective).epsilon(1e-10));
  // Rounding of sums of n·K terms of size ~P allows ~1e-10 (measured: 1.5e-11 with gap 1e-9 reached).
  REQUIRE(P + D <= std::max(pt.gap, 0.0) + 1e-10);
  REQUIRE(P + D >= -1e-10);
  // m-KKT-1 (measured residual 4e-15; a wrong sign of KKT-1 would leave
  // residuals the size of α·w, here ~10) and m-KKT-2 (measured 0).
  REQUIRE(nonzeros > 0);
  REQUIRE(kkt1 <= 1e-9);
  REQUIRE(worst_R2 <= 1e-6);
}
