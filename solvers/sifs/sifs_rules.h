// The screening rules of SIFS (Sections 3–5) on top of the streamed passes:
// IFS (Theorem 9: s_j ≤ β₀ ⇒ w*_j = 0), ISS (Theorem 11: u_i < 0 ⇒ θ*_i = 0,
// l_i > γ ⇒ θ*_i = 1; the multi-class tests of Section 5.3 are non-strict)
// and their alternation (Algorithm 1, steps 6–11, ISS first), from a
// reference solution at (α₀, β₀) to a target α at the same β₀.
//
// Balls (Lemmas 5 and 6), with ERRATA's enlargement for an inexact reference
// of duality gap G (0 for the closed form at α_max(β)):
//   W: center (α₀+α)/(2α)·w₀ on F̂ᶜ; radius² = (|α₀−α|/(2α)‖w₀‖ + (max(α₀,α)/α)√(2G/α₀))²
//      − ((α₀+α)/(2α))²‖[w₀]_F̂‖²
//   Θ: center c = (α−α₀)/(2γα)·1 + (α₀+α)/(2α)·θ₀ on D̂ᶜ; radius² = (|α−α₀|/(2α)‖θ₀ − 1/γ‖
//      + (max(α₀,α)/α)√(2nG/γ))² − ‖1 − c_L̂‖² − ‖c_R̂‖²
// (the enlargement bounds how far the centre and radius built from the
// approximate reference can be from the exact ones; G is the gap of the
// reduced problem the reference came from, whose optimum is the full one).
// A radius² that rounding made slightly negative is clamped to 0; a clearly
// negative one throws (an inexact reference or a bug).
//
// Rounding: every test keeps a relative margin of kSifsRoundingMargin, so a
// quantity that sits on a rule's boundary up to rounding is never screened.
//
// IFS tests only the weight entries where the reference's w is 0: an entry
// active at the reference α₀ is the last the rule could screen at a nearby α
// (its |⟨x̄^j, centre⟩|/n is about |z_j(θ₀)| > β), and leaving them out means
// no IFS pass touches the reference's support — on data whose active
// features are dense (syn1–3) that is half the nonzeros — and the ISS centre
// never changes within a point (screening fewer entries is always safe).
#pragma once

#include <cstdint>
#include <vector>

#include "solvers/sifs/sifs_passes.h"
#include "solvers/sifs/sifs_problem.h"

namespace fgm {

inline constexpr double kSifsRoundingMargin = 1e-9;

// A solution used as the reference of the next grid point.
struct SifsReference {
  double alpha = 0, beta = 0;
  std::vector<double> w;      // K·m
  std::vector<double> theta;  // n·K (0 on invalid coordinates)
  double gap = 0;             // 0: exact (closed form)
};

enum class CoordinateStatus : uint8_t { kFree = 0, kR = 1, kL = 2, kVoid = 3 };

// The screened sets of one grid point, reset at every α.
struct ScreenedSets {
  std::vector<uint8_t> weight_free;         // K·m; 0 = in F̂
  std::vector<CoordinateStatus> coordinate;  // n·K (this process's samples)
  // Counts over the whole problem (every process's samples).
  uint64_t weights_screened = 0, in_R = 0, in_L = 0;
  // New screened entries per trigger, in order: +F̂ for IFS, +R̂ ∪ L̂ for ISS.
  struct Trigger {
    bool features;  // IFS (true) or ISS
    uint64_t found;
  };
  std::vector<Trigger> triggers;
  // ISS's ⟨a_d, centre⟩ sums (row pass M) of this point: the centre is the
  // reference's w on F̂ᶜ, and IFS never screens an entry where the reference's
  // w is nonzero, so the centre, and M, stay the same for every ISS trigger
  // of a point; only the norms over F̂ᶜ change.
  std::vector<double> iss_center_sums;
  std::vector<double> iss_support_norms;  // Σ x² over the reference's support, per coordinate block
};

ScreenedSets empty_screened_sets(const SifsLayout& layout, uint64_t weights);

// One ISS trigger; returns the coordinates newly screened (over every
// process: the sums over samples go through data.sum_parts).
uint64_t apply_iss(SifsPasses& data, const SifsReference& ref, double alpha, double gamma, ScreenedSets& sets);
// One IFS trigger; returns the weights newly screened.
uint64_t apply_ifs(SifsPasses& data, const SifsReference& ref, double alpha, double gamma, ScreenedSets& sets);
// The rules of `mode` until nothing new is found (sifs), or once (ifs, iss).
ScreenedSets screen(SifsPasses& data, const SifsReference& ref, double alpha, double gamma, SifsScreening mode);

}  // namespace fgm
