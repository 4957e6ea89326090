#include "cache/selected_features.h"

#include "core/error.h"

namespace fgm {

SelectedFeatureCache::SelectedFeatureCache(MemoryBudget& budget, uint64_t n_rows)
    : budget_(budget), n_rows_(n_rows) {
  reservation_ = budget_.reserve(0, "selected-feature cache",
                                 "lower fgm.B or fgm.max_iterations (fewer selected columns)");
}

SparseColumnView SelectedFeatureCache::column(size_t k) const {
  FGM_ASSERT(k < keys_.size());
  SparseColumnView v;
  v.rows = rows_.data() + col_ptr_[k];
  v.values = values_.data() + col_ptr_[k];
  v.nnz = col_ptr_[k + 1] - col_ptr_[k];
  return v;
}

uint64_t SelectedFeatureCache::bytes() const {
  return rows_.capacity() * sizeof(uint32_t) + values_.capacity() * sizeof(float) +
         col_ptr_.capacity() * sizeof(uint64_t) + keys_.capacity() * sizeof(FeatureKey);
}

void SelectedFeatureCache::begin_batch() { batch_begin_.push_back(keys_.size()); }

void SelectedFeatureCache::grow_reservation() {
  uint64_t need = bytes();
  if (need > reservation_.bytes()) reservation_.resize(need);
}

void SelectedFeatureCache::add_column(const FeatureKey& key, const std::vector<uint32_t>& rows,
                                      const std::vector<float>& values) {
  FGM_ASSERT(!batch_begin_.empty());
  FGM_ASSERT(rows.size() == values.size());
  // Reserve before growing so the budget error fires before the allocation.
  uint64_t after = (rows_.size() + rows.size()) * (sizeof(uint32_t) + sizeof(float)) +
                   (col_ptr_.size() + 1) * sizeof(uint64_t) + (keys_.size() + 1) * sizeof(FeatureKey);
  if (after > reservation_.bytes()) reservation_.resize(after + after / 2);
  rows_.insert(rows_.end(), rows.begin(), rows.end());
  values_.insert(values_.end(), values.begin(), values.end());
  col_ptr_.push_back(rows_.size());
  keys_.push_back(key);
  grow_reservation();
}

}  // namespace fgm
