// The single-store and the partitioned paths of one algorithm agree where they
// share a rule: the FGM stop rules (engine/fgm_trainer.h outer_stop_rule) and
// the budget a resident stream reserves (reserve_resident_store). Runs on one
// rank (SingleRankCommunicator); several ranks: tests/cli/test_mpi_*.cpp.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/error.h"
#include "core/memory_budget.h"
#include "engine/distributed_fgm.h"
#include "engine/fgm_trainer.h"
#include "engine/mslr_trainer.h"
#include "engine/sifs_run.h"
#include "io/ingest.h"
#include "io/partitioned_store.h"
#include "io/shard_store.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

TrainSettings settings_where_three_rules_fire() {
  TrainSettings s;
  s.B = 2;
  s.eps_outer = 0;  // only the three count rules can end the run
  s.apg.C = 10;
  s.block_bytes = 16 << 10;
  // After iteration 2, four features are selected: fgm.max_features, the last
  // checkpoint and fgm.max_iterations all fire at once.
  s.max_iterations = 2;
  s.max_features = 4;
  s.checkpoints = {4};
  return s;
}

}  // namespace

TEST_CASE("when several stop rules fire at once, one store and a partitioned store name the same one",
          "[engine][fgm][distributed][stop]") {
  test::TempDir dir("fgm-stop-agree");
  const std::string text = dir.write("train.svm", test::random_libsvm(300, 30, 0.3, 2, {1, 2}));
  MemoryBudget budget(256ull << 20);
  IngestOptions options;
  options.block_bytes = 4 << 10;
  ingest_libsvm(text, dir.file("store"), options, budget);
  ingest_partitioned(text, dir.file("parts"), 2, options, budget);
  const TrainSettings s = settings_where_three_rules_fire();

  auto store = ShardStore::open(dir.file("store"), budget);
  const TrainOutcome one = train_fgm(*store, s, budget);
  SingleRankCommunicator comm;
  const FgmOutcome parts = train_fgm_on({comm, nullptr, dir.file("parts")}, s, budget);

  REQUIRE(one.iterations.size() == 2);
  REQUIRE(parts.iterations.size() == 2);
  CHECK(one.model.features.size() == 4);
  CHECK(parts.model.features.size() == 4);
  // The rules' one order: fgm.max_features first.
  CHECK(one.stop_reason == "max_features");
  CHECK(parts.stop_reason == one.stop_reason);
}

TEST_CASE("the stop rules' one order", "[engine][fgm][stop]") {
  const std::vector<uint64_t> path = {4, 8};
  CHECK(outer_stop_rule(4, path, 3, 4, 3) == "max_features");  // all three
  CHECK(outer_stop_rule(0, path, 3, 8, 3) == "last_checkpoint");
  CHECK(outer_stop_rule(0, path, 3, 4, 3) == "max_iterations");  // a checkpoint that is not the last
  CHECK(outer_stop_rule(5, {}, 3, 4, 2) == "");
  CHECK(outer_stop_rule(0, {}, 3, 100, 4) == "max_iterations");  // past the cap (a resumed run) still stops
}

namespace {

// A tall store of several tiles: its resident copy holds each block's row
// order (about 10 bytes per nonzero) on top of the shard bytes, so
// resident_store_bytes is well above shard_bytes.
std::unique_ptr<ShardStore> tall_store(const test::TempDir& dir, MemoryBudget& budget) {
  const std::string text = dir.write("tall.svm", test::random_libsvm(2000, 60, 0.5, 9, {1, 2}));
  IngestOptions options;
  options.block_bytes = 4 << 10;
  options.tile_rows = 256;
  ingest_libsvm(text, dir.file("tall"), options, budget);
  return ShardStore::open(dir.file("tall"), budget);
}

}  // namespace

TEST_CASE("MSLR and SIFS reserve what a resident stream may hold, as FGM does", "[engine][budget][resident]") {
  test::TempDir dir("fgm-resident-reserve");
  MemoryBudget ingest_budget(256ull << 20);
  auto store = tall_store(dir, ingest_budget);
  const StoreInfo& info = store->info();
  const uint64_t held = resident_store_bytes(info);  // the resident stream's capacity (features/block_stream.h)
  REQUIRE(held > 2 * info.shard_bytes);              // the case the shard bytes under-reserve

  SECTION("FGM") {
    MemoryBudget budget(64ull << 20);
    TrainSettings s;
    s.B = 2;
    s.max_iterations = 2;
    s.block_bytes = 16 << 10;
    REQUIRE(keeps_store_resident(info, budget));
    CHECK(train_fgm(*store, s, budget).budget_peak >= held);
  }
  SECTION("MSLR") {
    MemoryBudget budget(64ull << 20);
    MslrSettings s;
    s.r = 2;
    s.max_iterations = 2;
    s.minimax.C = 10;
    s.block_bytes = 16 << 10;
    REQUIRE(keeps_store_resident(info, budget));
    // The run's peak covers the stream's resident copy (its other state is
    // far smaller: 2000 rows, 4 selected columns).
    CHECK(train_mslr(*store, s, budget).budget_peak >= held);
  }
  SECTION("SIFS without screening (the baseline keeps the pages)") {
    MemoryBudget budget(64ull << 20);
    const Config config = Config::load("", {"solver=sifs", "engine.block_bytes=16384"});
    const uint64_t before = budget.used();
    auto data = open_sifs_store(*store, config, budget);
    SifsSettings settings = sifs_settings_from_config(config);
    settings.screening = SifsScreening::kNone;
    auto solver = data->solver(settings);
    CHECK(budget.used() - before >= held);
  }
}

TEST_CASE("a partitioned run reserves a batch's generated columns until the cache has copied them",
          "[engine][budget][distributed]") {
  test::TempDir dir("fgm-batch-held");
  // 20,000 rows × 40 dense real-valued features, one batch of all 40: the
  // batch's columns as rows and values hold 40 · 20,000 · 8 = 6.4 MB while
  // the cache copies them. Without that reservation the run peaked at
  // 11.0 MB (the solve); with it, ~16.6 MB (the batch, its copy, the duals).
  const std::string text = dir.write("train.svm", test::random_libsvm(20000, 40, 1.0, 7, {1, 2}));
  MemoryBudget ingest_budget(256ull << 20);
  IngestOptions options;
  options.block_bytes = 64 << 10;
  ingest_partitioned(text, dir.file("parts"), 1, options, ingest_budget);
  TrainSettings s;
  s.B = 40;
  s.max_iterations = 1;
  s.apg.C = 1;
  s.block_bytes = 64 << 10;
  SingleRankCommunicator comm;
  const uint64_t batch_bytes = uint64_t{40} * 20000 * (sizeof(uint32_t) + sizeof(float));
  {
    MemoryBudget budget(32ull << 20);
    const FgmOutcome parts = train_fgm_on({comm, nullptr, dir.file("parts")}, s, budget);
    REQUIRE(parts.model.features.size() == 40);
    CHECK(budget.peak() >= 2 * batch_bytes);  // the batch and the cache's copy at once
    CHECK(budget.used() == 0);
  }
  // 13 MB holds the solve but not the batch beside its copy: refused, naming the batch.
  MemoryBudget budget(13ull << 20);
  try {
    train_fgm_on({comm, nullptr, dir.file("parts")}, s, budget);
    FAIL("a 13 MB budget held the batch and its copy");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.kind() == ErrorKind::kOutOfMemory);
    CHECK(std::string(e.what()).find("a new batch's columns") != std::string::npos);
  }
}

// The single store is the one-part case of the FGM rows (engine/fgm_loop.h
// FgmRows over a RowSource): a store of one partition runs the same
// arithmetic, so every iteration's record — the SIP violation (37) of its α
// included, which the partitioned rows once summed row by row instead of by
// the scoring pass's tiles — the value span and the model are the same bits,
// in a space scored by column ranges (linear) and in generated ones (poly2,
// hik), with and without a bias.
TEST_CASE("a one-partition store repeats the single store's run record for record",
          "[engine][fgm][distributed][one-partition]") {
  const std::string kind = GENERATE(std::string("linear"), std::string("poly2"), std::string("hik"));
  const bool bias = GENERATE(false, true);
  CAPTURE(kind, bias);
  test::TempDir dir("fgm-one-part");
  // Tiles of 64 rows and dense enough columns that the tiled dots' cells use
  // several accumulators: a row-by-row sum rounds differently.
  const std::string text = dir.write("train.svm", test::random_libsvm(700, 24, 0.6, 11, {1, 2, 3, 5}));
  MemoryBudget budget(256ull << 20);
  IngestOptions options;
  options.block_bytes = 8 << 10;
  options.tile_rows = 64;
  ingest_libsvm(text, dir.file("store"), options, budget);
  ingest_partitioned(text, dir.file("parts"), 1, options, budget);
  TrainSettings s;
  s.B = 3;
  s.max_iterations = 4;
  s.eps_outer = 1e-6;
  s.apg.C = 5;
  s.apg.bias = bias;
  s.block_bytes = 16 << 10;
  s.space.kind = kind;
  s.space.levels = 8;

  auto store = ShardStore::open(dir.file("store"), budget);
  const TrainOutcome one = train_fgm(*store, s, budget);
  SingleRankCommunicator comm;
  const FgmOutcome part = train_fgm_on({comm, nullptr, dir.file("parts")}, s, budget);

  REQUIRE(one.iterations.size() >= 2);
  REQUIRE(part.iterations.size() == one.iterations.size());
  CHECK(part.objective_no_features == one.objective_no_features);
  for (size_t t = 0; t < one.iterations.size(); ++t) {
    CAPTURE(t);
    CHECK(part.iterations[t].selected == one.iterations[t].selected);
    CHECK(part.iterations[t].objective == one.iterations[t].objective);
    CHECK(part.iterations[t].sip_violation == one.iterations[t].sip_violation);
    CHECK(part.iterations[t].apg_iterations == one.iterations[t].apg_iterations);
  }
  CHECK(part.final_sip_violation == one.final_sip_violation);
  CHECK(part.value_span == one.value_span);
  CHECK(part.value_span > 0);
  REQUIRE(part.model.features.size() == one.model.features.size());
  for (size_t k = 0; k < one.model.features.size(); ++k) {
    CAPTURE(k);
    CHECK(part.model.features[k].key == one.model.features[k].key);
    CHECK(part.model.features[k].weight == one.model.features[k].weight);
  }
  CHECK(part.model.bias == one.model.bias);
}
