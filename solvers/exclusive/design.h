// The data matrix X (n rows × p columns) as the exclusive-sparsity solvers see
// it: the two products every FISTA iteration needs, z = Xx and g = Xᵀr, and
// one fused pass "g = Xᵀr, then x from g column range by column range, then
// z = Xx" for the algorithms whose prox acts on each column alone (Fista-pcp's
// positive-part projection, Fista-licp's q = Zu − V). Columns are a compact
// index 0..p−1 over the non-empty columns; column_id() maps back to feature ids.
//
// Two layouts here: InMemoryDesign (CSC, for tests and for the working set's
// restricted problems) and StreamedDesign (the store, one stream_blocks pass
// per product, within the MemoryBudget). Both give results independent of the
// thread count: a column's dot product is summed in a fixed order, and z is
// accumulated block by block in block order. A third, PartitionedDesign
// (engine/distributed_exclusive.h), holds only this rank's rows of a
// partitioned store: row vectors (z, r, y) are this rank's rows, column
// vectors are whole, and every sum over rows goes through sum_rows.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "core/memory_budget.h"
#include "features/block_stream.h"

namespace fgm::exclusive {

// Writes x[first, end) from g[first, end) (and the caller's own state) only;
// called for disjoint ranges, possibly in parallel.
using ColumnUpdate = std::function<void(uint64_t first, uint64_t end)>;
// Writes `count` sums of per-row terms over the rows [begin, end) to out[0, count).
using RowPartial = std::function<void(uint64_t begin, uint64_t end, double* out)>;

class Design {
 public:
  virtual ~Design() = default;
  virtual uint64_t rows() const = 0;
  virtual uint64_t columns() const = 0;
  virtual uint64_t column_id(uint64_t k) const = 0;
  // out[0, count) = Σ over ALL rows of the problem of `partial`'s terms (for
  // a distributed design, every rank's rows: a collective, the same bits on
  // every rank). Here the rows are one range: the bits of a plain loop.
  virtual void sum_rows(size_t count, const RowPartial& partial, double* out) { partial(0, rows(), out); }
  double sum_rows(const RowPartial& partial) {
    double s = 0;
    sum_rows(1, partial, &s);
    return s;
  }
  // `all` = a row vector's values on ALL rows of the problem, in the problem's
  // row order (a distributed design: every rank's rows, rank after rank; a
  // collective). Here the rows are this design's: a copy of `local`.
  virtual void all_rows(const double* local, std::vector<double>& all) { all.assign(local, local + rows()); }
  // The columns `sorted_columns` (compact indices, increasing) as a design of
  // their own, in memory: the working set's restricted problem.
  virtual std::unique_ptr<Design> restrict_columns(const std::vector<uint64_t>& sorted_columns) = 0;
  // z (rows()) = X x (columns()).
  virtual void multiply(const double* x, double* z) = 0;
  // g (columns()) = Xᵀ r (rows()).
  virtual void multiply_transposed(const double* r, double* g) = 0;
  // g = Xᵀr; update(first, end) over all columns; z = Xx. Two passes unless
  // the layout fuses them (StreamedDesign: one pass). r must not alias z.
  virtual void transposed_update_multiply(const double* r, double* g, const ColumnUpdate& update, const double* x,
                                          double* z) {
    multiply_transposed(r, g);
    update(0, columns());
    multiply(x, z);
  }
  // Passes over the data so far (a fused pass counts once), and their wall time.
  uint64_t passes() const { return passes_; }
  double pass_seconds() const { return pass_seconds_; }

 protected:
  uint64_t passes_ = 0;
  double pass_seconds_ = 0;
};

// Plain CSC in memory, reserved from the budget. Values are floats, as in the
// store (the working set's columns are copies of stored columns).
class InMemoryDesign final : public Design {
 public:
  // Columns given as (column_ptr, row ids, values); ids[k] is column k's feature id.
  InMemoryDesign(uint64_t rows, std::vector<uint64_t> ids, std::vector<uint64_t> column_ptr,
                 std::vector<uint32_t> row_ids, std::vector<float> values, MemoryBudget& budget);
  // A dense row-major n × p matrix (tests; values must be floats); zeros are not stored.
  static InMemoryDesign from_dense(uint64_t rows, uint64_t cols, const std::vector<double>& dense,
                                   MemoryBudget& budget);

  uint64_t rows() const override { return rows_; }
  uint64_t columns() const override { return ids_.size(); }
  uint64_t column_id(uint64_t k) const override { return ids_[k]; }
  void multiply(const double* x, double* z) override;
  void multiply_transposed(const double* r, double* g) override;
  std::unique_ptr<Design> restrict_columns(const std::vector<uint64_t>& sorted_columns) override;
  // The CSC arrays (read by solvers that need row access: licp_coordinate.h).
  const std::vector<uint64_t>& column_ptr() const { return column_ptr_; }
  const std::vector<uint32_t>& row_ids() const { return row_ids_; }
  const std::vector<float>& values() const { return values_; }

 private:
  MemoryBudget& budget_;
  Reservation memory_;
  uint64_t rows_ = 0;
  std::vector<uint64_t> ids_, column_ptr_;
  std::vector<uint32_t> row_ids_;
  std::vector<float> values_;
};

// One block's part of z = Xx for StreamedDesign, reused from block to block
// within a pass: either the products (row, x_k·value) in storage order, or,
// for a block with more than ⅔·n nonzeros (where n doubles cost less memory
// than 12 bytes per nonzero), the block's partial z summed densely.
struct BlockProducts {
  bool dense = false;
  std::vector<uint32_t> rows;
  std::vector<double> values;  // dense: n partial sums
};

// The store's non-empty columns, streamed block by block. Construction makes
// one census pass (the column ids, 8 bytes per non-empty column, reserved).
class StreamedDesign final : public Design {
 public:
  StreamedDesign(const BlockStream& stream, std::vector<BlockRef> blocks, MemoryBudget& budget);

  uint64_t rows() const override { return rows_; }
  uint64_t columns() const override { return ids_.size(); }
  uint64_t column_id(uint64_t k) const override { return ids_[k]; }
  const std::vector<uint64_t>& column_ids() const { return ids_; }
  void multiply(const double* x, double* z) override;
  void multiply_transposed(const double* r, double* g) override;
  void transposed_update_multiply(const double* r, double* g, const ColumnUpdate& update, const double* x,
                                  double* z) override;
  // The columns `sorted_columns` (compact indices, increasing) copied into
  // memory in one pass: the working set's restricted design.
  InMemoryDesign gather(const std::vector<uint64_t>& sorted_columns);
  std::unique_ptr<Design> restrict_columns(const std::vector<uint64_t>& sorted_columns) override;

 private:
  // Product buffers of the blocks between their two stages (at most the
  // stream's token count exist). Kept from pass to pass (a fresh n-double
  // buffer per pass came from mmap and faulted its pages in every time: 5× the
  // pass), reserved between passes; dropped when the budget has no room.
  class ProductPool {
   public:
    std::unique_ptr<BlockProducts> take();
    void give(std::unique_ptr<BlockProducts> b);
    uint64_t bytes() const;
    void clear() { free_.clear(); }

   private:
    mutable std::mutex mutex_;
    std::vector<std::unique_ptr<BlockProducts>> free_;
  };
  // One pass: optional g = Xᵀr, optional update, optional z = Xx.
  void pass(const double* r, double* g, const ColumnUpdate* update, const double* x, double* z, const char* label);

  const BlockStream& stream_;
  std::vector<BlockRef> blocks_;
  std::vector<uint64_t> offsets_;  // compact index of each block's first column
  MemoryBudget& budget_;
  Reservation memory_;
  uint64_t rows_ = 0;
  std::vector<uint64_t> ids_;
  ProductPool pool_;
  Reservation pool_memory_;  // the pool's buffers between passes
};

}  // namespace fgm::exclusive
