// The in-memory view of one stored column block (store formats 4 and 5): the
// nonzeros of a range of feature ids, split into row tiles (Compressed Sparse
// Blocks, Buluç et al. 2009). Rows of tile t are [t·tile_rows, (t+1)·tile_rows).
//
// Why tiles: a scoring pass computes c_j = Σ_i a_i x_ij. Gathering a_i for a
// whole column touches the entire dual vector once per nonzero, which on a
// tall store (n = 3·10^6: 24 MB of doubles) misses the caches on almost every
// nonzero. Walking a block tile by tile keeps the slice a[tile] (tile_rows·8
// bytes, 512 KiB for 65,536 rows) in L2 while every column of the block reads
// it; per-column sums are added in tile order, a fixed order, so results do
// not depend on threads.
//
// Why doubly compressed: only columns with nonzeros are listed (column_ids),
// and inside a tile only columns with nonzeros in that tile have a cell. The
// size of a block depends on its nonzeros, never on the width of its id range,
// so hashed id spaces (ids up to 2^63) cost nothing for the ids nobody uses.
//
// Layout of the arrays (all views into a caller-owned buffer):
//   column_ids[k]            the block's non-empty columns, increasing ids
//   col_min[k], col_max[k]   per column over all n rows (implicit zeros count)
//   tile_cells[T+1]          tile t owns cells [tile_cells[t], tile_cells[t+1])
//   cell_column[cells]       index into column_ids; increasing inside a tile
//   cell_ptr[cells+1]        cell c owns nonzeros [cell_ptr[c], cell_ptr[c+1])
//   row_ids[nnz], values[nnz] global row ids (increasing inside a cell), values
// With one tile every non-empty column has exactly one cell, cell_column[c] =
// c, and the block is plain CSC over its non-empty columns.
//
// A block kept in memory between passes may also carry a RowOrder (below): the
// nonzeros of its short cells again, ordered by row inside each tile.
#pragma once

#include <cstdint>
#include <vector>

#include "core/huge_pages.h"

namespace fgm {

// The nonzeros of a tiled block's short cells (fewer than
// kMultiAccumulatorCell, features/block_scores.h) ordered by row inside each
// tile, each with its column: the order in which a gather kernel sweeps the
// tile's dual slice forward (the hardware prefetcher follows it) and never
// waits on a cell boundary, where the cell walk takes one unpredictable
// branch per cell of 1–3 nonzeros on tall sparse data. Long cells stay in the
// cell arrays and are listed per tile. Built in memory
// (features/block_scores.h, build_row_order), never stored; tile_rows must be
// at most 2^16.
//   tile_entries[T+1]   tile t owns entries [tile_entries[t], tile_entries[t+1])
//   column[e]           index into column_ids
//   row[e], value[e]    row − t·tile_rows (increasing inside a tile), value
//   tile_long[T+1]      tile t owns long_cells [tile_long[t], tile_long[t+1])
//   long_cells[l]       cell index (into the block's cell arrays)
// Inside a tile, a column's entries keep their cell's order (rows increasing).
struct RowOrder {
  const uint32_t* tile_entries = nullptr;
  const uint32_t* column = nullptr;
  const uint16_t* row = nullptr;
  const float* value = nullptr;
  const uint32_t* tile_long = nullptr;
  const uint32_t* long_cells = nullptr;
};

struct ColumnBlock {
  uint64_t first_column = 0;  // the id range this block covers: [first_column, end_column)
  uint64_t end_column = 0;
  uint64_t column_count = 0;  // non-empty columns listed (k)
  const uint64_t* column_ids = nullptr;
  const float* col_min = nullptr;
  const float* col_max = nullptr;
  uint32_t tile_rows = 0;
  uint32_t tile_count = 0;  // T = ceil(n_rows / tile_rows) (0 when the store has no rows)
  const uint32_t* tile_cells = nullptr;
  const uint32_t* cell_column = nullptr;
  const uint32_t* cell_ptr = nullptr;
  const uint32_t* row_ids = nullptr;
  const float* values = nullptr;
  // A unit-valued stored block (store format 5): every value is 1.0 and
  // `values` points at read-only ones shared by the store (at least nnz of
  // them), not into the read buffer; a copy keeps the pointer, a consumer
  // that rewrites values writes them elsewhere.
  bool unit_values = false;
  const RowOrder* row_order = nullptr;  // optional: the same nonzeros by row (blocks kept in memory)
  // Optional: each listed column's nonzeros (blocks kept in memory; the
  // pruned scoring pass's bounds, features/column_pruning.h, then need no scan).
  const uint32_t* column_nnz = nullptr;

  uint32_t cell_count() const { return tile_count == 0 ? 0 : tile_cells[tile_count]; }
  uint64_t nnz() const { return tile_count == 0 ? 0 : cell_ptr[cell_count()]; }
};

// The nonzeros of a block column by column (rows increasing): the view for
// consumers that need a whole column at once (poly-2 pairs, kernel
// expansions, statistics). Column c holds row_ids/values[col_ptr[c],
// col_ptr[c+1]); column_ids, col_min and col_max are the block's own.
struct CscColumns {
  uint64_t column_count = 0;
  const uint64_t* column_ids = nullptr;
  const float* col_min = nullptr;
  const float* col_max = nullptr;
  const uint32_t* col_ptr = nullptr;  // column_count + 1 entries
  const uint32_t* row_ids = nullptr;
  const float* values = nullptr;
};

// Storage behind a CscColumns built from a tiled block (reused across blocks).
struct CscScratch {
  HugeVector<uint32_t> col_ptr, row_ids, fill;  // 2 MiB pages: one scratch per block of a pass
  HugeVector<float> values;
  // Bytes this scratch needs for a block (for a budget reservation).
  static uint64_t bytes_for(const ColumnBlock& block) {
    return 4 * (block.column_count + 1) + 8 * block.nnz();
  }
};

// A block's columns. With one tile this is a view of the block itself (no
// copy); otherwise the tiles are merged column by column into `scratch`
// (O(nnz + cells), row order preserved: tiles are in row order).
CscColumns csc_columns(const ColumnBlock& block, CscScratch& scratch);

}  // namespace fgm
