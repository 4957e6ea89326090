// Accelerated proximal gradient for the FGM subproblem (Tan, Tsang, Wang,
// "Towards ultrahigh dimensional feature selection for big data", JMLR 2014,
// Algorithm 4, with the Moreau projection of Algorithm 3):
//
//   min_{ω, b}  F(ω, b) = ½ (Σ_h ‖ω_h‖₂)² + P(ω, b)                       (31)
//
//   squared hinge: P = (C/2) Σ_i max(1 − y_i(Σ_h ω_h'x_ih − b), 0)²
//   logistic:      P =  C    Σ_i log(1 + exp(−y_i(Σ_h ω_h'x_ih − b)))
//
// ω_h are the weights of batch h of the SelectedFeatureCache. The bias b is
// unregularised and updated by its own Armijo step (FGM-SHIFT) when enabled,
// otherwise fixed at 0. Dual variables are recovered by Theorem 3:
// α_i = C ξ_i (squared hinge, ξ_i = max(1 − y_i d_i, 0)) and
// α_i = C σ(−y_i d_i) (logistic), d_i = w'x_i − b.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cache/selected_features.h"
#include "core/memory_budget.h"
#include "solvers/apg_reduction.h"

namespace fgm {

enum class Loss { kSquaredHinge, kLogistic };
const char* loss_name(Loss loss);

// How (31) is solved: the APG below, the proximal Newton method of
// prox_newton.h, or (auto) Newton while at most kProxNewtonMaxColumns columns
// are selected and the APG beyond.
enum class SubproblemMethod { kAuto, kApg, kNewton };

struct ApgOptions {
  Loss loss = Loss::kSquaredHinge;
  SubproblemMethod method = SubproblemMethod::kApg;
  double C = 10.0;
  bool bias = false;
  double eps_inner = 0.15;     // inexact solve: stop when sqrt(Δ_k/Δ_1) ≤ eps_inner (prox-gradient mapping; apg.cpp)
  // Certified solve (certify): stop when the relative duality gap
  // (F_best − D_best)/F_best ≤ gap_tolerance, F_best the best objective and
  // D_best the best dual bound of the iterates so far (apg.cpp). An inexact
  // solve (the paper's Inexact FGM: intermediate outer iterations) stops on
  // eps_inner and reports its gap without being held to it.
  bool certify = false;
  double gap_tolerance = 1e-3;
  // The proximal Newton solver's inexact solve (prox_newton.h): it has a
  // certificate at every iterate for free, so it stops on it, at this looser
  // relative gap, or at gap_tolerance if that is looser (eps_inner, a
  // gradient-mapping ratio, means nothing to it).
  double intermediate_gap = 1e-2;
  double eta = 0.5;            // line-search factor η ∈ (0,1)
  int max_iterations = 2000;   // inner iteration cap
  int threads = 1;             // explicit; results do not depend on it
};

// Warm-start state carried between outer iterations.
// Work one solve leaves for the next solve of the same run (the proximal
// Newton solver's merged rows, which the next solve extends by the new
// columns instead of rebuilding them). Results never depend on it: a solve
// without it rebuilds the same rows. A copied state starts without it.
struct SubproblemMemo;  // solvers/prox_newton.cpp
class SubproblemMemoSlot {
 public:
  SubproblemMemoSlot() = default;
  SubproblemMemoSlot(const SubproblemMemoSlot&) noexcept {}
  SubproblemMemoSlot& operator=(const SubproblemMemoSlot&) noexcept {
    memo.reset();
    return *this;
  }
  SubproblemMemoSlot(SubproblemMemoSlot&&) noexcept = default;
  SubproblemMemoSlot& operator=(SubproblemMemoSlot&&) noexcept = default;
  std::shared_ptr<SubproblemMemo> memo;
};

struct ApgState {
  std::vector<double> w;     // one weight per cache column (cache order); new columns start at 0
  double b = 0.0;
  double lipschitz = 0.0;    // L_t; 0 means "use L_0 = 0.01 n C" (n: rows with label ±1)
  SubproblemMemoSlot kept;   // held between solves (memory from the run's budget); drop with kept.memo.reset()
};

struct ApgResult {
  double objective = 0;          // F(ω, b) at the returned point
  double regularizer = 0;        // ½(Σ_h‖ω_h‖)²
  double loss = 0;               // P(ω, b)
  int iterations = 0;            // APG iterations (k)
  int line_search_steps = 0;     // F ≤ Q evaluations in total
  int gradient_evaluations = 0;  // ∇_ω P evaluations (one pass over the selected columns each)
  // Certified solve: relative_gap ≤ gap_tolerance (whatever stopped it).
  // Inexact solve: stopped by its rule (the APG: the mapping rule or an exact
  // fixed point, its relative_gap only reported; proximal Newton:
  // relative_gap ≤ intermediate_gap), not by the cap.
  bool converged = false;
  bool certified = false;        // solved with options.certify (converged then means gap ≤ tolerance)
  // The certificate of the returned point: D(α) ≤ min F for dual-feasible α
  // (built from it and, in a certified solve, from every iterate), so
  // objective − min F ≤ relative_gap·objective.
  double dual_bound = 0;
  double relative_gap = 0;
  // Added by the solver:
  int column_passes = 0;           // all passes over the selected columns (∇P, X_h g_h, X_h v_h,
                                   // final decision values): the APG work measure
  int bias_line_search_steps = 0;  // Armijo (36) evaluations of the b-step
  int restarts = 0;                // momentum resets after F_k > F_{k−1}
  double lipschitz_max = 0;        // largest τ tried (L_t raised instead of capping τ)
  bool stalled = false;            // the ω line search found no step within 200 τ ← τ/η
                                   // (rounding floor reached); the last iterate is returned
  uint64_t cached_products = 0;      // X_h v_h, X_h g_h vectors the budget had room for (of 2t)
  uint64_t recomputed_products = 0;  // batch products formed again because they were not kept
  uint64_t touched_rows = 0;         // |R|: rows some selected column touches (swept row by row)
  uint64_t product_entries = 0;      // Σ_h |R_h|: entries of one X_h x_h per batch
  int reductions = 0;                // RowSumReduction calls (collectives of a distributed solve)
  int parts_extended = 0;            // proximal Newton: parts whose rows extended the last solve's kept rows
};

// Solves (31) over the columns in `cache`, warm-started from `state` (resized
// to cache.num_columns() with zeros for new columns), writing the solution back
// to `state`. `labels` holds n values: ±1, or 0 for a row outside this fit (a
// held-out fold, a row of no concern): such a row adds nothing to P or ∇P. On return `decision` (n entries) holds
// d_i = w'x_i − b at the solution.
// Cost: per iteration O(nnz + |R|) for the nnz nonzeros of the selected
// columns and the |R| rows they touch — nothing proportional to n; the rows
// no selected column touches enter as two counts (apg.cpp). Per solve, O(n)
// for the labels and the `decision` output.
// Working memory is reserved from `budget`: the columns re-indexed by the
// touched rows and per-row vectors over them, O(nnz + |R|) (an out-of-memory
// error if they do not fit), an n-bit bitmap while the layout is built, and
// as much of the Section 5.5 inner-product cache (X_h v_h and X_h ∇_h P per
// batch, on the rows batch h touches) as fits; the rest is recomputed, with
// a bit-identical result.
ApgResult solve_apg(const SelectedFeatureCache& cache, const int8_t* labels,
                    const ApgOptions& options, ApgState& state, std::vector<double>& decision,
                    MemoryBudget& budget);

// One part of the rows of a solve over row parts: its rows of the selected
// columns (`cache`: every part has the same columns and batches), their
// labels (as above) and where its decision values go.
// How the solver indexes the selected columns' rows (solvers/apg_layout.h):
// per batch the smallest exact form, or one form for every batch (for tests:
// every form gives the same bits).
enum class ApgRowIndex : uint8_t { kSmallest, kListed, kRanked };

// For tests: the index form of the layouts built afterwards for parts that ask for kSmallest.
void force_apg_row_index(ApgRowIndex index);

struct ApgRowPart {
  const SelectedFeatureCache* cache = nullptr;
  const int8_t* labels = nullptr;
  std::vector<double>* decision = nullptr;
  ApgRowIndex row_index = ApgRowIndex::kSmallest;
};

// The same solver over rows split into parts (the row partitions a rank of a
// distributed run holds, docs/distributed.md): every sum over rows is taken
// per part and the parts' sums are added by `reduction` (apg_reduction.h),
// so all processes reducing together take the same steps. The single-store
// solve_apg above is the one-part case with LocalRowSums. A batched
// reduction evaluates several line-search trials per call (and, without a
// bias, F's loss with them): the same iterates, fewer collectives (about two
// per iteration). Working memory as above, per part.
ApgResult solve_apg(const std::vector<ApgRowPart>& parts, RowSumReduction& reduction, const ApgOptions& options,
                    ApgState& state, MemoryBudget& budget);

// Every part's decision values d = w'x − b at `state`, bit for bit those
// solve_apg(parts, ...) returned when it ended at `state` (a resumed run
// rebuilds its duals from them instead of storing them).
void apg_decision_values(const std::vector<ApgRowPart>& parts, const ApgOptions& options, const ApgState& state,
                         MemoryBudget& budget);

// Theorem 3: α from decision values.
void dual_from_decision(Loss loss, double C, const int8_t* labels,
                        const std::vector<double>& decision, std::vector<double>& alpha);

// F's loss part P for given decision values (used by the driver and tests).
double loss_value(Loss loss, double C, const int8_t* labels, const std::vector<double>& decision);

// Algorithm 3 (Moreau projection of ½(Σ_h‖ω_h‖)², problem (34)): given the
// group norms ô_h = ‖u_h‖ and s = 1/τ, returns the scale factor of each group
// (o_h / ô_h, 0 for groups that vanish or have norm 0), so that
// S_τ(u)_h = scale_h · u_h.
std::vector<double> moreau_group_scales(const std::vector<double>& group_norms, double s);

}  // namespace fgm
