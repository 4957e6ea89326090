#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "cache/top_b_cache.h"
#include "core/error.h"

using namespace fgm;

namespace {
bool same(const std::vector<ScoredCandidate>& a, const std::vector<ScoredCandidate>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const ScoredCandidate& x, const ScoredCandidate& y) { return x.score == y.score && x.id == y.id; });
}
}  // namespace

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

// Issue 7 item 7: B may be 10^9. The heap costs what the offered candidates
// need, every byte it allocates is reserved first, and copies and the sorted
// result stay counted.
TEST_CASE("top-B cache memory follows the candidates held and is reserved", "[cache][topb][budget]") {
  const size_t huge_b = 1000000000;
  MemoryBudget budget(1 << 20);  // 1 MiB: B slots would be 16 GB
  TopBCache cache(huge_b, &budget);
  REQUIRE(budget.used() == 0);
  // Oracle: a plain sort of everything offered (scores with ties).
  std::vector<ScoredCandidate> all;
  for (uint64_t id = 0; id < 5000; ++id) {
    ScoredCandidate c{double((id * 7919) % 101), id};
    all.push_back(c);
    cache.offer(c);
    REQUIRE(budget.used() == cache.bytes());                          // counted capacity
    REQUIRE(cache.bytes() <= std::max<uint64_t>(64, 2 * (id + 1)) * sizeof(ScoredCandidate));
  }
  REQUIRE(cache.size() == 5000);
  // Growth copies the old heap into the new one: both were reserved.
  REQUIRE(budget.peak() >= cache.bytes() + cache.bytes() / 2);
  REQUIRE(budget.peak() <= budget.limit());

  const uint64_t before_copy = budget.used();
  {
    TopBCache copy = cache;
    REQUIRE(budget.used() == before_copy + copy.bytes());
    REQUIRE(same(copy.sorted(), cache.sorted()));
  }
  REQUIRE(budget.used() == before_copy);

  Reservation result_memory;
  std::vector<ScoredCandidate> best = cache.take_sorted(&result_memory);
  std::sort(all.begin(), all.end(), ranks_before);
  REQUIRE(same(best, all));
  REQUIRE(result_memory.bytes() == best.capacity() * sizeof(ScoredCandidate));
  REQUIRE(budget.used() == result_memory.bytes());
  REQUIRE(cache.size() == 0);

  // A budget too small for the candidates offered is a clear error naming fgm.B.
  MemoryBudget tiny(4096);
  TopBCache small(huge_b, &tiny);
  try {
    for (uint64_t id = 0; id < 1000; ++id) small.offer({1.0, id});
    FAIL("expected out-of-memory");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::kOutOfMemory);
    REQUIRE(std::string(e.what()).find("fgm.B") != std::string::npos);
  }
}
