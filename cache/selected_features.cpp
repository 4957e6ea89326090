#include "cache/selected_features.h"

#include <algorithm>

#include "core/error.h"

namespace fgm {

namespace {
constexpr const char* kPurpose = "selected-feature cache";
constexpr const char* kRemedy = "lower fgm.B or fgm.max_iterations (fewer selected columns)";
}  // namespace

SelectedFeatureCache::SelectedFeatureCache(MemoryBudget& budget, uint64_t n_rows)
    : budget_(budget), n_rows_(n_rows) {
  reservation_ = budget_.reserve(0, kPurpose, kRemedy);
}

SparseColumnView SelectedFeatureCache::column(size_t k) const {
  FGM_ASSERT(k < keys_.size());
  const Column& c = columns_[k];
  return {c.rows.get(), c.values.get(), c.nnz};
}

uint64_t SelectedFeatureCache::index_bytes(size_t capacity) const {
  return capacity * (sizeof(FeatureKey) + sizeof(Column) + sizeof(size_t));
}

uint64_t SelectedFeatureCache::bytes() const {
  return total_nnz_ * (sizeof(uint32_t) + sizeof(float)) + index_bytes(index_capacity_);
}

void SelectedFeatureCache::begin_batch() {
  if (batch_begin_.size() == batch_begin_.capacity()) grow_index();
  batch_begin_.push_back(keys_.size());
}

void SelectedFeatureCache::grow_index() {
  // batch_begin_ never has more entries than there are columns + 1, so it
  // shares the index capacity.
  const size_t capacity = std::max<size_t>(16, 2 * index_capacity_);
  const uint64_t columns_bytes = total_nnz_ * (sizeof(uint32_t) + sizeof(float));
  // The old vectors live until their contents are moved: count both.
  reservation_.resize(columns_bytes + index_bytes(index_capacity_) + index_bytes(capacity));
  keys_.reserve(capacity);
  columns_.reserve(capacity);
  batch_begin_.reserve(capacity + 1);
  index_capacity_ = capacity;
  reservation_.resize(bytes());
}

void SelectedFeatureCache::add_column(const FeatureKey& key, const std::vector<uint32_t>& rows,
                                      const std::vector<float>& values) {
  FGM_ASSERT(!batch_begin_.empty());
  FGM_ASSERT(rows.size() == values.size());
  if (keys_.size() == index_capacity_) grow_index();
  // Reserve before allocating, so the budget error fires first.
  const uint64_t nnz = rows.size();
  reservation_.resize(bytes() + nnz * (sizeof(uint32_t) + sizeof(float)));
  Column c;
  c.nnz = nnz;
  if (nnz > 0) {
    c.rows.reset(new uint32_t[nnz]);
    c.values.reset(new float[nnz]);
    std::copy(rows.begin(), rows.end(), c.rows.get());
    std::copy(values.begin(), values.end(), c.values.get());
  }
  columns_.push_back(std::move(c));
  keys_.push_back(key);
  total_nnz_ += nnz;
}

}  // namespace fgm
