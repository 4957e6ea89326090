// The selected columns re-indexed for the APG solver (apg.cpp): the per-row
// work of an APG iteration runs only over the rows some selected column
// touches ("touched rows", numbered 0..touched−1 in increasing row order:
// compact indices). A row no selected column touches has decision value −b
// whatever ω is, so the rows of one label among them share their loss, their
// gradient in b and their Bregman terms: the solver handles them as two
// counts (UntouchedRows) instead of row by row. Private to solvers/.
//
// Per batch h the layout lists the compact rows the batch touches (R_h,
// increasing), and per column the position of each entry's row in R_h (for
// the batch product X_h x_h, which the solver keeps as a |R_h|-vector:
// Section 5.5's cache, held sparsely; an entry's compact row is
// R_h[position], for ∇_ω P = X'r). Values are read from the cache itself.
// For parallel sweeps the compact rows are cut into fixed chunks of
// kLayoutRowChunk, and each batch records where each chunk starts in R_h.
//
// Built once per solve: three sweeps over the row indices of the selected
// columns (bit marking and rank lookups in n-bit bitmaps), O(n/64) per batch
// to clear and rank a bitmap, and one pass over the n labels to count them.
// Its memory (4 bytes per nonzero, 4 per entry of an R_h, 5 per touched row,
// and two n-bit bitmaps while it is built) is reserved from the budget.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cache/selected_features.h"
#include "core/huge_pages.h"
#include "core/memory_budget.h"

namespace fgm::detail {

constexpr size_t kLayoutRowChunk = 8192;  // compact rows per task and per partial sum

// Rows no selected column touches, counted by label (rows with label 0 are
// not in the fit and not counted).
struct UntouchedRows {
  uint64_t positive = 0;
  uint64_t negative = 0;
};

class ApgLayout {
 public:
  ApgLayout(const SelectedFeatureCache& cache, const int8_t* labels, MemoryBudget& budget);

  size_t n_rows() const { return n_rows_; }
  size_t touched() const { return rows_.size(); }
  const UntouchedRows& untouched() const { return untouched_; }
  uint64_t fit_rows() const { return fit_rows_; }           // rows with label ±1
  const uint32_t* rows() const { return rows_.data(); }      // compact → row id
  const int8_t* labels() const { return labels_.data(); }    // compact → label

  size_t num_columns() const { return column_begin_.size() - 1; }
  size_t num_batches() const { return batch_row_begin_.size() - 1; }
  // Column j's entries: their values, and their rows as positions in R_h
  // (h = column_batch(j)).
  size_t column_size(size_t j) const { return column_begin_[j + 1] - column_begin_[j]; }
  const uint32_t* column_local(size_t j) const { return local_.data() + column_begin_[j]; }
  const float* column_values(size_t j) const { return cache_.column(j).values; }
  size_t column_batch(size_t j) const { return column_batch_[j]; }
  uint64_t nnz() const { return local_.size(); }

  // R_h: the compact rows batch h touches, increasing.
  size_t batch_rows(size_t h) const { return batch_row_begin_[h + 1] - batch_row_begin_[h]; }
  const uint32_t* batch_row_list(size_t h) const { return batch_rows_.data() + batch_row_begin_[h]; }
  uint64_t total_batch_rows() const { return batch_rows_.size(); }  // Σ_h |R_h|

  // Fixed chunks of compact rows: chunk c is [c·kLayoutRowChunk, ...).
  size_t num_chunks() const { return chunks_; }
  size_t chunk_begin(size_t c) const { return c * kLayoutRowChunk; }
  size_t chunk_end(size_t c) const { return std::min(touched(), (c + 1) * kLayoutRowChunk); }
  // Positions in R_h of chunk c's rows: [batch_chunk(h, c), batch_chunk(h, c + 1)).
  size_t batch_chunk(size_t h, size_t c) const { return batch_chunk_[h * (chunks_ + 1) + c]; }

 private:
  void count_labels(const int8_t* labels);
  void index_rows(const int8_t* labels, MemoryBudget& budget);

  const SelectedFeatureCache& cache_;
  size_t n_rows_;
  uint64_t fit_rows_ = 0;
  UntouchedRows untouched_;
  size_t chunks_ = 0;
  Reservation reservation_;
  HugeVector<uint32_t> rows_;
  std::vector<int8_t> labels_;
  std::vector<uint64_t> column_begin_;
  std::vector<uint32_t> column_batch_;
  HugeVector<uint32_t> local_;
  std::vector<uint64_t> batch_row_begin_;
  HugeVector<uint32_t> batch_rows_;
  std::vector<uint32_t> batch_chunk_;
};

}  // namespace fgm::detail
