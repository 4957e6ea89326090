// c = Σ_i a_i x_i for a selected-feature cache column of any form, the same
// sequence of floating-point operations as tiled_column_dot over the column's
// (rows, values) arrays (the scoring pass's summation, features/block_scores.h),
// so c is bit-identical to the score the pass computed.
#pragma once

#include <cstdint>
#include <vector>

#include "cache/selected_features.h"
#include "features/block_scores.h"

namespace fgm {

// Compact forms are walked in row order, one tile's entries (at most
// tile_rows ≤ 2^16, so ≤ 512 KiB of scratch) at a time.
inline double tiled_column_dot(const ColumnView& col, const double* a, uint32_t tile_rows) {
  if (col.form == ColumnForm::kSparse) return tiled_column_dot(col.rows, col.values, col.nnz, a, tile_rows);
  std::vector<uint32_t> rows;
  std::vector<float> values;
  double c = 0;
  uint64_t tile_end = 0;
  auto flush = [&] {
    if (rows.size() >= kMultiAccumulatorCell) {
      c += cell_dot(rows.data(), values.data(), static_cast<uint32_t>(rows.size()), a);
    } else {
      for (size_t p = 0; p < rows.size(); ++p) c += a[rows[p]] * static_cast<double>(values[p]);
    }
    rows.clear();
    values.clear();
  };
  col.for_each([&](uint32_t row, float value) {
    if (!rows.empty() && row >= tile_end) flush();
    if (rows.empty()) tile_end = tile_rows == 0 ? UINT64_MAX : (uint64_t{row} / tile_rows + 1) * tile_rows;
    rows.push_back(row);
    values.push_back(value);
  });
  flush();
  return c;
}

}  // namespace fgm
