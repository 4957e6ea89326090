// solver = "exclusive" (seed 002) on a partitioned store, data-parallel over
// the ranks of a Communicator (docs/distributed.md, "Exclusive sparsity").
// The single-store FISTA and working set (solvers/exclusive/) run unchanged on
// a PartitionedDesign, which holds this rank's rows only:
//   z = Xw      row-local: each own partition's rows from the whole w;
//   g = Xᵀr     each own partition's column dots, added in the fixed
//               partition tree (core/partition_sum.h) on every rank;
//   Σ_i terms   (losses, line-search values, ‖Xv‖², Σu) per partition, then
//               the same tree;
// so every rank holds the same column vectors and takes the same branches,
// and the model is the same bit for bit for every rank count dividing the
// partition count and any engine.threads. Per-row state (margins, the licp
// dual u) stays with its rows.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/memory_budget.h"
#include "engine/exclusive_trainer.h"
#include "engine/own_partitions.h"
#include "solvers/exclusive/design.h"

namespace fgm {

class PartitionedDesign final : public exclusive::Design {
 public:
  // The streamed design of this rank's partitions: a census pass per own
  // partition, then the union of every rank's non-empty columns (one
  // allgather): the columns, in increasing feature id, are the same on every rank.
  PartitionedDesign(OwnPartitions& own, MemoryBudget& budget);
  // Own partition q's design `parts[q]`, whose column k is this design's
  // column part_columns[q][k]; `ids`: this design's feature ids.
  PartitionedDesign(OwnPartitions& own, std::vector<std::unique_ptr<exclusive::Design>> parts,
                    std::vector<std::vector<uint64_t>> part_columns, std::vector<uint64_t> ids, MemoryBudget& budget);

  uint64_t rows() const override { return row_offset_.back(); }  // this rank's rows
  uint64_t columns() const override { return ids_.size(); }
  uint64_t column_id(uint64_t k) const override { return ids_[k]; }
  const std::vector<uint64_t>& column_ids() const { return ids_; }
  void sum_rows(size_t count, const exclusive::RowPartial& partial, double* out) override;
  // One allgather: ranks own consecutive partitions, so rank order is row order.
  void all_rows(const double* local, std::vector<double>& all) override;
  std::unique_ptr<exclusive::Design> restrict_columns(const std::vector<uint64_t>& sorted_columns) override;
  void multiply(const double* x, double* z) override;
  void multiply_transposed(const double* r, double* g) override;

 private:
  void reserve_buffers();

  OwnPartitions& own_;
  MemoryBudget& budget_;
  std::vector<std::unique_ptr<exclusive::Design>> parts_;
  std::vector<std::vector<uint64_t>> part_columns_;
  std::vector<uint64_t> row_offset_;  // own partition q's rows are [row_offset_[q], row_offset_[q + 1])
  std::vector<uint64_t> ids_;
  Reservation memory_;
  std::vector<double> part_vector_;               // one part's x or g (its columns)
  std::vector<std::vector<double>> part_sums_;    // each own partition's g over all columns
};

// A distributed exclusive run and its communication by phase (run.json's
// "distributed" section: iteration 0 is the setup, iteration c + 1 class c's
// fit; a path is one phase).
struct DistributedExclusiveOutcome : ExclusiveRunOutcome, PartitionedRun {};

// This rank's partitions of the partitioned store `dir` as the fits' data
// (engine/exclusive_trainer.h train_exclusive, path_exclusive): a collective,
// every rank opens it with the same settings; the setup's and each fit's
// communication go to `run`.
std::unique_ptr<ExclusiveData> open_exclusive_partitions(Communicator& comm, const std::string& dir,
                                                         const ExclusiveSettings& settings, MemoryBudget& budget,
                                                         PartitionedRun& run);

}  // namespace fgm
