// The reduced problem of SIFS (Lemma 3 / Lemma 14, scaled-D) and its solver.
//
// Given screened sets F̂ (weights known to be 0), R̂ (θ = 0) and L̂ (θ = 1),
// the free coordinates θ̂ solve
//   min_{θ̂∈[0,1]} (1/2α)‖S_β(z_L − (1/n) Σ_{d free} θ̂_d a_d)‖²_{F̂ᶜ} + (γ/2n)(‖θ̂‖² + |L̂|)
//                  − (1/n)(Σ θ̂_d + |L̂|),       z_L = −(1/n) Σ_{d∈L̂} a_d,
// keeping the original n (ERRATA) and L̂ as the fixed offset z_L. Its
// Fenchel primal is P̂(w) = (1/n)[Σ_free ℓ(1 + ⟨a_d,w⟩) + Σ_L̂ (1 + ⟨a_d,w⟩ − γ/2)]
// + (α/2)‖w‖² + β‖w‖₁ over w on F̂ᶜ (the samples in L̂ sit on the linear
// piece of ℓ); the gap P̂(w(θ̂)) + D̂(θ̂) certifies the solution, and with safe
// screening the reduced optimum is the full one.
//
// Solver: proximal stochastic dual coordinate ascent (Prox-SDCA,
// Shalev-Shwartz & Zhang 2016) without the outer acceleration loop the paper
// uses (AProx-SDCA): the brief allows any solver that certifies the gap, and
// an AProx-SDCA outer loop (κ = R²/(γn) − α) tried here needed 4x the time
// of plain Prox-SDCA on the small test problems (n ≤ 160), where κ/α is
// largest; on the benchmark sizes R²/(αγn) is small and plain SDCA needs few
// epochs. Coordinate step (the upper bound of the
// dual along d, constant ‖a_d‖²/(αn²) + γ/n):
//   θ_d ← clip(θ_d + (1 + ⟨a_d, w⟩ − γθ_d) / (‖a_d‖²/(αn) + γ), 0, 1),
// then z and w = S_β(z)/α are updated on a_d's entries. Coordinates are
// visited in a fixed pseudo-random order per epoch (seeded), so the result
// is deterministic. The gap is checked after every epoch, with z recomputed
// from θ̂ (no drift) before a solve is declared converged.
#pragma once

#include <cstdint>
#include <vector>

#include "solvers/sifs/sifs_passes.h"
#include "solvers/sifs/sifs_problem.h"

namespace fgm {

struct ReducedProblem {
  const SifsLayout* layout = nullptr;
  double alpha = 0, beta = 0, gamma = 0;
  ReducedMatrix X;                   // kept samples × kept columns
  std::vector<uint8_t> free_weight;  // [k·cols + c]: 1 when (k, column c) is not screened
  std::vector<double> z_offset;      // z_L on the reduced weights [k·cols + c]
  std::vector<uint64_t> coordinate;  // the free coordinates d (increasing)
  std::vector<uint32_t> coordinate_row;  // their row in X
  uint64_t in_L = 0;                 // |L̂| (valid coordinates screened to θ = 1)
  // Columns with a free entry and samples with a free coordinate (X may hold
  // more of both: a reused extraction, see sifs_path.h).
  uint64_t kept_features = 0, kept_samples = 0;
  Reservation memory;                // everything above except X (which holds its own)
};

struct SdcaResult {
  std::vector<double> w;      // reduced weights [k·cols + c]
  std::vector<double> theta;  // per free coordinate
  double primal = 0;          // P̂(w)
  double dual = 0;            // −D̂(θ̂) (a lower bound on min P)
  double gap = 0;
  int epochs = 0;
  bool converged = false;
};

// Solves from theta0 (per free coordinate, clipped to [0, 1]).
SdcaResult solve_reduced(const ReducedProblem& problem, std::vector<double> theta0, double tol, int max_epochs);

}  // namespace fgm
