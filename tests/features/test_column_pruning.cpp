// Pruned top-B scoring (features/column_pruning.h) against the unpruned
// kernels and a dense brute force, on Zipf-shaped data (a few popular
// columns, many columns of one or two nonzeros: the shape where pruning
// skips most columns): live-column sums bit for bit equal to the full cell
// walk (and its row order), bounds that hold under rounding, the same top-B
// set and scores as offering every column for any floor (ties included), and
// the linear space's pass equal to brute force for threads 1/2/4.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <set>

#include "features/block_scores.h"
#include "features/block_stream.h"
#include "features/column_pruning.h"
#include "features/feature_space.h"
#include "tests/features/tiled_store.h"

using namespace fgm;

namespace {

// n rows × m columns; column rank r (ids permuted) occurs in a row with
// probability min(0.9, 3/(r+1)^1.05); column 1 repeats column 0 (a tie at the
// top). Integer duals and values keep every sum exact (ties stay ties);
// `real` draws real ones.
struct ZipfData {
  uint64_t n = 0, m = 0;
  std::vector<std::vector<float>> X;  // by column: X[j][i]
  std::vector<uint64_t> ids;
  std::vector<double> a;
  std::vector<int8_t> y;
  std::vector<test::Triplet> triplets;

  // binary: every value 1 (the blocks are then marked unit-valued, as store
  // format 5 reads binary blocks), integer duals.
  ZipfData(uint64_t rows, uint64_t cols, bool real, uint64_t seed, bool binary = false) : n(rows), m(cols) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> unif(0.0, 1.0);
    X.assign(m, std::vector<float>(n, 0.0f));
    for (uint64_t j = 0; j < m; ++j) {
      if (j == 1) {
        X[1] = X[0];
        continue;
      }
      const double p = std::min(0.9, 3.0 / std::pow(static_cast<double>(j + 1), 1.05));
      for (uint64_t i = 0; i < n; ++i)
        if (unif(rng) < p)
          X[j][i] = binary ? 1.0f : real ? static_cast<float>(unif(rng) * 4 - 2) : static_cast<float>(1 + rng() % 3);
    }
    // Popularity spread over the id space (as the generator's permutation does).
    for (uint64_t j = 0; j < m; ++j) ids.push_back(j);
    std::shuffle(ids.begin(), ids.end(), rng);
    for (uint64_t i = 0; i < n; ++i) {
      y.push_back(unif(rng) < 0.5 ? 1 : -1);
      a.push_back((real ? unif(rng) * 3 : static_cast<double>(rng() % 4)) * y.back());
    }
    for (uint64_t j = 0; j < m; ++j)
      for (uint64_t i = 0; i < n; ++i)
        if (X[j][i] != 0) triplets.push_back({static_cast<uint32_t>(i), ids[j], X[j][i]});
  }
  std::vector<double> dense_c() const {
    std::vector<double> c(m, 0.0);
    for (uint64_t j = 0; j < m; ++j)
      for (uint64_t i = 0; i < n; ++i) c[j] += a[i] * static_cast<double>(X[j][i]);
    return c;
  }
};

// The top-B of offering every column of a block (the unpruned pass's rule).
std::vector<ScoredCandidate> offer_all(const ColumnBlock& block, const double* a, size_t B,
                                       const std::set<uint64_t>& excluded) {
  std::vector<double> c(block.column_count);
  block_column_dots(block, a, c.data());
  TopBCache top(B);
  for (uint64_t k = 0; k < block.column_count; ++k) {
    const double s = c[k] * c[k];
    if (s > 0 && !excluded.count(block.column_ids[k])) top.offer({s, block.column_ids[k]});
  }
  return top.sorted();
}

void require_same(const std::vector<ScoredCandidate>& x, const std::vector<ScoredCandidate>& y) {
  REQUIRE(x.size() == y.size());
  for (size_t k = 0; k < x.size(); ++k) {
    REQUIRE(x[k].id == y[k].id);
    REQUIRE(x[k].score == y[k].score);  // bit for bit
  }
}

}  // namespace

TEST_CASE("live-column sums equal the full cell walk and its row order bit for bit (scan and search paths)",
          "[features][pruning]") {
  for (bool real : {false, true}) {
    ZipfData d(500, 400, real, real ? 7 : 8);
    for (uint32_t tile_rows : {1u, 3u, 64u, 1000u}) {
      auto block = test::build_tiled_block(d.triplets, d.n, tile_rows, 0, d.m);
      const ColumnBlock& cells = block->view;
      const uint64_t k_count = cells.column_count;
      std::vector<double> full(k_count);
      block_column_dots(cells, d.a.data(), full.data());
      // The row order sums the same bits (when the block has one).
      std::vector<double> ordered(k_count, -1.0);
      std::vector<uint64_t> memory(row_order_size(cells).bytes() / 8 + 1);
      const RowOrder order = build_row_order(cells, reinterpret_cast<uint8_t*>(memory.data()));
      ColumnBlock by_row = cells;
      by_row.row_order = &order;
      if (tile_rows <= (1u << 16)) block_column_dots(by_row, d.a.data(), ordered.data());
      std::mt19937_64 rng(tile_rows);
      // 3 live columns (binary searches on every tile of many cells), a third
      // of them and all of them (cell scans).
      for (uint64_t want : {uint64_t{3}, k_count / 3, k_count}) {
        CAPTURE(real, tile_rows, want);
        std::vector<uint32_t> live_columns;
        for (uint32_t k = 0; k < k_count; ++k) live_columns.push_back(k);
        std::shuffle(live_columns.begin(), live_columns.end(), rng);
        live_columns.resize(want);
        std::sort(live_columns.begin(), live_columns.end());
        std::vector<uint8_t> live(k_count, 0);
        for (uint32_t k : live_columns) live[k] = 1;
        const double untouched = 12345.5;
        std::vector<double> c(k_count, untouched);
        block_column_dots_live(cells, d.a.data(), live.data(), live_columns.data(), live_columns.size(), c.data());
        for (uint64_t k = 0; k < k_count; ++k) {
          if (!live[k]) {
            REQUIRE(c[k] == untouched);
            continue;
          }
          REQUIRE(c[k] == full[k]);
          if (tile_rows <= (1u << 16)) REQUIRE(c[k] == ordered[k]);
        }
      }
    }
  }
}

TEST_CASE("column score bounds hold under rounding, also when they are attained", "[features][pruning]") {
  // Attained: every a_i = ±a_max (one sign), every value = ±x_max, one column
  // of 5000 nonzeros: c_k = n·x_max·a_max exactly in reals; the computed sum
  // rounds (a_max, x_max not powers of two) and may exceed it.
  const uint64_t n = 5000;
  for (double a_max : {0.1, 1.0 / 3.0, 7.0}) {
    for (float x : {0.3f, -1.7f, 1.0f}) {
      std::vector<test::Triplet> triplets;
      for (uint32_t i = 0; i < n; ++i) triplets.push_back({i, 0, x});
      for (uint32_t i = 0; i < n; i += 7) triplets.push_back({i, 1, x * (i % 2 ? 1.0f : -0.5f)});
      std::vector<double> a(n, a_max);
      for (uint32_t tile_rows : {64u, 1u << 16}) {
        auto block = test::build_tiled_block(triplets, n, tile_rows, 0, 2);
        std::vector<double> c(2), bound2(2);
        std::vector<uint32_t> count(2);
        block_column_dots(block->view, a.data(), c.data());
        column_score_bounds(block->view, max_abs(a.data(), n), count.data(), bound2.data());
        CAPTURE(a_max, x, tile_rows, c[0], bound2[0]);
        REQUIRE(count[0] == n);
        REQUIRE(count[1] == (n + 6) / 7);
        for (int k = 0; k < 2; ++k) REQUIRE(c[k] * c[k] <= bound2[k]);
        // and the bound is tight for the attained column (within the margin)
        REQUIRE(bound2[0] <= c[0] * c[0] * (1 + 1e-5));
      }
    }
  }
  // Random data: every column's computed c² is within its bound.
  ZipfData d(400, 300, true, 3);
  auto block = test::build_tiled_block(d.triplets, d.n, 16, 0, d.m);
  std::vector<double> c(block->view.column_count), bound2(c.size());
  std::vector<uint32_t> count(c.size());
  block_column_dots(block->view, d.a.data(), c.data());
  column_score_bounds(block->view, max_abs(d.a.data(), d.n), count.data(), bound2.data());
  for (size_t k = 0; k < c.size(); ++k) REQUIRE(c[k] * c[k] <= bound2[k]);
  // A NaN dual gives NaN bounds: nothing is pruned (NaN < floor is false).
  std::vector<double> nan_a = d.a;
  nan_a[5] = std::nan("");
  REQUIRE(std::isnan(max_abs(nan_a.data(), d.n)));
}

TEST_CASE("pruned block top-B equals offering every column, for any floor, ties and exclusions included",
          "[features][pruning]") {
  std::set<int> paths;  // 0: whole block, 1: first stage only, 2: both stages
  for (bool real : {false, true}) {
    ZipfData d(600, 500, real, real ? 21 : 22);
    const double a_max = max_abs(d.a.data(), d.n);
    for (uint32_t tile_rows : {3u, 64u}) {
      auto block = test::build_tiled_block(d.triplets, d.n, tile_rows, 0, d.m);
      const ColumnBlock& cells = block->view;
      for (size_t B : {size_t{1}, size_t{2}, size_t{5}, size_t{600}}) {
        for (bool exclude : {false, true}) {
          std::set<uint64_t> excluded;
          if (exclude) excluded = {d.ids[0], d.ids[5], d.ids[77]};  // the top column, not its twin
          const std::vector<ScoredCandidate> oracle = offer_all(cells, d.a.data(), B, excluded);
          // Floors: none (the whole block is summed), the oracle's B-th score
          // exactly (columns tied with it must still be summed: they may win
          // on the id), just below it, and far below it (a second stage).
          std::vector<double> floors = {0.0};
          if (oracle.size() == B)
            floors.insert(floors.end(), {oracle.back().score, oracle.back().score * 0.999,
                                         oracle.back().score * 0.05, oracle.back().score * 0.002});
          for (double start : floors) {
            CAPTURE(real, tile_rows, B, exclude, start);
            ScoreFloor floor;
            floor.raise(start);
            TopBCache top(B);
            PruningScratch scratch;
            const PruningCounts counts = offer_block_top(
                cells, d.a.data(), a_max, floor, top, [&](uint64_t id) { return excluded.count(id) > 0; }, scratch);
            require_same(top.sorted(), oracle);
            REQUIRE(counts.columns_summed + counts.columns_skipped == cells.column_count);
            // Pruning prunes: with a small B, a floor at the B-th score and
            // tiles of many rows (cells much fewer than nonzeros), on the
            // integer data (signs of real values cancel: looser bounds)
            // most of the rare columns are never summed (the reason it is
            // faster on Zipf data); with no floor the block kernel sums all.
            if (!real && B <= 5 && tile_rows == 64 && start >= oracle.back().score * 0.999)
              REQUIRE(counts.columns_skipped > cells.column_count / 2);
            if (start == 0) REQUIRE((counts.whole_block && counts.columns_summed == cells.column_count));
            paths.insert(counts.whole_block ? 0 : counts.second_stage > 0 ? 2 : 1);
          }
        }
      }
    }
  }
  REQUIRE(paths.count(0) == 1);  // the whole block summed
  REQUIRE(paths.count(2) == 1);  // both stages ran
  // The tie at the top: column 0 and its copy (column 1) score the same; with
  // B = 1 the smaller id wins whether or not the floor already equals it.
  ZipfData d(300, 200, false, 5);
  auto block = test::build_tiled_block(d.triplets, d.n, 64, 0, d.m);
  const std::vector<double> c = d.dense_c();
  REQUIRE(c[0] == c[1]);
  const std::vector<ScoredCandidate> oracle = offer_all(block->view, d.a.data(), 1, {});
  for (double start : {0.0, c[0] * c[0]}) {
    ScoreFloor floor;
    floor.raise(start);
    TopBCache top(1);
    PruningScratch scratch;
    offer_block_top(block->view, d.a.data(), max_abs(d.a.data(), d.n), floor, top, [](uint64_t) { return false; },
                    scratch);
    require_same(top.sorted(), oracle);
  }
}

TEST_CASE("deferred popular columns: every column's bits, the top-B of offering every column, any batch size",
          "[features][pruning]") {
  // kind 0: binary (unit-valued blocks), 1: integer values and duals (ties
  // stay ties), 2: real ones.
  for (int kind : {0, 1, 2}) {
    ZipfData d(800, 600, kind == 2, 30 + kind, kind == 0);
    const double a_max = max_abs(d.a.data(), d.n);
    for (uint32_t tile_rows : {3u, 64u}) {
      // Four blocks over the id range (the popular columns spread over them).
      std::vector<std::unique_ptr<test::TiledBlock>> blocks;
      for (uint64_t q = 0; q < 4; ++q) {
        blocks.push_back(test::build_tiled_block(d.triplets, d.n, tile_rows, d.m * q / 4, d.m * (q + 1) / 4));
        blocks.back()->view.unit_values = kind == 0;
      }
      // Every column held and flushed into a cache of all of them: each
      // score is c² of the block kernel, bit for bit.
      {
        DeferredColumns batch(uint64_t{1} << 30, 1);
        uint64_t columns = 0;
        std::vector<ScoredCandidate> expected;
        for (const auto& b : blocks) {
          std::vector<double> c(b->view.column_count);
          block_column_dots(b->view, d.a.data(), c.data());
          std::vector<uint32_t> count(b->view.column_count);
          column_nonzeros(b->view, count.data());
          for (uint32_t k = 0; k < b->view.column_count; ++k) {
            REQUIRE(batch.fits(b->view, count[k]));
            batch.add(b->view, k, count[k], INFINITY);
            if (c[k] * c[k] > 0) expected.push_back({c[k] * c[k], b->view.column_ids[k]});
          }
          columns += b->view.column_count;
        }
        ScoreFloor floor;
        TopBCache all(columns);
        REQUIRE(batch.flush(d.a.data(), floor, all) == columns);
        REQUIRE(batch.empty());
        std::sort(expected.begin(), expected.end(), ranks_before);
        require_same(all.sorted(), expected);
      }
      const std::set<uint64_t> excluded = {d.ids[0], d.ids[3]};
      for (size_t B : {size_t{1}, size_t{5}, size_t{40}}) {
        TopBCache oracle_top(B);
        for (const auto& b : blocks)
          for (const auto& cand : offer_all(b->view, d.a.data(), B, excluded)) oracle_top.offer(cand);
        const std::vector<ScoredCandidate> oracle = oracle_top.sorted();
        // Batches: a few columns (flushed inside the pass, while blocks are
        // still pruned against the floor it raised) or all of them (one
        // flush after the last block); columns of 1 or 20+ nonzeros taken.
        for (uint64_t capacity : {uint64_t{40000}, uint64_t{1} << 30}) {
          for (uint64_t min_nnz : {uint64_t{1}, uint64_t{20}}) {
            for (double start : {0.0, oracle.back().score * 0.5}) {
              CAPTURE(kind, tile_rows, B, capacity, min_nnz, start);
              ScoreFloor floor;
              floor.raise(start);
              DeferredColumns batch(capacity, min_nnz);
              TopBCache global(B);
              PruningScratch scratch;
              uint64_t deferred = 0, flushed = 0;
              for (const auto& b : blocks) {
                TopBCache local(B);
                const PruningCounts counts =
                    offer_block_top(b->view, d.a.data(), a_max, floor, local,
                                    [&](uint64_t id) { return excluded.count(id) > 0; }, scratch, &batch);
                REQUIRE(counts.columns_summed + counts.columns_skipped + counts.columns_deferred ==
                        b->view.column_count);
                deferred += counts.columns_deferred;
                flushed += counts.flushed_summed;
                global.merge(local);
                floor.raise_from(global);
              }
              // A small batch was flushed inside the pass (and summed columns there).
              if (capacity < 100000 && start == 0) REQUIRE(flushed > 0);
              flushed += batch.flush(d.a.data(), floor, global);
              require_same(global.sorted(), oracle);
              REQUIRE(deferred > 0);  // the popular columns went through the batch
              REQUIRE(flushed <= deferred);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("linear pass on Zipf data: brute-force top-B, bit-identical for threads 1/2/4 and any block grouping",
          "[features][pruning]") {
  for (bool real : {false, true}) {
    ZipfData d(700, 900, real, real ? 41 : 42);
    const std::vector<double> c = d.dense_c();
    const std::set<uint64_t> excluded = {d.ids[2], d.ids[9]};
    for (size_t B : {size_t{1}, size_t{10}}) {
      std::vector<ScoredCandidate> oracle;
      for (uint64_t j = 0; j < d.m; ++j)
        if (c[j] * c[j] > 0 && !excluded.count(d.ids[j])) oracle.push_back({c[j] * c[j], d.ids[j]});
      std::sort(oracle.begin(), oracle.end(), ranks_before);
      oracle.resize(std::min(B, oracle.size()));
      for (uint32_t tile_rows : {3u, 64u, 65536u}) {
        test::TiledMemoryStore store(d.n, d.m, d.triplets, d.y, tile_rows);
        std::optional<std::vector<ScoredCandidate>> first;
        for (int threads : {1, 2, 4}) {
          for (uint64_t block_bytes : {uint64_t{600}, uint64_t{6000}, uint64_t{1} << 30}) {
            CAPTURE(real, B, tile_rows, threads, block_bytes);
            MemoryBudget budget(64ull << 20);
            auto space = make_feature_space(FeatureSpaceSettings{}, store, budget);
            for (uint64_t id : excluded) space->mark_selected(id);
            SchedulerOptions so;
            so.threads = threads;
            BlockStream stream(store, so, budget);
            const auto blocks = store.plan_blocks(block_bytes);
            SpaceScores r = run_worst_case_analysis(*space, stream, blocks, d.a.data(), B, budget);
            REQUIRE(r.top.size() == oracle.size());
            for (size_t k = 0; k < oracle.size(); ++k) {
              REQUIRE(r.top[k].id == oracle[k].id);
              if (!real) REQUIRE(r.top[k].score == oracle[k].score);
              else REQUIRE(r.top[k].score == Approx(oracle[k].score).epsilon(1e-10));
            }
            if (!first) first = r.top;
            else require_same(*first, r.top);
          }
        }
      }
    }
  }
}
