// Poly-2 pair stage under the memory budget: the bytes it allocates on the
// heap stay within what it reserved. This test executable counts every
// operator new (live bytes and their peak) as the independent measure.
#include <catch2/catch.hpp>

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <random>
#include <set>
#include <sstream>

#include "core/error.h"
#include "features/block_stream.h"
#include "features/poly2_space.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "tests/test_util.h"

namespace {

std::atomic<int64_t> g_live{0}, g_peak{0};

void* tracked_alloc(std::size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (p == nullptr) throw std::bad_alloc();
  int64_t live = g_live.fetch_add(static_cast<int64_t>(malloc_usable_size(p))) +
                 static_cast<int64_t>(malloc_usable_size(p));
  int64_t peak = g_peak.load();
  while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
  }
  return p;
}

void tracked_free(void* p) {
  if (p == nullptr) return;
  g_live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)));
  std::free(p);
}

}  // namespace

void* operator new(std::size_t n) { return tracked_alloc(n); }
void* operator new[](std::size_t n) { return tracked_alloc(n); }
void operator delete(void* p) noexcept { tracked_free(p); }
void operator delete[](void* p) noexcept { tracked_free(p); }
void operator delete(void* p, std::size_t) noexcept { tracked_free(p); }
void operator delete[](void* p, std::size_t) noexcept { tracked_free(p); }

using namespace fgm;

TEST_CASE("poly2 scoring allocates no more than it reserves; a tight budget fits or fails cleanly",
          "[features][poly2][memory]") {
  test::TempDir dir("fgm-poly2-memory");
  // Many base features (per-feature and per-block arrays matter), sparse rows.
  const uint64_t n = 3000, m = 200000;
  std::string text;
  {
    std::mt19937_64 rng(3);
    std::uniform_int_distribution<uint64_t> feature(0, m - 1);
    std::normal_distribution<double> normal(0, 1);
    std::ostringstream out;
    for (uint64_t i = 0; i < n; ++i) {
      std::set<uint64_t> ids;
      while (ids.size() < 12) ids.insert(feature(rng));
      out << (normal(rng) > 0 ? "+1" : "-1");
      for (uint64_t j : ids) out << ' ' << j + 1 << ':' << static_cast<float>(normal(rng));
      out << '\n';
    }
    text = out.str();
  }
  std::string path = dir.write("train.svm", text);
  {
    IngestOptions o;
    o.reader.declared_features = m;
    MemoryBudget ingest_budget(256ull << 20);
    ingest_libsvm(path, dir.file("store"), o, ingest_budget);
  }
  std::vector<double> a(n);
  for (uint64_t i = 0; i < n; ++i) a[i] = (i % 3 == 0 ? -1.0 : 1.0) * (1 + static_cast<double>(i % 5));
  // Heap bytes that nothing reserved: allocator and TBB bookkeeping, strings.
  constexpr int64_t kSlack = 128 << 10;
  std::vector<ScoredCandidate> reference;
  int fitted = 0, failed = 0;
  for (uint64_t limit : {uint64_t{64} << 20, uint64_t{6} << 20, uint64_t{3} << 20, uint64_t{1} << 20}) {
    INFO("budget " << limit);
    MemoryBudget budget(limit);
    std::unique_ptr<ShardStore> store;
    try {
      store = ShardStore::open(dir.file("store"), budget);
    } catch (const Error& e) {
      REQUIRE(e.kind() == ErrorKind::kOutOfMemory);
      ++failed;
      continue;
    }
    FeatureSpaceSettings s;
    s.kind = "poly2";
    s.pair_block_features = 8;
    std::vector<BlockRef> blocks = store->plan_blocks(1 << 20);
    SchedulerOptions so;
    so.threads = 2;
    // Mapped pages are not heap: leave them out of the budget so that the
    // reservations compared below are heap reservations only.
    so.keep_resident = true;
    const int64_t reserved_before = static_cast<int64_t>(budget.used());
    const int64_t live_before = g_live.load();
    g_peak.store(live_before);
    try {
      Poly2Space space(*store, s, budget);
      fgm::BlockStream streamer(*store, so, budget);
      SpaceScores r = run_worst_case_analysis(space, streamer, blocks, a.data(), 20, budget);
      if (reference.empty()) reference = r.top;
      REQUIRE(r.top.size() == reference.size());
      for (size_t k = 0; k < r.top.size(); ++k) REQUIRE(r.top[k].id == reference[k].id);
      ++fitted;
    } catch (const Error& e) {
      REQUIRE(e.kind() == ErrorKind::kOutOfMemory);
      ++failed;
    }
    const int64_t heap_peak = g_peak.load() - live_before;
    const int64_t reserved_peak = static_cast<int64_t>(budget.peak()) - reserved_before;
    CAPTURE(heap_peak, reserved_peak);
    REQUIRE(budget.peak() <= limit);
    REQUIRE(heap_peak <= reserved_peak + kSlack);
  }
  REQUIRE(fitted >= 1);
  REQUIRE(failed >= 1);
}
