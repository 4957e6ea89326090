// Poly-2 pass memory by stage: the dense block a dense seed reads is gone
// before the sparse pair stage reserves its transposed rows (issue 9's scale
// run ran out of budget with a 172 MiB dense seed block held beside them).
#include <catch2/catch.hpp>

#include <random>
#include <set>
#include <sstream>

#include "core/error.h"
#include "features/block_stream.h"
#include "features/poly2_space.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

bool mentions(const std::string& text, const char* holder) { return text.find(holder) != std::string::npos; }

}  // namespace

TEST_CASE("poly2: a dense seed block is not held during the sparse pair stage", "[features][poly2][memory]") {
  test::TempDir dir("fgm-poly2-pass-memory");
  // A few dense, heavy columns (the seed goes dense) and many sparse ones (the
  // active set, all features under a low threshold, is far below the dense
  // density: the sparse path transposes it).
  const uint64_t n = 4000, dense_columns = 6, m = 1500;
  {
    std::mt19937_64 rng(11);
    std::uniform_int_distribution<uint64_t> sparse(dense_columns, m - 1);
    std::normal_distribution<double> normal(0, 1);
    std::ostringstream out;
    for (uint64_t i = 0; i < n; ++i) {
      out << (normal(rng) > 0 ? "+1" : "-1");
      for (uint64_t j = 0; j < dense_columns; ++j)
        if ((i + j) % 2 == 0) out << ' ' << j + 1 << ':' << static_cast<float>(4 + normal(rng));
      std::set<uint64_t> ids;
      while (ids.size() < 5) ids.insert(sparse(rng));
      for (uint64_t j : ids) out << ' ' << j + 1 << ':' << static_cast<float>(normal(rng));
      out << '\n';
    }
    std::string path = dir.write("train.svm", out.str());
    IngestOptions o;
    o.reader.declared_features = m;
    MemoryBudget ingest_budget(256ull << 20);
    ingest_libsvm(path, dir.file("store"), o, ingest_budget);
  }
  std::vector<double> a(n);
  for (uint64_t i = 0; i < n; ++i) a[i] = (i % 3 == 0 ? -1.0 : 1.0) * (1 + static_cast<double>(i % 5));
  const uint64_t B = 20000;  // more than 2m: the top never fills, every feature stays active
  auto run = [&](uint64_t limit, Poly2Stats* stats, uint64_t* pass_peak) {
    MemoryBudget budget(limit);
    std::unique_ptr<ShardStore> store = ShardStore::open(dir.file("store"), budget);
    FeatureSpaceSettings s;
    s.kind = "poly2";
    s.pair_block_features = dense_columns;
    std::vector<BlockRef> blocks = store->plan_blocks(64 << 10);
    SchedulerOptions so;
    so.threads = 2;
    so.keep_resident = true;
    const uint64_t before = budget.used();
    Poly2Space space(*store, s, budget);
    BlockStream streamer(*store, so, budget);
    const SpaceScores r = run_worst_case_analysis(space, streamer, blocks, a.data(), B, budget);
    if (stats) *stats = space.last_stats();
    if (pass_peak) *pass_peak = budget.peak() - before;
    std::vector<uint64_t> ids;  // the scores' reservation dies with this budget
    for (const ScoredCandidate& c : r.top) ids.push_back(c.id);
    return ids;
  };
  Poly2Stats ample_stats;
  uint64_t ample_peak = 0;
  const std::vector<uint64_t> reference = run(uint64_t{256} << 20, &ample_stats, &ample_peak);
  // The construction exercises what it is about: a dense seed, then sparse pairs.
  REQUIRE(ample_stats.dense_path);
  REQUIRE(ample_stats.partitions >= 1);
  REQUIRE(ample_stats.active_features > dense_columns);
  // Tighter budgets, down to a fraction of the ample pass: each either fits
  // (same top-B) or fails in a stage that holds only that stage's memory.
  int fitted_sparse_after_dense = 0, failed_in_sparse_stage = 0;
  for (double fraction = 0.9; fraction > 0.01; fraction *= 0.85) {
    const uint64_t limit = static_cast<uint64_t>(fraction * static_cast<double>(ample_peak)) + (uint64_t{1} << 20);
    INFO("budget " << limit << " (" << fraction << " of the ample pass + 1 MiB for the store's own state)");
    Poly2Stats stats;
    try {
      const std::vector<uint64_t> top = run(limit, &stats, nullptr);
      REQUIRE(top == reference);
      if (stats.dense_path && stats.partitions >= 1) ++fitted_sparse_after_dense;
    } catch (const Error& e) {
      REQUIRE(e.kind() == ErrorKind::kOutOfMemory);
      const std::string what = e.what();
      CAPTURE(what);
      const bool sparse_stage = mentions(what, "poly2 active rows") || mentions(what, "poly2 active columns") ||
                                mentions(what, "poly2 pair partition") || mentions(what, "poly2 pair accumulators");
      if (sparse_stage) ++failed_in_sparse_stage;
      REQUIRE_FALSE((sparse_stage && mentions(what, "poly2 dense pair block")));
    }
  }
  CAPTURE(ample_peak, fitted_sparse_after_dense, failed_in_sparse_stage);
  REQUIRE(fitted_sparse_after_dense + failed_in_sparse_stage >= 1);
}
