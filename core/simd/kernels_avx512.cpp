// The kernels of simd.h for the avx512 target (compiler flags in CMakeLists.txt).
#define FGM_SIMD_AVX512 1
#define FGM_SIMD_NS avx512
#include "core/simd/kernels_impl.inc"

namespace fgm::simd {
const Kernels& avx512_kernels() { return avx512::table(); }
}  // namespace fgm::simd
