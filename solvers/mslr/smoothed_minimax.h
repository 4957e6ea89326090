// MSLR's subproblem (Tan, Tsang, Wang, TNNLS 2013, problem (9) solved as in
// Section III): the minimax problem over the constraints d^1..d^T selected so
// far,
//
//   min_{α ∈ (0, C)^n} max_t f_t(α),   f_t(α) = ½‖w^t‖² − H(α),
//   w^t = Σ_i α_i y_i (x_i ∘ d^t),  H(α) = Σ_i −α_i ln(α_i/C) − (C−α_i) ln(1 − α_i/C)
//
// (the paper's f_t = ½α'Q_tα + G(α) with G = nC ln C − H; the constant is
// dropped), by the smoothing method (Algorithm 2): minimise
// f(α, q) = (1/q) ln Σ_t exp(q f_t(α)) by dual coordinate descent over the
// rows (visited in a seeded random order per sweep by default, see
// MinimaxOptions::shuffle), each step solved by Newton–bisection (Algorithm 3,
// solvers/mslr/newton_bisection.h); q starts at q0 and grows by q_factor.
// No bias (the paper has none). Q_t (n×n) is never formed: because
// w^t = c ∘ d^t with c_j = Σ_i α_i y_i x_ij, the solver keeps c (one entry per
// selected column) and e_t = ½‖w^t‖², and a coordinate step reads only its
// row of the selected columns.
//
// Stopping rule (the paper gives none): after each smoothing stage (sweeps at
// one q until max_i |∂f(α,q)/∂α_i| ≤ gradient_tolerance, or max_sweeps),
// a certified gap; q grows only once the stage's smoothed problem is solved
// (smoothed_minimax.cpp, solve). With μ = λ(α, q) (the softmax weights of the f_t) and the
// primal point w = d̄ ∘ c, d̄ = Σ_t μ_t d^t, the weighted logistic regression
//   P(w) = ½ Σ_j d̄_j c_j² + C Σ_i ln(1 + exp(−y_i Σ_j d̄_j c_j x_ij))
// bounds the minimax value from the other side: by LR duality and
// min_α max_t ≥ min_α Σ_t μ_t f_t, D(α) = H(α) − max_t ½‖w^t‖² ≤ −min max ≤ P(w)
// for every α and μ. The solve stops when (P − D)/P ≤ tolerance (converged)
// or when q would exceed q_max or the gap stalls (not converged). P is the objective of the
// model the driver writes: weights d̄_j c_j on the selected columns.
//
// Sequential over rows, so the result does not depend on any thread count.
// `budget` (optional) covers the sweep order (4 bytes per row).
//
// Row parts (the partitions of a partitioned store, docs/distributed.md
// "MSLR"): the coordinate descent is sequential over rows, so over P row
// partitions it runs as CoCoA+ (Smith et al. 2018, "CoCoA: A General
// Framework for Communication-Efficient Distributed Optimization", adding
// with σ' = P). With F(α) = f(c) − H(α), c = Σ_k A_k α_k, each round every
// partition k sweeps its own rows once, from the round's shared c, on its
// local problem
//   G_k(α'_k) = (1/σ') f(c + σ' A_k(α'_k − α_k)) − H_k(α'_k),
// and the partitions' changes of c are added in the fixed partition tree:
// c ← c + Σ_k A_k(α'_k − α_k). By convexity of f (Jensen over the P points
// c + σ' A_kΔ_k), F(α') ≤ Σ_k G_k(α'_k) ≤ F(α): every round descends, and
// each α_i still moves only inside (0, C). A coordinate step of G_k is the
// single-store step with q' = σ'q, e'_t = e_t/σ', a'_t = σ'a_t (b_t as is),
// so Newton–bisection is reused unchanged. σ' = P is safe for the direction
// all partitions share but damps the others P-fold, so the round's combined
// change Δ is then stretched to the best of τ ∈ {1, 2, 4, …, 2P} by the
// smoothed objective f(c + τΔc) − H(α + τΔα) (τ = 1 included: never worse
// than CoCoA+; one reduction of the trials' entropies; ties to the shorter
// step). A stage gets P blocks of max_sweeps rounds, certified after each
// (stall_sweeps likewise × P), so q is not raised before the slower rounds
// have solved the smoothed problem. Every sum over rows (c after a block,
// the certificate's loss and entropy) is a per-partition sum reduced by a
// RowSumReduction: the result depends on P, not on how partitions are dealt
// to ranks. With P = 1 there is nothing to combine and the solve is the
// single-store solve, bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "cache/selected_features.h"
#include "core/memory_budget.h"
#include "solvers/apg_reduction.h"

namespace fgm::mslr {

// The selected columns in row-major form (what a coordinate step reads):
// row i's entries are [row_begin[i], row_begin[i+1]) of column/value, with
// column the position of the column in the SelectedFeatureCache.
struct SelectedRows {
  uint64_t n_rows = 0;
  uint32_t n_columns = 0;
  std::vector<uint64_t> row_begin;  // n_rows + 1
  std::vector<uint32_t> column;
  std::vector<float> value;
  Reservation memory;

  // Transposes the cache's columns; the memory (12 bytes per nonzero, 8 per
  // row) is reserved from `budget`.
  static SelectedRows from_cache(const SelectedFeatureCache& cache, MemoryBudget& budget);
};

struct MinimaxOptions {
  double C = 10.0;
  double q0 = 0.01;
  double q_factor = 5.0 / 3.0;
  double q_max = 1e4;
  double tolerance = 1e-3;           // certified relative gap (P − D)/P
  double gradient_tolerance = 1e-3;  // per stage: max_i |∂f(α,q)/∂α_i|
  int max_sweeps = 100;              // per stage
  // Give up when the relative gap has not shrunk by a tenth over this many
  // sweeps (≥ 1: a stage that neither solves its smoothed problem nor
  // shrinks the gap does not raise q, so this ends the loop).
  int stall_sweeps = 1000;
  double newton_tolerance = 1e-10;
  int newton_max_iterations = 100;
  // Visit the rows in a new pseudo-random order each sweep (fixed seed, so
  // runs repeat exactly), as LIBLINEAR's dual solvers do, instead of the
  // paper's cyclic order: on sparse binary data with many identical rows the
  // cyclic order stalled (relative gap 2·10⁻² after 2800 sweeps where the
  // shuffled order certified 3·10⁻¹⁰ after 90; tests/engine/test_mslr_trainer.cpp data).
  bool shuffle = true;
};

struct MinimaxResult {
  std::vector<double> c;           // c_j = Σ_i α_i y_i x_ij per selected column
  std::vector<double> half_norms;  // e_t = ½‖w^t‖² per constraint
  std::vector<double> mu;          // λ(α, q) at the end: the constraints' weights
  std::vector<double> scale;       // d̄_j = Σ_t μ_t d^t_j per selected column
  std::vector<double> weights;     // d̄_j c_j: the model
  double primal = 0;               // P(w) above
  double dual = 0;                 // D(α) = H(α) − max_t e_t
  double relative_gap = 0;         // (P − D)/P
  double q = 0;                    // the last stage's q
  int stages = 0;
  int sweeps = 0;
  uint64_t newton_steps = 0;
  uint64_t bisections = 0;
  bool converged = false;
};

// Maximum number of constraints (membership is a 64-bit mask per column).
constexpr size_t kMaxConstraints = 64;

// One row part: a partition's rows of the selected columns, their labels and
// their dual variables (α and C − α, updated in place).
struct MinimaxPart {
  const SelectedRows* rows = nullptr;
  const int8_t* labels = nullptr;
  std::vector<double>* alpha = nullptr;
  std::vector<double>* beta = nullptr;
};

// Where this process's parts sit: parts[k] is partition first_partition + k of `partitions`.
struct PartitionLayout {
  uint32_t partitions = 1;
  uint32_t first_partition = 0;
};

// The subproblem over row parts (header): `reduction` adds the parts' sums
// over every process (LocalRowSums for one process holding every part of a
// one-part layout; PartitionTreeRowSums for partitions). Every process gets
// the same result (c, μ, model, bounds, counters); each writes its own α.
MinimaxResult solve_smoothed_minimax(const std::vector<MinimaxPart>& parts, PartitionLayout layout,
                                     RowSumReduction& reduction,
                                     const std::vector<std::vector<uint32_t>>& constraints,
                                     const MinimaxOptions& options, MemoryBudget* budget = nullptr);

// Solves the subproblem over `rows` with constraints `constraints` (each a
// list of column positions), warm-started from `alpha` and `beta` = C − α
// (n entries each, strictly inside (0, C) for rows with label ±1; rows with
// label 0 are left out and keep their values). Writes the solution back.
// One part of a one-partition layout.
MinimaxResult solve_smoothed_minimax(const SelectedRows& rows, const int8_t* labels,
                                     const std::vector<std::vector<uint32_t>>& constraints,
                                     const MinimaxOptions& options, std::vector<double>& alpha,
                                     std::vector<double>& beta, MemoryBudget* budget = nullptr);

// H(α) as above, summed over rows with label ±1.
double dual_entropy(const int8_t* labels, const std::vector<double>& alpha, const std::vector<double>& beta,
                    double C);

}  // namespace fgm::mslr
