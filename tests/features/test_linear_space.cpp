#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
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

  Fixture(uint64_t rows, uint64_t features, double density, uint64_t seed)
      : Fixture(test::random_libsvm(rows, features, density, seed), features) {
    std::mt19937_64 rng(seed + 1);
    std::uniform_real_distribution<double> unif(0.0, 2.0);
    const int8_t* y = store->labels();
    for (uint64_t i = 0; i < rows; ++i) a.push_back(unif(rng) * y[i]);
  }

  // The store of `text`; `a` is left for the caller.
  Fixture(const std::string& text, uint64_t features) {
    std::string path = dir.write("train.svm", text);
    data = test::parse_libsvm_simple(path);
    IngestOptions o;
    o.reader.declared_features = features;
    o.shard_target_bytes = 64 << 10;  // several shards
    o.block_bytes = 512;              // many stored blocks
    o.tile_rows = 64;                 // many tiles
    ingest_libsvm(path, dir.file("store"), o, budget);
    store = ShardStore::open(dir.file("store"), budget);
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

namespace {

// Binary text: each row has features drawn with probability `density`, value
// 1; only features 1, 5, 9, ... occur (c_j = 0 elsewhere: nested groups tie).
std::string binary_libsvm(uint64_t rows, uint64_t features, double density, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  std::string text;
  for (uint64_t i = 0; i < rows; ++i) {
    text += unif(rng) < 0.5 ? "+1" : "-1";
    for (uint64_t j = 1; j <= features; ++j)
      if (unif(rng) < density && j % 4 == 1) text += " " + std::to_string(j) + ":1";
    text += "\n";
  }
  return text;
}

// Groups of [lo, hi) (1-based ids) split in `arity` near-equal parts down to
// single features; every part of two or more features is a line.
void nested_groups(uint64_t lo, uint64_t hi, uint64_t arity, std::string& text) {
  if (hi - lo < 2) return;
  for (uint64_t j = lo; j < hi; ++j) text += std::to_string(j) + " ";
  text += "\n";
  const uint64_t parts = std::min(arity, hi - lo);
  for (uint64_t p = 0; p < parts; ++p)
    nested_groups(lo + (hi - lo) * p / parts, lo + (hi - lo) * (p + 1) / parts, arity, text);
}

}  // namespace

TEST_CASE("tree groups: Remark 2 pruning is exact, on binary, integer-tied and Gaussian data",
          "[features][groups][tree][pruning]") {
  // Binary data with a = y (integer c_j, many exact ties in ‖c_G‖², some
  // child equal to its parent), and Gaussian data with real a.
  Fixture binary(binary_libsvm(400, 150, 0.05, 3), 150);
  for (uint64_t i = 0; i < binary.store->info().n_rows; ++i) binary.a.push_back(binary.store->labels()[i]);
  Fixture gaussian(400, 150, 0.05, 17);
  // A binary tree over 1..100, a ternary one over 101..140; 141..150 are
  // singletons. Parents first, and reversed: children first (a child that
  // ties its parent then wins on its smaller id).
  std::string text;
  nested_groups(1, 101, 2, text);
  nested_groups(101, 141, 3, text);
  std::vector<std::string> lines;
  for (size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos; at = end + 1)
    lines.push_back(text.substr(at, end - at + 1));
  const std::string reversed = std::accumulate(lines.rbegin(), lines.rend(), std::string());
  for (auto [fx, tree_text] : {std::pair{&binary, text}, std::pair{&binary, reversed}, std::pair{&gaussian, text},
                               std::pair{&gaussian, reversed}}) {
    const std::string path = fx->dir.write("tree.txt", tree_text);
    FeatureGroups tree = read_feature_groups(path, 150, 1, fx->budget, GroupStructure::kTree);
    REQUIRE(tree.roots.size() == 2);
    const uint64_t root = tree.roots[0], inner = tree.children[tree.child_ptr[root]];
    const std::vector<double> c = fx->in_memory_c();
    // Every B (the pruning threshold is the B-th best: each tie at the boundary is met).
    for (uint64_t B = 1; B <= tree.n_groups + 1; ++B) {
      for (int threads : {1, 2}) {
        if (threads == 2 && B % 16 != 1) continue;
        std::vector<SpaceScores> runs;
        for (bool pruning : {true, false}) {
          FeatureSpaceSettings fs;
          fs.groups_path = path;
          fs.group_structure = "tree";
          fs.tree_pruning = pruning;
          auto space = make_feature_space(fs, *fx->store, fx->budget);
          // Selected groups (a root and an inner node) are skipped but their subtrees searched.
          space->mark_selected(root);
          space->mark_selected(inner);
          runs.push_back(score_space(*fx, *space, B, threads));
        }
        const SpaceScores& pruned = runs[0];
        const SpaceScores& exhaustive = runs[1];
        CAPTURE(fx == &binary, B, threads, pruned.candidates_scored);
        REQUIRE(exhaustive.candidates_scored == tree.n_groups);
        REQUIRE(pruned.candidates_scored <= exhaustive.candidates_scored);
        if (B <= 16) REQUIRE(pruned.candidates_scored < exhaustive.candidates_scored);
        REQUIRE(pruned.top.size() == exhaustive.top.size());
        for (size_t k = 0; k < pruned.top.size(); ++k) {
          REQUIRE(pruned.top[k].id == exhaustive.top[k].id);
          REQUIRE(pruned.top[k].score == exhaustive.top[k].score);  // the same bits
        }
        // Both against the in-memory brute force without the selected groups.
        std::vector<ScoredCandidate> oracle = brute_force(tree, c, tree.n_groups);
        oracle.erase(std::remove_if(oracle.begin(), oracle.end(),
                                    [&](const ScoredCandidate& s) { return s.id == root || s.id == inner; }),
                     oracle.end());
        if (oracle.size() > B) oracle.resize(B);
        REQUIRE(pruned.top.size() == oracle.size());
        for (size_t k = 0; k < oracle.size(); ++k) {
          REQUIRE(pruned.top[k].id == oracle[k].id);
          if (fx == &binary) REQUIRE(pruned.top[k].score == oracle[k].score);  // integer sums: exact
        }
      }
    }
    if (fx == &binary) {
      // The tie rule is exercised: some groups in the top share a score.
      std::vector<ScoredCandidate> all = brute_force(tree, c, tree.n_groups);
      bool tie = false;
      for (size_t k = 1; k < std::min<size_t>(all.size(), 40); ++k) tie = tie || all[k].score == all[k - 1].score;
      REQUIRE(tie);
    }
  }
}

TEST_CASE("tree groups: a child tying the B-th best is still searched (it wins on its smaller id)",
          "[features][groups][tree][pruning]") {
  // a = y gives c = (3, 0, 0, 0, 2, 0). Groups: D = {5,6} (id 0, s 4), R = {1,2}
  // (id 1, s 9), W = {4,5,6} ⊃ D (id 2, s 4). With B = 2 the search meets R, then
  // W (the B-th best), then D: D ties W and ranks before it, so a search that
  // pruned on s ≤ B-th best would keep W.
  Fixture fx("+1 1:1\n+1 1:1\n+1 1:1 2:1\n-1 2:1 4:1 6:1\n+1 4:1 5:1 6:1\n+1 5:1\n", 6);
  for (uint64_t i = 0; i < fx.store->info().n_rows; ++i) fx.a.push_back(fx.store->labels()[i]);
  const std::string path = fx.dir.write("tree.txt", "5 6\n1 2\n4 5 6\n");
  for (bool pruning : {true, false}) {
    FeatureSpaceSettings fs;
    fs.groups_path = path;
    fs.group_structure = "tree";
    fs.tree_pruning = pruning;
    auto space = make_feature_space(fs, *fx.store, fx.budget);
    SpaceScores r = score_space(fx, *space, 2, 1);
    REQUIRE(r.top.size() == 2);
    REQUIRE(r.top[0].id == 1);
    REQUIRE(r.top[0].score == 9);
    REQUIRE(r.top[1].id == 0);
    REQUIRE(r.top[1].score == 4);
    space = make_feature_space(fs, *fx.store, fx.budget);
    r = score_space(fx, *space, 1, 1);  // W's subtree falls below R: pruned
    REQUIRE(r.top.size() == 1);
    REQUIRE(r.top[0].id == 1);
    REQUIRE(r.candidates_scored == (pruning ? 2 + 1 : 3 + 1));  // + the singleton {3}
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
