#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "core/error.h"
#include "features/block_scores.h"
#include "features/block_stream.h"
#include "features/feature_groups.h"
#include "features/feature_space.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

struct Fixture {
  test::TempDir dir{"fgm-wca"};
  test::InMemoryData data;
  MemoryBudget budget{256ull << 20};  // declared before the store: outlives it
  std::unique_ptr<ShardStore> store;
  std::vector<double> a;  // α∘y

  Fixture(uint64_t rows, uint64_t features, double density, uint64_t seed) {
    std::string text = test::random_libsvm(rows, features, density, seed);
    std::string path = dir.write("train.svm", text);
    data = test::parse_libsvm_simple(path);
    IngestOptions o;
    o.reader.declared_features = features;
    o.shard_target_bytes = 64 << 10;  // several shards
    o.block_bytes = 512;              // many stored blocks
    o.tile_rows = 64;                 // many tiles
    ingest_libsvm(path, dir.file("store"), o, budget);
    store = ShardStore::open(dir.file("store"), budget);
    std::mt19937_64 rng(seed + 1);
    std::uniform_real_distribution<double> unif(0.0, 2.0);
    const int8_t* y = store->labels();
    for (uint64_t i = 0; i < rows; ++i) a.push_back(unif(rng) * y[i]);
  }

  // Oracle: c = Xᵀa from the independent in-memory parse.
  std::vector<double> in_memory_c() const {
    std::vector<double> c(store->info().n_features, 0.0);
    for (size_t i = 0; i < data.rows.size(); ++i)
      for (const auto& [j, v] : data.rows[i]) c[j] += a[i] * static_cast<double>(static_cast<float>(v));
    return c;
  }
};

}  // namespace

TEST_CASE("streamed linear-space scoring equals an in-memory full sort", "[engine][wca]") {
  Fixture fx(700, 900, 0.03, 11);
  REQUIRE(fx.store->info().n_rows == 700);
  // Labels in the store match the text (larger label -> +1).
  for (size_t i = 0; i < fx.data.labels.size(); ++i)
    REQUIRE(fx.store->labels()[i] == (fx.data.labels[i] > 0 ? 1 : -1));
  std::vector<double> c = fx.in_memory_c();

  const std::vector<uint64_t> excluded = {3, 50, 51, 899};
  std::vector<ScoredCandidate> oracle;
  for (uint64_t j = 0; j < c.size(); ++j)
    if (std::find(excluded.begin(), excluded.end(), j) == excluded.end() && c[j] * c[j] > 0)
      oracle.push_back({c[j] * c[j], j});
  std::sort(oracle.begin(), oracle.end(), ranks_before);
  oracle.resize(25);

  for (uint64_t block_bytes : {uint64_t{512}, uint64_t{8 << 10}, uint64_t{1 << 20}}) {
    for (int threads : {1, 2}) {
      SchedulerOptions so;
      so.threads = threads;
      auto space = make_feature_space(FeatureSpaceSettings{}, *fx.store, fx.budget);
      for (uint64_t j : excluded) space->mark_selected(j);
      auto blocks = fx.store->plan_blocks(block_bytes);
      fgm::BlockStream streamer(*fx.store, so, fx.budget);
      SpaceScores r = run_worst_case_analysis(*space, streamer, blocks, fx.a.data(), 25, fx.budget);
      REQUIRE(r.top.size() == 25);
      for (size_t k = 0; k < 25; ++k) {
        REQUIRE(r.top[k].id == oracle[k].id);
        REQUIRE(r.top[k].score == Approx(oracle[k].score).epsilon(1e-12));
      }
      REQUIRE(r.candidates_scored == 900);
      REQUIRE(r.pass.bytes_streamed > 0);
    }
  }
}

TEST_CASE("streamed c matches Xᵀ(α∘y) column by column", "[engine][wca]") {
  Fixture fx(300, 200, 0.1, 5);
  std::vector<double> c = fx.in_memory_c();
  std::vector<uint32_t> rows;
  std::vector<float> vals;
  for (uint64_t j = 0; j < 200; ++j) {
    fx.store->read_column(j, rows, vals);
    double got = tiled_column_dot(rows.data(), vals.data(), rows.size(), fx.a.data(), fx.store->info().tile_rows);
    REQUIRE(got == Approx(c[j]).margin(1e-12).epsilon(1e-12));
  }
}

TEST_CASE("group scores equal brute-force ‖c_G‖² and select the top groups", "[engine][wca][groups]") {
  Fixture fx(400, 120, 0.08, 9);
  std::vector<double> c = fx.in_memory_c();
  // Groups: {1..10}, {11..30 step 2}, {50, 7? no: disjoint}, rest singletons.
  std::string text = "1 2 3 4 5 6 7 8 9 10\n# comment line\n\n";
  for (int j = 11; j <= 30; j += 2) text += std::to_string(j) + " ";
  text += "\n100 60 80\n";
  std::string gpath = fx.dir.write("groups.txt", text);
  FeatureGroups groups = read_feature_groups(gpath, 120, 1, fx.budget);
  REQUIRE(groups.listed_groups == 3);
  REQUIRE(groups.n_groups == 3 + (120 - 10 - 10 - 3));
  std::vector<double> oracle_score(groups.n_groups, 0.0);
  for (uint64_t g = 0; g < groups.n_groups; ++g)
    for (uint64_t p = 0; p < groups.size(g); ++p) oracle_score[g] += c[groups.member(g, p)] * c[groups.member(g, p)];
  std::vector<ScoredCandidate> oracle;
  for (uint64_t g = 0; g < groups.n_groups; ++g)
    if (oracle_score[g] > 0) oracle.push_back({oracle_score[g], g});
  std::sort(oracle.begin(), oracle.end(), ranks_before);
  oracle.resize(6);
  for (int threads : {1, 2}) {
    SchedulerOptions so;
    so.threads = threads;
    FeatureSpaceSettings fs;
    fs.groups_path = gpath;
    auto space = make_feature_space(fs, *fx.store, fx.budget);
    auto blocks = fx.store->plan_blocks(1024);
    fgm::BlockStream streamer(*fx.store, so, fx.budget);
    SpaceScores r = run_worst_case_analysis(*space, streamer, blocks, fx.a.data(), 6, fx.budget);
    REQUIRE(r.top.size() == 6);
    for (size_t k = 0; k < 6; ++k) {
      REQUIRE(r.top[k].id == oracle[k].id);
      REQUIRE(r.top[k].score == Approx(oracle[k].score).epsilon(1e-12));
    }
  }
}

TEST_CASE("group file errors name file, line and column", "[engine][groups]") {
  test::TempDir dir;
  MemoryBudget budget(1 << 20);
  auto err = [&](const std::string& text) {
    std::string p = dir.write("g.txt", text);
    try {
      read_feature_groups(p, 50, 1, budget);
    } catch (const Error& e) {
      REQUIRE(e.kind() == ErrorKind::kInvalidInput);
      return std::string(e.what());
    }
    return std::string();
  };
  REQUIRE(err("1 2 3\n4 x5 6\n").find("g.txt:2:3: 'x5' is not a feature id") != std::string::npos);
  REQUIRE(err("1 2\n3 2\n").find("g.txt:2:3: feature id 2 is already in another group") != std::string::npos);
  REQUIRE(err("0 1\n").find("g.txt:1:1: feature id 0 is outside") != std::string::npos);
  REQUIRE(err("51\n").find("outside the data's features (1..50)") != std::string::npos);
}

TEST_CASE("an exception in a scoring worker reaches the caller", "[engine][scheduler]") {
  Fixture fx(200, 300, 0.05, 3);
  auto blocks = fx.store->plan_blocks(512);
  REQUIRE(blocks.size() > 4);
  for (int threads : {1, 2}) {
    SchedulerOptions so;
    so.threads = threads;
    uint64_t consumed = 0;
    auto run = [&] {
      BlockStream stream(*fx.store, so, fx.budget);
      stream_blocks<int>(
          stream, blocks, "failing",
          [&](const BlockRef& ref, const ColumnBlock&) -> int {
            if (ref.first_column == blocks[3].first_column)
              throw Error(ErrorKind::kIo, "simulated read failure in block 3");
            return 1;
          },
          [&](int&& v) { consumed += v; });
    };
    REQUIRE_THROWS_WITH(run(), Catch::Contains("simulated read failure in block 3"));
    REQUIRE(consumed <= 3);  // in-order consumer never passes the failed block
    REQUIRE(fx.budget.used() < (256ull << 20));
  }
}

namespace {

SpaceScores score_space(Fixture& fx, FeatureSpace& space, uint64_t B, int threads) {
  SchedulerOptions so;
  so.threads = threads;
  auto blocks = fx.store->plan_blocks(2048);
  fgm::BlockStream streamer(*fx.store, so, fx.budget);
  return run_worst_case_analysis(space, streamer, blocks, fx.a.data(), B, fx.budget);
}

// Oracle: every group's ‖c_G‖² from the in-memory c, full sort.
std::vector<ScoredCandidate> brute_force(const FeatureGroups& g, const std::vector<double>& c, size_t B) {
  std::vector<ScoredCandidate> all;
  for (uint64_t q = 0; q < g.n_groups; ++q) {
    double s = 0;
    for (uint64_t p = 0; p < g.size(q); ++p) s += c[g.member(q, p)] * c[g.member(q, p)];
    if (s > 0) all.push_back({s, q});
  }
  std::sort(all.begin(), all.end(), ranks_before);
  if (all.size() > B) all.resize(B);
  return all;
}

}  // namespace

TEST_CASE("overlapping groups: scores vs brute force, augmented columns", "[features][groups]") {
  Fixture fx(300, 60, 0.1, 41);
  std::string path = fx.dir.write("groups.txt", "1 2 3 4 5\n4 5 6 7\n7 8 9 10 11 12\n2 30 40\n");
  FeatureGroups groups = read_feature_groups(path, 60, 1, fx.budget, GroupStructure::kOverlapping);
  auto oracle = brute_force(groups, fx.in_memory_c(), 5);
  FeatureSpaceSettings fs;
  fs.groups_path = path;
  fs.group_structure = "overlapping";
  for (int threads : {1, 2}) {
    auto space = make_feature_space(fs, *fx.store, fx.budget);
    SpaceScores r = score_space(fx, *space, 5, threads);
    REQUIRE(r.top.size() == oracle.size());
    for (size_t k = 0; k < oracle.size(); ++k) {
      REQUIRE(r.top[k].id == oracle[k].id);
      REQUIRE(r.top[k].score == Approx(oracle[k].score).epsilon(1e-12));
    }
  }
  // Selecting two overlapping groups gives each its own copy of the shared columns.
  auto space = make_feature_space(fs, *fx.store, fx.budget);
  SelectedFeatureCache cache(fx.budget, 300);
  cache.begin_batch();
  space->materialize(*fx.store, 0, cache);
  space->materialize(*fx.store, 1, cache);
  REQUIRE(cache.num_columns() == 9);
  REQUIRE(cache.key(3).ids[0] == 3);
  REQUIRE(cache.key(5).ids[0] == 3);  // feature 4 (1-based) again, for group 1
  REQUIRE(cache.key(5).group == 1);
}

TEST_CASE("tree-structured groups: pruned search equals the exhaustive one", "[features][groups][tree]") {
  Fixture fx(500, 256, 0.05, 13);
  // A binary tree over features 1..256: levels of 256, 128, ..., 2 features.
  std::string text;
  for (int size = 256; size >= 2; size /= 2)
    for (int start = 1; start <= 256; start += size) {
      for (int j = start; j < start + size; ++j) text += std::to_string(j) + " ";
      text += "\n";
    }
  std::string path = fx.dir.write("tree.txt", text);
  FeatureGroups tree = read_feature_groups(path, 256, 1, fx.budget, GroupStructure::kTree);
  REQUIRE(tree.roots.size() == 1 + 0);  // the root covers every feature
  REQUIRE(tree.listed_groups == 255);
  std::vector<double> c = fx.in_memory_c();
  for (uint64_t B : {uint64_t{1}, uint64_t{4}, uint64_t{20}}) {
    auto oracle = brute_force(tree, c, B);
    FeatureSpaceSettings fs;
    fs.groups_path = path;
    fs.group_structure = "tree";
    auto space = make_feature_space(fs, *fx.store, fx.budget);
    SpaceScores r = score_space(fx, *space, B, 2);
    REQUIRE(r.top.size() == oracle.size());
    for (size_t k = 0; k < oracle.size(); ++k) REQUIRE(r.top[k].id == oracle[k].id);
    // Remark 2 pruning evaluated fewer groups than the tree has... unless B is large.
    CAPTURE(B, r.candidates_scored);
    if (B == 1) REQUIRE(r.candidates_scored < tree.n_groups);
  }
}

TEST_CASE("tree groups that do not nest are rejected with their lines", "[features][groups][tree]") {
  test::TempDir dir;
  MemoryBudget budget(1 << 20);
  std::string path = dir.write("bad.txt", "1 2 3 4\n3 4 5\n");
  try {
    read_feature_groups(path, 10, 1, budget, GroupStructure::kTree);
    FAIL("expected an error");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::kInvalidInput);
    REQUIRE(std::string(e.what()).find("bad.txt:2: this group and the group on line 1 overlap") != std::string::npos);
  }
  std::string dup = dir.write("dup.txt", "1 2\n2 1\n");
  REQUIRE_THROWS_WITH(read_feature_groups(dup, 10, 1, budget, GroupStructure::kTree),
                      Catch::Contains("repeats the group on line 1"));
  std::string twice = dir.write("twice.txt", "1 2 2\n");
  REQUIRE_THROWS_WITH(read_feature_groups(twice, 10, 1, budget, GroupStructure::kOverlapping),
                      Catch::Contains("twice.txt:1:5: feature id 2 appears twice"));
}
