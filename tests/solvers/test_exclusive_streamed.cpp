// The exclusive-sparsity solvers on a store, out of core: the streamed
// products against the same products of the dense matrix, the working set
// against the plain full-gradient solve, a store several times the memory
// budget, and 1 vs 2 threads.
#include <catch2/catch.hpp>

#include <algorithm>

#include <chrono>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "core/memory_budget.h"
#include "features/block_stream.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "solvers/exclusive/design.h"
#include "solvers/exclusive/exclusive_groups.h"
#include "solvers/exclusive/working_set.h"
#include "tests/test_util.h"

using namespace fgm;
using namespace fgm::exclusive;

namespace {

// n × p sparse rows (`per_row` nonzeros, small integers and Gaussians), ±1
// labels from a planted model on every 25th feature; columns ≡ 7 (mod 11)
// stay empty, so compact indices differ from feature ids.
struct StoreFixture {
  test::TempDir dir{"fgm-exclusive"};
  MemoryBudget ingest_budget{256ull << 20};
  std::unique_ptr<ShardStore> store;
  size_t n, p;
  std::vector<double> dense;  // n × p
  std::vector<double> y;

  StoreFixture(size_t rows, size_t cols, size_t per_row, uint64_t seed, uint64_t block_bytes = 16 << 10)
      : n(rows), p(cols), dense(rows * cols, 0.0) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0, 1);
    std::uniform_int_distribution<size_t> column(0, cols - 1);
    std::uniform_int_distribution<int> small(1, 3);
    std::vector<double> planted(cols, 0.0);
    for (size_t j = 0; j < cols; j += 25) planted[j] = normal(rng) * 2;
    std::ostringstream text;
    text.precision(9);  // floats round-trip
    for (size_t i = 0; i < rows; ++i) {
      for (size_t t = 0; t < per_row; ++t) {
        size_t j = column(rng);
        if (j % 11 == 7) continue;
        dense[i * cols + j] = (t % 2) ? double(small(rng)) : double(float(normal(rng)));
      }
      double s = 0;
      for (size_t j = 0; j < cols; ++j) s += dense[i * cols + j] * planted[j];
      y.push_back(s + 0.3 * normal(rng) >= 0 ? 1.0 : -1.0);
      text << (y.back() > 0 ? "+1" : "-1");
      for (size_t j = 0; j < cols; ++j)
        if (dense[i * cols + j] != 0) text << ' ' << j + 1 << ':' << dense[i * cols + j];
      text << '\n';
    }
    IngestOptions o;
    o.tile_rows = 512;          // several tiles per block
    o.block_bytes = block_bytes;  // many blocks
    ingest_libsvm(dir.write("train.svm", text.str()), dir.file("store"), o, ingest_budget);
    store = ShardStore::open(dir.file("store"), ingest_budget);
    for (size_t i = 0; i < n; ++i) REQUIRE(double(store->labels()[i]) == y[i]);
  }
};

StoreFixture& fixture() {
  static StoreFixture f(2000, 4000, 100, 31);
  return f;
}

}  // namespace

TEST_CASE("streamed products equal the dense matrix's", "[exclusive][streamed]") {
  auto& f = fixture();
  MemoryBudget budget(64ull << 20);
  SchedulerOptions so;
  so.threads = 2;
  BlockStream stream(*f.store, so, budget);
  StreamedDesign X(stream, f.store->plan_blocks(64 << 10), budget);
  REQUIRE(X.rows() == f.n);
  std::vector<uint64_t> nonempty;
  for (size_t j = 0; j < f.p; ++j) {
    bool any = false;
    for (size_t i = 0; i < f.n && !any; ++i) any = f.dense[i * f.p + j] != 0;
    if (any) nonempty.push_back(j);
  }
  REQUIRE(X.column_ids() == nonempty);
  const size_t p = nonempty.size();
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(0, 1);
  std::vector<double> x(p), r(f.n), z(f.n), g(p), z2(f.n), g2(p), x2(p);
  for (size_t k = 0; k < p; ++k) x[k] = k % 3 ? 0.0 : normal(rng);
  for (auto& e : r) e = normal(rng);
  X.multiply(x.data(), z.data());
  X.multiply_transposed(r.data(), g.data());
  for (size_t i = 0; i < f.n; ++i) {
    long double s = 0;
    for (size_t k = 0; k < p; ++k) s += (long double)f.dense[i * f.p + nonempty[k]] * x[k];
    CHECK(z[i] == Approx(double(s)).margin(1e-9));
  }
  for (size_t k = 0; k < p; ++k) {
    long double s = 0;
    for (size_t i = 0; i < f.n; ++i) s += (long double)f.dense[i * f.p + nonempty[k]] * r[i];
    CHECK(g[k] == Approx(double(s)).margin(1e-9));
  }
  // The fused pass: g = Xᵀr, x2 = 2g column range by range, z2 = X·x2.
  X.transposed_update_multiply(
      r.data(), g2.data(), [&](uint64_t a, uint64_t b) { for (uint64_t k = a; k < b; ++k) x2[k] = 2 * g2[k]; },
      x2.data(), z2.data());
  CHECK(g2 == g);
  std::vector<double> z3(f.n);
  X.multiply(x2.data(), z3.data());
  CHECK(z2 == z3);
  // gather: the chosen columns in memory, same products.
  std::vector<uint64_t> chosen{0, 5, 17, p / 2, p - 1};
  InMemoryDesign XW = X.gather(chosen);
  std::vector<double> xw(chosen.size()), zw(f.n), xfull(p, 0.0), zfull(f.n);
  for (size_t q = 0; q < chosen.size(); ++q) xfull[chosen[q]] = xw[q] = double(q) + 0.5;
  XW.multiply(xw.data(), zw.data());
  X.multiply(xfull.data(), zfull.data());
  for (size_t i = 0; i < f.n; ++i) CHECK(zw[i] == Approx(zfull[i]).margin(1e-12));
}

// StreamedDesign sums a block's part of z = Xx densely when the block has more
// than ⅔·n nonzeros, else from a list of products: both against the dense
// matrix, resident or streamed, and identical for 1 and 2 threads.
TEST_CASE("streamed Xw from product lists and from dense partials, any thread count", "[exclusive][streamed]") {
  static StoreFixture narrow(3000, 300, 2, 41, 4 << 10);  // blocks of few nonzeros: product lists
  for (StoreFixture* f : {&narrow, &fixture()}) {
    const bool lists = f == &narrow;
    std::vector<double> z_first, g_first;
    for (int threads : {1, 2})
      for (bool resident : {false, true}) {
        MemoryBudget budget(64ull << 20);
        SchedulerOptions so;
        so.threads = threads;
        so.keep_resident = resident;
        Reservation kept;
        if (resident) kept = budget.reserve(resident_store_bytes(f->store->info()), "resident");
        BlockStream stream(*f->store, so, budget);
        const auto blocks = f->store->plan_blocks(lists ? 1 : 64 << 10);
        for (const auto& b : blocks) CHECK((12 * b.nnz < 8 * f->n) == lists);
        StreamedDesign X(stream, blocks, budget);
        const uint64_t p = X.columns();
        std::vector<double> x(p), z(f->n), r(f->n), g(p);
        for (uint64_t k = 0; k < p; ++k) x[k] = k % 4 == 1 ? 0.0 : 0.25 * double(k % 7) - 0.5;
        for (uint64_t i = 0; i < f->n; ++i) r[i] = double(i % 5) - 2.0;
        for (int pass = 0; pass < 2; ++pass) {  // the second pass reuses the product buffers
          std::vector<double> x_out(p);
          X.transposed_update_multiply(
              r.data(), g.data(), [&](uint64_t a, uint64_t b) { for (uint64_t k = a; k < b; ++k) x_out[k] = x[k]; },
              x_out.data(), z.data());
          for (size_t i = 0; i < f->n; ++i) {
            long double s = 0;
            for (uint64_t k = 0; k < p; ++k) s += (long double)f->dense[i * f->p + X.column_id(k)] * x[k];
            CHECK(z[i] == Approx(double(s)).margin(1e-9));
          }
        }
        CHECK(budget.peak() <= budget.limit());
        if (z_first.empty()) z_first = z, g_first = g;
        CHECK(z == z_first);
        CHECK(g == g_first);
      }
  }
}

namespace {

// in_memory_reference: the plain full-gradient solve over all columns
// gathered into memory (the same problem without streaming overhead).
ExclusiveFit fit(StoreFixture& f, const FistaOptions& o, bool working_set, int threads, uint64_t budget_bytes,
                 uint64_t* store_bytes = nullptr, bool in_memory_reference = false) {
  MemoryBudget budget(budget_bytes);
  SchedulerOptions so;
  so.threads = threads;
  BlockStream stream(*f.store, so, budget);
  // Small blocks under the small budget; the reference run streams bigger ones.
  StreamedDesign X(stream, f.store->plan_blocks(working_set ? 16 << 10 : 1 << 20), budget);
  ExclusiveGroups G = random_groups(X.columns(), 12, 99, budget);
  WorkingSetOptions ws;
  ws.enabled = working_set;
  ws.growth = 20;
  ws.kkt_tolerance = 1e-7;
  if (store_bytes) *store_bytes = f.store->info().shard_bytes;
  ExclusiveFit out;
  if (in_memory_reference) {
    std::vector<uint64_t> all(X.columns());
    for (uint64_t k = 0; k < all.size(); ++k) all[k] = k;
    InMemoryDesign whole = X.gather(all);
    out.last_solve = solve_exclusive(whole, f.y, G, o, budget);
    out.w = out.last_solve.w;
    out.working_set = whole.columns();
    out.converged = out.last_solve.converged;
    out.fista_iterations = out.last_solve.iterations;
  } else {
    out = fit_exclusive(X, f.y, G, o, ws, budget);
  }
  CHECK(budget.peak() <= budget.limit());
  return out;
}


void check_working_set(Algorithm algorithm, ExclusiveLoss loss, double lambda, double tolerance, double ridge = 1.0,
                       double agreement = 1e-4) {
  auto& f = fixture();
  const uint64_t small_budget = 500 << 10;
  FistaOptions o;
  o.algorithm = algorithm;
  o.loss = loss;
  o.lambda = lambda;
  o.ridge = ridge;
  o.tolerance = tolerance;
  o.max_iterations = 100000;
  uint64_t store_bytes = 0;
  ExclusiveFit ws1 = fit(f, o, true, 1, small_budget, &store_bytes);
  CHECK(store_bytes >= 3 * small_budget);  // the store is several times the budget
  ExclusiveFit ws2 = fit(f, o, true, 2, small_budget);
  ExclusiveFit full = fit(f, o, false, 2, 32ull << 20, nullptr, true);
  CHECK(ws1.converged);
  CHECK(full.converged);
  CHECK(ws1.w == ws2.w);  // identical for 1 and 2 threads
  CHECK(ws1.working_set < full.working_set);
  CHECK(ws1.rounds >= 1);
  double largest = 0;
  size_t nonzero = 0;
  for (double v : full.w) largest = std::max(largest, std::fabs(v));
  for (double v : full.w) nonzero += std::fabs(v) > agreement * largest;
  CHECK(nonzero > 0);
  CHECK(nonzero < full.w.size() / 2);
  for (size_t k = 0; k < full.w.size(); ++k) CHECK(ws1.w[k] == Approx(full.w[k]).margin(agreement * largest));
  CHECK(ws1.last_solve.objective == Approx(full.last_solve.objective).epsilon(agreement * 1e-3));
}

}  // namespace

TEST_CASE("the working set reaches the full-gradient solution: Fista-pcp, logistic",
          "[exclusive][streamed][working_set]") {
  check_working_set(Algorithm::kPcp, ExclusiveLoss::kLogistic, 2.0, 1e-9);
}

TEST_CASE("the working set reaches the full-gradient solution: Fista-locp, squared",
          "[exclusive][streamed][working_set]") {
  check_working_set(Algorithm::kLocp, ExclusiveLoss::kSquared, 20.0, 1e-9);
}

// Fista-licp works on the dual (11), whose full problem (a v^g for every
// member of every group) converges far slower than the restricted one: the
// full-gradient reference would take minutes. The working-set solution is
// checked on the full problem instead: no coordinate move lowers (10),
// evaluated from the dense matrix (margins updated by one column per move).
TEST_CASE("the working-set E-SVM solution (Fista-licp) is optimal on every coordinate of the full problem",
          "[exclusive][streamed][working_set]") {
  auto& f = fixture();
  FistaOptions o;
  o.algorithm = Algorithm::kLicp;
  o.loss = ExclusiveLoss::kHinge;
  o.lambda = 20.0;
  o.ridge = 10.0;
  o.tolerance = 1e-7;
  o.max_iterations = 100000;
  uint64_t store_bytes = 0;
  const uint64_t small_budget = 500 << 10;
  ExclusiveFit ws1 = fit(f, o, true, 1, small_budget, &store_bytes);
  ExclusiveFit ws2 = fit(f, o, true, 2, small_budget);
  CHECK(store_bytes >= 3 * small_budget);
  CHECK(ws1.converged);
  CHECK(ws1.w == ws2.w);
  // W holds each column once (a zero weight in W that still violated after a
  // loose restricted solve was once added again, and the fit's weights then
  // disagreed with its objective).
  const auto& W = ws1.working_set_columns;
  CHECK(std::adjacent_find(W.begin(), W.end()) == W.end());
  CHECK(std::is_sorted(W.begin(), W.end()));
  // Columns of the compact index: the fixture's non-empty columns.
  std::vector<uint64_t> ids;
  for (size_t j = 0; j < f.p; ++j)
    for (size_t i = 0; i < f.n; ++i)
      if (f.dense[i * f.p + j] != 0) {
        ids.push_back(j);
        break;
      }
  REQUIRE(ids.size() == ws1.w.size());
  MemoryBudget budget(64ull << 20);
  SchedulerOptions so;
  BlockStream stream(*f.store, so, budget);
  StreamedDesign X(stream, f.store->plan_blocks(1 << 20), budget);
  ExclusiveGroups G = random_groups(X.columns(), 12, 99, budget);
  std::vector<long double> z(f.n, 0.0L);
  for (size_t k = 0; k < ids.size(); ++k)
    if (ws1.w[k] != 0)
      for (size_t i = 0; i < f.n; ++i) z[i] += (long double)f.dense[i * f.p + ids[k]] * ws1.w[k];
  std::vector<double> group_l1;
  exclusive_norm_squared(G, ws1.w.data(), &group_l1);
  long double hinge = 0, ww = 0, e = 0;
  for (size_t i = 0; i < f.n; ++i) hinge += std::max(0.0L, 1.0L - f.y[i] * z[i]);
  for (double v : ws1.w) ww += (long double)v * v;
  for (double s : group_l1) e += (long double)s * s;
  const long double base = hinge + 0.5L * o.ridge * ww + 0.5L * o.lambda * e;
  CHECK(double(base) == Approx(ws1.last_solve.objective).epsilon(1e-9));
  size_t worse = 0;
  for (size_t k = 0; k < ids.size(); ++k)
    for (double h : {1e-3, -1e-3}) {
      long double moved_hinge = 0;
      for (size_t i = 0; i < f.n; ++i)
        moved_hinge += std::max(0.0L, 1.0L - f.y[i] * (z[i] + (long double)f.dense[i * f.p + ids[k]] * h));
      const long double wk = ws1.w[k], nk = wk + h;
      long double moved_e = e;
      for (uint64_t q = G.membership_ptr[k]; q < G.membership_ptr[k + 1]; ++q) {
        const long double s = group_l1[G.memberships[q]], t = s - std::fabs(wk) + std::fabs(nk);
        moved_e += t * t - s * s;
      }
      const long double moved = moved_hinge + 0.5L * o.ridge * (ww - wk * wk + nk * nk) + 0.5L * o.lambda * moved_e;
      worse += moved < base - 1e-6L * base;
    }
  CHECK(worse == 0);
}

// Along a λ path each fit may start from the previous λ's (ExclusiveWarmStart):
// every point equals the cold-started fit within the tolerance, with and
// without the working set, and the path takes fewer FISTA iterations.
TEST_CASE("a warm-started lambda path reaches the cold-started optimum at every lambda",
          "[exclusive][streamed][warm_start]") {
  auto& f = fixture();
  for (bool working_set : {true, false}) {
    MemoryBudget budget(64ull << 20);
    SchedulerOptions so;
    so.threads = 2;
    BlockStream stream(*f.store, so, budget);
    StreamedDesign X(stream, f.store->plan_blocks(64 << 10), budget);
    ExclusiveGroups G = random_groups(X.columns(), 12, 99, budget);
    FistaOptions o;
    o.algorithm = working_set ? Algorithm::kPcp : Algorithm::kLocp;
    o.loss = working_set ? ExclusiveLoss::kLogistic : ExclusiveLoss::kSquared;
    o.tolerance = 1e-9;
    o.max_iterations = 100000;
    WorkingSetOptions ws;
    ws.enabled = working_set;
    ws.growth = 20;
    ws.kkt_tolerance = 1e-7;
    const std::vector<double> path = working_set ? std::vector<double>{8.0, 4.0, 2.0, 1.0}
                                                 : std::vector<double>{400.0, 200.0, 100.0};
    ExclusiveWarmStart warm;
    int cold_iterations = 0, warm_iterations = 0;
    for (size_t k = 0; k < path.size(); ++k) {
      o.lambda = path[k];
      const ExclusiveFit cold = fit_exclusive(X, f.y, G, o, ws, budget);
      const ExclusiveFit hot = fit_exclusive(X, f.y, G, o, ws, budget, k > 0 ? &warm : nullptr);
      warm = hot.warm_start();
      CHECK(cold.converged);
      CHECK(hot.converged);
      cold_iterations += cold.fista_iterations;
      warm_iterations += hot.fista_iterations;
      double largest = 0;
      size_t nonzero = 0;
      for (double v : cold.w) largest = std::max(largest, std::fabs(v)), nonzero += v != 0;
      CHECK(nonzero > 0);
      for (size_t j = 0; j < cold.w.size(); ++j) CHECK(hot.w[j] == Approx(cold.w[j]).margin(1e-4 * largest));
      CHECK(hot.last_solve.objective == Approx(cold.last_solve.objective).epsilon(1e-7));
    }
    CHECK(warm_iterations < cold_iterations);
    INFO("working_set=" << working_set << " cold " << cold_iterations << " warm " << warm_iterations);
    CHECK(budget.peak() <= budget.limit());
  }
}
