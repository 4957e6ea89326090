// SIFS (solvers/sifs/) on a partitioned store (io/partitioned_store.h),
// data-parallel over the ranks of a Communicator (docs/distributed.md,
// "SIFS"). Each rank opens its own partitions (engine/own_partitions.h) and
// streams only those; per partition a SifsData runs the single-store passes
// over the partition's rows:
//
//  * feature quantities (IFS's ⟨x̄^j, θ⟩ and ‖x̄^j‖ over the free samples,
//    z(1), z_L) are column sums: each partition's vector, added in the fixed
//    partition tree (core/partition_sum.h) — only the entries asked for travel;
//  * sample quantities (ISS's ⟨x̄_i, w⟩ and ‖x̄_i‖, α_max) are row-local: each
//    rank computes its own rows' and nothing travels but counts and maxima;
//  * the reduced problem is extracted per partition (its kept rows of the
//    kept columns) and solved by the accelerated proximal gradient of
//    solvers/sifs/sifs_fista.h, every sum over rows in the partition tree.
//
// The weight space is the union of the partitions' non-empty columns in
// increasing id order (the single store's). Same store and settings give the
// same path and models bit for bit for every rank count dividing the
// partition count and any engine.threads: every per-partition computation is
// the partition's own serial arithmetic (the block plan is fixed by
// engine.block_bytes alone, and the passes always stream — a partition is
// never held decoded in memory, since whether it fits would depend on how
// many partitions share a rank's budget), and every sum across partitions is
// a tree sum. The solutions equal the single-store SIFS solutions (Prox-SDCA)
// up to the duality-gap tolerance, not bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/memory_budget.h"
#include "engine/own_partitions.h"
#include "engine/sifs_run.h"
#include "io/model_file.h"
#include "solvers/sifs/sifs_path.h"

namespace fgm {

class DistributedSifsPasses final : public SifsPasses {
 public:
  // Opens this rank's partitions; labels by the class values of all
  // partitions (two: binary; more: multi-class, Section 5).
  DistributedSifsPasses(Communicator& comm, const std::string& dir, const SchedulerOptions& scheduler,
                        uint64_t block_bytes, MemoryBudget& budget);

  const SifsLayout& layout() const override { return layout_; }
  uint64_t columns() const override { return ids_.size(); }
  MemoryBudget& budget() const override { return budget_; }
  uint64_t total_samples() const override { return own_->manifest().n_rows; }
  uint64_t total_valid_coordinates() const override;
  std::vector<uint64_t> part_ends() const override { return part_ends_; }
  std::vector<double> sum_parts(const std::vector<std::vector<double>>& local, size_t length) override;
  double max_over_processes(double value) override { return own_->reduction().max(value); }
  void column_pass(const std::vector<double>& G, const std::vector<double>* H, std::vector<double>& dots,
                   std::vector<double>* squares, const std::vector<uint8_t>* columns = nullptr) override;
  void row_pass(const std::vector<double>& c, const std::vector<uint8_t>* mask, std::vector<double>& M,
                std::vector<double>* N) override;

  OwnPartitions& own() { return *own_; }
  const PartitionManifest& manifest() const { return own_->manifest(); }
  const std::vector<double>& class_values() const { return class_values_; }
  uint64_t column_id(uint64_t j) const { return ids_[j]; }
  size_t parts() const { return data_.size(); }
  SifsData& part(size_t q) { return *data_[q]; }
  const SifsLayout& part_layout(size_t q) const { return *part_layouts_[q]; }
  // Global dense column of the part's dense column jl.
  uint32_t global_column(size_t q, uint64_t jl) const { return to_global_[q][jl]; }
  uint64_t part_begin(size_t q) const { return q == 0 ? 0 : part_ends_[q - 1]; }
  // Passes over the partitions so far (all of this rank's parts).
  SifsPassCounters counters() const;

 private:
  // Per part, c (K·m, global: values or a mask) as the part's K·m_q vector.
  template <class T>
  std::vector<T> to_part(size_t q, const std::vector<T>& c) const;

  MemoryBudget& budget_;
  std::unique_ptr<OwnPartitions> own_;
  std::vector<double> class_values_;
  SifsLayout layout_;
  std::vector<std::unique_ptr<SifsLayout>> part_layouts_;  // SifsData keeps a reference
  std::vector<std::unique_ptr<SifsData>> data_;
  std::vector<std::vector<uint32_t>> to_global_;
  std::vector<uint64_t> ids_;
  std::vector<uint64_t> part_ends_;
};

// The path driver over the distributed passes: screening as on one store,
// the reduced problem per partition, solved by solve_reduced_fista.
class DistributedSifsSolver final : public SifsSolver {
 public:
  DistributedSifsSolver(DistributedSifsPasses& passes, const SifsSettings& settings);
  uint64_t reductions() const { return reductions_; }

 private:
  void solve_screened(const ScreenedSets& sets, const SifsReference& ref, double alpha, SifsPoint& pt,
                      SifsReference& next) override;

  DistributedSifsPasses& passes_;
  uint64_t reductions_ = 0;
};

// This rank's partitions of `dir` as a SIFS run's data (engine/sifs_run.h
// SifsBackend: DistributedSifsPasses and DistributedSifsSolver); the
// communication goes to `run`.
std::unique_ptr<SifsBackend> open_sifs_partitions(Communicator& comm, const std::string& dir, const Config& config,
                                                  MemoryBudget& budget, PartitionedRun& run);

}  // namespace fgm
