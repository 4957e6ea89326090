// How many blocks a pass keeps in flight (its tokens, seen as the slots the
// stream opens): as many as the options ask for when the budget holds their
// read buffers and scratch, fewer down to one as it shrinks. A pass that ran
// one token with an ample budget scored one block at a time on one thread.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <random>
#include <set>
#include <sstream>

#include "core/memory_budget.h"
#include "features/block_stream.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

// Records the slots it is opened with and the blocks it sees.
class CountingStages : public BlockStages {
 public:
  explicit CountingStages(uint64_t scratch) : scratch_(scratch) {}
  uint64_t scratch_bytes(const BlockRef&) const override { return scratch_; }
  void open(size_t slots) override { slots_ = slots; }
  void transform(size_t, const BlockRef&, const ColumnBlock&) override { transformed_.fetch_add(1); }
  void consume(size_t) override { ++consumed_; }
  size_t slots() const { return slots_; }
  size_t transformed() const { return transformed_.load(); }
  size_t consumed() const { return consumed_; }

 private:
  uint64_t scratch_;
  size_t slots_ = 0;
  std::atomic<size_t> transformed_{0};
  size_t consumed_ = 0;
};

}  // namespace

TEST_CASE("a pass keeps as many blocks in flight as the budget holds", "[features][block_stream][tokens]") {
  test::TempDir dir("fgm-stream-tokens");
  const uint64_t n = 2000, m = 3000;
  std::ostringstream out;
  std::mt19937_64 rng(9);
  std::uniform_int_distribution<uint64_t> feature(1, m);
  for (uint64_t i = 0; i < n; ++i) {
    out << (i % 2 ? "+1" : "-1");
    std::set<uint64_t> ids;
    while (ids.size() < 8) ids.insert(feature(rng));
    for (uint64_t f : ids) out << ' ' << f << ":1";
    out << '\n';
  }
  {
    IngestOptions o;
    o.reader.declared_features = m;
    o.block_bytes = 8 << 10;  // several stored blocks
    MemoryBudget ingest_budget(256ull << 20);
    ingest_libsvm(dir.write("train.svm", out.str()), dir.file("store"), o, ingest_budget);
  }
  MemoryBudget budget(1ull << 30);
  auto store = ShardStore::open(dir.file("store"), budget);
  const std::vector<BlockRef> blocks = store->plan_blocks(16 << 10);
  REQUIRE(blocks.size() >= 4);
  uint64_t read = 0;
  for (const auto& b : blocks) read = std::max(read, b.read_bytes);
  REQUIRE(read > 0);
  const uint64_t scratch = 1000;
  SchedulerOptions options;
  options.threads = 2;  // tokens 2·2 + 2 = 6
  // What t tokens take: a read buffer per thread reading, scratch per token.
  auto bytes_for = [&](uint64_t t) { return std::min<uint64_t>(t, 2) * read + t * scratch; };
  auto slots_with_free = [&](uint64_t free) {
    // Leave exactly `free` bytes of the budget available to the pass.
    Reservation filler = budget.reserve(budget.available() - free, "filler (test)");
    BlockStream stream(*store, options, budget);
    CountingStages stages(scratch);
    const PassStats stats = stream.run(blocks, "tokens", stages);
    REQUIRE(stats.blocks == blocks.size());
    REQUIRE(stages.transformed() == blocks.size());
    REQUIRE(stages.consumed() == blocks.size());
    return stages.slots();
  };
  CHECK(slots_with_free(bytes_for(6) * 4) == 6);
  CHECK(slots_with_free(bytes_for(6)) == 6);
  CHECK(slots_with_free(bytes_for(6) - 1) == 5);
  CHECK(slots_with_free(bytes_for(3)) == 3);
  CHECK(slots_with_free(bytes_for(2)) == 2);
  CHECK(slots_with_free(bytes_for(2) - 1) == 1);
  CHECK(slots_with_free(read + scratch) == 1);
}
