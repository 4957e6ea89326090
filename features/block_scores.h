// The kernel of every linear and group scoring pass: c_k = Σ_i a_i x_ik for
// each listed column k of a tiled block (io/column_block.h).
//
// The block is walked tile by tile: while tile t is summed, every nonzero of
// every column of the block gathers from the same slice a[t·tile_rows,
// (t+1)·tile_rows), which stays in cache (the reason for tiles). Inside a
// tile, nonzeros of short cells (fewer than kMultiAccumulatorCell, the usual
// case on tall sparse data: one or two entries) are added straight into
// c[column] in storage order, the column of each nonzero found without a
// branch per cell (detail::walk_tile); a long cell is
// summed with four accumulators (which hide the gather latency) and its
// partial added to c[column]. So column k's sum is a fixed sequence of adds
// over its tiles in row order, decided by its own cells alone: the same for
// any thread count and any grouping of columns into blocks. While a tile is
// walked, the next tile's dual slice is prefetched (detail::SlicePrefetch).
//
// A block that carries a RowOrder (io/column_block.h; blocks kept in memory
// between passes, built once by build_row_order) is summed from it instead:
// the short cells' nonzeros tile by tile in row order, c[column] += a_i·x, and
// each long cell with cell_dot as above. A column has one cell per tile, so
// its sum is the same sequence of adds as the cell walk's: both kernels give
// bit-identical c.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "io/column_block.h"

namespace fgm {

inline constexpr uint32_t kMultiAccumulatorCell = 16;
inline constexpr uint32_t kCellPrefetch = 32;

namespace detail {

// Σ_p a[rows[p]]·values[p] over one cell; kUnitValues: every value is 1 and
// is not read (a·1 = a exactly, so the same sum bit for bit).
template <bool kUnitValues>
inline double cell_dot_impl(const uint32_t* rows, const float* values, uint32_t nnz, const double* a) {
  auto term = [&](uint32_t k) {
    if constexpr (kUnitValues) return a[rows[k]];
    else return a[rows[k]] * static_cast<double>(values[k]);
  };
  if (nnz < kMultiAccumulatorCell) {
    double s = 0;
    for (uint32_t k = 0; k < nnz; ++k) s += term(k);
    return s;
  }
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  uint32_t k = 0;
  // The duals kCellPrefetch entries ahead are requested early: on a tile of
  // Zipf-popular columns the gathers miss L1 (and often L2) and the four
  // chains alone do not cover the latency. Only reads ahead; sums unchanged.
  for (; k + 4 + kCellPrefetch <= nnz; k += 4) {
    __builtin_prefetch(a + rows[k + kCellPrefetch], 0, 3);
    __builtin_prefetch(a + rows[k + kCellPrefetch + 2], 0, 3);
    s0 += term(k);
    s1 += term(k + 1);
    s2 += term(k + 2);
    s3 += term(k + 3);
  }
  for (; k + 4 <= nnz; k += 4) {
    s0 += term(k);
    s1 += term(k + 1);
    s2 += term(k + 2);
    s3 += term(k + 3);
  }
  for (; k < nnz; ++k) s0 += term(k);
  return (s0 + s1) + (s2 + s3);
}

}  // namespace detail

// Σ_p a[rows[p]]·values[p] over one cell (or one whole column).
inline double cell_dot(const uint32_t* rows, const float* values, uint32_t nnz, const double* a) {
  return detail::cell_dot_impl<false>(rows, values, nnz, a);
}

// cell_dot of a unit-valued cell (every value 1), without reading values.
inline double cell_sum(const uint32_t* rows, uint32_t nnz, const double* a) {
  return detail::cell_dot_impl<true>(rows, nullptr, nnz, a);
}

namespace detail {

// The cells [c0, c1) of one tile in storage order: on_short(q, k) for every
// nonzero q of a short cell (of listed column k), in storage order, and
// on_long(cell) for every long cell. Short cells go in chunks of at most
// kChunkNnz nonzeros (fixed scratch on the stack); inside a chunk the column
// of each nonzero is found without a branch per cell (cell starts marked, then
// counted). A column has one cell per tile, so the order of long and short
// cells inside a tile does not change any column's sum.
inline constexpr uint32_t kChunkNnz = 2048;

// Prefetches the dual slice of the next tile, one cache line per cell walked,
// so that it is in cache when that tile starts: each tile of a block reads a
// slice that the previous block evicted, and without this the first touch of
// each of its lines is a demand miss (measured: a third of the kernel's time
// on a tall store). Only reads ahead; sums are unchanged.
class SlicePrefetch {
 public:
  SlicePrefetch() = default;
  // Addresses are kept as integers: the last tile's slice may end past the
  // dual vector (a prefetch never faults, but a pointer there would be invalid).
  SlicePrefetch(const double* slice, uint64_t doubles)
      : next_(reinterpret_cast<uintptr_t>(slice)), end_(next_ + doubles * sizeof(double)) {}
  void step() {
    if (next_ >= end_) return;
    __builtin_prefetch(reinterpret_cast<const void*>(next_), 0, 2);
    next_ += 64;
  }
  void step(uint32_t lines) {
    for (; lines > 0 && next_ < end_; --lines, next_ += 64) __builtin_prefetch(reinterpret_cast<const void*>(next_), 0, 2);
  }

 private:
  uintptr_t next_ = 0;
  uintptr_t end_ = 0;
};

// The slice of tile t + 1 (K interleaved doubles per row); none after the last tile.
inline SlicePrefetch next_tile_slice(const ColumnBlock& block, uint32_t t, const double* a, size_t K) {
  if (t + 1 >= block.tile_count) return {};
  return SlicePrefetch(a + uint64_t{t + 1} * block.tile_rows * K, uint64_t{block.tile_rows} * K);
}

template <class Short, class Long>
inline void walk_tile(const ColumnBlock& block, uint32_t c0, uint32_t c1, SlicePrefetch prefetch, Short&& on_short,
                      Long&& on_long) {
  uint8_t start[kChunkNnz];
  uint32_t column[kChunkNnz + 1];
  const uint32_t* ptr = block.cell_ptr;
  uint32_t cell = c0;
  while (cell < c1) {
    if (ptr[cell + 1] - ptr[cell] >= kMultiAccumulatorCell) {
      prefetch.step();
      on_long(cell++);
      continue;
    }
    const uint32_t first = cell, base = ptr[cell];
    while (cell < c1 && ptr[cell + 1] - ptr[cell] < kMultiAccumulatorCell && ptr[cell + 1] - base <= kChunkNnz)
      ++cell;
    const uint32_t end = ptr[cell];
    std::fill(start, start + (end - base), uint8_t{0});
    for (uint32_t q = first; q < cell; ++q) {
      start[ptr[q] - base] = 1;
      column[q - first + 1] = block.cell_column[q];
      prefetch.step();
    }
    uint32_t k = 0;
    for (uint32_t q = base; q < end; ++q) {
      k += start[q - base];
      on_short(q, column[k]);
    }
  }
}

}  // namespace detail

// Whether a block gains from a row order: several tiles of at most 2^16 rows
// and cells of fewer than 4 nonzeros on average (the cell walk's branch per
// cell dominates; blocks of long cells are summed well by cell_dot).
bool wants_row_order(const ColumnBlock& block);

// The sizes of a block's row order, and the bytes of its arrays (each array
// 8-byte aligned) in caller memory.
struct RowOrderSize {
  uint64_t tiles = 0, entries = 0, long_cells = 0;
  uint64_t bytes() const {
    auto up8 = [](uint64_t b) { return (b + 7) / 8 * 8; };
    return 2 * up8(4 * (tiles + 1)) + up8(4 * entries) + up8(2 * entries) + up8(4 * entries) + up8(4 * long_cells);
  }
};
RowOrderSize row_order_size(const ColumnBlock& block);

// At most RowOrderSize::bytes of a block of `nnz` nonzeros in `tiles` tiles.
inline uint64_t row_order_bytes_bound(uint64_t nnz, uint64_t tiles) {
  return 10 * nnz + nnz / kMultiAccumulatorCell * 4 + 8 * (tiles + 1) + 48;
}

// The row order of `block` (tile_rows ≤ 2^16) built in `memory`, which holds
// row_order_size(block).bytes() bytes, 8-byte aligned; the view points into it.
RowOrder build_row_order(const ColumnBlock& block, uint8_t* memory);

namespace detail {

// block_column_dots from the block's row order (see the header comment).
inline void row_order_dots(const ColumnBlock& block, const double* a, double* c) {
  const RowOrder& o = *block.row_order;
  for (uint64_t k = 0; k < block.column_count; ++k) c[k] = 0;
  const uint32_t* column = o.column;
  const uint16_t* row = o.row;
  const float* value = o.value;
  for (uint32_t t = 0; t < block.tile_count; ++t) {
    const double* slice = a + uint64_t{t} * block.tile_rows;
    // The entries sweep the slice forward (the hardware prefetcher follows);
    // long cells gather from all of it: prefetch the next tile's slice, one
    // line per long cell, as the cell walk does.
    SlicePrefetch prefetch = next_tile_slice(block, t, a, 1);
    for (uint32_t e = o.tile_entries[t]; e < o.tile_entries[t + 1]; ++e)
      c[column[e]] += slice[row[e]] * static_cast<double>(value[e]);
    for (uint32_t l = o.tile_long[t]; l < o.tile_long[t + 1]; ++l) {
      prefetch.step();
      const uint32_t cell = o.long_cells[l], begin = block.cell_ptr[cell];
      c[block.cell_column[cell]] +=
          cell_dot(block.row_ids + begin, block.values + begin, block.cell_ptr[cell + 1] - begin, a);
    }
  }
}

}  // namespace detail

// c[k] = Σ_i a_i x_ik for k < block.column_count (c has column_count entries).
inline void block_column_dots(const ColumnBlock& block, const double* a, double* c) {
  if (block.row_order) {
    detail::row_order_dots(block, a, c);
    return;
  }
  for (uint64_t k = 0; k < block.column_count; ++k) c[k] = 0;
  if (block.unit_values) {  // binary data: no values to read (cell_sum)
    for (uint32_t t = 0; t < block.tile_count; ++t)
      detail::walk_tile(
          block, block.tile_cells[t], block.tile_cells[t + 1], detail::next_tile_slice(block, t, a, 1),
          [&](uint32_t q, uint32_t k) { c[k] += a[block.row_ids[q]]; },
          [&](uint32_t cell) {
            const uint32_t begin = block.cell_ptr[cell];
            c[block.cell_column[cell]] += cell_sum(block.row_ids + begin, block.cell_ptr[cell + 1] - begin, a);
          });
    return;
  }
  for (uint32_t t = 0; t < block.tile_count; ++t)
    detail::walk_tile(
        block, block.tile_cells[t], block.tile_cells[t + 1], detail::next_tile_slice(block, t, a, 1),
        [&](uint32_t q, uint32_t k) { c[k] += a[block.row_ids[q]] * static_cast<double>(block.values[q]); },
        [&](uint32_t cell) {
          const uint32_t begin = block.cell_ptr[cell];
          c[block.cell_column[cell]] +=
              cell_dot(block.row_ids + begin, block.values + begin, block.cell_ptr[cell + 1] - begin, a);
        });
}

// cell_dot against K dual vectors interleaved row by row (vector r's entry i
// is a[i·K + r]), so one gather per nonzero serves all K: out[r] equals
// cell_dot(rows, values, nnz, a_r) bit for bit (same accumulators, same
// order). `acc` is scratch of 4·K doubles.
inline void cell_dot_many(const uint32_t* rows, const float* values, uint32_t nnz, const double* a, size_t K,
                          double* acc, double* out) {
  const size_t lanes = nnz < kMultiAccumulatorCell ? 1 : 4;
  for (size_t k = 0; k < lanes * K; ++k) acc[k] = 0;
  uint32_t p = 0;
  if (lanes == 4) {
    for (; p + 4 <= nnz; p += 4) {
      for (size_t q = 0; q < 4; ++q) {
        const double* ar = a + static_cast<size_t>(rows[p + q]) * K;
        const double v = static_cast<double>(values[p + q]);
        double* s = acc + q * K;
        for (size_t r = 0; r < K; ++r) s[r] += ar[r] * v;
      }
    }
  }
  for (; p < nnz; ++p) {
    const double* ar = a + static_cast<size_t>(rows[p]) * K;
    const double v = static_cast<double>(values[p]);
    for (size_t r = 0; r < K; ++r) acc[r] += ar[r] * v;
  }
  if (lanes == 1) {
    for (size_t r = 0; r < K; ++r) out[r] = acc[r];
    return;
  }
  for (size_t r = 0; r < K; ++r) out[r] = (acc[r] + acc[K + r]) + (acc[2 * K + r] + acc[3 * K + r]);
}

namespace detail {

// block_column_dots_many from the block's row order: the same adds per
// column as the cell walk (one cell per column and tile; a short cell's
// entries keep their row order), each entry's K products from one row of
// interleaved duals.
inline void row_order_dots_many(const ColumnBlock& block, const double* a, size_t K, double* acc, double* c) {
  const RowOrder& o = *block.row_order;
  for (uint64_t k = 0; k < block.column_count * K; ++k) c[k] = 0;
  double* partial = acc + 4 * K;
  for (uint32_t t = 0; t < block.tile_count; ++t) {
    const double* slice = a + uint64_t{t} * block.tile_rows * K;
    SlicePrefetch prefetch = next_tile_slice(block, t, a, K);
    for (uint32_t e = o.tile_entries[t]; e < o.tile_entries[t + 1]; ++e) {
      const double* ar = slice + static_cast<size_t>(o.row[e]) * K;
      const double v = static_cast<double>(o.value[e]);
      double* ck = c + static_cast<size_t>(o.column[e]) * K;
      for (size_t r = 0; r < K; ++r) ck[r] += ar[r] * v;
    }
    for (uint32_t l = o.tile_long[t]; l < o.tile_long[t + 1]; ++l) {
      prefetch.step();
      const uint32_t cell = o.long_cells[l], begin = block.cell_ptr[cell];
      cell_dot_many(block.row_ids + begin, block.values + begin, block.cell_ptr[cell + 1] - begin, a, K, acc,
                    partial);
      double* ck = c + static_cast<size_t>(block.cell_column[cell]) * K;
      for (size_t r = 0; r < K; ++r) ck[r] += partial[r];
    }
  }
}

}  // namespace detail

// block_column_dots for K interleaved dual vectors: c[k·K + r]
// (column_count·K entries) equals block_column_dots against a_r bit for bit.
// Blocks with a row order are summed from it (as block_column_dots does).
// `acc`: 5·K doubles.
inline void block_column_dots_many(const ColumnBlock& block, const double* a, size_t K, double* acc, double* c) {
  if (block.row_order) {
    detail::row_order_dots_many(block, a, K, acc, c);
    return;
  }
  for (uint64_t k = 0; k < block.column_count * K; ++k) c[k] = 0;
  double* partial = acc + 4 * K;
  for (uint32_t t = 0; t < block.tile_count; ++t)
    detail::walk_tile(
        block, block.tile_cells[t], block.tile_cells[t + 1], detail::next_tile_slice(block, t, a, K),
        [&](uint32_t q, uint32_t k) {
          const double* ar = a + static_cast<size_t>(block.row_ids[q]) * K;
          const double v = static_cast<double>(block.values[q]);
          double* ck = c + static_cast<size_t>(k) * K;
          for (size_t r = 0; r < K; ++r) ck[r] += ar[r] * v;
        },
        [&](uint32_t cell) {
          const uint32_t begin = block.cell_ptr[cell];
          cell_dot_many(block.row_ids + begin, block.values + begin, block.cell_ptr[cell + 1] - begin, a, K, acc,
                        partial);
          double* ck = c + static_cast<size_t>(block.cell_column[cell]) * K;
          for (size_t r = 0; r < K; ++r) ck[r] += partial[r];
        });
}

// c_j from a whole column (rows increasing), summed exactly as
// block_column_dots sums it in a store with `tile_rows` rows per tile. Lets
// code that holds the column (the selected-feature cache) reproduce a pass's c_j.
inline double tiled_column_dot(const uint32_t* rows, const float* values, uint64_t nnz, const double* a,
                               uint32_t tile_rows) {
  double c = 0;
  for (uint64_t begin = 0; begin < nnz;) {
    const uint64_t tile_end = tile_rows == 0 ? UINT64_MAX : (uint64_t{rows[begin]} / tile_rows + 1) * tile_rows;
    uint64_t end = begin + 1;
    while (end < nnz && rows[end] < tile_end) ++end;
    if (end - begin >= kMultiAccumulatorCell) {
      c += cell_dot(rows + begin, values + begin, static_cast<uint32_t>(end - begin), a);
    } else {
      for (uint64_t p = begin; p < end; ++p) c += a[rows[p]] * static_cast<double>(values[p]);
    }
    begin = end;
  }
  return c;
}

}  // namespace fgm
