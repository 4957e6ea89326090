// SIFS (solvers/sifs/) against independent oracles: the closed form at
// α_max(β) against the KKT conditions and against the solver; every screened
// feature and sample against a long unscreened solve; screened solutions
// against unscreened ones (objective within the gaps, same support); the KKT
// conditions at the solutions, computed densely (tests/solvers/sifs_oracle.h).
// Binary and multi-class, on real, binary, integer, tied and degenerate data.
#include <catch2/catch.hpp>

#include <cmath>

#include "features/block_stream.h"
#include "io/ingest.h"
#include "solvers/sifs/sifs_path.h"
#include "tests/solvers/sifs_oracle.h"
#include "tests/test_util.h"

using namespace fgm;
using test::DenseSifs;
using test::SifsKind;

namespace {

// A store, its stream and the SIFS data for one dense problem.
struct Rig {
  const DenseSifs& dense;
  SifsLayout layout;
  MemoryBudget budget{256ull << 20};
  std::unique_ptr<test::TiledMemoryStore> store;
  std::unique_ptr<BlockStream> stream;
  std::unique_ptr<SifsData> data;
  Rig(const DenseSifs& d, int threads = 1, uint32_t tile_rows = 7, bool held = false)
      : dense(d), layout(d.layout()), store(d.store(tile_rows)) {
    SchedulerOptions so;
    so.threads = threads;
    stream = std::make_unique<BlockStream>(*store, so, budget);
    data = std::make_unique<SifsData>(*stream, store->plan_blocks(300), layout, budget);
    if (held) REQUIRE(data->hold_columns());
  }
};

SifsSettings settings(SifsScreening mode, double tol) {
  SifsSettings s;
  s.max_epochs = 200000;
  s.screening = mode;
  s.tol = tol;
  return s;
}

// KKT-1 residual: max_e |α w_e − S_β(z(θ(w)))_e|.
double kkt1_residual(const DenseSifs& d, const std::vector<double>& w, double alpha, double beta, double gamma) {
  const auto z = d.z(d.theta_of(w, gamma));
  double worst = 0;
  for (size_t e = 0; e < w.size(); ++e) worst = std::max(worst, std::abs(alpha * w[e] - soft_threshold(z[e], beta)));
  return worst;
}

const SifsKind kKinds[] = {SifsKind::kReal, SifsKind::kBinary, SifsKind::kInteger, SifsKind::kTied,
                           SifsKind::kDegenerate};

}  // namespace

TEST_CASE("SIFS closed form at alpha_max(beta): zero gap, KKT tight, and the solver finds it", "[solvers][sifs]") {
  const double gamma = 0.05;
  for (uint32_t classes : {2u, 4u}) {
    for (SifsKind kind : {SifsKind::kReal, SifsKind::kTied, SifsKind::kDegenerate}) {
      CAPTURE(classes, test::sifs_kind_name(kind));
      DenseSifs d(50, 14, kind, classes, 3 + classes);
      Rig rig(d);
      SifsSolver solver(*rig.data, settings(SifsScreening::kNone, 1e-13));
      // β_max = ‖z(1)‖∞ (Lemma 4 / 15), computed densely.
      std::vector<double> ones(d.coordinates(), 0.0);
      for (uint64_t q = 0; q < d.coordinates(); ++q) ones[q] = d.valid(q) ? 1 : 0;
      double beta_max = 0;
      for (double v : d.z(ones)) beta_max = std::max(beta_max, std::abs(v));
      REQUIRE(solver.beta_max() == Approx(beta_max).epsilon(1e-12));
      REQUIRE(solver.alpha_max(beta_max) == 0.0);
      for (double ratio : {0.8, 0.3}) {
        const double beta = ratio * beta_max;
        SifsReference ref = solver.closed_form(beta);
        REQUIRE(ref.alpha > 0);
        const auto w = d.dense_w(ref.w);
        REQUIRE(std::abs(d.primal(w, ref.alpha, beta, gamma) + d.dual(ones, ref.alpha, beta, gamma)) < 1e-12);
        REQUIRE(solver.closed_form_objective(ref) == Approx(d.primal(w, ref.alpha, beta, gamma)).epsilon(1e-12));
        // Every coordinate is in L, and the tightest one sits at γ (α_max is the smallest such α).
        double lowest = INFINITY;
        for (uint64_t q = 0; q < d.coordinates(); ++q)
          if (d.valid(q)) lowest = std::min(lowest, 1 + d.a_dot(q, w));
        REQUIRE(lowest == Approx(gamma).margin(1e-12));
        // The solver, started far away (θ = 0.3), reaches the same point.
        SifsReference start = ref;
        for (uint64_t q = 0; q < d.coordinates(); ++q) start.theta[q] = d.valid(q) ? 0.3 : 0;
        start.alpha = 2 * ref.alpha;
        SifsReference solved;
        SifsPoint pt = solver.solve(start, ref.alpha, solved);
        CAPTURE(pt.gap, pt.epochs);
        REQUIRE(pt.converged);
        const double bound = std::sqrt(2 * std::max(pt.gap, 0.0) / ref.alpha) + 1e-12;
        for (size_t e = 0; e < ref.w.size(); ++e) REQUIRE(std::abs(solved.w[e] - ref.w[e]) <= bound);
      }
    }
  }
}

TEST_CASE("SIFS rules are safe and the screened solutions equal the unscreened ones", "[solvers][sifs]") {
  const double gamma = 0.05;
  const double betas[] = {0.6, 0.2};
  const std::vector<double> alphas = log_spaced(1.0, 0.2, 7);
  for (uint32_t classes : {2u, 3u}) {
    for (SifsKind kind : kKinds) {
      DenseSifs d(classes == 2 ? 160 : 90, 16, kind, classes, 11 + static_cast<int>(kind));
      Rig rig(d);
      // The long unscreened solves, once per grid point.
      SifsSolver exact(*rig.data, settings(SifsScreening::kNone, 1e-10));
      std::vector<SifsReference> solutions;
      std::vector<double> gaps;
      for (double br : betas) {
        SifsReference ref = exact.closed_form(br * exact.beta_max());
        for (double ar : alphas) {
          if (ar == 1.0) continue;
          SifsReference next;
          const SifsPoint pe = exact.solve(ref, ar * ref.alpha, next);
          CAPTURE(classes, test::sifs_kind_name(kind), br, ar, pe.gap, pe.epochs);
          REQUIRE(pe.converged);
          // Independent certificate on the full problem.
          REQUIRE(d.primal(d.dense_w(next.w), next.alpha, next.beta, gamma) +
                      d.dual(next.theta, next.alpha, next.beta, gamma) <= pe.gap + 1e-12);
          solutions.push_back(next);
          gaps.push_back(pe.gap);
          if (ar != alphas.back()) ref = std::move(next);
        }
      }
      // Screening over the streamed store and over the columns held in memory.
      for (const auto& [held, mode] : {std::pair{false, SifsScreening::kSifs}, std::pair{false, SifsScreening::kIfs},
                                       std::pair{false, SifsScreening::kIss}, std::pair{true, SifsScreening::kSifs}}) {
        Rig screening_rig(d, 1, 7, held);
        SifsSolver screened(*screening_rig.data, settings(mode, 1e-9));
        uint64_t screened_total = 0;
        size_t point = 0;
        for (double br : betas) {
          const double beta = br * screened.beta_max();
          SifsReference ref = screened.closed_form(beta);
          for (double ar : alphas) {
            if (ar == 1.0) continue;
            CAPTURE(classes, test::sifs_kind_name(kind), screening_name(mode), held, br, ar);
            const SifsReference& star = solutions[point];
            const double alpha = star.alpha;
            const double B = std::sqrt(2 * std::max(gaps[point], 0.0) / alpha) + 1e-10;  // ‖w̃ − w*‖ bound
            ++point;
            const auto w_star = d.dense_w(star.w);

            // Safety: the screened sets against the exact solution.
            const ScreenedSets sets = screen(*screening_rig.data, ref, alpha, gamma, mode);
            for (size_t e = 0; e < sets.weight_free.size(); ++e)
              if (!sets.weight_free[e]) REQUIRE(std::abs(star.w[e]) <= B);
            for (uint64_t q = 0; q < d.coordinates(); ++q) {
              const double t = 1 + d.a_dot(q, w_star);
              if (sets.coordinate[q] == CoordinateStatus::kR) REQUIRE(t <= d.a_norm(q) * B);
              if (sets.coordinate[q] == CoordinateStatus::kL) REQUIRE(t >= gamma - d.a_norm(q) * B);
            }
            screened_total += sets.weights_screened + sets.in_R + sets.in_L;

            // The screened solve equals the unscreened one.
            SifsReference next;
            const SifsPoint ps = screened.solve(ref, alpha, next);
            REQUIRE(ps.converged);
            REQUIRE(ps.weights_screened == sets.weights_screened);
            const auto w = d.dense_w(next.w);
            REQUIRE(std::abs(d.primal(w, alpha, beta, gamma) - d.primal(w_star, alpha, beta, gamma)) <=
                    ps.gap + gaps[point - 1] + 1e-12);
            REQUIRE(std::abs(ps.objective - d.primal(w, alpha, beta, gamma)) < 1e-12);
            // Same support: an entry may differ in being zero only where both
            // solutions are within their distance bounds of w*_e = 0.
            const double Bs = std::sqrt(2 * std::max(ps.gap, 0.0) / alpha) + 1e-10;
            for (size_t e = 0; e < next.w.size(); ++e)
              if ((next.w[e] != 0) != (star.w[e] != 0)) REQUIRE(std::abs(next.w[e]) + std::abs(star.w[e]) <= B + Bs);
            // The reduced solution certifies the full problem (KKT through the gap) ...
            REQUIRE(d.primal(w, alpha, beta, gamma) + d.dual(next.theta, alpha, beta, gamma) <= ps.gap + 1e-12);
            // ... and KKT-1 holds up to what δ = √(2G/α) allows: θ(w) moves by ≤ ‖a_d‖δ/γ, z by ≤ R²δ/γ.
            double R2 = 0;
            for (uint64_t q = 0; q < d.coordinates(); ++q) R2 = std::max(R2, d.a_norm(q) * d.a_norm(q));
            REQUIRE(kkt1_residual(d, w, alpha, beta, gamma) <= (alpha + R2 / gamma) * Bs * 1.01 + 1e-12);
            ref = std::move(next);
          }
        }
        if (mode == SifsScreening::kSifs) REQUIRE(screened_total > 0);  // the rules did screen something
      }
    }
  }
}

TEST_CASE("SIFS alternation screens at least what IFS and ISS screen alone", "[solvers][sifs]") {
  DenseSifs d(80, 20, SifsKind::kReal, 2, 5);
  Rig rig(d);
  SifsSolver solver(*rig.data, settings(SifsScreening::kNone, 1e-12));
  const double gamma = 0.05;
  for (double br : {0.5, 0.2}) {
    SifsReference ref = solver.closed_form(br * solver.beta_max());
    for (double ar : {0.8, 0.4}) {
      const double alpha = ar * ref.alpha;
      const auto both = screen(*rig.data, ref, alpha, gamma, SifsScreening::kSifs);
      const auto ifs = screen(*rig.data, ref, alpha, gamma, SifsScreening::kIfs);
      const auto iss = screen(*rig.data, ref, alpha, gamma, SifsScreening::kIss);
      for (size_t e = 0; e < both.weight_free.size(); ++e)
        if (!ifs.weight_free[e]) REQUIRE(!both.weight_free[e]);
      for (size_t q = 0; q < both.coordinate.size(); ++q)
        if (iss.coordinate[q] != CoordinateStatus::kFree) REQUIRE(both.coordinate[q] == iss.coordinate[q]);
      REQUIRE(both.weights_screened + both.in_R + both.in_L >= ifs.weights_screened + iss.in_R + iss.in_L);
    }
  }
}

TEST_CASE("SIFS path: screened and unscreened grids agree point by point", "[solvers][sifs]") {
  for (uint32_t classes : {2u, 4u}) {
    CAPTURE(classes);
    DenseSifs d(60, 18, SifsKind::kInteger, classes, 9);
    std::vector<SifsPoint> runs[2];
    std::vector<std::vector<double>> ws[2];
    for (int r = 0; r < 2; ++r) {
      Rig rig(d);
      SifsSettings s = settings(r == 0 ? SifsScreening::kNone : SifsScreening::kSifs, 1e-11);
      s.beta_points = 3;
      s.alpha_points = 6;
      SifsSolver solver(*rig.data, s);
      solver.run_path([&](const SifsPoint& p, const SifsReference& sol) {
        runs[r].push_back(p);
        ws[r].push_back(sol.w);
      });
    }
    REQUIRE(runs[0].size() == 18);
    REQUIRE(runs[1].size() == 18);
    for (size_t k = 0; k < runs[0].size(); ++k) {
      CAPTURE(k);
      REQUIRE(runs[0][k].beta == runs[1][k].beta);
      REQUIRE(runs[0][k].alpha == runs[1][k].alpha);
      REQUIRE(runs[0][k].closed_form == runs[1][k].closed_form);
      REQUIRE(runs[0][k].nonzeros == runs[1][k].nonzeros);
      REQUIRE(std::abs(runs[0][k].objective - runs[1][k].objective) <= runs[0][k].gap + runs[1][k].gap + 1e-12);
      for (size_t e = 0; e < ws[0][k].size(); ++e) REQUIRE((ws[0][k][e] != 0) == (ws[1][k][e] != 0));
    }
    // The first β is β_max: w = 0 everywhere (closed form).
    REQUIRE(runs[1][0].closed_form);
    REQUIRE(runs[1][0].nonzeros == 0);
    REQUIRE(runs[1][0].alpha == 0);
  }
}
