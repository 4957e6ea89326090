// Proximal Newton for the FGM subproblem (31) when few columns are selected:
// the second-order alternative to the APG of apg.h, with the same interface,
// warm start and certificate.
//
// Each iteration forms, at the current (ω, b), the gradient g of P and its
// (generalised) Hessian H = X̃'DX̃ over the selected columns (X̃ = [X, −1],
// D_ii = ∂²φ/∂d², C·[m_i < 1] for the squared hinge), minimises the model
//   g'Δ + ½ Δ'HΔ + ½(Σ_h ‖ω_h + Δ_h‖)²
// over Δ by FISTA on the dense (d+1)-dimensional quadratic (no pass over the
// data), and takes the largest step s ∈ {1, ½, ¼, …} with the Armijo
// decrease of proximal Newton methods (Lee, Sun, Saunders, SIAM J. Optim.
// 2014). It stops on the certified relative duality gap of apg.h's dual point
// (rescaled Theorem 3 α), evaluated at every iterate from the gradient pass
// that the next step needs anyway. Converges superlinearly near the optimum,
// where the APG creeps; costs O(nnz) for the gradient and the step's X̃Δ, the
// Hessian's O(Σ_i k_i²) over the rows (k_i: selected entries of row i) —
// for the squared hinge only over the rows whose D_ii changed since the last
// iteration — and O(d²) per model iteration.
#pragma once

#include <cstddef>
#include <vector>

#include "solvers/apg.h"

namespace fgm {

// The largest column count the proximal Newton solver takes: its model is a
// dense (d+1)² matrix, and a model iteration costs O(d²).
constexpr size_t kProxNewtonMaxColumns = 2048;

// Solves (31) like solve_apg(parts, ...) (same state, decision outputs and
// result fields; `iterations` counts Newton steps) and stops when the
// certified relative gap is at most options.gap_tolerance (options.certify)
// or options.intermediate_gap (an intermediate solve, reported converged but
// not certified: "inexact"), or after options.max_iterations steps. Models are the same bits for any thread count
// and, with a partition-tree reduction, any rank count.
ApgResult solve_prox_newton(const std::vector<ApgRowPart>& parts, RowSumReduction& reduction,
                            const ApgOptions& options, ApgState& state, MemoryBudget& budget);

namespace detail {

// The merged rows the solver builds from the cache's columns, for tests:
// built from columns [0, stages[0]), then extended by [stages[0], stages[1]),
// and so on (as a run's solves extend them), walking rows in ranges of
// `range_rows` rows (a multiple of 4096) on `threads` threads. `merged` is
// false when merging stopped paying at some stage.
struct MergedRowsForTest {
  bool merged = false;
  uint64_t touched = 0, positive_untouched = 0, negative_untouched = 0;
  std::vector<uint32_t> first_row, weight, group;  // per merged row; per row
  std::vector<int8_t> label;
  std::vector<uint64_t> begin;   // entries of merged row g: [begin[g], begin[g + 1])
  std::vector<uint16_t> column;
  std::vector<float> value;      // empty when every value is 1
};
MergedRowsForTest merged_rows_for_test(const SelectedFeatureCache& cache, const int8_t* labels,
                                       const std::vector<size_t>& stages, uint64_t range_rows, int threads,
                                       MemoryBudget& budget);

// The plain (unmerged) rows of all the cache's columns, for tests: turned
// around by sorting their entries (`few`, what a solve does for columns with
// at most one entry per 16 rows) or by passes over every row; `merged` says
// whether merging them would pay (then a solve merges them instead).
// first_row lists the touched rows; weight and group stay empty.
MergedRowsForTest plain_rows_for_test(const SelectedFeatureCache& cache, const int8_t* labels, bool few,
                                      MemoryBudget& budget);

}  // namespace detail
}  // namespace fgm
