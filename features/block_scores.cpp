// Building a block's row order (features/block_scores.h): per tile, the short
// cells' nonzeros counting-sorted by tile-local row.
#include "features/block_scores.h"

namespace fgm {

bool wants_row_order(const ColumnBlock& block) {
  return block.tile_count > 1 && block.tile_rows <= (uint32_t{1} << 16) &&
         block.nnz() < 4 * uint64_t{block.cell_count()};
}

void build_row_order(const ColumnBlock& block, RowOrderArrays& out) {
  const uint32_t T = block.tile_count;
  out.tile_entries.assign(T + 1, 0);
  out.tile_long.assign(T + 1, 0);
  out.long_cells.clear();
  uint64_t short_nnz = 0;
  for (uint32_t cell = 0; cell < block.cell_count(); ++cell) {
    const uint32_t n = block.cell_ptr[cell + 1] - block.cell_ptr[cell];
    if (n < kMultiAccumulatorCell) short_nnz += n;
  }
  out.column.resize(short_nnz);
  out.row.resize(short_nnz);
  out.value.resize(short_nnz);
  // Counting sort by row; cells are visited in storage order (columns
  // increasing), so a row's entries keep increasing columns and a column's
  // entries keep increasing rows.
  std::vector<uint32_t> at(uint64_t{block.tile_rows} + 1);
  uint32_t filled = 0;
  for (uint32_t t = 0; t < T; ++t) {
    const uint64_t row_base = uint64_t{t} * block.tile_rows;
    std::fill(at.begin(), at.end(), 0);
    for (uint32_t cell = block.tile_cells[t]; cell < block.tile_cells[t + 1]; ++cell) {
      const uint32_t begin = block.cell_ptr[cell], end = block.cell_ptr[cell + 1];
      if (end - begin >= kMultiAccumulatorCell) {
        out.long_cells.push_back(cell);
        continue;
      }
      for (uint32_t p = begin; p < end; ++p) ++at[block.row_ids[p] - row_base + 1];
    }
    at[0] = filled;
    for (uint32_t r = 0; r < block.tile_rows; ++r) at[r + 1] += at[r];
    for (uint32_t cell = block.tile_cells[t]; cell < block.tile_cells[t + 1]; ++cell) {
      const uint32_t begin = block.cell_ptr[cell], end = block.cell_ptr[cell + 1];
      if (end - begin >= kMultiAccumulatorCell) continue;
      for (uint32_t p = begin; p < end; ++p) {
        const uint32_t local = static_cast<uint32_t>(block.row_ids[p] - row_base);
        const uint32_t e = at[local]++;
        out.column[e] = block.cell_column[cell];
        out.row[e] = static_cast<uint16_t>(local);
        out.value[e] = block.values[p];
      }
    }
    filled = at[block.tile_rows];
    out.tile_entries[t + 1] = filled;
    out.tile_long[t + 1] = static_cast<uint32_t>(out.long_cells.size());
  }
  out.view.tile_entries = out.tile_entries.data();
  out.view.column = out.column.data();
  out.view.row = out.row.data();
  out.view.value = out.value.data();
  out.view.tile_long = out.tile_long.data();
  out.view.long_cells = out.long_cells.data();
}

}  // namespace fgm
