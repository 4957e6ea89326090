#include "engine/worst_case_analysis.h"

#include <utility>

#include "core/error.h"

namespace fgm {

namespace {

// Per-block partial group scores: (group, Σ c_j² over the block's members).
using GroupPartials = std::vector<std::pair<uint64_t, double>>;

}  // namespace

WorstCaseResult worst_case_analysis(const ShardStore& store, const std::vector<BlockRef>& blocks,
                                    const WorstCaseInput& input, const SchedulerOptions& options,
                                    MemoryBudget& budget) {
  WorstCaseResult result;
  const double* a = input.weighted_labels;
  const auto* excluded = input.excluded;
  TopBCache global(input.B);

  if (input.groups == nullptr) {
    uint64_t scored = 0;
    result.pass = stream_blocks<TopBCache>(
        store, blocks, options, budget,
        [&](const BlockRef& ref, const ColumnBlock& block) {
          TopBCache local(input.B);
          for (uint64_t k = 0; k < block.column_count; ++k) {
            uint64_t begin = block.col_ptr[k], end = block.col_ptr[k + 1];
            if (begin == end) continue;
            double c = column_dot(block.row_ids + begin, block.values + begin, end - begin, a);
            double s = c * c;
            if (!(s > 0) || !local.may_admit(s)) continue;
            uint64_t feature = block.first_column + k;
            if (excluded && bit_is_set(*excluded, feature)) continue;
            local.offer({s, feature});
          }
          return local;
        },
        [&](TopBCache&& local) { global.merge(local); });
    for (const auto& b : blocks) scored += b.column_count;
    result.candidates_scored = scored;
  } else {
    throw Error(ErrorKind::kInternal, "worst_case_analysis: groups are scored by GroupSpace");
  }
  result.top = global.sorted();
  return result;
}

}  // namespace fgm
