// DEPRECATED free-function form of the linear/group scoring pass, kept for
// bench/bench_scoring.cpp until it moves to features/feature_space.h (the
// engine itself scores through FeatureSpace). Same semantics as LinearSpace.
//
// Worst-case analysis (FGM Algorithm 2, Sections 4.1–4.3), streamed: one pass
// over the column blocks computes c = Σ_i α_i y_i x_i block by block, scores
// features s_j = c_j² (or groups s_g = ‖c_G‖²), and keeps the B best
// unselected candidates in the top-B cache. Thread-local caches merge into the
// global one in block order; ties go to the smaller id, so the result is the
// same for any thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "cache/top_b_cache.h"
#include "engine/chunk_scheduler.h"
#include "features/feature_groups.h"

namespace fgm {

struct WorstCaseInput {
  const double* weighted_labels = nullptr;   // a_i = α_i y_i, n entries
  const std::vector<uint64_t>* excluded = nullptr;  // bitset over features (or groups)
  const FeatureGroups* groups = nullptr;     // null: linear features
  uint64_t B = 10;
};

struct WorstCaseResult {
  std::vector<ScoredCandidate> top;  // best first; ids are features (or groups); scores > 0
  uint64_t candidates_scored = 0;    // features (or groups) scored
  PassStats pass;
};

WorstCaseResult worst_case_analysis(const ShardStore& store, const std::vector<BlockRef>& blocks,
                                    const WorstCaseInput& input, const SchedulerOptions& options,
                                    MemoryBudget& budget);


inline bool bit_is_set(const std::vector<uint64_t>& bits, uint64_t i) {
  return (bits[i >> 6] >> (i & 63)) & 1u;
}
inline void set_bit(std::vector<uint64_t>& bits, uint64_t i) { bits[i >> 6] |= uint64_t{1} << (i & 63); }

}  // namespace fgm
