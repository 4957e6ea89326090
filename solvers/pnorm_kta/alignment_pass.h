// The streamed pass that computes every feature's alignment (alignment.h):
// one pass over the store's column blocks with stream_blocks
// (features/block_stream.h), each block's columns in parallel blocks and the
// results appended in block order, so the output is the same for any thread
// count. Memory beyond the stream's block buffers: ỹ (n doubles) and, per
// block in flight, the block's column view (CscBytes) plus, for the RBF
// kernel, the distinct-value grouping of its largest column
// (RbfScratch::bytes_for) — all reserved from the budget.
#pragma once

#include <vector>

#include "core/memory_budget.h"
#include "features/block_stream.h"
#include "solvers/pnorm_kta/alignment.h"

namespace fgm::kta {

struct AlignmentPass {
  std::vector<FeatureAlignment> features;  // the store's non-empty columns, increasing id
  PassStats pass;
};

// Labels are the store's ±1 labels (a two-label store).
AlignmentPass stream_alignments(const BlockStream& stream, const std::vector<BlockRef>& blocks,
                                KernelKind kernel, MemoryBudget& budget);

}  // namespace fgm::kta

namespace fgm::kta {

// A subset of the store's rows as a store of its own would hold them: `local`
// maps each store row to its row in the subset (kNotInSubset when left out),
// the subset's rows keep the store's order; `labels` are the subset's ±1
// labels (n of them).
inline constexpr uint32_t kNotInSubset = 0xffffffffu;
struct RowSubset {
  std::vector<uint32_t> local;  // store rows
  std::vector<int8_t> labels;   // subset rows
  uint64_t n() const { return labels.size(); }
};

// The alignments of every subset in one streamed pass: out[s] equals
// stream_alignments on a store holding subset s's rows only (the same values
// in the same order, so the same bits); a column without entries in a subset
// is left out of it, as such a store would not list it. Throws when a
// subset's labels are all equal.
std::vector<std::vector<FeatureAlignment>> stream_subset_alignments(const BlockStream& stream,
                                                                    const std::vector<BlockRef>& blocks,
                                                                    KernelKind kernel,
                                                                    const std::vector<RowSubset>& subsets,
                                                                    MemoryBudget& budget);

}  // namespace fgm::kta
