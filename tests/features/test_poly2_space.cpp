// Poly-2 space (Algorithm 5) against an explicit, in-memory expansion.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <sstream>

#include "core/simd/simd.h"
#include "features/block_stream.h"
#include "features/model_scorer.h"
#include "features/poly2_space.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

struct Data {
  test::TempDir dir{"fgm-poly2"};
  test::InMemoryData rows;
  MemoryBudget budget;
  std::unique_ptr<ShardStore> store;
  std::vector<double> a;
  uint64_t m = 0;

  Data(uint64_t n, uint64_t features, double density, uint64_t seed, uint64_t budget_bytes = 256ull << 20)
      : budget(budget_bytes), m(features) {
    std::string path = dir.write("train.svm", test::random_libsvm(n, features, density, seed));
    rows = test::parse_libsvm_simple(path);
    IngestOptions o;
    o.reader.declared_features = features;
    o.shard_target_bytes = 32 << 10;
    MemoryBudget ingest_budget(256ull << 20);
    ingest_libsvm(path, dir.file("store"), o, ingest_budget);
    store = ShardStore::open(dir.file("store"), budget);
    std::mt19937_64 rng(seed + 7);
    std::uniform_real_distribution<double> unif(0.0, 2.0);
    for (uint64_t i = 0; i < n; ++i) a.push_back(unif(rng) * store->labels()[i]);
  }

  // Oracle: every generated feature's score from the explicit expansion.
  std::vector<ScoredCandidate> explicit_scores(double gamma, double r) const {
    std::vector<double> c(m, 0), q(m, 0), p(m * m, 0);
    for (size_t i = 0; i < rows.rows.size(); ++i) {
      std::vector<std::pair<uint64_t, double>> e;
      for (const auto& [j, v] : rows.rows[i]) e.emplace_back(j, static_cast<double>(static_cast<float>(v)));
      for (size_t s = 0; s < e.size(); ++s) {
        c[e[s].first] += a[i] * e[s].second;
        q[e[s].first] += a[i] * e[s].second * e[s].second;
        for (size_t t = s + 1; t < e.size(); ++t) p[e[s].first * m + e[t].first] += a[i] * e[s].second * e[t].second;
      }
    }
    std::vector<ScoredCandidate> out;
    for (uint64_t j = 0; j < m; ++j) {
      double lin = std::sqrt(2 * gamma * r) * c[j], sq = gamma * q[j];
      if (lin != 0) out.push_back({lin * lin, poly2_id(kPoly2Linear, j)});
      if (sq != 0) out.push_back({sq * sq, poly2_id(kPoly2Square, j)});
      for (uint64_t k = j + 1; k < m; ++k) {
        double x = std::sqrt(2.0) * gamma * p[j * m + k];
        if (x != 0) out.push_back({x * x, poly2_id(kPoly2Cross, j, k)});
      }
    }
    std::sort(out.begin(), out.end(), ranks_before);
    return out;
  }

  SpaceScores score(FeatureSpace& space, uint64_t B, int threads, uint64_t block_bytes) {
    SchedulerOptions so;
    so.threads = threads;
    auto blocks = store->plan_blocks(block_bytes);
    fgm::BlockStream streamer(*store, so, budget);
    return run_worst_case_analysis(space, streamer, blocks, a.data(), B, budget);
  }
};

void require_same_top(const SpaceScores& got, const std::vector<ScoredCandidate>& oracle, size_t B) {
  REQUIRE(got.top.size() == std::min(B, oracle.size()));
  for (size_t k = 0; k < got.top.size(); ++k) {
    CAPTURE(k, got.top[k].id, oracle[k].id);
    REQUIRE(got.top[k].id == oracle[k].id);
    REQUIRE(got.top[k].score == Approx(oracle[k].score).epsilon(1e-9));
  }
}

}  // namespace

TEST_CASE("poly2 top-B equals the explicit expansion (sparse, pruned)", "[features][poly2]") {
  Data d(600, 60, 0.08, 31);
  for (double gamma : {1.0, 0.5}) {
    auto oracle = d.explicit_scores(gamma, 1.0);
    for (uint64_t B : {uint64_t{1}, uint64_t{10}, uint64_t{40}}) {
      for (int threads : {1, 2}) {
        for (uint64_t block : {uint64_t{2048}, uint64_t{1 << 20}}) {
          FeatureSpaceSettings s;
          s.kind = "poly2";
          s.gamma = gamma;
          s.pair_block_features = 4;  // tiny seed: the pruned enumeration does the work
          Poly2Space space(*d.store, s, d.budget);
          SpaceScores r = d.score(space, B, threads, block);
          require_same_top(r, oracle, B);
          REQUIRE(space.last_stats().active_features <= d.m);
          REQUIRE_FALSE(space.last_stats().dense_path);
        }
      }
    }
  }
}

TEST_CASE("poly2 pruning skips pairs that cannot reach the top B", "[features][poly2]") {
  Data d(800, 150, 0.04, 5);
  auto oracle = d.explicit_scores(1.0, 1.0);
  FeatureSpaceSettings s;
  s.kind = "poly2";
  s.pair_block_features = 8;
  Poly2Space space(*d.store, s, d.budget);
  SpaceScores r = d.score(space, 5, 2, 4096);
  require_same_top(r, oracle, 5);
  // Fewer pairs were accumulated than the space holds.
  CAPTURE(space.last_stats().candidate_pairs, space.last_stats().active_features, r.candidates_scored);
  REQUIRE(space.last_stats().threshold > 0);
  REQUIRE(space.last_stats().candidate_pairs < 150 * 149 / 2);
}

TEST_CASE("poly2 dense active block goes through GEMM and matches", "[features][poly2]") {
  Data d(500, 18, 1.0, 12);
  auto oracle = d.explicit_scores(1.0, 2.0);
  for (int threads : {1, 2}) {
    FeatureSpaceSettings s;
    s.kind = "poly2";
    s.coef0 = 2.0;
    s.pair_block_features = 2;
    Poly2Space space(*d.store, s, d.budget);
    SpaceScores r = d.score(space, 12, threads, 4096);
    REQUIRE(space.last_stats().dense_path);
    require_same_top(r, oracle, 12);
  }
}

TEST_CASE("poly2 with a small budget splits the pair stage into partitions", "[features][poly2]") {
  Data d(1500, 80, 0.15, 77, 3ull << 20);
  auto oracle = d.explicit_scores(1.0, 1.0);
  FeatureSpaceSettings s;
  s.kind = "poly2";
  s.pair_block_features = 2;
  Poly2Space space(*d.store, s, d.budget);
  SpaceScores r = d.score(space, 400, 2, 8192);  // a large B keeps the threshold low
  require_same_top(r, oracle, 400);
  CAPTURE(space.last_stats().partitions, space.last_stats().candidate_pairs);
  REQUIRE(space.last_stats().partitions >= 2);
  REQUIRE(d.budget.used() < d.budget.limit());
}

TEST_CASE("poly2 excludes selected candidates and materialises exact columns", "[features][poly2]") {
  Data d(400, 30, 0.2, 3);
  auto oracle = d.explicit_scores(1.0, 1.0);
  FeatureSpaceSettings s;
  s.kind = "poly2";
  Poly2Space space(*d.store, s, d.budget);
  for (size_t k = 0; k < 3; ++k) space.mark_selected(oracle[k].id);
  SpaceScores r = d.score(space, 5, 1, 4096);
  std::vector<ScoredCandidate> rest(oracle.begin() + 3, oracle.end());
  require_same_top(r, rest, 5);

  SelectedFeatureCache cache(d.budget, d.rows.rows.size());
  cache.begin_batch();
  for (const auto& c : r.top) space.materialize(*d.store, c.id, cache);
  for (size_t k = 0; k < r.top.size(); ++k) {
    uint64_t id = r.top[k].id, j = poly2_first(id), kk = poly2_second(id);
    std::map<uint32_t, double> got;
    cache.column(k).for_each([&](uint32_t row, float value) { got[row] = value; });
    for (size_t i = 0; i < d.rows.rows.size(); ++i) {
      auto xj = d.rows.rows[i].count(j) ? static_cast<float>(d.rows.rows[i].at(j)) : 0.0f;
      auto xk = d.rows.rows[i].count(kk) ? static_cast<float>(d.rows.rows[i].at(kk)) : 0.0f;
      double want = poly2_kind(id) == kPoly2Linear ? std::sqrt(2.0) * xj
                    : poly2_kind(id) == kPoly2Square ? double(xj) * xj
                                                     : std::sqrt(2.0) * xj * xk;
      double have = got.count(static_cast<uint32_t>(i)) ? got[static_cast<uint32_t>(i)] : 0.0;
      REQUIRE(have == Approx(want).margin(1e-6).epsilon(1e-6));
    }
  }
}

namespace {

// Integer data (binary or small counts) with integer a = α∘y: every sum the
// space forms is exact in double, so exact ties stay ties and the oracle below
// ranks with exact integer scores (γ = 1, r = ½: linear c², square q², cross 2p²).
struct IntegerData {
  test::TempDir dir{"fgm-poly2-int"};
  std::vector<std::vector<int>> X;  // n × m
  std::vector<int> y, a;
  MemoryBudget store_budget{64ull << 20};
  std::unique_ptr<ShardStore> store;

  IntegerData(std::vector<std::vector<int>> x, std::vector<int> labels, std::vector<int> weights)
      : X(std::move(x)), y(std::move(labels)), a(std::move(weights)) {
    std::ostringstream text;
    for (size_t i = 0; i < X.size(); ++i) {
      text << (y[i] > 0 ? "+1" : "-1");
      for (size_t j = 0; j < X[i].size(); ++j)
        if (X[i][j] != 0) text << ' ' << j + 1 << ':' << X[i][j];
      text << '\n';
    }
    IngestOptions o;
    o.reader.declared_features = X[0].size();
    o.shard_target_bytes = 16 << 10;
    MemoryBudget ingest_budget(256ull << 20);
    ingest_libsvm(dir.write("train.svm", text.str()), dir.file("store"), o, ingest_budget);
    store = ShardStore::open(dir.file("store"), store_budget);
  }

  std::vector<ScoredCandidate> oracle(size_t B) const {
    const size_t n = X.size(), m = X[0].size();
    std::vector<ScoredCandidate> all;
    for (size_t j = 0; j < m; ++j) {
      int64_t c = 0, q = 0;
      for (size_t i = 0; i < n; ++i) c += int64_t{a[i]} * X[i][j], q += int64_t{a[i]} * X[i][j] * X[i][j];
      if (c != 0) all.push_back({static_cast<double>(c * c), poly2_id(kPoly2Linear, j)});
      if (q != 0) all.push_back({static_cast<double>(q * q), poly2_id(kPoly2Square, j)});
      for (size_t k = j + 1; k < m; ++k) {
        int64_t p = 0;
        for (size_t i = 0; i < n; ++i) p += int64_t{a[i]} * X[i][j] * X[i][k];
        if (p != 0) all.push_back({static_cast<double>(2 * p * p), poly2_id(kPoly2Cross, j, k)});
      }
    }
    std::sort(all.begin(), all.end(), ranks_before);
    if (all.size() > B) all.resize(B);
    return all;
  }

  SpaceScores score(uint64_t B, int threads, uint64_t seed_features, MemoryBudget& budget, bool* dense,
                    bool allow_dense = true) {
    FeatureSpaceSettings s;
    s.kind = "poly2";
    s.coef0 = 0.5;
    s.pair_block_features = seed_features;
    Poly2Space space(*store, s, budget);
    space.set_dense_path(allow_dense);
    SchedulerOptions so;
    so.threads = threads;
    auto blocks = store->plan_blocks(4096);
    fgm::BlockStream streamer(*store, so, budget);
    std::vector<double> ad(a.begin(), a.end());
    SpaceScores r = run_worst_case_analysis(space, streamer, blocks, ad.data(), B, budget);
    if (dense) *dense = space.last_stats().dense_path;
    return r;
  }
};

// The construction: features 0,1 share 13 positive rows; 2,3 share 13
// positive rows plus one negative row each; `heavy` balanced features (7
// positive, 7 negative rows each, disjoint) have the bound of 2,3, so the seed
// holds 2, 3 and heavy ones but not 0, 1. cross(0,1) and cross(2,3) tie at 2·13².
IntegerData tied_pairs_data(size_t heavy) {
  const size_t m = 4 + heavy;
  std::vector<std::vector<int>> X;
  std::vector<int> y;
  auto row = [&](int label, std::vector<size_t> on) {
    X.emplace_back(m, 0);
    for (size_t j : on) X.back()[j] = 1;
    y.push_back(label);
  };
  for (int r = 0; r < 13; ++r) row(+1, {0, 1});
  for (int r = 0; r < 13; ++r) row(+1, {2, 3});
  row(-1, {2});
  row(-1, {3});
  for (size_t h = 0; h < heavy; ++h)
    for (int r = 0; r < 14; ++r) row(r < 7 ? +1 : -1, {4 + h});
  std::vector<int> a = y;  // α = 1
  return IntegerData(std::move(X), y, a);
}

}  // namespace

TEST_CASE("poly2 keeps a pair that ties the B-th score outside the seed (smaller id wins)",
          "[features][poly2][ties]") {
  IntegerData d = tied_pairs_data(254);
  auto oracle = d.oracle(3);
  REQUIRE(oracle[0].id == poly2_id(kPoly2Cross, 0, 1));
  REQUIRE(oracle[1].id == poly2_id(kPoly2Cross, 2, 3));
  REQUIRE(oracle[0].score == oracle[1].score);
  for (uint64_t B : {uint64_t{1}, uint64_t{2}, uint64_t{3}})
    for (int threads : {1, 2})
      for (uint64_t seed : {uint64_t{0}, uint64_t{2}, uint64_t{300}}) {  // 0: the default 256
        INFO("B " << B << " threads " << threads << " seed " << seed);
        MemoryBudget budget(256ull << 20);
        SpaceScores r = d.score(B, threads, seed, budget, nullptr);
        REQUIRE(r.top.size() == B);
        for (size_t k = 0; k < B; ++k) {
          REQUIRE(r.top[k].id == oracle[k].id);
          REQUIRE(r.top[k].score == oracle[k].score);
        }
      }
}

TEST_CASE("poly2 top-B equals an exhaustive oracle on binary and count data with ties, for any seed, "
          "budget (dense or sparse) and thread count",
          "[features][poly2][ties]") {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> unif(0, 1);
  struct Case {
    std::string name;
    size_t n, m;
    double density;
    int max_value;
  };
  for (const Case& c : {Case{"binary", 240, 24, 0.3, 1}, Case{"counts", 200, 16, 0.6, 3}}) {
    std::vector<std::vector<int>> X(c.n, std::vector<int>(c.m, 0));
    std::vector<int> y(c.n), a(c.n);
    for (size_t i = 0; i < c.n; ++i) {
      for (size_t j = 0; j < c.m; ++j)
        if (unif(rng) < c.density) X[i][j] = 1 + static_cast<int>(unif(rng) * c.max_value);
      y[i] = unif(rng) < 0.5 ? 1 : -1;
      a[i] = y[i] * (unif(rng) < 0.7 ? 1 : 2);  // small integer duals: many exact ties
    }
    IntegerData d(X, y, a);
    for (uint64_t B : {uint64_t{1}, uint64_t{7}, uint64_t{30}}) {
      auto oracle = d.oracle(B);
      std::vector<bool> dense_seen;
      for (uint64_t budget_bytes : {uint64_t{256} << 20, uint64_t{3} << 20})
        for (uint64_t seed : {uint64_t{0}, uint64_t{3}})  // 0: the default seed size
          for (int threads : {1, 2})
            for (bool allow_dense : {true, false}) {
              INFO(c.name << " B " << B << " budget " << budget_bytes << " seed " << seed << " threads " << threads
                          << " dense allowed " << allow_dense);
              MemoryBudget budget(budget_bytes);
              bool dense = false;
              SpaceScores r = d.score(B, threads, seed, budget, &dense, allow_dense);
              dense_seen.push_back(dense);
              REQUIRE(r.top.size() == oracle.size());
              for (size_t k = 0; k < oracle.size(); ++k) {
                REQUIRE(r.top[k].id == oracle[k].id);
                REQUIRE(r.top[k].score == oracle[k].score);
              }
            }
      if (c.name == "counts") {  // both accumulation paths were exercised
        REQUIRE(std::count(dense_seen.begin(), dense_seen.end(), true) > 0);
        REQUIRE(std::count(dense_seen.begin(), dense_seen.end(), false) > 0);
      }
    }
  }
}

TEST_CASE("poly2 dense (GEMM) and sparse paths select the same pairs with bit-identical scores, on every SIMD target",
          "[features][poly2][ties]") {
  for (uint64_t seed : {uint64_t{12}, uint64_t{13}}) {
    Data d(500, 18, 1.0, seed);  // Gaussian, every entry present
    std::vector<ScoredCandidate> reference;
    std::vector<bool> dense_seen;
    const simd::Target before = simd::active_target();
    for (simd::Target target : simd::supported_targets())  // and on every SIMD target
      for (bool allow_dense : {true, false})
        for (int threads : {1, 2, 4}) {
          INFO("data " << seed << " target " << simd::target_name(target) << " dense allowed " << allow_dense
                       << " threads " << threads);
          simd::set_active_target(target);
          MemoryBudget budget(uint64_t{256} << 20);
          FeatureSpaceSettings s;
          s.kind = "poly2";
          s.pair_block_features = 2;
          Poly2Space space(*d.store, s, budget);
          space.set_dense_path(allow_dense);
          SchedulerOptions so;
          so.threads = threads;
          auto blocks = d.store->plan_blocks(4096);
          fgm::BlockStream streamer(*d.store, so, budget);
          SpaceScores r = run_worst_case_analysis(space, streamer, blocks, d.a.data(), 25, budget);
          dense_seen.push_back(space.last_stats().dense_path);
          if (reference.empty()) {
            reference = r.top;
            require_same_top(r, d.explicit_scores(1.0, 1.0), 25);
          }
          REQUIRE(r.top.size() == reference.size());
          for (size_t k = 0; k < reference.size(); ++k) {
            REQUIRE(r.top[k].id == reference[k].id);
            REQUIRE(r.top[k].score == reference[k].score);  // bitwise: the same row-order sums
          }
        }
    simd::set_active_target(before);
    REQUIRE(dense_seen.front());
    REQUIRE_FALSE(dense_seen.back());
  }
}
