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

// column_dot against K vectors at once, interleaved row by row (vector k's
// entry i is a[i·K + k]), so one gather per nonzero serves all K: out[k]
// equals column_dot(rows, values, nnz, a_k) bit for bit (the same four
// accumulators, fed in the same order, summed the same way). `acc` is
// scratch of 4·K doubles.
inline void column_dot_many(const uint32_t* rows, const float* values, uint64_t nnz, const double* a,
                            size_t K, double* acc, double* out) {
  for (size_t k = 0; k < 4 * K; ++k) acc[k] = 0;
  uint64_t p = 0;
  for (; p + 4 <= nnz; p += 4) {
    for (size_t q = 0; q < 4; ++q) {
      const double* ar = a + static_cast<size_t>(rows[p + q]) * K;
      const double v = static_cast<double>(values[p + q]);
      double* s = acc + q * K;
      for (size_t k = 0; k < K; ++k) s[k] += ar[k] * v;
    }
  }
  for (; p < nnz; ++p) {
    const double* ar = a + static_cast<size_t>(rows[p]) * K;
    const double v = static_cast<double>(values[p]);
    for (size_t k = 0; k < K; ++k) acc[k] += ar[k] * v;
  }
  for (size_t k = 0; k < K; ++k) out[k] = (acc[k] + acc[K + k]) + (acc[2 * K + k] + acc[3 * K + k]);
}

}  // namespace fgm
