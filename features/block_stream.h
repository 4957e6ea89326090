// What a feature space needs from the chunk scheduler (engine/) to stream the
// store: a function that runs `transform` on every column block in parallel
// and `consume` on the results serially, in block order. The engine provides
// it (make_block_streamer); feature spaces only see this type-erased form.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "io/shard_store.h"

namespace fgm {

struct PassStats {
  uint64_t blocks = 0;
  uint64_t bytes_streamed = 0;  // shard raw-block bytes the pass read
  double seconds = 0;
};

// A block's partial result; each feature space defines its own subclass.
struct BlockOutput {
  virtual ~BlockOutput() = default;
};

using BlockTransform = std::function<std::unique_ptr<BlockOutput>(const BlockRef&, const ColumnBlock&)>;
using BlockConsume = std::function<void(std::unique_ptr<BlockOutput>)>;
using BlockStreamer = std::function<PassStats(const std::vector<BlockRef>& blocks, const BlockTransform&,
                                              const BlockConsume&, const std::string& label)>;

// c_j = Σ_i a_i x_ij for one column: the kernel of every scoring pass.
// Four accumulators hide the gather latency; the order is fixed by the column,
// so the result does not depend on threads.
inline double column_dot(const uint32_t* rows, const float* values, uint64_t nnz, const double* a) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  uint64_t k = 0;
  for (; k + 4 <= nnz; k += 4) {
    s0 += a[rows[k]] * static_cast<double>(values[k]);
    s1 += a[rows[k + 1]] * static_cast<double>(values[k + 1]);
    s2 += a[rows[k + 2]] * static_cast<double>(values[k + 2]);
    s3 += a[rows[k + 3]] * static_cast<double>(values[k + 3]);
  }
  for (; k < nnz; ++k) s0 += a[rows[k]] * static_cast<double>(values[k]);
  return (s0 + s1) + (s2 + s3);
}

}  // namespace fgm
