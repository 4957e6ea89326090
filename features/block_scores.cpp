// Building a block's row order (features/block_scores.h): per tile, the short
// cells' nonzeros counting-sorted by tile-local row.
#include "features/block_scores.h"

#include <algorithm>
#include <vector>

namespace fgm {

bool wants_row_order(const ColumnBlock& block) {
  return block.tile_count > 1 && block.tile_rows <= (uint32_t{1} << 16) &&
         block.nnz() < 4 * uint64_t{block.cell_count()};
}

RowOrderSize row_order_size(const ColumnBlock& block) {
  RowOrderSize size;
  size.tiles = block.tile_count;
  for (uint32_t cell = 0; cell < block.cell_count(); ++cell) {
    const uint32_t n = block.cell_ptr[cell + 1] - block.cell_ptr[cell];
    if (n < kMultiAccumulatorCell) size.entries += n;
    else size.long_cells += 1;
  }
  return size;
}

RowOrder build_row_order(const ColumnBlock& block, uint8_t* memory) {
  const RowOrderSize size = row_order_size(block);
  const uint32_t T = block.tile_count;
  auto take = [&](uint64_t bytes) {
    uint8_t* begin = memory;
    memory += (bytes + 7) / 8 * 8;
    return begin;
  };
  auto* tile_entries = reinterpret_cast<uint32_t*>(take(4 * (size.tiles + 1)));
  auto* tile_long = reinterpret_cast<uint32_t*>(take(4 * (size.tiles + 1)));
  auto* column = reinterpret_cast<uint32_t*>(take(4 * size.entries));
  auto* row = reinterpret_cast<uint16_t*>(take(2 * size.entries));
  auto* value = reinterpret_cast<float*>(take(4 * size.entries));
  auto* long_cells = reinterpret_cast<uint32_t*>(take(4 * size.long_cells));
  // Counting sort by row; cells are visited in storage order (columns
  // increasing), so a row's entries keep increasing columns and a column's
  // entries keep increasing rows.
  std::vector<uint32_t> at(uint64_t{block.tile_rows} + 1);
  uint32_t filled = 0, longs = 0;
  tile_entries[0] = 0;
  tile_long[0] = 0;
  for (uint32_t t = 0; t < T; ++t) {
    const uint64_t row_base = uint64_t{t} * block.tile_rows;
    const uint32_t rows = block.tile_rows;
    std::fill(at.begin(), at.begin() + rows + 1, 0);
    for (uint32_t cell = block.tile_cells[t]; cell < block.tile_cells[t + 1]; ++cell) {
      const uint32_t begin = block.cell_ptr[cell], end = block.cell_ptr[cell + 1];
      if (end - begin >= kMultiAccumulatorCell) {
        long_cells[longs++] = cell;
        continue;
      }
      for (uint32_t p = begin; p < end; ++p) ++at[block.row_ids[p] - row_base + 1];
    }
    at[0] = filled;
    for (uint32_t r = 0; r < rows; ++r) at[r + 1] += at[r];
    for (uint32_t cell = block.tile_cells[t]; cell < block.tile_cells[t + 1]; ++cell) {
      const uint32_t begin = block.cell_ptr[cell], end = block.cell_ptr[cell + 1];
      if (end - begin >= kMultiAccumulatorCell) continue;
      for (uint32_t p = begin; p < end; ++p) {
        const uint32_t local = static_cast<uint32_t>(block.row_ids[p] - row_base);
        const uint32_t e = at[local]++;
        column[e] = block.cell_column[cell];
        row[e] = static_cast<uint16_t>(local);
        value[e] = block.values[p];
      }
    }
    filled = at[rows];
    tile_entries[t + 1] = filled;
    tile_long[t + 1] = longs;
  }
  RowOrder view;
  view.tile_entries = tile_entries;
  view.column = column;
  view.row = row;
  view.value = value;
  view.tile_long = tile_long;
  view.long_cells = long_cells;
  return view;
}

}  // namespace fgm
