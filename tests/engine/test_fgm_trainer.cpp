#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <cstring>

#include "core/error.h"
#include "engine/evaluate.h"
#include "engine/fgm_trainer.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "synth/synthetic_data.h"
#include "tests/engine/mixed_data.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

std::unique_ptr<ShardStore> make_store(const test::TempDir& dir, const std::string& text_path,
                                       MemoryBudget& budget, uint64_t shard_bytes = 0) {
  IngestOptions o;
  o.shard_target_bytes = shard_bytes;
  o.block_bytes = 4 << 10;  // many stored blocks (plan_blocks groups whole ones)
  o.tile_rows = 256;        // many tiles
  ingest_libsvm(text_path, dir.file("store"), o, budget);
  return ShardStore::open(dir.file("store"), budget);
}

TrainSettings small_settings(uint64_t B, int T, int threads) {
  TrainSettings s;
  s.B = B;
  s.max_iterations = T;
  s.eps_outer = 0;  // run all T iterations
  s.apg.C = 10;
  s.apg.threads = threads;
  s.scheduler.threads = threads;
  s.block_bytes = 16 << 10;
  return s;
}

}  // namespace

TEST_CASE("FGM recovers planted features of Section 8.2-style data", "[engine][fgm]") {
  test::TempDir dir("fgm-train");
  SynthOptions so;
  so.rows = 1000;
  so.test_rows = 1000;
  so.features = 600;
  so.relevant = 20;
  so.seed = 3;
  PlantedTruth truth = write_gaussian_synthetic(dir.path.string(), so);
  MemoryBudget budget(512ull << 20);
  auto store = make_store(dir, dir.file("train.svm"), budget, 256 << 10);
  TrainOutcome out = train_fgm(*store, small_settings(5, 4, 2), budget);
  REQUIRE(out.model.features.size() == 20);
  uint64_t recovered = 0;
  for (const auto& f : out.model.features)
    if (std::binary_search(truth.ids.begin(), truth.ids.end(), f.key.ids[0])) ++recovered;
  CAPTURE(recovered);
  REQUIRE(recovered >= 17);
  EvalResult test = evaluate_file(dir.file("test.svm"), out.model, false, budget);
  CAPTURE(test.accuracy);
  REQUIRE(test.accuracy > 0.85);
  REQUIRE(test.auc > 0.9);
  // Objectives decrease monotonically across outer iterations (warm-started, nested problems).
  for (size_t t = 1; t < out.iterations.size(); ++t)
    REQUIRE(out.iterations[t].objective <= out.iterations[t - 1].objective * (1 + 1e-9));
  // The SIP violation certificate shrinks as constraints are added.
  REQUIRE(std::isfinite(out.final_sip_violation));
  REQUIRE(out.final_sip_violation < out.iterations.front().sip_violation);
}

TEST_CASE("same model for engine.threads = 1 and 2", "[engine][fgm][determinism]") {
  test::TempDir dir("fgm-det");
  std::string path = dir.write("train.svm", test::random_libsvm(900, 400, 0.05, 17, {3, 40, 41, 200, 333}));
  for (auto loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    MemoryBudget budget(256ull << 20);
    auto store = make_store(dir, path, budget, 32 << 10);
    TrainSettings s1 = small_settings(4, 5, 1), s2 = small_settings(4, 5, 2);
    s1.apg.loss = s2.apg.loss = loss;
    s1.apg.bias = s2.apg.bias = true;
    TrainOutcome a = train_fgm(*store, s1, budget);
    TrainOutcome b = train_fgm(*store, s2, budget);
    REQUIRE(a.model.features.size() == b.model.features.size());
    for (size_t k = 0; k < a.model.features.size(); ++k) {
      REQUIRE(a.model.features[k].key.ids[0] == b.model.features[k].key.ids[0]);
      REQUIRE(a.model.features[k].weight == b.model.features[k].weight);  // bit-identical
    }
    REQUIRE(a.model.bias == b.model.bias);
    for (size_t t = 0; t < a.iterations.size(); ++t)
      REQUIRE(a.iterations[t].objective == b.iterations[t].objective);
    store.reset();
    std::filesystem::remove_all(dir.file("store"));
  }
}

TEST_CASE("outer stopping rules", "[engine][fgm]") {
  test::TempDir dir("fgm-stop");
  std::string path = dir.write("train.svm", test::random_libsvm(300, 30, 0.3, 2, {1, 2}));
  MemoryBudget budget(128ull << 20);
  auto store = make_store(dir, path, budget);
  SECTION("nothing new to select") {
    TrainOutcome out = train_fgm(*store, small_settings(8, 20, 1), budget);
    REQUIRE(out.stop_reason == "no_new_features");
    REQUIRE(out.model.features.size() <= 30);
    // Every feature with a nonzero column was selected before stopping.
    REQUIRE(out.model.features.size() >= 29);
  }
  SECTION("relative SIP violation") {
    // Stops before iteration t+1 once α^t's SIP violation (37) is at most
    // eps_outer·F_t; iterations[t].sip_violation is α^t's (scored before
    // iteration t+1's batch).
    TrainSettings s = small_settings(2, 20, 1);
    s.eps_outer = 0.05;
    TrainOutcome out = train_fgm(*store, s, budget);
    REQUIRE(out.stop_reason == "eps_outer");
    REQUIRE(out.final_sip_violation <= 0.05 * out.iterations.back().objective);
    for (size_t t = 1; t < out.iterations.size(); ++t)
      REQUIRE(out.iterations[t].sip_violation > 0.05 * out.iterations[t - 1].objective);
  }
  SECTION("iteration cap") {
    TrainOutcome out = train_fgm(*store, small_settings(2, 3, 1), budget);
    REQUIRE(out.stop_reason == "max_iterations");
    REQUIRE(out.iterations.size() == 3);
    REQUIRE(out.model.features.size() == 6);
  }
}

TEST_CASE("group selection adds whole groups", "[engine][fgm][groups]") {
  test::TempDir dir("fgm-group");
  std::string path = dir.write("train.svm", test::random_libsvm(400, 60, 0.2, 4, {10, 11, 12}));
  std::string groups = dir.write("groups.txt", "11 12 13\n1 2 3 4\n40 41\n");
  MemoryBudget budget(128ull << 20);
  auto store = make_store(dir, path, budget);
  TrainSettings s = small_settings(1, 2, 2);
  s.space.groups_path = groups;
  TrainOutcome out = train_fgm(*store, s, budget);
  REQUIRE(out.model.feature_kind == "group");
  // The planted features 10,11,12 (0-based) are exactly group 0 (ids 11 12 13 in the file).
  REQUIRE(out.model.features.size() >= 3);
  REQUIRE(out.model.features[0].key.group == 0);
  REQUIRE(out.model.features[0].key.ids[0] == 10);
  REQUIRE(out.model.features[2].key.ids[0] == 12);
}

TEST_CASE("a budget too small for the run is a clear out-of-memory error", "[engine][fgm][budget]") {
  test::TempDir dir("fgm-oom");
  std::string path = dir.write("train.svm", test::random_libsvm(2000, 100, 0.5, 8));
  MemoryBudget big(256ull << 20);
  IngestOptions o;
  ingest_libsvm(path, dir.file("store"), o, big);
  MemoryBudget tiny(40000);
  try {
    auto store = ShardStore::open(dir.file("store"), tiny);
    train_fgm(*store, small_settings(50, 2, 1), tiny);
    FAIL("expected the budget to be exceeded");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::kOutOfMemory);
    REQUIRE(std::string(e.what()).find("engine.memory_budget") != std::string::npos);
  }
}

TEST_CASE("fgm.max_features is exact in every space, counting features or groups", "[engine][fgm]") {
  test::TempDir dir("fgm-max-features");
  const uint64_t m = 12;
  std::string train = dir.write("train.svm", test::mixed_libsvm(300, m, 11));
  std::string groups = dir.write("groups.txt", "1 2 3\n4 5 6\n7 8 9\n10 11 12\n");
  MemoryBudget budget(256ull << 20);
  auto store = make_store(dir, train, budget);
  struct Kind {
    std::string name;
    FeatureSpaceSettings space;
    uint64_t max_units;
  };
  std::vector<Kind> kinds(5);
  kinds[0] = {"linear", {}, 7};
  kinds[1] = {"group", {}, 3};
  kinds[1].space.groups_path = groups;
  kinds[2] = {"poly2", {}, 7};
  kinds[2].space.kind = "poly2";
  kinds[3] = {"hik", {}, 7};
  kinds[3].space.kind = "hik";
  kinds[3].space.levels = 8;
  kinds[4] = {"additive", {}, 7};
  kinds[4].space.kind = "additive";
  kinds[4].space.order = 2;
  // Selection units of a model, counted from its feature keys.
  auto units = [](const Model& model, const std::string& kind) -> uint64_t {
    if (kind == "linear" || kind == "poly2") return model.features.size();
    std::set<uint64_t> distinct;
    for (const auto& f : model.features) distinct.insert(kind == "group" ? f.key.group : f.key.ids[0]);
    return distinct.size();
  };
  for (const Kind& kind : kinds) {
    for (uint64_t cap = 1; cap <= kind.max_units; cap += 2) {
      INFO(kind.name << " fgm.max_features=" << cap);
      TrainSettings s = small_settings(2, 1000, 1);
      s.space = kind.space;
      s.max_features = cap;
      TrainOutcome out = train_fgm(*store, s, budget);
      REQUIRE(out.stop_reason == "max_features");
      REQUIRE(units(out.model, kind.name) == cap);
      if (kind.name == "hik" || kind.name == "additive") REQUIRE(out.model.features.size() > cap);
    }
  }
}

// A tight budget slows a run down but does not change it: the APG inner-product
// cache shrinks, fewer scoring blocks are in flight, the store is not kept
// resident. Every budget from ample down to the smallest that still completes
// gives the same model, bit for bit; below that the run fails cleanly.
TEST_CASE("the model is the same bits under any budget that fits the needed data",
          "[engine][fgm][budget]") {
  test::TempDir dir("fgm-tight");
  // Binary-valued columns of a few densities (ties in the scores) and planted features.
  std::string path = dir.write("train.svm", test::random_libsvm(3000, 120, 0.1, 23, {2, 9, 50, 77}));
  {
    MemoryBudget budget(256ull << 20);
    IngestOptions o;
    o.shard_target_bytes = 64 << 10;
    ingest_libsvm(path, dir.file("store"), o, budget);
  }
  for (auto loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    CAPTURE(loss_name(loss));
    TrainSettings s = small_settings(3, 4, 2);
    s.apg.loss = loss;
    s.apg.bias = true;
    auto train = [&](uint64_t limit) {
      MemoryBudget budget(limit);
      auto store = ShardStore::open(dir.file("store"), budget);
      TrainOutcome out = train_fgm(*store, s, budget);
      REQUIRE(budget.peak() <= limit);
      return out;
    };
    TrainOutcome ample = train(256ull << 20);
    REQUIRE(ample.iterations.size() == 4);
    for (const auto& r : ample.iterations) REQUIRE(r.apg_recomputed_products == 0);
    uint64_t limit = ample.budget_peak, smallest = 0;
    bool shrunk = false;
    while (true) {
      limit = limit * 9 / 10;
      TrainOutcome tight;
      try {
        tight = train(limit);
      } catch (const Error& e) {
        REQUIRE(e.kind() == ErrorKind::kOutOfMemory);
        break;
      }
      CAPTURE(limit);
      smallest = limit;
      for (const auto& r : tight.iterations) shrunk = shrunk || r.apg_recomputed_products > 0;
      REQUIRE(tight.model.features.size() == ample.model.features.size());
      for (size_t k = 0; k < ample.model.features.size(); ++k) {
        REQUIRE(tight.model.features[k].key == ample.model.features[k].key);
        REQUIRE(std::memcmp(&tight.model.features[k].weight, &ample.model.features[k].weight,
                            sizeof(double)) == 0);
      }
      REQUIRE(std::memcmp(&tight.model.bias, &ample.model.bias, sizeof(double)) == 0);
      REQUIRE(std::memcmp(&tight.model.objective, &ample.model.objective, sizeof(double)) == 0);
    }
    // The cache really shrank, and the run completed below the ample peak. (The
    // sparse APG holds only the rows its columns touch, so the ample peak is
    // already close to what the run needs: no fixed fraction is promised.)
    REQUIRE(shrunk);
    REQUIRE(smallest > 0);
    REQUIRE(smallest < ample.budget_peak);
  }
}

// Issue 7 item 7: fgm.B = 10^9 on a small store. Each scoring block's top-B
// cache and the selected list hold at most the candidates there are, counted.
TEST_CASE("B = 10^9 on a small store runs within the budget", "[engine][fgm][budget]") {
  test::TempDir dir("fgm-huge-b");
  std::string path = dir.write("train.svm", test::random_libsvm(400, 60, 0.2, 5, {1, 4}));
  {
    MemoryBudget budget(256ull << 20);
    IngestOptions o;
    ingest_libsvm(path, dir.file("store"), o, budget);
  }
  for (const char* kind : {"linear", "hik"}) {
    CAPTURE(kind);
    // hik selects every level of a base feature: its columns need more.
    MemoryBudget budget(std::string(kind) == "linear" ? 8ull << 20 : 64ull << 20);
    auto store = ShardStore::open(dir.file("store"), budget);
    TrainSettings s = small_settings(1000000000ull, 1, 2);
    s.space.kind = kind;
    TrainOutcome out = train_fgm(*store, s, budget);
    REQUIRE(budget.peak() <= budget.limit());
    // Every feature with a nonzero score enters at once (α⁰ = C·1, so the
    // score is (C Σ_i y_i x_ij)²): the oracle counts those columns.
    uint64_t scoring = 0;
    for (uint64_t j = 0; j < 60; ++j) {
      std::vector<uint32_t> rows;
      std::vector<float> values;
      store->read_column(j, rows, values);
      long double c = 0;
      for (size_t k = 0; k < rows.size(); ++k) c += store->labels()[rows[k]] * (long double)values[k];
      scoring += c != 0 ? 1 : 0;
    }
    REQUIRE(out.iterations.size() == 1);
    REQUIRE(scoring > 10);
    if (std::string(kind) == "linear") REQUIRE(out.model.features.size() == scoring);
    else REQUIRE(out.model.features.size() >= scoring);  // hik: one group of levels per base feature
  }
}

// Issue 7 item 7: evaluate_file's per-row vectors (labels, scores, the AUC
// rank order) are reserved: the budget's peak covers them, and a budget too
// small for the file is a clear out-of-memory error.
TEST_CASE("evaluating a file reserves its per-row memory", "[engine][evaluate][budget]") {
  test::TempDir dir("fgm-eval-budget");
  const uint64_t rows = 20000;
  std::string train = dir.write("train.svm", test::random_libsvm(300, 20, 0.3, 3, {1, 2}));
  std::string test_file = dir.write("test.svm", test::random_libsvm(rows, 20, 0.3, 4, {1, 2}));
  MemoryBudget budget(256ull << 20);
  auto store = make_store(dir, train, budget);
  TrainOutcome out = train_fgm(*store, small_settings(3, 1, 1), budget);
  store.reset();
  MemoryBudget eval_budget(64ull << 20);
  EvalResult r = evaluate_file(test_file, out.model, true, eval_budget);
  REQUIRE(r.rows == rows);
  REQUIRE(eval_budget.used() == 0);
  // scores (8) + labels (1) per row, plus the rank order (8) while AUC runs.
  REQUIRE(eval_budget.peak() >= rows * (8 + 1 + 8));
  MemoryBudget tiny(64 << 10);
  try {
    evaluate_file(test_file, out.model, false, tiny);
    FAIL("expected out-of-memory");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::kOutOfMemory);
    REQUIRE(std::string(e.what()).find("evaluation scores") != std::string::npos);
  }
}

// A budget with room for fewer blocks than the token count runs fewer in
// flight (same results, every block once), down to one; without room for one
// block's read buffer it fails.
TEST_CASE("scoring runs fewer blocks in flight when the budget is short", "[engine][scheduler][budget]") {
  test::TempDir dir("fgm-tokens");
  std::string path = dir.write("train.svm", test::random_libsvm(2000, 300, 0.2, 6));
  MemoryBudget big(256ull << 20);
  auto store = make_store(dir, path, big);
  std::vector<BlockRef> blocks = store->plan_blocks(8 << 10);
  REQUIRE(blocks.size() > 8);
  uint64_t largest = 0;
  for (const auto& b : blocks) largest = std::max(largest, b.read_bytes);
  SchedulerOptions o;
  o.threads = 2;  // 6 tokens
  auto count_nnz = [&](MemoryBudget& budget) {
    uint64_t nnz = 0;
    BlockStream stream(*store, o, budget);
    stream_blocks<uint64_t>(
        stream, blocks, "count", [](const BlockRef&, const ColumnBlock& b) { return b.nnz(); },
        [&](uint64_t&& k) { nnz += k; });
    return nnz;
  };
  MemoryBudget three(3 * largest);
  REQUIRE(count_nnz(three) == store->info().nnz);
  REQUIRE(three.peak() <= 3 * largest);
  MemoryBudget one(largest + largest / 2);
  REQUIRE(count_nnz(one) == store->info().nnz);
  REQUIRE(one.peak() <= largest + largest / 2);
  MemoryBudget none(largest / 2);
  try {
    count_nnz(none);
    FAIL("expected out-of-memory");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::kOutOfMemory);
    REQUIRE(std::string(e.what()).find("scoring blocks in flight") != std::string::npos);
  }
}

// Read buffers are held only inside a transform: at most one per thread is
// reserved, whatever the token count. A stream keeps them for its next pass
// (reserved under their own purpose) while they take at most a quarter of
// what the budget has free, and gives them back when it goes; a tighter budget unmaps them at
// the end of every pass.
TEST_CASE("a stream keeps one read buffer per thread between passes, reserved", "[engine][scheduler][budget]") {
  test::TempDir dir("fgm-buffers");
  std::string path = dir.write("train.svm", test::random_libsvm(2000, 300, 0.2, 6));
  MemoryBudget big(256ull << 20);
  auto store = make_store(dir, path, big);
  std::vector<BlockRef> blocks = store->plan_blocks(8 << 10);
  REQUIRE(blocks.size() > 8);
  uint64_t largest = 0;
  for (const auto& b : blocks) largest = std::max(largest, b.read_bytes);
  SchedulerOptions o;
  o.threads = 2;  // 6 tokens, 2 readers
  o.keep_buffers_from = 0;  // these blocks are KiBs
  auto count_nnz = [&](const BlockStream& stream) {
    uint64_t nnz = 0;
    stream_blocks<uint64_t>(
        stream, blocks, "count", [](const BlockRef&, const ColumnBlock& b) { return b.nnz(); },
        [&](uint64_t&& k) { nnz += k; });
    return nnz;
  };
  SECTION("kept: a quarter of the free budget holds them") {
    MemoryBudget budget(16 * largest);
    const uint64_t before = budget.used();
    {
      BlockStream stream(*store, o, budget);
      REQUIRE(count_nnz(stream) == store->info().nnz);
      const uint64_t kept = budget.used() - before;
      CHECK(kept >= largest);
      CHECK(kept <= 2 * largest);
      CHECK(budget.usage_report().find("scoring read buffers kept between passes") != std::string::npos);
      // Later passes may add the second thread's buffer, never more.
      for (int pass = 0; pass < 3; ++pass) REQUIRE(count_nnz(stream) == store->info().nnz);
      CHECK(budget.used() - before >= kept);
      CHECK(budget.used() - before <= 2 * largest);
      CHECK(budget.peak() - before <= 2 * largest);
    }
    CHECK(budget.used() == before);
  }
  SECTION("not kept: small buffers (the default threshold)") {
    MemoryBudget budget(16 * largest);
    SchedulerOptions small = o;
    small.keep_buffers_from = SchedulerOptions().keep_buffers_from;
    const uint64_t before = budget.used();
    BlockStream stream(*store, small, budget);
    for (int pass = 0; pass < 2; ++pass) {
      uint64_t nnz = 0;
      stream_blocks<uint64_t>(
          stream, blocks, "count", [](const BlockRef&, const ColumnBlock& b) { return b.nnz(); },
          [&](uint64_t&& k) { nnz += k; });
      REQUIRE(nnz == store->info().nnz);
      CHECK(budget.used() == before);
    }
  }
  SECTION("not kept: a tight budget") {
    MemoryBudget budget(3 * largest);
    const uint64_t before = budget.used();
    BlockStream stream(*store, o, budget);
    for (int pass = 0; pass < 2; ++pass) {
      REQUIRE(count_nnz(stream) == store->info().nnz);
      CHECK(budget.used() == before);
    }
    CHECK(budget.peak() - before <= 2 * largest);
  }
}

namespace {

bool has_warning(const RunWarnings& w, const std::string& code) {
  for (const auto& x : w.list())
    if (x.code == code) return true;
  return false;
}

// n rows of `columns` features: column 0 carries the label (value 1 + the
// row's sign), the others noise in {0, 1, 2}; column `huge` (if any) is
// multiplied by `factor`.
std::string scaled_text(uint64_t n, int columns, int huge, double factor) {
  std::string text;
  uint64_t state = 12345;
  auto next = [&] { state = state * 6364136223846793005ull + 1442695040888963407ull; return state >> 33; };
  for (uint64_t i = 0; i < n; ++i) {
    const int y = next() % 2 ? 1 : -1;
    text += y > 0 ? "+1" : "-1";
    for (int j = 1; j <= columns; ++j) {
      double v = j == 1 ? 1.5 + 0.5 * y : double(next() % 3);
      if (j == huge) v = (1 + next() % 3) * factor;
      if (v != 0) text += " " + std::to_string(j) + ":" + std::to_string(v);
    }
    text += "\n";
  }
  return text;
}

}  // namespace

TEST_CASE("Scaling warnings fire on badly scaled data and not on well-scaled data",
          "[engine][fgm][warnings]") {
  test::TempDir dir("fgm-warn");
  MemoryBudget budget(256ull << 20);
  TrainSettings s = small_settings(2, 2, 1);
  SECTION("well scaled: no warning, a useful model") {
    dir.write("ok.svm", scaled_text(200, 6, 0, 1));
    auto store = make_store(dir, dir.file("ok.svm"), budget);
    RunWarnings w;
    s.warnings = &w;
    TrainOutcome out = train_fgm(*store, s, budget);
    CAPTURE(out.value_span, out.train_accuracy, out.majority_rate);
    REQUIRE(w.size() == 0);
    REQUIRE(out.value_span <= 2.0);  // max 3 (column 3..6: {1,2}), median 2
    REQUIRE(out.train_accuracy > out.majority_rate);
  }
  SECTION("one column 10^6 times the others: feature_value_span") {
    dir.write("bad.svm", scaled_text(200, 6, 4, 1e6));
    auto store = make_store(dir, dir.file("bad.svm"), budget);
    RunWarnings w;
    s.warnings = &w;
    TrainOutcome out = train_fgm(*store, s, budget);
    CAPTURE(out.value_span);
    // Largest 3e6; median column max 2 (rounded down to a power of 2: 2).
    REQUIRE(out.value_span == Approx(1.5e6));
    REQUIRE(has_warning(w, "feature_value_span"));
    REQUIRE(w.list()[0].message.find("features.transform") != std::string::npos);
  }
  SECTION("poly2 squares the span") {
    dir.write("mid.svm", scaled_text(200, 6, 4, 100));
    auto store = make_store(dir, dir.file("mid.svm"), budget);
    RunWarnings w;
    s.warnings = &w;
    TrainOutcome linear = train_fgm(*store, s, budget);
    REQUIRE(linear.value_span == Approx(150));
    REQUIRE(!has_warning(w, "feature_value_span"));
    s.space.kind = "poly2";
    TrainOutcome poly = train_fgm(*store, s, budget);
    REQUIRE(poly.value_span == Approx(150.0 * 150.0));
    REQUIRE(has_warning(w, "feature_value_span"));
  }
  SECTION("a first batch that explains one row: first_solve_no_progress") {
    // Feature 1 is nonzero (and huge) on one row only: it scores highest, and
    // the solve can lower F_0 by at most that row's loss, 1/2000 of it.
    std::string text;
    for (int i = 0; i < 2000; ++i) text += std::string(i % 2 ? "+1" : "-1") + (i == 0 ? " 1:1000000\n" : "\n");
    dir.write("one.svm", text);
    auto store = make_store(dir, dir.file("one.svm"), budget);
    RunWarnings w;
    s.warnings = &w;
    TrainOutcome out = train_fgm(*store, s, budget);
    REQUIRE(out.iterations.size() == 1);
    REQUIRE(out.iterations[0].rel_decrease < kFirstSolveLimit);
    REQUIRE(has_warning(w, "first_solve_no_progress"));
    REQUIRE(!has_warning(w, "feature_value_span"));  // one column: span 1
    // Every other row has d = 0 (predicted −1): the model is at chance too.
    REQUIRE(out.train_accuracy == 0.5);
    REQUIRE(has_warning(w, "chance_level_model"));
  }
  SECTION("nothing to learn: chance_level_model") {
    // One constant feature and balanced labels: it scores 0, nothing is
    // selected, and the empty model predicts one class for every row.
    std::string text;
    for (int i = 0; i < 100; ++i) text += std::string(i % 2 ? "+1" : "-1") + " 1:1\n";
    dir.write("flat.svm", text);
    auto store = make_store(dir, dir.file("flat.svm"), budget);
    RunWarnings w;
    s.warnings = &w;
    TrainOutcome out = train_fgm(*store, s, budget);
    REQUIRE(out.train_accuracy == 0.5);
    REQUIRE(out.majority_rate == 0.5);
    REQUIRE(has_warning(w, "chance_level_model"));
    REQUIRE(!has_warning(w, "feature_value_span"));
  }
}

// Unbalanced labels (a one-vs-rest class): 5% positives. Feature 1 is in 90% of
// the rows whatever the label (a frequent, useless word); feature 2 is in every
// positive row and in 2% of the negatives (the informative one); feature 3 is
// random noise in 30% of rows. With the bias fitted before the first scoring
// pass, the first feature chosen is feature 2; and F_0 equals the minimum over b
// of the bias-only loss, found by a brute-force search.
TEST_CASE("with a bias, the first scoring pass uses the fitted bias-only model", "[engine][fgm][bias]") {
  test::TempDir dir("fgm-bias0");
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  const int n = 2000;
  std::vector<int> y(n);
  std::string text;
  for (int i = 0; i < n; ++i) {
    y[i] = i % 20 == 0 ? 1 : -1;
    text += y[i] > 0 ? "+1" : "-1";
    if (u(rng) < 0.9) text += " 1:1";
    if (y[i] > 0 || u(rng) < 0.02) text += " 2:1";
    if (u(rng) < 0.3) text += " 3:" + std::to_string(1 + int(u(rng) * 3));  // integer counts, ties
    text += "\n";
  }
  std::string path = dir.write("train.svm", text);
  for (auto loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    CAPTURE(loss_name(loss));
    MemoryBudget budget(256ull << 20);
    auto store = make_store(dir, path, budget);
    TrainSettings s = small_settings(1, 1, 1);
    s.apg.loss = loss;
    s.apg.bias = true;
    s.apg.eps_inner = 1e-6;
    TrainOutcome out = train_fgm(*store, s, budget);
    REQUIRE(out.model.features.size() == 1);
    CHECK(out.model.features[0].key.ids[0] == 1);  // 0-based id of feature 2
    // Brute force: P(b) = Σ loss(y_i · (−b)) over a fine grid, then golden refinement.
    auto P = [&](double b) {
      std::vector<double> d(n, -b);
      std::vector<int8_t> lab(y.begin(), y.end());
      return loss_value(loss, s.apg.C, lab.data(), d);
    };
    double lo = -3, hi = 3;
    for (int k = 0; k < 200; ++k) {
      double m1 = lo + (hi - lo) * 0.382, m2 = lo + (hi - lo) * 0.618;
      if (P(m1) < P(m2)) hi = m2; else lo = m1;
    }
    const double best = P(0.5 * (lo + hi));
    CHECK(out.objective_no_features == Approx(best).epsilon(1e-6));
    CHECK(out.objective_no_features < P(0.0));  // strictly better than b = 0 on unbalanced labels
    // Without a bias the run keeps α⁰ = C·1 and F_0 = P(0).
    s.apg.bias = false;
    TrainOutcome plain = train_fgm(*store, s, budget);
    CHECK(plain.objective_no_features == Approx(P(0.0)).epsilon(1e-12));
  }
}

// Issue 19 item 1: intermediate solves may be inexact, the solve the model
// comes from is certified to apg.gap_tolerance whichever rule ends the run
// (max_iterations and max_features are known before the solve; eps_outer and
// no_new_features end the run after it, which then polishes the last solve).
// Independent check: the final subproblem (31), rebuilt from the model's
// features and batches, solved to a relative gap of 1e-12: its optimum F*
// satisfies F − F* ≤ gap·F.
TEST_CASE("the final solve is certified to apg.gap_tolerance whatever ends the run", "[engine][fgm][certified]") {
  test::TempDir dir("fgm-certified");
  std::string path = dir.write("train.svm", test::random_libsvm(300, 30, 0.3, 2, {1, 2}));
  MemoryBudget budget(128ull << 20);
  auto store = make_store(dir, path, budget);
  struct Case {
    const char* stop;
    uint64_t B;
    int T;
    double eps_outer;
    uint64_t max_features;
  };
  const Case cases[] = {{"no_new_features", 8, 20, 0, 0},
                        {"eps_outer", 2, 20, 0.05, 0},
                        {"max_iterations", 2, 3, 0, 0},
                        {"max_features", 2, 20, 0, 5}};
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    for (bool bias : {false, true}) {
      for (const Case& c : cases) {
        CAPTURE(loss_name(loss), bias, c.stop);
        TrainSettings s = small_settings(c.B, c.T, 1);
        s.eps_outer = c.eps_outer;
        s.max_features = c.max_features;
        s.apg.loss = loss;
        s.apg.bias = bias;
        s.apg.gap_tolerance = 1e-4;
        RunWarnings warnings;
        s.warnings = &warnings;
        TrainOutcome out = train_fgm(*store, s, budget);
        REQUIRE(out.stop_reason == c.stop);
        REQUIRE(warnings.size() == 0);
        const IterationRecord& last = out.iterations.back();
        CAPTURE(last.apg_relative_gap, last.apg_iterations);
        REQUIRE(last.apg_certified);
        REQUIRE(last.apg_converged);
        REQUIRE(last.apg_stop == "converged");
        REQUIRE(last.apg_relative_gap <= 1e-4);
        for (size_t t = 0; t + 1 < out.iterations.size(); ++t) {
          REQUIRE_FALSE(out.iterations[t].apg_certified);
          REQUIRE(out.iterations[t].apg_stop == "inexact");
        }
        REQUIRE(out.model.objective == last.objective);
        // The final subproblem again, solved far tighter.
        SelectedFeatureCache cache(budget, store->info().n_rows);
        uint32_t batch = 0;
        std::vector<uint32_t> rows;
        std::vector<float> values;
        ApgState state;
        for (const auto& f : out.model.features) {
          if (f.batch != batch) {
            cache.begin_batch();
            batch = f.batch;
          }
          store->read_column(f.key.ids[0], rows, values);
          cache.add_column(f.key, rows, values);
          state.w.push_back(f.weight);
        }
        state.b = out.model.bias;
        ApgOptions tight = s.apg;
        tight.gap_tolerance = 1e-12;
        tight.certify = true;
        tight.max_iterations = 200000;
        std::vector<double> decision;
        const ApgResult optimum = solve_apg(cache, store->labels(), tight, state, decision, budget);
        const double F = out.model.objective;
        // The warm start is the model: the tight solve starts at F.
        REQUIRE(optimum.objective <= F * (1 + 1e-12));
        REQUIRE(F - optimum.dual_bound <= last.apg_relative_gap * F * (1 + 1e-9) + 1e-12 * F);
        REQUIRE(F - optimum.objective <= last.apg_relative_gap * F + 1e-12 * F);
      }
    }
  }
}
