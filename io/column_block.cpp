#include "io/column_block.h"

namespace fgm {

CscColumns csc_columns(const ColumnBlock& block, CscScratch& scratch) {
  CscColumns out;
  out.column_count = block.column_count;
  out.column_ids = block.column_ids;
  out.col_min = block.col_min;
  out.col_max = block.col_max;
  if (block.tile_count <= 1) {
    // One tile: cell c is column c (every listed column is non-empty).
    static const uint32_t kEmpty[1] = {0};
    out.col_ptr = block.tile_count == 0 ? kEmpty : block.cell_ptr;
    out.row_ids = block.row_ids;
    out.values = block.values;
    return out;
  }
  const uint64_t k = block.column_count, cells = block.cell_count();
  scratch.col_ptr.assign(k + 1, 0);
  for (uint64_t c = 0; c < cells; ++c)
    scratch.col_ptr[block.cell_column[c] + 1] += block.cell_ptr[c + 1] - block.cell_ptr[c];
  for (uint64_t j = 0; j < k; ++j) scratch.col_ptr[j + 1] += scratch.col_ptr[j];
  const uint64_t nnz = block.nnz();
  scratch.row_ids.resize(nnz);
  scratch.values.resize(nnz);
  // Tiles in order, so each column's rows arrive increasing.
  HugeVector<uint32_t>& fill = scratch.fill;
  fill.assign(scratch.col_ptr.begin(), scratch.col_ptr.end() - 1);
  for (uint64_t c = 0; c < cells; ++c) {
    uint32_t& at = fill[block.cell_column[c]];
    for (uint32_t p = block.cell_ptr[c]; p < block.cell_ptr[c + 1]; ++p, ++at) {
      scratch.row_ids[at] = block.row_ids[p];
      scratch.values[at] = block.values[p];
    }
  }
  out.col_ptr = scratch.col_ptr.data();
  out.row_ids = scratch.row_ids.data();
  out.values = scratch.values.data();
  return out;
}

}  // namespace fgm
