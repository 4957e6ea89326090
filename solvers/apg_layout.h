// The selected columns re-indexed for the APG solver (apg.cpp): the per-row
// work of an APG iteration runs only over the rows some selected column
// touches ("touched rows" R, numbered 0..touched−1 in increasing row order:
// compact indices). A row no selected column touches has decision value −b
// whatever ω is, so the rows of one label among them share their loss, their
// gradient in b and their Bregman terms: the solver handles them as two
// counts (UntouchedRows) instead of row by row. Private to solvers/.
//
// Per batch h the solver keeps the batch product X_h x_h as a |R_h|-vector
// (Section 5.5's cache, held sparsely), R_h being the compact rows the batch
// touches, increasing; "position" is an index into R_h. The layout answers
// two questions, and nothing else:
//   for_each_entry(j, f)        column j's entries, rows increasing, as
//                               f(position, compact, value);
//   for_each_batch_row(h, c, f) the rows of R_h inside row chunk c, as
//                               f(position, compact), positions consecutive.
// Each batch answers them in the smallest exact index form (BatchIndexForm):
//   kListed      R_h as a list of compact rows (4 bytes per row of R_h) and
//                each entry's position stored (4 bytes per nonzero);
//   kRanked      R_h as an n-bit row bitmap with a rank count per 64 rows
//                (12 bytes per 64 rows): position = rank;
//   kAllTouched  R_h = R (4·0 bytes): position = compact.
// The compact index of a row is then its rank in the touched-row bitmap
// (kept, 12 bytes per 64 rows, when some batch is ranked or all-touched;
// otherwise R is a list of row ids, 4 bytes per touched row). Columns are read
// from the cache in whatever form it holds them (cache/selected_features.h).
// Every form walks the same entries in the same order, so a sum over them is
// the same sequence of floating-point operations: the solver's iterates are
// the same bits for any choice of forms (tests/solvers/test_apg_sparse.cpp).
//
// For parallel sweeps the compact rows are cut into fixed chunks of
// kLayoutRowChunk, and each batch records where each chunk starts in R_h.
//
// Built once per solve: sweeps over the selected columns (bit marking and
// rank lookups in n-bit bitmaps), O(n/64) per batch to clear and rank a
// bitmap, and one pass over the n labels to count them. Its memory (the
// forms above, 1 byte per touched row for the labels, and two n-bit ranked
// bitmaps while it is built) is reserved from the budget; bytes() is what it
// holds after the build.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cache/selected_features.h"
#include "core/huge_pages.h"
#include "core/memory_budget.h"
#include "solvers/apg.h"  // ApgRowIndex

namespace fgm::detail {

constexpr size_t kLayoutRowChunk = 8192;  // compact rows per task and per partial sum

// Rows no selected column touches, counted by label (rows with label 0 are
// not in the fit and not counted).
struct UntouchedRows {
  uint64_t positive = 0;
  uint64_t negative = 0;
};

// A bitmap with a rank directory: rank(i) = number of set bits below i.
class RankedBitmap {
 public:
  RankedBitmap() = default;
  explicit RankedBitmap(size_t bits) : words_((bits + 63) / 64, 0), rank_(words_.size(), 0) {}
  static uint64_t bytes(size_t bits) { return (bits + 63) / 64 * (sizeof(uint64_t) + sizeof(uint32_t)); }

  void set(size_t i) { words_[i >> 6] |= uint64_t(1) << (i & 63); }
  void clear() { std::fill(words_.begin(), words_.end(), 0); }
  // Fills the rank directory; returns the number of set bits.
  uint64_t build_rank() {
    uint64_t total = 0;
    for (size_t w = 0; w < words_.size(); ++w) {
      rank_[w] = uint32_t(total);
      total += uint64_t(std::popcount(words_[w]));
    }
    return total;
  }
  // Set bits below i (i < size); valid after build_rank().
  uint32_t rank(size_t i) const {
    const uint64_t below = words_[i >> 6] & ((uint64_t(1) << (i & 63)) - 1);
    return rank_[i >> 6] + uint32_t(std::popcount(below));
  }
  // f(i) for every set bit in [lo, hi), increasing.
  template <class F>
  void for_each_set(size_t lo, size_t hi, const F& f) const {
    if (lo >= hi) return;
    const size_t last = (hi - 1) >> 6;
    for (size_t w = lo >> 6; w <= last; ++w) {
      uint64_t bits = words_[w];
      if (w == lo >> 6) bits &= ~uint64_t(0) << (lo & 63);
      if (w == last && (hi & 63) != 0) bits &= (uint64_t(1) << (hi & 63)) - 1;
      for (; bits != 0; bits &= bits - 1) f(w * 64 + size_t(std::countr_zero(bits)));
    }
  }
  template <class F>
  void for_each_set(const F& f) const {
    for_each_set(0, words_.size() * 64, f);
  }

 private:
  std::vector<uint64_t> words_;
  std::vector<uint32_t> rank_;
};

enum class BatchIndexForm : uint8_t { kListed, kRanked, kAllTouched };

// Runs `loop` (a walk over the layout) compiled with the POPCNT instruction
// when the CPU has it: the library is built for generic x86-64, where
// std::popcount is a libgcc call, and rank lookups take one per entry.
// Same results either way (integer counts).
#if defined(__x86_64__) || defined(__i386__)
template <class Loop>
[[gnu::flatten]] __attribute__((target("popcnt"))) inline void run_with_popcnt(const Loop& loop) {
  loop();
}
template <class Loop>
void with_fast_popcount(const Loop& loop) {
  static const bool has_popcnt = __builtin_cpu_supports("popcnt");
  if (has_popcnt)
    run_with_popcnt(loop);
  else
    loop();
}
#else
template <class Loop>
void with_fast_popcount(const Loop& loop) {
  loop();
}
#endif

class ApgLayout {
 public:
  ApgLayout(const SelectedFeatureCache& cache, const int8_t* labels, MemoryBudget& budget,
            ApgRowIndex choice = ApgRowIndex::kSmallest);

  size_t n_rows() const { return n_rows_; }
  size_t touched() const { return touched_count_; }
  const UntouchedRows& untouched() const { return untouched_; }
  uint64_t fit_rows() const { return fit_rows_; }           // rows with label ±1
  const int8_t* labels() const { return labels_.data(); }    // compact → label
  // f(compact, row) for every touched row, increasing.
  template <class F>
  void for_each_touched(const F& f) const;

  size_t num_columns() const { return column_batch_.size(); }
  size_t num_batches() const { return batches_.size(); }
  size_t column_batch(size_t j) const { return column_batch_[j]; }
  uint64_t column_size(size_t j) const { return cache_.column(j).nnz; }
  uint64_t nnz() const { return nnz_; }
  BatchIndexForm batch_form(size_t h) const { return batches_[h].form; }
  // f(position, compact, value) for column j's entries, rows increasing.
  template <class F>
  void for_each_entry(size_t j, const F& f) const;

  // |R_h|: the compact rows batch h touches.
  size_t batch_rows(size_t h) const { return batches_[h].rows; }
  uint64_t total_batch_rows() const { return total_batch_rows_; }  // Σ_h |R_h|

  // Fixed chunks of compact rows: chunk c is [c·kLayoutRowChunk, ...).
  size_t num_chunks() const { return chunks_; }
  size_t chunk_begin(size_t c) const { return c * kLayoutRowChunk; }
  size_t chunk_end(size_t c) const { return std::min(touched(), (c + 1) * kLayoutRowChunk); }
  // Positions in R_h of chunk c's rows: [batch_chunk(h, c), batch_chunk(h, c + 1)).
  size_t batch_chunk(size_t h, size_t c) const { return batch_chunk_[h * (chunks_ + 1) + c]; }
  // f(position, compact) for the rows of R_h in chunk c, positions consecutive from batch_chunk(h, c).
  template <class F>
  void for_each_batch_row(size_t h, size_t c, const F& f) const;

  // Bytes held after the build (what the reservation covers).
  uint64_t bytes() const { return reservation_.bytes(); }

 private:
  struct BatchIndex {
    BatchIndexForm form = BatchIndexForm::kListed;
    uint64_t rows = 0;        // |R_h|
    uint64_t list_begin = 0;  // kListed: R_h at batch_rows_[list_begin, list_begin + rows)
    RankedBitmap bitmap;      // kRanked: the batch's rows (n bits)
  };
  struct BatchCounts {
    uint64_t rows = 0, nnz = 0;
  };
  void count_labels(const int8_t* labels);
  std::vector<BatchCounts> mark_touched(RankedBitmap& touched, RankedBitmap& in_batch);
  void choose_forms(const std::vector<BatchCounts>& counts, ApgRowIndex choice);
  uint64_t held_bytes(const std::vector<BatchCounts>& counts) const;
  void index_batch(size_t h, const RankedBitmap& touched, RankedBitmap& in_batch, uint64_t& listed_at, uint64_t& entries_at);
  void mark_batch(size_t h, RankedBitmap& in_batch) const;

  const SelectedFeatureCache& cache_;
  size_t n_rows_;
  size_t touched_count_ = 0;
  uint64_t nnz_ = 0;
  uint64_t total_batch_rows_ = 0;
  uint64_t fit_rows_ = 0;
  UntouchedRows untouched_;
  size_t chunks_ = 0;
  Reservation reservation_;
  bool touched_ranked_ = false;        // R as touched_bitmap_ (else touched_list_)
  RankedBitmap touched_bitmap_;        // rows → compact (rank)
  HugeVector<uint32_t> touched_list_;  // compact → row
  std::vector<uint32_t> chunk_first_row_;  // with touched_bitmap_: row of compact c·kLayoutRowChunk; [chunks] = n
  std::vector<int8_t> labels_;
  std::vector<BatchIndex> batches_;
  std::vector<uint32_t> column_batch_;
  std::vector<uint64_t> column_begin_;  // kListed batches' columns: entries at local_[column_begin_[j], ...)
  HugeVector<uint32_t> local_;          // kListed: each entry's position in R_h
  HugeVector<uint32_t> batch_rows_;     // kListed: the R_h lists, back to back
  std::vector<uint32_t> batch_chunk_;
};

template <class F>
void ApgLayout::for_each_touched(const F& f) const {
  if (touched_ranked_) {
    uint32_t compact = 0;
    touched_bitmap_.for_each_set([&](size_t row) { f(compact++, uint32_t(row)); });
  } else {
    for (size_t c = 0; c < touched_list_.size(); ++c) f(uint32_t(c), touched_list_[c]);
  }
}

template <class F>
void ApgLayout::for_each_entry(size_t j, const F& f) const {
  const ColumnView column = cache_.column(j);
  const BatchIndex& batch = batches_[column_batch_[j]];
  switch (batch.form) {
    case BatchIndexForm::kListed: {
      const uint32_t* position = local_.data() + column_begin_[j];
      const uint32_t* list = batch_rows_.data() + batch.list_begin;
      uint64_t k = 0;
      column.for_each([&](uint32_t, float value) {
        const uint32_t p = position[k++];
        f(p, list[p], value);
      });
      return;
    }
    case BatchIndexForm::kRanked:
      column.for_each([&](uint32_t row, float value) { f(batch.bitmap.rank(row), touched_bitmap_.rank(row), value); });
      return;
    case BatchIndexForm::kAllTouched:
      column.for_each([&](uint32_t row, float value) {
        const uint32_t c = touched_bitmap_.rank(row);
        f(c, c, value);
      });
      return;
  }
}

template <class F>
void ApgLayout::for_each_batch_row(size_t h, size_t c, const F& f) const {
  const BatchIndex& batch = batches_[h];
  const uint32_t first = uint32_t(batch_chunk(h, c)), end = uint32_t(batch_chunk(h, c + 1));
  switch (batch.form) {
    case BatchIndexForm::kListed: {
      const uint32_t* list = batch_rows_.data() + batch.list_begin;
      for (uint32_t p = first; p < end; ++p) f(p, list[p]);
      return;
    }
    case BatchIndexForm::kRanked: {
      uint32_t p = first;
      batch.bitmap.for_each_set(chunk_first_row_[c], chunk_first_row_[c + 1],
                                [&](size_t row) { f(p++, touched_bitmap_.rank(row)); });
      return;
    }
    case BatchIndexForm::kAllTouched:
      for (uint32_t p = first; p < end; ++p) f(p, p);
      return;
  }
}

}  // namespace fgm::detail
