// The feature-value-span diagnostic of fgm train (engine/fgm_trainer.h): the
// per-column max |value| over the columns present in the data, as streamed
// (so a store that transforms values on the fly is seen transformed): the
// largest, and the median to within a factor of 2 (a histogram of binary
// exponents: O(1) memory at any width). Shared by the single-store trainer
// (one store's blocks) and the distributed one (the columns' maxima over all
// partitions, engine/distributed_fgm.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/run_warnings.h"
#include "io/shard_store.h"

namespace fgm {

// max |value| of each column of `block` (block column order; 0 for a column of
// explicit zeros).
std::vector<float> block_column_max_abs(const ColumnBlock& block);

class ValueSpan {
 public:
  // A block's columns (thread-safe); blocks seen twice count once.
  void observe(const ColumnBlock& block);
  // One column's max |value| (each column once; not thread-safe).
  void add_column_max(float m);
  double largest() const { return largest_; }
  // Lower edge of the bin holding the median column (0 if no column).
  double typical() const;
  // (largest / typical)^degree (degree 2 for poly2: its generated features are
  // products of two values), 0 without a column; warns feature_value_span
  // when it exceeds kValueSpanLimit.
  double check(int degree, const std::string& kind, RunWarnings* warnings) const;

 private:
  static constexpr int kMinExponent = -150;  // below the smallest float subnormal
  static constexpr int kBins = 280;          // up to 2^129 > FLT_MAX
  static int bin(float m);
  std::mutex mutex_;
  std::set<uint64_t> seen_;
  std::array<uint64_t, kBins> counts_{};
  double largest_ = 0;
};

}  // namespace fgm
