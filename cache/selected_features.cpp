#include "cache/selected_features.h"

#include <algorithm>

#include "core/error.h"

namespace fgm {

namespace {
constexpr const char* kPurpose = "selected-feature cache";
constexpr const char* kRemedy = "lower fgm.B or fgm.max_iterations (fewer selected columns)";

uint64_t bitmap_words(uint64_t n_rows) { return (n_rows + 63) / 64; }

std::optional<ColumnForm> g_forced_form;

// The smallest exact form for these entries (ties: the earlier form), or
// `forced` if it can hold them.
ColumnForm choose_form(const std::vector<float>& values, uint64_t n_rows, std::optional<ColumnForm> forced) {
  const uint64_t nnz = values.size();
  bool uniform = nnz > 0, dense = true;
  for (float v : values) {
    uniform = uniform && std::bit_cast<uint32_t>(v) == std::bit_cast<uint32_t>(values[0]);
    dense = dense && ColumnView::dense_entry(v);
  }
  if (forced) {
    const bool eligible = (*forced != ColumnForm::kSparseUniform && *forced != ColumnForm::kBitmapUniform) || uniform;
    return eligible && (*forced != ColumnForm::kDense || dense) && nnz > 0 ? *forced : ColumnForm::kSparse;
  }
  ColumnForm best = ColumnForm::kSparse;
  auto consider = [&](ColumnForm form, bool allowed) {
    if (allowed && column_form_bytes(form, nnz, n_rows) < column_form_bytes(best, nnz, n_rows)) best = form;
  };
  consider(ColumnForm::kSparseUniform, uniform);
  consider(ColumnForm::kBitmap, true);
  consider(ColumnForm::kBitmapUniform, uniform);
  consider(ColumnForm::kDense, dense);
  return best;
}
}  // namespace

void force_column_form(std::optional<ColumnForm> form) { g_forced_form = form; }

const char* column_form_name(ColumnForm form) {
  switch (form) {
    case ColumnForm::kSparse: return "sparse";
    case ColumnForm::kSparseUniform: return "sparse-uniform";
    case ColumnForm::kBitmap: return "bitmap";
    case ColumnForm::kBitmapUniform: return "bitmap-uniform";
    case ColumnForm::kDense: return "dense";
  }
  return "?";
}

uint64_t column_form_bytes(ColumnForm form, uint64_t nnz, uint64_t n_rows) {
  switch (form) {
    case ColumnForm::kSparse: return nnz * (sizeof(uint32_t) + sizeof(float));
    case ColumnForm::kSparseUniform: return nnz * sizeof(uint32_t);
    case ColumnForm::kBitmap: return bitmap_words(n_rows) * sizeof(uint64_t) + nnz * sizeof(float);
    case ColumnForm::kBitmapUniform: return bitmap_words(n_rows) * sizeof(uint64_t);
    case ColumnForm::kDense: return n_rows * sizeof(float);
  }
  return 0;
}

void ColumnView::entries(std::vector<uint32_t>& rows_out, std::vector<float>& values_out) const {
  rows_out.clear();
  values_out.clear();
  rows_out.reserve(nnz);
  values_out.reserve(nnz);
  for_each([&](uint32_t row, float value) {
    rows_out.push_back(row);
    values_out.push_back(value);
  });
}

SelectedFeatureCache::SelectedFeatureCache(MemoryBudget& budget, uint64_t n_rows)
    : budget_(budget), n_rows_(n_rows), forced_form_(g_forced_form) {
  reservation_ = budget_.reserve(0, kPurpose, kRemedy);
}

ColumnView SelectedFeatureCache::column(size_t k) const {
  FGM_ASSERT(k < keys_.size());
  const Column& c = columns_[k];
  ColumnView view;
  view.form = c.form;
  view.nnz = c.nnz;
  view.n_rows = n_rows_;
  view.rows = c.rows.get();
  view.words = c.words.get();
  view.values = c.values.get();
  view.uniform = c.uniform;
  return view;
}

uint64_t SelectedFeatureCache::index_bytes(size_t capacity) const {
  return capacity * (sizeof(FeatureKey) + sizeof(Column) + sizeof(size_t));
}

uint64_t SelectedFeatureCache::bytes() const { return column_bytes_ + index_bytes(index_capacity_); }

void SelectedFeatureCache::begin_batch() {
  if (batch_begin_.size() == batch_begin_.capacity()) grow_index();
  batch_begin_.push_back(keys_.size());
}

void SelectedFeatureCache::grow_index() {
  // batch_begin_ never has more entries than there are columns + 1, so it
  // shares the index capacity.
  const size_t capacity = std::max<size_t>(16, 2 * index_capacity_);
  // The old vectors live until their contents are moved: count both.
  reservation_.resize(column_bytes_ + index_bytes(index_capacity_) + index_bytes(capacity));
  keys_.reserve(capacity);
  columns_.reserve(capacity);
  batch_begin_.reserve(capacity + 1);
  index_capacity_ = capacity;
  reservation_.resize(bytes());
}

template <class Fill>
void SelectedFeatureCache::append(const FeatureKey& key, ColumnForm form, uint64_t nnz, const Fill& fill) {
  FGM_ASSERT(!batch_begin_.empty());
  if (keys_.size() == index_capacity_) grow_index();
  // Reserve before allocating, so the budget error fires first.
  const uint64_t size = column_form_bytes(form, nnz, n_rows_);
  reservation_.resize(bytes() + size);
  Column c;
  c.form = form;
  c.nnz = nnz;
  fill(c);
  columns_.push_back(std::move(c));
  keys_.push_back(key);
  total_nnz_ += nnz;
  column_bytes_ += size;
}

void SelectedFeatureCache::add_column(const FeatureKey& key, const std::vector<uint32_t>& rows,
                                      const std::vector<float>& values) {
  FGM_ASSERT(rows.size() == values.size());
  FGM_ASSERT(rows.empty() || rows.back() < n_rows_);
  const uint64_t nnz = rows.size();
  const ColumnForm form = choose_form(values, n_rows_, forced_form_);
  append(key, form, nnz, [&](Column& c) {
    if (nnz == 0) return;
    if (form == ColumnForm::kSparseUniform || form == ColumnForm::kBitmapUniform) c.uniform = values[0];
    if (form == ColumnForm::kSparse || form == ColumnForm::kSparseUniform) {
      c.rows.reset(new uint32_t[nnz]);
      std::copy(rows.begin(), rows.end(), c.rows.get());
    }
    if (form == ColumnForm::kBitmap || form == ColumnForm::kBitmapUniform) {
      c.words.reset(new uint64_t[bitmap_words(n_rows_)]());
      for (uint32_t row : rows) c.words[row >> 6] |= uint64_t(1) << (row & 63);
    }
    if (form == ColumnForm::kSparse || form == ColumnForm::kBitmap) {
      c.values.reset(new float[nnz]);
      std::copy(values.begin(), values.end(), c.values.get());
    }
    if (form == ColumnForm::kDense) {
      c.values.reset(new float[n_rows_]());  // +0.0f: no entry
      for (uint64_t k = 0; k < nnz; ++k) c.values[rows[k]] = values[k];
    }
  });
}

void SelectedFeatureCache::add_column_copy(const SelectedFeatureCache& other, size_t k) {
  FGM_ASSERT(other.n_rows_ == n_rows_ && k < other.num_columns());
  const Column& from = other.columns_[k];
  append(other.keys_[k], from.form, from.nnz, [&](Column& c) {
    c.uniform = from.uniform;
    auto copy = [](const auto& src, auto& dst, uint64_t count) {
      if (!src) return;
      using T = std::remove_reference_t<decltype(src[0])>;
      dst.reset(new std::remove_const_t<T>[count]);
      std::copy(src.get(), src.get() + count, dst.get());
    };
    copy(from.rows, c.rows, from.nnz);
    copy(from.words, c.words, bitmap_words(n_rows_));
    copy(from.values, c.values, from.form == ColumnForm::kDense ? n_rows_ : from.nnz);
  });
}

}  // namespace fgm
