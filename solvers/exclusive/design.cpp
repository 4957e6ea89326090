#include "solvers/exclusive/design.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "core/error.h"
#include "features/block_scores.h"
#include "io/column_block.h"

namespace fgm::exclusive {

InMemoryDesign::InMemoryDesign(uint64_t rows, std::vector<uint64_t> ids, std::vector<uint64_t> column_ptr,
                               std::vector<uint32_t> row_ids, std::vector<float> values, MemoryBudget& budget)
    : budget_(budget), rows_(rows), ids_(std::move(ids)), column_ptr_(std::move(column_ptr)), row_ids_(std::move(row_ids)),
      values_(std::move(values)) {
  FGM_ASSERT(column_ptr_.size() == ids_.size() + 1 && row_ids_.size() == values_.size());
  memory_ = budget.reserve(ids_.size() * 16 + row_ids_.size() * 8, "exclusive: columns held in memory",
                           "lower exclusive.working_set_growth or use fewer features");
}

InMemoryDesign InMemoryDesign::from_dense(uint64_t rows, uint64_t cols, const std::vector<double>& dense,
                                          MemoryBudget& budget) {
  std::vector<uint64_t> ids(cols), ptr{0};
  std::vector<uint32_t> row_ids;
  std::vector<float> values;
  for (uint64_t j = 0; j < cols; ++j) {
    ids[j] = j;
    for (uint64_t i = 0; i < rows; ++i)
      if (dense[i * cols + j] != 0) {
        row_ids.push_back(static_cast<uint32_t>(i));
        FGM_ASSERT(double(float(dense[i * cols + j])) == dense[i * cols + j]);
        values.push_back(float(dense[i * cols + j]));
      }
    ptr.push_back(row_ids.size());
  }
  return InMemoryDesign(rows, std::move(ids), std::move(ptr), std::move(row_ids), std::move(values), budget);
}

std::unique_ptr<Design> InMemoryDesign::restrict_columns(const std::vector<uint64_t>& sorted_columns) {
  std::vector<uint64_t> ids, ptr{0};
  std::vector<uint32_t> rows;
  std::vector<float> values;
  for (uint64_t k : sorted_columns) {
    ids.push_back(ids_[k]);
    rows.insert(rows.end(), row_ids_.begin() + column_ptr_[k], row_ids_.begin() + column_ptr_[k + 1]);
    values.insert(values.end(), values_.begin() + column_ptr_[k], values_.begin() + column_ptr_[k + 1]);
    ptr.push_back(rows.size());
  }
  return std::make_unique<InMemoryDesign>(rows_, std::move(ids), std::move(ptr), std::move(rows), std::move(values),
                                          budget_);
}

void InMemoryDesign::multiply(const double* x, double* z) {
  std::fill(z, z + rows_, 0.0);
  for (uint64_t k = 0; k < ids_.size(); ++k) {
    if (x[k] == 0) continue;
    for (uint64_t q = column_ptr_[k]; q < column_ptr_[k + 1]; ++q) z[row_ids_[q]] += x[k] * static_cast<double>(values_[q]);
  }
  ++passes_;
}

void InMemoryDesign::multiply_transposed(const double* r, double* g) {
  for (uint64_t k = 0; k < ids_.size(); ++k) {
    double s = 0;
    for (uint64_t q = column_ptr_[k]; q < column_ptr_[k + 1]; ++q) s += r[row_ids_[q]] * static_cast<double>(values_[q]);
    g[k] = s;
  }
  ++passes_;
}

namespace {

// One block's part of z = Xx: (row, x_k·value) for the nonzeros of the
// columns with x_k ≠ 0, in storage order (added to z in block order).
void append_products(const ColumnBlock& block, const double* x, BlockProducts& out) {
  out.dense = false;
  out.rows.clear();
  out.values.clear();
  for (uint32_t t = 0; t < block.tile_count; ++t)
    for (uint32_t c = block.tile_cells[t]; c < block.tile_cells[t + 1]; ++c) {
      const double xk = x[block.cell_column[c]];
      if (xk == 0) continue;
      for (uint32_t q = block.cell_ptr[c]; q < block.cell_ptr[c + 1]; ++q) {
        out.rows.push_back(block.row_ids[q]);
        out.values.push_back(xk * static_cast<double>(block.values[q]));
      }
    }
}

// The block's part of z = Xx summed into a dense vector of n rows.
void dense_products(const ColumnBlock& block, const double* x, uint64_t rows, BlockProducts& out) {
  out.dense = true;
  out.values.assign(rows, 0.0);
  double* z = out.values.data();
  for (uint32_t t = 0; t < block.tile_count; ++t)
    for (uint32_t c = block.tile_cells[t]; c < block.tile_cells[t + 1]; ++c) {
      const double xk = x[block.cell_column[c]];
      if (xk == 0) continue;
      for (uint32_t q = block.cell_ptr[c]; q < block.cell_ptr[c + 1]; ++q)
        z[block.row_ids[q]] += xk * static_cast<double>(block.values[q]);
    }
}

// Brings r's first row tile into cache before the gather kernel reads it at
// random (block_column_dots prefetches each next tile's slice, not the first).
// Between two passes a FISTA iteration sweeps a dozen other n-vectors, so r is
// cold: on a9a (one tile) the gathers then missed L2 and the pass took 4.6× as
// long as the same pass with r warm (measured, bench_exclusive_streamed).
void warm_first_tile(const ColumnBlock& block, const double* r, uint64_t rows) {
  const uint64_t doubles = std::min<uint64_t>(rows, block.tile_rows == 0 ? rows : block.tile_rows);
  const char* p = reinterpret_cast<const char*>(r);
  for (uint64_t b = 0; b < doubles * sizeof(double); b += 64) __builtin_prefetch(p + b, 0, 2);
}

// Whether a block's part of z is summed densely (see BlockProducts).
bool wants_dense_products(const BlockRef& ref, uint64_t rows) { return 8 * rows < 12 * ref.nnz; }

}  // namespace

StreamedDesign::StreamedDesign(const BlockStream& stream, std::vector<BlockRef> blocks, MemoryBudget& budget)
    : stream_(stream), blocks_(std::move(blocks)), budget_(budget), rows_(stream.store().info().n_rows) {
  FGM_ASSERT(std::is_sorted(blocks_.begin(), blocks_.end(), [](const BlockRef& a, const BlockRef& b) {
    return std::tie(a.shard, a.first_block) < std::tie(b.shard, b.first_block);
  }));
  uint64_t p = 0;
  offsets_.reserve(blocks_.size());
  for (const auto& b : blocks_) {
    offsets_.push_back(p);
    p += b.column_count;
  }
  memory_ = budget.reserve(p * sizeof(uint64_t) + blocks_.size() * sizeof(uint64_t),
                           "exclusive: ids of the store's non-empty columns");
  ids_.reserve(p);
  stream_blocks<std::vector<uint64_t>>(
      stream_, blocks_, "exclusive census",
      [](const BlockRef&, const ColumnBlock& block) {
        return std::vector<uint64_t>(block.column_ids, block.column_ids + block.column_count);
      },
      [&](std::vector<uint64_t>&& ids) { ids_.insert(ids_.end(), ids.begin(), ids.end()); },
      [](const BlockRef& ref) { return ref.column_count * sizeof(uint64_t); });
  if (ids_.size() != p) throw_error(ErrorKind::kCorruption, "store " + stream.store().dir() +
                                                                ": block directory disagrees with its blocks");
}

std::unique_ptr<BlockProducts> StreamedDesign::ProductPool::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.empty()) return std::make_unique<BlockProducts>();
  auto b = std::move(free_.back());
  free_.pop_back();
  return b;
}

void StreamedDesign::ProductPool::give(std::unique_ptr<BlockProducts> b) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(std::move(b));
}

uint64_t StreamedDesign::ProductPool::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t total = 0;
  for (const auto& b : free_) total += b->rows.capacity() * sizeof(uint32_t) + b->values.capacity() * sizeof(double);
  return total;
}

// Xᵀr (block_column_dots, the scoring kernel) and the column update run in
// the parallel stage; z = Xx is added serially in block order from each
// block's product list (the same adds in the same order for any thread count).
// Buffers come from a pool kept between passes: a pass allocates nothing once
// the first has run. During a pass the stream's scratch reservation covers
// them; between passes pool_memory_ does.
void StreamedDesign::pass(const double* r, double* g, const ColumnUpdate* update, const double* x, double* z,
                          const char* label) {
  // The block's compact offset, found from its position in the plan.
  auto offset_of = [&](const BlockRef& ref) {
    auto it = std::lower_bound(blocks_.begin(), blocks_.end(), ref, [](const BlockRef& a, const BlockRef& b) {
      return std::tie(a.shard, a.first_block) < std::tie(b.shard, b.first_block);
    });
    FGM_ASSERT(it != blocks_.end() && it->shard == ref.shard && it->first_block == ref.first_block);
    return offsets_[static_cast<size_t>(it - blocks_.begin())];
  };
  if (z) std::fill(z, z + rows_, 0.0);
  const bool want_products = z != nullptr;
  ProductPool& pool = pool_;
  pool_memory_.release();
  using Products = std::unique_ptr<BlockProducts>;
  const PassStats stats = stream_blocks<Products>(
      stream_, blocks_, label,
      [&](const BlockRef& ref, const ColumnBlock& block) {
        const uint64_t first = offset_of(ref);
        if (g) {
          warm_first_tile(block, r, rows_);
          block_column_dots(block, r, g + first);
        }
        if (update) (*update)(first, first + block.column_count);
        if (!want_products) return Products();
        Products out = pool.take();
        if (wants_dense_products(ref, rows_)) {
          dense_products(block, x + first, rows_, *out);
        } else {
          out->rows.reserve(ref.nnz);
          out->values.reserve(ref.nnz);
          append_products(block, x + first, *out);
        }
        return out;
      },
      [&](Products&& products) {
        if (!products) return;
        const double* values = products->values.data();
        if (products->dense) {
          for (uint64_t i = 0; i < rows_; ++i) z[i] += values[i];
        } else {
          const uint32_t* rows = products->rows.data();
          for (size_t q = 0, e = products->rows.size(); q < e; ++q) z[rows[q]] += values[q];
        }
        pool.give(std::move(products));
      },
      [&](const BlockRef& ref) {
        if (!want_products) return uint64_t{0};
        return wants_dense_products(ref, rows_) ? 8 * rows_ : 12 * ref.nnz;
      });
  ++passes_;
  pass_seconds_ += stats.seconds;
  const uint64_t kept = pool_.bytes();
  if (kept > 0 && kept <= budget_.available()) pool_memory_ = budget_.reserve(kept, "exclusive: product buffers");
  else pool_.clear();
}

void StreamedDesign::multiply(const double* x, double* z) { pass(nullptr, nullptr, nullptr, x, z, "exclusive Xw"); }

void StreamedDesign::multiply_transposed(const double* r, double* g) {
  pass(r, g, nullptr, nullptr, nullptr, "exclusive X'r");
}

void StreamedDesign::transposed_update_multiply(const double* r, double* g, const ColumnUpdate& update,
                                                const double* x, double* z) {
  pass(r, g, &update, x, z, "exclusive X'r + Xw");
}

std::unique_ptr<Design> StreamedDesign::restrict_columns(const std::vector<uint64_t>& sorted_columns) {
  return std::make_unique<InMemoryDesign>(gather(sorted_columns));
}

namespace {

struct GatheredColumns {
  std::vector<uint64_t> lengths;
  std::vector<uint32_t> rows;
  std::vector<float> values;
};

}  // namespace

InMemoryDesign StreamedDesign::gather(const std::vector<uint64_t>& sorted_columns) {
  std::vector<uint64_t> ids, ptr{0};
  std::vector<uint32_t> rows;
  std::vector<float> values;
  ids.reserve(sorted_columns.size());
  for (uint64_t k : sorted_columns) ids.push_back(ids_[k]);
  std::vector<BlockRef> wanted_blocks;  // only blocks holding a wanted column
  for (size_t b = 0; b < blocks_.size(); ++b) {
    auto lo = std::lower_bound(sorted_columns.begin(), sorted_columns.end(), offsets_[b]);
    if (lo != sorted_columns.end() && *lo < offsets_[b] + blocks_[b].column_count) wanted_blocks.push_back(blocks_[b]);
  }
  CscBytes csc_bytes(stream_.store().info());
  stream_blocks<GatheredColumns>(
      stream_, wanted_blocks, "exclusive gather",
      [&](const BlockRef& ref, const ColumnBlock& block) {
        auto it = std::lower_bound(blocks_.begin(), blocks_.end(), ref, [](const BlockRef& a, const BlockRef& b) {
          return std::tie(a.shard, a.first_block) < std::tie(b.shard, b.first_block);
        });
        const uint64_t first = offsets_[static_cast<size_t>(it - blocks_.begin())];
        CscScratch scratch;
        const CscColumns cols = csc_columns(block, scratch);
        GatheredColumns out;
        for (auto w = std::lower_bound(sorted_columns.begin(), sorted_columns.end(), first);
             w != sorted_columns.end() && *w < first + block.column_count; ++w) {
          const uint64_t k = *w - first;
          out.lengths.push_back(cols.col_ptr[k + 1] - cols.col_ptr[k]);
          for (uint32_t q = cols.col_ptr[k]; q < cols.col_ptr[k + 1]; ++q) {
            out.rows.push_back(cols.row_ids[q]);
            out.values.push_back(cols.values[q]);
          }
        }
        return out;
      },
      [&](GatheredColumns&& cols) {
        for (uint64_t len : cols.lengths) ptr.push_back(ptr.back() + len);
        rows.insert(rows.end(), cols.rows.begin(), cols.rows.end());
        values.insert(values.end(), cols.values.begin(), cols.values.end());
      },
      [&](const BlockRef& ref) { return csc_bytes(ref) + ref.nnz * 8; });
  ++passes_;
  return InMemoryDesign(rows_, std::move(ids), std::move(ptr), std::move(rows), std::move(values), budget_);
}

}  // namespace fgm::exclusive
