// The kernel of every linear and group scoring pass: c_k = Σ_i a_i x_ik for
// each listed column k of a tiled block (io/column_block.h).
//
// The block is walked cell by cell in storage order, which is tile by tile:
// while the cells of tile t are summed, every one of them gathers from the
// same slice a[t·tile_rows, (t+1)·tile_rows), which stays in L2 (the reason
// for tiles). A cell's nonzeros are summed into a partial, and the partials
// are added into the block's score array c in cell order, so column k's sum is
// ((p_0 + p_1) + p_2) … over its tiles in row order: fixed by the data and the
// store's tile size, the same for any thread count and any grouping of
// columns into blocks.
//
// Four accumulators (to hide the gather latency) pay only on long cells; a
// cell shorter than kMultiAccumulatorCell uses one. The choice depends on the
// cell's length alone, so it is as deterministic as the rest.
#pragma once

#include <cstddef>
#include <cstdint>

#include "io/column_block.h"

namespace fgm {

inline constexpr uint32_t kMultiAccumulatorCell = 16;

// Σ_p a[rows[p]]·values[p] over one cell (or one whole column).
inline double cell_dot(const uint32_t* rows, const float* values, uint32_t nnz, const double* a) {
  if (nnz < kMultiAccumulatorCell) {
    double s = 0;
    for (uint32_t k = 0; k < nnz; ++k) s += a[rows[k]] * static_cast<double>(values[k]);
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

// c[k] = Σ_i a_i x_ik for k < block.column_count (c has column_count entries).
inline void block_column_dots(const ColumnBlock& block, const double* a, double* c) {
  for (uint64_t k = 0; k < block.column_count; ++k) c[k] = 0;
  const uint32_t cells = block.cell_count();
  for (uint32_t cell = 0; cell < cells; ++cell) {
    const uint32_t begin = block.cell_ptr[cell];
    c[block.cell_column[cell]] +=
        cell_dot(block.row_ids + begin, block.values + begin, block.cell_ptr[cell + 1] - begin, a);
  }
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

// block_column_dots for K interleaved dual vectors: c[k·K + r] (column_count·K
// entries) equals block_column_dots against a_r bit for bit. `scratch`: 5·K doubles.
inline void block_column_dots_many(const ColumnBlock& block, const double* a, size_t K, double* scratch,
                                   double* c) {
  for (uint64_t k = 0; k < block.column_count * K; ++k) c[k] = 0;
  double* partial = scratch + 4 * K;
  const uint32_t cells = block.cell_count();
  for (uint32_t cell = 0; cell < cells; ++cell) {
    const uint32_t begin = block.cell_ptr[cell];
    cell_dot_many(block.row_ids + begin, block.values + begin, block.cell_ptr[cell + 1] - begin, a, K, scratch,
                  partial);
    double* ck = c + static_cast<size_t>(block.cell_column[cell]) * K;
    for (size_t r = 0; r < K; ++r) ck[r] += partial[r];
  }
}

// c_j from a whole column (rows increasing), summed exactly as
// block_column_dots sums it in a store with `tile_rows` rows per tile: one
// partial per tile the column has rows in, added in tile order. Lets code that
// holds the column (the selected-feature cache) reproduce a pass's c_j.
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
