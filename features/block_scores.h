// The kernel of every linear and group scoring pass: c_k = Σ_i a_i x_ik for
// each listed column k of a tiled block (io/column_block.h).
//
// The block is walked tile by tile: while tile t is summed, every nonzero of
// every column of the block gathers from the same slice a[t·tile_rows,
// (t+1)·tile_rows), which stays in cache (the reason for tiles), and the
// slice of tile t + 1 is prefetched (detail::SlicePrefetch). Each cell is
// summed on its own (cell_dot) and its partial added to c[column]: column k's
// sum is c_k = ((0 + p_1) + p_2) + … over its cells p_t in tile order, decided
// by its own cells alone: the same for any thread count and any grouping of
// columns into blocks. Most cells of tall sparse data hold one or two
// nonzeros; those are summed without a branch on their length.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "io/column_block.h"

namespace fgm {

inline constexpr uint32_t kMultiAccumulatorCell = 16;

// Σ_p a[rows[p]]·values[p] over one cell (or one whole column): left to right
// from the first product, or with four accumulators (which hide the gather
// latency) for a long cell.
inline double cell_dot(const uint32_t* rows, const float* values, uint32_t nnz, const double* a) {
  if (nnz == 0) return 0;
  if (nnz < kMultiAccumulatorCell) {
    double s = a[rows[0]] * static_cast<double>(values[0]);
    for (uint32_t k = 1; k < nnz; ++k) s += a[rows[k]] * static_cast<double>(values[k]);
    return s;
  }
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  uint32_t k = 0;
  for (; k + 4 <= nnz; k += 4) {
    s0 += a[rows[k]] * static_cast<double>(values[k]);
    s1 += a[rows[k + 1]] * static_cast<double>(values[k + 1]);
    s2 += a[rows[k + 2]] * static_cast<double>(values[k + 2]);
    s3 += a[rows[k + 3]] * static_cast<double>(values[k + 3]);
  }
  for (; k < nnz; ++k) s0 += a[rows[k]] * static_cast<double>(values[k]);
  return (s0 + s1) + (s2 + s3);
}

namespace detail {

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

 private:
  uintptr_t next_ = 0;
  uintptr_t end_ = 0;
};

// The slice of tile t + 1 (K interleaved doubles per row); none after the last tile.
inline SlicePrefetch next_tile_slice(const ColumnBlock& block, uint32_t t, const double* a, size_t K) {
  if (t + 1 >= block.tile_count) return {};
  return SlicePrefetch(a + uint64_t{t + 1} * block.tile_rows * K, uint64_t{block.tile_rows} * K);
}

}  // namespace detail

// c[k] = Σ_i a_i x_ik for k < block.column_count (c has column_count entries).
// A cell of one or two nonzeros is summed without a branch on its length (the
// second product is read from the first when absent); its partial equals
// cell_dot's.
inline void block_column_dots(const ColumnBlock& block, const double* a, double* c) {
  for (uint64_t k = 0; k < block.column_count; ++k) c[k] = 0;
  const uint32_t* ptr = block.cell_ptr;
  const uint32_t* rows = block.row_ids;
  const float* values = block.values;
  const uint32_t* column = block.cell_column;
  for (uint32_t t = 0; t < block.tile_count; ++t) {
    detail::SlicePrefetch prefetch = detail::next_tile_slice(block, t, a, 1);
    for (uint32_t q = block.tile_cells[t]; q < block.tile_cells[t + 1]; ++q) {
      prefetch.step();
      const uint32_t p = ptr[q], nnz = ptr[q + 1] - p;
      if (nnz <= 2) {
        const double x0 = a[rows[p]] * static_cast<double>(values[p]);
        const uint32_t p1 = nnz == 2 ? p + 1 : p;
        const double x1 = a[rows[p1]] * static_cast<double>(values[p1]);
        c[column[q]] += nnz == 2 ? x0 + x1 : x0;
      } else {
        c[column[q]] += cell_dot(rows + p, values + p, nnz, a);
      }
    }
  }
}

// cell_dot against K dual vectors interleaved row by row (vector r's entry i
// is a[i·K + r]), so one gather per nonzero serves all K: out[r] equals
// cell_dot(rows, values, nnz, a_r) bit for bit (same accumulators, same
// order). `acc` is scratch of 4·K doubles.
inline void cell_dot_many(const uint32_t* rows, const float* values, uint32_t nnz, const double* a, size_t K,
                          double* acc, double* out) {
  if (nnz < kMultiAccumulatorCell) {
    if (nnz == 0) {
      for (size_t r = 0; r < K; ++r) out[r] = 0;
      return;
    }
    const double* a0 = a + static_cast<size_t>(rows[0]) * K;
    const double v0 = static_cast<double>(values[0]);
    for (size_t r = 0; r < K; ++r) out[r] = a0[r] * v0;
    for (uint32_t p = 1; p < nnz; ++p) {
      const double* ar = a + static_cast<size_t>(rows[p]) * K;
      const double v = static_cast<double>(values[p]);
      for (size_t r = 0; r < K; ++r) out[r] += ar[r] * v;
    }
    return;
  }
  for (size_t k = 0; k < 4 * K; ++k) acc[k] = 0;
  uint32_t p = 0;
  for (; p + 4 <= nnz; p += 4) {
    for (size_t q = 0; q < 4; ++q) {
      const double* ar = a + static_cast<size_t>(rows[p + q]) * K;
      const double v = static_cast<double>(values[p + q]);
      double* s = acc + q * K;
      for (size_t r = 0; r < K; ++r) s[r] += ar[r] * v;
    }
  }
  for (; p < nnz; ++p) {
    const double* ar = a + static_cast<size_t>(rows[p]) * K;
    const double v = static_cast<double>(values[p]);
    for (size_t r = 0; r < K; ++r) acc[r] += ar[r] * v;
  }
  for (size_t r = 0; r < K; ++r) out[r] = (acc[r] + acc[K + r]) + (acc[2 * K + r] + acc[3 * K + r]);
}

// block_column_dots for K interleaved dual vectors: c[k·K + r]
// (column_count·K entries) equals block_column_dots against a_r bit for bit.
// `acc`: 5·K doubles.
inline void block_column_dots_many(const ColumnBlock& block, const double* a, size_t K, double* acc, double* c) {
  for (uint64_t k = 0; k < block.column_count * K; ++k) c[k] = 0;
  double* partial = acc + 4 * K;
  for (uint32_t t = 0; t < block.tile_count; ++t) {
    detail::SlicePrefetch prefetch = detail::next_tile_slice(block, t, a, K);
    for (uint32_t q = block.tile_cells[t]; q < block.tile_cells[t + 1]; ++q) {
      prefetch.step();
      const uint32_t begin = block.cell_ptr[q];
      cell_dot_many(block.row_ids + begin, block.values + begin, block.cell_ptr[q + 1] - begin, a, K, acc, partial);
      double* ck = c + static_cast<size_t>(block.cell_column[q]) * K;
      for (size_t r = 0; r < K; ++r) ck[r] += partial[r];
    }
  }
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
    c += cell_dot(rows + begin, values + begin, static_cast<uint32_t>(end - begin), a);
    begin = end;
  }
  return c;
}

}  // namespace fgm
