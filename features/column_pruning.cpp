// Bounds and the live-column kernel of pruned block scoring
// (features/column_pruning.h).
#include "features/column_pruning.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <thread>

#include "core/error.h"

namespace fgm {

double max_abs(const double* a, uint64_t n) {
  double m = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const double v = std::fabs(a[i]);
    if (std::isnan(v)) return v;
    m = std::max(m, v);
  }
  return m;
}

void column_nonzeros(const ColumnBlock& block, uint32_t* count) {
  for (uint64_t k = 0; k < block.column_count; ++k) count[k] = 0;
  const uint32_t cells = block.cell_count();
  const uint32_t* ptr = block.cell_ptr;
  const uint32_t* column = block.cell_column;
  for (uint32_t cell = 0; cell < cells; ++cell) count[column[cell]] += ptr[cell + 1] - ptr[cell];
}

// Rounding: the computed c_k is a sum of n_k rounded products in some order
// (cells, accumulators), so |ĉ_k| ≤ (1 + γ) Σ|a_i x_ik| with γ = n_k·u/(1 −
// n_k·u), u = 2^-53; n_k < 2^32 gives γ < 2^-20.9. Squaring ĉ_k and
// computing the bound itself add a few u. The margin 2^-18 covers all of it.
void column_score_bounds(const ColumnBlock& block, double a_max, uint32_t* count, double* bound2) {
  const uint64_t k_count = block.column_count;
  if (block.column_nnz) {
    std::copy_n(block.column_nnz, k_count, count);
  } else {
    column_nonzeros(block, count);
  }
  for (uint64_t k = 0; k < k_count; ++k) {
    const double x_max = std::max(std::fabs(static_cast<double>(block.col_min[k])),
                                  std::fabs(static_cast<double>(block.col_max[k])));
    const double bound = static_cast<double>(count[k]) * x_max * a_max;
    bound2[k] = bound * bound * kScoreBoundMargin;
  }
}

// The cell walk of block_column_dots restricted to live columns: a short
// cell's products are added to c[k] one by one in storage order, a long
// cell's cell_dot is added once, tiles in order (a column has one cell per
// tile, so this is the sequence block_column_dots and its row order add).
// A tile's live cells are found by scanning its cells, or, when few columns
// are live (the usual case once the floor is high: a handful of popular
// columns among ~10^5), by binary search of each live column in the tile's
// cell columns (increasing inside a tile).
namespace {

// One cell's n products added to c as block_column_dots adds them; values
// null: every value is 1 (a·1 = a: the same adds without reading values).
inline void add_cell_terms(const uint32_t* rows, const float* values, uint32_t n, const double* a, double& c) {
  if (!values) {
    if (n >= kMultiAccumulatorCell) {
      c += cell_sum(rows, n, a);
      return;
    }
    double sum = c;
    for (uint32_t p = 0; p < n; ++p) sum += a[rows[p]];
    c = sum;
    return;
  }
  if (n >= kMultiAccumulatorCell) {
    c += cell_dot(rows, values, n, a);
    return;
  }
  double sum = c;
  for (uint32_t p = 0; p < n; ++p) sum += a[rows[p]] * static_cast<double>(values[p]);
  c = sum;
}

inline void add_cell(const ColumnBlock& block, uint32_t cell, uint32_t k, const double* a, double* c) {
  const uint32_t begin = block.cell_ptr[cell], n = block.cell_ptr[cell + 1] - begin;
  add_cell_terms(block.row_ids + begin, block.unit_values ? nullptr : block.values + begin, n, a, c[k]);
}

// Lines of the next tile's dual slice to prefetch before a cell: one per 4
// of its nonzeros (at least one). Few live columns remain after pruning, so
// stepping once per cell, as the full walk does, would leave the next slice
// cold; the popular columns' long cells then sweep it from memory.
inline uint32_t prefetch_lines(const ColumnBlock& block, uint32_t cell) {
  return (block.cell_ptr[cell + 1] - block.cell_ptr[cell] + 3) / 4;
}

}  // namespace

void block_column_dots_live(const ColumnBlock& block, const double* a, const uint8_t* live,
                            const uint32_t* live_columns, uint64_t live_count, double* c) {
  const uint32_t* column = block.cell_column;
  for (uint64_t q = 0; q < live_count; ++q) c[live_columns[q]] = 0;
  for (uint32_t t = 0; t < block.tile_count; ++t) {
    detail::SlicePrefetch prefetch = detail::next_tile_slice(block, t, a, 1);
    const uint32_t c0 = block.tile_cells[t], c1 = block.tile_cells[t + 1];
    if (live_count * 16 < c1 - c0) {
      uint32_t at = c0;
      for (uint64_t q = 0; q < live_count && at < c1; ++q) {
        const uint32_t k = live_columns[q];
        at = static_cast<uint32_t>(std::lower_bound(column + at, column + c1, k) - column);
        if (at == c1 || column[at] != k) continue;
        prefetch.step(prefetch_lines(block, at));
        add_cell(block, at++, k, a, c);
      }
      continue;
    }
    for (uint32_t cell = c0; cell < c1; ++cell) {
      const uint32_t k = column[cell];
      if (!live[k]) continue;
      prefetch.step(prefetch_lines(block, cell));
      add_cell(block, cell, k, a, c);
    }
  }
}

// Column k's cells, tile by tile (a binary search of k in each tile's cell
// columns, which increase inside a tile), copied to the end of the batch.
void DeferredColumns::add(const ColumnBlock& block, uint32_t k, uint64_t nnz, double bound2) {
  if (columns_.empty()) {
    tile_rows_ = block.tile_rows;
    tile_count_ = block.tile_count;
  }
  // bytes_ counts 4 per row id and per value, so neither array passes capacity_/4 entries.
  if (rows_.capacity() < capacity_ / 4) rows_.reserve(capacity_ / 4);
  if (!block.unit_values && values_.capacity() < capacity_ / 4) values_.reserve(capacity_ / 4);
  FGM_ASSERT(block.tile_rows == tile_rows_ && block.tile_count == tile_count_);
  Column col{block.column_ids[k], bound2, cells_.size(), cells_.size()};
  const uint32_t* column = block.cell_column;
  for (uint32_t t = 0; t < block.tile_count; ++t) {
    const uint32_t c0 = block.tile_cells[t], c1 = block.tile_cells[t + 1];
    const uint32_t at = static_cast<uint32_t>(std::lower_bound(column + c0, column + c1, k) - column);
    if (at == c1 || column[at] != k) continue;
    const uint32_t begin = block.cell_ptr[at], n = block.cell_ptr[at + 1] - begin;
    Cell cell{t, n, rows_.size(), UINT64_MAX};
    rows_.insert(rows_.end(), block.row_ids + begin, block.row_ids + begin + n);
    if (!block.unit_values) {
      cell.value_begin = values_.size();
      values_.insert(values_.end(), block.values + begin, block.values + begin + n);
    }
    cells_.push_back(cell);
  }
  col.end_cell = cells_.size();
  columns_.push_back(col);
  bytes_ += column_bytes(block, nnz);
}

// Tile by tile, every live column's cell of that tile: the dual slice of a
// tile is loaded once for the whole batch. The next tile's slice is
// prefetched as the cells are summed (one line per 4 nonzeros, as the live
// walk does).
uint64_t DeferredColumns::flush(const double* a, ScoreFloor& floor, TopBCache& top) {
  if (columns_.empty()) return 0;
  const double f = floor.get();
  std::vector<uint32_t> live;
  for (uint32_t j = 0; j < columns_.size(); ++j)
    if (!(columns_[j].bound2 < f)) live.push_back(j);
  c_.assign(columns_.size(), 0.0);
  next_.resize(columns_.size());
  for (uint32_t j : live) next_[j] = columns_[j].first_cell;
  for (uint32_t t = 0; t < tile_count_; ++t) {
    detail::SlicePrefetch prefetch;
    if (t + 1 < tile_count_) prefetch = detail::SlicePrefetch(a + uint64_t{t + 1} * tile_rows_, tile_rows_);
    for (uint32_t j : live) {
      const uint64_t x = next_[j];
      if (x == columns_[j].end_cell || cells_[x].tile != t) continue;
      const Cell& cell = cells_[x];
      prefetch.step((cell.nnz + 3) / 4);
      add_cell_terms(rows_.data() + cell.row_begin,
                     cell.value_begin == UINT64_MAX ? nullptr : values_.data() + cell.value_begin, cell.nnz, a, c_[j]);
      next_[j] = x + 1;
    }
  }
  for (uint32_t j : live) {
    const double score = c_[j] * c_[j];
    if (score > 0 && top.may_admit(score)) top.offer({score, columns_[j].id});
  }
  floor.raise_from(top);
  columns_.clear();
  cells_.clear();
  rows_.clear();
  values_.clear();
  bytes_ = 0;
  limit_ = std::min(capacity_, 2 * limit_);
  return live.size();
}

uint64_t DeferredColumnsPool::flush_all(const double* a, ScoreFloor& floor, TopBCache& top) {
  std::vector<DeferredColumns*> held;
  for (auto& d : free_)
    if (!d->empty()) held.push_back(d.get());
  if (held.empty()) return 0;
  // Each batch into its own cache (B entries), merged after.
  std::vector<TopBCache> tops(held.size(), TopBCache(top.capacity()));
  std::vector<uint64_t> summed(held.size(), 0);
  std::vector<std::exception_ptr> failed(held.size());
  auto run = [&](size_t b) {
    try {
      summed[b] = held[b]->flush(a, floor, tops[b]);
    } catch (...) {
      failed[b] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (size_t b = 1; b < held.size(); ++b) threads.emplace_back(run, b);
  run(0);
  for (auto& t : threads) t.join();
  for (const auto& e : failed)
    if (e) std::rethrow_exception(e);
  uint64_t total = 0;
  for (size_t b = 0; b < held.size(); ++b) {
    top.merge(tops[b]);
    total += summed[b];
  }
  floor.raise_from(top);
  return total;
}

}  // namespace fgm
