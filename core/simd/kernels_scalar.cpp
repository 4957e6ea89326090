// The kernels of simd.h for the scalar target (compiler flags in CMakeLists.txt).
#define FGM_SIMD_SCALAR 1
#define FGM_SIMD_NS scalar
#include "core/simd/kernels_impl.inc"

namespace fgm::simd {
const Kernels& scalar_kernels() { return scalar::table(); }
}  // namespace fgm::simd
