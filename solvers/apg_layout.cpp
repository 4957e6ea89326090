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
    : cache_(cache), n_rows_(cache.n_rows()) {
  FGM_ASSERT(cache.n_rows() <= std::numeric_limits<uint32_t>::max());
  count_labels(labels);
  index_rows(labels, budget);
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

// Two n-bit bitmaps: `touched` (rows any selected column touches; its rank
// is the compact index) and `in_batch` (rows of one batch; its rank is the
// position in R_h). Sweep 1 marks both and counts |R_h|; sweep 2 marks the
// batch again to list R_h; sweep 3 writes each entry's position.
void ApgLayout::index_rows(const int8_t* labels, MemoryBudget& budget) {
  const SelectedFeatureCache& cache = cache_;
  const size_t cols = cache.num_columns(), t = cache.num_batches();
  Reservation scratch = budget.reserve(2 * RankedBitmap::bytes(n_rows_), kScratchPurpose, kRemedy);
  RankedBitmap touched(n_rows_), in_batch(n_rows_);
  auto mark_batch = [&](size_t h, bool also_touched) {
    in_batch.clear();
    for (size_t j = cache.batch_begin(h); j < cache.batch_end(h); ++j) {
      SparseColumnView c = cache.column(j);
      for (uint64_t k = 0; k < c.nnz; ++k) in_batch.set(c.rows[k]);
      if (also_touched)
        for (uint64_t k = 0; k < c.nnz; ++k) touched.set(c.rows[k]);
    }
    return in_batch.build_rank();
  };
  std::vector<uint64_t> batch_sizes(t);
  uint64_t nnz = 0, batch_rows = 0;
  for (size_t h = 0; h < t; ++h) {
    batch_sizes[h] = mark_batch(h, true);
    batch_rows += batch_sizes[h];
  }
  for (size_t j = 0; j < cols; ++j) nnz += cache.column(j).nnz;
  const uint64_t count = touched.build_rank();
  chunks_ = (count + kLayoutRowChunk - 1) / kLayoutRowChunk;
  reservation_ = budget.reserve(count * (sizeof(uint32_t) + sizeof(int8_t)) +
                                    (cols + 1) * sizeof(uint64_t) + cols * sizeof(uint32_t) +
                                    nnz * sizeof(uint32_t) + (t + 1) * sizeof(uint64_t) +
                                    batch_rows * sizeof(uint32_t) + t * (chunks_ + 1) * sizeof(uint32_t),
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
  column_batch_.resize(cols);
  local_.resize(nnz);
  batch_row_begin_.assign(t + 1, 0);
  for (size_t h = 0; h < t; ++h) batch_row_begin_[h + 1] = batch_row_begin_[h] + batch_sizes[h];
  batch_rows_.resize(batch_rows);
  batch_chunk_.resize(t * (chunks_ + 1));
  uint64_t at = 0;
  for (size_t h = 0; h < t; ++h) {
    mark_batch(h, false);
    uint32_t* list = batch_rows_.data() + batch_row_begin_[h];
    uint32_t* chunk_start = batch_chunk_.data() + h * (chunks_ + 1);
    size_t position = 0, chunk = 0;
    in_batch.for_each_set([&](size_t row) {
      const uint32_t compact = touched.rank(row);
      // Positions where compact chunks begin: the first entry at or past each boundary.
      while (chunk < chunks_ && compact >= chunk * kLayoutRowChunk) chunk_start[chunk++] = uint32_t(position);
      list[position++] = compact;
    });
    while (chunk <= chunks_) chunk_start[chunk++] = uint32_t(position);
    for (size_t j = cache.batch_begin(h); j < cache.batch_end(h); ++j) {
      SparseColumnView c = cache.column(j);
      column_begin_[j] = at;
      column_batch_[j] = uint32_t(h);
      for (uint64_t k = 0; k < c.nnz; ++k) local_[at + k] = in_batch.rank(c.rows[k]);
      at += c.nnz;
    }
  }
  column_begin_[cols] = at;
}

}  // namespace fgm::detail
