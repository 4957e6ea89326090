// Private to features/: the degree-2 polynomial feature space (FGM Section 6.2,
// Algorithm 5). See poly2_space.cpp.
#pragma once

#include "core/partition_sum.h"
#include "features/feature_space.h"

namespace fgm {

// Candidate ids: kind in the top 2 bits, then two 31-bit base feature ids.
// Exact pairs (j, k), j < k — never hashed. Base features must be < 2^31.
inline constexpr uint64_t kPoly2Linear = 0, kPoly2Square = 1, kPoly2Cross = 2;
inline uint64_t poly2_id(uint64_t kind, uint64_t j, uint64_t k = 0) { return (kind << 62) | (j << 31) | k; }
inline uint64_t poly2_kind(uint64_t id) { return id >> 62; }
inline uint64_t poly2_first(uint64_t id) { return (id >> 31) & 0x7fffffffULL; }
inline uint64_t poly2_second(uint64_t id) { return id & 0x7fffffffULL; }

struct Poly2Stats {
  uint64_t active_features = 0;   // features whose bound admits at least one pair
  uint64_t candidate_pairs = 0;   // distinct pairs accumulated exactly
  uint64_t partitions = 0;        // j-partitions of the pair stage
  bool dense_path = false;        // the seed or the active block went through the dense GEMM path
  double dense_flops = 0;
  double dense_seconds = 0;       // the GEMMs of the dense path
  double sparse_seconds = 0;      // the hashed accumulation of the sparse path
  uint64_t sparse_updates = 0;    // a_i x_ij x_ik accumulations of the sparse path
  double pair_seconds = 0;        // the whole pair stage (seed, transpose, accumulation)
  double threshold = 0;           // score a pair had to reach to be enumerated
};

struct Poly2ActiveSet;

class Poly2Space : public FeatureSpace {
 public:
  Poly2Space(const SpaceRows& rows, const FeatureSpaceSettings& settings, MemoryBudget& budget);
  std::string kind() const override { return "poly2"; }
  double dimension() const override;
  SpaceScores score(const ScoringContext& context) override;
  void mark_selected(uint64_t candidate) override { selected_.insert(candidate); }
  std::vector<GeneratedColumn> columns(const ShardStore& store, uint64_t candidate) override;
  uint64_t candidate_of(const FeatureKey& key) const override;
  void describe(Model& model) const override;
  const Poly2Stats& last_stats() const { return stats_; }
  // Lets dense blocks take the GEMM path (default); tests and benchmarks turn
  // it off to compare the two paths on the same data.
  void set_dense_path(bool allowed) { dense_allowed_ = allowed; }

 private:
  // The steps of one score() call (Algorithm 5) and the state they share.
  struct Pass;
  void score_single_features(Pass& pass);
  void order_by_bound(Pass& pass) const;
  void seed_pairs(Pass& pass);
  void select_active_features(Pass& pass);
  void release_dense_stage(Pass& pass);
  void transpose_active_features(Pass& pass);
  bool dense_block_chosen(const Pass& pass, uint64_t nnz, uint64_t columns) const;
  void read_dense_reach(Pass& pass, size_t seeded);
  void offer_dense_pairs(Pass& pass, uint32_t count, uint32_t skip);
  void accumulate_dense_pairs(Pass& pass);
  void accumulate_sparse_pairs(Pass& pass);
  void offer_pair(const Pass& pass, TopBCache& cache, uint64_t j, uint64_t k, double p) const;
  // The pass over this rank's partitions (poly2_space.cpp, "Over partitions").
  SpaceScores score_partitions(const ScoringContext& context);
  SparseSums partition_moments(const std::vector<PartitionScoringInput>& parts, SpaceScores& out,
                               Reservation& memory);
  SparseSums partition_pair_sums(const std::vector<PartitionScoringInput>& parts, const Poly2ActiveSet& active,
                                 SpaceScores& out, Reservation& sums_memory);
  void offer_pair_sums(const SparseSums& sums, TopBCache& top) const;

  SpacePartitions* partitions_;
  MemoryBudget& budget_;
  uint64_t n_features_;
  uint64_t n_rows_;
  double gamma_, coef0_;
  uint64_t seed_features_ = 256;
  bool pruning_ = true;
  bool dense_allowed_ = true;
  CandidateSet selected_;
  Poly2Stats stats_;
};

}  // namespace fgm
