// Private to features/: the dense path of the poly-2 pair stage (FGM Algorithm 5,
// step "block pairs"). When a block of base features is dense, the pair scores
// p_jk = Σ_i a_i x_ij x_ik of all its pairs are one product Xᵀ diag(a) X; it is
// computed by the dispatched GEMM micro-kernel of core/simd over output tiles
// (only the upper triangle), then every pair that could reach the B-th best is
// summed again in row order — the sum the sparse path and the seed form — so
// the pairs offered, their scores and the tie-breaking are the same on either
// path, for any thread count and any SIMD target.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "cache/top_b_cache.h"
#include "core/huge_pages.h"
#include "core/memory_budget.h"
#include "core/simd/simd.h"
#include "features/feature_space.h"

namespace fgm {

// rows × cols base-feature values, column-major (column h at values[h·rows]).
struct DenseFeatureBlock {
  uint64_t rows = 0;
  uint32_t cols = 0;
  Reservation memory;
  HugeVector<float> values;
  float at(uint64_t i, uint32_t h) const { return values[h * rows + i]; }
};

// Appends the base features ids[0, count) as columns X.cols ... X.cols + count − 1,
// read in one streamed pass over the blocks that hold them (the memory grows
// its reservation). X.rows must be the store's row count.
void append_dense_columns(const ScoringContext& ctx, const uint32_t* ids, uint32_t count, DenseFeatureBlock& X,
                          PassStats* pass = nullptr);
// Bytes the dense path needs for a rows × cols block (block, G, packed panels).
uint64_t dense_pair_bytes(uint64_t rows, uint64_t cols);

// The functions below use the first `cols` columns of X (cols ≤ X.cols).
// G = Xᵀ diag(a) X on the upper triangle p ≤ q (column-major, ld = ld); entries
// below the diagonal and pairs with p, q < skip (already scored) are not
// computed. Each output tile is summed by one thread with the rows in a fixed
// order, so G does not depend on `threads`; it may differ in the last bits
// between SIMD targets (FMA, see core/simd/simd.h).
struct DensePairProducts {
  uint32_t cols = 0;
  uint64_t ld = 0;
  Reservation memory;
  HugeVector<double> g;
  double at(uint32_t p, uint32_t q) const { return g[q * ld + p]; }
};
DensePairProducts dense_pair_products(const DenseFeatureBlock& X, uint32_t cols, const double* a, uint32_t skip, int threads,
                                      MemoryBudget& budget, const simd::Kernels& kernels = simd::kernels());

// Σ_i (a_i·x_ip)·x_iq in increasing i: the value the sparse path offers for (p, q).
double row_order_pair_sum(const DenseFeatureBlock& X, const double* a, uint32_t p, uint32_t q);

struct DensePairCallbacks {
  std::function<uint64_t(uint32_t, uint32_t)> pair_id;  // candidate id of columns p < q
  std::function<bool(uint32_t, uint32_t)> excluded;     // already selected
  std::function<void(uint32_t, uint32_t, double)> offer;  // offer (p, q) with its row-order sum
};
struct DensePairStats {
  double gemm_seconds = 0;
  double gemm_flops = 0;
  uint64_t rescored = 0;  // pairs summed again in row order and offered
};

// All pairs p < q of the block except those with p, q < skip: computes G, then
// offers, with its row-order sum, every pair whose certified interval around
// G(p, q) can reach the B-th best of `top` and of the other pairs' lower
// bounds. uh[h] is the computed bound û of column h (|p̂| ≤ û_p û_q up to the
// rounding slack of pair_bound_threshold in poly2_space.cpp).
DensePairStats offer_dense_block_pairs(const DenseFeatureBlock& X, uint32_t cols, const double* a, const std::vector<double>& uh,
                                       uint32_t skip, double cross_scale, const TopBCache& top, int threads,
                                       MemoryBudget& budget, const DensePairCallbacks& callbacks,
                                       const simd::Kernels& kernels = simd::kernels());

}  // namespace fgm
