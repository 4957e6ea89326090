#include "engine/value_span.h"

#include <algorithm>
#include <cmath>

#include "core/messages.h"
#include "engine/fgm_trainer.h"

namespace fgm {

std::vector<float> block_column_max_abs(const ColumnBlock& block) {
  std::vector<float> column_max(block.column_count, 0.0f);
  for (uint32_t cell = 0; cell < block.cell_count(); ++cell) {
    float& m = column_max[block.cell_column[cell]];
    for (uint32_t e = block.cell_ptr[cell]; e < block.cell_ptr[cell + 1]; ++e)
      m = std::max(m, std::fabs(block.values[e]));
  }
  return column_max;
}

int ValueSpan::bin(float m) {
  int exponent;
  std::frexp(m, &exponent);  // m ∈ [2^(exponent−1), 2^exponent)
  return std::clamp(exponent - kMinExponent, 0, kBins - 1);
}

void ValueSpan::observe(const ColumnBlock& block) {
  std::array<uint64_t, kBins> local{};
  double largest = 0;
  for (float m : block_column_max_abs(block)) {
    if (!(m > 0)) continue;  // explicit zeros only (or NaN)
    ++local[bin(m)];
    largest = std::max(largest, double(m));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!seen_.insert(block.first_column).second) return;
  for (int b = 0; b < kBins; ++b) counts_[b] += local[b];
  largest_ = std::max(largest_, largest);
}

void ValueSpan::add_column_max(float m) {
  if (!(m > 0)) return;
  ++counts_[bin(m)];
  largest_ = std::max(largest_, double(m));
}

double ValueSpan::typical() const {
  uint64_t total = 0;
  for (uint64_t c : counts_) total += c;
  if (total == 0) return 0;
  uint64_t below = 0;
  for (int b = 0; b < kBins; ++b) {
    below += counts_[b];
    if (2 * below >= total) return std::ldexp(1.0, b + kMinExponent - 1);
  }
  return 0;
}

double ValueSpan::check(int degree, const std::string& kind, RunWarnings* warnings) const {
  const double largest = largest_, typical_value = typical();
  if (!(typical_value > 0)) return 0;
  const double span = std::pow(largest / typical_value, degree);
  if (span > kValueSpanLimit)
    add_warning(warnings, "feature_value_span",
                msg::feature_value_span(span, largest, typical_value, degree, kind, kValueSpanLimit));
  return span;
}

}  // namespace fgm
