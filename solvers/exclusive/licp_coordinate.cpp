// Dual coordinate ascent for E-SVM (10) with disjoint groups (see the header).
// The columns are renumbered so that each group is one contiguous range (a
// column in no group is a range of its own with μ = 0), and the rows are kept
// as a CSR over the new numbering: a row's entries then meet each group's
// range in one run, so a step refreshes exactly the groups the row touches.
#include "solvers/exclusive/licp_coordinate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "core/error.h"
#include "core/interrupt.h"
#include "core/loop_rendezvous.h"
#include "core/simd/simd.h"
#include "solvers/exclusive/cone_projection.h"

namespace fgm::exclusive {

namespace {

// Newton's iteration for the threshold t of the ℓ1² prox, t = μΣ_S|c_j| /
// (1 + μ|S|) over S = {|c_j| > t}, from max(t0, 0); support_of(t, sum)
// returns |S| and sets sum = Σ_S|c_j|. The iterates are monotone after the
// first step, so the support shrinks each time: at most d + 2 steps. False
// if rounding made them cycle (the caller then sorts).
// support_of also sets `below` (the largest |c_j| ≤ t, −1 if none) and
// `above` (the smallest |c_j| > t, ∞ if none): when the first step lands
// between them the support cannot change and that pass is skipped (the same
// result as taking it).
template <class SupportOf>
bool newton_threshold(double mu, double t0, size_t d, SupportOf&& support_of, double& t) {
  double sum = 0, below = -1, above = std::numeric_limits<double>::infinity();
  t = std::max(t0, 0.0);
  size_t count = support_of(t, sum, below, above);
  if (const double next = mu * sum / (1.0 + mu * double(count)); below <= next && next < above) {
    t = next;
    return true;
  }
  for (size_t step = 0; step < d + 3; ++step) {
    const double next = mu * sum / (1.0 + mu * double(count));
    double next_sum = 0;
    const size_t next_count = support_of(next, next_sum, below, above);
    t = next;
    if (next_count == count) return true;
    count = next_count, sum = next_sum;
  }
  return false;
}

}  // namespace

size_t prox_l1_squared_newton(const double* c, size_t d, double mu, double* w, double& tau) {
  if (!(mu > 0)) {
    size_t support = 0;
    for (size_t j = 0; j < d; ++j) support += (w[j] = c[j]) != 0;
    tau = 0;
    return support;
  }
  auto support_of = [&](double t, double& sum, double& below, double& above) {
    size_t count = 0;
    sum = 0, below = -1, above = std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < d; ++j) {
      const double m = std::fabs(c[j]);
      if (m > t) sum += m, ++count, above = std::min(above, m);
      else below = std::max(below, m);
    }
    return count;
  };
  double t = 0;
  if (!newton_threshold(mu, tau, d, support_of, t)) {  // the sorting projection (Algorithm 2)
    ProjectionScratch scratch;
    prox_l1_squared(c, d, mu, w, scratch);
    double l1 = 0;
    size_t support = 0;
    for (size_t j = 0; j < d; ++j) l1 += std::fabs(w[j]), support += w[j] != 0;
    tau = mu * l1;
    return support;
  }
  tau = t;
  size_t support = 0;
  for (size_t j = 0; j < d; ++j) {
    const double m = std::fabs(c[j]);
    w[j] = m > t ? std::copysign(m - t, c[j]) : 0.0;
    support += w[j] != 0;
  }
  return support;
}

double best_loss_scale(ExclusiveLoss loss, const double* c, const double* m, size_t n, double omega) {
  FGM_ASSERT(omega > 0);
  const bool squared = loss == ExclusiveLoss::kSquaredHinge;
  // Row i is active (its slack c_i − s·m_i positive) on s < c_i/m_i when
  // m_i > 0, on s > c_i/m_i when m_i < 0. On an interval with a fixed active
  // set the derivative is −A + 2s·omega (hinge, A = Σ m_i) or
  // 2(−A + s(B + omega)) (squared, A = Σ m_i c_i, B = Σ m_i²).
  std::vector<std::pair<double, size_t>> kinks;
  double A = 0, B = 0;
  auto add = [&](size_t i, double sign) {
    A += sign * (squared ? m[i] * c[i] : m[i]);
    B += sign * m[i] * m[i];
  };
  for (size_t i = 0; i < n; ++i) {
    if (m[i] == 0) continue;
    if ((m[i] > 0 && c[i] > 0) || (m[i] < 0 && c[i] >= 0)) add(i, 1.0);
    if ((m[i] > 0 && c[i] > 0) || (m[i] < 0 && c[i] < 0)) kinks.push_back({c[i] / m[i], i});
  }
  std::sort(kinks.begin(), kinks.end());
  double low = 0;
  for (size_t q = 0; q <= kinks.size(); ++q) {
    const double high = q < kinks.size() ? kinks[q].first : std::numeric_limits<double>::infinity();
    if (high > low) {
      const double curvature = squared ? B + omega : 2 * omega, target = A;  // root: s = target / curvature
      if (curvature * high > target) return std::clamp(target / curvature, low, high);
    }
    if (q == kinks.size()) break;
    add(kinks[q].second, m[kinks[q].second] > 0 ? -1.0 : 1.0);  // m > 0 leaves, m < 0 enters
    low = high;
  }
  return low;  // not reached: the derivative grows without bound
}

ScaledPrimal best_scaled_primal(ExclusiveLoss loss, const std::vector<double>& y, const double* z, double omega,
                                bool with_bias, double bias) {
  const size_t n = y.size();
  const bool squared = loss == ExclusiveLoss::kSquaredHinge;
  auto loss_at = [&](double s, double b) {
    double sum = 0;
    for (size_t i = 0; i < n; ++i) {
      const double slack = std::max(0.0, 1.0 - y[i] * (s * z[i] + b));
      sum += squared ? slack * slack : slack;
    }
    return sum;
  };
  ScaledPrimal best{1.0, with_bias ? bias : 0.0, 0.0};
  best.loss = loss_at(best.scale, best.bias);
  if (!(omega > 0)) return best;
  std::vector<double> c(n), m(n), scaled(n);
  for (size_t i = 0; i < n; ++i) m[i] = y[i] * z[i];
  double b = best.bias;
  for (int round = 0; round < (with_bias ? 2 : 1); ++round) {
    for (size_t i = 0; i < n; ++i) c[i] = 1.0 - y[i] * b;
    const double s = best_loss_scale(loss, c.data(), m.data(), n, omega);
    if (with_bias) {
      for (size_t i = 0; i < n; ++i) scaled[i] = s * z[i];
      b = best_svm_bias(loss, y, scaled.data());
    }
    const double value = loss_at(s, b);
    if (value + s * s * omega < best.loss + best.scale * best.scale * omega) best = {s, b, value};
  }
  return best;
}

namespace {

using Vec = std::vector<double>;

class CoordinateLicp {
 public:
  CoordinateLicp(const InMemoryDesign& X, const Vec& y, const ExclusiveGroups& G, const FistaOptions& o,
                 MemoryBudget& budget, const Vec& warm_dual)
      : y_(y), o_(o), n_(X.rows()), p_(X.columns()), alpha_(o.ridge), mu_(o.lambda / o.ridge) {
    bias_ = o.bias;
    FGM_ASSERT(is_svm_loss(o.loss));
    if (o.loss == ExclusiveLoss::kSquaredHinge) upper_ = std::numeric_limits<double>::infinity(), dual_diag_ = 0.5;
    if (!(o.ridge > 0)) throw_error(ErrorKind::kConfig, "exclusive.ridge must be > 0 for exclusive.algorithm = \"licp\"");
    FGM_ASSERT(G.disjoint && G.columns == p_);
    const uint64_t nnz = X.values().size();
    memory_ = budget.reserve(nnz * (sizeof(uint32_t) + sizeof(float)) + (3 * n_ + 9 * p_) * sizeof(double),
                             "exclusive: licp coordinate ascent (rows of the working set, vectors)",
                             "lower exclusive.working_set_growth or engine.memory_budget's other users");
    newton_memory_ = budget.reserve(0, "exclusive: licp Newton system (free rows × support of w)",
                                    "raise engine.memory_budget or lower exclusive.working_set_growth");
    if (o.threads > 1) arena_ = std::make_unique<tbb::task_arena>(o.threads);
    number_columns(G);
    build_rows(X);
    u_.assign(n_, 0.0);
    if (!warm_dual.empty())
      for (uint64_t i = 0; i < n_; ++i) u_[i] = std::clamp(warm_dual[i], 0.0, upper_);
    if (bias_) {
      // ρ of the augmented term: the constraint's direction y/√n gets the
      // curvature of kRhoScale coordinates (ρn ≈ kRhoScale·mean ‖x_i‖²/α; the
      // Newton step carries the rank-one term). At 1 the multiplier crawled
      // on many rows (a9a, a quarter positive: no certificate in 300 epochs,
      // squared hinge or hinge); at 100 a9a certifies in 104 / ~800 epochs
      // and the planted set takes 498 epochs against 482; 1,000 slows it to 766.
      double mean = 0;
      for (double r : row_norm_squared_) mean += r / alpha_;
      rho_ = kRhoScale * std::max(mean / double(std::max<uint64_t>(n_, 1)), 1e-12) / double(std::max<uint64_t>(n_, 1));
      for (uint64_t i = 0; i < n_; ++i) s_ += y_[i] * u_[i];
    }
    a_.assign(p_, 0.0), w_.assign(p_, 0.0), c_.assign(p_, 0.0), saved_a_.assign(p_, 0.0), saved_w_.assign(p_, 0.0);
    margins_.assign(n_, 0.0);
    const size_t ranges = range_begin_.size() - 1;
    tau_.assign(ranges, 0.0), support_.assign(ranges, 0), conjugate_.assign(ranges, 0.0);
    saved_tau_.assign(ranges, 0.0), saved_support_.assign(ranges, 0), saved_conjugate_.assign(ranges, 0.0);
  }

  void run(FistaResult& out) {
    std::mt19937_64 rng(0xe5u);
    std::vector<uint32_t> order(n_);
    for (uint64_t i = 0; i < n_; ++i) order[i] = static_cast<uint32_t>(i);
    certify();
    out.passes = 1;
    for (int epoch = 1; epoch <= o_.max_iterations && !converged(); ++epoch) {
      check_interrupt();
      std::shuffle(order.begin(), order.end(), rng);
      for (uint32_t i : order) step(i);
      if (bias_) b_ += rho_ * s_;  // the multiplier's (ALM) update
      certify_epoch(epoch);
      // A damped Newton step after the epochs: the dual is degenerate when
      // more rows are free than w has nonzeros (the planted set: ~1,500 free
      // rows, ~1,600 nonzeros), where coordinate steps alone crawl (~400
      // epochs per working-set round, measured); every epoch was ~3× fewer
      // epochs and, with the support-restricted CG, ~4× less time than
      // waiting for a settled pattern.
      // After a step shorter than kShortNewton (or none) the next epoch goes
      // without: while the pattern still moves such steps gain little and
      // cost about two sweeps (the planted set: ~12% less time, measured).
      if (!converged() && (last_newton_ >= kShortNewton || newton_skipped_)) {
        newton_skipped_ = false;
        last_newton_ = newton_step();
        if (last_newton_ > 0) {
          certify_epoch(epoch);
          ++out.backtracks;  // Newton steps taken (reported as FISTA's backtracks)
        }
      }
      else if (!converged()) newton_skipped_ = true;
      out.iterations = epoch;
      out.passes += 2;
      if (o_.record_objective) out.trace.push_back(primal_);
    }
    out.converged = converged();
    out.duality_gap = gap_;
    out.objective = primal_;
    out.loss = loss_;
    out.regularizer = primal_ - loss_;
    out.dual = u_;
    if (bias_) balance_dual(y_, out.dual);  // feasible (yᵀu = 0): the working set's full gap needs it
    out.bias = primal_bias_;
    out.margins = margins_;
    for (double& z : out.margins) z = primal_scale_ * z + primal_bias_;
    out.w.assign(p_, 0.0);
    for (uint64_t k = 0; k < p_; ++k) out.w[k] = primal_scale_ * w_[position_[k]];
  }

 private:
  bool converged() const { return gap_ <= o_.tolerance * std::max(1.0, std::fabs(primal_)); }

  // The dual's separable part per row: u (hinge), u − u²/4 (squared hinge).
  double linear_part(double u) const { return u - 0.5 * dual_diag_ * u * u; }

  // Groups as contiguous ranges: position_[k] is column k's new index.
  void number_columns(const ExclusiveGroups& G) {
    position_.assign(p_, std::numeric_limits<uint64_t>::max());
    range_begin_.assign(1, 0);
    uint64_t next = 0;
    for (uint64_t g = 0; g < G.count(); ++g) {
      if (G.size(g) == 0) continue;
      for (uint64_t q = G.member_ptr[g]; q < G.member_ptr[g + 1]; ++q) position_[G.members[q]] = next++;
      range_begin_.push_back(next);
      range_mu_.push_back(mu_);
    }
    for (uint64_t k = 0; k < p_; ++k) {
      if (position_[k] != std::numeric_limits<uint64_t>::max()) continue;
      position_[k] = next++;  // in no group: no exclusive penalty
      range_begin_.push_back(next);
      range_mu_.push_back(0.0);
    }
    range_of_.resize(p_);
    for (size_t r = 0; r + 1 < range_begin_.size(); ++r)
      for (uint64_t j = range_begin_[r]; j < range_begin_[r + 1]; ++j) range_of_[j] = static_cast<uint32_t>(r);
  }

  // CSR of the rows over the new numbering, entries increasing in it.
  void build_rows(const InMemoryDesign& X) {
    const auto& ptr = X.column_ptr();
    const auto& rows = X.row_ids();
    const auto& values = X.values();
    row_ptr_.assign(n_ + 1, 0);
    for (uint32_t r : rows) ++row_ptr_[r + 1];
    for (uint64_t i = 0; i < n_; ++i) row_ptr_[i + 1] += row_ptr_[i];
    entry_column_.resize(rows.size());
    entry_value_.resize(rows.size());
    std::vector<uint64_t> fill(row_ptr_.begin(), row_ptr_.end() - 1);
    std::vector<uint64_t> column_at(p_);
    for (uint64_t k = 0; k < p_; ++k) column_at[position_[k]] = k;
    for (uint64_t j = 0; j < p_; ++j) {
      const uint64_t k = column_at[j];
      for (uint64_t q = ptr[k]; q < ptr[k + 1]; ++q) {
        const uint64_t slot = fill[rows[q]]++;
        entry_column_[slot] = static_cast<uint32_t>(j);
        entry_value_[slot] = values[q];
      }
    }
    row_norm_squared_.assign(n_, 0.0);
    for (uint64_t i = 0; i < n_; ++i)
      for (uint64_t q = row_ptr_[i]; q < row_ptr_[i + 1]; ++q)
        row_norm_squared_[i] += double(entry_value_[q]) * double(entry_value_[q]);
  }

  // w, τ, |support| and Ω*_r of range r from a: prox_l1_squared_newton's
  // iteration on c = a/α read in place, then one pass writes w and sums the
  // conjugate in closed form over the support (w_j = sgn(c_j)(|c_j| − τ)):
  //   Ω*_r = (α/2)Σ_S (c_j² − τ²) − (αμ/2)‖w‖₁²,  ‖w‖₁ = Σ_S (|c_j| − τ).
  void refresh_range(size_t r) {
    const uint64_t b = range_begin_[r], e = range_begin_[r + 1];
    const double mu = range_mu_[r], inv_alpha = 1.0 / alpha_;
    auto support_of = [&](double t, double& sum, double& below, double& above) {
      size_t count = 0;
      sum = 0, below = -1, above = std::numeric_limits<double>::infinity();
      for (uint64_t j = b; j < e; ++j) {
        const double m = std::fabs(a_[j]) * inv_alpha;
        if (m > t) sum += m, ++count, above = std::min(above, m);
        else below = std::max(below, m);
      }
      return count;
    };
    double t = 0;
    if (mu > 0 && !newton_threshold(mu, tau_[r], e - b, support_of, t)) {  // the sorting projection
      for (uint64_t j = b; j < e; ++j) c_[j] = a_[j] * inv_alpha;
      support_[r] = prox_l1_squared_newton(&c_[b], e - b, mu, &w_[b], tau_[r]);
      double aw = 0, ww = 0, l1 = 0;
      for (uint64_t j = b; j < e; ++j) aw += a_[j] * w_[j], ww += w_[j] * w_[j], l1 += std::fabs(w_[j]);
      conjugate_[r] = aw - 0.5 * alpha_ * ww - 0.5 * alpha_ * mu * l1 * l1;
      return;
    }
    size_t support = 0;
    double squares = 0, l1 = 0;
    for (uint64_t j = b; j < e; ++j) {
      const double c = a_[j] * inv_alpha, m = std::fabs(c);
      if (m > t) {
        w_[j] = std::copysign(m - t, c);
        squares += (m - t) * (m + t), l1 += m - t, ++support;
      } else {
        w_[j] = 0.0;
      }
    }
    tau_[r] = t;
    support_[r] = support;
    conjugate_[r] = 0.5 * alpha_ * squares - 0.5 * alpha_ * mu * l1 * l1;
  }


  // a += δ·y_i·x_i and the ranges it touches; returns the change of Ω*.
  double apply(uint64_t i, double delta, bool save) {
    const uint64_t b = row_ptr_[i], e = row_ptr_[i + 1];
    const double scale = delta * y_[i];
    double change = 0;
    for (uint64_t q = b; q < e;) {
      const uint32_t r = range_of_[entry_column_[q]];
      if (save) {
        for (uint64_t j = range_begin_[r]; j < range_begin_[r + 1]; ++j) saved_a_[j] = a_[j], saved_w_[j] = w_[j];
        saved_tau_[r] = tau_[r], saved_support_[r] = support_[r], saved_conjugate_[r] = conjugate_[r];
      }
      for (; q < e && range_of_[entry_column_[q]] == r; ++q) a_[entry_column_[q]] += scale * double(entry_value_[q]);
      const double before = conjugate_[r];
      refresh_range(r);
      change += conjugate_[r] - before;
    }
    return change;
  }

  void restore(uint64_t i) {
    const uint64_t b = row_ptr_[i], e = row_ptr_[i + 1];
    for (uint64_t q = b; q < e;) {
      const uint32_t r = range_of_[entry_column_[q]];
      for (uint64_t j = range_begin_[r]; j < range_begin_[r + 1]; ++j) a_[j] = saved_a_[j], w_[j] = saved_w_[j];
      tau_[r] = saved_tau_[r], support_[r] = saved_support_[r], conjugate_[r] = saved_conjugate_[r];
      while (q < e && range_of_[entry_column_[q]] == r) ++q;
    }
  }

  // Curvature of Ω*(Zu) along coordinate i at the current w (see the header).
  double local_curvature(uint64_t i) const {
    const uint64_t b = row_ptr_[i], e = row_ptr_[i + 1];
    double h = 0;
    for (uint64_t q = b; q < e;) {
      const uint32_t r = range_of_[entry_column_[q]];
      double squares = 0, signed_sum = 0;
      for (; q < e && range_of_[entry_column_[q]] == r; ++q) {
        const double wk = w_[entry_column_[q]], v = entry_value_[q];
        if (wk == 0) continue;
        squares += v * v;
        signed_sum += wk > 0 ? v : -v;
      }
      h += squares - range_mu_[r] / (1.0 + range_mu_[r] * double(support_[r])) * signed_sum * signed_sum;
    }
    return h / alpha_;
  }

  void step(uint64_t i) {
    const uint64_t b = row_ptr_[i], e = row_ptr_[i + 1];
    if (b == e && dual_diag_ == 0) {  // an empty row under the hinge: D grows with u_i
      u_[i] = 1.0;
      return;
    }
    const double xw = b == e ? 0.0 : simd::kernels().gather_dot(w_.data(), &entry_column_[b], &entry_value_[b], e - b);
    // With the bias: the augmented Lagrangian's gradient, margin x_iᵀw + b + ρs.
    const double gradient = 1.0 - dual_diag_ * u_[i] - y_[i] * (xw + (bias_ ? b_ + rho_ * s_ : 0.0));
    if ((u_[i] <= 0 && gradient <= 0) || (u_[i] >= upper_ && gradient >= 0)) return;
    const double safe = row_norm_squared_[i] / alpha_ + rho_ + dual_diag_;
    double h = local_curvature(i) + rho_ + dual_diag_;
    if (!(h > 1e-12 * safe)) h = safe;
    double delta = std::clamp(u_[i] + gradient / h, 0.0, upper_) - u_[i];
    if (delta == 0) return;
    const double change = apply(i, delta, h != safe);
    if (h != safe && gain(i, delta, change) < 0) {  // the Newton step overshot: the safe step
      restore(i);
      delta = std::clamp(u_[i] + gradient / safe, 0.0, upper_) - u_[i];
      if (delta == 0) return;
      apply(i, delta, false);
    }
    u_[i] += delta;
    s_ += y_[i] * delta;
  }

  // Change of the (augmented) dual by u_i += δ, given the change of Ω*.
  double gain(uint64_t i, double delta, double conjugate_change) const {
    const double quadratic = 0.5 * dual_diag_ * delta * (2 * u_[i] + delta);  // of −u²/4 (squared hinge)
    if (!bias_) return delta - quadratic - conjugate_change;
    return delta * (1.0 - y_[i] * b_) - quadratic - conjugate_change - rho_ * (s_ * y_[i] * delta + 0.5 * delta * delta);
  }

  // The augmented terms −b·s − (ρ/2)s² at s = yᵀu (0 without the bias).
  double augmented(double s) const { return bias_ ? -b_ * s - 0.5 * rho_ * s * s : 0.0; }

  // The rows F restricted to the support of w (J is zero elsewhere), built
  // once per Newton step: the CG's products then touch |F|·|S| entries, not
  // |F|·|W| (on the planted set |S| is a third of |W|).
  struct NewtonSystem {
    std::vector<uint64_t> row_ptr;
    std::vector<uint32_t> column;      // compact support index
    // The design's own floats: the dense products (dot_f, axpy_f) widen them
    // exactly, the same bits as doubles at half the memory traffic (the CG
    // products are memory-bound: ~27 GB/s on the planted set's 1,560 × 1,600).
    std::vector<float> value;
    std::vector<uint64_t> range_begin;  // compact index where each range's support starts
    std::vector<double> sign, range_c;  // sgn(w) per compact column; μ/(1 + μ|S_g|) per range
    Vec t;
    bool dense = false;  // every row holds every support column: `column` is 0..|S|−1 in each row
  };

  void build_newton_system(const std::vector<uint32_t>& F, NewtonSystem& N) {
    std::vector<uint32_t> compact(p_, std::numeric_limits<uint32_t>::max());
    N.sign.clear(), N.range_begin.assign(1, 0), N.range_c.clear();
    for (size_t r = 0; r + 1 < range_begin_.size(); ++r) {
      for (uint64_t j = range_begin_[r]; j < range_begin_[r + 1]; ++j)
        if (w_[j] != 0) compact[j] = static_cast<uint32_t>(N.sign.size()), N.sign.push_back(w_[j] > 0 ? 1.0 : -1.0);
      N.range_begin.push_back(N.sign.size());
      N.range_c.push_back(range_mu_[r] / (1.0 + range_mu_[r] * double(support_[r])));
    }
    N.t.assign(N.sign.size(), 0.0);
    bool full_rows = true;  // every row holds every column of W: column j is its entry j
    for (uint32_t i : F) full_rows = full_rows && row_ptr_[i + 1] - row_ptr_[i] == p_;
    if (full_rows) {
      build_dense_newton_system(F, N);
      return;
    }
    uint64_t entries = 0;  // reserved before the system is filled
    for (uint32_t i : F)
      for (uint64_t q = row_ptr_[i]; q < row_ptr_[i + 1]; ++q)
        entries += compact[entry_column_[q]] != std::numeric_limits<uint32_t>::max();
    const uint64_t bytes = entries * (sizeof(uint32_t) + sizeof(float)) + (F.size() + 1) * sizeof(uint64_t);
    if (bytes > newton_memory_.bytes())
      newton_memory_.resize(bytes);
    N.row_ptr.assign(1, 0), N.column.clear(), N.value.clear();
    N.column.reserve(entries), N.value.reserve(entries);
    for (uint32_t i : F) {
      for (uint64_t q = row_ptr_[i]; q < row_ptr_[i + 1]; ++q) {
        const uint32_t k = compact[entry_column_[q]];
        if (k == std::numeric_limits<uint32_t>::max()) continue;
        N.column.push_back(k), N.value.push_back(entry_value_[q]);
      }
      N.row_ptr.push_back(N.column.size());
    }
    N.dense = N.column.size() == F.size() * N.sign.size();
  }

  // The dense design's system (the planted set's): the support's values are
  // read at their column offsets, no per-entry lookup, rows filled on the
  // arena (disjoint slices). The same values in the same order as the sparse
  // build's.
  void build_dense_newton_system(const std::vector<uint32_t>& F, NewtonSystem& N) {
    const size_t support = N.sign.size();
    std::vector<uint32_t> offsets;
    offsets.reserve(support);
    for (uint64_t j = 0; j < p_; ++j)
      if (w_[j] != 0) offsets.push_back(static_cast<uint32_t>(j));
    FGM_ASSERT(offsets.size() == support);
    const uint64_t bytes = F.size() * support * sizeof(float) + (F.size() + 1) * sizeof(uint64_t);
    if (bytes > newton_memory_.bytes()) newton_memory_.resize(bytes);
    N.column.clear();
    N.value.resize(F.size() * support);
    N.row_ptr.resize(F.size() + 1);
    for (size_t f = 0; f <= F.size(); ++f) N.row_ptr[f] = f * support;
    parallel_chunks(F.size(), kRowChunk, [&](size_t lo, size_t hi) {
      for (size_t f = lo; f < hi; ++f) {
        const float* row = &entry_value_[row_ptr_[F[f]]];
        float* out = &N.value[f * support];
        for (size_t k = 0; k < support; ++k) out[k] = row[offsets[k]];
      }
    });
    N.dense = true;
  }

  // (Qv) over the rows F, Q = Z J Zᵀ restricted to F, J = ∂w/∂a at the
  // current pattern (per group (1/α)(I − μ/(1 + μ|S_g|)·s sᵀ) on the support S_g).
  void q_times(const std::vector<uint32_t>& F, NewtonSystem& N, const Vec& v, Vec& out) const {
    Vec& t = N.t;
    const simd::Kernels& simd = simd::kernels();
    std::fill(t.begin(), t.end(), 0.0);
    const size_t support = t.size();
    if (N.dense) {
      // Column chunks, each summed over f in order: every t_k gets the same
      // operations for any thread count (the kernels are elementwise, the
      // same bits on every target).
      parallel_chunks(support, kColumnChunk, [&](size_t lo, size_t hi) {
        for (size_t f = 0; f < F.size(); ++f) {
          const double scale = v[f] * y_[F[f]];
          if (scale != 0) simd.axpy_f(scale, &N.value[N.row_ptr[f] + lo], t.data() + lo, hi - lo);
        }
      });
    } else {
      for (size_t f = 0; f < F.size(); ++f) {
        const double scale = v[f] * y_[F[f]];
        if (scale == 0) continue;
        for (uint64_t q = N.row_ptr[f]; q < N.row_ptr[f + 1]; ++q) t[N.column[q]] += scale * double(N.value[q]);
      }
    }
    for (size_t r = 0; r + 1 < N.range_begin.size(); ++r) {
      const uint64_t b = N.range_begin[r], e = N.range_begin[r + 1];
      double signed_sum = 0;
      for (uint64_t k = b; k < e; ++k) signed_sum += N.sign[k] * t[k];
      const double c = N.range_c[r] * signed_sum;
      for (uint64_t k = b; k < e; ++k) t[k] = (t[k] - c * N.sign[k]) / alpha_;
    }
    parallel_chunks(F.size(), kRowChunk, [&](size_t lo, size_t hi) {  // one row's dot per output
      for (size_t f = lo; f < hi; ++f) {
        double s = 0;
        if (N.dense) {
          s = simd.dot_f(&N.value[N.row_ptr[f]], t.data(), support);  // the same bits on every target
        } else {
          for (uint64_t q = N.row_ptr[f]; q < N.row_ptr[f + 1]; ++q) s += double(N.value[q]) * t[N.column[q]];
        }
        out[f] = y_[F[f]] * s;
      }
    });
  }

  // body(lo, hi) over [0, n) cut into chunks of `chunk`, on the arena's
  // threads (engine.threads) when there is more than one chunk. Callers write
  // disjoint outputs per chunk, so results do not depend on the thread count.
  template <class Body>
  void parallel_chunks(size_t n, size_t chunk, Body&& body) const {
    const size_t chunks = (n + chunk - 1) / chunk;
    if (!arena_ || chunks < 2) {
      for (size_t c = 0; c < chunks; ++c) body(c * chunk, std::min(n, (c + 1) * chunk));
      return;
    }
    LoopRendezvous rendezvous;
    arena_->execute([&] {
      tbb::parallel_for(size_t{0}, chunks, [&](size_t c) {
        rendezvous.arrive();
        body(c * chunk, std::min(n, (c + 1) * chunk));
      }, tbb::simple_partitioner());
    });
  }

  // D at candidate = clip(u + t·d) on the rows F (u elsewhere), with Zu from
  // `a_now` (Zu at u) and `direction` = Σ_f d_f y_f x_f: Zu moves by
  // t·direction plus the clipped rows' corrections, so a trial costs |W| per
  // clipped row instead of per row of F (a, w and the ranges are left at the
  // candidate's).
  double dual_along(const std::vector<uint32_t>& F, const Vec& d, double t, const Vec& a_now, const Vec& direction,
                    Vec& candidate) {
    for (uint64_t j = 0; j < p_; ++j) a_[j] = a_now[j] + t * direction[j];
    for (size_t f = 0; f < F.size(); ++f) {
      const uint32_t i = F[f];
      const double unclipped = u_[i] + t * d[f];
      candidate[i] = std::clamp(unclipped, 0.0, upper_);
      const double correction = candidate[i] - unclipped;
      if (correction == 0) continue;
      const double scale = correction * y_[i];
      for (uint64_t q = row_ptr_[i]; q < row_ptr_[i + 1]; ++q) a_[entry_column_[q]] += scale * double(entry_value_[q]);
    }
    double sum_u = 0;
    for (uint64_t i = 0; i < n_; ++i) sum_u += linear_part(candidate[i]);
    double conjugate = 0;
    for (size_t r = 0; r + 1 < range_begin_.size(); ++r) {
      refresh_range(r);
      conjugate += conjugate_[r];
    }
    return sum_u - conjugate;
  }

  // Projected Newton (Bertsekas 1982) on D over the rows free to move, with
  // the curvature of the current support pattern: d solves (Q_FF + εI)d = ∇_F D
  // by conjugate gradients, then u ← clip(u + t·d) for the first t = 1, ½, …
  // that increases D (exactly evaluated). Needs certify()'s state; returns
  // the step t taken (0: none; a, w are then stale: the caller certifies).
  double newton_step() {
    std::vector<uint32_t> F;
    Vec gradient;
    double diagonal = 0;
    for (uint64_t i = 0; i < n_; ++i) {
      const double g = 1.0 - dual_diag_ * u_[i] - y_[i] * (margins_[i] + (bias_ ? b_ + rho_ * s_ : 0.0));
      if ((u_[i] > 0 && u_[i] < upper_) || (u_[i] <= 0 && g > 0) || (u_[i] >= upper_ && g < 0)) {
        F.push_back(static_cast<uint32_t>(i));
        gradient.push_back(g);
        diagonal = std::max(diagonal, row_norm_squared_[i] / alpha_);
      }
    }
    if (F.empty()) return 0;
    NewtonSystem& system = newton_system_;  // reused: no page faults per step
    build_newton_system(F, system);
    const size_t m = F.size();
    const double epsilon = kNewtonDamping * diagonal;
    Vec d(m, 0.0), r = gradient, dir = r, qd(m);
    double rr = 0;
    for (double e : r) rr += e * e;
    const double stop = kCgResidual * kCgResidual * rr;
    const int iterations = o_.tolerance >= kLooseTolerance ? kCgLooseIterations : kCgIterations;
    for (int it = 0; it < iterations && rr > stop; ++it) {
      q_times(F, system, dir, qd);
      if (bias_) {  // + ρ y_F y_Fᵀ
        double ydir = 0;
        for (size_t f = 0; f < m; ++f) ydir += y_[F[f]] * dir[f];
        for (size_t f = 0; f < m; ++f) qd[f] += rho_ * y_[F[f]] * ydir;
      }
      double dqd = 0;
      for (size_t f = 0; f < m; ++f) dqd += dir[f] * (qd[f] += (epsilon + dual_diag_) * dir[f]);
      if (!(dqd > 0)) break;
      const double step = rr / dqd;
      double rr_next = 0;
      for (size_t f = 0; f < m; ++f) {
        d[f] += step * dir[f];
        r[f] -= step * qd[f];
        rr_next += r[f] * r[f];
      }
      for (size_t f = 0; f < m; ++f) dir[f] = r[f] + (rr_next / rr) * dir[f];
      rr = rr_next;
    }
    double dual_now = augmented(s_);
    for (uint64_t i = 0; i < n_; ++i) dual_now += linear_part(u_[i]);
    for (double c : conjugate_) dual_now -= c;
    double largest = 0;
    for (double e : d) largest = std::max(largest, std::fabs(e));
    if (!(largest > 0)) return 0;
    const Vec a_now = a_;
    Vec direction(p_, 0.0), candidate(u_);
    for (size_t f = 0; f < m; ++f) {
      const uint32_t i = F[f];
      const double scale = d[f] * y_[i];
      for (uint64_t q = row_ptr_[i]; q < row_ptr_[i + 1]; ++q) direction[entry_column_[q]] += scale * double(entry_value_[q]);
    }
    for (double t = std::min(1.0, upper_ / largest); t > 1e-6; t *= 0.5) {
      const double dual = dual_along(F, d, t, a_now, direction, candidate);
      double s = 0;
      if (bias_)
        for (uint64_t i = 0; i < n_; ++i) s += y_[i] * candidate[i];
      if (dual + augmented(s) > dual_now) {  // a (and w) stay at the candidate's
        u_ = candidate;
        s_ = s;
        return t;
      }
    }
    a_ = a_now;
    for (size_t r = 0; r + 1 < range_begin_.size(); ++r) refresh_range(r);  // back to u's w
    return 0;
  }

  // The stop test: the gap from the maintained Zu, and when that passes (or
  // every kRecomputeEvery epochs) Zu recomputed from u, so the certificate
  // that stops the solve carries no drift of the incremental updates.
  void certify_epoch(int epoch) {
    const bool scratch = epoch % kRecomputeEvery == 0;
    certify(scratch);
    if (!scratch && converged()) certify(true);
  }

  // Zu (from u when `from_scratch`, else the maintained a), w(u), and the gap
  // P(w(u)) − D(u).
  // With the bias: the primal at w(u) and its best b (exact), the dual at u
  // scaled to yᵀu = 0 (balance_dual: any feasible u bounds the optimum).
  void certify(bool from_scratch = true) {
    double sum_u = 0, sum_feasible = 0, conjugate_feasible = 0;
    if (bias_) {
      // Z₊u₊ into a_, Z₋u₋ into t_ (the classes' parts), then the feasible dual.
      double positive = 0, negative = 0, positive_squares = 0, negative_squares = 0;
      for (uint64_t i = 0; i < n_; ++i) {
        (y_[i] > 0 ? positive : negative) += u_[i];
        if (dual_diag_ != 0) (y_[i] > 0 ? positive_squares : negative_squares) += u_[i] * u_[i];
      }
      const double scale_pos = positive > negative ? negative / positive : 1.0;
      const double scale_neg = negative > positive ? positive / negative : 1.0;
      std::fill(a_.begin(), a_.end(), 0.0);
      t_.assign(p_, 0.0);
      for (uint64_t i = 0; i < n_; ++i) {
        if (u_[i] == 0) continue;
        Vec& target = y_[i] > 0 ? a_ : t_;
        for (uint64_t q = row_ptr_[i]; q < row_ptr_[i + 1]; ++q) target[entry_column_[q]] += u_[i] * double(entry_value_[q]);
      }
      const Vec positive_part = a_;
      for (uint64_t j = 0; j < p_; ++j) a_[j] = scale_pos * positive_part[j] - scale_neg * t_[j];
      for (size_t r = 0; r + 1 < range_begin_.size(); ++r) {
        refresh_range(r);
        conjugate_feasible += conjugate_[r];
      }
      sum_feasible = scale_pos * positive + scale_neg * negative -
                     0.5 * dual_diag_ * (scale_pos * scale_pos * positive_squares + scale_neg * scale_neg * negative_squares);
      for (uint64_t j = 0; j < p_; ++j) a_[j] = positive_part[j] - t_[j];
      s_ = positive - negative;
      sum_u = positive + negative;
    } else {
      if (from_scratch) std::fill(a_.begin(), a_.end(), 0.0);
      for (uint64_t i = 0; i < n_; ++i) {
        sum_u += linear_part(u_[i]);
        if (u_[i] == 0 || !from_scratch) continue;
        const double scale = u_[i] * y_[i];
        for (uint64_t q = row_ptr_[i]; q < row_ptr_[i + 1]; ++q) a_[entry_column_[q]] += scale * double(entry_value_[q]);
      }
    }
    double conjugate = 0, omega = 0;
    for (size_t r = 0; r + 1 < range_begin_.size(); ++r) {
      refresh_range(r);
      conjugate += conjugate_[r];
      double ww = 0, l1 = 0;
      for (uint64_t j = range_begin_[r]; j < range_begin_[r + 1]; ++j) ww += w_[j] * w_[j], l1 += std::fabs(w_[j]);
      omega += 0.5 * alpha_ * ww + 0.5 * alpha_ * range_mu_[r] * l1 * l1;
    }
    parallel_chunks(n_, kRowChunk, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i)
        margins_[i] = simd::kernels().gather_dot(w_.data(), &entry_column_[row_ptr_[i]], &entry_value_[row_ptr_[i]],
                                                 row_ptr_[i + 1] - row_ptr_[i]);
    });
    if (bias_) {
      best_bias_ = best_svm_bias(o_.loss, y_, margins_.data());
    }
    // The primal point: s·w(u) and b with the least P (best_scaled_primal).
    const ScaledPrimal point = best_scaled_primal(o_.loss, y_, margins_.data(), omega, bias_, best_bias_);
    primal_scale_ = point.scale, primal_bias_ = point.bias;
    loss_ = point.loss;
    primal_ = loss_ + point.scale * point.scale * omega;
    gap_ = std::max(0.0, primal_ - (bias_ ? sum_feasible - conjugate_feasible : sum_u - conjugate));
    if (bias_ && !multiplier_started_) start_multiplier();
  }

  // The multiplier b starts at the bias of the better of two primal points:
  // w(u) with its best b, or the empty model (w = 0) with its best b. A cold
  // start's w(u) can be far off — on a9a the balanced dual at zero gave
  // b = −8,365 (P = 5·10¹⁰), and ρ·yᵀu moved b by ~5 an epoch: no certificate
  // in 300 epochs — while a warm start's w(u) is the better point.
  void start_multiplier() {
    const Vec zero(n_, 0.0);
    const double empty_bias = best_svm_bias(o_.loss, y_, zero.data());
    const double empty_loss = best_scaled_primal(o_.loss, y_, zero.data(), 0.0, true, empty_bias).loss;
    b_ = empty_loss < primal_ ? empty_bias : best_bias_;
    multiplier_started_ = true;
  }

  const Vec& y_;
  const FistaOptions& o_;
  uint64_t n_, p_;
  double alpha_, mu_;
  Reservation memory_;
  std::vector<uint64_t> position_, range_begin_, row_ptr_;
  std::vector<uint32_t> range_of_, entry_column_;
  std::vector<float> entry_value_;
  Vec range_mu_, row_norm_squared_;
  Vec u_, a_, w_, c_, margins_, saved_a_, saved_w_, t_;
  Vec tau_, conjugate_, saved_tau_, saved_conjugate_;
  std::vector<size_t> support_, saved_support_;
  double gap_ = std::numeric_limits<double>::infinity(), primal_ = 0, loss_ = 0;
  // The loss's conjugate term: hinge u ∈ [0, 1], D ∋ 1ᵀu; squared hinge
  // u ∈ [0, ∞), D ∋ Σ(u_i − u_i²/4) (dual_diag_ = ½: the curvature it adds).
  double upper_ = 1.0, dual_diag_ = 0.0;
  double last_newton_ = 0;
  bool newton_skipped_ = false;
  NewtonSystem newton_system_;
  // FistaOptions::threads > 1: the Newton system's products and the margins
  // run on this arena (the coordinate steps stay sequential).
  std::unique_ptr<tbb::task_arena> arena_;
  static constexpr size_t kColumnChunk = 256, kRowChunk = 64;
  Reservation newton_memory_;  // its rows (free rows × support of w)
  // Newton's damping ε = kNewtonDamping·max_i ‖x_i‖²/α (the dual Hessian is
  // singular on the planted set; 1e-8 made steps of t ≈ 2⁻¹², 1e-4 of ½–1),
  // and its CG's stop: relative residual kCgResidual or kCgIterations.
  static constexpr double kNewtonDamping = 1e-4, kCgResidual = 1e-3, kShortNewton = 0.01;
  static constexpr int kCgIterations = 40;
  // A loose solve (tolerance ≥ kLooseTolerance: the working set's growing
  // rounds stop at 10⁻²) takes Newton steps of t ≈ 2⁻⁸–2⁻⁵ while the support
  // still moves, where a precise direction buys nothing: its CG stops after
  // kCgLooseIterations (planted set, hinge: 712 epochs instead of 726 and ~10%
  // less CPU; at 40 the CG rarely reached its residual there anyway).
  static constexpr int kCgLooseIterations = 15;
  static constexpr double kLooseTolerance = 1e-3;
  static constexpr int kRecomputeEvery = 8;
  // The bias (o.bias): the multiplier b of yᵀu = 0 in the augmented
  // Lagrangian 1ᵀu − Ω*(Zu) − b·s − (ρ/2)s², s = yᵀu, updated b += ρs after
  // every epoch (Hestenes–Powell); the reported bias is the best for w(u).
  static constexpr double kRhoScale = 100.0;
  bool bias_ = false, multiplier_started_ = false;
  double rho_ = 0, b_ = 0, s_ = 0, best_bias_ = 0;
  // The certificate's primal point: (primal_scale_·w(u), primal_bias_).
  double primal_scale_ = 1, primal_bias_ = 0;
};

}  // namespace

FistaResult solve_licp_coordinate(const InMemoryDesign& X, const std::vector<double>& y, const ExclusiveGroups& groups,
                                  const FistaOptions& options, MemoryBudget& budget, const std::vector<double>& warm_dual) {
  FGM_ASSERT(y.size() == X.rows() && groups.columns == X.columns());
  if (!warm_dual.empty()) FGM_ASSERT(warm_dual.size() == X.rows());
  FistaResult out;
  CoordinateLicp solver(X, y, groups, options, budget, warm_dual);
  solver.run(out);
  return out;
}

}  // namespace fgm::exclusive
