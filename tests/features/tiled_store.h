// Test-only: tiled ColumnBlocks (io/column_block.h) built from triplets, and a
// ShardStore that serves them from memory with a chosen tile size and any id
// space (hashed ids up to 2^63). Lets the consumers of blocks be tested on many
// tiles and sparse id spaces independently of the store's writer; it is not a
// second writer (no files).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "io/column_block.h"
#include "io/shard_store.h"

namespace fgm::test {

struct Triplet {
  uint32_t row = 0;
  uint64_t column = 0;
  float value = 0;
};

// The arrays of one tiled block and its view.
struct TiledBlock {
  std::vector<uint64_t> column_ids;
  std::vector<float> col_min, col_max;
  std::vector<uint32_t> tile_cells, cell_column, cell_ptr, row_ids;
  std::vector<float> values;
  ColumnBlock view;
};

// The nonzeros of `triplets` with columns in [first, end), tiled by
// `tile_rows` (n_rows rows in all; at most one triplet per (row, column)).
inline std::unique_ptr<TiledBlock> build_tiled_block(std::vector<Triplet> triplets, uint64_t n_rows,
                                                     uint32_t tile_rows, uint64_t first, uint64_t end) {
  auto b = std::make_unique<TiledBlock>();
  triplets.erase(std::remove_if(triplets.begin(), triplets.end(),
                                [&](const Triplet& t) { return t.column < first || t.column >= end; }),
                 triplets.end());
  std::set<uint64_t> columns;
  for (const auto& t : triplets) columns.insert(t.column);
  b->column_ids.assign(columns.begin(), columns.end());
  auto index_of = [&](uint64_t column) {
    return static_cast<uint32_t>(std::lower_bound(b->column_ids.begin(), b->column_ids.end(), column) -
                                 b->column_ids.begin());
  };
  // Storage order: tile, then column, then row.
  std::sort(triplets.begin(), triplets.end(), [&](const Triplet& x, const Triplet& y) {
    return std::make_tuple(x.row / tile_rows, x.column, x.row) < std::make_tuple(y.row / tile_rows, y.column, y.row);
  });
  const uint32_t tiles = static_cast<uint32_t>((n_rows + tile_rows - 1) / tile_rows);
  b->tile_cells.assign(tiles + 1, 0);
  b->cell_ptr.push_back(0);
  for (size_t p = 0; p < triplets.size(); ++p) {
    const Triplet& t = triplets[p];
    const bool new_cell = p == 0 || triplets[p - 1].row / tile_rows != t.row / tile_rows ||
                          triplets[p - 1].column != t.column;
    if (new_cell) {
      if (p > 0) b->cell_ptr.push_back(static_cast<uint32_t>(p));
      b->cell_column.push_back(index_of(t.column));
      ++b->tile_cells[t.row / tile_rows + 1];
    }
    b->row_ids.push_back(t.row);
    b->values.push_back(t.value);
  }
  if (!triplets.empty()) b->cell_ptr.push_back(static_cast<uint32_t>(triplets.size()));
  for (uint32_t t = 0; t < tiles; ++t) b->tile_cells[t + 1] += b->tile_cells[t];
  const size_t k = b->column_ids.size();
  std::vector<uint64_t> count(k, 0);
  b->col_min.assign(k, std::numeric_limits<float>::infinity());
  b->col_max.assign(k, -std::numeric_limits<float>::infinity());
  for (const auto& t : triplets) {
    const uint32_t c = index_of(t.column);
    ++count[c];
    b->col_min[c] = std::min(b->col_min[c], t.value);
    b->col_max[c] = std::max(b->col_max[c], t.value);
  }
  for (size_t c = 0; c < k; ++c)
    if (count[c] < n_rows) {
      b->col_min[c] = std::min(b->col_min[c], 0.0f);
      b->col_max[c] = std::max(b->col_max[c], 0.0f);
    }
  ColumnBlock& v = b->view;
  v.first_column = first;
  v.end_column = end;
  v.column_count = k;
  v.column_ids = b->column_ids.data();
  v.col_min = b->col_min.data();
  v.col_max = b->col_max.data();
  v.tile_rows = tile_rows;
  v.tile_count = tiles;
  v.tile_cells = b->tile_cells.data();
  v.cell_column = b->cell_column.data();
  v.cell_ptr = b->cell_ptr.data();
  v.row_ids = b->row_ids.data();
  v.values = b->values.data();
  return b;
}

// A ShardStore over triplets: blocks of about target_bytes (24 bytes per
// non-empty column + 8 per nonzero), cut between non-empty columns; labels ±1.
class TiledMemoryStore : public ShardStore {
 public:
  TiledMemoryStore(uint64_t n_rows, uint64_t n_features, std::vector<Triplet> triplets, std::vector<int8_t> labels,
                   uint32_t tile_rows)
      : triplets_(std::move(triplets)), labels_(std::move(labels)), classes_(n_rows) {
    std::sort(triplets_.begin(), triplets_.end(),
              [](const Triplet& x, const Triplet& y) { return std::tie(x.column, x.row) < std::tie(y.column, y.row); });
    info_.format_version = 4;
    info_.n_rows = n_rows;
    info_.n_features = n_features;
    info_.nnz = triplets_.size();
    info_.tile_rows = tile_rows;
    info_.index_base = 0;  // ids in group files are the store's own
    info_.class_values = {-1, 1};
    info_.class_counts = {0, 0};
    for (uint64_t i = 0; i < n_rows; ++i) {
      classes_[i] = labels_[i] > 0 ? 1 : 0;
      ++info_.class_counts[classes_[i]];
      (labels_[i] > 0 ? info_.n_positive : info_.n_negative) += 1;
    }
    info_.shard_bytes = 8 * triplets_.size() + 24 * distinct_columns() + 64;
    info_.block_count = distinct_columns();  // plan_blocks never makes more blocks than columns
    info_.nonempty_columns = distinct_columns();
  }

  const StoreInfo& info() const override { return info_; }
  const std::string& dir() const override { return dir_; }
  const int8_t* labels() const override { return labels_.data(); }
  const uint16_t* classes() const override { return classes_.data(); }

  std::vector<BlockRef> plan_blocks(uint64_t target_bytes) const override {
    std::vector<BlockRef> out;
    BlockRef cur;
    cur.first_column = 0;
    for (size_t p = 0; p < triplets_.size();) {
      size_t q = p;
      while (q < triplets_.size() && triplets_[q].column == triplets_[p].column) ++q;
      const uint64_t bytes = 24 + 8 * (q - p);
      if (cur.bytes > 0 && cur.bytes + bytes > target_bytes) {
        cur.end_column = triplets_[p].column;
        out.push_back(cur);
        cur = BlockRef();
        cur.first_column = triplets_[p].column;
      }
      cur.bytes += bytes;
      cur.nnz += q - p;
      cur.column_count += 1;
      p = q;
    }
    cur.end_column = info_.n_features;
    out.push_back(cur);
    return out;
  }
  ColumnBlock read_block(const BlockRef& ref, BlockBuffer&) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& block = blocks_[{ref.first_column, ref.end_column}];
    if (!block)
      block = build_tiled_block(triplets_, info_.n_rows, info_.tile_rows, ref.first_column, ref.end_column);
    return block->view;
  }
  void prefetch_block(const BlockRef&) const override {}
  void read_column(uint64_t feature, std::vector<uint32_t>& rows, std::vector<float>& values) const override {
    rows.clear();
    values.clear();
    auto it = std::lower_bound(triplets_.begin(), triplets_.end(), feature,
                               [](const Triplet& t, uint64_t f) { return t.column < f; });
    for (; it != triplets_.end() && it->column == feature; ++it) {
      rows.push_back(it->row);
      values.push_back(it->value);
    }
  }
  float column_min(uint64_t feature) const override { return column_bound(feature, true); }
  float column_max(uint64_t feature) const override { return column_bound(feature, false); }

 private:
  uint64_t distinct_columns() const {
    uint64_t k = 0;
    for (size_t p = 0; p < triplets_.size(); ++p) k += p == 0 || triplets_[p].column != triplets_[p - 1].column;
    return k;
  }
  float column_bound(uint64_t feature, bool min) const {
    std::vector<uint32_t> rows;
    std::vector<float> values;
    read_column(feature, rows, values);
    float v = values.size() < info_.n_rows ? 0.0f : (min ? INFINITY : -INFINITY);
    for (float x : values) v = min ? std::min(v, x) : std::max(v, x);
    return info_.n_rows == 0 ? 0.0f : v;
  }

  StoreInfo info_;
  std::string dir_ = "(in-memory tiled store)";
  std::vector<Triplet> triplets_;  // by (column, row)
  std::vector<int8_t> labels_;
  std::vector<uint16_t> classes_;
  mutable std::mutex mutex_;
  mutable std::map<std::pair<uint64_t, uint64_t>, std::unique_ptr<TiledBlock>> blocks_;
};

}  // namespace fgm::test
