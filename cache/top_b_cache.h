// The top-B heap cache c_B of the worst-case analysis (FGM Section 4.3): the
// B best-scoring candidates seen so far. Candidates are ordered by score, ties
// broken by the smaller id, which is a total order: the kept set does not
// depend on the order candidates arrive in, so thread-local caches merged in
// any order give the same result (determinism for any thread count).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/memory_budget.h"

namespace fgm {

struct ScoredCandidate {
  double score = 0;
  uint64_t id = 0;  // feature id, group id, or an encoded generated-feature id
};

// a ranks before b
inline bool ranks_before(const ScoredCandidate& a, const ScoredCandidate& b) {
  return a.score > b.score || (a.score == b.score && a.id < b.id);
}

// Memory: the heap grows with the candidates it holds (never past the
// capacity B), so a huge B costs only what the offered candidates need. With a
// budget, the heap's capacity is reserved before every growth (the old buffer
// too while it is copied), and copies charge the same budget.
class TopBCache {
 public:
  explicit TopBCache(size_t capacity, MemoryBudget* budget = nullptr)
      : capacity_(capacity), budget_(budget) {
    if (budget_) reservation_ = budget_->reserve(0, kPurpose, kRemedy);
  }
  TopBCache(const TopBCache& other) : capacity_(other.capacity_), budget_(other.budget_) {
    copy_from(other);
  }
  TopBCache& operator=(const TopBCache& other) {
    if (this != &other) {
      capacity_ = other.capacity_;
      budget_ = other.budget_;
      heap_ = {};
      reservation_ = {};
      copy_from(other);
    }
    return *this;
  }
  TopBCache(TopBCache&&) noexcept = default;
  TopBCache& operator=(TopBCache&&) noexcept = default;

  size_t capacity() const { return capacity_; }
  size_t size() const { return heap_.size(); }
  bool full() const { return heap_.size() >= capacity_; }
  // Bytes the heap has allocated (what the reservation covers).
  uint64_t bytes() const { return heap_.capacity() * sizeof(ScoredCandidate); }
  // Score a candidate must beat (with the tie rule) once the cache is full.
  const ScoredCandidate& worst() const { return heap_.front(); }

  // Would `c` enter the cache?
  bool admits(const ScoredCandidate& c) const {
    return capacity_ > 0 && (!full() || ranks_before(c, heap_.front()));
  }
  // Cheap pre-filter on the score alone (ties resolved by offer()).
  bool may_admit(double score) const { return !full() || score >= heap_.front().score; }

  void offer(const ScoredCandidate& c) {
    if (!admits(c)) return;
    // Heap with the worst-ranked candidate at the front.
    if (full()) {
      std::pop_heap(heap_.begin(), heap_.end(), ranks_before);
      heap_.back() = c;
    } else {
      if (heap_.size() == heap_.capacity()) grow();
      heap_.push_back(c);
    }
    std::push_heap(heap_.begin(), heap_.end(), ranks_before);
  }

  void merge(const TopBCache& other) {
    for (const auto& c : other.heap_) offer(c);
  }

  // Best first.
  std::vector<ScoredCandidate> sorted() const {
    std::vector<ScoredCandidate> out = heap_;
    std::sort(out.begin(), out.end(), ranks_before);
    return out;
  }

  // Best first, without a copy; leaves the cache empty. `memory` (if given)
  // receives the reservation covering the returned vector.
  std::vector<ScoredCandidate> take_sorted(Reservation* memory = nullptr) {
    std::sort(heap_.begin(), heap_.end(), ranks_before);
    std::vector<ScoredCandidate> out = std::move(heap_);
    heap_ = {};
    if (budget_ && memory) {
      *memory = std::move(reservation_);
      reservation_ = budget_->reserve(0, kPurpose, kRemedy);
    }
    return out;
  }

 private:
  static constexpr const char* kPurpose = "top-B candidates";
  static constexpr const char* kRemedy = "lower fgm.B";

  void grow() {
    const size_t old_capacity = heap_.capacity();
    const size_t new_capacity = std::min(capacity_, std::max<size_t>(64, 2 * old_capacity));
    if (budget_) reservation_.resize((old_capacity + new_capacity) * sizeof(ScoredCandidate));
    heap_.reserve(new_capacity);
    if (budget_) reservation_.resize(bytes());
  }

  void copy_from(const TopBCache& other) {
    if (budget_) reservation_ = budget_->reserve(other.heap_.size() * sizeof(ScoredCandidate), kPurpose, kRemedy);
    heap_.reserve(other.heap_.size());
    heap_ = other.heap_;
    if (budget_) reservation_.resize(bytes());
  }

  size_t capacity_;
  MemoryBudget* budget_ = nullptr;
  Reservation reservation_;
  std::vector<ScoredCandidate> heap_;
};

}  // namespace fgm
