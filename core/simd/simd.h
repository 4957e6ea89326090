// SIMD kernels with run-time dispatch. The library is built for generic x86-64
// (no -march=native); the kernels are compiled once per target (kernels_scalar.cpp,
// kernels_avx2.cpp with -mavx2 -mfma, kernels_avx512.cpp with -mavx512f ...)
// and the table of the best target the CPU supports is chosen at run time.
// FGM_SIMD=scalar|avx2|avx512 forces a target (tests compare targets with
// set_active_target); asking for one the CPU lacks is an error.
//
// Reproducibility. Every reduction kernel below (gather_dot, gather_moments,
// dot, the loss sweeps) sums in 8 logical lanes — element e goes to lane e mod 8,
// the lanes are combined as ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)) — with separate
// multiplies and adds (no FMA), so its result is bit-identical on every target
// and for every thread count. Only the GEMM micro-kernel (gemm_tile) uses FMA and
// target-specific register blocking: its values may differ in the last bits
// between targets; its callers use them only inside certified bounds (see
// features/poly2_dense_pairs.h), so models do not depend on the target.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fgm::simd {

enum class Target { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

// Kernel table of one target. Sizes are element counts; no alignment is
// required. Pointers of outputs may not alias inputs unless stated.
struct Kernels {
  Target target;
  // Σ_e a[rows[e]]·values[e] (the scoring kernel's sparse gather dot).
  double (*gather_dot)(const double* a, const uint32_t* rows, const float* values, size_t n);
  // out = {Σ a_r x, Σ a_r x², Σ |a_r| x²} over the entries (poly-2 stage 1:
  // c_j, q_j and the pair bound u_j²).
  void (*gather_moments)(const double* a, const uint32_t* rows, const float* values, size_t n, double out[3]);
  // Σ x_i y_i.
  double (*dot)(const double* x, const double* y, size_t n);
  // y_i += alpha·x_i (y may equal x).
  void (*axpy)(double alpha, const double* x, double* y, size_t n);
  // y_i = alpha·x_i + beta·y_i (the APG extrapolation v = ω + β(ω − ω_prev) is
  // axpby(1+β, ω, −β, ω_prev→y)).
  void (*axpby)(double alpha, const double* x, double beta, double* y, size_t n);
  // dot and axpy with x stored as float, widened exactly: the same bits as dot
  // and axpy on the widened x, reading half the bytes (the memory-bound
  // products of licp's Newton system, solvers/exclusive/licp_coordinate.cpp).
  double (*dot_f)(const float* x, const double* y, size_t n);
  void (*axpy_f)(double alpha, const float* x, double* y, size_t n);
  // Squared hinge over a decision vector d and labels y (±1, 0 = row left out):
  //   m_i = y_i d_i, r_i = ∂P/∂d_i = −C·max(1 − m_i, 0)·y_i,
  //   returns P = (C/2) Σ_i [y_i ≠ 0]·max(1 − m_i, 0)².
  // margin and r may be null (not written).
  double (*squared_hinge_sweep)(const int8_t* y, const double* d, double C, double* margin, double* r, size_t n);
  // Logistic loss: m_i = y_i d_i, p_i = σ(−m_i), r_i = −C·p_i·y_i,
  //   returns P = C Σ_i [y_i ≠ 0]·log(1 + exp(−m_i)).
  // exp and log1p are evaluated by the kernel's own polynomials, the same on
  // every target (σ within 4 ulp of libm's, tested down to subnormal results).
  double (*logistic_sweep)(const int8_t* y, const double* d, double C, double* margin, double* p, double* r,
                           size_t n);
  // Poly-2 threshold tests (Algorithm 5): the length of the prefix of idx whose
  // bounds pass, u[idx[e]]·scale ≥ t (the caller orders idx by decreasing u, so
  // the first failure ends the scan). u·1.0 is u, so scale = 1 tests u ≥ t.
  size_t (*prefix_scaled_at_least)(const double* u, const uint32_t* idx, size_t n, double scale, double t);

  // GEMM micro-kernel: C(MR×NR, column-major, ldc) += Σ_{k<kc} A[k·MR + r]·B[k·NR + c]
  // for packed panels A (kc rows of MR) and B (kc rows of NR). Per element the
  // sum runs in k order (an FMA chain on avx2/avx512), so a caller that gives
  // each output tile to one thread and the k blocks in order is deterministic
  // for any thread count.
  size_t gemm_mr, gemm_nr;
  void (*gemm_tile)(size_t kc, const double* A, const double* B, double* C, size_t ldc);
};

// Kernels::gather_moments for n < 8 entries, inline: entry e alone in lane e
// and +0 in the others, combined in the same tree, so the result is
// bit-identical to every target's kernel (tests/core/test_simd_kernels.cpp)
// without a call and a padded 8-lane gather. Poly-2 stage 1 sums a tiled
// block cell by cell, and most cells of a sparse store hold 1–3 entries.
inline void gather_moments_short(const double* a, const uint32_t* rows, const float* values, size_t n,
                                 double out[3]) {
  double c[8] = {0, 0, 0, 0, 0, 0, 0, 0}, q[8] = {0, 0, 0, 0, 0, 0, 0, 0}, w[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (size_t e = 0; e < n && e < 8; ++e) {
    const double av = a[rows[e]], x = static_cast<double>(values[e]), ax = av * x;
    c[e] = 0.0 + ax;
    q[e] = 0.0 + ax * x;
    w[e] = 0.0 + (std::fabs(av) * x) * x;
  }
  auto reduce = [](const double* l) { return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])); };
  out[0] = reduce(c);
  out[1] = reduce(q);
  out[2] = reduce(w);
}

const char* target_name(Target target);
// Parses "scalar", "avx2", "avx512"; throws Error(kConfig) naming FGM_SIMD otherwise.
Target parse_target(const std::string& name);
bool cpu_supports(Target target);
// Targets this CPU supports, scalar first.
std::vector<Target> supported_targets();
// The target in use: FGM_SIMD if set (checked on first use), else the best supported.
Target active_target();
// Forces a target (tests, benchmarks); throws Error(kConfig) if the CPU lacks it.
void set_active_target(Target target);
// The table of the active target, or of a given (supported) one.
const Kernels& kernels();
const Kernels& kernels_for(Target target);

// One table per target, defined in kernels_<target>.cpp.
const Kernels& scalar_kernels();
const Kernels& avx2_kernels();
const Kernels& avx512_kernels();

}  // namespace fgm::simd
