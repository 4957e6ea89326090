#include "solvers/apg_layout.h"

#include <limits>

#include "core/error.h"

namespace fgm::detail {

namespace {

constexpr const char* kPurpose = "APG touched-row layout";
constexpr const char* kScratchPurpose = "APG row bitmap";
constexpr const char* kRemedy = "lower fgm.B or fgm.max_iterations (fewer selected columns)";

uint64_t listed_bytes(uint64_t rows, uint64_t nnz) { return (rows + nnz) * sizeof(uint32_t); }

}  // namespace

ApgLayout::ApgLayout(const SelectedFeatureCache& cache, const int8_t* labels, MemoryBudget& budget,
                     ApgRowIndex choice)
    : cache_(cache), n_rows_(cache.n_rows()) {
  FGM_ASSERT(cache.n_rows() <= std::numeric_limits<uint32_t>::max());
  count_labels(labels);
  // Two n-bit ranked bitmaps while building: `touched` (rows any selected
  // column touches; its rank is the compact index) and `in_batch` (rows of
  // one batch; its rank is the position in R_h).
  Reservation scratch = budget.reserve(2 * RankedBitmap::bytes(n_rows_), kScratchPurpose, kRemedy);
  RankedBitmap touched(n_rows_), in_batch(n_rows_);
  const std::vector<BatchCounts> counts = mark_touched(touched, in_batch);
  choose_forms(counts, choice);
  reservation_ = budget.reserve(held_bytes(counts), kPurpose, kRemedy);

  labels_.resize(touched_count_);
  size_t next = 0;
  touched.for_each_set([&](size_t row) {
    labels_[next] = labels[row];
    untouched_.positive -= labels[row] > 0;
    untouched_.negative -= labels[row] < 0;
    ++next;
  });
  if (touched_ranked_) {
    chunk_first_row_.assign(chunks_ + 1, uint32_t(n_rows_));
    size_t compact = 0;
    touched.for_each_set([&](size_t row) {
      if (compact % kLayoutRowChunk == 0) chunk_first_row_[compact / kLayoutRowChunk] = uint32_t(row);
      ++compact;
    });
  } else {
    touched_list_.resize(touched_count_);
    size_t compact = 0;
    touched.for_each_set([&](size_t row) { touched_list_[compact++] = uint32_t(row); });
  }

  const size_t cols = cache.num_columns(), t = cache.num_batches();
  column_batch_.resize(cols);
  column_begin_.assign(cols, 0);
  batch_chunk_.resize(t * (chunks_ + 1));
  uint64_t listed_rows = 0, listed_nnz = 0;
  for (size_t h = 0; h < t; ++h)
    if (batches_[h].form == BatchIndexForm::kListed) {
      listed_rows += counts[h].rows;
      listed_nnz += counts[h].nnz;
    }
  batch_rows_.resize(listed_rows);
  local_.resize(listed_nnz);
  uint64_t listed_at = 0, entries_at = 0;
  for (size_t h = 0; h < t; ++h) {
    for (size_t j = cache.batch_begin(h); j < cache.batch_end(h); ++j) column_batch_[j] = uint32_t(h);
    index_batch(h, touched, in_batch, listed_at, entries_at);
  }
  if (touched_ranked_) touched_bitmap_ = std::move(touched);
}

// The one O(n) step: rows per label, for the untouched rows' counts.
void ApgLayout::count_labels(const int8_t* labels) {
  uint64_t positive = 0, negative = 0;
  for (size_t i = 0; i < n_rows_; ++i) {
    positive += labels[i] > 0;
    negative += labels[i] < 0;
  }
  fit_rows_ = positive + negative;
  untouched_.positive = positive;  // minus the touched ones, in the constructor
  untouched_.negative = negative;
}

void ApgLayout::mark_batch(size_t h, RankedBitmap& in_batch) const {
  in_batch.clear();
  for (size_t j = cache_.batch_begin(h); j < cache_.batch_end(h); ++j)
    cache_.column(j).for_each([&](uint32_t row, float) { in_batch.set(row); });
}

// Sweep 1: marks every batch's rows (counting |R_h| and its nonzeros) and the touched rows.
std::vector<ApgLayout::BatchCounts> ApgLayout::mark_touched(RankedBitmap& touched, RankedBitmap& in_batch) {
  std::vector<BatchCounts> counts(cache_.num_batches());
  for (size_t h = 0; h < counts.size(); ++h) {
    mark_batch(h, in_batch);
    for (size_t j = cache_.batch_begin(h); j < cache_.batch_end(h); ++j) {
      cache_.column(j).for_each([&](uint32_t row, float) { touched.set(row); });
      counts[h].nnz += cache_.column(j).nnz;
    }
    counts[h].rows = in_batch.build_rank();
    nnz_ += counts[h].nnz;
    total_batch_rows_ += counts[h].rows;
  }
  touched_count_ = touched.build_rank();
  chunks_ = (touched_count_ + kLayoutRowChunk - 1) / kLayoutRowChunk;
  return counts;
}

// Per batch the smallest index form, given how R is held; R as a bitmap if
// that makes the whole layout smaller (exact byte counts, ties: the lists).
void ApgLayout::choose_forms(const std::vector<BatchCounts>& counts, ApgRowIndex choice) {
  batches_.resize(counts.size());
  const uint64_t ranked = RankedBitmap::bytes(n_rows_);
  uint64_t all_listed = touched_count_ * sizeof(uint32_t), with_bitmap = ranked;
  for (const BatchCounts& c : counts) {
    all_listed += listed_bytes(c.rows, c.nnz);
    with_bitmap += c.rows == touched_count_ ? 0 : std::min(listed_bytes(c.rows, c.nnz), ranked);
  }
  touched_ranked_ = choice == ApgRowIndex::kRanked || (choice == ApgRowIndex::kSmallest && with_bitmap < all_listed);
  for (size_t h = 0; h < counts.size(); ++h) {
    BatchIndex& b = batches_[h];
    b.rows = counts[h].rows;
    if (choice == ApgRowIndex::kRanked)
      b.form = BatchIndexForm::kRanked;
    else if (!touched_ranked_)
      b.form = BatchIndexForm::kListed;
    else if (counts[h].rows == touched_count_)
      b.form = BatchIndexForm::kAllTouched;
    else
      b.form = listed_bytes(counts[h].rows, counts[h].nnz) <= ranked ? BatchIndexForm::kListed
                                                                     : BatchIndexForm::kRanked;
  }
}

// What the layout keeps, by the forms chosen.
uint64_t ApgLayout::held_bytes(const std::vector<BatchCounts>& counts) const {
  const size_t cols = cache_.num_columns(), t = counts.size();
  uint64_t bytes = touched_count_ * sizeof(int8_t) + cols * (sizeof(uint32_t) + sizeof(uint64_t)) +
                   t * (sizeof(BatchIndex) + (chunks_ + 1) * sizeof(uint32_t));
  bytes += touched_ranked_ ? RankedBitmap::bytes(n_rows_) + (chunks_ + 1) * sizeof(uint32_t)
                           : touched_count_ * sizeof(uint32_t);
  for (size_t h = 0; h < t; ++h) {
    if (batches_[h].form == BatchIndexForm::kListed) bytes += listed_bytes(counts[h].rows, counts[h].nnz);
    if (batches_[h].form == BatchIndexForm::kRanked) bytes += RankedBitmap::bytes(n_rows_);
  }
  return bytes;
}

// Sweep 2 for batch h: marks it again, records where each compact chunk
// starts in R_h, and keeps its index (the R_h list and each entry's position,
// or the ranked bitmap itself).
void ApgLayout::index_batch(size_t h, const RankedBitmap& touched, RankedBitmap& in_batch, uint64_t& listed_at,
                            uint64_t& entries_at) {
  BatchIndex& batch = batches_[h];
  mark_batch(h, in_batch);
  in_batch.build_rank();
  const bool listed = batch.form == BatchIndexForm::kListed;
  if (listed) batch.list_begin = listed_at;
  uint32_t* list = listed ? batch_rows_.data() + listed_at : nullptr;
  uint32_t* chunk_start = batch_chunk_.data() + h * (chunks_ + 1);
  size_t position = 0, chunk = 0;
  in_batch.for_each_set([&](size_t row) {
    const uint32_t compact = touched.rank(row);
    // Positions where compact chunks begin: the first entry at or past each boundary.
    while (chunk < chunks_ && compact >= chunk * kLayoutRowChunk) chunk_start[chunk++] = uint32_t(position);
    if (list) list[position] = compact;
    ++position;
  });
  while (chunk <= chunks_) chunk_start[chunk++] = uint32_t(position);
  if (listed) {
    listed_at += batch.rows;
    for (size_t j = cache_.batch_begin(h); j < cache_.batch_end(h); ++j) {
      column_begin_[j] = entries_at;
      uint32_t* out = local_.data() + entries_at;
      cache_.column(j).for_each([&](uint32_t row, float) { *out++ = in_batch.rank(row); });
      entries_at += cache_.column(j).nnz;
    }
  } else if (batch.form == BatchIndexForm::kRanked) {
    batch.bitmap = in_batch;
  }
}

}  // namespace fgm::detail
