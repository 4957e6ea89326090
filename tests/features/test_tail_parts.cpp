// Store format 6 (io/store_format.h): the pruned linear pass leaves a block's
// tail part unread when its bound cannot reach the floor. Checked against a
// dense brute force and, bit for bit, against the same pass over an
// in-memory store of the same nonzeros read whole (every column offered),
// on binary, integer, tied and real values, for threads 1/2 and groupings.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "core/hash.h"
#include "features/block_stream.h"
#include "features/column_pruning.h"
#include "features/feature_space.h"
#include "io/shard_store.h"
#include "io/store_files.h"
#include "io/store_writer.h"
#include "tests/features/tiled_store.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

enum class Values { kBinary, kInteger, kTied, kReal };

// n rows × m columns, Zipf popularity (column rank r in a row with
// probability min(0.9, 4/(r+1)^1.1)), ids permuted; integer duals unless real.
struct TailData {
  uint64_t n = 0, m = 0;
  std::map<uint64_t, std::vector<std::pair<uint32_t, float>>> columns;  // id -> (row, value)
  std::vector<test::Triplet> triplets;
  std::vector<double> a;
  std::vector<int8_t> y;

  TailData(uint64_t rows, uint64_t cols, Values kind, uint64_t seed) : n(rows), m(cols) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> unif(0.0, 1.0);
    std::vector<uint64_t> ids(m);
    for (uint64_t j = 0; j < m; ++j) ids[j] = 3 * j + 1;  // gaps: empty ids between
    std::shuffle(ids.begin(), ids.end(), rng);
    for (uint64_t j = 0; j < m; ++j) {
      const double p = std::min(0.9, 4.0 / std::pow(static_cast<double>(j + 1), 1.1));
      for (uint32_t i = 0; i < n; ++i) {
        if (!(unif(rng) < p)) continue;
        float v = 1.0f;
        switch (kind) {
          case Values::kBinary: break;
          case Values::kInteger: v = static_cast<float>(1 + rng() % 3); break;
          case Values::kTied: v = rng() % 2 ? 2.5f : 0.5f; break;
          case Values::kReal: v = static_cast<float>(unif(rng) * 4 - 2); break;
        }
        columns[ids[j]].push_back({i, v});
      }
    }
    for (const auto& [id, col] : columns)
      for (auto [i, v] : col) triplets.push_back({i, id, v});
    const bool real = kind == Values::kReal;
    for (uint64_t i = 0; i < n; ++i) {
      y.push_back(unif(rng) < 0.5 ? 1 : -1);
      a.push_back((real ? unif(rng) * 3 : static_cast<double>(1 + rng() % 3)) * y.back());
    }
  }
  uint64_t width() const { return columns.rbegin()->first + 1; }
};

// The data as a store written by StoreWriter (format 6), tails below `tail_below`.
void write_store(const TailData& d, const std::string& dir, uint32_t tile_rows, uint64_t block_bytes,
                 uint64_t tail_below) {
  MemoryBudget budget(256 << 20);
  store::TempDir tmp(dir);
  store::StoreWriterOptions wo;
  wo.n_rows = d.n;
  wo.tile_rows = tile_rows;
  wo.shard_target_bytes = 64 << 10;
  wo.block_target_bytes = block_bytes;
  wo.tail_below_nnz = tail_below;
  store::WrittenShards written;
  {
    store::StoreWriter writer(tmp, budget, wo);
    std::vector<uint32_t> rows;
    std::vector<float> values;
    for (const auto& [id, col] : d.columns) {
      rows.clear();
      values.clear();
      for (auto [i, v] : col) {
        rows.push_back(i);
        values.push_back(v);
      }
      writer.add_column(id, rows.data(), values.data(), rows.size());
    }
    written = writer.finish();
  }
  store::ManifestFields m;
  m.n_rows = d.n;
  m.n_features = d.width();
  m.nnz = d.triplets.size();
  for (int8_t s : d.y) m.n_positive += s > 0;
  m.n_negative = d.n - m.n_positive;
  m.tile_rows = tile_rows;
  m.nonempty_columns = written.nonempty_columns;
  m.block_bytes = block_bytes;
  m.block_count = written.block_count;
  m.shards = std::move(written.shards);
  m.class_values = {-1, 1};
  m.class_counts = {m.n_negative, m.n_positive};
  const std::vector<uint16_t> classes = store::class_indices_of_signs(d.y.data(), d.n);
  m.labels_checksum = xxh64(d.y.data(), d.n);
  m.classes_checksum = xxh64(classes.data(), 2 * d.n);
  store::write_manifest(
      tmp, m, budget, 1 << 16, [&](store::FileWriter& out) { out.write(d.y.data(), d.n); },
      [&](store::FileWriter& out) { out.write(classes.data(), 2 * d.n); });
  tmp.commit();
}

// `budget` outlives the result (its top holds a reservation).
SpaceScores pass(const ShardStore& store, const double* a, size_t B, int threads, uint64_t unit_bytes,
                 const std::vector<uint64_t>& excluded, MemoryBudget& budget) {
  auto space = make_feature_space(FeatureSpaceSettings{}, store, budget);
  for (uint64_t id : excluded) space->mark_selected(id);
  SchedulerOptions so;
  so.threads = threads;
  BlockStream stream(store, so, budget);
  return run_worst_case_analysis(*space, stream, store.plan_blocks(unit_bytes), a, B, budget);
}

}  // namespace

TEST_CASE("format 6: a pass that skips tails keeps the top-B of offering every column, bit for bit",
          "[features][pruning][format6]") {
  uint64_t tails_skipped = 0, tails_read = 0;
  for (Values kind : {Values::kBinary, Values::kInteger, Values::kTied, Values::kReal}) {
    const TailData d(1500, 1200, kind, 7 + static_cast<uint64_t>(kind));
    // Brute force: c_j over the twin, the top-B by c², ties by id.
    for (size_t B : {size_t{1}, size_t{5}}) {
      std::vector<uint64_t> excluded;
      std::vector<ScoredCandidate> oracle;
      for (const auto& [id, col] : d.columns) {
        double c = 0;
        for (auto [i, v] : col) c += d.a[i] * static_cast<double>(v);
        if (c * c > 0) oracle.push_back({c * c, id});
      }
      std::sort(oracle.begin(), oracle.end(), ranks_before);
      excluded.push_back(oracle.front().id);  // a selected feature is never offered
      oracle.erase(oracle.begin());
      oracle.resize(std::min(B, oracle.size()));
      for (uint32_t tile_rows : {100u, 65536u}) {
        test::TiledMemoryStore whole(d.n, d.width(), d.triplets, d.y, tile_rows);
        MemoryBudget reference_budget(64ull << 20);
        const SpaceScores reference = pass(whole, d.a.data(), B, 1, 1 << 20, excluded, reference_budget);
        for (uint64_t tail_below : {uint64_t{4}, uint64_t{40}}) {
          test::TempDir dir("fgm-format6-pass");
          write_store(d, dir.file("s"), tile_rows, 4096, tail_below);
          MemoryBudget budget(64ull << 20);
          auto store = ShardStore::open(dir.file("s"), budget);
          REQUIRE(store->info().format_version == 6);
          uint64_t tails = 0;
          for (const BlockRef& ref : store->plan_blocks(1)) tails += ref.has_tail;
          REQUIRE(tails > 0);
          for (int threads : {1, 2}) {
            for (uint64_t unit : {uint64_t{1}, uint64_t{20000}}) {
              CAPTURE(static_cast<int>(kind), B, tile_rows, tail_below, threads, unit);
              uint64_t plan_tails = 0;
              for (const BlockRef& ref : store->plan_blocks(unit)) plan_tails += ref.has_tail;
              MemoryBudget pass_budget(64ull << 20);
              const SpaceScores r = pass(*store, d.a.data(), B, threads, unit, excluded, pass_budget);
              REQUIRE(r.pass.tails_skipped <= plan_tails);
              REQUIRE(r.top.size() == oracle.size());
              for (size_t k = 0; k < oracle.size(); ++k) {
                REQUIRE(r.top[k].id == oracle[k].id);
                REQUIRE(r.top[k].score == reference.top[k].score);  // bit for bit
                if (kind != Values::kReal) REQUIRE(r.top[k].score == oracle[k].score);
              }
              tails_skipped += r.pass.tails_skipped;
              tails_read += plan_tails - r.pass.tails_skipped;
            }
          }
        }
      }
    }
  }
  // Both branches ran: tails left unread and tails read.
  CHECK(tails_skipped > 0);
  CHECK(tails_read > 0);
}

TEST_CASE("part_out_of_reach: exactly the tails whose every column bound is below the floor",
          "[features][pruning][format6]") {
  ScoreFloor floor;
  CHECK_FALSE(part_out_of_reach(3.0, 2.0, floor));  // floor 0: nothing is out of reach
  floor.raise(36.0 * kScoreBoundMargin);
  CHECK_FALSE(part_out_of_reach(3.0, 2.0, floor));  // bound² = 36·margin: not strictly below
  floor.raise(36.0 * kScoreBoundMargin * (1 + 1e-12));
  CHECK(part_out_of_reach(3.0, 2.0, floor));
  CHECK_FALSE(part_out_of_reach(std::nan(""), 2.0, floor));
  CHECK_FALSE(part_out_of_reach(3.0, std::nan(""), floor));
}

namespace {

// Forwards to a store and records which read-ahead hint each BlockRef got.
class HintRecordingStore : public ShardStore {
 public:
  explicit HintRecordingStore(const ShardStore& inner) : inner_(inner) {}
  const StoreInfo& info() const override { return inner_.info(); }
  const std::string& dir() const override { return inner_.dir(); }
  const int8_t* labels() const override { return inner_.labels(); }
  const uint16_t* classes() const override { return inner_.classes(); }
  std::vector<BlockRef> plan_blocks(uint64_t target_bytes) const override { return inner_.plan_blocks(target_bytes); }
  ColumnBlock read_block(const BlockRef& block, BlockBuffer& buffer) const override {
    return inner_.read_block(block, buffer);
  }
  bool reads_parts() const override { return inner_.reads_parts(); }
  ColumnBlock read_part(const BlockRef& block, BlockPart part, BlockBuffer& buffer) const override {
    return inner_.read_part(block, part, buffer);
  }
  void prefetch_block(const BlockRef& block) const override { record(block, "whole"); }
  void prefetch_head(const BlockRef& block) const override { record(block, "head"); }
  void read_column(uint64_t feature, std::vector<uint32_t>& rows, std::vector<float>& values) const override {
    inner_.read_column(feature, rows, values);
  }
  float column_min(uint64_t feature) const override { return inner_.column_min(feature); }
  float column_max(uint64_t feature) const override { return inner_.column_max(feature); }

  std::map<std::pair<uint64_t, uint64_t>, std::string> hints() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return hints_;
  }

 private:
  void record(const BlockRef& block, const char* kind) const {
    std::lock_guard<std::mutex> lock(mutex_);
    hints_[{block.shard, block.first_block}] = kind;
  }
  const ShardStore& inner_;
  mutable std::mutex mutex_;
  mutable std::map<std::pair<uint64_t, uint64_t>, std::string> hints_;
};

}  // namespace

TEST_CASE("format 6: a pass that may skip tails asks the disk for heads only", "[features][pruning][format6]") {
  const TailData d(1500, 1200, Values::kBinary, 11);
  test::TempDir dir("fgm-format6-hints");
  write_store(d, dir.file("s"), 100, 4096, 40);
  MemoryBudget budget(64ull << 20);
  auto opened = ShardStore::open(dir.file("s"), budget);
  const HintRecordingStore store(*opened);
  const std::vector<BlockRef> refs = store.plan_blocks(1);
  uint64_t with_tail = 0;
  for (const BlockRef& ref : refs) with_tail += ref.has_tail;
  REQUIRE(with_tail > 0);
  REQUIRE(with_tail < refs.size());
  // The linear space's pass reads split blocks in parts: their hint covers the head.
  {
    MemoryBudget pass_budget(64ull << 20);
    const SpaceScores r = pass(store, d.a.data(), 5, 2, 1, {}, pass_budget);
    REQUIRE(r.pass.tails_skipped > 0);
    const auto hints = store.hints();
    REQUIRE(hints.size() == refs.size());
    for (const BlockRef& ref : refs) CHECK(hints.at({ref.shard, ref.first_block}) == (ref.has_tail ? "head" : "whole"));
  }
  // A reader that needs whole blocks (an observer) hints whole blocks.
  {
    const HintRecordingStore whole(*opened);
    MemoryBudget pass_budget(64ull << 20);
    SchedulerOptions so;
    so.threads = 2;
    BlockStream stream(whole, so, pass_budget);
    uint64_t columns = 0;
    stream.set_observer([&](const ColumnBlock& block) { columns += block.column_count; });
    auto space = make_feature_space(FeatureSpaceSettings{}, whole, pass_budget);
    std::vector<double> a = d.a;
    run_worst_case_analysis(*space, stream, refs, a.data(), 5, pass_budget);
    CHECK(columns == d.columns.size());
    for (const auto& [key, kind] : whole.hints()) CHECK(kind == "whole");
  }
}
