// The kernels of simd.h for the avx2 target (compiler flags in CMakeLists.txt).
#define FGM_SIMD_AVX2 1
#define FGM_SIMD_NS avx2
#include "core/simd/kernels_impl.inc"

namespace fgm::simd {
const Kernels& avx2_kernels() { return avx2::table(); }
}  // namespace fgm::simd
