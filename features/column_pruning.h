// Pruned top-B scoring of a tiled block (issue 19): a column whose score
// cannot reach the pass's B-th best is never gathered.
//
// For every column k, |c_k| = |Σ_i a_i x_ik| ≤ ‖a‖∞ · n_k · max(|min_k|, |max_k|)
// (n_k its nonzeros; col_min/col_max cover every row, so they bound |x_ik|).
// The bound needs only the block's cell arrays (8 bytes per cell), not its
// rows, values or the dual vector. On Zipf-shaped data (kddb) most columns
// hold a few nonzeros and their bounds lie far below the B-th best score,
// which the popular columns set; only the columns whose bound reaches it are
// summed.
//
// Exactness: a column is skipped only when its bound (rounding of the summed
// c_k included, see column_score_bounds) is strictly below a score that B
// unselected candidates of the pass already reach (ScoreFloor). Such a column
// ranks after those B under any tie rule, so the top-B set is the one the
// unpruned pass keeps; every kept column's c_k is summed by the same adds in
// the same order as block_column_dots (bit-identical scores). Which columns
// are skipped depends on thread timing (the floor rises as blocks finish);
// the result does not.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "cache/top_b_cache.h"
#include "core/huge_pages.h"
#include "features/block_scores.h"
#include "io/column_block.h"

namespace fgm {

// A lower bound of the B-th best score of the pass in progress: the B-th
// best of any block's candidates (or of the merged ones) never exceeds the
// final one. Raised by every thread, read without a lock.
class ScoreFloor {
 public:
  double get() const { return value_.load(std::memory_order_relaxed); }
  void raise(double score) {
    double now = value_.load(std::memory_order_relaxed);
    while (score > now && !value_.compare_exchange_weak(now, score, std::memory_order_relaxed)) {
    }
  }
  // The B-th best of a full cache (nothing otherwise).
  void raise_from(const TopBCache& top) {
    if (top.capacity() > 0 && top.full()) raise(top.worst().score);
  }

 private:
  std::atomic<double> value_{0.0};
};

// The margin of column_score_bounds (see there): covers the rounding of a
// computed c_k and of the bound itself.
inline constexpr double kScoreBoundMargin = 1.0 + 0x1p-18;

// Whether no column of a block part whose columns each have n_k · max|x_k| ≤
// factor_bound (a format 6 tail, BlockRef::tail_bound) can reach `floor`:
// its every bound2 (column_score_bounds) lies strictly below it. NaN duals
// or bounds: never.
inline bool part_out_of_reach(double factor_bound, double a_max, const ScoreFloor& floor) {
  const double bound = factor_bound * a_max;
  return bound * bound * kScoreBoundMargin < floor.get();
}

// max_i |a_i| over n entries (NaN if any a_i is NaN: nothing is then pruned).
double max_abs(const double* a, uint64_t n);

// count[k] = the nonzeros of listed column k (column_count entries).
void column_nonzeros(const ColumnBlock& block, uint32_t* count);

// bound2[k] ≥ the c_k² that block_column_dots computes (floating-point
// rounding included) for |a_i| ≤ a_max; `count` is scratch of column_count
// entries (each column's nonzeros: block.column_nnz when the block has it).
void column_score_bounds(const ColumnBlock& block, double a_max, uint32_t* count, double* bound2);

// c[k] for the live columns (live[k] != 0; live_columns lists them, live_count
// of them, increasing unless live_count·16 ≥ block.cell_count()), summed by the same adds in the same order as
// block_column_dots (so bit for bit its c[k]); the others are left as they
// are. Walks the cells (a row order, if any, is not used).
void block_column_dots_live(const ColumnBlock& block, const double* a, const uint8_t* live,
                            const uint32_t* live_columns, uint64_t live_count, double* c);

// Per-block scratch of offer_block_top; its bytes per listed column.
struct PruningScratch {
  static constexpr uint64_t kBytesPerColumn = 4 + 8 + 1 + 4 + 8;  // count, bound2, live, candidates, c
  std::vector<uint32_t> count;
  std::vector<double> bound2;
  std::vector<uint8_t> live;
  std::vector<uint32_t> candidates;
  std::vector<double> c;
};

// The scratches of a pass's transforms, reused from block to block (at most
// one per thread is out at a time; the stream reserves one per token): fresh
// arrays of MiBs per block came back as zeroed pages every block.
class PruningScratchPool {
 public:
  std::unique_ptr<PruningScratch> take() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) return std::make_unique<PruningScratch>();
    std::unique_ptr<PruningScratch> s = std::move(free_.back());
    free_.pop_back();
    return s;
  }
  void give(std::unique_ptr<PruningScratch> s) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(std::move(s));
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<PruningScratch>> free_;
};

// Columns a pruned block pass summed and skipped (for tests and benchmarks).
struct PruningCounts {
  uint64_t columns_summed = 0;
  uint64_t columns_skipped = 0;   // pruned or excluded
  uint64_t columns_deferred = 0;  // handed to a DeferredColumns batch (summed or pruned at its flush)
  uint64_t flushed_summed = 0;    // columns of earlier blocks a full batch summed during this block
  bool whole_block = false;       // summed by block_column_dots (pruning would not pay)
  uint64_t second_stage = 0;      // candidates left for the second stage
};

// Long candidate columns of many blocks, summed together tile by tile.
//
// Why: on Zipf data the columns that can reach the B-th best score are the
// few popular ones, dense enough (2–100 % of the rows on the kddb shape)
// that summing one sweeps most of the dual vector, and the id permutation
// puts about one in each block. Summed block by block, every popular column
// sweeps the dual vector (8n bytes, far beyond the caches) on its own;
// gathered into a batch across blocks and summed tile by tile, the batch
// sweeps it once (measured on the kddb shape: the 379 columns of at least
// 10^5 nonzeros, 232 M nonzeros, 1.55 CPU s column by column, 0.36 tile by
// tile; bench/README.md).
//
// Exactness: a held column keeps its cells (rows, values) in tile order and
// is summed by the same adds in the same order as block_column_dots (a short
// cell's products one by one, a long cell's cell_dot once, tiles in order),
// so its c_k is bit for bit the block kernel's. At the flush a column whose
// bound is now below the floor is not summed (the rule of offer_block_top).
// Columns are offered to the TopBCache the flush is given; which block's
// cache receives a column does not change the merged top-B.
class DeferredColumns {
 public:
  // Holds at most `capacity_bytes` (4 per row id, 4 per value unless the
  // column is unit-valued, kCellBytes per cell, kColumnBytes per column);
  // columns of fewer than `min_nnz` nonzeros are not taken. The first batch
  // is flushed at 1/16 of the capacity, each next one at twice the last, up
  // to the capacity: the first flush raises the pass's floor to the popular
  // columns' scores early, which prunes the later blocks.
  DeferredColumns(uint64_t capacity_bytes, uint64_t min_nnz)
      : capacity_(capacity_bytes), min_nnz_(min_nnz), limit_(std::max<uint64_t>(capacity_bytes / 16, 1)) {}
  static constexpr uint64_t kCellBytes = 24, kColumnBytes = 32;

  bool takes(uint64_t nnz) const { return nnz >= min_nnz_; }
  // Whether column k of `block` (nnz nonzeros, its cells) would still fit.
  // An empty batch takes any column up to the capacity; a non-empty one is
  // flushed once it passes its current limit.
  bool fits(const ColumnBlock& block, uint64_t nnz) const {
    return bytes_ + column_bytes(block, nnz) <= (columns_.empty() ? capacity_ : limit_);
  }
  // Copies column k (nnz nonzeros; bound2 its score bound) out of `block`.
  void add(const ColumnBlock& block, uint32_t k, uint64_t nnz, double bound2);
  // Sums every held column whose bound reaches the floor, offers each
  // s = c² > 0 to `top`, raises the floor from `top` and empties the batch.
  // Returns the columns summed.
  uint64_t flush(const double* a, ScoreFloor& floor, TopBCache& top);
  bool empty() const { return columns_.empty(); }
  uint64_t bytes() const { return bytes_; }

 private:
  static uint64_t column_bytes(const ColumnBlock& block, uint64_t nnz) {
    return (block.unit_values ? 4 : 8) * nnz + kCellBytes * block.tile_count + kColumnBytes;
  }
  struct Column {
    uint64_t id;
    double bound2;
    uint64_t first_cell, end_cell;  // into cells_
  };
  struct Cell {
    uint32_t tile;
    uint32_t nnz;
    uint64_t row_begin;    // into rows_
    uint64_t value_begin;  // into values_; UINT64_MAX: unit values
  };
  uint64_t capacity_, min_nnz_, limit_;
  uint64_t bytes_ = 0;
  uint32_t tile_rows_ = 0, tile_count_ = 0;
  std::vector<Column> columns_;
  std::vector<Cell> cells_;
  // Reserved to the capacity at the first column (rows) and the first
  // column with values (values), in 2 MiB pages: no reallocation inside a
  // pass, few page faults at its start.
  HugeVector<uint32_t> rows_;
  HugeVector<float> values_;
  std::vector<double> c_;
  std::vector<uint64_t> next_;
};

// The batches of a pass's transforms (one out per thread at a time), each
// `capacity_bytes`; the pass flushes what is left in them after its last
// block (flush_all).
class DeferredColumnsPool {
 public:
  DeferredColumnsPool(size_t batches, uint64_t capacity_bytes, uint64_t min_nnz) {
    for (size_t b = 0; b < batches; ++b) free_.push_back(std::make_unique<DeferredColumns>(capacity_bytes, min_nnz));
  }
  // A batch, or nothing when every batch is out (the block is then pruned
  // without deferring).
  std::unique_ptr<DeferredColumns> take() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) return nullptr;
    std::unique_ptr<DeferredColumns> d = std::move(free_.back());
    free_.pop_back();
    return d;
  }
  void give(std::unique_ptr<DeferredColumns> d) {
    if (!d) return;
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(std::move(d));
  }
  // Flushes every batch into `top` (after the pass's last block; every
  // batch is back), one thread a batch.
  uint64_t flush_all(const double* a, ScoreFloor& floor, TopBCache& top);

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<DeferredColumns>> free_;
};

// Offers to `top` (capacity B) every column of `block` whose score
// s_k = c_k² > 0 may rank among the pass's B best and whose id is not
// excluded(id): the same candidates, with the same scores, that offering
// every column would leave in a top-B. When pruning would skip few gathers
// the whole block is summed (block_column_dots); otherwise two stages: the
// columns with the largest bounds first (they fill `top` and raise `floor`),
// then the rest of those whose bounds reach the floor. Raises `floor` from
// `top`.
//
// With `deferred`, candidates of at least its min_nnz nonzeros (the popular
// columns) that are not excluded go to the batch instead of being summed
// here (flushed into `top` first when the batch is full); the batch sums
// them later, with the columns of other blocks (DeferredColumns).
template <class Excluded>
PruningCounts offer_block_top(const ColumnBlock& block, const double* a, double a_max, ScoreFloor& floor,
                              TopBCache& top, Excluded&& excluded, PruningScratch& s,
                              DeferredColumns* deferred = nullptr) {
  const uint64_t k_count = block.column_count;
  PruningCounts counts;
  if (k_count == 0 || top.capacity() == 0) return counts;
  s.count.resize(k_count);
  s.bound2.resize(k_count);
  s.live.assign(k_count, 0);
  s.c.resize(k_count);
  column_score_bounds(block, a_max, s.count.data(), s.bound2.data());
  // Candidates: bounds not below the floor.
  s.candidates.clear();
  const double floor0 = floor.get();
  uint64_t candidate_nnz = 0;
  for (uint64_t k = 0; k < k_count; ++k)
    if (!(s.bound2[k] < floor0)) {
      s.candidates.push_back(static_cast<uint32_t>(k));
      candidate_nnz += s.count[k];
    }
  if (deferred) {
    // Long candidates to the batch; the others stay candidates here.
    auto kept = s.candidates.begin();
    for (uint32_t k : s.candidates) {
      if (!deferred->takes(s.count[k]) || excluded(block.column_ids[k])) {
        *kept++ = k;
        continue;
      }
      if (!deferred->fits(block, s.count[k]) && !deferred->empty())
        counts.flushed_summed += deferred->flush(a, floor, top);
      if (!deferred->fits(block, s.count[k])) {  // larger than a whole batch: summed here
        *kept++ = k;
        continue;
      }
      if (!(s.bound2[k] < floor.get())) {
        deferred->add(block, k, s.count[k], s.bound2[k]);
        ++counts.columns_deferred;
      }
      candidate_nnz -= s.count[k];
    }
    s.candidates.erase(kept, s.candidates.end());
    if (s.candidates.empty()) {
      counts.columns_skipped = k_count - counts.columns_deferred;
      return counts;
    }
  }
  // Pruning pays when the gathers it skips outweigh its extra cell scans
  // (a gather of a dual costs about what two cells of a scan do); otherwise
  // (a low floor: the first blocks, or columns of like popularity) every
  // column is summed by the block kernel, with the block's row order if it
  // has one (not when columns were deferred: the kernel would sum them too).
  if (counts.columns_deferred == 0 && 2 * (block.nnz() - candidate_nnz) < block.cell_count()) {
    block_column_dots(block, a, s.c.data());
    for (uint64_t k = 0; k < k_count; ++k) {
      const double score = s.c[k] * s.c[k];
      if (!(score > 0) || !top.may_admit(score) || excluded(block.column_ids[k])) continue;
      top.offer({score, block.column_ids[k]});
    }
    floor.raise_from(top);
    counts.columns_summed = k_count;
    counts.whole_block = true;
    return counts;
  }
  auto by_bound = [&](uint32_t x, uint32_t y) {
    return s.bound2[x] > s.bound2[y] || (s.bound2[x] == s.bound2[y] && x < y);
  };
  auto sum_and_offer = [&](uint32_t* begin, uint32_t* end) {
    // Increasing for block_column_dots_live's binary searches, which it
    // runs only on tiles of more than 16 cells per live column.
    if (static_cast<uint64_t>(end - begin) * 16 < block.cell_count()) std::sort(begin, end);
    uint32_t* live_end = begin;
    for (uint32_t* p = begin; p < end; ++p)
      if (!excluded(block.column_ids[*p])) {
        s.live[*p] = 1;
        *live_end++ = *p;
      }
    const uint64_t summed = static_cast<uint64_t>(live_end - begin);
    if (summed == 0) return;
    block_column_dots_live(block, a, s.live.data(), begin, summed, s.c.data());
    for (const uint32_t* p = begin; p < live_end; ++p) {
      s.live[*p] = 0;
      const double score = s.c[*p] * s.c[*p];
      if (!(score > 0) || !top.may_admit(score)) continue;
      top.offer({score, block.column_ids[*p]});
    }
    counts.columns_summed += summed;
  };
  // Stage 1: the columns of largest bound (on Zipf data the popular ones,
  // which hold the best scores), enough to fill `top` a few times over.
  const uint64_t first = std::min<uint64_t>(s.candidates.size(), std::max<uint64_t>(2 * top.capacity(), 64));
  std::nth_element(s.candidates.begin(), s.candidates.begin() + first, s.candidates.end(), by_bound);
  sum_and_offer(s.candidates.data(), s.candidates.data() + first);
  floor.raise_from(top);
  // Stage 2: the other candidates whose bounds reach the raised floor.
  const double floor1 = floor.get();
  auto rest = std::partition(s.candidates.begin() + first, s.candidates.end(),
                             [&](uint32_t k) { return !(s.bound2[k] < floor1); });
  counts.second_stage = static_cast<uint64_t>(rest - (s.candidates.begin() + first));
  sum_and_offer(s.candidates.data() + first, s.candidates.data() + (rest - s.candidates.begin()));
  floor.raise_from(top);
  counts.columns_skipped = k_count - counts.columns_summed - counts.columns_deferred;
  return counts;
}

}  // namespace fgm
