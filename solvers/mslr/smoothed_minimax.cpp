#include "solvers/mslr/smoothed_minimax.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "solvers/losses.h"
#include "solvers/mslr/newton_bisection.h"

namespace fgm::mslr {

SelectedRows SelectedRows::from_cache(const SelectedFeatureCache& cache, MemoryBudget& budget) {
  SelectedRows rows;
  rows.n_rows = cache.n_rows();
  rows.n_columns = static_cast<uint32_t>(cache.num_columns());
  const uint64_t nnz = cache.total_nnz();
  rows.memory = budget.reserve((rows.n_rows + 1) * sizeof(uint64_t) + nnz * (sizeof(uint32_t) + sizeof(float)),
                               "MSLR selected columns by row", "lower mslr.r or mslr.max_iterations");
  rows.row_begin.assign(rows.n_rows + 1, 0);
  for (uint32_t k = 0; k < rows.n_columns; ++k) {
    const SparseColumnView col = cache.column(k);
    for (uint64_t e = 0; e < col.nnz; ++e) ++rows.row_begin[col.rows[e] + 1];
  }
  for (uint64_t i = 0; i < rows.n_rows; ++i) rows.row_begin[i + 1] += rows.row_begin[i];
  rows.column.resize(nnz);
  rows.value.resize(nnz);
  std::vector<uint64_t> next(rows.row_begin.begin(), rows.row_begin.end() - 1);
  for (uint32_t k = 0; k < rows.n_columns; ++k) {  // columns in order: each row's entries by column
    const SparseColumnView col = cache.column(k);
    for (uint64_t e = 0; e < col.nnz; ++e) {
      const uint64_t at = next[col.rows[e]]++;
      rows.column[at] = k;
      rows.value[at] = col.values[e];
    }
  }
  return rows;
}

double dual_entropy(const int8_t* labels, const std::vector<double>& alpha, const std::vector<double>& beta,
                    double C) {
  double h = 0;
  for (size_t i = 0; i < alpha.size(); ++i)
    if (labels[i] != 0) {
      // x ln x → 0 at x = 0: a coordinate rounded to 0 must not make H NaN.
      if (alpha[i] > 0) h -= alpha[i] * std::log(alpha[i] / C);
      if (beta[i] > 0) h -= beta[i] * std::log(beta[i] / C);
    }
  return h;
}

namespace {

// One solve: the state the sweeps update (c, e) and the fixed problem data.
class SmoothedMinimax {
 public:
  SmoothedMinimax(const SelectedRows& rows, const int8_t* labels,
                  const std::vector<std::vector<uint32_t>>& constraints, const MinimaxOptions& options,
                  std::vector<double>& alpha, std::vector<double>& beta, MemoryBudget* budget);
  MinimaxResult solve();

 private:
  void recompute_products();
  double sweep(double q);
  void coordinate_step(uint64_t i, double q, double& largest_gradient);
  void certify(double q);

  const SelectedRows& rows_;
  const int8_t* y_;
  const MinimaxOptions& options_;
  std::vector<double>& alpha_;
  std::vector<double>& beta_;
  const size_t T_;
  std::vector<uint64_t> member_;  // per column: bit t set iff the column is in d^t
  std::vector<double> a_, b_, scratch_;
  Reservation order_memory_;
  std::vector<uint32_t> order_;  // rows with label ±1, permuted before each sweep (shuffle)
  uint64_t random_state_ = 0x9e3779b97f4a7c15ULL;
  MinimaxResult out_;

  // splitmix64, reduced to [0, bound) (the tiny modulo bias does not matter here).
  uint64_t random_below(uint64_t bound) {
    uint64_t z = (random_state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (z ^ (z >> 31)) % bound;
  }
};

SmoothedMinimax::SmoothedMinimax(const SelectedRows& rows, const int8_t* labels,
                                 const std::vector<std::vector<uint32_t>>& constraints,
                                 const MinimaxOptions& options, std::vector<double>& alpha,
                                 std::vector<double>& beta, MemoryBudget* budget)
    : rows_(rows), y_(labels), options_(options), alpha_(alpha), beta_(beta), T_(constraints.size()) {
  FGM_ASSERT(T_ >= 1 && T_ <= kMaxConstraints);
  FGM_ASSERT(options.stall_sweeps >= 1);
  FGM_ASSERT(alpha.size() == rows.n_rows && beta.size() == rows.n_rows);
  member_.assign(rows.n_columns, 0);
  for (size_t t = 0; t < T_; ++t)
    for (uint32_t k : constraints[t]) {
      FGM_ASSERT(k < rows.n_columns);
      member_[k] |= uint64_t{1} << t;
    }
  a_.resize(T_);
  b_.resize(T_);
  scratch_.resize(2 * T_);
  out_.half_norms.resize(T_);
  out_.mu.resize(T_);
  if (options.shuffle) {
    if (budget) order_memory_ = budget->reserve(rows.n_rows * sizeof(uint32_t), "MSLR sweep order");
    for (uint64_t i = 0; i < rows.n_rows; ++i)
      if (labels[i] != 0) order_.push_back(static_cast<uint32_t>(i));
  }
}

// c and e from α, summed afresh (the sweeps update them incrementally).
void SmoothedMinimax::recompute_products() {
  out_.c.assign(rows_.n_columns, 0.0);
  for (uint64_t i = 0; i < rows_.n_rows; ++i) {
    if (y_[i] == 0) continue;
    const double ay = alpha_[i] * y_[i];
    for (uint64_t e = rows_.row_begin[i]; e < rows_.row_begin[i + 1]; ++e)
      out_.c[rows_.column[e]] += ay * rows_.value[e];
  }
  std::fill(out_.half_norms.begin(), out_.half_norms.end(), 0.0);
  for (uint32_t k = 0; k < rows_.n_columns; ++k)
    for (uint64_t m = member_[k]; m; m &= m - 1) out_.half_norms[__builtin_ctzll(m)] += 0.5 * out_.c[k] * out_.c[k];
}

// Row i's step: a_t, b_t from its entries, Algorithm 3, then c and e updated
// by the change of α_i. `largest_gradient` collects |∂f(α,q)/∂α_i| before the step.
void SmoothedMinimax::coordinate_step(uint64_t i, double q, double& largest_gradient) {
  std::fill(a_.begin(), a_.end(), 0.0);
  std::fill(b_.begin(), b_.end(), 0.0);
  const uint64_t begin = rows_.row_begin[i], end = rows_.row_begin[i + 1];
  for (uint64_t e = begin; e < end; ++e) {
    const double x = rows_.value[e];
    const uint32_t k = rows_.column[e];
    for (uint64_t m = member_[k]; m; m &= m - 1) {
      const int t = __builtin_ctzll(m);
      a_[t] += x * x;
      b_[t] += out_.c[k] * x;
    }
  }
  const double y = y_[i];
  for (size_t t = 0; t < T_; ++t) b_[t] *= y;
  CoordinateProblem p;
  p.c1 = alpha_[i];
  p.c2 = beta_[i];
  p.a = a_.data();
  p.b = b_.data();
  p.e = out_.half_norms.data();
  p.T = T_;
  p.q = q;
  const double gradient = coordinate_gradient(p, 0.0, scratch_.data());
  largest_gradient = std::max(largest_gradient, std::fabs(gradient));
  if (std::fabs(gradient) < options_.newton_tolerance) return;
  const NewtonBisectionResult r =
      newton_bisection(p, options_.newton_tolerance, options_.newton_max_iterations, scratch_.data());
  out_.newton_steps += r.iterations;
  out_.bisections += r.bisections;
  // The step from the side that moved the small one of the pair.
  const double dz = r.z1 <= r.z2 ? r.z1 - p.c1 : p.c2 - r.z2;
  alpha_[i] = r.z1;
  beta_[i] = r.z2;
  if (dz == 0) return;
  for (uint64_t e = begin; e < end; ++e) out_.c[rows_.column[e]] += dz * y * rows_.value[e];
  for (size_t t = 0; t < T_; ++t) out_.half_norms[t] += dz * (b_[t] + 0.5 * a_[t] * dz);
}

// One cyclic pass over the rows; returns the largest |∂f(α,q)/∂α_i| seen.
double SmoothedMinimax::sweep(double q) {
  double largest = 0;
  if (!options_.shuffle) {
    for (uint64_t i = 0; i < rows_.n_rows; ++i)
      if (y_[i] != 0) coordinate_step(i, q, largest);
  } else {
    // Fisher–Yates with a fixed-seed generator: the same orders on every run.
    for (size_t k = order_.size(); k > 1; --k) std::swap(order_[k - 1], order_[random_below(k)]);
    for (uint32_t i : order_) coordinate_step(i, q, largest);
  }
  ++out_.sweeps;
  return largest;
}

// μ = λ(α, q), d̄, w = d̄∘c, and the certified gap (P − D)/P (header).
// Both bounds are valid at every stage, so the best of each is kept: at very
// large q the weights λ react to rounding in e_t and P can get worse while D
// still improves. The model (μ, d̄, weights) is the one of the best P.
void SmoothedMinimax::certify(double q) {
  std::vector<double> mu(T_), scale(rows_.n_columns, 0.0), weights(rows_.n_columns, 0.0);
  softmax_weights(out_.half_norms.data(), T_, q, mu.data());
  double regularizer = 0;
  for (uint32_t k = 0; k < rows_.n_columns; ++k) {
    for (uint64_t m = member_[k]; m; m &= m - 1) scale[k] += mu[__builtin_ctzll(m)];
    weights[k] = scale[k] * out_.c[k];
    regularizer += 0.5 * scale[k] * out_.c[k] * out_.c[k];
  }
  double loss = 0;
  for (uint64_t i = 0; i < rows_.n_rows; ++i) {
    if (y_[i] == 0) continue;
    double decision = 0;
    for (uint64_t e = rows_.row_begin[i]; e < rows_.row_begin[i + 1]; ++e)
      decision += weights[rows_.column[e]] * rows_.value[e];
    loss += detail::softplus(-y_[i] * decision);
  }
  const double primal = regularizer + options_.C * loss;
  if (out_.stages == 1 || primal < out_.primal) {
    out_.primal = primal;
    out_.mu = std::move(mu);
    out_.scale = std::move(scale);
    out_.weights = std::move(weights);
  }
  const double largest = *std::max_element(out_.half_norms.begin(), out_.half_norms.end());
  const double dual = dual_entropy(y_, alpha_, beta_, options_.C) - largest;
  if (out_.stages == 1 || dual > out_.dual) out_.dual = dual;
  // A bound that is not finite certifies nothing (std::max(0, NaN) would be 0).
  if (!std::isfinite(out_.primal) || !std::isfinite(out_.dual)) out_.relative_gap = INFINITY;
  else out_.relative_gap = out_.primal > 0 ? std::max(0.0, out_.primal - out_.dual) / out_.primal : 0.0;
}

// Stages at one q until the smoothed problem is solved, then a larger q.
// At the minimiser of f(·, q) the certified gap P − D is at most ln(T)/q
// (μ = λ(α, q) makes α the minimiser of Σ μ_t f_t, and max_t f_t − Σ μ_t f_t
// ≤ entropy(μ)/q), so a larger gap means the sweeps are not done: q is raised
// only when a stage reached the gradient tolerance or P − D ≤ 2 ln(T)/q.
// Raising q earlier made the coordinate steps stiff before α had come near
// the optimum, and on news20 three subproblems never certified (2800 sweeps
// to q_max, objective ten times their neighbours'; tests/solvers/test_mslr_minimax.cpp).
// The solve gives up (not converged, best bounds kept) when q would pass
// q_max or the relative gap has not shrunk by a tenth in stall_sweeps sweeps.
MinimaxResult SmoothedMinimax::solve() {
  recompute_products();
  const double smoothing_error_per_q = std::log(static_cast<double>(T_));
  double q = options_.q0;
  double best_gap = INFINITY;
  int best_gap_sweeps = 0;  // out_.sweeps when best_gap was set
  for (;;) {
    out_.q = q;
    ++out_.stages;
    bool solved = false;
    for (int s = 0; s < options_.max_sweeps && !solved; ++s) solved = sweep(q) <= options_.gradient_tolerance;
    recompute_products();  // drop the incremental updates' rounding
    certify(q);
    if (out_.relative_gap <= options_.tolerance) {
      out_.converged = true;
      break;
    }
    if (out_.relative_gap < 0.9 * best_gap) {
      best_gap = out_.relative_gap;
      best_gap_sweeps = out_.sweeps;
    } else if (out_.sweeps - best_gap_sweeps >= options_.stall_sweeps) {
      break;
    }
    const bool smoothing_limited = out_.primal - out_.dual <= 2 * smoothing_error_per_q / q;
    if (solved || smoothing_limited) {
      if (q * options_.q_factor > options_.q_max) break;
      q *= options_.q_factor;
    }
  }
  return std::move(out_);
}

}  // namespace

MinimaxResult solve_smoothed_minimax(const SelectedRows& rows, const int8_t* labels,
                                     const std::vector<std::vector<uint32_t>>& constraints,
                                     const MinimaxOptions& options, std::vector<double>& alpha,
                                     std::vector<double>& beta, MemoryBudget* budget) {
  SmoothedMinimax solver(rows, labels, constraints, options, alpha, beta, budget);
  return solver.solve();
}

}  // namespace fgm::mslr
