// Scoring on tiled, doubly compressed blocks (io/column_block.h) against a
// brute-force dense computation: many tiles (tile_rows 1, 3, 64), hashed id
// spaces (ids up to 2^40), binary, integer, tied and real data; results must
// not depend on threads or on how columns are grouped into blocks.
#include <catch2/catch.hpp>

#include <atomic>
#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <set>

#include "features/block_scores.h"
#include "features/block_stream.h"
#include "features/column_pruning.h"
#include "features/feature_groups.h"
#include "features/feature_space.h"
#include "tests/features/tiled_store.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

enum class Kind { kBinary, kInteger, kTied, kReal };

// n × m data with m columns given ids (dense 0..m-1, or increasing random ids
// below 2^40: a hashed space), and a dual vector a (integer for the exact kinds,
// so every sum is exact in double and ties stay ties).
struct Data {
  uint64_t n = 0, m = 0, id_space = 0;
  std::vector<std::vector<float>> X;  // dense, n × m
  std::vector<uint64_t> ids;          // column j's id
  std::vector<double> a;
  std::vector<int8_t> y;
  std::vector<test::Triplet> triplets;

  Data(uint64_t rows, uint64_t cols, Kind kind, bool hashed, uint64_t seed) : n(rows), m(cols) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> unif(0.0, 1.0);
    X.assign(n, std::vector<float>(m, 0.0f));
    for (uint64_t j = 0; j < m; ++j) {
      const double density = 0.02 + 0.3 * unif(rng);
      for (uint64_t i = 0; i < n; ++i) {
        if (kind == Kind::kTied && j % 2 == 1) {
          X[i][j] = X[i][j - 1];  // a copy of the previous column: equal scores
          continue;
        }
        if (unif(rng) >= density) continue;
        X[i][j] = kind == Kind::kBinary || kind == Kind::kTied ? 1.0f
                  : kind == Kind::kInteger                      ? static_cast<float>(1 + rng() % 4)
                                                                : static_cast<float>(unif(rng) * 4 - 2);
      }
    }
    if (hashed) {
      std::set<uint64_t> drawn;
      while (drawn.size() < m) drawn.insert(rng() % (uint64_t{1} << 40));
      ids.assign(drawn.begin(), drawn.end());
      id_space = uint64_t{1} << 40;
    } else {
      for (uint64_t j = 0; j < m; ++j) ids.push_back(j);
      id_space = m;
    }
    for (uint64_t i = 0; i < n; ++i) {
      y.push_back(unif(rng) < 0.5 ? 1 : -1);
      const double alpha = kind == Kind::kReal ? unif(rng) * 2 : static_cast<double>(rng() % 4);
      a.push_back(alpha * y.back());
      for (uint64_t j = 0; j < m; ++j)
        if (X[i][j] != 0) triplets.push_back({static_cast<uint32_t>(i), ids[j], X[i][j]});
    }
  }

  bool exact() const { return a.empty() || std::all_of(a.begin(), a.end(), [](double v) { return v == std::floor(v); }); }

  // Brute force: c_j = Σ_i a_i x_ij over the dense matrix, per dense column.
  std::vector<double> dense_c(const std::vector<double>& dual) const {
    std::vector<double> c(m, 0.0);
    for (uint64_t i = 0; i < n; ++i)
      for (uint64_t j = 0; j < m; ++j) c[j] += dual[i] * static_cast<double>(X[i][j]);
    return c;
  }
  uint64_t dense_index(uint64_t id) const {
    return static_cast<uint64_t>(std::lower_bound(ids.begin(), ids.end(), id) - ids.begin());
  }
  std::unique_ptr<test::TiledMemoryStore> store(uint32_t tile_rows) const {
    return std::make_unique<test::TiledMemoryStore>(n, id_space, triplets, y, tile_rows);
  }
};

const char* kind_name(Kind k) {
  return k == Kind::kBinary ? "binary" : k == Kind::kInteger ? "integer" : k == Kind::kTied ? "tied" : "real";
}

void require_same(const SpaceScores& x, const SpaceScores& y) {
  REQUIRE(x.top.size() == y.top.size());
  for (size_t k = 0; k < x.top.size(); ++k) {
    REQUIRE(x.top[k].id == y.top[k].id);
    REQUIRE(x.top[k].score == y.top[k].score);  // bit for bit
  }
}

SpaceScores score(FeatureSpace& space, const ShardStore& store, const std::vector<double>& a, uint64_t B,
                  int threads, uint64_t block_bytes, MemoryBudget& budget, int tokens = 0) {
  SchedulerOptions so;
  so.threads = threads;
  so.blocks_in_flight = tokens;
  BlockStream stream(store, so, budget);
  const auto blocks = store.plan_blocks(block_bytes);
  return run_worst_case_analysis(space, stream, blocks, a.data(), B, budget);
}

}  // namespace

TEST_CASE("tiled block scores equal a dense brute force (tile_rows 1, 3, 64; dense and hashed ids)",
          "[features][tiled]") {
  for (Kind kind : {Kind::kBinary, Kind::kInteger, Kind::kTied, Kind::kReal}) {
    for (bool hashed : {false, true}) {
      Data d(150, 40, kind, hashed, 7 + static_cast<int>(kind));
      const std::vector<double> c = d.dense_c(d.a);
      std::vector<double> dual2(d.a), dual3(d.a);
      for (uint64_t i = 0; i < d.n; ++i) dual2[i] = -2 * d.a[i] + (i % 3), dual3[i] = (i % 5) - 2.0;
      for (uint32_t tile_rows : {1u, 3u, 64u, 1000u}) {
        CAPTURE(kind_name(kind), hashed, tile_rows);
        auto block = test::build_tiled_block(d.triplets, d.n, tile_rows, 0, d.id_space);
        const ColumnBlock& b = block->view;
        REQUIRE(b.tile_count == (d.n + tile_rows - 1) / tile_rows);
        std::vector<double> got(b.column_count);
        block_column_dots(b, d.a.data(), got.data());
        for (uint64_t k = 0; k < b.column_count; ++k) {
          const uint64_t j = d.dense_index(b.column_ids[k]);
          REQUIRE(d.ids[j] == b.column_ids[k]);
          if (d.exact()) REQUIRE(got[k] == c[j]);
          else REQUIRE(got[k] == Approx(c[j]).epsilon(1e-12).margin(1e-12));
        }
        // Three interleaved vectors: each equals its own single pass bit for bit.
        std::vector<double> inter(3 * d.n), scratch(15), many(3 * b.column_count), single(b.column_count);
        const std::vector<double>* duals[3] = {&d.a, &dual2, &dual3};
        for (uint64_t i = 0; i < d.n; ++i)
          for (size_t r = 0; r < 3; ++r) inter[3 * i + r] = (*duals[r])[i];
        block_column_dots_many(b, inter.data(), 3, scratch.data(), many.data());
        for (size_t r = 0; r < 3; ++r) {
          block_column_dots(b, duals[r]->data(), single.data());
          for (uint64_t k = 0; k < b.column_count; ++k) REQUIRE(many[3 * k + r] == single[k]);
        }
        // A whole column summed tile by tile reproduces the block's c_j bit for bit.
        auto store = d.store(tile_rows);
        std::vector<uint32_t> rows;
        std::vector<float> values;
        for (uint64_t k = 0; k < b.column_count; ++k) {
          store->read_column(b.column_ids[k], rows, values);
          REQUIRE(tiled_column_dot(rows.data(), values.data(), rows.size(), d.a.data(), tile_rows) == got[k]);
        }
        // The CSC view lists every nonzero of every column, rows increasing.
        CscScratch scratch_csc;
        CscColumns cols = csc_columns(b, scratch_csc);
        uint64_t nnz = 0;
        for (uint64_t k = 0; k < cols.column_count; ++k)
          for (uint32_t p = cols.col_ptr[k]; p < cols.col_ptr[k + 1]; ++p, ++nnz) {
            if (p > cols.col_ptr[k]) REQUIRE(cols.row_ids[p - 1] < cols.row_ids[p]);
            REQUIRE(cols.values[p] == d.X[cols.row_ids[p]][d.dense_index(cols.column_ids[k])]);
          }
        REQUIRE(nnz == d.triplets.size());
      }
    }
  }
}

TEST_CASE("linear scoring on tiled blocks: brute-force top-B, identical for threads 1/2/4 and any block grouping",
          "[features][tiled]") {
  for (Kind kind : {Kind::kBinary, Kind::kInteger, Kind::kTied, Kind::kReal}) {
    for (bool hashed : {false, true}) {
      Data d(200, 60, kind, hashed, 31 + static_cast<int>(kind));
      const std::vector<double> c = d.dense_c(d.a);
      const std::vector<uint64_t> excluded = {d.ids[3], d.ids[10], d.ids[59]};
      std::vector<ScoredCandidate> oracle;
      for (uint64_t j = 0; j < d.m; ++j)
        if (c[j] * c[j] > 0 && std::find(excluded.begin(), excluded.end(), d.ids[j]) == excluded.end())
          oracle.push_back({c[j] * c[j], d.ids[j]});
      std::sort(oracle.begin(), oracle.end(), ranks_before);
      const size_t B = 15;
      oracle.resize(std::min(B, oracle.size()));
      for (uint32_t tile_rows : {1u, 3u, 64u}) {
        auto store = d.store(tile_rows);
        std::optional<SpaceScores> first;
        for (int threads : {1, 2, 4}) {
          for (uint64_t block_bytes : {uint64_t{100}, uint64_t{1500}, uint64_t{1} << 30}) {
            CAPTURE(kind_name(kind), hashed, tile_rows, threads, block_bytes);
            MemoryBudget budget(64ull << 20);
            auto space = make_feature_space(FeatureSpaceSettings{}, *store, budget);
            for (uint64_t id : excluded) space->mark_selected(id);
            SpaceScores r = score(*space, *store, d.a, B, threads, block_bytes, budget);
            REQUIRE(r.top.size() == oracle.size());
            for (size_t k = 0; k < oracle.size(); ++k) {
              REQUIRE(r.top[k].id == oracle[k].id);
              if (d.exact()) REQUIRE(r.top[k].score == oracle[k].score);
              else REQUIRE(r.top[k].score == Approx(oracle[k].score).epsilon(1e-10));
            }
            if (!first) first = std::move(r);
            else require_same(*first, r);
          }
        }
      }
    }
  }
}

TEST_CASE("shared one-vs-rest pass on tiled blocks equals each request's own pass bit for bit (linear, group)",
          "[features][tiled]") {
  Data d(180, 50, Kind::kReal, true, 77);
  test::TempDir dir("fgm-tiled-groups");
  std::string gfile;
  for (uint64_t j = 0; j < 12; j += 3)
    gfile += std::to_string(d.ids[j]) + " " + std::to_string(d.ids[j + 1]) + " " + std::to_string(d.ids[j + 2]) + "\n";
  const std::string gpath = dir.write("groups.txt", gfile);
  std::vector<std::vector<double>> duals(3, d.a);
  for (uint64_t i = 0; i < d.n; ++i) duals[1][i] = -0.5 * d.a[i], duals[2][i] = (i % 7) * 0.25 - 0.75;
  for (bool groups : {false, true}) {
    auto store = d.store(3);
    MemoryBudget budget(64ull << 20);
    FeatureSpaceSettings fs;
    if (groups) fs.groups_path = gpath;
    std::vector<std::unique_ptr<FeatureSpace>> spaces;
    std::vector<ScoreRequest> requests;
    for (size_t r = 0; r < 3; ++r) {
      spaces.push_back(make_feature_space(fs, *store, budget));
      spaces.back()->mark_selected(groups ? r : d.ids[r]);
      requests.push_back({spaces.back().get(), duals[r].data(), {}, 8 + r});
    }
    for (int threads : {1, 2, 4}) {
      SchedulerOptions so;
      so.threads = threads;
      BlockStream stream(*store, so, budget);
      const auto blocks = store->plan_blocks(700);
      ScoringContext ctx;
      ctx.store = store.get();
      ctx.blocks = &blocks;
      ctx.stream = &stream;
      ctx.threads = threads;
      ctx.budget = &budget;
      std::vector<SpaceScores> shared = score_many(ctx, requests);
      for (size_t r = 0; r < 3; ++r) {
        CAPTURE(groups, threads, r);
        SpaceScores own = run_worst_case_analysis(*spaces[r], stream, blocks, duals[r].data(), 8 + r, budget);
        require_same(shared[r], own);
        REQUIRE(shared[r].candidates_scored == own.candidates_scored);
      }
    }
  }
}

TEST_CASE("group space over a hashed id space: listed groups and implicit singletons equal brute force",
          "[features][tiled][groups]") {
  for (Kind kind : {Kind::kInteger, Kind::kTied}) {
    Data d(160, 45, kind, true, 5);
    const std::vector<double> c = d.dense_c(d.a);
    test::TempDir dir("fgm-hashed-groups");
    // Three listed groups over columns 0..8, and one over columns 20, 30.
    std::vector<std::vector<uint64_t>> listed = {{0, 1, 2}, {3, 4, 5, 6}, {7, 8}, {20, 30}};
    std::string text;
    for (const auto& g : listed) {
      for (uint64_t j : g) text += std::to_string(d.ids[j]) + " ";
      text += "\n";
    }
    const std::string gpath = dir.write("groups.txt", text);
    // Oracle: listed groups 0..3 by line; every other feature f is the
    // singleton 4 + (number of unlisted features below f), counted directly.
    std::vector<uint64_t> listed_ids;
    for (const auto& g : listed)
      for (uint64_t j : g) listed_ids.push_back(d.ids[j]);
    std::vector<ScoredCandidate> oracle;
    for (size_t g = 0; g < listed.size(); ++g) {
      double s = 0;
      for (uint64_t j : listed[g]) s += c[j] * c[j];
      if (s > 0) oracle.push_back({s, g});
    }
    for (uint64_t j = 0; j < d.m; ++j) {
      if (std::count(listed_ids.begin(), listed_ids.end(), d.ids[j])) continue;
      uint64_t listed_below = 0;
      for (uint64_t id : listed_ids) listed_below += id < d.ids[j];
      if (c[j] * c[j] > 0) oracle.push_back({c[j] * c[j], listed.size() + d.ids[j] - listed_below});
    }
    std::sort(oracle.begin(), oracle.end(), ranks_before);
    oracle.resize(std::min<size_t>(12, oracle.size()));
    auto store = d.store(64);
    for (int threads : {1, 4}) {
      MemoryBudget budget(64ull << 20);
      FeatureSpaceSettings fs;
      fs.groups_path = gpath;
      auto space = make_feature_space(fs, *store, budget);
      REQUIRE(space->dimension() == Approx(4.0 + double(uint64_t{1} << 40) - 11));
      SpaceScores r = score(*space, *store, d.a, 12, threads, 900, budget);
      REQUIRE(r.top.size() == oracle.size());
      for (size_t k = 0; k < oracle.size(); ++k) {
        CAPTURE(kind_name(kind), threads, k, r.top[k].score, oracle[k].score);
        REQUIRE(r.top[k].id == oracle[k].id);
        REQUIRE(r.top[k].score == oracle[k].score);
      }
      REQUIRE(budget.peak() < (4ull << 20));  // nothing sized by the 2^40 id space
    }
  }
}

TEST_CASE("feature groups number the implicit singletons as an explicit enumeration would", "[features][groups]") {
  test::TempDir dir("fgm-singletons");
  MemoryBudget budget(1 << 20);
  const std::string path = dir.write("g.txt", "5 9 2\n40 41\n0\n");
  FeatureGroups g = read_feature_groups(path, 50, 0, budget);
  REQUIRE(g.listed_groups == 3);
  REQUIRE(g.n_groups == 3 + 50 - 6);
  uint64_t next = g.listed_groups;
  for (uint64_t f = 0; f < 50; ++f) {
    if (f == 5 || f == 9 || f == 2 || f == 40 || f == 41 || f == 0) {
      REQUIRE(g.listed_index(f) != UINT64_MAX);
      continue;
    }
    REQUIRE(g.listed_index(f) == UINT64_MAX);
    REQUIRE(g.singleton_group(f) == next);
    REQUIRE(g.singleton_feature(next) == f);
    REQUIRE(g.size(next) == 1);
    REQUIRE(g.member(next, 0) == f);
    ++next;
  }
  REQUIRE(next == g.n_groups);
  REQUIRE(g.member(0, 0) == 2);
  REQUIRE(g.member(0, 2) == 9);
}

TEST_CASE("typed stream: results reach consume in block order through the token slots", "[features][stream]") {
  Data d(90, 70, Kind::kInteger, true, 12);
  auto store = d.store(3);
  MemoryBudget budget(16ull << 20);
  const auto blocks = store->plan_blocks(60);
  REQUIRE(blocks.size() > 20);
  for (int threads : {1, 4}) {
    for (int tokens : {1, 2, 3, 8}) {
      SchedulerOptions so;
      so.threads = threads;
      so.blocks_in_flight = tokens;
      BlockStream stream(*store, so, budget);
      std::vector<std::vector<uint64_t>> seen;
      PassStats stats = stream_blocks<std::vector<uint64_t>>(
          stream, blocks, "order",
          [](const BlockRef& ref, const ColumnBlock& b) {
            std::vector<uint64_t> out = {ref.first_column, b.nnz()};
            for (uint64_t k = 0; k < b.column_count; ++k) out.push_back(b.column_ids[k]);
            return out;
          },
          [&](std::vector<uint64_t>&& r) { seen.push_back(std::move(r)); });
      CAPTURE(threads, tokens);
      REQUIRE(stats.blocks == blocks.size());
      REQUIRE(seen.size() == blocks.size());
      uint64_t nnz = 0;
      for (size_t q = 0; q < blocks.size(); ++q) {
        REQUIRE(seen[q][0] == blocks[q].first_column);
        REQUIRE(seen[q][1] == blocks[q].nnz);
        for (size_t k = 2; k < seen[q].size(); ++k) {
          REQUIRE(seen[q][k] >= blocks[q].first_column);
          REQUIRE(seen[q][k] < blocks[q].end_column);
        }
        REQUIRE(seen[q].size() == 2 + blocks[q].column_count);
        nnz += seen[q][1];
      }
      REQUIRE(nnz == d.triplets.size());
    }
  }
}

TEST_CASE("hik, additive and poly2 scores do not depend on the tile size or threads", "[features][tiled]") {
  Data d(120, 24, Kind::kReal, false, 3);
  for (const char* kind : {"hik", "additive", "poly2"}) {
    std::optional<SpaceScores> first;
    for (uint32_t tile_rows : {1u, 3u, 64u, 120u}) {
      for (int threads : {1, 2}) {
        CAPTURE(kind, tile_rows, threads);
        auto store = d.store(tile_rows);
        MemoryBudget budget(64ull << 20);
        FeatureSpaceSettings fs;
        fs.kind = kind;
        fs.levels = 8;
        auto space = make_feature_space(fs, *store, budget);
        SpaceScores r = score(*space, *store, d.a, 10, threads, 400, budget);
        REQUIRE(!r.top.empty());
        if (!first) first = std::move(r);
        else require_same(*first, r);
      }
    }
  }
}

TEST_CASE("tiled scores on wide tiles: short cells in several chunks, long cells, exact against brute force",
          "[features][tiled]") {
  for (Kind kind : {Kind::kInteger, Kind::kTied}) {
    Data d(640, 400, kind, true, 99);
    const std::vector<double> c = d.dense_c(d.a);
    for (uint32_t tile_rows : {64u, 160u}) {
      auto block = test::build_tiled_block(d.triplets, d.n, tile_rows, 0, d.id_space);
      const ColumnBlock& b = block->view;
      // The walk must cut short cells into chunks, and meet long cells too.
      uint64_t widest_tile = 0, long_cells = 0;
      for (uint32_t t = 0; t < b.tile_count; ++t)
        widest_tile = std::max<uint64_t>(widest_tile, b.cell_ptr[b.tile_cells[t + 1]] - b.cell_ptr[b.tile_cells[t]]);
      for (uint32_t q = 0; q < b.cell_count(); ++q) long_cells += b.cell_ptr[q + 1] - b.cell_ptr[q] >= kMultiAccumulatorCell;
      REQUIRE(widest_tile > 2 * detail::kChunkNnz);
      REQUIRE(long_cells > 0);
      std::vector<double> got(b.column_count);
      block_column_dots(b, d.a.data(), got.data());
      auto store = d.store(tile_rows);
      std::vector<uint32_t> rows;
      std::vector<float> values;
      for (uint64_t k = 0; k < b.column_count; ++k) {
        CAPTURE(kind_name(kind), tile_rows, k);
        REQUIRE(got[k] == c[d.dense_index(b.column_ids[k])]);
        store->read_column(b.column_ids[k], rows, values);
        REQUIRE(tiled_column_dot(rows.data(), values.data(), rows.size(), d.a.data(), tile_rows) == got[k]);
      }
    }
  }
}

namespace {

// The store's rows [first, end) emptied (whole tiles without a nonzero).
std::vector<test::Triplet> without_rows(std::vector<test::Triplet> t, uint32_t first, uint32_t end) {
  t.erase(std::remove_if(t.begin(), t.end(), [&](const test::Triplet& x) { return x.row >= first && x.row < end; }),
          t.end());
  return t;
}

}  // namespace

TEST_CASE("row order: c equals the cell walk bit for bit and a dense brute force (empty, single-row, long cells)",
          "[features][tiled][row_order]") {
  for (Kind kind : {Kind::kBinary, Kind::kInteger, Kind::kTied, Kind::kReal}) {
    Data d(300, 60, kind, kind == Kind::kTied, 71 + static_cast<int>(kind));
    // Rows 64..191 hold nothing: empty tiles for every tile size below 128.
    for (uint64_t i = 64; i < 192; ++i) std::fill(d.X[i].begin(), d.X[i].end(), 0.0f);
    const auto triplets = without_rows(d.triplets, 64, 192);
    const std::vector<double> dense = d.dense_c(d.a);
    for (uint32_t tile_rows : {1u, 3u, 64u, 200u, 65536u}) {
      CAPTURE(kind_name(kind), tile_rows);
      auto block = test::build_tiled_block(triplets, d.n, tile_rows, 0, d.id_space);
      const ColumnBlock& cells = block->view;
      const RowOrderSize size = row_order_size(cells);
      REQUIRE(size.bytes() <= row_order_bytes_bound(cells.nnz(), cells.tile_count));
      std::vector<uint64_t> memory(size.bytes() / 8 + 1, ~uint64_t{0});  // garbage-filled: all of it is written
      const RowOrder order = build_row_order(cells, reinterpret_cast<uint8_t*>(memory.data()));
      REQUIRE(memory.back() == ~uint64_t{0});  // nothing written past size.bytes()
      // Every nonzero once: the short cells' in the entries, rows increasing per tile.
      const uint32_t T = cells.tile_count;
      REQUIRE(order.tile_entries[0] == 0);
      REQUIRE(order.tile_long[0] == 0);
      REQUIRE(order.tile_entries[T] == size.entries);
      REQUIRE(order.tile_long[T] == size.long_cells);
      uint64_t long_nnz = 0;
      for (uint32_t l = 0; l < size.long_cells; ++l) {
        const uint32_t cell = order.long_cells[l];
        REQUIRE(cells.cell_ptr[cell + 1] - cells.cell_ptr[cell] >= kMultiAccumulatorCell);
        long_nnz += cells.cell_ptr[cell + 1] - cells.cell_ptr[cell];
      }
      REQUIRE(size.entries + long_nnz == cells.nnz());
      for (uint32_t t = 0; t < T; ++t)
        for (uint32_t e = order.tile_entries[t] + 1; e < order.tile_entries[t + 1]; ++e)
          REQUIRE(order.row[e - 1] <= order.row[e]);
      if (tile_rows == 64) REQUIRE(order.tile_entries[1] == order.tile_entries[2]);  // rows 64..127: empty
      if (tile_rows == 64) REQUIRE(size.long_cells > 0);
      ColumnBlock by_row = cells;
      by_row.row_order = &order;
      std::vector<double> walked(cells.column_count), summed(cells.column_count);
      block_column_dots(cells, d.a.data(), walked.data());
      block_column_dots(by_row, d.a.data(), summed.data());
      REQUIRE(std::memcmp(walked.data(), summed.data(), summed.size() * sizeof(double)) == 0);
      // K = 3 interleaved duals (a, −a/3, a·i/7): the row-order and cell-walk
      // versions of the many-dual kernel equal the single kernel bit for bit.
      {
        const size_t K = 3;
        std::vector<std::vector<double>> duals(K, d.a);
        for (uint64_t i = 0; i < d.n; ++i) {
          duals[1][i] = -d.a[i] / 3;
          duals[2][i] = d.a[i] * static_cast<double>(i) / 7;
        }
        std::vector<double> interleaved(d.n * K), acc(5 * K);
        for (uint64_t i = 0; i < d.n; ++i)
          for (size_t r = 0; r < K; ++r) interleaved[i * K + r] = duals[r][i];
        std::vector<double> many_walked(cells.column_count * K), many_by_row(cells.column_count * K);
        block_column_dots_many(cells, interleaved.data(), K, acc.data(), many_walked.data());
        std::fill(acc.begin(), acc.end(), 1e300);  // scratch: nothing carried over
        block_column_dots_many(by_row, interleaved.data(), K, acc.data(), many_by_row.data());
        REQUIRE(std::memcmp(many_walked.data(), many_by_row.data(), many_by_row.size() * sizeof(double)) == 0);
        for (size_t r = 0; r < K; ++r) {
          std::vector<double> single(cells.column_count);
          block_column_dots(cells, duals[r].data(), single.data());
          for (uint64_t k = 0; k < cells.column_count; ++k) REQUIRE(many_by_row[k * K + r] == single[k]);
        }
      }
      for (uint64_t k = 0; k < cells.column_count; ++k) {
        const double oracle = dense[d.dense_index(cells.column_ids[k])];
        if (d.exact()) REQUIRE(summed[k] == oracle);
        else REQUIRE(summed[k] == Approx(oracle).epsilon(1e-12).margin(1e-12));
        // The selected-feature cache reproduces the pass's c_j bit for bit.
        std::vector<uint32_t> rows;
        std::vector<float> values;
        for (const auto& t : triplets)
          if (t.column == cells.column_ids[k]) rows.push_back(t.row), values.push_back(t.value);
        std::vector<size_t> by(rows.size());
        for (size_t p = 0; p < by.size(); ++p) by[p] = p;
        std::sort(by.begin(), by.end(), [&](size_t x, size_t y) { return rows[x] < rows[y]; });
        std::vector<uint32_t> r2;
        std::vector<float> v2;
        for (size_t p : by) r2.push_back(rows[p]), v2.push_back(values[p]);
        REQUIRE(tiled_column_dot(r2.data(), v2.data(), r2.size(), d.a.data(), tile_rows) == summed[k]);
      }
    }
  }
}

TEST_CASE("resident tall stores are scored by row order: the streamed pass's top-B bit for bit, threads 1/2",
          "[features][tiled][row_order]") {
  for (Kind kind : {Kind::kBinary, Kind::kInteger, Kind::kTied, Kind::kReal}) {
    Data d(300, 60, kind, kind == Kind::kInteger, 91 + static_cast<int>(kind));
    const std::vector<double> c = d.dense_c(d.a);
    std::vector<ScoredCandidate> oracle;
    for (uint64_t j = 0; j < d.m; ++j)
      if (c[j] * c[j] > 0) oracle.push_back({c[j] * c[j], d.ids[j]});
    std::sort(oracle.begin(), oracle.end(), ranks_before);
    const size_t B = 12;
    oracle.resize(std::min(B, oracle.size()));
    for (uint32_t tile_rows : {1u, 3u, 7u}) {
      auto store = d.store(tile_rows);
      std::optional<SpaceScores> streamed;
      for (int threads : {1, 2}) {
        CAPTURE(kind_name(kind), tile_rows, threads);
        MemoryBudget budget(64ull << 20);
        auto space = make_feature_space(FeatureSpaceSettings{}, *store, budget);
        if (!streamed) streamed = score(*space, *store, d.a, B, threads, 1500, budget);
        Reservation resident = budget.reserve(resident_store_bytes(store->info()), "resident (test)");
        SchedulerOptions so;
        so.threads = threads;
        so.keep_resident = true;
        BlockStream stream(*store, so, budget);
        std::atomic<uint64_t> ordered{0}, seen{0};
        stream.set_observer([&](const ColumnBlock& b) {
          ++seen;
          if (b.row_order) ++ordered;
        });
        const auto blocks = store->plan_blocks(1500);
        for (int pass = 0; pass < 3; ++pass) {
          ordered = 0;
          seen = 0;
          SpaceScores r = run_worst_case_analysis(*space, stream, blocks, d.a.data(), B, budget);
          require_same(*streamed, r);
          REQUIRE(r.top.size() == oracle.size());
          for (size_t k = 0; k < oracle.size(); ++k) {
            REQUIRE(r.top[k].id == oracle[k].id);
            if (d.exact()) REQUIRE(r.top[k].score == oracle[k].score);
          }
          // Every block is kept with its row order as it is first read, and
          // summed from it in every pass (the streamed pass walks the cells).
          REQUIRE(seen == blocks.size());
          REQUIRE(ordered == blocks.size());
        }
      }
    }
  }
}

TEST_CASE("unit-valued blocks: c without reading values equals the value walk bit for bit and a brute force",
          "[features][tiled][unit]") {
  // Real duals, so the sums round: equality then shows the same adds in the
  // same order, not merely the same exact total.
  Data d(400, 50, Kind::kBinary, false, 907);
  std::mt19937_64 rng(5);
  for (double& v : d.a) v = std::uniform_real_distribution<double>(-3, 3)(rng);
  const std::vector<double> dense = d.dense_c(d.a);
  for (uint32_t tile_rows : {1u, 3u, 64u, 65536u}) {
    CAPTURE(tile_rows);
    auto block = test::build_tiled_block(d.triplets, d.n, tile_rows, 0, d.id_space);
    ColumnBlock with_values = block->view;
    ColumnBlock unit = with_values;
    unit.unit_values = true;
    const std::vector<float> poisoned(unit.nnz(), std::numeric_limits<float>::quiet_NaN());
    unit.values = poisoned.data();  // a unit path that read values would give NaN
    std::vector<double> walked(with_values.column_count), summed(unit.column_count);
    block_column_dots(with_values, d.a.data(), walked.data());
    block_column_dots(unit, d.a.data(), summed.data());
    std::vector<uint8_t> live(unit.column_count, 1);
    std::vector<uint32_t> live_columns;
    for (uint32_t k = 0; k < unit.column_count; ++k) live_columns.push_back(k);
    std::vector<double> pruned(unit.column_count), pruned_values(unit.column_count);
    block_column_dots_live(unit, d.a.data(), live.data(), live_columns.data(), live_columns.size(), pruned.data());
    block_column_dots_live(with_values, d.a.data(), live.data(), live_columns.data(), live_columns.size(),
                           pruned_values.data());
    for (uint64_t k = 0; k < unit.column_count; ++k) {
      REQUIRE(summed[k] == walked[k]);
      REQUIRE(pruned[k] == pruned_values[k]);
      REQUIRE(summed[k] == Approx(dense[d.dense_index(unit.column_ids[k])]).margin(1e-9));
    }
    double long_cells = 0;
    for (uint32_t x = 0; x < unit.cell_count(); ++x)
      long_cells += unit.cell_ptr[x + 1] - unit.cell_ptr[x] >= kMultiAccumulatorCell;
    if (tile_rows == 65536u) REQUIRE(long_cells > 0);  // cell_sum's four-accumulator path ran
  }
}
