// Open-addressing accumulator of exact poly-2 pair sums keyed by a 64-bit pair
// key. It grows (doubling, load ≤ 0.7) as distinct pairs arrive, so repeated
// pairs of popular features cost no memory; every table is reserved from the
// budget before it is allocated (old and new while rehashing). Used by the
// single-store pair pass (features/poly2_space.cpp) and the per-partition pass
// of distributed training (features/poly2_space.cpp, "Per partition").
#pragma once

#include <cstdint>

#include "core/huge_pages.h"
#include "core/memory_budget.h"

namespace fgm {

class PairSumTable {
 public:
  // expected: distinct pairs foreseen (0: start small); what/remedy: the
  // budget error's words when a table does not fit.
  PairSumTable(uint64_t expected, MemoryBudget& budget, const char* what, const char* remedy)
      : budget_(budget), what_(what), remedy_(remedy) {
    uint64_t cap = 1024;
    while (cap < expected / 8 && cap < (uint64_t{1} << 20)) cap <<= 1;
    allocate(cap);
  }
  void add(uint64_t key, double v) {
    if (10 * (size_ + 1) > 7 * (mask_ + 1)) grow();
    for (uint64_t s = slot(key);; s = (s + 1) & mask_) {
      if (keys_[s] == key) {
        sums_[s] += v;
        return;
      }
      if (keys_[s] == kEmpty) {
        keys_[s] = key;
        sums_[s] = v;
        ++size_;
        return;
      }
    }
  }
  // Visits (key, sum) in slot order: fixed for a fixed sequence of adds.
  template <class F>
  void for_each(F&& f) const {
    for (uint64_t s = 0; s <= mask_; ++s)
      if (keys_[s] != kEmpty) f(keys_[s], sums_[s]);
  }
  uint64_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static constexpr uint64_t kSlotBytes = sizeof(uint64_t) + sizeof(double);
  uint64_t slot(uint64_t key) const { return ((key * 0x9E3779B97F4A7C15ULL) >> 20) & mask_; }
  void allocate(uint64_t cap) {
    if (reservation_.bytes() == 0)
      reservation_ = budget_.reserve(cap * kSlotBytes, what_, remedy_);
    else
      reservation_.resize(cap * kSlotBytes + (mask_ + 1) * kSlotBytes);  // old + new while rehashing
    keys_.assign(cap, kEmpty);
    sums_.assign(cap, 0.0);
    mask_ = cap - 1;
  }
  void grow() {
    HugeVector<uint64_t> old_keys = std::move(keys_);
    HugeVector<double> old_sums = std::move(sums_);
    allocate(2 * (mask_ + 1));
    for (size_t i = 0; i < old_keys.size(); ++i) {
      if (old_keys[i] == kEmpty) continue;
      uint64_t s = slot(old_keys[i]);
      while (keys_[s] != kEmpty) s = (s + 1) & mask_;
      keys_[s] = old_keys[i];
      sums_[s] = old_sums[i];
    }
    reservation_.resize((mask_ + 1) * kSlotBytes);
  }
  MemoryBudget& budget_;
  const char* what_;
  const char* remedy_;
  Reservation reservation_;
  HugeVector<uint64_t> keys_;
  HugeVector<double> sums_;
  uint64_t mask_ = 0;
  uint64_t size_ = 0;
};

}  // namespace fgm
