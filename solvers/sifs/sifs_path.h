// SIFS over a grid of (α, β) (Algorithm 1): for each β (log-spaced from
// beta_max_ratio·β_max down to beta_min_ratio·β_max), α from α_max(β) down to
// alpha_min_ratio·α_max(β); every β starts from the exact closed form at
// α_max(β) (Lemma 4 / Lemma 15), and each later α uses the previous α's
// solution as its reference (never one from another β). Per point: screening
// (streamed passes), extraction of the reduced problem (one streamed pass),
// Prox-SDCA to sifs.tol. With screening = none the full problem is extracted
// once and solved at every point (the same solver without screening: the
// baseline of the speedup).
//
// Reused extraction (settings.reuse_extraction, when the data's columns are
// held in memory): the reduced matrix holds every row of a superset of the
// kept columns, and the next point reuses it while it still covers the kept
// columns and the screened columns in it hold at most a tenth of the kept
// columns' nonzeros (they cost the solver a visit per epoch). Rows and columns that the
// point screened are simply not visited: the solver touches only the rows
// of free coordinates and only free weight entries (a masked entry's w is 0,
// so it adds exact zeros), so the solutions are the same bit for bit as with
// an extraction of exactly the kept rows and columns (tested). The z_L offset
// is then summed from the rows of the samples in L̂.
//
// Special points: at α = α_max(β) the closed form is the solution (gap 0, no
// solve); at β ≥ β_max, α_max(β) = 0 and w* = 0 for every α > 0 (Lemma 4 (i)),
// so those points are closed form too and are reported with α = 0.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "solvers/sifs/sifs_passes.h"
#include "solvers/sifs/sifs_rules.h"
#include "solvers/sifs/sifs_sdca.h"

namespace fgm {

struct SifsPoint {
  double beta = 0, alpha = 0, beta_ratio = 0, alpha_ratio = 0;
  bool closed_form = false;
  uint64_t nonzeros = 0;  // nonzero weights (K·m space)
  double objective = 0;   // primal objective P(w)
  double gap = 0;         // duality gap of the solve (0 for closed-form points)
  bool converged = true;
  int epochs = 0;
  uint64_t weights_screened = 0;  // features (multi-class: (class, feature) entries) in F̂
  uint64_t samples_in_R = 0, samples_in_L = 0;  // coordinates screened
  uint64_t reduced_features = 0, reduced_samples = 0;
  uint64_t reduced_nnz = 0;  // Σ over the free coordinates of their row's nonzeros in the reduced matrix
  std::vector<ScreenedSets::Trigger> triggers;
  bool extraction_reused = false;  // the reduced matrix of an earlier point served again
  double screening_seconds = 0, extract_seconds = 0, solve_seconds = 0;
};

class SifsSolver {
 public:
  // One column pass computes z(1) = −(1/n)Σ_d a_d (β_max and every α_max).
  SifsSolver(SifsData& data, const SifsSettings& settings);
  virtual ~SifsSolver() = default;

  double beta_max() const { return beta_max_; }
  // One row pass per new β.
  double alpha_max(double beta);
  // The exact solution at (α_max(β), β) (at β ≥ β_max: w = 0, α = 0).
  SifsReference closed_form(double beta);
  // P(w) at a closed-form solution (every coordinate in L).
  double closed_form_objective(const SifsReference& ref) const;
  // Solves (alpha, ref.beta) from `ref` (same β, alpha < ref.alpha); the solution goes to `next`.
  SifsPoint solve(const SifsReference& ref, double alpha, SifsReference& next);

  // The whole grid; on_point after each point with its solution (w: K·m).
  void run_path(const std::function<void(const SifsPoint&, const SifsReference&)>& on_point);

  const SifsSettings& settings() const { return settings_; }
  uint64_t extractions_reused() const { return extractions_reused_; }

 protected:
  // A solver of the reduced problem over other passes (engine/distributed_sifs.h).
  SifsSolver(SifsPasses& passes, const SifsSettings& settings);
  // The reduced problem of `sets` (screened for `alpha` from `ref`) solved:
  // pt's reduced_*, objective, gap, converged, epochs, extract and solve
  // seconds; next.w, next.gap and next.theta on the free coordinates (next.theta
  // comes in with the screened ones set). The single store's: extraction + Prox-SDCA.
  virtual void solve_screened(const ScreenedSets& sets, const SifsReference& ref, double alpha, SifsPoint& pt,
                              SifsReference& next);
  SifsPasses& passes() { return passes_; }

 private:
  ReducedProblem build_reduced(const ScreenedSets& sets, double alpha, double beta);

  SifsPasses& passes_;
  SifsData* data_ = nullptr;  // the single store (solve_screened's extraction)
  SifsSettings settings_;
  Reservation vectors_memory_;
  std::vector<double> z_one_;  // z(1), K·m
  double beta_max_ = 0;
  double cached_beta_ = -1, cached_alpha_max_ = 0;
  std::optional<ReducedProblem> full_problem_;  // screening = none: extracted once
  std::optional<ReducedMatrix> cached_X_;       // the last point's matrix (reused extraction)
  uint64_t extractions_reused_ = 0;
};

}  // namespace fgm
