#include "solvers/apg_layout.h"

#include <bit>
#include <limits>

#include "core/error.h"

namespace fgm::detail {

namespace {

constexpr const char* kPurpose = "APG touched-row layout";
constexpr const char* kScratchPurpose = "APG row bitmap";
constexpr const char* kRemedy = "lower fgm.B or fgm.max_iterations (fewer selected columns)";

// A bitmap with a rank directory: rank(i) = number of set bits below i.
class RankedBitmap {
 public:
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
  // f(i) for every set bit, increasing.
  template <class F>
  void for_each_set(const F& f) const {
    for (size_t w = 0; w < words_.size(); ++w) {
      for (uint64_t bits = words_[w]; bits != 0; bits &= bits - 1)
        f(w * 64 + size_t(std::countr_zero(bits)));
    }
  }

 private:
  std::vector<uint64_t> words_;
  std::vector<uint32_t> rank_;
};

}  // namespace

ApgLayout::ApgLayout(const SelectedFeatureCache& cache, const int8_t* labels, MemoryBudget& budget)
    : n_rows_(cache.n_rows()) {
  FGM_ASSERT(cache.n_rows() <= std::numeric_limits<uint32_t>::max());
  count_labels(labels);
  find_touched_rows(cache, labels, budget);
  index_batches(cache, budget);
}

// The one O(n) step: rows per label, for the untouched rows' counts.
void ApgLayout::count_labels(const int8_t* labels) {
  uint64_t positive = 0, negative = 0;
  for (size_t i = 0; i < n_rows_; ++i) {
    positive += labels[i] > 0;
    negative += labels[i] < 0;
  }
  fit_rows_ = positive + negative;
  untouched_.positive = positive;  // minus the touched ones, below
  untouched_.negative = negative;
}

// Marks every row a selected column touches, numbers them (compact indices,
// increasing row order) and re-indexes each column's entries by them.
void ApgLayout::find_touched_rows(const SelectedFeatureCache& cache, const int8_t* labels,
                                  MemoryBudget& budget) {
  const size_t cols = cache.num_columns();
  Reservation scratch = budget.reserve(RankedBitmap::bytes(n_rows_), kScratchPurpose, kRemedy);
  RankedBitmap touched(n_rows_);
  uint64_t nnz = 0;
  for (size_t j = 0; j < cols; ++j) {
    SparseColumnView c = cache.column(j);
    for (uint64_t k = 0; k < c.nnz; ++k) touched.set(c.rows[k]);
    nnz += c.nnz;
  }
  const uint64_t count = touched.build_rank();
  reservation_ = budget.reserve(count * (sizeof(uint32_t) + sizeof(int8_t)) +
                                    (cols + 1) * sizeof(uint64_t) +
                                    nnz * (2 * sizeof(uint32_t) + sizeof(float)),
                                kPurpose, kRemedy);
  rows_.resize(count);
  labels_.resize(count);
  size_t next = 0;
  touched.for_each_set([&](size_t row) {
    rows_[next] = uint32_t(row);
    labels_[next] = labels[row];
    untouched_.positive -= labels[row] > 0;
    untouched_.negative -= labels[row] < 0;
    ++next;
  });
  column_begin_.resize(cols + 1);
  compact_.resize(nnz);
  local_.resize(nnz);
  values_.resize(nnz);
  uint64_t at = 0;
  for (size_t j = 0; j < cols; ++j) {
    column_begin_[j] = at;
    SparseColumnView c = cache.column(j);
    for (uint64_t k = 0; k < c.nnz; ++k, ++at) {
      compact_[at] = touched.rank(c.rows[k]);
      values_[at] = c.values[k];
    }
  }
  column_begin_[cols] = at;
}

// R_h per batch (increasing compact rows, from a bitmap over the touched
// rows), each entry's position in its batch's R_h, and the chunk offsets.
void ApgLayout::index_batches(const SelectedFeatureCache& cache, MemoryBudget& budget) {
  const size_t t = cache.num_batches(), count = touched();
  chunks_ = (count + kLayoutRowChunk - 1) / kLayoutRowChunk;
  Reservation scratch = budget.reserve(RankedBitmap::bytes(count), kScratchPurpose, kRemedy);
  RankedBitmap in_batch(count);
  auto mark_batch = [&](size_t h) {
    in_batch.clear();
    for (size_t j = cache.batch_begin(h); j < cache.batch_end(h); ++j) {
      const uint32_t* c = column_compact(j);
      for (size_t k = 0; k < column_size(j); ++k) in_batch.set(c[k]);
    }
    return in_batch.build_rank();
  };
  reservation_.resize(reservation_.bytes() + (t + 1) * sizeof(uint64_t));
  batch_row_begin_.assign(t + 1, 0);
  for (size_t h = 0; h < t; ++h) batch_row_begin_[h + 1] = batch_row_begin_[h] + mark_batch(h);
  reservation_.resize(reservation_.bytes() + batch_row_begin_[t] * sizeof(uint32_t) +
                      t * (chunks_ + 1) * sizeof(uint32_t));
  batch_rows_.resize(batch_row_begin_[t]);
  batch_chunk_.resize(t * (chunks_ + 1));
  for (size_t h = 0; h < t; ++h) {
    mark_batch(h);
    uint32_t* list = batch_rows_.data() + batch_row_begin_[h];
    size_t next = 0;
    in_batch.for_each_set([&](size_t c) { list[next++] = uint32_t(c); });
    for (size_t j = cache.batch_begin(h); j < cache.batch_end(h); ++j) {
      const uint32_t* c = column_compact(j);
      uint32_t* local = local_.data() + column_begin_[j];
      for (size_t k = 0; k < column_size(j); ++k) local[k] = in_batch.rank(c[k]);
    }
    for (size_t chunk = 0; chunk < chunks_; ++chunk)
      batch_chunk_[h * (chunks_ + 1) + chunk] = in_batch.rank(chunk * kLayoutRowChunk);
    batch_chunk_[h * (chunks_ + 1) + chunks_] = uint32_t(next);
  }
}

}  // namespace fgm::detail
