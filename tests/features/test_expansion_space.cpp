// HIK / additive expansion spaces against the explicit expansion: an
// in-memory dense oracle (c computed from the expanded matrix, implicit zeros
// expanded row by row) and, independently, the expanded data written as LIBSVM,
// ingested and scored by the group space.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

#include "core/error.h"
#include "features/block_stream.h"
#include "features/feature_space.h"
#include "features/kernel_maps.h"
#include "io/model_file.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "tests/features/explicit_expansion.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

// Columns by j % 5: 0 non-negative sparse, 1 signed sparse (min < 0: implicit
// zeros scale above 0), 2 non-positive sparse (implicit zeros scale to 1),
// 3 dense signed (every row has an entry), 4 very sparse positive. Column
// m−1 is empty, column m−2 holds a single constant value.
std::string expansion_libsvm(uint64_t n, uint64_t m, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::ostringstream out;
  for (uint64_t i = 0; i < n; ++i) {
    out << (unif(rng) < 0.45 ? "+1" : "-1");
    for (uint64_t j = 0; j < m; ++j) {
      double v = 0;
      if (j == m - 1) continue;
      if (j == m - 2) {
        if (unif(rng) < 0.1) v = 2.5;
      } else {
        switch (j % 5) {
          case 0: if (unif(rng) < 0.2) v = 5 * unif(rng); break;
          case 1: if (unif(rng) < 0.3) v = normal(rng); break;
          case 2: if (unif(rng) < 0.25) v = -3 * unif(rng); break;
          case 3: v = normal(rng); if (v == 0) v = 0.5; break;
          default: if (unif(rng) < 0.05) v = 1 + unif(rng); break;
        }
      }
      if (v == 0) continue;
      char buf[32];
      std::snprintf(buf, sizeof buf, " %llu:%.7g", static_cast<unsigned long long>(j + 1), v);
      out << buf;
    }
    out << '\n';
  }
  return out.str();
}

struct Fixture {
  test::TempDir dir{"fgm-expand"};
  MemoryBudget budget{256ull << 20};
  std::unique_ptr<ShardStore> store;
  uint64_t n, m;
  std::vector<std::vector<float>> X;            // dense n×m, float as stored
  std::vector<std::vector<bool>> present;       // has an entry
  std::vector<float> lo, hi;                    // column min/max with implicit zeros
  std::vector<double> a;

  test::InMemoryData data;
  std::unique_ptr<test::ExplicitExpansion> oracle;

  Fixture(uint64_t rows, uint64_t features, uint64_t seed) : n(rows), m(features) {
    std::string path = dir.write("train.svm", expansion_libsvm(rows, features, seed));
    data = test::parse_libsvm_simple(path);
    oracle = std::make_unique<test::ExplicitExpansion>(data, m);
    IngestOptions o;
    o.reader.declared_features = features;
    o.shard_target_bytes = 16 << 10;  // several shards
    ingest_libsvm(path, dir.file("store"), o, budget);
    store = ShardStore::open(dir.file("store"), budget);
    X.assign(n, std::vector<float>(m, 0.0f));
    present.assign(n, std::vector<bool>(m, false));
    for (uint64_t i = 0; i < n; ++i)
      for (const auto& [j, v] : data.rows[i]) {
        X[i][j] = static_cast<float>(v);
        present[i][j] = true;
      }
    for (uint64_t j = 0; j < m; ++j) {
      lo.push_back(static_cast<float>(oracle->lo(j)));
      hi.push_back(static_cast<float>(oracle->hi(j)));
    }
    std::mt19937_64 rng(seed + 1);
    std::uniform_real_distribution<double> unif(0.0, 2.0);
    for (uint64_t i = 0; i < n; ++i) a.push_back(unif(rng) * (data.labels[i] > 0 ? 1 : -1));
  }

  // x' by the definition (independent of scale_to_unit).
  double scaled(uint64_t i, uint64_t j) const { return oracle->scaled(i, j); }

  // Explicit expansion: value of generated feature (j, l) in row i, float32.
  float expanded(const ExpansionMap& map, uint64_t i, uint64_t j, uint32_t l) const {
    return static_cast<float>(map.eval(scaled(i, j))[l]);
  }

  // Oracle group scores s_j = Σ_l (Σ_i a_i φ_l(x'_ij))² over all rows.
  std::vector<double> oracle_scores(const ExpansionMap& map) const {
    std::vector<double> s(m, 0.0);
    for (uint64_t j = 0; j < m; ++j) {
      std::vector<double> c(map.dim(), 0.0);
      for (uint64_t i = 0; i < n; ++i) {
        std::vector<double> phi = map.eval(scaled(i, j));
        for (uint32_t l = 0; l < map.dim(); ++l) c[l] += a[i] * static_cast<float>(phi[l]);
      }
      for (double v : c) s[j] += v * v;
    }
    return s;
  }

  SpaceScores score(FeatureSpace& space, uint64_t B, int threads, uint64_t block_bytes,
                    const ShardStore* st = nullptr) {
    const ShardStore& s = st ? *st : *store;
    SchedulerOptions so;
    so.threads = threads;
    auto blocks = s.plan_blocks(block_bytes);
    fgm::BlockStream streamer(s, so, budget);
    return run_worst_case_analysis(space, streamer, blocks, a.data(), B, budget);
  }
};

std::vector<ScoredCandidate> top_of(const std::vector<double>& s, size_t B,
                                    const std::vector<uint64_t>& excluded = {}) {
  std::vector<ScoredCandidate> all;
  for (uint64_t j = 0; j < s.size(); ++j)
    if (s[j] > 0 && std::find(excluded.begin(), excluded.end(), j) == excluded.end()) all.push_back({s[j], j});
  std::sort(all.begin(), all.end(), ranks_before);
  if (all.size() > B) all.resize(B);
  return all;
}

FeatureSpaceSettings hik_settings(uint32_t r) {
  FeatureSpaceSettings s;
  s.kind = "hik";
  s.levels = r;
  return s;
}

FeatureSpaceSettings additive_settings(const std::string& kernel, uint32_t order, double period) {
  FeatureSpaceSettings s;
  s.kind = "additive";
  s.kernel = kernel;
  s.order = order;
  s.period = period;
  return s;
}

ExpansionMap map_of(const FeatureSpaceSettings& s) {
  if (s.kind == "hik") return ExpansionMap::hik(s.levels);
  AdditiveKernel k = *parse_additive_kernel(s.kernel);
  return ExpansionMap::additive(k, s.order, s.period > 0 ? s.period : additive_default_period(k, s.order));
}

}  // namespace

TEST_CASE("the fixture has the column types the expansion must handle", "[features]") {
  Fixture fx(240, 30, 7);
  for (uint64_t j = 0; j + 2 < 30; ++j) {
    REQUIRE(fx.store->column_min(j) == fx.lo[j]);
    REQUIRE(fx.store->column_max(j) == fx.hi[j]);
    if (j % 5 == 1 || j % 5 == 3) REQUIRE(fx.lo[j] < 0);
    if (j % 5 == 2) REQUIRE(fx.hi[j] == 0);
  }
  std::vector<uint32_t> rows;
  std::vector<float> vals;
  fx.store->read_column(3, rows, vals);
  REQUIRE(rows.size() == 240);  // dense signed column
  fx.store->read_column(29, rows, vals);
  REQUIRE(rows.empty());
  REQUIRE(fx.lo[28] == 0);
  REQUIRE(fx.hi[28] == 2.5f);
}

TEST_CASE("expansion space scores equal the explicit expansion (threads, block sizes)", "[features]") {
  Fixture fx(240, 30, 7);
  std::vector<FeatureSpaceSettings> configs = {hik_settings(1), hik_settings(7), hik_settings(100),
                                               additive_settings("chi2", 5, 0),
                                               additive_settings("intersection", 2, 0.6)};
  for (const auto& settings : configs) {
    ExpansionMap map = map_of(settings);
    std::vector<double> oracle_s = fx.oracle_scores(map);
    const uint64_t B = 8;
    std::vector<ScoredCandidate> oracle = top_of(oracle_s, B);
    // Excluding the two best groups promotes the next ones.
    std::vector<uint64_t> excluded = {oracle[0].id, oracle[3].id};
    std::vector<ScoredCandidate> oracle_ex = top_of(oracle_s, B, excluded);
    for (uint64_t block_bytes : {uint64_t{256}, uint64_t{4 << 10}, uint64_t{1 << 20}}) {
      for (int threads : {1, 2}) {
        INFO(settings.kind << " levels " << settings.levels << " order " << settings.order << " block "
                           << block_bytes << " threads " << threads);
        auto space = make_feature_space(settings, *fx.store, fx.budget);
        REQUIRE(space->kind() == settings.kind);
        REQUIRE(space->dimension() == 30.0 * map.dim());
        SpaceScores r = fx.score(*space, B, threads, block_bytes);
        REQUIRE(r.candidates_scored == 30 * map.dim());
        REQUIRE(r.top.size() == oracle.size());
        for (size_t k = 0; k < oracle.size(); ++k) {
          REQUIRE(r.top[k].id == oracle[k].id);
          REQUIRE(r.top[k].score == Approx(oracle[k].score).epsilon(1e-10));
        }
        for (uint64_t g : excluded) space->mark_selected(g);
        SpaceScores r2 = fx.score(*space, B, threads, block_bytes);
        REQUIRE(r2.top.size() == oracle_ex.size());
        for (size_t k = 0; k < oracle_ex.size(); ++k) {
          REQUIRE(r2.top[k].id == oracle_ex[k].id);
          REQUIRE(r2.top[k].score == Approx(oracle_ex[k].score).epsilon(1e-10));
        }
      }
    }
    // Every column type is among the scored groups with a nonzero score
    // (the implicit-zero correction matters for types 1 and 2).
    for (uint64_t j : {0, 1, 2, 3, 4}) REQUIRE(oracle_s[j] > 0);
    REQUIRE(oracle_s[29] == 0);
  }
}

TEST_CASE("expansion space equals the group space on the ingested explicit expansion", "[features]") {
  Fixture fx(200, 25, 21);
  for (const auto& settings : {hik_settings(7), additive_settings("chi2", 3, 0.45)}) {
    ExpansionMap map = map_of(settings);
    const uint32_t D = map.dim();
    // Expanded LIBSVM (labels as in the base data) and a group file.
    std::ostringstream text;
    test::InMemoryData base = test::parse_libsvm_simple(fx.dir.file("train.svm"));
    for (uint64_t i = 0; i < fx.n; ++i) {
      text << (base.labels[i] > 0 ? "+1" : "-1");
      for (uint64_t j = 0; j < fx.m; ++j)
        for (uint32_t l = 0; l < D; ++l) {
          float v = fx.expanded(map, i, j, l);
          if (v == 0) continue;
          char buf[48];
          std::snprintf(buf, sizeof buf, " %llu:%.9g", static_cast<unsigned long long>(j * D + l + 1),
                        static_cast<double>(v));
          text << buf;
        }
      text << '\n';
    }
    std::ostringstream groups;
    for (uint64_t j = 0; j < fx.m; ++j) {
      for (uint32_t l = 0; l < D; ++l) groups << (j * D + l + 1) << ' ';
      groups << '\n';
    }
    std::string tag = settings.kind;
    std::string expanded_path = fx.dir.write(tag + "-expanded.svm", text.str());
    std::string group_path = fx.dir.write(tag + "-groups.txt", groups.str());
    IngestOptions o;
    o.reader.declared_features = fx.m * D;
    o.shard_target_bytes = 16 << 10;
    ingest_libsvm(expanded_path, fx.dir.file(tag + "-store"), o, fx.budget);
    auto expanded_store = ShardStore::open(fx.dir.file(tag + "-store"), fx.budget);
    REQUIRE(expanded_store->info().n_rows == fx.n);
    for (uint64_t i = 0; i < fx.n; ++i) REQUIRE(expanded_store->labels()[i] == fx.store->labels()[i]);

    FeatureSpaceSettings gs;
    gs.groups_path = group_path;
    auto group_space = make_feature_space(gs, *expanded_store, fx.budget);
    SpaceScores want = fx.score(*group_space, 10, 1, 4 << 10, expanded_store.get());
    for (int threads : {1, 2}) {
      auto space = make_feature_space(settings, *fx.store, fx.budget);
      SpaceScores got = fx.score(*space, 10, threads, 2 << 10);
      REQUIRE(got.top.size() == want.top.size());
      for (size_t k = 0; k < want.top.size(); ++k) {
        REQUIRE(got.top[k].id == want.top[k].id);
        REQUIRE(got.top[k].score == Approx(want.top[k].score).epsilon(1e-10));
      }
    }
  }
}

TEST_CASE("materialised columns equal the explicit expansion; the model predicts the same values",
          "[features]") {
  Fixture fx(240, 30, 7);
  // One group of each column type, plus the constant column.
  const std::vector<uint64_t> groups = {10, 6, 12, 3, 14, 28};
  for (const auto& settings : {hik_settings(7), hik_settings(100), additive_settings("chi2", 5, 0),
                               additive_settings("intersection", 20, 0)}) {
    ExpansionMap map = map_of(settings);
    auto space = make_feature_space(settings, *fx.store, fx.budget);
    SelectedFeatureCache cache(fx.budget, fx.n);
    cache.begin_batch();
    for (uint64_t g : groups) {
      space->mark_selected(g);
      space->materialize(*fx.store, g, cache);
    }
    // Expected: for each group, each level with a nonzero value, in level order.
    size_t k = 0;
    for (uint64_t j : groups) {
      for (uint32_t l = 0; l < map.dim(); ++l) {
        std::vector<uint32_t> rows;
        std::vector<float> vals;
        for (uint64_t i = 0; i < fx.n; ++i) {
          float v = fx.expanded(map, i, j, l);
          if (v != 0) rows.push_back(static_cast<uint32_t>(i)), vals.push_back(v);
        }
        if (rows.empty()) continue;
        INFO(settings.kind << " group " << j << " level " << l);
        REQUIRE(k < cache.num_columns());
        const FeatureKey& key = cache.key(k);
        REQUIRE(key.kind == map.kind());
        REQUIRE(key.ids[0] == j);
        REQUIRE(key.level == l);
        REQUIRE(key.group == j);
        std::vector<uint32_t> col_rows;
        std::vector<float> col_vals;
        cache.column(k).entries(col_rows, col_vals);
        REQUIRE(col_rows == rows);
        REQUIRE(col_vals == vals);
        ++k;
      }
    }
    REQUIRE(k == cache.num_columns());
    // Dense where implicit zeros scale above 0 (signed / non-positive columns).
    uint64_t entries6 = 0;
    for (uint64_t i = 0; i < fx.n; ++i) entries6 += fx.present[i][6];
    bool saw_dense_implicit = false;
    for (size_t q = 0; q < cache.num_columns(); ++q)
      if (cache.key(q).ids[0] == 6 && cache.column(q).nnz > entries6) saw_dense_implicit = true;
    REQUIRE(saw_dense_implicit);

    // describe() + model round trip, then prediction reproduces every cached value.
    Model model;
    space->describe(model);
    REQUIRE(model.feature_kind == settings.kind);
    std::vector<uint64_t> sorted = groups;
    std::sort(sorted.begin(), sorted.end());
    REQUIRE(model.scale_ids == sorted);
    for (size_t s = 0; s < sorted.size(); ++s) {
      REQUIRE(model.scale_min[s] == fx.lo[sorted[s]]);
      REQUIRE(model.scale_max[s] == fx.hi[sorted[s]]);
    }
    if (settings.kind == "hik") {
      REQUIRE(model.levels == settings.levels);
    } else {
      REQUIRE(model.order == settings.order);
      REQUIRE(model.kernel == settings.kernel);
      REQUIRE(model.period == map.period());
    }
    for (size_t q = 0; q < cache.num_columns(); ++q) {
      ModelFeature f;
      f.key = cache.key(q);
      f.weight = 1.0 + q;
      model.features.push_back(f);
    }
    write_model(fx.dir.file("model.fgm"), model);
    Model read = read_model(fx.dir.file("model.fgm"));
    REQUIRE(read.scale_ids == model.scale_ids);
    REQUIRE(read.scale_min == model.scale_min);
    REQUIRE(read.scale_max == model.scale_max);
    REQUIRE(read.period == model.period);
    ExpansionEvaluator ev(read);
    for (size_t q = 0; q < cache.num_columns(); ++q) {
      const ModelFeature& f = read.features[q];
      std::vector<float> dense(fx.n, 0.0f);
      cache.column(q).for_each([&](uint32_t row, float value) { dense[row] = value; });
      for (uint64_t i = 0; i < fx.n; ++i) {
        double raw = fx.present[i][f.key.ids[0]] ? fx.X[i][f.key.ids[0]] : 0.0;
        REQUIRE(ev.value(f, raw) == dense[i]);
      }
      REQUIRE(expansion_feature_value(read, f, 0.0) == ev.value(f, 0.0));
    }
  }
}

TEST_CASE("expansion settings are validated", "[features]") {
  Fixture fx(20, 6, 3);
  FeatureSpaceSettings s = additive_settings("rbf", 5, 0);
  REQUIRE_THROWS_AS(make_feature_space(s, *fx.store, fx.budget), Error);
  s = additive_settings("chi2", 0, 0);
  REQUIRE_THROWS_AS(make_feature_space(s, *fx.store, fx.budget), Error);
  s = hik_settings(0);
  REQUIRE_THROWS_AS(make_feature_space(s, *fx.store, fx.budget), Error);
  auto ok = make_feature_space(additive_settings("intersection", 5, 0), *fx.store, fx.budget);
  Model m;
  ok->describe(m);
  REQUIRE(m.period == additive_default_period(AdditiveKernel::kIntersection, 5));
  REQUIRE(m.scale_ids.empty());
}
