// core/interrupt.h on a streamed pass: a requested interrupt stops the pass at
// the next block (Interrupted, as the Python binding's Ctrl-C), the pass keeps
// none of its buffers, and once cleared the next pass streams every block.
#include <catch2/catch.hpp>

#include <sstream>

#include "core/interrupt.h"
#include "core/memory_budget.h"
#include "features/block_stream.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

// Requests the interrupt when it consumes block `at` (0: never).
class InterruptingStages : public BlockStages {
 public:
  explicit InterruptingStages(size_t at) : at_(at) {}
  uint64_t scratch_bytes(const BlockRef&) const override { return 0; }
  void open(size_t) override {}
  void transform(size_t, const BlockRef&, const ColumnBlock&) override {}
  void consume(size_t) override {
    if (++consumed_ == at_) request_interrupt();
  }
  size_t consumed() const { return consumed_; }

 private:
  size_t at_;
  size_t consumed_ = 0;
};

}  // namespace

TEST_CASE("an interrupt stops a pass at the next block and keeps nothing", "[features][block_stream][interrupt]") {
  test::TempDir dir("fgm-stream-interrupt");
  std::ostringstream out;
  for (int i = 0; i < 3000; ++i) out << (i % 2 ? "+1" : "-1") << ' ' << 1 + i % 997 << ":1 " << 1000 + i % 13 << ":2\n";
  {
    IngestOptions o;
    o.block_bytes = 4 << 10;  // many stored blocks
    MemoryBudget ingest_budget(256ull << 20);
    ingest_libsvm(dir.write("train.svm", out.str()), dir.file("store"), o, ingest_budget);
  }
  MemoryBudget budget(1ull << 30);
  auto store = ShardStore::open(dir.file("store"), budget);
  const std::vector<BlockRef> blocks = store->plan_blocks(8 << 10);
  REQUIRE(blocks.size() >= 8);
  SchedulerOptions options;
  options.threads = 2;
  options.keep_buffers_from = 0;  // buffers would stay after a finished pass: none after a stopped one
  BlockStream stream(*store, options, budget);
  const uint64_t before = budget.used();

  InterruptingStages stopped(2);
  REQUIRE_THROWS_AS(stream.run(blocks, "interrupted", stopped), Interrupted);
  clear_interrupt();
  CHECK(stopped.consumed() < blocks.size());
  CHECK(budget.used() == before);

  InterruptingStages full(0);
  const PassStats stats = stream.run(blocks, "after", full);
  CHECK(stats.blocks == blocks.size());
  CHECK(full.consumed() == blocks.size());
}
