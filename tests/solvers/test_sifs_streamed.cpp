// SIFS out of core: the path on an on-disk store several times
// engine.memory_budget (every pass streams it; only the reduced problems are
// held), the same results for 1 and 2 threads (bit for bit), the same results
// as with a budget that holds everything, and a clear error naming the sizes
// and the key when the reduced problem does not fit.
#include <catch2/catch.hpp>

#include <string>

#include "core/error.h"
#include "features/block_stream.h"
#include "io/ingest.h"
#include "solvers/sifs/sifs_path.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

struct StoreOnDisk {
  test::TempDir dir{"fgm-sifs-stream"};
  std::string store_dir;
  StoreOnDisk() {
    const std::string text = test::random_libsvm(2000, 3000, 0.05, 17, {0, 1, 2, 3, 4, 5});
    const std::string path = dir.write("train.svm", text);
    MemoryBudget big(256ull << 20);
    IngestOptions o;
    o.block_bytes = 16 << 10;
    o.tile_rows = 512;
    ingest_libsvm(path, dir.file("store"), o, big);
    store_dir = dir.file("store");
  }
};

struct PathRun {
  std::vector<SifsPoint> points;
  std::vector<std::vector<double>> w;
  uint64_t peak = 0;
};

PathRun run(const std::string& store_dir, uint64_t budget_bytes, int threads, SifsScreening mode,
            uint64_t* shard_bytes = nullptr) {
  MemoryBudget budget(budget_bytes);
  auto store = ShardStore::open(store_dir, budget);
  if (shard_bytes) *shard_bytes = store->info().shard_bytes;
  SchedulerOptions so;
  so.threads = threads;
  so.blocks_in_flight = 3;  // the same for both thread counts
  BlockStream stream(*store, so, budget);
  std::vector<int8_t> labels(store->labels(), store->labels() + store->info().n_rows);
  SifsLayout layout = SifsLayout::binary(labels);
  SifsData data(stream, store->plan_blocks(16 << 10), layout, budget);
  SifsSettings s;
  s.screening = mode;
  s.beta_max_ratio = 0.6;
  s.beta_min_ratio = 0.3;
  s.beta_points = 2;
  s.alpha_min_ratio = 0.8;
  s.alpha_points = 4;
  s.tol = 1e-9;
  SifsSolver solver(data, s);
  PathRun out;
  solver.run_path([&](const SifsPoint& p, const SifsReference& ref) {
    out.points.push_back(p);
    out.w.push_back(ref.w);
  });
  out.peak = budget.peak();
  return out;
}

}  // namespace

TEST_CASE("SIFS path on a store several times the budget; 1 and 2 threads identical", "[solvers][sifs][stream]") {
  StoreOnDisk disk;
  uint64_t shard_bytes = 0;
  const PathRun roomy = run(disk.store_dir, 256ull << 20, 1, SifsScreening::kSifs, &shard_bytes);
  const uint64_t small_budget = shard_bytes / 3;
  CAPTURE(shard_bytes, small_budget);
  const PathRun one = run(disk.store_dir, small_budget, 1, SifsScreening::kSifs);
  const PathRun two = run(disk.store_dir, small_budget, 2, SifsScreening::kSifs);
  REQUIRE(shard_bytes >= 3 * small_budget);
  REQUIRE(one.peak <= small_budget);
  REQUIRE(one.points.size() == 8);
  for (const PathRun* other : {&two, &roomy}) {
    REQUIRE(other->points.size() == one.points.size());
    for (size_t k = 0; k < one.points.size(); ++k) {
      REQUIRE(other->points[k].objective == one.points[k].objective);
      REQUIRE(other->points[k].gap == one.points[k].gap);
      REQUIRE(other->points[k].weights_screened == one.points[k].weights_screened);
      REQUIRE(other->points[k].samples_in_R == one.points[k].samples_in_R);
      REQUIRE(other->points[k].samples_in_L == one.points[k].samples_in_L);
      REQUIRE(other->w[k] == one.w[k]);
    }
  }
  uint64_t screened = 0;
  for (const auto& p : one.points) {
    REQUIRE(p.converged);
    screened += p.weights_screened + p.samples_in_R + p.samples_in_L;
  }
  REQUIRE(screened > 0);
}

TEST_CASE("SIFS: a reduced problem larger than the budget is an error naming sizes and the key",
          "[solvers][sifs][stream]") {
  StoreOnDisk disk;
  uint64_t shard_bytes = 0;
  run(disk.store_dir, 256ull << 20, 1, SifsScreening::kSifs, &shard_bytes);
  // Without screening the reduced problem is the whole data set: it cannot fit in a third of it.
  try {
    run(disk.store_dir, shard_bytes / 3, 1, SifsScreening::kNone);
    FAIL("expected the budget to be exceeded");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::kOutOfMemory);
    const std::string what = e.what();
    CAPTURE(what);
    REQUIRE(what.find("reduced SIFS problem") != std::string::npos);
    REQUIRE(what.find("features x") != std::string::npos);
    REQUIRE(what.find("engine.memory_budget") != std::string::npos);
  }
}
