// How the APG solver (solvers/apg.h) adds up its sums over rows — the
// gradient of the selected set, the line-search sides, loss values, the
// column norms behind L₀, the certificate's sums — when the rows are split
// into parts. The solver sums each part of its own rows by the same code
// whatever the split; a RowSumReduction then adds the parts' vectors:
//
//  * LocalRowSums: one process, one part: the part's vector is the sum
//    (no addition at all, so the single-store solver is unchanged bit for bit);
//  * PartitionTreeRowSums: the row partitions of a partitioned store
//    (docs/distributed.md), added in the fixed partition tree of
//    core/partition_sum.h over all ranks: the same bits for every rank count
//    that divides the partition count.
//
// Every process gets the same reduced numbers, so the ranks of a distributed
// solve take the same steps without further agreement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/communicator.h"

namespace fgm {

class RowSumReduction {
 public:
  virtual ~RowSumReduction() = default;
  // Σ over every part of every process of the parts' `length`-vectors;
  // `local` holds this process's parts, in part order.
  virtual std::vector<double> sum(const std::vector<std::vector<double>>& local, size_t length) = 0;
  // The largest of every process's `value` (order-free: exact).
  virtual double max(double value) = 0;
  // True when one reduction costs a round of messages: the solver then
  // evaluates several line-search trials per reduction (same iterates).
  virtual bool batched() const = 0;
  uint64_t calls() const { return calls_; }

 protected:
  uint64_t calls_ = 0;
};

// One part on one process.
class LocalRowSums final : public RowSumReduction {
 public:
  std::vector<double> sum(const std::vector<std::vector<double>>& local, size_t length) override;
  double max(double value) override { return value; }
  bool batched() const override { return false; }
};

// This rank's partitions [first_partition, first_partition + parts) of
// `partitions`, reduced over `comm` in the fixed partition tree.
class PartitionTreeRowSums final : public RowSumReduction {
 public:
  PartitionTreeRowSums(Communicator& comm, uint32_t partitions, uint32_t first_partition)
      : comm_(comm), partitions_(partitions), first_partition_(first_partition) {}
  std::vector<double> sum(const std::vector<std::vector<double>>& local, size_t length) override;
  double max(double value) override;
  bool batched() const override { return true; }

 private:
  Communicator& comm_;
  uint32_t partitions_, first_partition_;
};

}  // namespace fgm
