// The top-B heap cache c_B of the worst-case analysis (FGM Section 4.3): the
// B best-scoring candidates seen so far. Candidates are ordered by score, ties
// broken by the smaller id, which is a total order: the kept set does not
// depend on the order candidates arrive in, so thread-local caches merged in
// any order give the same result (determinism for any thread count).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace fgm {

struct ScoredCandidate {
  double score = 0;
  uint64_t id = 0;  // feature id, group id, or an encoded generated-feature id
};

// a ranks before b
inline bool ranks_before(const ScoredCandidate& a, const ScoredCandidate& b) {
  return a.score > b.score || (a.score == b.score && a.id < b.id);
}

class TopBCache {
 public:
  explicit TopBCache(size_t capacity) : capacity_(capacity) { heap_.reserve(capacity); }

  size_t capacity() const { return capacity_; }
  size_t size() const { return heap_.size(); }
  bool full() const { return heap_.size() >= capacity_; }
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

 private:
  size_t capacity_;
  std::vector<ScoredCandidate> heap_;
};

}  // namespace fgm
