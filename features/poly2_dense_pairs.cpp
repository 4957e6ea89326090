// The dense path of the poly-2 pair stage; see poly2_dense_pairs.h.
//
// GEMM layout (BLIS style, Goto & van de Geijn 2008): the rows are processed
// in chunks of kKc; per chunk, diag(a)·X is packed into panels of MR columns
// and X into panels of NR columns (row-interleaved, zero padded), then output
// tiles of kTileP × kTileQ (upper triangle only) are given to threads; each
// tile runs the micro-kernel over its panels (the tile's A panels stay in L2,
// a B micro-panel in L1). Every element of G is summed by one thread in row
// order (chunk, then row), so G is the same for any thread count.
#include "features/poly2_dense_pairs.h"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include <memory>

#include "core/loop_rendezvous.h"
#include "io/shard_store.h"

namespace fgm {
namespace {

constexpr uint64_t kKc = 256;    // rows per chunk and micro-kernel call (B micro-panel in L1)
constexpr uint64_t kTileP = 96;  // output tile: multiple of every MR (4, 8, 16)...
constexpr uint64_t kTileQ = 96;  // ...and of every NR (4, 6, 12)

uint64_t round_up(uint64_t x, uint64_t m) { return (x + m - 1) / m * m; }

// Packs rows [r0, r0 + rows) of the columns of panel `panel` (`width`
// columns) of the first `cols` columns row-interleaved into out + panel·kKc·width, weighted by a when `a`
// is given; zero beyond X.cols and beyond `rows`. Every element is written.
void pack_panel(const DenseFeatureBlock& X, uint64_t cols, const double* a, uint64_t r0, uint64_t rows, uint64_t width,
                uint64_t panel, double* out) {
  double* dst = out + panel * kKc * width;
  for (uint64_t c = 0; c < width; ++c) {
    const uint64_t h = panel * width + c;
    if (h >= cols) {
      for (uint64_t i = 0; i < kKc; ++i) dst[i * width + c] = 0.0;
      continue;
    }
    const float* col = X.values.data() + h * X.rows + r0;
    if (a)
      for (uint64_t i = 0; i < rows; ++i) dst[i * width + c] = a[r0 + i] * static_cast<double>(col[i]);
    else
      for (uint64_t i = 0; i < rows; ++i) dst[i * width + c] = static_cast<double>(col[i]);
    for (uint64_t i = rows; i < kKc; ++i) dst[i * width + c] = 0.0;
  }
}

struct Tile {
  uint64_t p0, p1, q0, q1;  // column ranges (padded)
};

// f(destination, rows, values, count) for every cell of the wanted columns
// [first, last) ((feature id, destination) pairs sorted by id) that `block`
// holds, tile by tile: each column's rows arrive increasing.
template <class It, class F>
void for_each_wanted_cell(const ColumnBlock& block, It first, It last, F&& f) {
  // The wanted columns' indices in the block (column_ids increase), and their
  // destinations; a wanted id the block does not list is an empty column.
  std::vector<std::pair<uint32_t, uint32_t>> wanted;  // (column index, destination)
  const uint64_t* ids = block.column_ids;
  for (It it = first; it != last; ++it) {
    const uint64_t* at = std::lower_bound(ids, ids + block.column_count, it->first);
    if (at != ids + block.column_count && *at == it->first)
      wanted.emplace_back(static_cast<uint32_t>(at - ids), it->second);
  }
  if (wanted.empty()) return;
  for (uint32_t t = 0; t < block.tile_count; ++t) {
    const uint32_t* cells = block.cell_column + block.tile_cells[t];
    const uint32_t count = block.tile_cells[t + 1] - block.tile_cells[t];
    // A tile's cells list increasing column indices: search a few, merge many.
    const bool search = wanted.size() * 32 < count;
    uint32_t c = 0;
    for (const auto& [k, dest] : wanted) {
      if (search) c = static_cast<uint32_t>(std::lower_bound(cells + c, cells + count, k) - cells);
      else
        while (c < count && cells[c] < k) ++c;
      if (c == count) break;
      if (cells[c] != k) continue;
      const uint32_t cell = block.tile_cells[t] + c;
      const uint32_t begin = block.cell_ptr[cell], end = block.cell_ptr[cell + 1];
      f(dest, block.row_ids + begin, block.values + begin, end - begin);
    }
  }
}

}  // namespace

uint64_t dense_pair_bytes(uint64_t rows, uint64_t cols) {
  const uint64_t g = round_up(cols, kTileP) * round_up(cols, kTileQ) * sizeof(double);
  return rows * cols * sizeof(float) + g + 2 * kKc * round_up(cols, 16) * sizeof(double);
}

void append_dense_columns(const ScoringContext& ctx, const uint32_t* ids, uint32_t count, DenseFeatureBlock& X,
                          PassStats* pass) {
  if (count == 0) return;
  const uint64_t first = X.cols, n = X.rows;
  // (feature, column) sorted by feature, to find a block's columns.
  std::vector<std::pair<uint64_t, uint32_t>> wanted(count);
  for (uint32_t h = 0; h < count; ++h) wanted[h] = {ids[h], static_cast<uint32_t>(first + h)};
  std::sort(wanted.begin(), wanted.end());
  const uint64_t bytes = n * (first + count) * sizeof(float) + count * 2 * sizeof(uint64_t);
  if (X.memory.bytes() == 0) {
    X.memory = ctx.budget->reserve(bytes, "poly2 dense pair block");
  } else {
    X.memory.resize(X.memory.bytes() + bytes);  // old and new arrays while growing
    HugeVector<float> grown(n * (first + count), 0.0f);
    std::copy(X.values.begin(), X.values.end(), grown.begin());
    X.values = std::move(grown);
    X.memory.resize(bytes);
  }
  X.values.resize(n * (first + count), 0.0f);
  X.cols = static_cast<uint32_t>(first + count);
  auto begin_of = [&](uint64_t feature) {
    return std::lower_bound(wanted.begin(), wanted.end(), std::pair<uint64_t, uint32_t>(feature, 0));
  };
  std::vector<BlockRef> blocks;
  for (const BlockRef& b : *ctx.blocks) {
    auto it = begin_of(b.first_column);
    if (it != wanted.end() && it->first < b.end_column) blocks.push_back(b);
  }
  // Each column belongs to one block: the workers scatter into disjoint
  // columns, cell by cell straight from the block (no column conversion).
  struct Done {};
  PassStats p = stream_blocks<Done>(
      *ctx.stream, blocks, "poly2 dense pair block",
      [&](const BlockRef&, const ColumnBlock& block) {
        for_each_wanted_cell(block, begin_of(block.first_column), begin_of(block.end_column),
                             [&](uint32_t dest, const uint32_t* rows, const float* values, uint32_t entries) {
                               float* col = X.values.data() + uint64_t{dest} * n;
                               for (uint32_t e = 0; e < entries; ++e) col[rows[e]] = values[e];
        });
        return Done{};
      },
      [](Done&&) {});
  if (pass) *pass += p;
}

DensePairProducts dense_pair_products(const DenseFeatureBlock& X, uint32_t cols, const double* a, uint32_t skip, int threads,
                                      MemoryBudget& budget, const simd::Kernels& kernels) {
  const uint64_t n = X.rows, H = std::min(cols, X.cols), MR = kernels.gemm_mr, NR = kernels.gemm_nr;
  DensePairProducts G;
  G.cols = static_cast<uint32_t>(H);
  G.ld = round_up(H, kTileP);
  const uint64_t gq = round_up(H, kTileQ);
  const uint64_t a_cols = round_up(H, MR), b_cols = round_up(H, NR);
  G.memory = budget.reserve((G.ld * gq + kKc * (a_cols + b_cols)) * sizeof(double), "poly2 dense pair products");
  G.g.assign(G.ld * gq, 0.0);
  std::unique_ptr<double[]> A(new double[kKc * a_cols]), B(new double[kKc * b_cols]);  // every element packed
  // Upper-triangle tiles that hold a pair not inside the skipped square.
  std::vector<Tile> tiles;
  for (uint64_t q0 = 0; q0 < H; q0 += kTileQ)
    for (uint64_t p0 = 0; p0 < H && p0 < q0 + kTileQ; p0 += kTileP) {
      const uint64_t q1 = std::min(q0 + kTileQ, b_cols), p1 = std::min(p0 + kTileP, a_cols);
      if (q1 <= skip && p1 <= skip) continue;
      tiles.push_back({p0, p1, q0, q1});
    }
  const uint64_t a_panels = a_cols / MR, b_panels = b_cols / NR;
  tbb::task_arena arena(std::max(1, threads));
  arena.execute([&] {
    for (uint64_t r0 = 0; r0 < n; r0 += kKc) {
      const uint64_t kc = std::min(kKc, n - r0);
      // Test binaries: two threads at once (core/loop_rendezvous.h).
      LoopRendezvous packing(threads > 1), tiling(threads > 1);
      tbb::parallel_for(uint64_t{0}, a_panels + b_panels, [&](uint64_t c) {
        packing.arrive();
        if (c < a_panels)
          pack_panel(X, H, a, r0, kc, MR, c, A.get());
        else
          pack_panel(X, H, nullptr, r0, kc, NR, c - a_panels, B.get());
      });
      tbb::parallel_for(size_t{0}, tiles.size(), [&](size_t t) {
        tiling.arrive();
        const Tile& tile = tiles[t];
        for (uint64_t q = tile.q0; q < tile.q1; q += NR)
          for (uint64_t p = tile.p0; p < tile.p1; p += MR) {
            if (p > q + NR - 1) break;                       // below the diagonal
            if (p + MR <= skip && q + NR <= skip) continue;  // inside the skipped square
            kernels.gemm_tile(kc, A.get() + (p / MR) * kKc * MR, B.get() + (q / NR) * kKc * NR,
                              G.g.data() + q * G.ld + p, G.ld);
          }
      }, tbb::simple_partitioner());
    }
  });
  return G;
}

double row_order_pair_sum(const DenseFeatureBlock& X, const double* a, uint32_t p, uint32_t q) {
  const float* xp = X.values.data() + uint64_t{p} * X.rows;
  const float* xq = X.values.data() + uint64_t{q} * X.rows;
  double sum = 0;
  for (uint64_t i = 0; i < X.rows; ++i) {
    // Zero products are skipped as the sparse path skips absent entries
    // (adding ±0 would only change the sign of a zero sum).
    if (xp[i] == 0.0f || xq[i] == 0.0f) continue;
    sum += a[i] * static_cast<double>(xp[i]) * static_cast<double>(xq[i]);
  }
  return sum;
}

// GEMM sums in another order than the row-order sums (and with FMA), so its
// values may differ in the last bits; to select the same pairs on either
// path, every pair whose certified interval around its GEMM value can reach
// the B-th best is rescored in row order, and only those exact sums are
// offered. With |ĝ − p̂_row| ≤ 2γ_{n+1}·Σ|a_i x_ij x_ik| ≤ 2γ_{n+1}·u_j u_k
// (pair_bound_threshold in poly2_space.cpp), δ = 3(n+8)ε·û_j û_k bounds the
// difference. A pair whose upper score is below the B-th best lower score
// (over the top so far and every pair) ranks after B candidates on any path.
DensePairStats offer_dense_block_pairs(const DenseFeatureBlock& X, uint32_t cols, const double* a, const std::vector<double>& uh,
                                       uint32_t skip, double cross_scale, const TopBCache& top, int threads,
                                       MemoryBudget& budget, const DensePairCallbacks& cb,
                                       const simd::Kernels& kernels) {
  DensePairStats stats;
  const uint32_t H = std::min(cols, X.cols);
  auto t0 = std::chrono::steady_clock::now();
  const DensePairProducts G = dense_pair_products(X, H, a, skip, threads, budget, kernels);
  stats.gemm_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats.gemm_flops = static_cast<double>(X.rows) * H * H;  // the upper triangle of 2·n·H² flops
  const double eps = std::ldexp(1.0, -53);
  const double rel = 3.0 * (static_cast<double>(X.rows) + 8.0) * eps;
  auto score_bounds = [&](uint32_t p, uint32_t q) {
    const double d = rel * uh[p] * uh[q], g = std::fabs(G.at(p, q));
    const double lo = std::max(0.0, g - d), hi = g + d;
    return std::pair<double, double>(cross_scale * lo * lo * (1 - 4 * eps), cross_scale * hi * hi * (1 + 4 * eps));
  };
  auto first_partner = [&](uint32_t p) { return std::max<uint32_t>(p + 1, p < skip ? skip : 0); };
  TopBCache floor = top;
  for (uint32_t p = 0; p < H; ++p)
    for (uint32_t q = first_partner(p); q < H; ++q) {
      const double lo = score_bounds(p, q).first;
      if (lo > 0 && floor.may_admit(lo) && !cb.excluded(p, q)) floor.offer({lo, cb.pair_id(p, q)});
    }
  const double floor_theta = floor.full() ? floor.worst().score : 0.0;
  for (uint32_t p = 0; p < H; ++p)
    for (uint32_t q = first_partner(p); q < H; ++q) {
      const double hi = score_bounds(p, q).second;
      if (!(hi > 0) || hi < floor_theta || cb.excluded(p, q)) continue;
      cb.offer(p, q, row_order_pair_sum(X, a, p, q));
      ++stats.rescored;
    }
  return stats;
}

}  // namespace fgm
