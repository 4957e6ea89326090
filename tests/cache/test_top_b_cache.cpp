#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "cache/top_b_cache.h"

using namespace fgm;

TEST_CASE("top-B cache equals a full sort, with ties broken by smaller id", "[cache][topb]") {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    size_t n = 1 + rng() % 500;
    size_t B = 1 + rng() % 40;
    std::vector<ScoredCandidate> all(n);
    for (size_t i = 0; i < n; ++i) {
      // Few distinct scores so ties are frequent.
      all[i].score = static_cast<double>(rng() % 13);
      all[i].id = i * 3 + (rng() % 3);
    }
    // Oracle: full sort by (score desc, id asc).
    auto oracle = all;
    std::sort(oracle.begin(), oracle.end(), [](const auto& a, const auto& b) {
      return a.score != b.score ? a.score > b.score : a.id < b.id;
    });
    oracle.resize(std::min(B, n));

    // Single cache, shuffled input.
    std::shuffle(all.begin(), all.end(), rng);
    TopBCache one(B);
    for (const auto& c : all) one.offer(c);
    auto got = one.sorted();
    REQUIRE(got.size() == oracle.size());
    for (size_t i = 0; i < got.size(); ++i) {
      REQUIRE(got[i].id == oracle[i].id);
      REQUIRE(got[i].score == oracle[i].score);
    }

    // Thread-local caches over arbitrary partitions, merged in either order.
    size_t cut = rng() % (n + 1);
    TopBCache left(B), right(B);
    for (size_t i = 0; i < cut; ++i) left.offer(all[i]);
    for (size_t i = cut; i < n; ++i) right.offer(all[i]);
    TopBCache merged_lr(B), merged_rl(B);
    merged_lr.merge(left);
    merged_lr.merge(right);
    merged_rl.merge(right);
    merged_rl.merge(left);
    auto a = merged_lr.sorted(), b = merged_rl.sorted();
    REQUIRE(a.size() == oracle.size());
    for (size_t i = 0; i < a.size(); ++i) {
      REQUIRE(a[i].id == oracle[i].id);
      REQUIRE(b[i].id == oracle[i].id);
    }
  }
}

TEST_CASE("top-B cache admission rule", "[cache][topb]") {
  TopBCache c(2);
  c.offer({5.0, 10});
  c.offer({5.0, 3});
  REQUIRE(c.full());
  REQUIRE_FALSE(c.admits({5.0, 11}));
  REQUIRE(c.admits({5.0, 4}));
  c.offer({5.0, 4});
  auto s = c.sorted();
  REQUIRE(s[0].id == 3);
  REQUIRE(s[1].id == 4);
  TopBCache zero(0);
  zero.offer({1.0, 1});
  REQUIRE(zero.size() == 0);
}
