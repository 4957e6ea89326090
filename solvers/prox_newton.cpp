// Proximal Newton for problem (31): see prox_newton.h for the method.
//
// Data. Per row part the selected columns are turned around into rows
// (NewtonRows: the rows some selected column touches, in increasing row
// order, each with its entries in column order; 2 bytes per entry for the
// column, 4 more for its value unless every value is 1). Identical rows are
// merged into one row with a count when that removes a quarter of them
// (binary data over few columns: kddb's 19M rows are 1,561 rows over its
// first 10 columns). Merged rows are kept in the state between the solves of
// a run, and the next solve extends them by its new columns in one walk over
// the rows instead of turning every column around again; the walk runs over
// fixed row ranges in parallel, each range's merged rows numbered in one
// ordered sweep, so the merged rows are numbered by first occurrence for any
// thread count. Columns with few entries in all (at most one per 16 rows:
// the tall uniform store's) are turned around by sorting their entries, and
// whether their rows merge is decided on those rows, without a pass over
// every row. Rows no selected
// column touches have d_i = −b whatever ω is: they enter as two counts by
// label, as in the APG.
//
// One iteration, at z = (ω, b) with decision values d on the touched rows:
//  1. one sweep over the rows: r_i = ∂P/∂d_i, the gradient g = X'r (and g⁺,
//     its positive rows' part, for the certificate with a bias), P, and the
//     Hessian's change (squared hinge: the rows whose D_ii ∈ {0, C} flipped;
//     logistic: all rows, weights C·p(1−p));
//  2. the certificate: F(z) − D(θα̃) with α̃ the class-balanced Theorem 3
//     dual point (apg.cpp), θ optimal: stop when it is within the tolerance
//     (gap_tolerance for a certified solve, intermediate_gap otherwise);
//  3. the model: the bias step is eliminated exactly (Schur complement of
//     H_bb), FISTA with restart on the ω part, prox = Algorithm 3, solved to
//     a tenth of the tolerance;
//  4. u = X̃Δ (one sweep), then backtracking on s with the decrease taken
//     row by row (Σ_i φ(m_i + s y_i u_i) − φ(m_i)) so a small decrease of a
//     large P keeps its digits;
//  5. once the model predicts a decrease within reach of the tolerance, the
//     model's own dual point (model_dual_bound, two passes) certifies the
//     step's end, steps before Theorem 3's α there would: the next sweep
//     then only forms d afresh and confirms the gap.
// Sums over rows run over fixed row ranges whose partial sums are added in
// range order, and over parts through the RowSumReduction: the same bits for
// any thread count. The returned decision values are formed as the APG forms
// them (batch by batch, then − b), so a resumed run rebuilds them bit for bit
// with apg_decision_values.
#include "solvers/prox_newton.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_pipeline.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <bit>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "core/hash.h"
#include "core/interrupt.h"
#include "core/loop_rendezvous.h"
#include "core/huge_pages.h"
#include "solvers/losses.h"
#include "solvers/moreau_projection.h"

namespace fgm {
namespace {

constexpr uint64_t kRangeRows = 16384;          // touched rows per partial-sum range (at most)
constexpr uint64_t kPartialBytes = 48ull << 20;  // partial gradients and Hessians of all ranges
constexpr int kMaxStepHalvings = 40;
constexpr double kArmijo = 1e-4;
// The model's dual point is tried once the model predicts a decrease of at
// most this many tolerances of F (on the Zipf store the steps it certified
// decreased F by up to 2.4 tolerances; the model predicts about twice that).
constexpr double kModelDualReach = 20.0;
// Selected columns up to which the Newton model is solved tightly (solve()).
constexpr size_t kTightModelColumns = 64;
constexpr int kModelIterations = 3000;
constexpr const char* kRemedy = "lower fgm.B or fgm.max_iterations (fewer selected columns), or set apg.method=apg";

// Runs loops on an arena of exactly `threads` threads (or inline); every task
// writes only its own outputs, so the split never changes a result.
class Tasks {
 public:
  explicit Tasks(int threads) {
    if (threads > 1) arena_.emplace(threads);
  }
  template <class F>
  void run(size_t count, const F& f) {
    if (!arena_ || count <= 1) {
      for (size_t i = 0; i < count; ++i) f(i);
      return;
    }
    LoopRendezvous rendezvous;
    arena_->execute([&] {
      tbb::parallel_for(tbb::blocked_range<size_t>(0, count, 1), [&](const tbb::blocked_range<size_t>& r) {
        rendezvous.arrive();
        for (size_t i = r.begin(); i != r.end(); ++i) f(i);
      });
    });
  }
  // For items 0, 1, …, count − 1: first(i) in parallel, then second(i) one
  // item at a time in increasing order, then third(i) in parallel; at most
  // `in_flight` items between first and third.
  template <class First, class Second, class Third>
  void pipeline(size_t count, size_t in_flight, const First& first, const Second& second, const Third& third) {
    if (!arena_ || count <= 1) {
      for (size_t i = 0; i < count; ++i) first(i), second(i), third(i);
      return;
    }
    arena_->execute([&] {
      size_t next = 0;
      tbb::parallel_pipeline(
          in_flight,
          tbb::make_filter<void, size_t>(tbb::filter_mode::serial_in_order,
                                         [&](tbb::flow_control& control) -> size_t {
                                           if (next == count) control.stop();
                                           return next++;
                                         }) &
              tbb::make_filter<size_t, size_t>(tbb::filter_mode::parallel, [&](size_t i) { return first(i), i; }) &
              tbb::make_filter<size_t, size_t>(tbb::filter_mode::serial_in_order,
                                               [&](size_t i) { return second(i), i; }) &
              tbb::make_filter<size_t, void>(tbb::filter_mode::parallel, [&](size_t i) { third(i); }));
    });
  }

 private:
  std::optional<tbb::task_arena> arena_;
};

// Fixed ranges of compact rows for partial sums: their number depends on the
// rows and the column count only, never on the threads.
struct Ranges {
  size_t count = 1;
  uint64_t rows = 0;
  uint64_t begin(size_t r) const { return rows * r / count; }
  uint64_t end(size_t r) const { return rows * (r + 1) / count; }
};

Ranges ranges_for(uint64_t rows, uint64_t doubles_per_range) {
  Ranges r;
  r.rows = rows;
  const uint64_t by_rows = std::max<uint64_t>(1, (rows + kRangeRows - 1) / kRangeRows);
  const uint64_t by_memory = std::max<uint64_t>(1, kPartialBytes / std::max<uint64_t>(1, doubles_per_range * 8));
  r.count = size_t(std::min<uint64_t>({by_rows, by_memory, 256}));
  return r;
}

// HugePageAllocator whose resize leaves new elements uninitialised, for
// arrays a parallel loop writes whole right after: no serial zeroing pass
// (which also faulted every page in on one thread; at kddb scale 0.26 CPU s
// of a solve), and the pages fault in on the threads that write them.
template <class T>
struct UninitialisedAllocator : HugePageAllocator<T> {
  template <class U>
  struct rebind {
    using other = UninitialisedAllocator<U>;
  };
  UninitialisedAllocator() noexcept = default;
  template <class U>
  UninitialisedAllocator(const UninitialisedAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
template <class T>
using WrittenVector = std::vector<T, UninitialisedAllocator<T>>;

// One part's selected columns as rows.
struct NewtonRows {
  uint64_t n = 0;                  // rows of the part
  uint64_t positive_untouched = 0, negative_untouched = 0;
  HugeVector<uint32_t> row;        // compact → row id
  std::vector<int8_t> y;           // compact → label (0: not in the fit)
  WrittenVector<uint64_t> begin;   // entries of compact row c: [begin[c], begin[c+1])
  WrittenVector<uint16_t> column;  // entry → selected column
  WrittenVector<float> value;      // entry → value; empty when every value is 1
  // Identical rows (same entries, values and label) merged into one row of
  // that many copies: weight[c] copies of compact row c, and group[i] the
  // merged row of row i (kUntouched: no selected column touches it), for
  // `touched` rows. Empty when the rows were not merged (weight 1, `row`
  // lists the touched rows).
  HugeVector<uint32_t> weight, group;
  uint64_t touched = 0;
  Reservation reservation, merge_reservation, group_reservation;

  static constexpr uint32_t kUntouched = std::numeric_limits<uint32_t>::max();
  bool merged() const { return !group.empty(); }
  size_t rows() const { return row.size(); }
  bool binary() const { return value.empty(); }
  double at(uint64_t e) const { return value.empty() ? 1.0 : double(value[e]); }
  double copies(uint64_t c) const { return weight.empty() ? 1.0 : double(weight[c]); }

  // Reserves and sizes `touched` unmerged rows of `nnz` entries (values only unless binary).
  void size_plain_rows(uint64_t touched, uint64_t nnz, bool binary, MemoryBudget& budget) {
    reservation = budget.reserve(touched * (sizeof(uint32_t) + sizeof(int8_t) + sizeof(uint64_t)) + 8 +
                                     nnz * (sizeof(uint16_t) + (binary ? 0 : sizeof(float))),
                                 "Newton selected rows", kRemedy);
    row.resize(touched);
    y.resize(touched);
    begin.resize(touched + 1);
    column.resize(nnz);
    if (!binary) value.resize(nnz);
  }
};

// Turns the part's selected columns around. Rows are split into 64 fixed id
// ranges (multiples of 64 rows, so a bitmap column splits at word
// boundaries); a range finds its entries of every column by binary search
// (row lists), its words (bitmaps) or its slice (dense), so ranges build their
// rows independently.
// Columns [first, cols) only when `first` > 0 (the new columns of a solve
// that extends the rows it kept).
void turn_around(const SelectedFeatureCache& cache, size_t first, const int8_t* labels, Tasks& tasks,
                 MemoryBudget& budget, NewtonRows& out) {
  const uint64_t n = cache.n_rows();
  const size_t cols = cache.num_columns();
  FGM_ASSERT(cols <= kProxNewtonMaxColumns && n <= std::numeric_limits<uint32_t>::max());
  out.n = n;
  constexpr size_t kIdRanges = 64;
  std::vector<uint64_t> bound(kIdRanges + 1);
  for (size_t r = 0; r < kIdRanges; ++r) bound[r] = std::min<uint64_t>(n, (n * r / kIdRanges) & ~uint64_t(63));
  bound[kIdRanges] = n;
  bool binary = true;
  uint64_t nnz = 0;
  std::vector<ColumnView> view(cols);
  // Bitmap columns with values: the index of each range's first value.
  std::vector<std::vector<uint64_t>> value_rank(cols);
  for (size_t j = first; j < cols; ++j) {
    const ColumnView c = cache.column(j);
    view[j] = c;
    nnz += c.nnz;
    if (c.is_uniform()) binary = binary && c.uniform == 1.0f;
    else if (binary) c.for_each([&](uint32_t, float v) { binary = binary && v == 1.0f; });
    if (c.form == ColumnForm::kBitmap) {
      std::vector<uint64_t>& rank = value_rank[j];
      rank.assign(kIdRanges + 1, 0);
      uint64_t seen = 0, word = 0;
      for (size_t r = 0; r <= kIdRanges; ++r) {
        for (; word < bound[r] / 64; ++word) seen += uint64_t(std::popcount(c.words[word]));
        rank[r] = seen;
      }
    }
  }
  // f(j, row, value) for column j's entries in id range r, rows increasing.
  auto for_entries = [&](size_t r, const auto& f) {
    const uint64_t lo = bound[r], hi = bound[r + 1];
    for (size_t j = first; j < cols; ++j) {
      const ColumnView& c = view[j];
      switch (c.form) {
        case ColumnForm::kSparse:
        case ColumnForm::kSparseUniform: {
          uint64_t k = uint64_t(std::lower_bound(c.rows, c.rows + c.nnz, uint32_t(lo)) - c.rows);
          for (; k < c.nnz && c.rows[k] < hi; ++k) f(j, c.rows[k], c.values ? c.values[k] : c.uniform);
          break;
        }
        case ColumnForm::kBitmap:
        case ColumnForm::kBitmapUniform: {
          uint64_t k = c.form == ColumnForm::kBitmap ? value_rank[j][r] : 0;
          for (uint64_t w = lo / 64; w * 64 < hi; ++w)
            for (uint64_t bits = c.words[w]; bits != 0; bits &= bits - 1) {
              const uint64_t row = w * 64 + uint64_t(std::countr_zero(bits));
              f(j, row, c.form == ColumnForm::kBitmap ? c.values[k++] : c.uniform);
            }
          break;
        }
        case ColumnForm::kDense:
          for (uint64_t row = lo; row < hi; ++row)
            if (ColumnView::dense_entry(c.values[row])) f(j, row, c.values[row]);
          break;
      }
    }
  };
  Reservation counts_memory = budget.reserve(n * sizeof(uint32_t), "Newton row counts", kRemedy);
  HugeVector<uint32_t> count(n, 0);
  tasks.run(kIdRanges, [&](size_t r) { for_entries(r, [&](size_t, uint64_t row, float) { ++count[row]; }); });
  uint64_t touched = 0;
  for (uint64_t i = 0; i < n; ++i) touched += count[i] != 0;
  out.size_plain_rows(touched, nnz, binary, budget);
  uint64_t c = 0, at = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (labels[i] > 0) ++out.positive_untouched;
    if (labels[i] < 0) ++out.negative_untouched;
    if (count[i] == 0) continue;
    out.positive_untouched -= labels[i] > 0;
    out.negative_untouched -= labels[i] < 0;
    out.row[c] = uint32_t(i);
    out.y[c] = labels[i];
    out.begin[c] = at;
    at += count[i];
    count[i] = uint32_t(c++);  // now: the compact index
  }
  out.begin[touched] = at;
  // Fill: a cursor per compact row (its next free entry), columns in order.
  HugeVector<uint64_t> cursor(out.begin.begin(), out.begin.end() - 1);
  tasks.run(kIdRanges, [&](size_t r) {
    for_entries(r, [&](size_t j, uint64_t row, float value) {
      const uint64_t e = cursor[count[row]]++;
      out.column[e] = uint16_t(j);
      if (!out.value.empty()) out.value[e] = value;
    });
  });
  cursor = {};
  count = {};
  counts_memory.release();
}

// Rows are merged when that removes at least kMergeGain of them: on binary
// data over few columns (kddb's popular features) most rows repeat a handful
// of patterns. Whether they merge depends on the data only, never on the
// budget or the threads (a model must not change with either).
constexpr double kMergeGain = 0.25;
constexpr uint64_t kWalkBlock = 4096;  // rows per block of the walk; a multiple of 64 (whole bitmap words)
constexpr uint64_t kWalkRangeRows = 64 * kWalkBlock;  // rows per range walked by one task
constexpr size_t kWalkRangesInFlight = 4;  // ranges walked but not yet numbered, at most

// The new columns [first, last) of a walk.
struct NewColumns {
  size_t first = 0;
  uint64_t range_rows = kWalkRangeRows;
  std::vector<ColumnView> view;
  std::vector<float> uniform;  // a column's one value (NaN: its values differ)
  // Bitmap columns with values: the index of the first value of each range.
  std::vector<std::vector<uint64_t>> value_rank;
  bool binary = true;    // every value (old and new) is 1
  bool maskable = true;  // at most 64 columns, each of one value: entries are a bit mask

  NewColumns(const SelectedFeatureCache& cache, size_t first_column, size_t last_column, bool old_binary,
             uint64_t rows_per_range)
      : first(first_column), range_rows(rows_per_range) {
    FGM_ASSERT(range_rows % kWalkBlock == 0 && range_rows > 0);
    binary = old_binary;
    const uint64_t n = cache.n_rows(), ranges = (n + range_rows - 1) / range_rows;
    for (size_t j = first; j < last_column; ++j) {
      const ColumnView c = cache.column(j);
      view.push_back(c);
      float one = c.is_uniform() ? c.uniform : std::numeric_limits<float>::quiet_NaN();
      if (!c.is_uniform()) {
        bool first_value = true, same = true;
        c.for_each([&](uint32_t, float v) {
          if (first_value) one = v, first_value = false;
          same = same && v == one;
        });
        if (!same) one = std::numeric_limits<float>::quiet_NaN();
      }
      binary = binary && one == 1.0f;
      maskable = maskable && !std::isnan(one);
      uniform.push_back(one);
      std::vector<uint64_t>& rank = value_rank.emplace_back();
      if (c.form != ColumnForm::kBitmap) continue;
      rank.assign(ranges, 0);
      uint64_t seen = 0, word = 0;
      for (uint64_t r = 0; r < ranges; ++r) {
        for (; word < r * range_rows / 64; ++word) seen += uint64_t(std::popcount(c.words[word]));
        rank[r] = seen;
      }
    }
    maskable = maskable && view.size() <= 64;
  }

  // The bitmap value cursors at the start of range `r`.
  std::vector<uint64_t> cursors(uint64_t r) const {
    std::vector<uint64_t> at(view.size(), 0);
    for (size_t v = 0; v < view.size(); ++v)
      if (!value_rank[v].empty()) at[v] = value_rank[v][r];
    return at;
  }

  // f(v, r, value) for new column v's entries in rows [lo, hi), r = row − lo;
  // moves the bitmap value cursors `at` past the block.
  template <class F>
  void for_entries(uint64_t lo, uint64_t hi, std::vector<uint64_t>& at, const F& f) const {
    for (size_t v = 0; v < view.size(); ++v) {
      const ColumnView& c = view[v];
      switch (c.form) {
        case ColumnForm::kSparse:
        case ColumnForm::kSparseUniform: {
          uint64_t k = uint64_t(std::lower_bound(c.rows, c.rows + c.nnz, uint32_t(lo)) - c.rows);
          for (; k < c.nnz && c.rows[k] < hi; ++k) f(v, c.rows[k] - lo, c.values ? c.values[k] : c.uniform);
          break;
        }
        case ColumnForm::kBitmap:
        case ColumnForm::kBitmapUniform: {
          uint64_t k = at[v];
          for (uint64_t w = lo / 64; w * 64 < hi; ++w)
            for (uint64_t bits = c.words[w]; bits != 0; bits &= bits - 1)
              f(v, w * 64 + uint64_t(std::countr_zero(bits)) - lo,
                c.form == ColumnForm::kBitmap ? c.values[k++] : c.uniform);
          at[v] = k;
          break;
        }
        case ColumnForm::kDense:
          for (uint64_t row = lo; row < hi; ++row)
            if (ColumnView::dense_entry(c.values[row])) f(v, row - lo, c.values[row]);
          break;
      }
    }
  }
};

inline uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30, x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27, x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The key of a row in the walk: its code (old merged row, or for a row no
// old column touched old_groups + label + 1) and its new entries, held as
// `bits`: the entries' mask (MaskKeys: the key is exact) or their hash
// (ListKeys: equal bits are confirmed on the entries). index_hash places a
// key in a table and in a numbering shard.
inline uint64_t index_hash(uint64_t bits, uint32_t code, bool exact) {
  return exact ? mix64(bits ^ mix64(code)) : bits;
}

// An open-addressing table of merged rows, at most half full; a slot holds
// a key's bits, its code and the merged row + 1.
template <bool kExact>
class MergeTable {
 public:
  static constexpr uint32_t kMissing = NewtonRows::kUntouched;
  uint64_t bytes() const { return slots_.capacity() * sizeof(Slot); }
  void prefetch(uint64_t hash) const { __builtin_prefetch(&slots_[hash & (slots_.size() - 1)]); }
  // The merged row of the key (hash = index_hash(bits, code)); `same(id)`
  // confirms inexact keys.
  template <class Same>
  uint32_t find(uint64_t hash, uint64_t bits, uint32_t code, const Same& same) const {
    for (uint64_t s = hash & (slots_.size() - 1);; s = (s + 1) & (slots_.size() - 1)) {
      const Slot& slot = slots_[s];
      if (slot.id1 == 0) return kMissing;
      if (slot.bits == bits && slot.code == code && (kExact || same(slot.id1 - 1))) return slot.id1 - 1;
    }
  }
  // Room for `entries` keys without growing (slots stay where they are).
  void reserve(uint64_t entries) {
    uint64_t size = slots_.size();
    while (2 * entries > size) size *= 2;
    if (size != slots_.size()) grow(size);
  }
  // Inserts a key; returns its slot.
  uint64_t insert(uint64_t hash, uint64_t bits, uint32_t code, uint32_t id) {
    reserve(used_ + 1);
    ++used_;
    return place(hash, {bits, code, id + 1});
  }
  void set_id(uint64_t slot, uint32_t id) { slots_[slot].id1 = id + 1; }
  uint64_t size() const { return used_; }

 private:
  struct Slot {
    uint64_t bits = 0;
    uint32_t code = 0, id1 = 0;
  };
  void grow(uint64_t size) {
    std::vector<Slot> old(size);
    old.swap(slots_);
    for (const Slot& s : old)
      if (s.id1 != 0) place(index_hash(s.bits, s.code, kExact), s);
  }
  uint64_t place(uint64_t hash, const Slot& s) {
    for (uint64_t at = hash & (slots_.size() - 1);; at = (at + 1) & (slots_.size() - 1))
      if (slots_[at].id1 == 0) {
        slots_[at] = s;
        return at;
      }
  }
  std::vector<Slot> slots_ = std::vector<Slot>(16);  // small: a walk holds a table per shard and per range in flight
  uint64_t used_ = 0;
};

// The new entries of merged rows as bit masks of the new columns (exact when
// every new column has one value and there are at most 64).
struct MaskKeys {
  static constexpr bool kExact = true;
  std::vector<uint64_t> mask;
  void reserve(uint64_t count) { mask.reserve(count); }
  bool empty(uint32_t g) const { return mask[g] == 0; }
  bool same(uint32_t g, const MaskKeys& other, uint32_t l) const { return mask[g] == other.mask[l]; }
  void append(const MaskKeys& other, uint32_t l) { mask.push_back(other.mask[l]); }
  uint64_t entries(uint32_t g) const { return uint64_t(std::popcount(mask[g])); }
  // Merged row g's new entries, in column order.
  void write(uint32_t g, const NewColumns& cols, uint16_t* column, float* value) const {
    for (uint64_t bits = mask[g]; bits != 0; bits &= bits - 1) {
      const size_t v = size_t(std::countr_zero(bits));
      *column++ = uint16_t(cols.first + v);
      if (value) *value++ = cols.uniform[v];
    }
  }
  uint64_t bytes() const { return mask.capacity() * sizeof(uint64_t); }
};

// The new entries of merged rows as lists of (column, value).
struct ListKeys {
  static constexpr bool kExact = false;
  std::vector<uint64_t> begin{0};
  std::vector<uint16_t> column;
  std::vector<float> value;  // empty when every value is 1
  void reserve(uint64_t count) { begin.reserve(count + 1); }
  bool empty(uint32_t g) const { return begin[g + 1] == begin[g]; }
  bool same(uint32_t g, const ListKeys& other, uint32_t l) const {
    return same(g, other.column.data() + other.begin[l],
                other.value.empty() ? nullptr : other.value.data() + other.begin[l], other.begin[l + 1] - other.begin[l]);
  }
  bool same(uint32_t g, const uint16_t* c, const float* v, uint64_t k) const {
    if (begin[g + 1] - begin[g] != k) return false;
    const auto at = std::ptrdiff_t(begin[g]);
    return std::equal(c, c + k, column.begin() + at) && (!v || std::equal(v, v + k, value.begin() + at));
  }
  void push(const uint16_t* c, const float* v, uint64_t k) {
    column.insert(column.end(), c, c + k);
    if (v) value.insert(value.end(), v, v + k);
    begin.push_back(column.size());
  }
  void append(const ListKeys& other, uint32_t l) {
    const uint64_t at = other.begin[l], k = other.begin[l + 1] - at;
    push(other.column.data() + at, other.value.empty() ? nullptr : other.value.data() + at, k);
  }
  uint64_t entries(uint32_t g) const { return begin[g + 1] - begin[g]; }
  void write(uint32_t g, const NewColumns&, uint16_t* c, float* v) const {
    const auto b = std::ptrdiff_t(begin[g]), e = std::ptrdiff_t(begin[g + 1]);
    std::copy(column.begin() + b, column.begin() + e, c);
    if (v && !value.empty()) std::copy(value.begin() + b, value.begin() + e, v);
    else if (v) std::fill(v, v + (e - b), 1.0f);
  }
  uint64_t bytes() const {
    return begin.capacity() * sizeof(uint64_t) + column.capacity() * sizeof(uint16_t) +
           value.capacity() * sizeof(float);
  }
};

// One block's new entries as masks (MaskBlock) or lists (ListBlock): turns
// the block around (fill), tells whether row r has new entries (fresh),
// gives their key bits (bits), compares them with merged row g's (same) and
// appends them as a merged row's (keep).
struct MaskBlock {
  using Keys = MaskKeys;
  explicit MaskBlock(const NewColumns& c) : cols(c) {}
  const NewColumns& cols;
  std::vector<uint64_t> mask = std::vector<uint64_t>(kWalkBlock);
  void fill(uint64_t lo, uint64_t hi, std::vector<uint64_t>& at) {
    std::fill(mask.begin(), mask.end(), 0);
    cols.for_entries(lo, hi, at, [&](size_t v, uint64_t r, float) { mask[r] |= uint64_t(1) << v; });
  }
  bool fresh(uint64_t r) const { return mask[r] != 0; }
  uint64_t bits(uint64_t r, uint32_t) const { return mask[r]; }
  bool same(const MaskKeys& keys, uint32_t g, uint64_t r) const { return keys.mask[g] == mask[r]; }
  void keep(MaskKeys& keys, uint64_t r) const { keys.mask.push_back(mask[r]); }
};

struct ListBlock {
  using Keys = ListKeys;
  explicit ListBlock(const NewColumns& c) : cols(c) {}
  const NewColumns& cols;
  std::vector<uint32_t> start = std::vector<uint32_t>(kWalkBlock + 1), next;
  std::vector<uint16_t> column;
  std::vector<float> value;
  void fill(uint64_t lo, uint64_t hi, std::vector<uint64_t>& at) {
    std::fill(start.begin(), start.end(), 0);
    std::vector<uint64_t> counting = at;  // the value cursors move in the second sweep only
    cols.for_entries(lo, hi, counting, [&](size_t, uint64_t r, float) { ++start[r + 1]; });
    for (uint64_t r = 0; r < kWalkBlock; ++r) start[r + 1] += start[r];
    column.resize(start[kWalkBlock]);
    value.resize(cols.binary ? 0 : start[kWalkBlock]);
    next.assign(start.begin(), start.end() - 1);
    cols.for_entries(lo, hi, at, [&](size_t v, uint64_t r, float x) {
      const uint32_t e = next[r]++;
      column[e] = uint16_t(cols.first + v);
      if (!cols.binary) value[e] = x;
    });
  }
  bool fresh(uint64_t r) const { return start[r + 1] > start[r]; }
  uint64_t bits(uint64_t r, uint32_t code) const {  // the entries' hash
    const uint64_t k = start[r + 1] - start[r];
    uint64_t h = xxh64(column.data() + start[r], k * sizeof(uint16_t), code);
    return cols.binary ? h : xxh64(value.data() + start[r], k * sizeof(float), h);
  }
  const float* values(uint64_t r) const { return cols.binary ? nullptr : value.data() + start[r]; }
  bool same(const ListKeys& keys, uint32_t g, uint64_t r) const {
    return keys.same(g, column.data() + start[r], values(r), start[r + 1] - start[r]);
  }
  void keep(ListKeys& keys, uint64_t r) const { keys.push(column.data() + start[r], values(r), start[r + 1] - start[r]); }
};

constexpr size_t kNumberShards = 16;  // keys are numbered in shards by their index hash's top bits
inline size_t shard_of(uint64_t hash) { return size_t(hash >> 60); }

// Merged rows found by a walk, numbered by first occurrence in row order,
// with their code, first row, copies and key bits.
template <class Keys>
struct Walked {
  std::vector<uint32_t> code, first_row, weight;
  std::vector<uint64_t> bits;
  Keys keys;
  uint64_t touched = 0, newly_positive = 0, newly_negative = 0;
  void reserve(uint64_t count) {
    code.reserve(count), first_row.reserve(count), weight.reserve(count), bits.reserve(count);
    keys.reserve(count);
  }
  uint32_t add(uint32_t c, uint32_t row, uint64_t b) {
    code.push_back(c), first_row.push_back(row), weight.push_back(0), bits.push_back(b);
    return uint32_t(code.size() - 1);
  }
  uint64_t hash(uint32_t g) const { return index_hash(bits[g], code[g], Keys::kExact); }
  uint64_t bytes() const {
    return (code.capacity() + first_row.capacity() + weight.capacity()) * sizeof(uint32_t) +
           bits.capacity() * sizeof(uint64_t) + keys.bytes();
  }
};

// One range of rows walked on its own: its merged rows numbered by first
// occurrence in the range (group[i] of its rows set to them), listed by
// numbering shard, and their numbers in the whole walk.
template <class Block>
struct RangeWalk {
  Walked<typename Block::Keys> rows;
  std::vector<uint32_t> by_shard;  // the range's merged rows, shard by shard, in order within a shard
  std::array<uint32_t, kNumberShards + 1> shard_begin{};
  std::vector<uint32_t> to_global;  // range merged row → merged row of the whole walk
  uint64_t table_bytes = 0;         // the range's table and keys while it was walked
  uint64_t bytes() const {
    return rows.bytes() + (by_shard.capacity() + to_global.capacity()) * sizeof(uint32_t) + table_bytes;
  }
};

template <class Block>
void walk_range(const NewColumns& cols, uint64_t range, uint64_t n, uint64_t old_groups, const int8_t* labels,
                HugeVector<uint32_t>& group, RangeWalk<Block>& out) {
  using Keys = typename Block::Keys;
  constexpr uint32_t kNone = NewtonRows::kUntouched;
  constexpr uint64_t kAhead = 8;
  struct RowKey {
    uint32_t code;
    bool skip;  // no entry, old or new
    uint64_t bits, hash;
  };
  Block block(cols);
  std::vector<uint64_t> at = cols.cursors(range);
  Walked<Keys>& w = out.rows;
  const uint64_t lo_range = range * cols.range_rows, hi_range = std::min(n, lo_range + cols.range_rows);
  std::vector<RowKey> keys(std::min(kWalkBlock, hi_range - lo_range));
  MergeTable<Keys::kExact> table;
  // Twice the old merged rows per range (they split as columns are added):
  // a table and lists that mostly need not regrow (rehash, copy, zero fresh
  // slots) while the range is walked.
  const uint64_t expected =
      std::min<uint64_t>(hi_range - lo_range, 2 * old_groups * (hi_range - lo_range) / std::max<uint64_t>(1, n));
  table.reserve(expected);
  w.reserve(expected);
  for (uint64_t lo = lo_range; lo < hi_range; lo += kWalkBlock) {
    const uint64_t hi = std::min(hi_range, lo + kWalkBlock);
    block.fill(lo, hi, at);
    for (uint64_t i = lo; i < hi; ++i) {
      RowKey& k = keys[i - lo];
      const bool fresh = block.fresh(i - lo);
      k.code = group[i];
      k.skip = k.code == kNone && !fresh;
      if (k.skip) continue;
      if (k.code == kNone) k.code = uint32_t(old_groups + uint64_t(labels[i] + 1));
      k.bits = block.bits(i - lo, k.code);
      k.hash = index_hash(k.bits, k.code, Keys::kExact);
    }
    for (uint64_t i = lo; i < hi; ++i) {
      const uint64_t r = i - lo;
      if (r + kAhead < hi - lo && !keys[r + kAhead].skip) table.prefetch(keys[r + kAhead].hash);
      const RowKey& k = keys[r];
      if (k.skip) continue;
      ++w.touched;
      if (group[i] == kNone) w.newly_positive += labels[i] > 0, w.newly_negative += labels[i] < 0;
      uint32_t id = table.find(k.hash, k.bits, k.code, [&](uint32_t g) { return block.same(w.keys, g, r); });
      if (id == kNone) {
        id = w.add(k.code, uint32_t(i), k.bits);
        block.keep(w.keys, r);
        table.insert(k.hash, k.bits, k.code, id);
      }
      group[i] = id;
    }
  }
  // The copies, counted in a loop of their own: its independent increments
  // overlap their cache misses, which the lookups' branches above would not.
  uint32_t* weight = w.weight.data();
  for (uint64_t i = lo_range; i < hi_range; ++i)
    if (const uint32_t g = group[i]; g != kNone) ++weight[g];
  out.table_bytes = table.bytes() + keys.capacity() * sizeof(RowKey);
  const auto count = uint32_t(w.code.size());
  std::vector<uint8_t> shard(count);
  for (uint32_t l = 0; l < count; ++l) {
    shard[l] = uint8_t(shard_of(w.hash(l)));
    ++out.shard_begin[shard[l] + 1];
  }
  for (size_t s = 0; s < kNumberShards; ++s) out.shard_begin[s + 1] += out.shard_begin[s];
  std::array<uint32_t, kNumberShards> next;
  std::copy(out.shard_begin.begin(), out.shard_begin.end() - 1, next.begin());
  out.by_shard.resize(count);
  for (uint32_t l = 0; l < count; ++l) out.by_shard[next[shard[l]]++] = l;
}

// The merged rows of the whole walk, numbered as the ranges' merged rows are
// met range by range, each range's in its own order: the order of first
// occurrence in the rows. A range is numbered in three steps: each shard of
// keys looks its rows up (rows without new entries by old merged row in
// `by_old`, the others in the shard's table) in parallel; one ordered sweep
// numbers the keys no earlier range had; the shards record those numbers
// and add the copies.
template <class Keys>
struct WholeWalk {
  static constexpr uint32_t kNone = NewtonRows::kUntouched;
  static constexpr uint32_t kNew = kNone - 1;  // a key first met in the range being numbered
  struct Shard {
    MergeTable<Keys::kExact> table;
    std::vector<std::pair<uint64_t, uint32_t>> fresh;  // (table slot, or old merged row for by_old; range row)
  };
  Walked<Keys> rows;
  std::array<Shard, kNumberShards> shards;
  std::vector<uint32_t> by_old;
  // Every old merged row is the code of at least one merged row of the walk:
  // tables with room for that many from the start do not regrow (rehash,
  // fault in fresh slots) through the old count. (Their sizes stay powers of
  // two; the lists are not reserved: a capacity of the old count would double
  // past the new count to twice the lists' natural size.)
  explicit WholeWalk(uint64_t old_groups) : by_old(old_groups, kNone) {
    for (Shard& s : shards) s.table.reserve(old_groups / kNumberShards);
  }
  uint64_t bytes() const {
    uint64_t b = rows.bytes() + by_old.capacity() * sizeof(uint32_t);
    for (const Shard& s : shards) b += s.table.bytes() + s.fresh.capacity() * sizeof(s.fresh[0]);
    return b;
  }

  void look_up(const Walked<Keys>& range, const uint32_t* list, uint32_t count, Shard& shard,
               std::vector<uint32_t>& to_global) {
    constexpr uint32_t kAhead = 8;
    shard.fresh.clear();
    shard.table.reserve(shard.table.size() + count);  // no slot moves while this range's slots are recorded
    for (uint32_t k = 0; k < count; ++k) {
      if (k + kAhead < count) {
        const uint32_t ahead = list[k + kAhead];
        if (range.keys.empty(ahead)) __builtin_prefetch(&by_old[range.code[ahead]]);
        else shard.table.prefetch(range.hash(ahead));
      }
      const uint32_t l = list[k], c = range.code[l];
      if (range.keys.empty(l)) {  // no new entry: c is an old merged row
        if (by_old[c] == kNone) {
          by_old[c] = kNew;
          shard.fresh.push_back({c, l});
          to_global[l] = kNew;
        } else {
          to_global[l] = by_old[c];
        }
        continue;
      }
      const uint32_t id = shard.table.find(range.hash(l), range.bits[l], c, [&](uint32_t g) {
        return g >= rows.code.size() ? range.keys.same(g - uint32_t(rows.code.size()), range.keys, l)
                                     : rows.keys.same(g, range.keys, l);
      });
      if (id == kNone) {
        // Numbered later; until then the slot names the range row (after the rows numbered so far).
        const uint64_t slot = shard.table.insert(range.hash(l), range.bits[l], c, uint32_t(rows.code.size()) + l);
        shard.fresh.push_back({slot, l});
        to_global[l] = kNew;
      } else {
        to_global[l] = id;
      }
    }
  }

  template <class Block>
  void number(RangeWalk<Block>& range, Tasks& tasks) {
    const Walked<Keys>& walked = range.rows;
    const auto count = uint32_t(walked.code.size());
    range.to_global.assign(count, kNone);
    tasks.run(kNumberShards, [&](size_t s) {
      look_up(walked, range.by_shard.data() + range.shard_begin[s], range.shard_begin[s + 1] - range.shard_begin[s],
              shards[s], range.to_global);
    });
    for (uint32_t l = 0; l < count; ++l) {
      if (range.to_global[l] != kNew) continue;
      range.to_global[l] = rows.add(walked.code[l], walked.first_row[l], walked.bits[l]);
      rows.keys.append(walked.keys, l);
    }
    tasks.run(kNumberShards, [&](size_t s) {
      Shard& shard = shards[s];
      for (const auto& [where, l] : shard.fresh) {
        if (walked.keys.empty(l)) by_old[where] = range.to_global[l];
        else shard.table.set_id(where, range.to_global[l]);
      }
      for (uint32_t k = range.shard_begin[s]; k < range.shard_begin[s + 1]; ++k) {
        const uint32_t l = range.by_shard[k];
        rows.weight[range.to_global[l]] += walked.weight[l];
      }
    });
    rows.touched += walked.touched;
    rows.newly_positive += walked.newly_positive;
    rows.newly_negative += walked.newly_negative;
  }
};

// The walk over the rows: fixed ranges of `range_rows` rows, each walked by
// one task (its merged rows numbered within the range), then numbered for the
// whole walk range by range in row order, and its rows' group rewritten to
// those numbers. Rows with no entry stay kUntouched. Every range's order is
// that of first occurrence, so the numbering is the one a single walk over
// all rows gives, whatever the ranges and threads. `scratch` holds the
// walk's memory.
template <class Block>
WholeWalk<typename Block::Keys> walk_rows(NewtonRows& kept, const int8_t* labels, const NewColumns& cols, Tasks& tasks,
                                          Reservation& scratch) {
  const uint64_t n = kept.n, old_groups = kept.rows();
  const uint64_t ranges = (n + cols.range_rows - 1) / cols.range_rows;
  WholeWalk<typename Block::Keys> whole(old_groups);
  scratch.resize(whole.bytes());
  HugeVector<uint32_t>& group = kept.group;  // rewritten in place, range by range
  std::vector<std::unique_ptr<RangeWalk<Block>>> held(ranges);
  const uint64_t in_flight = std::min<uint64_t>(kWalkRangesInFlight, ranges);
  uint64_t largest_range = 0;
  tasks.pipeline(
      ranges, kWalkRangesInFlight,
      [&](size_t r) {
        held[r] = std::make_unique<RangeWalk<Block>>();
        walk_range(cols, r, n, old_groups, labels, group, *held[r]);
      },
      [&](size_t r) {
        whole.number(*held[r], tasks);
        largest_range = std::max(largest_range, held[r]->bytes());
        scratch.resize(whole.bytes() + in_flight * largest_range);
      },
      [&](size_t r) {
        const std::vector<uint32_t>& to_global = held[r]->to_global;
        const uint64_t lo = r * cols.range_rows, hi = std::min(n, lo + cols.range_rows);
        for (uint64_t i = lo; i < hi; ++i)
          if (group[i] != NewtonRows::kUntouched) group[i] = to_global[group[i]];
        held[r].reset();
      });
  return whole;
}

// Extends `kept`, the merged rows of the cache's first `first` columns (all
// rows untouched and no merged row: `first` = 0), by columns [first, last)
// into `out`. Two rows share a merged row exactly when they shared one
// before and their new entries are equal, so the merged rows are those of
// the rows turned around whole, numbered by first occurrence in row order:
// the same bits whether a run extends its rows solve by solve or builds them
// at once, and whatever `range_rows` and the threads. False when merging
// would not remove kMergeGain of the rows (kept is then spent).
template <class Block>
bool extend_with(NewtonRows& kept, const NewColumns& cols, const int8_t* labels, Tasks& tasks, MemoryBudget& budget,
                 NewtonRows& out) {
  const uint64_t old_groups = kept.rows();
  Reservation scratch = budget.reserve(old_groups * sizeof(uint32_t), "Newton row merging", kRemedy);
  WholeWalk<typename Block::Keys> whole = walk_rows<Block>(kept, labels, cols, tasks, scratch);
  const Walked<typename Block::Keys>& walk = whole.rows;
  whole.shards = {};
  whole.by_old = {};
  if (double(walk.code.size()) > (1.0 - kMergeGain) * double(walk.touched)) return false;
  // The merged rows: the old merged row's entries, then the new ones.
  const uint64_t merged = walk.code.size();
  const bool binary = cols.binary;
  out.n = kept.n;
  out.touched = walk.touched;
  out.positive_untouched = kept.positive_untouched - walk.newly_positive;
  out.negative_untouched = kept.negative_untouched - walk.newly_negative;
  // The loops below read raw arrays and local bounds: through the vectors and
  // captured references, their stores (uint64_t starts, int8_t labels) made
  // the compiler reload every data pointer and recompute a part's end (a
  // 64-bit division) row by row.
  struct Sources {
    const uint32_t* code;
    const uint32_t* first_row;
    const uint64_t* old_begin;
    const uint16_t* old_column;
    const float* old_value;  // null when every old value is 1
    uint64_t merged, old_groups;
    // The old merged rows are met in no particular order: their starts and
    // entries are fetched ahead (cache misses, not arithmetic, bound these loops).
    void prefetch_start(uint64_t g) const {
      if (g < merged && code[g] < old_groups) __builtin_prefetch(&old_begin[code[g]]);
    }
    void prefetch_entries(uint64_t g) const {
      if (g < merged && code[g] < old_groups) __builtin_prefetch(&old_column[old_begin[code[g]]]);
    }
  };
  const Sources from{walk.code.data(), walk.first_row.data(), kept.begin.data(), kept.column.data(),
                     kept.value.empty() ? nullptr : kept.value.data(), merged, old_groups};
  constexpr uint64_t kAhead = 16;
  const Ranges parts = ranges_for(merged, 0);
  const uint64_t row_bytes = merged * (sizeof(uint64_t) + 2 * sizeof(uint32_t) + 1);
  out.merge_reservation = budget.reserve(row_bytes, "Newton merged rows", kRemedy);
  out.begin.resize(merged + 1);
  // Each row's entry count (into begin, in parallel: the old rows' starts are
  // the cache misses), the parts' offsets, then each part's row starts.
  std::vector<uint64_t> part_at(parts.count + 1, 0);
  tasks.run(parts.count, [&](size_t p) {
    const Sources f = from;
    uint64_t* starts = out.begin.data();
    uint64_t sum = 0;
    for (uint64_t g = parts.begin(p), last = parts.end(p); g < last; ++g) {
      f.prefetch_start(g + kAhead);
      const uint32_t c = f.code[g];
      const uint64_t count =
          walk.keys.entries(uint32_t(g)) + (c < f.old_groups ? f.old_begin[c + 1] - f.old_begin[c] : 0);
      starts[g] = count;
      sum += count;
    }
    part_at[p + 1] = sum;
  });
  for (size_t p = 0; p < parts.count; ++p) part_at[p + 1] += part_at[p];
  const uint64_t nnz = part_at[parts.count];
  tasks.run(parts.count, [&](size_t p) {
    uint64_t* starts = out.begin.data();
    uint64_t at = part_at[p];
    for (uint64_t g = parts.begin(p), last = parts.end(p); g < last; ++g) {
      const uint64_t count = starts[g];
      starts[g] = at;
      at += count;
    }
  });
  out.begin[merged] = nnz;
  out.merge_reservation.resize(row_bytes + nnz * (sizeof(uint16_t) + (binary ? 0 : sizeof(float))));
  out.row.assign(walk.first_row.begin(), walk.first_row.end());
  out.y.resize(merged);
  out.column.resize(nnz);
  if (!binary) out.value.resize(nnz);
  tasks.run(parts.count, [&](size_t p) {
    const Sources f = from;
    const uint64_t* starts = out.begin.data();
    int8_t* y = out.y.data();
    uint16_t* column = out.column.data();
    float* value = binary ? nullptr : out.value.data();
    for (uint64_t g = parts.begin(p), last = parts.end(p); g < last; ++g) {
      f.prefetch_start(g + 2 * kAhead);
      f.prefetch_entries(g + kAhead);
      y[g] = labels[f.first_row[g]];
      uint64_t at = starts[g];
      if (const uint32_t c = f.code[g]; c < f.old_groups) {
        for (uint64_t e = f.old_begin[c], stop = f.old_begin[c + 1]; e < stop; ++e, ++at) {
          column[at] = f.old_column[e];
          if (value) value[at] = f.old_value ? f.old_value[e] : 1.0f;
        }
      }
      walk.keys.write(uint32_t(g), cols, column + at, value ? value + at : nullptr);
    }
  });
  out.weight.assign(walk.weight.begin(), walk.weight.end());
  out.group = std::move(kept.group);
  out.group_reservation = std::move(kept.group_reservation);
  return true;
}

bool extend_merged_rows(NewtonRows& kept, const SelectedFeatureCache& cache, size_t first, size_t last,
                        const int8_t* labels, Tasks& tasks, MemoryBudget& budget, NewtonRows& out,
                        uint64_t range_rows) {
  const NewColumns cols(cache, first, last, kept.binary(), range_rows);
  return cols.maskable ? extend_with<MaskBlock>(kept, cols, labels, tasks, budget, out)
                       : extend_with<ListBlock>(kept, cols, labels, tasks, budget, out);
}

// Columns with at most one entry per kFewEntriesPerRow rows in all are
// turned around by sorting their entries (turn_around_few) rather than by
// passes over every row.
constexpr uint64_t kFewEntriesPerRow = 16;

// turn_around's rows of all the cache's columns, built in O(nnz log nnz) and
// one pass over the labels (their class counts) instead of several over every
// row: the same rows, entries and values, for columns with few entries.
void turn_around_few(const SelectedFeatureCache& cache, const int8_t* labels, MemoryBudget& budget, NewtonRows& out) {
  const uint64_t n = cache.n_rows();
  const size_t cols = cache.num_columns();
  FGM_ASSERT(cols <= kProxNewtonMaxColumns && n <= std::numeric_limits<uint32_t>::max());
  struct Entry {
    uint64_t key;  // row · 2^16 + column: unique, so the sort's order is
    float value;
  };
  const uint64_t nnz = cache.total_nnz();
  Reservation entries_memory = budget.reserve(nnz * sizeof(Entry), "Newton row entries", kRemedy);
  std::vector<Entry> entries;
  entries.reserve(nnz);
  bool binary = true;
  for (size_t j = 0; j < cols; ++j)
    cache.column(j).for_each([&](uint32_t row, float v) {
      entries.push_back({uint64_t(row) << 16 | j, v});
      binary = binary && v == 1.0f;
    });
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.key < b.key; });
  uint64_t touched = 0;
  for (uint64_t e = 0; e < entries.size(); ++e) touched += e == 0 || entries[e].key >> 16 != entries[e - 1].key >> 16;
  out.n = n;
  out.size_plain_rows(touched, nnz, binary, budget);
  uint64_t c = 0;
  for (uint64_t e = 0; e < entries.size(); ++e) {
    const auto row = uint32_t(entries[e].key >> 16);
    if (e == 0 || row != out.row[c - 1]) {
      out.row[c] = row;
      out.y[c] = labels[row];
      out.begin[c++] = e;
    }
    out.column[e] = uint16_t(entries[e].key & 0xffff);
    if (!binary) out.value[e] = entries[e].value;
  }
  out.begin[touched] = nnz;
  uint64_t positive = 0, negative = 0;
  for (uint64_t i = 0; i < n; ++i) positive += labels[i] > 0, negative += labels[i] < 0;
  for (uint64_t k = 0; k < touched; ++k) positive -= out.y[k] > 0, negative -= out.y[k] < 0;
  out.positive_untouched = positive;
  out.negative_untouched = negative;
}

// Whether merging the rows of `plain` (turned around whole) would remove
// kMergeGain of them, as extend_with decides it: rows are one merged row when
// their labels, columns and values (bits and ==) are equal.
bool merging_pays(const NewtonRows& plain) {
  const uint64_t rows = plain.rows();
  auto hash = [&](uint64_t c) {
    const uint64_t b = plain.begin[c], k = plain.begin[c + 1] - b;
    uint64_t h = xxh64(plain.column.data() + b, k * sizeof(uint16_t), uint64_t(plain.y[c] + 1));
    return plain.binary() ? h : xxh64(plain.value.data() + b, k * sizeof(float), h);
  };
  auto same = [&](uint64_t c, uint64_t d) {
    const uint64_t bc = plain.begin[c], kc = plain.begin[c + 1] - bc, bd = plain.begin[d];
    if (plain.y[c] != plain.y[d] || plain.begin[d + 1] - bd != kc) return false;
    if (!std::equal(&plain.column[bc], &plain.column[bc] + kc, &plain.column[bd])) return false;
    if (plain.binary()) return true;
    return std::equal(&plain.value[bc], &plain.value[bc] + kc, &plain.value[bd]) &&
           std::memcmp(&plain.value[bc], &plain.value[bd], kc * sizeof(float)) == 0;
  };
  uint64_t size = 16;
  while (size < 2 * rows) size *= 2;
  std::vector<uint64_t> slot(size, 0);  // compact row + 1; 0: empty
  uint64_t distinct = 0;
  for (uint64_t c = 0; c < rows; ++c)
    for (uint64_t s = hash(c) & (size - 1);; s = (s + 1) & (size - 1)) {
      if (slot[s] == 0) {
        slot[s] = c + 1, ++distinct;
        break;
      }
      if (same(slot[s] - 1, c)) break;
    }
  return !(double(distinct) > (1.0 - kMergeGain) * double(rows));
}

// The part's selected columns as rows: merged when that pays, else plain.
void build_rows(const SelectedFeatureCache& cache, const int8_t* labels, Tasks& tasks, MemoryBudget& budget,
                NewtonRows& out, uint64_t range_rows) {
  const uint64_t n = cache.n_rows();
  if (cache.total_nnz() <= n / kFewEntriesPerRow) {
    turn_around_few(cache, labels, budget, out);
    if (!merging_pays(out)) return;
    out = {};
  }
  NewtonRows none;  // no column yet: every row untouched
  none.n = n;
  none.group_reservation = budget.reserve(n * sizeof(uint32_t), "Newton merged row of every row", kRemedy);
  none.group.assign(n, NewtonRows::kUntouched);
  for (uint64_t i = 0; i < n; ++i) (labels[i] > 0 ? none.positive_untouched : none.negative_untouched) += labels[i] != 0;
  if (extend_merged_rows(none, cache, 0, cache.num_columns(), labels, tasks, budget, out, range_rows)) return;
  out = {};
  none = {};
  turn_around(cache, 0, labels, tasks, budget, out);
}

}  // namespace

// The merged rows of each part's last solve and what they were built from.
struct SubproblemMemo {
  struct Part {
    const SelectedFeatureCache* cache = nullptr;
    const int8_t* labels = nullptr;
    uint64_t labels_hash = 0;
    std::vector<FeatureKey> keys;  // the cache columns the rows cover, in order
    NewtonRows rows;               // merged (build_rows merged them)
  };
  std::vector<Part> parts;
};

namespace {

uint64_t labels_hash(const ApgRowPart& spec) { return xxh64(spec.labels, spec.cache->n_rows(), 0); }

// How many of the part's cache columns the kept rows cover (0: none usable:
// another cache or labels, or columns no longer the cache's first ones).
size_t kept_columns(const SubproblemMemo::Part& kept, const ApgRowPart& spec) {
  const SelectedFeatureCache& cache = *spec.cache;
  if (kept.cache != spec.cache || kept.labels != spec.labels || kept.keys.empty() || !kept.rows.merged() ||
      kept.rows.n != cache.n_rows() || kept.keys.size() > cache.num_columns())
    return 0;
  for (size_t j = 0; j < kept.keys.size(); ++j)
    if (!(cache.key(j) == kept.keys[j])) return 0;
  return kept.labels_hash == labels_hash(spec) ? kept.keys.size() : 0;
}

// The part's rows: the kept rows as they are, extended by the new columns,
// or built afresh. True when the kept rows were used.
bool rows_for_part(const ApgRowPart& spec, SubproblemMemo::Part& kept, Tasks& tasks, MemoryBudget& budget,
                   NewtonRows& out) {
  const size_t first = kept_columns(kept, spec);
  if (first > 0 && first == spec.cache->num_columns()) {
    out = std::move(kept.rows);
    kept = {};
    return true;
  }
  if (first > 0) {
    const bool extended = extend_merged_rows(kept.rows, *spec.cache, first, spec.cache->num_columns(), spec.labels,
                                             tasks, budget, out, kWalkRangeRows);
    kept = {};
    if (extended) return true;
    out = {};
  }
  kept = {};
  build_rows(*spec.cache, spec.labels, tasks, budget, out, kWalkRangeRows);
  return false;
}

// s·x_e for entry e: s itself when every value is 1 (s·1 is s, bit for bit),
// so the binary rows' loops carry no value load or multiply.
template <bool kBinary>
inline double entry_times(const NewtonRows& x, uint64_t e, double s) {
  if constexpr (kBinary) return s;
  else return s * double(x.value[e]);
}

// A part's rows as raw arrays, for the loops over rows: through the vectors,
// every store of such a loop to a uint8_t (which may alias anything) made the
// compiler reload each vector's data pointer, and recompute the range's end
// (a 64-bit division), row by row. The same arithmetic in the same order.
struct RowArrays {
  const uint64_t* begin;
  const uint16_t* column;
  const float* value;     // null when every value is 1
  const int8_t* y;
  const uint32_t* weight;  // null when not merged (one copy each)
  explicit RowArrays(const NewtonRows& x)
      : begin(x.begin.data()),
        column(x.column.data()),
        value(x.value.empty() ? nullptr : x.value.data()),
        y(x.y.data()),
        weight(x.weight.empty() ? nullptr : x.weight.data()) {}
  double copies(uint64_t c) const { return weight ? double(weight[c]) : 1.0; }
  template <bool kBinary>
  double times(uint64_t e, double s) const {  // entry_times
    if constexpr (kBinary) return s;
    else return s * double(value[e]);
  }
};

// f(std::true_type) when every value of `x` is 1, else f(std::false_type).
template <class F>
decltype(auto) with_binary(const NewtonRows& x, const F& f) {
  return x.binary() ? f(std::true_type{}) : f(std::false_type{});
}

// Index of (a, b), a ≤ b, in the packed upper triangle of a dim × dim matrix.
inline size_t packed(size_t a, size_t b, size_t dim) { return a * dim - a * (a + 1) / 2 + b; }

// The Newton model's dual variable of a row at margin m whose step moves the
// margin by yu (= y·u, u = X̃Δ): α linearised along the step,
// α − φ''(m)·yu (α = −φ'(m): Theorem 3's, the value at yu = 0), and φ''(m).
// Where the model's step is exact, these α make X'(α∘y) = −(g + HΔ), a
// subgradient of ½(Σ‖ω_h + Δ_h‖)²: the max over groups in D is then met
// without the first-order error of Theorem 3's α at an iterate.
template <class LossT>
struct ModelAlpha {
  double value, curvature;
  ModelAlpha(double C, double m, double yu) {
    const double alpha = -LossT::deriv(C, m);
    if constexpr (LossT::kNeedsSigmoid) {
      const double p = alpha / C;
      curvature = C * p * (1.0 - p);
    } else {
      curvature = m < 1.0 ? C : 0.0;
    }
    value = yu == 0 ? alpha : alpha - curvature * yu;
  }
  // The loss's dual domain: [0, ∞) squared hinge, [0, C] logistic.
  static double edge(double C, double a) {
    const double low = std::max(a, 0.0);
    return LossT::kNeedsSigmoid ? std::min(low, C) : low;
  }
  bool outside(double C) const { return edge(C, value) != value; }
};

// The correction of the model's dual point for the rows held at the domain's
// edge (model_dual_bound): δ over the selected columns, then δb.
struct ModelCorrection {
  std::vector<double> delta;
  double delta_b = 0;
  bool any() const { return !delta.empty(); }
};

// One dual point's sums over every row: X'r with r_i = −α_i y_i (copies
// counted), its positive rows' part, and per class Σα and Σα² (sc[1], sc[2];
// sc[3], sc[4]: positive, negative). `model`: α is the Newton model's dual
// point of the last step (model_dual_bound: the bias step `db`, the
// correction `correction`), else Theorem 3's α at d.
struct DualSums {
  const double* g;
  const double* g_pos;
  const double* sc;
  bool model = false;
  double db = 0;
  const ModelCorrection* correction = nullptr;
};

// x with A x = r for a symmetric positive semidefinite n × n A, by conjugate
// gradients from 0: at most 2n + 10 iterations, until the residual is 1e-12
// of r's (a singular A stops where the residual stops falling).
std::vector<double> conjugate_gradient(const std::vector<double>& A, const std::vector<double>& r, size_t n);

template <class LossT>
class ProxNewton {
 public:
  ProxNewton(const std::vector<ApgRowPart>& parts, RowSumReduction& reduce, const ApgOptions& options,
             SubproblemMemo& memo, MemoryBudget& budget)
      : opt_(options), tasks_(options.threads), reduce_(reduce), specs_(parts) {
    FGM_ASSERT(!parts.empty());
    const SelectedFeatureCache& cache = *parts[0].cache;
    cols_ = cache.num_columns();
    t_ = cache.num_batches();
    batch_begin_.resize(t_ + 1);
    for (size_t h = 0; h < t_; ++h) batch_begin_[h] = cache.batch_begin(h);
    batch_begin_[t_] = cols_;
    dim_ = cols_ + 1;  // the bias is the last coordinate
    tri_ = dim_ * (dim_ + 1) / 2;
    memo.parts.resize(parts.size());
    for (size_t k = 0; k < parts.size(); ++k) {
      const ApgRowPart& spec = parts[k];
      FGM_ASSERT(spec.cache->num_columns() == cols_ && spec.cache->num_batches() == t_);
      auto part = std::make_unique<Part>();
      parts_extended_ += rows_for_part(spec, memo.parts[k], tasks_, budget, part->data);
      const uint64_t rows = part->data.rows();
      part->ranges = ranges_for(rows, 2 * cols_ + tri_);
      part->vectors = budget.reserve(rows * (2 * sizeof(double) + 1) +
                                         part->ranges.count * (2 * cols_ + tri_ + 8) * sizeof(double),
                                     "Newton per-row vectors", kRemedy);
      part->d.resize(rows);
      part->u.resize(rows);
      part->active.assign(rows, 0);
      parts_.push_back(std::move(part));
    }
    model_ = budget.reserve((6 * dim_ * dim_ + 16 * dim_) * sizeof(double), "Newton model", kRemedy);
    H_.assign(tri_, 0.0);
  }

  ApgResult solve(ApgState& state);

  // Hands every part's merged rows to `memo` for the next solve to extend.
  void keep_rows(SubproblemMemo& memo) {
    for (size_t k = 0; k < parts_.size(); ++k) {
      SubproblemMemo::Part& kept = memo.parts[k];
      kept = {};
      if (!parts_[k]->data.merged()) continue;  // not merged: rebuilt each solve
      const ApgRowPart& spec = specs_[k];
      kept.cache = spec.cache;
      kept.labels = spec.labels;
      kept.labels_hash = labels_hash(spec);
      for (size_t j = 0; j < cols_; ++j) kept.keys.push_back(spec.cache->key(j));
      kept.rows = std::move(parts_[k]->data);
    }
  }

 private:
  struct Part {
    NewtonRows data;
    Ranges ranges;
    Reservation vectors;
    WrittenVector<double> d, u;  // decision values (formed by the first sweep); the step's X̃Δ
    std::vector<uint8_t> active;  // squared hinge: D_ii = C (1) or 0, as counted in H_
  };

  // Adds into `out` the sums a pass over q's fixed row ranges writes:
  // body(range, binary, partial) fills its range's vector (or leaves it
  // empty when it adds nothing), and the partials are added in range order,
  // so the bits do not depend on the thread count. `out` never holds −0
  // (it starts at +0), so skipping an empty partial changes no bit.
  template <class Body>
  void sum_ranges(const Part& q, std::vector<double>& out, const Body& body) {
    std::vector<std::vector<double>> partial(q.ranges.count);
    tasks_.run(q.ranges.count,
               [&](size_t rr) { with_binary(q.data, [&](auto binary) { body(rr, binary, partial[rr]); }); });
    for (const std::vector<double>& p : partial)
      for (size_t i = 0; i < p.size(); ++i) out[i] += p[i];
  }

  size_t begin(size_t h) const { return batch_begin_[h]; }
  size_t end(size_t h) const { return batch_begin_[h + 1]; }

  double regularizer(const std::vector<double>& w) const {
    double z = 0;
    for (size_t h = 0; h < t_; ++h) {
      double s = 0;
      for (size_t j = begin(h); j < end(h); ++j) s += w[j] * w[j];
      z += std::sqrt(s);
    }
    return 0.5 * z * z;
  }

  template <bool kBinary>
  double decision(const RowArrays& x, uint64_t c, const double* w, double b) const;
  void write_decisions(double b);
  void sweep(const std::vector<double>* form_d, bool hessian, bool full_hessian, double b, std::vector<double>& sums);
  double dual_bound(const DualSums& point, double b);
  double sweep_dual_bound(const std::vector<double>& sums, double b);
  double model_dual_bound(double b, double db, double hbb_untouched);
  template <bool kBinary>
  double model_row_alpha(const Part& q, uint64_t c, const ModelCorrection& correction) const;
  double untouched_model_alpha(double margin, double yu) const;
  ModelCorrection correct_clipped_rows(double b, double db, double hbb_untouched);
  void model_step(const std::vector<double>& w, const std::vector<double>& g, double gb, double hbb_untouched,
                  double accuracy, std::vector<double>& dw, double& db);
  void direction(const std::vector<double>& dw, double db);
  bool line_search(const std::vector<double>& w, const std::vector<double>& dw, double db, double b, double lambda,
                   double& step, double& F_change, ApgResult& res);

  ApgOptions opt_;
  Tasks tasks_;
  RowSumReduction& reduce_;
  const std::vector<ApgRowPart>& specs_;
  std::vector<std::unique_ptr<Part>> parts_;
  size_t cols_ = 0, t_ = 0, dim_ = 0, tri_ = 0;
  std::vector<size_t> batch_begin_;
  Reservation model_;
  std::vector<double> H_;  // packed upper triangle of Σ_i D_i x̃_i x̃_i' (squared hinge: without the factor C)
  int passes_ = 0;
  int parts_extended_ = 0;
};

// d_c = x_c'ω − b of compact row c, formed as the APG forms its decision
// values: per batch a sum in column order, batches added in order.
template <class LossT>
template <bool kBinary>
double ProxNewton<LossT>::decision(const RowArrays& x, uint64_t c, const double* w, double b) const {
  double total = 0;
  uint64_t e = x.begin[c];
  const uint64_t stop = x.begin[c + 1];
  if constexpr (kBinary) {
    // The same bits without the zero tests: the sums start at +0 and never
    // reach −0 (a sum is −0 only for −0 + −0), so adding a zero weight (±0)
    // or an all-zero batch's +0 leaves them as they are. (A zero test per
    // entry was a seventh of a sweep that forms d: mispredicted on the new
    // columns' zero weights.)
    for (size_t h = 0; h < t_ && e < stop; ++h) {
      const size_t batch_end = end(h);
      double batch = 0;
      for (; e < stop && x.column[e] < batch_end; ++e) batch += w[x.column[e]];
      total += batch;
    }
    return total - b;
  }
  for (size_t h = 0; h < t_ && e < stop; ++h) {
    double batch = 0;
    bool any = false;
    for (; e < stop && x.column[e] < end(h); ++e) {
      const double wj = w[x.column[e]];
      if (wj == 0) continue;
      batch += x.times<kBinary>(e, wj);
      any = true;
    }
    if (any) total += batch;
  }
  return total - b;
}

// Every row's decision value, in one parallel pass over the rows (an
// untouched row's is 0 − b).
template <class LossT>
void ProxNewton<LossT>::write_decisions(double b) {
  const double untouched = 0.0 - b;
  for (size_t k = 0; k < parts_.size(); ++k) {
    const Part& q = *parts_[k];
    std::vector<double>& out = *specs_[k].decision;
    out.resize(q.data.n);
    const Ranges chunks = ranges_for(q.data.n, 0);  // every row is written by one chunk
    if (!q.data.merged()) {
      // The touched rows of a chunk: compact rows [first, last) (rows increase).
      tasks_.run(chunks.count, [&](size_t r) {
        const uint64_t lo = chunks.begin(r), hi = chunks.end(r);
        std::fill(out.begin() + std::ptrdiff_t(lo), out.begin() + std::ptrdiff_t(hi), untouched);
        const auto first = std::lower_bound(q.data.row.begin(), q.data.row.end(), lo);
        for (auto c = first; c != q.data.row.end() && *c < hi; ++c) out[*c] = q.d[uint64_t(c - q.data.row.begin())];
      });
    } else {
      tasks_.run(chunks.count, [&](size_t r) {
        for (uint64_t i = chunks.begin(r); i < chunks.end(r); ++i) {
          const uint32_t g = q.data.group[i];
          out[i] = g == NewtonRows::kUntouched ? untouched : q.d[g];
        }
      });
    }
  }
}

// The layout of one sweep's sums (per part, then reduced over parts).
struct SweepSums {
  size_t cols, tri;
  size_t g() const { return 0; }
  size_t g_pos() const { return cols; }
  size_t H() const { return 2 * cols; }
  size_t scalars() const { return 2 * cols + tri; }
  // scalars: P, Σα (+, −), Σα² (+, −), Σ_i ∂P/∂d_i, the untouched rows' H_bb
  size_t width() const { return scalars() + 7; }
};

// Step 1 of an iteration at the decision values every part holds (formed
// afresh from ω = *form_d first, row by row, when form_d is given): r, g,
// g⁺, P, the class sums of α and α², and the Hessian of the touched rows (all
// of it when `full_hessian` or for the logistic loss, else the change of the
// rows whose D_ii flipped; none with `hessian` false). Reduced into `sums`.
template <class LossT>
void ProxNewton<LossT>::sweep(const std::vector<double>* form_d, bool hessian, bool full_hessian, double b,
                              std::vector<double>& sums) {
  const double C = opt_.C;
  const SweepSums layout{cols_, tri_};
  const size_t width = layout.width();
  if (LossT::kNeedsSigmoid) full_hessian = true;
  std::vector<std::vector<double>> local(parts_.size(), std::vector<double>(width, 0.0));
  for (size_t k = 0; k < parts_.size(); ++k) {
    Part& q = *parts_[k];
    const NewtonRows& x = q.data;
    std::vector<double>& out = local[k];
    sum_ranges(q, out, [&](size_t rr, auto binary, std::vector<double>& s) {
      constexpr bool kBinary = decltype(binary)::value;
      s.assign(width, 0.0);
      double* g = s.data() + layout.g();
      double* gp = s.data() + layout.g_pos();
      double* H = s.data() + layout.H();
      const RowArrays a(x);
      double* d = q.d.data();
      uint8_t* active = q.active.data();
      const size_t cols = cols_, dim = dim_;
      // The scalars (layout.scalars(): P, Σα by class, Σα² by class, Σ_i ∂P/∂d_i) in registers.
      double loss = 0, sum_deriv = 0;
      std::array<double, 2> alpha{0.0, 0.0}, alpha2{0.0, 0.0};
      double hessian_bb = 0;  // H[tri_ − 1]
      const uint64_t first = q.ranges.begin(rr), last = q.ranges.end(rr);
      for (uint64_t c = first; c < last; ++c) {
        if (form_d) d[c] = decision<kBinary>(a, c, form_d->data(), b);
        const int8_t y = a.y[c];
        if (y == 0) continue;
        const double m = double(y) * d[c];
        const double copies = a.copies(c);
        const double deriv = LossT::deriv(C, m);  // φ'(m) = −α
        const double r = copies * (deriv * double(y));
        const size_t cls = y > 0 ? 0 : 1;
        loss += copies * LossT::value(C, m);
        alpha[cls] -= copies * deriv;
        alpha2[cls] += copies * (deriv * deriv);
        sum_deriv += r;
        const uint64_t e0 = a.begin[c], e1 = a.begin[c + 1];
        // A row past the hinge (r = ±0: most rows of a good fit) would add
        // ±0 to g and g⁺, which start at +0 and never reach −0: no change.
        if (r != 0) {
          if (y > 0) {
            for (uint64_t e = e0; e < e1; ++e) {
              const double v = a.times<kBinary>(e, r);
              g[a.column[e]] += v;
              gp[a.column[e]] += v;
            }
          } else {
            for (uint64_t e = e0; e < e1; ++e) g[a.column[e]] += a.times<kBinary>(e, r);
          }
        }
        if (!hessian) continue;
        double weight;
        if constexpr (LossT::kNeedsSigmoid) {
          const double p = -deriv / C;  // σ(−m)
          weight = copies * (C * p * (1.0 - p));
        } else {
          const uint8_t now = m < 1.0 ? 1 : 0;
          if (!full_hessian && now == active[c]) continue;
          weight = copies * (full_hessian ? double(now) : double(int(now) - int(active[c])));
          active[c] = now;
        }
        if (weight == 0) continue;
        for (uint64_t e = e0; e < e1; ++e) {
          const size_t col = a.column[e];
          const double wa = a.times<kBinary>(e, weight);
          const size_t row_at = packed(col, 0, dim);
          for (uint64_t f = e; f < e1; ++f) H[row_at + a.column[f]] += a.times<kBinary>(f, wa);
          H[row_at + cols] -= wa;  // x̃ = [x; −1]
        }
        hessian_bb += weight;
      }
      double* sc = s.data() + layout.scalars();
      sc[0] = loss;
      sc[1] = alpha[0], sc[2] = alpha[1];
      sc[3] = alpha2[0], sc[4] = alpha2[1];
      sc[5] = sum_deriv;
      H[tri_ - 1] = hessian_bb;
    });
    // Untouched rows: d = −b; a positive one has margin −b, a negative one b.
    double* sc = out.data() + layout.scalars();
    const std::array<double, 2> count{double(x.positive_untouched), double(x.negative_untouched)};
    const std::array<double, 2> margin{-b, b};
    for (size_t cls = 0; cls < 2; ++cls) {
      if (count[cls] == 0) continue;
      const double y = cls == 0 ? 1.0 : -1.0;
      const double deriv = LossT::deriv(C, margin[cls]);
      sc[0] += count[cls] * LossT::value(C, margin[cls]);
      sc[1 + cls] -= count[cls] * deriv;
      sc[3 + cls] += count[cls] * (deriv * deriv);
      sc[5] += count[cls] * (deriv * y);
      if constexpr (LossT::kNeedsSigmoid) {
        const double p = -deriv / C;
        sc[6] += count[cls] * (C * p * (1.0 - p));
      } else {
        sc[6] += margin[cls] < 1.0 ? count[cls] : 0.0;
      }
    }
  }
  sums = reduce_.sum(local, width);
  ++passes_;
  if (!hessian) return;
  const double* h = sums.data() + layout.H();
  if (full_hessian) std::copy(h, h + tri_, H_.begin());
  else for (size_t i = 0; i < tri_; ++i) H_[i] += h[i];
}

// D(θα̃) for the class-balanced dual point α̃ of `point` (the last sweep's
// Theorem 3 α, or the model's after a step; apg.cpp's dual_bound: with a bias
// each class's α is scaled to the smaller class sum so that Σ α̃_i y_i = 0),
// θ chosen to maximise it.
template <class LossT>
double ProxNewton<LossT>::dual_bound(const DualSums& point, double b) {
  const double C = opt_.C;
  const double* sc = point.sc;
  const double* g = point.g;
  const double* gp = point.g_pos;
  double scale_pos = 1.0, scale_neg = 1.0;
  if (opt_.bias) {
    const double common = std::min(sc[1], sc[2]);
    if (sc[1] > 0) scale_pos = common / sc[1];
    if (sc[2] > 0) scale_neg = common / sc[2];
  }
  // M = max_h ‖X_h'(α̃∘y)‖² = max_h ‖scale₊ g⁺_h + scale₋ (g_h − g⁺_h)‖².
  double M = 0;
  for (size_t h = 0; h < t_; ++h) {
    double s = 0;
    for (size_t j = begin(h); j < end(h); ++j) {
      const double c = scale_pos * gp[j] + scale_neg * (g[j] - gp[j]);
      s += c * c;
    }
    M = std::max(M, s);
  }
  if constexpr (!LossT::kNeedsSigmoid) {
    const double A = scale_pos * sc[1] + scale_neg * sc[2];
    const double S = scale_pos * scale_pos * sc[3] + scale_neg * scale_neg * sc[4];
    const double curvature = S / C + M;
    return curvature > 0 ? 0.5 * A * A / curvature : A;
  } else {
    // α̃_i = −r_i y_i·scale (or the model's, model_row_alpha); the untouched
    // rows' α by label at margins −b, b, which the model's step moves by y·(−Δb).
    const double yu_pos = point.model ? -point.db : 0.0;
    const std::array<double, 2> class_alpha{untouched_model_alpha(-b, yu_pos) * scale_pos,
                                            untouched_model_alpha(b, -yu_pos) * scale_neg};
    const ModelCorrection none;
    const ModelCorrection& correction = point.correction ? *point.correction : none;
    auto alpha = [&](const Part& q, uint64_t c) {
      const int8_t y = q.data.y[c];
      if (y == 0) return 0.0;
      const double a = !point.model       ? -LossT::deriv(C, double(y) * q.d[c])
                       : q.data.binary() ? model_row_alpha<true>(q, c, correction)
                                         : model_row_alpha<false>(q, c, correction);
      return a * (y > 0 ? scale_pos : scale_neg);
    };
    double largest = 0;
    for (const auto& part : parts_) {
      const Part& q = *part;
      for (uint64_t c = 0; c < q.data.rows(); ++c) largest = std::max(largest, alpha(q, c));
      if (q.data.positive_untouched > 0) largest = std::max(largest, class_alpha[0]);
      if (q.data.negative_untouched > 0) largest = std::max(largest, class_alpha[1]);
    }
    largest = reduce_.max(largest);
    if (!(largest > 0)) return 0.0;
    const double theta_max = C / largest;
    auto terms = [&](double a, double theta, std::array<double, 3>& s, double weight) {
      detail::logistic_dual_terms(C, a, theta, s.data(), weight);
    };
    std::vector<std::vector<double>> local(parts_.size());
    auto at = [&](double theta, double& d1, double& d2) {
      for (size_t k = 0; k < parts_.size(); ++k) {
        const Part& q = *parts_[k];
        std::vector<std::array<double, 3>> partial(q.ranges.count);
        tasks_.run(q.ranges.count, [&](size_t rr) {
          std::array<double, 3> s{};
          for (uint64_t c = q.ranges.begin(rr); c < q.ranges.end(rr); ++c)
            terms(alpha(q, c), theta, s, q.data.copies(c));
          partial[rr] = s;
        });
        std::array<double, 3> s{};
        for (const auto& p : partial)
          for (size_t i = 0; i < 3; ++i) s[i] += p[i];
        if (q.data.positive_untouched > 0) terms(class_alpha[0], theta, s, double(q.data.positive_untouched));
        if (q.data.negative_untouched > 0) terms(class_alpha[1], theta, s, double(q.data.negative_untouched));
        local[k] = {s[0], s[1], s[2]};
      }
      const std::vector<double> s = reduce_.sum(local, 3);
      d1 = s[1] - theta * M;
      d2 = s[2] - M;
      return s[0] - 0.5 * theta * theta * M;
    };
    return detail::best_logistic_dual(theta_max, at);
  }
}

// The certificate of a sweep's dual point (Theorem 3's α at d).
template <class LossT>
double ProxNewton<LossT>::sweep_dual_bound(const std::vector<double>& sums, double b) {
  const SweepSums layout{cols_, tri_};
  return dual_bound({sums.data() + layout.g(), sums.data() + layout.g_pos(), sums.data() + layout.scalars()}, b);
}

// The model's dual α of touched row c (as α̂ of ModelAlpha at d and u): a
// row whose α̂ leaves the loss's domain is held at its edge; the others move
// by the correction, φ''(m)·y·x̃'δ, kept in the domain.
template <class LossT>
template <bool kBinary>
double ProxNewton<LossT>::model_row_alpha(const Part& q, uint64_t c, const ModelCorrection& correction) const {
  const double C = opt_.C;
  const double y = double(q.data.y[c]);
  const ModelAlpha<LossT> a(C, y * q.d[c], y * q.u[c]);
  if (a.outside(C) || !correction.any() || a.curvature == 0) return ModelAlpha<LossT>::edge(C, a.value);
  const NewtonRows& x = q.data;
  double moved = -correction.delta_b;
  for (uint64_t e = x.begin[c]; e < x.begin[c + 1]; ++e)
    moved += entry_times<kBinary>(x, e, correction.delta[x.column[e]]);
  return ModelAlpha<LossT>::edge(C, a.value + a.curvature * (y * moved));
}

// The same for the untouched rows of a class at `margin` (x = 0: no correction but δb).
template <class LossT>
double ProxNewton<LossT>::untouched_model_alpha(double margin, double yu) const {
  return ModelAlpha<LossT>::edge(opt_.C, ModelAlpha<LossT>(opt_.C, margin, yu).value);
}

// Holding a row's α̂ at the domain's edge changes X'(α∘y) by Δv and
// Σ α_i y_i by e, first order in the step, so the certificate would keep
// the error it is built to remove. The other rows undo it: their α moves by
// φ''(m)·y·x̃'δ with H'δ = (−Δv, e) (H' the model's Hessian without the held
// rows; ω part only without a bias), solved by conjugate gradients. One pass
// over the rows that visits only the held rows' entries. Returns no
// correction when no touched row is held. Any δ gives a dual-feasible point
// (the certificate sums the α it gets); δ only decides how good it is.
template <class LossT>
ModelCorrection ProxNewton<LossT>::correct_clipped_rows(double b, double db, double hbb_untouched) {
  const double C = opt_.C;
  // Layout: Δv (cols), e, held rows, then the held rows' Hessian (packed, tri).
  const size_t width = cols_ + 2 + tri_;
  std::vector<std::vector<double>> local(parts_.size(), std::vector<double>(width, 0.0));
  for (size_t k = 0; k < parts_.size(); ++k) {
    const Part& q = *parts_[k];
    const NewtonRows& x = q.data;
    std::vector<double>& out = local[k];
    sum_ranges(q, out, [&](size_t rr, auto binary, std::vector<double>& s) {
      constexpr bool kBinary = decltype(binary)::value;
      for (uint64_t c = q.ranges.begin(rr); c < q.ranges.end(rr); ++c) {
        const int8_t y = x.y[c];
        if (y == 0) continue;
        const ModelAlpha<LossT> a(C, double(y) * q.d[c], double(y) * q.u[c]);
        if (!a.outside(C)) continue;
        if (s.empty()) s.assign(width, 0.0);
        const double copies = x.copies(c);
        const double raised = (ModelAlpha<LossT>::edge(C, a.value) - a.value) * copies;
        const double weight = a.curvature * copies;
        double* H = s.data() + cols_ + 2;
        const uint64_t e0 = x.begin[c], e1 = x.begin[c + 1];
        for (uint64_t e = e0; e < e1; ++e) {
          const size_t col = x.column[e];
          s[col] += entry_times<kBinary>(x, e, raised * double(y));
          const double wa = entry_times<kBinary>(x, e, weight);
          const size_t row_at = packed(col, 0, dim_);
          for (uint64_t f = e; f < e1; ++f) H[row_at + x.column[f]] += entry_times<kBinary>(x, f, wa);
          H[row_at + cols_] -= wa;  // x̃ = [x; −1]
        }
        H[tri_ - 1] += weight;
        s[cols_] += raised * double(y);
        s[cols_ + 1] += copies;
      }
    });
    // Untouched rows held at the edge change only e (x = 0) and H'_bb.
    const std::array<double, 2> count{double(x.positive_untouched), double(x.negative_untouched)};
    const std::array<double, 2> margin{-b, b};
    const std::array<double, 2> yu{-db, db};
    for (size_t cls = 0; cls < 2; ++cls) {
      if (count[cls] == 0) continue;
      const ModelAlpha<LossT> a(C, margin[cls], yu[cls]);
      if (!a.outside(C)) continue;
      out[cols_] += (ModelAlpha<LossT>::edge(C, a.value) - a.value) * count[cls] * (cls == 0 ? 1.0 : -1.0);
      out[cols_ + 2 + tri_ - 1] += a.curvature * count[cls];  // H'_bb
    }
  }
  const std::vector<double> sums = reduce_.sum(local, width);
  ++passes_;
  ModelCorrection correction;
  if (!(sums[cols_ + 1] > 0)) return correction;  // no touched row held
  // H' = the model's Hessian (model_step's scale) less the held rows'.
  const size_t n = opt_.bias ? dim_ : cols_;
  const double scale = LossT::kNeedsSigmoid ? 1.0 : C;
  const double* held = sums.data() + cols_ + 2;
  std::vector<double> A(n * n), rhs(n);
  for (size_t a = 0; a < n; ++a) {
    for (size_t e = a; e < n; ++e) {
      const size_t at = packed(a, e, dim_);
      A[a * n + e] = A[e * n + a] = scale * H_[at] - held[at];
    }
    rhs[a] = a < cols_ ? -sums[a] : sums[cols_];
  }
  if (opt_.bias) A[n * n - 1] += scale * hbb_untouched;
  const std::vector<double> delta = conjugate_gradient(A, rhs, n);
  correction.delta.assign(delta.begin(), delta.begin() + std::ptrdiff_t(cols_));
  correction.delta_b = opt_.bias ? delta[cols_] : 0.0;
  return correction;
}

// The certificate of the Newton model's dual point after a step Δ (u = X̃Δ
// on every part, d still at the iterate; Δb = db): Theorem 3's α at an
// iterate is first order in its error, and D's max over groups magnifies
// that error by the uncancelled size of X'(α∘y), while F's error is second
// order, so the sweep's certificate lags the true suboptimality by several
// Newton steps. The model's α (ModelAlpha, corrected for the rows held at the
// domain's edge) is a dual-feasible point as accurate as the step's end.
// Two passes over the rows (the correction's, which reads only the held
// rows' entries, and the sums of X'(α∘y)).
template <class LossT>
double ProxNewton<LossT>::model_dual_bound(double b, double db, double hbb_untouched) {
  const ModelCorrection correction = correct_clipped_rows(b, db, hbb_untouched);
  const size_t width = 2 * cols_ + 5;  // g, g⁺, then the scalars as sc[0..4]
  std::vector<std::vector<double>> local(parts_.size(), std::vector<double>(width, 0.0));
  for (size_t k = 0; k < parts_.size(); ++k) {
    const Part& q = *parts_[k];
    const NewtonRows& x = q.data;
    std::vector<double>& out = local[k];
    sum_ranges(q, out, [&](size_t rr, auto binary, std::vector<double>& s) {
      constexpr bool kBinary = decltype(binary)::value;
      s.assign(width, 0.0);
      double* g = s.data();
      double* gp = s.data() + cols_;
      double* sc = s.data() + 2 * cols_;
      for (uint64_t c = q.ranges.begin(rr); c < q.ranges.end(rr); ++c) {
        const int8_t y = x.y[c];
        if (y == 0) continue;
        const double copies = x.copies(c);
        const double a = model_row_alpha<kBinary>(q, c, correction);
        const size_t cls = y > 0 ? 0 : 1;
        sc[1 + cls] += copies * a;
        sc[3 + cls] += copies * (a * a);
        if (a == 0) continue;
        const double r = copies * (-a * double(y));
        const uint64_t e0 = x.begin[c], e1 = x.begin[c + 1];
        if (y > 0) {
          for (uint64_t e = e0; e < e1; ++e) {
            const double v = entry_times<kBinary>(x, e, r);
            g[x.column[e]] += v;
            gp[x.column[e]] += v;
          }
        } else {
          for (uint64_t e = e0; e < e1; ++e) g[x.column[e]] += entry_times<kBinary>(x, e, r);
        }
      }
    });
    double* sc = out.data() + 2 * cols_;
    const std::array<double, 2> count{double(x.positive_untouched), double(x.negative_untouched)};
    const std::array<double, 2> margin{-b, b};
    const std::array<double, 2> yu{-db, db};
    for (size_t cls = 0; cls < 2; ++cls) {
      if (count[cls] == 0) continue;
      const double a = untouched_model_alpha(margin[cls], yu[cls]);
      sc[1 + cls] += count[cls] * a;
      sc[3 + cls] += count[cls] * (a * a);
    }
  }
  const std::vector<double> sums = reduce_.sum(local, width);
  ++passes_;
  DualSums point{sums.data(), sums.data() + cols_, sums.data() + 2 * cols_};
  point.model = true;
  point.db = db;
  point.correction = &correction;
  return dual_bound(point, b);
}

// Step 3: the model's minimiser. H (the Hessian, `scale`·H_) is split as
// [[A, c], [c', h]] with the bias last; the bias step is eliminated exactly,
// Δb = −(∂P/∂b + c'Δω)/h, leaving a quadratic in Δω with the Schur
// complement A − cc'/h, minimised with ½(Σ‖ω_h + Δ_h‖)² by FISTA (gradient
// restart, a step 1/L with L checked on every step). `accuracy`: the model's
// prox-gradient mapping is reduced to this fraction of its first value.
// out = A v for an exactly symmetric d×d A, as d column updates: every out[a]
// is still the sum over e in increasing order — the bits of the row-by-row
// dot products — but the inner loop carries no dependence, so it vectorises
// (the dot products' add chain bound the Newton model's FISTA). Aligned to a
// 64-byte line so the inner loop's place in the op cache does not move with
// the rest of the binary: unaligned builds of the same code ran news20's
// one-vs-rest train 1.2x slower.
__attribute__((optimize("tree-vectorize"), aligned(64))) void symmetric_multiply(const double* __restrict A,
                                                                                 const double* __restrict v,
                                                                                 double* __restrict out,
                                                                                 size_t d) {
  std::fill(out, out + d, 0.0);
  for (size_t e = 0; e < d; ++e) {
    const double* __restrict column = A + e * d;
    const double ve = v[e];
    for (size_t a = 0; a < d; ++a) out[a] += column[a] * ve;
  }
}

std::vector<double> conjugate_gradient(const std::vector<double>& A, const std::vector<double>& r, size_t n) {
  std::vector<double> x(n, 0.0), res = r, p = r, Ap(n);
  auto dot = [n](const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
  };
  const double goal = 1e-24 * dot(r, r);
  double rr = dot(res, res);
  for (size_t it = 0; it < 2 * n + 10 && rr > goal; ++it) {
    symmetric_multiply(A.data(), p.data(), Ap.data(), n);
    const double curv = dot(p, Ap);
    if (!(curv > 0)) break;  // a direction A does not see: nothing to gain along it
    const double step = rr / curv;
    for (size_t i = 0; i < n; ++i) {
      x[i] += step * p[i];
      res[i] -= step * Ap[i];
    }
    const double next = dot(res, res);
    for (size_t i = 0; i < n; ++i) p[i] = res[i] + (next / rr) * p[i];
    rr = next;
  }
  return x;
}

template <class LossT>
void ProxNewton<LossT>::model_step(const std::vector<double>& w, const std::vector<double>& g, double gb,
                                   double hbb_untouched, double accuracy, std::vector<double>& dw, double& db) {
  const size_t d = cols_;
  const double scale = LossT::kNeedsSigmoid ? 1.0 : opt_.C;
  std::vector<double> A(d * d), c(d), gt(g.begin(), g.begin() + std::ptrdiff_t(d));
  for (size_t a = 0; a < d; ++a) {
    for (size_t e = a; e < d; ++e) A[a * d + e] = A[e * d + a] = scale * H_[packed(a, e, dim_)];
    c[a] = scale * H_[packed(a, d, dim_)];
  }
  const double h = scale * H_[tri_ - 1] + hbb_untouched * scale;
  const bool eliminate = opt_.bias && h > 0;
  if (eliminate) {
    for (size_t a = 0; a < d; ++a) {
      gt[a] -= c[a] * gb / h;
      for (size_t e = 0; e < d; ++e) A[a * d + e] -= c[a] * c[e] / h;
    }
  }
  auto multiply = [&](const std::vector<double>& v, std::vector<double>& out) {
    symmetric_multiply(A.data(), v.data(), out.data(), d);
  };
  // L: power iteration (a lower estimate, raised by the step check below).
  std::vector<double> v(d, 1.0), Av(d);
  double L = 0;
  for (int it = 0; it < 30 && d > 0; ++it) {
    multiply(v, Av);
    double norm = 0;
    for (double x : Av) norm += x * x;
    norm = std::sqrt(norm);
    if (!(norm > 0)) break;
    L = norm;
    for (size_t a = 0; a < d; ++a) v[a] = Av[a] / norm;
  }
  L = std::max(1.05 * L, 1e-12 * (1.0 + std::fabs(h)));
  // One product with A per iteration: the step check's A·(x⁺ − y) also
  // carries A(x − ω) and A(y − ω) forward (x⁺ − ω = (y − ω) + (x⁺ − y), y⁺ = x⁺
  // + β(x⁺ − x)); both are formed afresh every kRefresh iterations so that
  // rounding does not accumulate.
  constexpr int kRefresh = 64;
  std::vector<double> x(w.begin(), w.begin() + std::ptrdiff_t(d)), y = x, x_new(d), z(d), grad(d), diff(d), Ad(d);
  std::vector<double> ax(d, 0.0), ay(d, 0.0);  // A(x − ω), A(y − ω): zero at x = y = ω
  std::vector<double> norms(t_), scales(t_);
  std::vector<size_t> order;
  double t = 1.0, first = -1.0;
  // At most ~1.6·10^9 multiply-adds per model: an inexact model costs more
  // Newton steps (news20, 1,154 columns: 102 steps at a quarter of this, 14 here).
  const int cap = int(
      std::max<uint64_t>(50, std::min<uint64_t>(kModelIterations, uint64_t(1.6e9) / std::max<size_t>(1, d * d))));
  for (int it = 0; it < cap && d > 0; ++it) {
    if (it > 0 && it % kRefresh == 0) {
      for (size_t a = 0; a < d; ++a) z[a] = x[a] - w[a];
      multiply(z, ax);
      for (size_t a = 0; a < d; ++a) z[a] = y[a] - w[a];
      multiply(z, ay);
    }
    for (size_t a = 0; a < d; ++a) grad[a] = ay[a] + gt[a];
    double accepted_L = L;
    for (int tries = 0; tries < 60; ++tries) {
      const double s = 1.0 / L;
      for (size_t hh = 0; hh < t_; ++hh) {
        double q = 0;
        for (size_t j = begin(hh); j < end(hh); ++j) {
          const double u = y[j] - s * grad[j];
          q += u * u;
        }
        norms[hh] = std::sqrt(q);
      }
      detail::moreau_scales(norms.data(), t_, s, scales.data(), order);
      double dist2 = 0;
      for (size_t hh = 0; hh < t_; ++hh)
        for (size_t j = begin(hh); j < end(hh); ++j) {
          x_new[j] = scales[hh] * (y[j] - s * grad[j]);
          diff[j] = x_new[j] - y[j];
          dist2 += diff[j] * diff[j];
        }
      multiply(diff, Ad);
      double curv = 0;
      for (size_t a = 0; a < d; ++a) curv += diff[a] * Ad[a];
      if (curv <= L * dist2 * (1 + 1e-12) || dist2 == 0) {
        accepted_L = L;
        break;
      }
      L *= 2;
    }
    L = accepted_L;
    double dist2 = 0, restart = 0;
    for (size_t a = 0; a < d; ++a) {
      dist2 += diff[a] * diff[a];
      restart += (y[a] - x_new[a]) * (x_new[a] - x[a]);
    }
    const double mapping = L * std::sqrt(dist2);
    if (first < 0) first = mapping;
    const double t_next = 0.5 * (1.0 + std::sqrt(1.0 + 4.0 * t * t));
    const double beta = restart > 0 ? 0.0 : (t - 1.0) / t_next;
    for (size_t a = 0; a < d; ++a) {
      const double step = x_new[a] - x[a];
      const double ax_new = ay[a] + Ad[a];
      x[a] = x_new[a];
      y[a] = x_new[a] + beta * step;
      ay[a] = ax_new + beta * (ax_new - ax[a]);
      ax[a] = ax_new;
    }
    t = restart > 0 ? 1.0 : t_next;
    if (mapping <= accuracy * first) break;
  }
  dw.assign(d, 0.0);
  for (size_t a = 0; a < d; ++a) dw[a] = x[a] - w[a];
  db = 0;
  if (eliminate) {
    double cd = 0;
    for (size_t a = 0; a < d; ++a) cd += c[a] * dw[a];
    db = -(gb + cd) / h;
  }
}

// Step 4a: u = X̃Δ = XΔω − Δb on every part's touched rows.
template <class LossT>
void ProxNewton<LossT>::direction(const std::vector<double>& dw, double db) {
  for (auto& part : parts_) {
    Part& q = *part;
    const NewtonRows& x = q.data;
    tasks_.run(q.ranges.count, [&](size_t rr) { with_binary(x, [&](auto binary) {
      constexpr bool kBinary = decltype(binary)::value;
      for (uint64_t c = q.ranges.begin(rr); c < q.ranges.end(rr); ++c) {
        double s = 0;
        for (uint64_t e = x.begin[c]; e < x.begin[c + 1]; ++e) s += entry_times<kBinary>(x, e, dw[x.column[e]]);
        q.u[c] = s - db;
      }
    }); });
  }
  ++passes_;
}

// Step 4b: the largest s ∈ {1, ½, …} with F(z + sΔ) − F(z) ≤ σ s λ, the
// change summed row by row. On success every part's d moves to d + s·u.
template <class LossT>
bool ProxNewton<LossT>::line_search(const std::vector<double>& w, const std::vector<double>& dw, double db,
                                    double b, double lambda, double& step, double& F_change, ApgResult& res) {
  const double C = opt_.C;
  const double R0 = regularizer(w);
  std::vector<double> trial_w(cols_);
  double s = 1.0;
  for (int k = 0; k < kMaxStepHalvings; ++k, s *= 0.5) {
    ++res.line_search_steps;
    for (size_t j = 0; j < cols_; ++j) trial_w[j] = w[j] + s * dw[j];
    std::vector<std::vector<double>> local(parts_.size(), std::vector<double>(1, 0.0));
    for (size_t p = 0; p < parts_.size(); ++p) {
      Part& q = *parts_[p];
      const NewtonRows& x = q.data;
      std::vector<double> partial(q.ranges.count, 0.0);
      tasks_.run(q.ranges.count, [&](size_t rr) {
        double acc = 0;
        for (uint64_t c = q.ranges.begin(rr); c < q.ranges.end(rr); ++c) {
          const int8_t y = x.y[c];
          if (y == 0) continue;
          acc += x.copies(c) *
                 (LossT::value(C, double(y) * (q.d[c] + s * q.u[c])) - LossT::value(C, double(y) * q.d[c]));
        }
        partial[rr] = acc;
      });
      double sum = 0;
      for (double v : partial) sum += v;
      const double nb = b + s * db;
      if (x.positive_untouched > 0)
        sum += double(x.positive_untouched) * (LossT::value(C, -nb) - LossT::value(C, -b));
      if (x.negative_untouched > 0)
        sum += double(x.negative_untouched) * (LossT::value(C, nb) - LossT::value(C, b));
      local[p][0] = sum;
    }
    const double change = reduce_.sum(local, 1)[0] + (regularizer(trial_w) - R0);
    if (change <= kArmijo * s * lambda) {
      for (auto& part : parts_) {
        Part& q = *part;
        tasks_.run(q.ranges.count, [&](size_t rr) {
          for (uint64_t c = q.ranges.begin(rr); c < q.ranges.end(rr); ++c) q.d[c] = q.d[c] + s * q.u[c];
        });
      }
      step = s;
      F_change = change;
      return true;
    }
  }
  return false;
}

template <class LossT>
ApgResult ProxNewton<LossT>::solve(ApgState& state) {
  const uint64_t reductions_before = reduce_.calls();
  ApgResult res;
  // Every Newton solve stops on its certificate: a certified one at
  // gap_tolerance, an intermediate one (the paper's Inexact FGM) at
  // intermediate_gap (never tighter than gap_tolerance). The step that crosses it often lands far below (the
  // superlinear phase); no further step is taken.
  res.certified = opt_.certify;
  const double tolerance =
      opt_.certify ? opt_.gap_tolerance : std::max(opt_.intermediate_gap, opt_.gap_tolerance);
  std::vector<double> w = state.w;
  w.resize(cols_, 0.0);
  double b = opt_.bias ? state.b : 0.0;
  // Up to kTightModelColumns columns the model is solved to a tenth of the
  // tolerance: the model's dual point (model_dual_bound) keeps the model's
  // residual, and an inexact model converges only linearly (kddb-like: a
  // residual cut to 0.1 per model took 4–6 steps a solve, a tenth of the
  // tolerance 2–4), while a FISTA iteration of the model costs O(d²), nothing
  // against a sweep. Past it the model's cost counts (MSLR's 100–400 columns
  // on news20: a tight model made the path 7× slower), and its accuracy is
  // the gap, as the classic forcing term.
  const bool tight_model = cols_ <= kTightModelColumns;
  const SweepSums layout{cols_, tri_};
  std::vector<double> sums, g(cols_), dw;
  double best_dual = -std::numeric_limits<double>::infinity();
  double F = 0;
  bool canonical = true;  // d is formed from (ω, b) by decision(), not by steps
  bool form_d = true;     // the next sweep forms d first
  bool full_hessian = true;
  // d was just formed afresh to certify the point: the sweep leaves the
  // Hessian out (the solve usually stops there) until a step needs it.
  bool recheck = false;
  for (int k = 0;; ++k) {
    check_interrupt();
    sweep(form_d ? &w : nullptr, /*hessian=*/!recheck, full_hessian, b, sums);
    form_d = false;
    if (!recheck) full_hessian = false;
    ++res.gradient_evaluations;
    const double* sc = sums.data() + layout.scalars();
    F = regularizer(w) + sc[0];
    best_dual = std::max(best_dual, sweep_dual_bound(sums, b));
    const double gap = F > 0 ? std::max(F - best_dual, 0.0) / F : 0.0;
    res.objective = F;
    res.loss = sc[0];
    res.regularizer = F - sc[0];
    res.dual_bound = best_dual;
    res.relative_gap = gap;
    if (gap <= tolerance) {
      if (canonical) {
        res.converged = true;
        break;
      }
      // Certify the decision values the caller gets (formed afresh).
      form_d = true;
      canonical = true;
      full_hessian = true;
      recheck = true;
      continue;
    }
    if (k >= opt_.max_iterations) break;
    if (recheck) {  // a step after all: the same sums again, with the full Hessian at this d
      sweep(nullptr, /*hessian=*/true, /*full_hessian=*/true, b, sums);
      sc = sums.data() + layout.scalars();
      full_hessian = recheck = false;
    }
    res.iterations = k + 1;
    std::copy(sums.begin() + std::ptrdiff_t(layout.g()), sums.begin() + std::ptrdiff_t(layout.g() + cols_), g.begin());
    const double gb = -sc[5];  // ∂P/∂b = −Σ_i ∂P/∂d_i
    double db = 0;
    model_step(w, g, opt_.bias ? gb : 0.0, sc[6],
               tight_model ? std::clamp(0.1 * tolerance, 1e-6, 0.1) : std::clamp(gap, 1e-6, 0.1), dw, db);
    double lambda = opt_.bias ? gb * db : 0.0;
    for (size_t j = 0; j < cols_; ++j) lambda += g[j] * dw[j];
    std::vector<double> moved(cols_);
    for (size_t j = 0; j < cols_; ++j) moved[j] = w[j] + dw[j];
    lambda += regularizer(moved) - regularizer(w);
    double step = 0, change = 0;
    if (!(lambda < 0)) {
      res.stalled = true;  // the model predicts no decrease: rounding level
      break;
    }
    direction(dw, db);
    // The model's dual point certifies the step's end before any sweep
    // there; worth its two passes once the model's predicted decrease is
    // within reach of the tolerance.
    const bool try_model_dual = tight_model && -lambda <= kModelDualReach * tolerance * F;
    if (try_model_dual) best_dual = std::max(best_dual, model_dual_bound(b, db, sc[6]));
    if (!line_search(w, dw, db, b, lambda, step, change, res)) {
      res.stalled = true;
      break;
    }
    for (size_t j = 0; j < cols_; ++j) w[j] += step * dw[j];
    b += step * db;
    canonical = false;
    const double F_next = F + change;
    if (try_model_dual && F_next > 0 && std::max(F_next - best_dual, 0.0) / F_next <= tolerance) {
      // Certified at the step's end: the next sweep forms its decision
      // values afresh (no Hessian) and confirms the gap there.
      form_d = canonical = full_hessian = recheck = true;
    }
  }
  if (!canonical) {
    // Stopped without a certified canonical point: report the certificate of
    // the decision values returned.
    sweep(&w, /*hessian=*/false, false, b, sums);
    ++res.gradient_evaluations;
    const double* sc = sums.data() + layout.scalars();
    F = regularizer(w) + sc[0];
    best_dual = std::max(best_dual, sweep_dual_bound(sums, b));
    res.objective = F;
    res.loss = sc[0];
    res.regularizer = F - sc[0];
    res.dual_bound = best_dual;
    res.relative_gap = F > 0 ? std::max(F - best_dual, 0.0) / F : 0.0;
    res.converged = res.relative_gap <= tolerance;
  }
  write_decisions(b);
  res.column_passes = passes_;
  for (const auto& part : parts_) {
    const NewtonRows& x = part->data;
    res.touched_rows += x.merged() ? x.touched : x.rows();
    res.product_entries += x.rows();  // rows the Newton sweeps visit (merged)
  }
  res.reductions = int(reduce_.calls() - reductions_before);
  res.parts_extended = parts_extended_;
  res.lipschitz_max = state.lipschitz;
  state.w = std::move(w);
  state.b = b;
  return res;
}

}  // namespace

ApgResult solve_prox_newton(const std::vector<ApgRowPart>& parts, RowSumReduction& reduction,
                            const ApgOptions& options, ApgState& state, MemoryBudget& budget) {
  FGM_ASSERT(options.C > 0 && options.threads >= 1);
  if (!state.kept.memo) state.kept.memo = std::make_shared<SubproblemMemo>();
  SubproblemMemo& memo = *state.kept.memo;
  auto run = [&](auto& solver) {
    ApgResult result = solver.solve(state);
    solver.keep_rows(memo);
    return result;
  };
  if (options.loss == Loss::kLogistic) {
    ProxNewton<detail::LogisticLoss> solver(parts, reduction, options, memo, budget);
    return run(solver);
  }
  ProxNewton<detail::SquaredHingeLoss> solver(parts, reduction, options, memo, budget);
  return run(solver);
}

namespace detail {

namespace {

// The rows' arrays and untouched counts, as the tests read them.
void copy_rows(const NewtonRows& rows, MergedRowsForTest& result) {
  result.positive_untouched = rows.positive_untouched;
  result.negative_untouched = rows.negative_untouched;
  result.first_row.assign(rows.row.begin(), rows.row.end());
  result.weight.assign(rows.weight.begin(), rows.weight.end());
  result.group.assign(rows.group.begin(), rows.group.end());
  result.label.assign(rows.y.begin(), rows.y.end());
  result.begin.assign(rows.begin.begin(), rows.begin.end());
  result.column.assign(rows.column.begin(), rows.column.end());
  result.value.assign(rows.value.begin(), rows.value.end());
}

}  // namespace

MergedRowsForTest merged_rows_for_test(const SelectedFeatureCache& cache, const int8_t* labels,
                                       const std::vector<size_t>& stages, uint64_t range_rows, int threads,
                                       MemoryBudget& budget) {
  Tasks tasks(threads);
  const uint64_t n = cache.n_rows();
  NewtonRows kept;
  kept.n = n;
  kept.group.assign(n, NewtonRows::kUntouched);
  for (uint64_t i = 0; i < n; ++i) (labels[i] > 0 ? kept.positive_untouched : kept.negative_untouched) += labels[i] != 0;
  MergedRowsForTest result;
  size_t first = 0;
  for (size_t last : stages) {
    NewtonRows out;
    if (!extend_merged_rows(kept, cache, first, last, labels, tasks, budget, out, range_rows)) return result;
    kept = std::move(out);
    first = last;
  }
  copy_rows(kept, result);
  result.merged = true;
  result.touched = kept.touched;
  return result;
}

MergedRowsForTest plain_rows_for_test(const SelectedFeatureCache& cache, const int8_t* labels, bool few,
                                      MemoryBudget& budget) {
  Tasks tasks(1);
  NewtonRows rows;
  if (few) turn_around_few(cache, labels, budget, rows);
  else turn_around(cache, 0, labels, tasks, budget, rows);
  MergedRowsForTest result;
  copy_rows(rows, result);
  result.merged = merging_pays(rows);
  return result;
}

}  // namespace detail
}  // namespace fgm
