// The selected-feature cache (FGM Section 5.5, "cache for features"): the
// columns chosen so far, held in memory for the APG solver, O(tBn) at most and
// counted against the memory budget. Columns are grouped in batches: batch h
// holds the features added by outer iteration h (the ω_h of problem (31)).
//
// Each column is held in the smallest of five exact forms (ColumnForm), chosen
// by its byte count: a list of rows with their values; a list of rows sharing
// one value (binary columns: no value array); an n-bit row bitmap with the
// values in row order, or sharing one value (a column covering more than
// ~1/32 of the rows); or an n-float dense array (a column covering nearly
// every row, none of whose values is +0.0f, so a row is an entry iff its
// float is not +0.0f). Every form yields the same (row, value) entries in
// increasing row order (ColumnView::for_each), so every sum over a column is
// the same sequence of operations whatever its form.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/feature_key.h"
#include "core/memory_budget.h"

namespace fgm {

enum class ColumnForm : uint8_t {
  kSparse,         // rows[nnz] + values[nnz]            8·nnz bytes
  kSparseUniform,  // rows[nnz], every value `uniform`   4·nnz
  kBitmap,         // words[⌈n/64⌉] + values[nnz]        8·⌈n/64⌉ + 4·nnz
  kBitmapUniform,  // words[⌈n/64⌉], every value `uniform` 8·⌈n/64⌉
  kDense,          // values[n], entry iff the float's bits are not 0 (+0.0f)  4·n
};

const char* column_form_name(ColumnForm form);

// One column of the cache, read-only. The pointers a form does not use are null.
struct ColumnView {
  ColumnForm form = ColumnForm::kSparse;
  uint64_t nnz = 0;
  uint64_t n_rows = 0;
  const uint32_t* rows = nullptr;    // sparse forms
  const uint64_t* words = nullptr;   // bitmap forms: bit i of words[i/64] = row i
  const float* values = nullptr;     // kSparse, kBitmap: nnz, in row order; kDense: n_rows
  float uniform = 0;                 // uniform forms

  bool is_bitmap() const { return form == ColumnForm::kBitmap || form == ColumnForm::kBitmapUniform; }
  bool is_uniform() const { return form == ColumnForm::kSparseUniform || form == ColumnForm::kBitmapUniform; }
  static bool dense_entry(float v) { return std::bit_cast<uint32_t>(v) != 0; }

  // f(row, value) for every entry, rows increasing (the entries add_column was given).
  template <class F>
  void for_each(const F& f) const;
  // The entries as two arrays (tests, small uses: the copy is 8·nnz bytes).
  void entries(std::vector<uint32_t>& rows_out, std::vector<float>& values_out) const;
};

// The bytes a column of `nnz` entries over `n_rows` rows takes in `form`.
uint64_t column_form_bytes(ColumnForm form, uint64_t nnz, uint64_t n_rows);

// For tests: every cache created afterwards holds each column in `form` where
// that form can hold it exactly (else kSparse); kSparse alone is the plain
// form of before. std::nullopt (the default): the smallest form.
void force_column_form(std::optional<ColumnForm> form);

class SelectedFeatureCache {
 public:
  SelectedFeatureCache(MemoryBudget& budget, uint64_t n_rows);

  uint64_t n_rows() const { return n_rows_; }
  size_t num_columns() const { return keys_.size(); }
  size_t num_batches() const { return batch_begin_.size(); }
  size_t batch_begin(size_t h) const { return batch_begin_[h]; }
  size_t batch_end(size_t h) const {
    return h + 1 < batch_begin_.size() ? batch_begin_[h + 1] : keys_.size();
  }
  const FeatureKey& key(size_t k) const { return keys_[k]; }
  ColumnView column(size_t k) const;
  uint64_t total_nnz() const { return total_nnz_; }
  // Bytes allocated (the columns in their forms, and the index vectors'
  // capacities): what the reservation covers.
  uint64_t bytes() const;

  // Starts a new batch (an outer iteration's ω_h); columns added next belong to it.
  void begin_batch();
  // Appends a column to the current batch, held in its smallest form; rows
  // must be strictly increasing and below n_rows().
  void add_column(const FeatureKey& key, const std::vector<uint32_t>& rows,
                  const std::vector<float>& values);
  // Appends a copy of `other`'s column k (same n_rows) in the same form.
  void add_column_copy(const SelectedFeatureCache& other, size_t k);

 private:
  // Each column is its own allocation of exactly its form's arrays, so adding
  // one never copies (or transiently doubles) the columns already held.
  struct Column {
    std::unique_ptr<uint32_t[]> rows;
    std::unique_ptr<uint64_t[]> words;
    std::unique_ptr<float[]> values;
    uint64_t nnz = 0;
    float uniform = 0;
    ColumnForm form = ColumnForm::kSparse;
  };
  // Makes room for one more column in the per-column index vectors, reserving
  // their new capacity (and the old one while it is copied) first.
  void grow_index();
  uint64_t index_bytes(size_t capacity) const;
  // Reserves `column_bytes` more, then appends `c` (its arrays allocated by `fill`).
  template <class Fill>
  void append(const FeatureKey& key, ColumnForm form, uint64_t nnz, const Fill& fill);

  MemoryBudget& budget_;
  Reservation reservation_;
  uint64_t n_rows_;
  std::optional<ColumnForm> forced_form_;
  uint64_t total_nnz_ = 0;
  uint64_t column_bytes_ = 0;  // Σ column_form_bytes over the columns held
  size_t index_capacity_ = 0;  // capacity of keys_ and columns_
  std::vector<FeatureKey> keys_;
  std::vector<Column> columns_;
  std::vector<size_t> batch_begin_;
};

template <class F>
void ColumnView::for_each(const F& f) const {
  switch (form) {
    case ColumnForm::kSparse:
      for (uint64_t k = 0; k < nnz; ++k) f(rows[k], values[k]);
      return;
    case ColumnForm::kSparseUniform:
      for (uint64_t k = 0; k < nnz; ++k) f(rows[k], uniform);
      return;
    case ColumnForm::kBitmap:
    case ColumnForm::kBitmapUniform: {
      const uint64_t n_words = (n_rows + 63) / 64;
      uint64_t k = 0;
      for (uint64_t w = 0; w < n_words; ++w)
        for (uint64_t bits = words[w]; bits != 0; bits &= bits - 1) {
          const uint32_t row = uint32_t(w * 64 + uint64_t(std::countr_zero(bits)));
          f(row, form == ColumnForm::kBitmap ? values[k++] : uniform);
        }
      return;
    }
    case ColumnForm::kDense:
      for (uint64_t i = 0; i < n_rows; ++i)
        if (dense_entry(values[i])) f(uint32_t(i), values[i]);
      return;
  }
}

}  // namespace fgm
