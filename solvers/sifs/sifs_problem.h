// The sparse SVM of SIFS (Hong, Zhang, Liu, Ye, Cai, He, Wang, "Scaling up
// sparse support vector machines by simultaneous feature and sample
// reduction", JMLR; seed 003): elastic-net regularised smoothed-hinge SVM,
//
//   (P)   min_w  (1/n) Σ_d ℓ(u_d + ⟨a_d, w⟩) + (α/2)‖w‖² + β‖w‖₁
//   (D)   min_{θ∈[0,1]^D}  (1/2α)‖S_β(z(θ))‖² + (γ/2n)‖θ‖² − (1/n)⟨u, θ⟩,
//         z(θ) = −(1/n) Σ_d θ_d a_d,   w*(θ*) = S_β(z(θ*))/α,
//
// written once for both of the paper's problems through their dual
// coordinates d ("coordinates", each with a vector a_d and u_d = 1):
//   binary (Section 2):      d = sample i, a_i = −y_i x_i (so z = X̄θ/n, KKT-1);
//   multi-class (Section 5): d = (i, k) for k ≠ y_i, a_(i,k) = x_i ⊗ (e_k − e_{y_i})
//                            (weights w = [w_1; …; w_K]; z = −Xθ/n is the sign of
//                            ERRATA's multi-class KKT-1).
// Coordinates (i, y_i) of the multi-class dual have a = 0, u = 0, so θ = 0
// there at every (α, β); they are left out of the problem (and out of every
// count) rather than carried as screened.
//
// ℓ is the smoothed hinge (1): 0 for t < 0, t²/(2γ) on [0, γ], t − γ/2 above;
// the margin of coordinate d is t_d = u_d + ⟨a_d, w⟩ (binary: 1 − y_i w'x_i).
//
// Weight space: K blocks (binary: 1) of m entries, one per non-empty column
// of the store in increasing id order (a hashed id space costs nothing); the
// entry of (block k, column j) is k·m + j.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace fgm {

// Smoothed hinge ℓ(t) of (1) and its conjugate's pieces.
inline double smoothed_hinge(double t, double gamma) {
  if (t < 0) return 0;
  if (t <= gamma) return t * t / (2 * gamma);
  return t - gamma / 2;
}

// Soft thresholding S_β(x) = sign(x)·max(|x| − β, 0).
inline double soft_threshold(double x, double beta) {
  if (x > beta) return x - beta;
  if (x < -beta) return x + beta;
  return 0;
}

// The dual coordinates of one problem and the maps between per-coordinate
// vectors and per-sample, per-block coefficients (what the streamed passes
// multiply the data with).
class SifsLayout {
 public:
  // Binary: labels ±1 (as the store's labels()).
  static SifsLayout binary(std::vector<int8_t> labels);
  // Multi-class: class index per sample in [0, classes), classes ≥ 3.
  static SifsLayout multiclass(std::vector<uint16_t> classes, uint32_t class_count);

  bool is_multiclass() const { return blocks_ > 1; }
  uint64_t samples() const { return n_; }
  uint32_t blocks() const { return blocks_; }  // weight blocks K (binary: 1)
  // Coordinates are numbered d = i·K + k (binary: d = i); valid(d) is false
  // for the multi-class (i, y_i).
  uint64_t coordinates() const { return n_ * blocks_; }
  bool valid(uint64_t d) const { return !is_multiclass() || d % blocks_ != cls_[d / blocks_]; }
  uint64_t valid_coordinates() const { return is_multiclass() ? n_ * (blocks_ - 1) : n_; }
  int8_t label(uint64_t i) const { return labels_[i]; }
  uint16_t class_of(uint64_t i) const { return cls_[i]; }

  // Per-sample block coefficients G (n·K, G[i·K + k]) such that
  // Σ_d q_d [a_d]_(k,j) = Σ_i x_ij G[i·K + k].
  void column_coefficients(const std::vector<double>& q, std::vector<double>& G) const;
  // Per-sample block coefficients H with Σ_d h_d [a_d]²_(k,j) = Σ_i x_ij² H[i·K + k].
  void column_square_coefficients(const std::vector<double>& h, std::vector<double>& H) const;
  // From M[i·K + k] = Σ_j x_ij c_(k,j): ⟨a_d, c⟩.
  double coordinate_dot(uint64_t d, const std::vector<double>& M) const;
  // From N[i·K + k] = Σ_j x_ij² mask_(k,j): ‖a_d restricted to the mask‖².
  double coordinate_square_norm(uint64_t d, const std::vector<double>& N) const;

 private:
  uint64_t n_ = 0;
  uint32_t blocks_ = 1;
  std::vector<int8_t> labels_;  // binary
  std::vector<uint16_t> cls_;   // multi-class
};

enum class SifsScreening { kSifs, kIfs, kIss, kNone };
const char* screening_name(SifsScreening s);

struct SifsSettings {
  double beta_max_ratio = 1.0;
  double beta_min_ratio = 0.05;
  int beta_points = 10;
  double alpha_min_ratio = 0.01;
  int alpha_points = 100;
  double gamma = 0.05;
  double tol = 1e-9;  // duality gap of every solve
  SifsScreening screening = SifsScreening::kSifs;
  int max_epochs = 20000;  // SDCA epochs per grid point before giving up (reported, not silent)
  // Reuse the reduced matrix between points when the columns are held (sifs_path.h);
  // the same solutions either way (a test compares both).
  bool reuse_extraction = true;
};

// `points` log-spaced values from `from` down to `to` (both included; one point: `from`).
std::vector<double> log_spaced(double from, double to, int points);

}  // namespace fgm
