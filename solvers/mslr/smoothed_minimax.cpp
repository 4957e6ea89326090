#include "solvers/mslr/smoothed_minimax.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/interrupt.h"
#include "solvers/apg_reduction.h"
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
    cache.column(k).for_each([&](uint32_t row, float) { ++rows.row_begin[row + 1]; });
  }
  for (uint64_t i = 0; i < rows.n_rows; ++i) rows.row_begin[i + 1] += rows.row_begin[i];
  rows.column.resize(nnz);
  rows.value.resize(nnz);
  std::vector<uint64_t> next(rows.row_begin.begin(), rows.row_begin.end() - 1);
  for (uint32_t k = 0; k < rows.n_columns; ++k) {  // columns in order: each row's entries by column
    cache.column(k).for_each([&](uint32_t row, float value) {
      const uint64_t at = next[row]++;
      rows.column[at] = k;
      rows.value[at] = value;
    });
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

// Bit t of member[k] is set iff selected column k is in d^t.
std::vector<uint64_t> constraint_membership(const std::vector<std::vector<uint32_t>>& constraints, uint32_t n_columns) {
  std::vector<uint64_t> member(n_columns, 0);
  for (size_t t = 0; t < constraints.size(); ++t)
    for (uint32_t k : constraints[t]) {
      FGM_ASSERT(k < n_columns);
      member[k] |= uint64_t{1} << t;
    }
  return member;
}

// e_t = ½‖c∘d^t‖² for every constraint.
void half_norms_of(const std::vector<double>& c, const std::vector<uint64_t>& member, std::vector<double>& e) {
  std::fill(e.begin(), e.end(), 0.0);
  for (size_t k = 0; k < c.size(); ++k)
    for (uint64_t m = member[k]; m; m &= m - 1) e[__builtin_ctzll(m)] += 0.5 * c[k] * c[k];
}

// One row part during a solve: its sweep order and generator, and the
// coordinate steps over its rows against a model (c, e) it is handed.
class PartSweeper {
 public:
  PartSweeper(const MinimaxPart& part, uint32_t partition, const std::vector<uint64_t>& member,
              const MinimaxOptions& options, MemoryBudget* budget);
  // One pass over the rows at smoothing q with CoCoA+ scaling `sigma`,
  // updating α, β and the model (c, e) it steps on; returns the largest
  // |∂G/∂α_i| seen before a step.
  double sweep(double q, double sigma, std::vector<double>& c, std::vector<double>& e);
  // A_k α_k: Σ over the part's rows of α_i y_i x_i, in row order.
  std::vector<double> products() const;
  // [Σ ln(1 + exp(−y_i w'x_i)), H_k(α), Newton steps, bisections] of the part.
  std::vector<double> certificate_sums(const std::vector<double>& weights) const;
  // Remembers α and C − α before a round's sweep.
  void keep_start();
  // H_k(α₀ + τ(α − α₀)) for each τ (α₀ kept by keep_start); −∞ for a τ
  // that takes a coordinate out of (0, C).
  std::vector<double> entropy_along(const std::vector<double>& taus) const;
  // α ← α₀ + τ(α − α₀), and C − α likewise from its own start.
  void extrapolate(double tau);

 private:
  void coordinate_step(uint64_t i, double q, double sigma, std::vector<double>& c, std::vector<double>& e,
                       double& largest_gradient);

  const SelectedRows& rows_;
  const int8_t* y_;
  std::vector<double>& alpha_;
  std::vector<double>& beta_;
  const std::vector<uint64_t>& member_;
  const MinimaxOptions& options_;
  std::vector<double> a_, b_, scaled_a_, scaled_e_, scratch_;
  Reservation order_memory_, start_memory_;
  std::vector<uint32_t> order_;  // rows with label ±1, permuted before each sweep (shuffle)
  std::vector<double> alpha_start_, beta_start_;  // α and C − α before the round (P > 1)
  uint64_t random_state_;
  uint64_t newton_steps_ = 0, bisections_ = 0;
  MemoryBudget* budget_;

  // splitmix64, reduced to [0, bound) (the tiny modulo bias does not matter here).
  uint64_t random_below(uint64_t bound) {
    uint64_t z = (random_state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (z ^ (z >> 31)) % bound;
  }
};

PartSweeper::PartSweeper(const MinimaxPart& part, uint32_t partition, const std::vector<uint64_t>& member,
                         const MinimaxOptions& options, MemoryBudget* budget)
    : rows_(*part.rows),
      y_(part.labels),
      alpha_(*part.alpha),
      beta_(*part.beta),
      member_(member),
      options_(options),
      // Partition 0 starts where the single-store solver does; the others
      // from their own fixed seeds, so the orders depend on P only.
      random_state_(0x9e3779b97f4a7c15ULL + uint64_t{partition} * 0xd1b54a32d192ed03ULL),
      budget_(budget) {
  FGM_ASSERT(alpha_.size() == rows_.n_rows && beta_.size() == rows_.n_rows);
  if (options.shuffle) {
    if (budget) order_memory_ = budget->reserve(rows_.n_rows * sizeof(uint32_t), "MSLR sweep order");
    for (uint64_t i = 0; i < rows_.n_rows; ++i)
      if (y_[i] != 0) order_.push_back(static_cast<uint32_t>(i));
  }
}

std::vector<double> PartSweeper::products() const {
  std::vector<double> c(rows_.n_columns, 0.0);
  for (uint64_t i = 0; i < rows_.n_rows; ++i) {
    if (y_[i] == 0) continue;
    const double ay = alpha_[i] * y_[i];
    for (uint64_t e = rows_.row_begin[i]; e < rows_.row_begin[i + 1]; ++e) c[rows_.column[e]] += ay * rows_.value[e];
  }
  return c;
}

std::vector<double> PartSweeper::certificate_sums(const std::vector<double>& weights) const {
  double loss = 0;
  for (uint64_t i = 0; i < rows_.n_rows; ++i) {
    if (y_[i] == 0) continue;
    double decision = 0;
    for (uint64_t e = rows_.row_begin[i]; e < rows_.row_begin[i + 1]; ++e)
      decision += weights[rows_.column[e]] * rows_.value[e];
    loss += detail::softplus(-y_[i] * decision);
  }
  return {loss, dual_entropy(y_, alpha_, beta_, options_.C), double(newton_steps_), double(bisections_)};
}

// Row i's step on G_k: a_t, b_t from its entries and the model c, Algorithm 3
// on the scaled problem (q' = σq, e' = e/σ, a' = σa; exact for σ = 1), then
// c and e updated by σ times the change of α_i. `largest_gradient` collects
// |∂G/∂α_i| before the step.
void PartSweeper::coordinate_step(uint64_t i, double q, double sigma, std::vector<double>& c, std::vector<double>& e,
                                  double& largest_gradient) {
  const size_t T = e.size();
  a_.assign(T, 0.0);
  b_.assign(T, 0.0);
  scaled_a_.resize(T);
  scaled_e_.resize(T);
  scratch_.resize(2 * T);
  const uint64_t begin = rows_.row_begin[i], end = rows_.row_begin[i + 1];
  for (uint64_t at = begin; at < end; ++at) {
    const double x = rows_.value[at];
    const uint32_t k = rows_.column[at];
    for (uint64_t m = member_[k]; m; m &= m - 1) {
      const int t = __builtin_ctzll(m);
      a_[t] += x * x;
      b_[t] += c[k] * x;
    }
  }
  const double y = y_[i];
  for (size_t t = 0; t < T; ++t) {
    b_[t] *= y;
    scaled_a_[t] = sigma * a_[t];
    scaled_e_[t] = e[t] / sigma;
  }
  CoordinateProblem p;
  p.c1 = alpha_[i];
  p.c2 = beta_[i];
  p.a = scaled_a_.data();
  p.b = b_.data();
  p.e = scaled_e_.data();
  p.T = T;
  p.q = sigma * q;
  const double gradient = coordinate_gradient(p, 0.0, scratch_.data());
  largest_gradient = std::max(largest_gradient, std::fabs(gradient));
  if (std::fabs(gradient) < options_.newton_tolerance) return;
  const NewtonBisectionResult r =
      newton_bisection(p, options_.newton_tolerance, options_.newton_max_iterations, scratch_.data());
  newton_steps_ += r.iterations;
  bisections_ += r.bisections;
  // The step from the side that moved the small one of the pair.
  const double dz = r.z1 <= r.z2 ? r.z1 - p.c1 : p.c2 - r.z2;
  alpha_[i] = r.z1;
  beta_[i] = r.z2;
  if (dz == 0) return;
  const double step = sigma * dz;
  for (uint64_t at = begin; at < end; ++at) c[rows_.column[at]] += step * y * rows_.value[at];
  for (size_t t = 0; t < T; ++t) e[t] += step * (b_[t] + 0.5 * scaled_a_[t] * dz);
}

void PartSweeper::keep_start() {
  if (alpha_start_.empty() && budget_)
    start_memory_ = budget_->reserve(2 * rows_.n_rows * sizeof(double), "MSLR round starts");
  alpha_start_ = alpha_;
  beta_start_ = beta_;
}

std::vector<double> PartSweeper::entropy_along(const std::vector<double>& taus) const {
  std::vector<double> h(taus.size(), 0.0);
  for (uint64_t i = 0; i < rows_.n_rows; ++i) {
    if (y_[i] == 0) continue;
    for (size_t k = 0; k < taus.size(); ++k) {
      const double a = alpha_start_[i] + taus[k] * (alpha_[i] - alpha_start_[i]);
      const double b = beta_start_[i] + taus[k] * (beta_[i] - beta_start_[i]);
      if (!(a > 0 && b > 0)) h[k] = -HUGE_VAL;
      else h[k] -= a * std::log(a / options_.C) + b * std::log(b / options_.C);
    }
  }
  return h;
}

void PartSweeper::extrapolate(double tau) {
  for (uint64_t i = 0; i < rows_.n_rows; ++i) {
    if (y_[i] == 0) continue;
    alpha_[i] = alpha_start_[i] + tau * (alpha_[i] - alpha_start_[i]);
    beta_[i] = beta_start_[i] + tau * (beta_[i] - beta_start_[i]);
  }
}

double PartSweeper::sweep(double q, double sigma, std::vector<double>& c, std::vector<double>& e) {
  double largest = 0;
  if (!options_.shuffle) {
    for (uint64_t i = 0; i < rows_.n_rows; ++i)
      if (y_[i] != 0) coordinate_step(i, q, sigma, c, e, largest);
  } else {
    // Fisher–Yates with a fixed-seed generator: the same orders on every run.
    for (size_t k = order_.size(); k > 1; --k) std::swap(order_[k - 1], order_[random_below(k)]);
    for (uint32_t i : order_) coordinate_step(i, q, sigma, c, e, largest);
  }
  return largest;
}

// One solve: the shared model (c, e), the parts, and the stage loop.
class SmoothedMinimax {
 public:
  SmoothedMinimax(const std::vector<MinimaxPart>& parts, PartitionLayout layout, RowSumReduction& reduction,
                  const std::vector<std::vector<uint32_t>>& constraints, const MinimaxOptions& options,
                  MemoryBudget* budget);
  MinimaxResult solve();

 private:
  void recompute_products();
  double round(double q);
  double extrapolation(double q, const std::vector<double>& change);
  void certify(double q);

  const uint32_t partitions_;
  RowSumReduction& reduction_;
  const MinimaxOptions& options_;
  const size_t T_;
  const uint32_t n_columns_;
  const std::vector<uint64_t> member_;
  std::vector<PartSweeper> parts_;
  bool certified_ = false;  // the best bounds below hold a certificate
  MinimaxResult out_;
};

SmoothedMinimax::SmoothedMinimax(const std::vector<MinimaxPart>& parts, PartitionLayout layout,
                                 RowSumReduction& reduction, const std::vector<std::vector<uint32_t>>& constraints,
                                 const MinimaxOptions& options, MemoryBudget* budget)
    : partitions_(layout.partitions),
      reduction_(reduction),
      options_(options),
      T_(constraints.size()),
      n_columns_(parts.empty() ? 0 : parts.front().rows->n_columns),
      member_(constraint_membership(constraints, n_columns_)) {
  FGM_ASSERT(T_ >= 1 && T_ <= kMaxConstraints);
  FGM_ASSERT(options.stall_sweeps >= 1);
  FGM_ASSERT(!parts.empty() && layout.first_partition + parts.size() <= layout.partitions);
  parts_.reserve(parts.size());
  for (size_t k = 0; k < parts.size(); ++k) {
    FGM_ASSERT(parts[k].rows->n_columns == n_columns_);
    parts_.emplace_back(parts[k], layout.first_partition + static_cast<uint32_t>(k), member_, options, budget);
  }
  out_.half_norms.resize(T_);
  out_.mu.resize(T_);
}

// c and e from α, summed afresh (the sweeps update them incrementally).
void SmoothedMinimax::recompute_products() {
  std::vector<std::vector<double>> local;
  for (const PartSweeper& part : parts_) local.push_back(part.products());
  out_.c = reduction_.sum(local, n_columns_);
  half_norms_of(out_.c, member_, out_.half_norms);
}

// One sweep of every partition. With one partition it steps on the shared
// model itself (the single-store solver); with P > 1 each steps on its own
// copy with σ' = P, and the copies' changes, divided by σ', are added in the
// partition tree (CoCoA+ adding; header). Returns the largest gradient seen
// on any partition.
double SmoothedMinimax::round(double q) {
  double largest = 0;
  if (partitions_ == 1) {
    largest = parts_.front().sweep(q, 1.0, out_.c, out_.half_norms);
  } else {
    const double sigma = partitions_;
    std::vector<std::vector<double>> changes;
    for (PartSweeper& part : parts_) {
      part.keep_start();
      std::vector<double> c = out_.c, e = out_.half_norms;
      largest = std::max(largest, part.sweep(q, sigma, c, e));
      for (uint32_t k = 0; k < n_columns_; ++k) c[k] = (c[k] - out_.c[k]) / sigma;
      changes.push_back(std::move(c));
    }
    const std::vector<double> change = reduction_.sum(changes, n_columns_);
    const double tau = extrapolation(q, change);
    for (uint32_t k = 0; k < n_columns_; ++k) out_.c[k] += tau * change[k];
    half_norms_of(out_.c, member_, out_.half_norms);
  }
  ++out_.sweeps;
  return reduction_.max(largest);
}

// The step τ·Δ along the round's combined change Δ that minimises the smoothed
// objective f(c + τΔc) − H(α + τΔα) over τ ∈ {1, 2, 4, …, 2P} (τ = 1 is the
// CoCoA+ step, which descends; a longer one is taken when it descends
// further): σ' = P is safe for the partitions' common direction but damps the
// directions they do not share P-fold. One reduction of the trials' entropies;
// ties go to the shorter step. Applies τ to α (the caller to c).
double SmoothedMinimax::extrapolation(double q, const std::vector<double>& change) {
  std::vector<double> taus;
  for (double tau = 1; tau <= 2.0 * partitions_ * (1 + 1e-12); tau *= 2) taus.push_back(tau);
  std::vector<std::vector<double>> local;
  for (const PartSweeper& part : parts_) local.push_back(part.entropy_along(taus));
  const std::vector<double> entropy = reduction_.sum(local, taus.size());
  std::vector<double> c(n_columns_), e(T_), scratch(T_);
  size_t best = 0;
  double best_value = INFINITY;
  for (size_t k = 0; k < taus.size(); ++k) {
    if (entropy[k] == -HUGE_VAL) continue;
    for (uint32_t j = 0; j < n_columns_; ++j) c[j] = out_.c[j] + taus[k] * change[j];
    half_norms_of(c, member_, e);
    const double value = softmax_weights(e.data(), T_, q, scratch.data()) - entropy[k];
    if (value < best_value) {
      best_value = value;
      best = k;
    }
  }
  if (best != 0)
    for (PartSweeper& part : parts_) part.extrapolate(taus[best]);
  return taus[best];
}

// μ = λ(α, q), d̄, w = d̄∘c, and the certified gap (P − D)/P (header).
// Both bounds are valid at every stage, so the best of each is kept: at very
// large q the weights λ react to rounding in e_t and P can get worse while D
// still improves. The model (μ, d̄, weights) is the one of the best P.
void SmoothedMinimax::certify(double q) {
  std::vector<double> mu(T_), scale(n_columns_, 0.0), weights(n_columns_, 0.0);
  softmax_weights(out_.half_norms.data(), T_, q, mu.data());
  double regularizer = 0;
  for (uint32_t k = 0; k < n_columns_; ++k) {
    for (uint64_t m = member_[k]; m; m &= m - 1) scale[k] += mu[__builtin_ctzll(m)];
    weights[k] = scale[k] * out_.c[k];
    regularizer += 0.5 * scale[k] * out_.c[k] * out_.c[k];
  }
  std::vector<std::vector<double>> local;
  for (const PartSweeper& part : parts_) local.push_back(part.certificate_sums(weights));
  const std::vector<double> sums = reduction_.sum(local, 4);
  out_.newton_steps = static_cast<uint64_t>(sums[2]);
  out_.bisections = static_cast<uint64_t>(sums[3]);
  const double primal = regularizer + options_.C * sums[0];
  if (!certified_ || primal < out_.primal) {
    out_.primal = primal;
    out_.mu = std::move(mu);
    out_.scale = std::move(scale);
    out_.weights = std::move(weights);
  }
  const double largest = *std::max_element(out_.half_norms.begin(), out_.half_norms.end());
  const double dual = sums[1] - largest;
  if (!certified_ || dual > out_.dual) out_.dual = dual;
  certified_ = true;
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
  // A round over P partitions moves the directions they do not share about
  // 1/P as far as a sequential sweep: a stage gets P blocks of max_sweeps
  // rounds (certified after each block, so a solved problem stops early),
  // and q is not raised (the stiffer problem) before the smoothed one is
  // solved. One partition: one block, the single-store stage.
  const int stall_rounds = options_.stall_sweeps * static_cast<int>(partitions_);
  for (;;) {
    check_interrupt();
    out_.q = q;
    ++out_.stages;
    bool solved = false;
    for (uint32_t block = 0; block < partitions_ && !solved && !out_.converged; ++block) {
      for (int s = 0; s < options_.max_sweeps && !solved; ++s) solved = round(q) <= options_.gradient_tolerance;
      recompute_products();  // drop the incremental updates' rounding
      certify(q);
      out_.converged = out_.relative_gap <= options_.tolerance;
    }
    if (out_.converged) break;
    if (out_.relative_gap < 0.9 * best_gap) {
      best_gap = out_.relative_gap;
      best_gap_sweeps = out_.sweeps;
    } else if (out_.sweeps - best_gap_sweeps >= stall_rounds) {
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

MinimaxResult solve_smoothed_minimax(const std::vector<MinimaxPart>& parts, PartitionLayout layout,
                                     RowSumReduction& reduction,
                                     const std::vector<std::vector<uint32_t>>& constraints,
                                     const MinimaxOptions& options, MemoryBudget* budget) {
  SmoothedMinimax solver(parts, layout, reduction, constraints, options, budget);
  return solver.solve();
}

MinimaxResult solve_smoothed_minimax(const SelectedRows& rows, const int8_t* labels,
                                     const std::vector<std::vector<uint32_t>>& constraints,
                                     const MinimaxOptions& options, std::vector<double>& alpha,
                                     std::vector<double>& beta, MemoryBudget* budget) {
  LocalRowSums one_process;
  return solve_smoothed_minimax({MinimaxPart{&rows, labels, &alpha, &beta}}, PartitionLayout{}, one_process,
                                constraints, options, budget);
}

}  // namespace fgm::mslr
