// The APG solver as it was before the sparse rewrite of solvers/apg.cpp
// (issue 9 item 4), kept verbatim as an independent twin: every per-row
// vector has n entries and the Section 5.5 inner-product cache holds X_h v_h
// and X_h g_h as dense n-vectors per batch (3·n·t doubles streamed per
// iteration). Same problem, same algorithm, same deviations from the paper
// (see solvers/apg.cpp); only the data layout differs. Tests compare the
// sparse solver against it, and bench/bench_apg.cpp times both in one run.
#include "tests/solvers/dense_apg_twin.h"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "core/error.h"
#include "solvers/losses.h"
#include "solvers/moreau_projection.h"

namespace fgm::test {

namespace {

constexpr size_t kRowChunk = 8192;       // rows per task and per partial sum
constexpr int kMaxLineSearchTrials = 200;
constexpr double kReferenceFloor = 1e-10;  // smallest reference Δ_1 of the stop rule, relative to F  // τ grows by η^-200: only a stall gets here

// Runs index loops on a task arena of exactly `threads` threads (or inline).
class Executor {
 public:
  explicit Executor(int threads) {
    if (threads > 1) arena_.emplace(threads);
  }

  template <class F>
  void for_each(size_t count, const F& f) {
    if (!arena_ || count <= 1) {
      for (size_t i = 0; i < count; ++i) f(i);
      return;
    }
    arena_->execute([&] { tbb::parallel_for(size_t{0}, count, [&](size_t i) { f(i); }); });
  }

  // f(begin, end) over fixed row chunks of [0, n).
  template <class F>
  void for_rows(size_t n, const F& f) {
    size_t chunks = (n + kRowChunk - 1) / kRowChunk;
    for_each(chunks, [&](size_t c) { f(c * kRowChunk, std::min(n, (c + 1) * kRowChunk)); });
  }

  // Σ of f(begin, end) over fixed row chunks, added in chunk order.
  template <class F>
  double sum_rows(size_t n, const F& f) {
    size_t chunks = (n + kRowChunk - 1) / kRowChunk;
    partial_.assign(chunks, 0.0);
    for_each(chunks, [&](size_t c) {
      partial_[c] = f(c * kRowChunk, std::min(n, (c + 1) * kRowChunk));
    });
    double s = 0;
    for (double p : partial_) s += p;
    return s;
  }

 private:
  std::optional<tbb::task_arena> arena_;
  std::vector<double> partial_;
};

template <class LossT>
double sum_loss(Executor& ex, double C, const int8_t* y, const double* d, size_t n) {
  return ex.sum_rows(n, [&](size_t b, size_t e) {
    double s = 0;
    for (size_t i = b; i < e; ++i)
      if (y[i] != 0) s += LossT::value(C, double(y[i]) * d[i]);  // 0: row not in this fit
    return s;
  });
}

template <class LossT>
class ApgSolver {
 public:
  ApgSolver(const SelectedFeatureCache& cache, const int8_t* labels, const ApgOptions& options,
            MemoryBudget& budget)
      : cache_(cache),
        y_(labels),
        opt_(options),
        ex_(options.threads),
        n_(cache.n_rows()),
        cols_(cache.num_columns()),
        t_(cache.num_batches()) {
    // Required: 4 n for decision values at v and ω (the latter also the trial
    // step δ), margins, ∇_d P (also the scratch for products not cached), and
    // σ for the logistic loss; 6 per column for ω (now, previous, trial), v, g, g⁺.
    const uint64_t row_vectors = LossT::kNeedsSigmoid ? 5 : 4;
    const uint64_t doubles = row_vectors * uint64_t(n_) + 6 * uint64_t(cols_) + 5 * uint64_t(t_);
    reservation_ = budget.reserve(doubles * sizeof(double), "APG per-row vectors",
                                  "use fewer training rows");
    // Optional: the inner-product cache, 2 n-vectors per batch, as many as fit.
    const uint64_t vector_bytes = std::max<uint64_t>(1, uint64_t(n_) * sizeof(double));
    cache_reservation_ = budget.reserve_up_to(2 * uint64_t(t_) * vector_bytes, vector_bytes,
                                              "APG inner-product cache");
    cached_ = n_ == 0 ? 2 * t_ : cache_reservation_.bytes() / vector_bytes;
    for (size_t h = 0; h < t_; ++h) {
      FGM_ASSERT(cache.batch_begin(h) <= cache.batch_end(h));
    }
    FGM_ASSERT(t_ == 0 ? cols_ == 0 : cache.batch_begin(0) == 0);
  }

  ApgResult solve(ApgState& state, std::vector<double>& decision);

 private:
  size_t begin(size_t h) const { return cache_.batch_begin(h); }
  size_t end(size_t h) const { return cache_.batch_end(h); }

  // Which products the inner-product cache keeps: slot 2h + kind while it fits.
  enum Product { kXv = 0, kXg = 1 };
  bool is_cached(Product kind, size_t h) const { return 2 * h + kind < cached_; }
  double* slot(Product kind, size_t h) { return products_.data() + (2 * h + kind) * n_; }

  // out = X_h x_h, one pass over batch h's columns. Every product, cached or
  // not, is formed here, so its bits do not depend on the cache size.
  void batch_product(size_t h, const std::vector<double>& x, double* out) const {
    std::fill(out, out + n_, 0.0);
    for (size_t j = begin(h); j < end(h); ++j) {
      double xj = x[j];
      if (xj == 0) continue;
      cache_.column(j).for_each([&](uint32_t row, float value) { out[row] += xj * double(value); });
    }
  }

  // Forms the cached products X_h x_h of `kind` (one task per batch); the
  // others are formed on demand by product().
  void refresh(Product kind, const std::vector<double>& x) {
    size_t kept = 0;
    while (kept < t_ && is_cached(kind, kept)) ++kept;
    ex_.for_each(kept, [&](size_t h) { batch_product(h, x, slot(kind, h)); });
    ++column_passes_;
  }

  // X_h x_h: the cached vector (refreshed with this x) or, if the cache has
  // no room for it, recomputed into the scratch vector (valid until the next call).
  const double* product(Product kind, size_t h, const std::vector<double>& x) {
    if (is_cached(kind, h)) return slot(kind, h);
    batch_product(h, x, r_.data());
    ++recomputed_products_;
    return r_.data();
  }

  // out_i = Σ_h (X_h x_h)_i − b, batches added in order.
  void sum_products(Product kind, const std::vector<double>& x, double b, std::vector<double>& out) {
    ex_.for_rows(n_, [&](size_t lo, size_t hi) { std::fill(out.begin() + lo, out.begin() + hi, 0.0); });
    for (size_t h = 0; h < t_; ++h) {
      const double* p = product(kind, h, x);
      ex_.for_rows(n_, [&](size_t lo, size_t hi) {
        for (size_t i = lo; i < hi; ++i) out[i] += p[i];
      });
    }
    ex_.for_rows(n_, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) out[i] -= b;
    });
  }

  // δ = X(ω − v) = Σ_h coef_v_h X_h v_h − coef_g_h X_h g_h (added in batch
  // order, v before g), then Σ_i of the loss's Bregman remainder at δ.
  double trial_step(const std::vector<double>& v, const std::vector<double>& g,
                    const std::vector<double>& coef_v, const std::vector<double>& coef_g,
                    std::vector<double>& delta) {
    const double C = opt_.C;
    auto bregman_sum = [&](size_t lo, size_t hi) {
      double acc = 0;
      for (size_t i = lo; i < hi; ++i)
        acc += LossT::bregman(C, m_[i], LossT::kNeedsSigmoid ? p_[i] : 0.0, double(y_[i]) * delta[i]);
      return acc;
    };
    if (cached_ >= 2 * t_) {
      // Everything cached: one fused sweep per row chunk (same order of operations).
      return ex_.sum_rows(n_, [&](size_t lo, size_t hi) {
        std::fill(delta.begin() + lo, delta.begin() + hi, 0.0);
        for (size_t h = 0; h < t_; ++h) {
          const double cv = coef_v[h], cg = coef_g[h];
          const double* xv = slot(kXv, h);
          const double* xg = slot(kXg, h);
          for (size_t i = lo; i < hi; ++i) delta[i] += cv * xv[i];
          for (size_t i = lo; i < hi; ++i) delta[i] -= cg * xg[i];
        }
        return bregman_sum(lo, hi);
      });
    }
    ex_.for_rows(n_, [&](size_t lo, size_t hi) { std::fill(delta.begin() + lo, delta.begin() + hi, 0.0); });
    for (size_t h = 0; h < t_; ++h) {
      const double cv = coef_v[h], cg = coef_g[h];
      const double* xv = product(kXv, h, v);
      ex_.for_rows(n_, [&](size_t lo, size_t hi) {
        for (size_t i = lo; i < hi; ++i) delta[i] += cv * xv[i];
      });
      const double* xg = product(kXg, h, g);
      ex_.for_rows(n_, [&](size_t lo, size_t hi) {
        for (size_t i = lo; i < hi; ++i) delta[i] -= cg * xg[i];
      });
    }
    return ex_.sum_rows(n_, bregman_sum);
  }

  // g_j = Σ_i r_i x_ij (one pass over the columns). With `positive_part`
  // and a bias also the positive rows' part g⁺_j (for dual_bound).
  void gradient(const std::vector<double>& r, std::vector<double>& g, bool positive_part = false) {
    ex_.for_each(cols_, [&](size_t j) {
      const ColumnView c = cache_.column(j);
      double s = 0, sp = 0;
      if (opt_.bias && positive_part) {
        c.for_each([&](uint32_t row, float value) {
          const double t = r[row] * double(value);
          s += t;
          sp += y_[row] > 0 ? t : 0.0;
        });
        g_pos_[j] = sp;
      } else {
        c.for_each([&](uint32_t row, float value) { s += r[row] * double(value); });
      }
      g[j] = s;
    });
    ++column_passes_;
    ++gradient_evaluations_;
  }

  double dual_bound(const std::vector<double>& g);

  // L₀ when no L_t is carried over: the largest diagonal entry of ∇²P's bound
  // C·X'X (C/4·X'X for the logistic loss), max_j C·‖x_j‖², a lower bound on
  // its largest eigenvalue, so the line search only raises it. The paper's
  // L₀ = 0.01nC ignores the data's scale: on data scaled by 10^-3 it is 10^6
  // times too large, and τ then shrinks by η per iteration while the stop
  // rule's reference step Δ_1 is 10^6 times too small.
  double initial_lipschitz() const {
    double largest = 0;
    for (size_t j = 0; j < cols_; ++j) {
      double q = 0;
      cache_.column(j).for_each([&](uint32_t row, float value) {
        if (y_[row] != 0) q += double(value) * double(value);
      });
      largest = std::max(largest, q);
    }
    const double curvature = (LossT::kNeedsSigmoid ? 0.25 : 1.0) * opt_.C * largest;
    if (curvature > 0) return curvature;
    size_t fit_rows = 0;  // no column: the paper's 0.01nC over the rows in the fit
    for (size_t i = 0; i < n_; ++i) fit_rows += y_[i] != 0;
    return 0.01 * double(fit_rows) * opt_.C;
  }

  // ½(Σ_h ‖x_h‖)² for x in column space.
  double regularizer(const std::vector<double>& x) const {
    double z = 0;
    for (size_t h = 0; h < t_; ++h) {
      double s = 0;
      for (size_t j = begin(h); j < end(h); ++j) s += x[j] * x[j];
      z += std::sqrt(s);
    }
    return 0.5 * z * z;
  }

  // Margins m_i = y_i d_i and (logistic) p_i = σ(−m_i); optionally r_i = ∂P/∂d_i.
  void margins(const std::vector<double>& d, bool with_r) {
    const double C = opt_.C;
    ex_.for_rows(n_, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) {
        double m = double(y_[i]) * d[i];
        m_[i] = m;
        if constexpr (LossT::kNeedsSigmoid) p_[i] = detail::sigmoid(-m);
        if (with_r) {
          if constexpr (LossT::kNeedsSigmoid)
            r_[i] = -C * p_[i] * double(y_[i]);
          else
            r_[i] = LossT::deriv(C, m) * double(y_[i]);
        }
      }
    });
  }

  const SelectedFeatureCache& cache_;
  const int8_t* y_;
  ApgOptions opt_;
  Executor ex_;
  size_t n_, cols_, t_;
  Reservation reservation_;
  Reservation cache_reservation_;
  size_t cached_ = 0;                // products kept (of 2t)
  std::vector<double> products_;     // cached_ × n, slot 2h + kind
  std::vector<double> m_, p_, r_;    // r_ doubles as the scratch of product()
  std::vector<double> g_pos_;        // positive rows' part of ∇_ω P (bias only)
  int column_passes_ = 0;
  uint64_t recomputed_products_ = 0;
  int gradient_evaluations_ = 0;
};

// A lower bound on min F from Theorem 3's α at the point where r_ (= −α∘y)
// and g = X'r were formed: α is made feasible for the bias constraint
// Σ_i α_i y_i = 0 by scaling the larger class's α down, then D(θα) is
// maximised over the scalar θ ("dual scaling"; the best multiple of a dual
// point, which keeps the bound close to F while v is still far from ω*; θα
// stays feasible). With A = Σα, S = Σα², M = max_h ‖X_h'(α∘y)‖²:
//   squared hinge  D(θα) = θA − θ²(S/C + M)/2, maximal at θ = A/(S/C + M);
//   logistic       D(θα) = Σ_i C·H(θα_i/C) − θ²M/2 on 0 < θ < C/max α_i,
//                  concave: a few safeguarded Newton steps from θ = 1.
template <class LossT>
double ApgSolver<LossT>::dual_bound(const std::vector<double>& g) {
  const double C = opt_.C;
  double scale_pos = 1.0, scale_neg = 1.0;
  if (opt_.bias) {
    auto class_total = [&](int sign) {
      return ex_.sum_rows(n_, [&](size_t lo, size_t hi) {
        double s = 0;
        for (size_t i = lo; i < hi; ++i)
          if (y_[i] == sign) s -= r_[i] * sign;  // α_i
        return s;
      });
    };
    const double pos = class_total(1), neg = class_total(-1);
    const double common = std::min(pos, neg);
    if (pos > 0) scale_pos = common / pos;
    if (neg > 0) scale_neg = common / neg;
  }
  // α_i (feasible), 0 for a row outside this fit.
  auto alpha = [&](size_t i) {
    return y_[i] == 0 ? 0.0 : -r_[i] * double(y_[i]) * (y_[i] > 0 ? scale_pos : scale_neg);
  };
  // M: X_h'(α∘y) = −(scale₊ g⁺_h + scale₋ (g_h − g⁺_h)).
  double M = 0;
  for (size_t h = 0; h < t_; ++h) {
    double q = 0;
    for (size_t j = begin(h); j < end(h); ++j) {
      const double c = opt_.bias ? scale_pos * g_pos_[j] + scale_neg * (g[j] - g_pos_[j]) : g[j];
      q += c * c;
    }
    M = std::max(M, q);
  }
  if constexpr (!LossT::kNeedsSigmoid) {
    double A = 0, S = 0;
    size_t chunks = (n_ + kRowChunk - 1) / kRowChunk;
    std::vector<double> a_part(chunks), s_part(chunks);
    ex_.for_each(chunks, [&](size_t c) {
      double a = 0, q = 0;
      for (size_t i = c * kRowChunk; i < std::min(n_, (c + 1) * kRowChunk); ++i) {
        const double x = alpha(i);
        a += x;
        q += x * x;
      }
      a_part[c] = a;
      s_part[c] = q;
    });
    for (size_t c = 0; c < chunks; ++c) A += a_part[c], S += s_part[c];
    const double curvature = S / C + M;
    return curvature > 0 ? 0.5 * A * A / curvature : A;  // D(θ*α)
  } else {
    double largest = 0;
    for (size_t i = 0; i < n_; ++i) largest = std::max(largest, alpha(i));
    if (!(largest > 0)) return 0.0;
    const double theta_max = C / largest;
    // value, first and second derivative of D(θα) in θ.
    auto at = [&](double theta, double& d1, double& d2) {
      size_t chunks = (n_ + kRowChunk - 1) / kRowChunk;
      std::vector<double> v(chunks), a(chunks), b(chunks);
      ex_.for_each(chunks, [&](size_t c) {
        double sv = 0, s1 = 0, s2 = 0;
        for (size_t i = c * kRowChunk; i < std::min(n_, (c + 1) * kRowChunk); ++i) {
          const double x = alpha(i), u = theta * x;
          if (!(x > 0)) continue;
          sv += LossT::dual_term(C, u);
          if (u < C) {
            s1 += x * std::log((C - u) / u);
            s2 -= x * x * C / (u * (C - u));
          }
        }
        v[c] = sv, a[c] = s1, b[c] = s2;
      });
      double value = 0;
      d1 = 0, d2 = 0;
      for (size_t c = 0; c < chunks; ++c) value += v[c], d1 += a[c], d2 += b[c];
      d1 -= theta * M;
      d2 -= M;
      return value - 0.5 * theta * theta * M;
    };
    double theta = std::min(1.0, theta_max), d1, d2;
    double best = at(theta, d1, d2);
    for (int step = 0; step < 3 && d2 < 0; ++step) {
      double next = theta - d1 / d2;
      next = std::clamp(next, 0.5 * theta, std::min(2.0 * theta, 0.5 * (theta + theta_max)));
      theta = next;
      best = std::max(best, at(theta, d1, d2));
    }
    return best;
  }
}

template <class LossT>
ApgResult ApgSolver<LossT>::solve(ApgState& state, std::vector<double>& decision) {
  const double C = opt_.C, eta = opt_.eta;
  ApgResult res;

  std::vector<double> w = state.w;
  w.resize(cols_, 0.0);  // warm start ω⁰ = [ω_{t−1}; 0]
  double b = opt_.bias ? state.b : 0.0;
  // L_0 depends only on the rows in the fit (label ±1): a row left out
  // (label 0) must not change the iterates.
  double L = state.lipschitz > 0 ? state.lipschitz : initial_lipschitz();
  double tau_prev = L;  // τ₀ = L_t
  double tau_b_prev = 0;

  // Inner-product cache: the kept X_h v_h, X_h g_h (batch-major, slot 2h + kind).
  products_.resize(cached_ * n_);
  std::vector<double> w_prev = w, v = w, g(cols_), w_trial(cols_);
  // dv: decision values at (v, v_b); d: the trial step δ, then those at (ω^k, b).
  std::vector<double> dv(n_), d(n_);
  m_.resize(n_);
  r_.resize(n_);
  if constexpr (LossT::kNeedsSigmoid) p_.resize(n_);
  if (opt_.bias) g_pos_.resize(cols_);
  std::vector<double> norms(t_), scales(t_), coef_v(t_), coef_g(t_);
  std::vector<size_t> order;

  double b_prev = b, vb = b;
  refresh(kXv, v);
  sum_products(kXv, v, vb, dv);
  double F_prev = regularizer(w) + sum_loss<LossT>(ex_, C, y_, dv.data(), n_);
  double rho = 1.0;
  double tau_k = 0;
  double first_mapping = 0;

  for (int k = 1; k <= opt_.max_iterations && F_prev > 0; ++k) {
    // --- ω-step: gradient at (v, v_b) (dv holds its decision values), then
    // backtracking on τ using only the cached X_h v_h, X_h g_h.
    margins(dv, true);
    gradient(r_, g);
    refresh(kXg, g);

    double tau = eta * tau_prev;
    int trials = 0;
    bool accepted = false;
    double dist2_accepted = 0;
    while (true) {
      ++trials;
      ++res.line_search_steps;
      const double s = 1.0 / tau;
      for (size_t h = 0; h < t_; ++h) {
        double q = 0;
        for (size_t j = begin(h); j < end(h); ++j) {
          double u = v[j] - s * g[j];
          q += u * u;
        }
        norms[h] = std::sqrt(q);
      }
      detail::moreau_scales(norms.data(), t_, s, scales.data(), order);
      double dist2 = 0;
      for (size_t h = 0; h < t_; ++h) {
        for (size_t j = begin(h); j < end(h); ++j) {
          w_trial[j] = scales[h] * (v[j] - s * g[j]);
          double e = w_trial[j] - v[j];
          dist2 += e * e;
        }
        // X_h ω_h − X_h v_h = (scale_h − 1) X_h v_h − (scale_h/τ) X_h g_h
        coef_v[h] = scales[h] - 1.0;
        coef_g[h] = scales[h] * s;
      }
      // δ = X(ω − v) from the inner-product cache, and the F ≤ Q test.
      const double lhs = trial_step(v, g, coef_v, coef_g, d);
      if (lhs <= 0.5 * tau * dist2) {
        accepted = true;
        dist2_accepted = dist2;
        break;
      }
      if (trials >= kMaxLineSearchTrials) break;
      tau /= eta;
      L = std::max(L, tau);  // raise L_t instead of capping τ at it
    }
    if (!accepted) {
      res.stalled = true;
      break;
    }
    tau_k = tau;
    tau_prev = tau;
    std::swap(w_prev, w);
    std::swap(w, w_trial);
    // Decision values of (ω^k, v_b): X ω^k = X v + δ.
    ex_.for_rows(n_, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) d[i] = dv[i] + d[i];
    });

    // --- b-step: Armijo (36), gradient at (ω^k, v_b).
    double b_new = vb;
    double b_model_decrease = 0;  // (∂P/∂b)²/τ_b at (ω^k, v_b): the b part of Δ_k
    if (opt_.bias) {
      margins(d, false);
      double gb = -ex_.sum_rows(n_, [&](size_t lo, size_t hi) {
        double s = 0;
        for (size_t i = lo; i < hi; ++i) {
          if constexpr (LossT::kNeedsSigmoid)
            s -= C * p_[i] * double(y_[i]);  // φ'(m) = −C σ(−m), σ(−m) cached
          else
            s += LossT::deriv(C, m_[i]) * double(y_[i]);
        }
        return s;
      });
      if (gb != 0) {
        // The paper starts at τ_b = η τ_k. The curvature in b (≈ C·#active
        // samples) is usually far above τ_k, so that costs ~log_{1/η} of the
        // ratio O(n) trials every iteration; remembering τ_b like τ does not.
        // It may also be far below τ_k (b and ω have different units: data
        // scaled by s moves τ_k by s² relative to τ_b), so it is not floored at τ_k.
        double tau_b = eta * (tau_b_prev > 0 ? tau_b_prev : tau_k);
        double step = 0;
        for (int j = 0; j < kMaxLineSearchTrials; ++j) {
          ++res.bias_line_search_steps;
          step = -gb / tau_b;  // b − v_b; decision values move by −step
          double lhs = ex_.sum_rows(n_, [&](size_t lo, size_t hi) {
            double acc = 0;
            for (size_t i = lo; i < hi; ++i)
              acc += LossT::bregman(C, m_[i], LossT::kNeedsSigmoid ? p_[i] : 0.0,
                                    -double(y_[i]) * step);
            return acc;
          });
          // (36) ⟺ P(b) − P(v_b) − ∇_b P·(b − v_b) ≤ τ_b/2 (b − v_b)²
          if (lhs <= 0.5 * tau_b * step * step) break;
          tau_b /= eta;
          if (j + 1 == kMaxLineSearchTrials) step = 0;  // no descent found: keep v_b
        }
        tau_b_prev = tau_b;
        b_model_decrease = gb * gb / tau_b;
        b_new = vb + step;
        if (step != 0) {
          ex_.for_rows(n_, [&](size_t lo, size_t hi) {
            for (size_t i = lo; i < hi; ++i) d[i] -= step;
          });
        }
      }
    }
    b_prev = b;
    b = b_new;

    const double F = regularizer(w) + sum_loss<LossT>(ex_, C, y_, d.data(), n_);
    res.iterations = k;
    const double decrease = F_prev - F;
    const bool decreased = decrease >= 0;
    // ω^k = v^k and b^k = v_b is a fixed point of the prox-gradient map: optimal.
    const bool fixed_point = dist2_accepted == 0 && b == vb;
    // Δ_k = ‖G_k‖² in the metric of the accepted steps (see the header).
    const double mapping = tau_k * dist2_accepted + b_model_decrease;
    if (k == 1) first_mapping = mapping;
    // The reference is at least 10^-10·F: a solve warm-started at the
    // optimum (new features that get weight 0) starts with Δ_1 near rounding
    // level and could not shrink it by ε_in² more.
    const double reference = std::max(first_mapping, kReferenceFloor * F);
    if (fixed_point || mapping <= opt_.eps_inner * opt_.eps_inner * reference) {
      res.converged = true;
      F_prev = F;
      break;
    }

    // --- momentum with adaptive restart.
    double beta;
    if (!decreased) {
      ++res.restarts;
      rho = 1.0;
      beta = 0.0;
    } else {
      double rho_next = 0.5 * (1.0 + std::sqrt(1.0 + 4.0 * rho * rho));
      beta = (rho - 1.0) / rho_next;
      rho = rho_next;
    }
    F_prev = F;
    for (size_t j = 0; j < cols_; ++j) v[j] = w[j] + beta * (w[j] - w_prev[j]);
    vb = b + beta * (b - b_prev);
    // X_h v^{k+1}_h exactly, and the decision values at (v^{k+1}, v_b).
    refresh(kXv, v);
    sum_products(kXv, v, vb, dv);
  }
  if (F_prev == 0 && res.iterations == 0) res.converged = true;

  // Exact decision values and objective at the returned point.
  refresh(kXv, w);
  decision.assign(n_, 0.0);
  sum_products(kXv, w, b, decision);
  res.regularizer = regularizer(w);
  res.loss = sum_loss<LossT>(ex_, C, y_, decision.data(), n_);
  res.objective = res.regularizer + res.loss;
  // The certificate of the returned point: one more gradient pass, at ω.
  margins(decision, true);
  gradient(r_, g, true);
  const double dual = dual_bound(g);
  res.dual_bound = dual;
  res.relative_gap = res.objective > 0 ? std::max(res.objective - dual, 0.0) / res.objective : 0.0;
  res.gradient_evaluations = gradient_evaluations_;
  res.column_passes = column_passes_;
  res.recomputed_products = recomputed_products_;
  res.cached_products = cached_;
  res.lipschitz_max = L;
  if (tau_k > 0) state.lipschitz = eta * tau_k;  // L_t = η τ_k for the next outer iteration
  else if (state.lipschitz <= 0) state.lipschitz = L;
  state.w = std::move(w);
  state.b = b;
  return res;
}

}  // namespace

ApgResult solve_apg_dense(const SelectedFeatureCache& cache, const int8_t* labels,
                    const ApgOptions& options, ApgState& state, std::vector<double>& decision,
                    MemoryBudget& budget) {
  FGM_ASSERT(options.C > 0);
  FGM_ASSERT(options.eta > 0 && options.eta < 1);
  FGM_ASSERT(options.threads >= 1);
  for (uint64_t i = 0; i < cache.n_rows(); ++i) FGM_ASSERT(labels[i] >= -1 && labels[i] <= 1);
  if (options.loss == Loss::kLogistic) {
    ApgSolver<detail::LogisticLoss> solver(cache, labels, options, budget);
    return solver.solve(state, decision);
  }
  ApgSolver<detail::SquaredHingeLoss> solver(cache, labels, options, budget);
  return solver.solve(state, decision);
}

}  // namespace fgm::test
