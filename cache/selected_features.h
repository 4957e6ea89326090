// The selected-feature cache (FGM Section 5.5, "cache for features"): the
// columns chosen so far, held in memory for the APG solver, O(tBn) at most and
// counted against the memory budget. Columns are grouped in batches: batch h
// holds the features added by outer iteration h (the ω_h of problem (31)).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/feature_key.h"
#include "core/memory_budget.h"

namespace fgm {

struct SparseColumnView {
  const uint32_t* rows = nullptr;
  const float* values = nullptr;
  uint64_t nnz = 0;
};

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
  SparseColumnView column(size_t k) const;
  uint64_t total_nnz() const { return total_nnz_; }
  // Bytes allocated (capacities, not sizes): what the reservation covers.
  uint64_t bytes() const;

  // Starts a new batch (an outer iteration's ω_h); columns added next belong to it.
  void begin_batch();
  // Appends a column to the current batch; rows must be strictly increasing.
  void add_column(const FeatureKey& key, const std::vector<uint32_t>& rows,
                  const std::vector<float>& values);

 private:
  // Each column is its own allocation of exactly its nonzeros, so adding one
  // never copies (or transiently doubles) the columns already held.
  struct Column {
    std::unique_ptr<uint32_t[]> rows;
    std::unique_ptr<float[]> values;
    uint64_t nnz = 0;
  };
  // Makes room for one more column in the per-column index vectors, reserving
  // their new capacity (and the old one while it is copied) first.
  void grow_index();
  uint64_t index_bytes(size_t capacity) const;

  MemoryBudget& budget_;
  Reservation reservation_;
  uint64_t n_rows_;
  uint64_t total_nnz_ = 0;
  size_t index_capacity_ = 0;  // capacity of keys_ and columns_
  std::vector<FeatureKey> keys_;
  std::vector<Column> columns_;
  std::vector<size_t> batch_begin_;
};

}  // namespace fgm
