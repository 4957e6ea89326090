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
