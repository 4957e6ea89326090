// Accelerated proximal gradient (APG) for the FGM subproblem, after
// M. Tan, I. W. Tsang, L. Wang, "Towards Ultrahigh Dimensional Feature
// Selection for Big Data", JMLR 15 (2014), Section 5.2, Algorithms 3 and 4:
//
//   min_{ω, b}  F(ω, b) = ½ (Σ_h ‖ω_h‖₂)² + P(ω, b)                        (31)
//
//   P = (C/2) Σ_i max(1 − y_i d_i, 0)²   (squared hinge)
//   P =  C    Σ_i log(1 + exp(−y_i d_i)) (logistic),   d_i = Σ_h ω_h'x_ih − b,
//
// where ω_h are the weights of batch h of the selected-feature cache and b is
// the (unregularised) bias, fixed at 0 unless options.bias.
//
// One iteration k (Algorithm 4, block steps):
//   ω-step  g = ∇_ω P(v, v_b); τ = η τ_{k−1}; while F(S_τ(v − g/τ), v_b) >
//           Q_τ(...) τ ← τ/η; ω^k = S_τ(...) (S_τ: Moreau projection, Alg. 3).
//   b-step  τ_b = η τ_k; b = v_b − ∇_b P(ω^k, v_b)/τ_b with Armijo (36).
//   momentum ϱ_{k+1} = (1 + sqrt(1 + 4ϱ_k²))/2, v = ω^k + (ϱ_k−1)/ϱ_{k+1}(ω^k − ω^{k−1}),
//           likewise v_b.
// Stop: sqrt(Δ_k/max(Δ_1, 10^-10·F_k)) ≤ ε_in, or max_iterations, where
//   Δ_k = τ_k ‖v − ω^k‖² + (∂P/∂b)²/τ_b = ‖G_ω‖²/τ_k + (∂P/∂b)²/τ_b
// is the squared norm of the prox-gradient mapping G_k = (τ_k (v − ω^k),
// ∂P/∂b(ω^k, v_b)) in the metric of the accepted step sizes (twice the
// decrease the prox step's model predicts). It is 0 exactly at a solution of
// (31), it scales like F under any rescaling of the data that leaves the
// problem the same (X → sX with C → C/s²: ω, b and the curvatures change
// units, Δ_k/Δ_1 does not; the plain Euclidean ‖G‖ mixes the ω and b parts
// in different units), and it is measured against its value at the first
// iteration of this solve. This replaces the paper's (41),
// 0 ≤ (F_{k−1} − F_k)/F_{k−1} ≤ ε_in, which cannot tell convergence from slow
// progress: on badly scaled data (raw counts, poly-2 squares of them) τ is
// huge, every step is tiny and (41) held after one iteration with the model
// far from the optimum; Δ_1/Δ_1 = 1 never stops a solve at once. The
// reference Δ_1 is floored at 10^-10·F_k (relative to F, so still
// scale-free), for solves that start at the optimum.
// (On news20, ε_in = 0.15 gives the path objective of a 100× tighter solve
// at ~1.6× the time of (41) with 1e-3: bench/README.md, "Stopping rules".)
//
// The certificate. The dual of (31) is
//   max_α  D(α) = Σ_i −φ*(−α_i) − ½ max_h ‖X_h'(α∘y)‖²   (Σ_i α_i y_i = 0 with a bias)
// (½(Σ_h‖ω_h‖)² has the conjugate ½(max_h‖·‖)²; −φ*(−α) = α − α²/(2C) for
// the squared hinge, C·H(α/C) for the logistic loss, H the binary entropy).
// Every feasible α gives D(α) ≤ min F, so (F − D(α))/F bounds the relative
// suboptimality of a point of objective F whatever the scale. α is Theorem
// 3's dual point at a primal point, made feasible and scaled by dual_bound.
// Two kinds of solve (the paper's Inexact FGM):
//  * inexact (options.certify false: intermediate outer iterations): stops on
//    the mapping rule above; the certificate of the returned point is only
//    reported (one more gradient pass). Far from ω* the bound is pessimistic
//    (relative gaps 0.4–0.999 at ε_in = 0.15), so stopping every solve on it
//    would spend the time where the next batch changes the problem anyway.
//  * certified (options.certify: the solve a run's model comes from): every
//    iteration's gradient pass g = X'r(v) is also what Theorem 3's α(v)
//    needs (with a bias, plus the positive rows' part g⁺ and the class sums
//    of α, in the same pass and reduction), so D(θα(v)) costs O(|R|) more
//    per iteration. The solver keeps the best objective F_best (APG is not
//    monotone) and its point, and the best dual value D_best; F_best − D_best
//    is a valid bound at every iteration, and the solve stops when
//    F_best − D_best ≤ gap_tolerance·F_best, or at the cap. It returns the
//    best point; its objective and certificate (max of D_best and the dual at
//    the returned point) are then formed exactly, and converged means that
//    relative gap is ≤ gap_tolerance, whatever ended the loop.
//
// Deviations from the printed algorithm (all keep its fixed points):
//  * L₀ = max_j C‖x_j‖² instead of 0.01nC (initial_lipschitz: scale-aware).
//  * τ is not capped at L_t. With the cap, a stale L_t that is below the
//    true Lipschitz constant makes the backtracking loop forever; here τ
//    grows freely and L_t is raised to the largest τ seen.
//  * F ≤ Q is tested in the equivalent form Σ_i D_φ(m_i, Δm_i) ≤ τ/2‖ω − v‖²
//    (D_φ the Bregman remainder of the per-sample loss; Ω cancels on both
//    sides and ⟨∇P(v), ω − v⟩ = Σ_i ∂_d φ·Δd_i). Both sides are sums of
//    non-negative terms computed from the step itself, so the test stays
//    meaningful when the step is 1e-12 of P instead of drowning in the
//    rounding of P(ω) − P(v). The Armijo test (36) is rewritten the same way.
//  * The b-step gradient is taken at (ω^k, v_b), the point the Armijo test
//    (36) compares against, so (36) is a genuine descent test. The paper
//    writes ∇_b P(v, v_b).
//  * The b line search starts from η·(τ_b of the last iteration) instead of
//    η τ_k (η τ_k only at the first). ∂²P/∂b² (≈ C·#margin violators) is
//    typically far above τ_k, so the printed rule spends ~log_{1/η}(L_b/τ_k)
//    O(n) trials on every iteration (5.5 per iteration in the n = 100000
//    benchmark, 1.x with memory); on scaled data it can also be far below τ_k
//    (ω and b have different units), where a floor at τ_k kept the b steps
//    10^6 times too short.
//  * APG is not monotone: if F_k > F_{k−1} the momentum is reset (ϱ = 1,
//    v = ω^k; O'Donoghue & Candès' adaptive restart).
//  * The Section 5.5 inner-product cache is held sparsely, and rows that no
//    selected column touches are handled in aggregate (below). Same iterates
//    in exact arithmetic; sums are associated differently from a dense sweep
//    over all n rows, so the last bits differ from the dense solver (kept as a
//    test twin: tests/solvers/dense_apg_twin.cpp).
//
// Where the work goes (the layout: apg_layout.h). Only the rows some selected
// column touches ("touched", R) are swept row by row. Every other row has
// d_i = −b whatever ω is, so its loss, its share of ∂P/∂b and its Bregman
// terms depend on its label and b alone: the solver keeps two counts (label
// +1 and −1 among the untouched rows) and adds count·φ(∓b) etc., exactly. In
// the ω line search their step X(ω − v) is 0, so they add nothing.
//
// Section 5.5 inner-product cache, sparse: per batch h the solver keeps
// X_h v_h and X_h g_h (g = ∇_ω P(v)) only on R_h, the rows batch h touches
// (|R_h| ≤ nnz_h entries each). A trial step of the line search then costs
// O(Σ_h |R_h| + |R|), not a pass over the columns: S_τ only rescales
// u_h = v_h − g_h/τ, so X_h ω_h − X_h v_h = (scale_h(τ) − 1)·X_h v_h −
// (scale_h(τ)/τ)·X_h g_h. Each iteration makes three passes over the selected
// columns: g = X'∇_d P, X_h g_h, and X_h v_h at the new v. X v is formed
// exactly rather than by the recurrence X v^{k+1} = (1+β) X ω^k − β X ω^{k−1},
// which would save one pass but drifts, needs a third vector per batch, and
// could not be reproduced for a batch whose vectors were not kept.
//
// Cost per iteration: three column passes, O(nnz) each; per line-search
// trial O(Σ_h |R_h| + |R|) (Σ_h |R_h| ≤ nnz); per b-step trial and for the
// margins, F and the sums O(|R|) each; no O(n) work at all. Per solve: one
// pass over the n labels (the untouched counts), three sweeps over the
// selected columns' row indices to build the layout (O(n/64) per batch for
// its bitmaps), and the n-entry `decision` output. (The dense form swept
// 3·n·t doubles per line-search trial and O(n) per row pass.) Measured with
// bench/bench_apg.cpp: 3·10^6 rows, 40 columns of 2,444 nonzeros in 4
// batches: 0.6 ms per iteration against 0.44 s for the dense form. When the
// selected columns touch nearly every row (the poly-2 scale run: 9.6·10^6
// nonzeros on 0.97·10^6 of 10^6 rows) the column passes and the row passes
// over R are the cost, as before; only the O(n·t) part is gone.
//
// The cache shrinks instead of failing: it keeps as many of the 2t vectors
// as the budget has room for (batch by batch, X_h v_h before X_h g_h) and
// recomputes the others from the batch's columns each time they are needed.
// Cached and recomputed vectors come from the same routine and are added to
// the sums in the same order, so the solution is bit-for-bit the same for any
// cache size; a smaller cache costs time (two batch passes per line-search
// trial for each batch not kept), not memory.
//
// Determinism: every sum has a fixed order independent of options.threads.
// Columns are reduced one per task (a sequential dot product), X_h x_h one
// batch per task in column order, and sums over the touched rows in fixed
// chunks of kLayoutRowChunk compact rows whose partial sums are added in chunk
// order, then the untouched rows' terms. The hot loops are the small kernels
// of apg_kernels.h.
#include "solvers/apg.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "core/error.h"
#include "core/huge_pages.h"
#include "core/interrupt.h"
#include "core/loop_rendezvous.h"
#include "solvers/apg_kernels.h"
#include "solvers/apg_layout.h"
#include "solvers/losses.h"
#include "solvers/moreau_projection.h"
#include "solvers/prox_newton.h"

namespace fgm {

const char* loss_name(Loss loss) {
  switch (loss) {
    case Loss::kSquaredHinge: return "squared_hinge";
    case Loss::kLogistic: return "logistic";
  }
  return "unknown";
}

namespace {

using detail::ApgLayout;
using detail::UntouchedRows;

constexpr size_t kRowChunk = 8192;         // rows per partial sum of loss_value
constexpr int kMaxLineSearchTrials = 200;  // τ grows by η^-200: only a stall gets here
constexpr double kReferenceFloor = 1e-10;  // smallest reference Δ_1 of the stop rule, relative to F
constexpr size_t kColumnTaskNnz = 16384;   // nonzeros per column task (results do not depend on it)

// Runs index loops on a task arena of exactly `threads` threads (or inline).
class Executor {
 public:
  explicit Executor(int threads) {
    if (threads > 1) arena_.emplace(threads);
  }

  // f(i) for i in [0, count), `grain` indices per task. Each f(i) writes only
  // its own outputs, so the split does not change any result.
  template <class F>
  void for_each(size_t count, const F& f, size_t grain = 1) {
    if (!arena_ || count <= grain) {
      for (size_t i = 0; i < count; ++i) f(i);
      return;
    }
    LoopRendezvous rendezvous;
    arena_->execute([&] {
      tbb::parallel_for(tbb::blocked_range<size_t>(0, count, grain), [&](const tbb::blocked_range<size_t>& r) {
        rendezvous.arrive();
        for (size_t i = r.begin(); i != r.end(); ++i) f(i);
      });
    });
  }

  // Σ_c f(c) over `count` chunks, component-wise, partial sums added in chunk order.
  template <size_t K, class F>
  std::array<double, K> sum(size_t count, const F& f) {
    partial_.assign(count * K, 0.0);
    for_each(count, [&](size_t c) {
      const std::array<double, K> part = f(c);
      for (size_t k = 0; k < K; ++k) partial_[c * K + k] = part[k];
    });
    std::array<double, K> total{};
    for (size_t c = 0; c < count; ++c)
      for (size_t k = 0; k < K; ++k) total[k] += partial_[c * K + k];
    return total;
  }

 private:
  std::optional<tbb::task_arena> arena_;
  std::vector<double> partial_;
};

// The untouched rows' terms: d_i = −β for all of them, so a row of label +1
// has margin −β and one of label −1 margin β; each term is a count times the
// per-row value (a class with no rows adds nothing, also when the value is inf).
template <class LossT>
class UntouchedTerms {
 public:
  UntouchedTerms(const UntouchedRows& rows, double C)
      : positive_(double(rows.positive)), negative_(double(rows.negative)), C_(C) {}

  bool empty() const { return positive_ == 0 && negative_ == 0; }
  double positive() const { return positive_; }
  double negative() const { return negative_; }

  // Σ φ(m_i).
  double loss(double beta) const {
    return weighted(LossT::value(C_, -beta), LossT::value(C_, beta));
  }
  // Σ φ'(m_i)·y_i = Σ ∂P/∂d_i.
  double derivative(double beta) const {
    return weighted(LossT::deriv(C_, -beta), -LossT::deriv(C_, beta));
  }
  // Σ D_φ(m_i, −y_i·step): the b-step moves every d_i by −step.
  double bias_bregman(double beta, double step) const {
    return weighted(LossT::bregman(C_, -beta, sigma(beta), -step),
                    LossT::bregman(C_, beta, sigma(-beta), step));
  }
  // α_i = −φ'(m_i) (Theorem 3) of a row of label +1 and −1.
  static double alpha_positive(double C, double beta) { return -LossT::deriv(C, -beta); }
  static double alpha_negative(double C, double beta) { return -LossT::deriv(C, beta); }

 private:
  // p = σ(−m) for the logistic Bregman term (unused by the squared hinge).
  static double sigma(double z) { return LossT::kNeedsSigmoid ? detail::sigmoid(z) : 0.0; }
  double weighted(double positive_term, double negative_term) const {
    double s = 0;
    if (positive_ > 0) s += positive_ * positive_term;
    if (negative_ > 0) s += negative_ * negative_term;
    return s;
  }

  double positive_, negative_, C_;
};

template <class LossT>
double sum_loss(Executor& ex, double C, const int8_t* y, const double* d, size_t n) {
  const size_t chunks = (n + kRowChunk - 1) / kRowChunk;
  return ex.sum<1>(chunks, [&](size_t c) {
    const size_t lo = c * kRowChunk, hi = std::min(n, lo + kRowChunk);
    return std::array<double, 1>{kernels::loss_sum<LossT>(C, y + lo, d + lo, hi - lo)};
  })[0];
}

ApgRowIndex g_forced_row_index = ApgRowIndex::kSmallest;
ApgRowIndex row_index_of(const ApgRowPart& spec) {
  return spec.row_index == ApgRowIndex::kSmallest ? g_forced_row_index : spec.row_index;
}

// Vectors over the touched rows (up to n doubles, allocated per solve).
using RowVector = HugeVector<double>;

// One part of the rows (the single store: all of them; a partitioned store:
// one row partition): its layout, its vectors over its touched rows, its
// share of the inner-product cache and its decision values. Every sum over
// rows is taken per part by the code below and the parts' sums are added by
// the RowSumReduction (apg_reduction.h).
template <class LossT>
struct RowPart {
  RowPart(const ApgRowPart& spec, double C, MemoryBudget& budget)
      : layout(*spec.cache, spec.labels, budget, row_index_of(spec)),
        untouched(layout.untouched(), C),
        y(layout.labels()),
        rows(layout.touched()),
        decision(spec.decision) {}

  size_t chunks() const { return layout.num_chunks(); }
  double* p_at(size_t lo) { return LossT::kNeedsSigmoid ? p.data() + lo : nullptr; }

  ApgLayout layout;
  UntouchedTerms<LossT> untouched;
  const int8_t* y;  // labels of the touched rows
  size_t rows;      // touched rows
  std::vector<double>* decision;
  Reservation reservation, cache_reservation;
  size_t column_grain = 1;
  size_t cached = 0;                   // products kept (of 2t)
  std::vector<uint64_t> slot_offset;   // slot s starts at products[slot_offset[s]]
  HugeVector<double> products;         // the kept slots, back to back
  RowVector p, r;  // r doubles as the scratch of product() and of the trial loss
  // dv: decision values at (v, v_b); d: the trial step δ, then those at (ω^k, b).
  RowVector dv, d;
};

template <class LossT>
class ApgSolver {
 public:
  using Part = RowPart<LossT>;

  ApgSolver(const std::vector<ApgRowPart>& parts, RowSumReduction& reduce, const ApgOptions& options,
            MemoryBudget& budget)
      : opt_(options), ex_(options.threads), reduce_(reduce) {
    FGM_ASSERT(!parts.empty());
    const SelectedFeatureCache& cache = *parts[0].cache;
    cols_ = cache.num_columns();
    t_ = cache.num_batches();
    for (size_t h = 0; h < t_; ++h) FGM_ASSERT(cache.batch_begin(h) <= cache.batch_end(h));
    FGM_ASSERT(t_ == 0 ? cols_ == 0 : cache.batch_begin(0) == 0);
    batch_begin_.resize(t_ + 1);
    for (size_t h = 0; h < t_; ++h) batch_begin_[h] = cache.batch_begin(h);
    batch_begin_[t_] = cols_;
    // Required, per part: 3 vectors over its touched rows for decision values
    // at v and ω (the latter also the trial step δ) and ∇_d P (also the
    // scratch for products not cached), and σ for the logistic loss (margins
    // are formed again where needed); with the first part 6 per column for ω
    // (now, previous, trial), v, g, g⁺ (7 with the best ω of a certified
    // solve) and 5 per batch; with each further
    // part 2 per column for its partial gradients.
    for (const ApgRowPart& spec : parts) {
      FGM_ASSERT(spec.cache->num_columns() == cols_ && spec.cache->num_batches() == t_);
      for (size_t h = 0; h < t_; ++h) FGM_ASSERT(spec.cache->batch_begin(h) == batch_begin_[h]);
      parts_.push_back(std::make_unique<Part>(spec, options.C, budget));
      Part& q = *parts_.back();
      const uint64_t row_vectors = LossT::kNeedsSigmoid ? 4 : 3;
      const uint64_t first_part_columns = options.certify ? 7 : 6;  // + the best ω of a certified solve
      const uint64_t column_doubles =
          parts_.size() == 1 ? first_part_columns * uint64_t(cols_) + 5 * uint64_t(t_) : 2 * uint64_t(cols_);
      q.reservation = budget.reserve((row_vectors * uint64_t(q.rows) + column_doubles) * sizeof(double),
                                     "APG per-row vectors", "use fewer training rows");
      q.column_grain = std::max<size_t>(
          1, kColumnTaskNnz / std::max<uint64_t>(1, q.layout.nnz() / std::max<size_t>(1, cols_)));
    }
    // Optional: the inner-product cache, 2 vectors per batch (|R_h| entries
    // each), slot 2h + kind, as many leading slots as fit (part by part).
    for (auto& part : parts_) {
      Part& q = *part;
      q.cache_reservation = budget.reserve_up_to(2 * q.layout.total_batch_rows() * sizeof(double), sizeof(double),
                                                 "APG inner-product cache");
      q.slot_offset.assign(2 * t_ + 1, 0);
      uint64_t kept = 0;
      for (size_t s = 0; s < 2 * t_; ++s) {
        const uint64_t size = q.layout.batch_rows(s / 2);
        if ((kept + size) * sizeof(double) > q.cache_reservation.bytes()) break;
        kept += size;
        q.slot_offset[++q.cached] = kept;
      }
      q.cache_reservation.resize(kept * sizeof(double));
    }
  }

  ApgResult solve(ApgState& state);

  // Every part's decision values at (state.w, state.b), formed as solve()
  // forms those it returns (so the same bits).
  void decisions(const ApgState& state) {
    std::vector<double> w = state.w;
    w.resize(cols_, 0.0);
    const double b = opt_.bias ? state.b : 0.0;
    for (auto& part : parts_) {
      part->products.resize(part->slot_offset[part->cached]);
      part->d.resize(part->rows);
      part->r.resize(part->rows);
    }
    refresh(kXv, w);
    sum_products(kXv, w, b, &Part::d);
    write_decisions(b);
  }

 private:
  // Each part's decision output from its d: d on the touched rows, 0 − b on every other row.
  void write_decisions(double b) {
    for (auto& part : parts_) {
      Part& q = *part;
      q.decision->assign(q.layout.n_rows(), 0.0 - b);
      q.layout.for_each_touched([&](uint32_t c, uint32_t row) { (*q.decision)[row] = q.d[c]; });
    }
  }

  size_t begin(size_t h) const { return batch_begin_[h]; }
  size_t end(size_t h) const { return batch_begin_[h + 1]; }

  // Which products the inner-product cache keeps: slot 2h + kind while it fits.
  enum Product { kXv = 0, kXg = 1 };
  static bool is_cached(const Part& q, Product kind, size_t h) { return 2 * h + kind < q.cached; }
  static double* slot(Part& q, Product kind, size_t h) { return q.products.data() + q.slot_offset[2 * h + kind]; }

  // out = X_h x_h on R_h, one pass over batch h's columns. Every product,
  // cached or not, is formed here, so its bits do not depend on the cache size.
  void batch_product(const Part& q, size_t h, const std::vector<double>& x, double* out) const {
    std::fill(out, out + q.layout.batch_rows(h), 0.0);
    for (size_t j = begin(h); j < end(h); ++j) {
      if (x[j] == 0) continue;
      kernels::scatter_axpy(x[j], q.layout, j, out);
    }
  }

  // Forms every part's cached products X_h x_h of `kind` (one task per
  // batch); the others are formed on demand by product().
  void refresh(Product kind, const std::vector<double>& x) {
    for (auto& part : parts_) {
      Part& q = *part;
      size_t kept = 0;
      while (kept < t_ && is_cached(q, kind, kept)) ++kept;
      ex_.for_each(kept, [&](size_t h) { batch_product(q, h, x, slot(q, kind, h)); });
    }
    ++column_passes_;
  }

  // X_h x_h: the cached vector (refreshed with this x) or, if the cache has
  // no room for it, recomputed into the scratch vector (valid until the next call).
  const double* product(Part& q, Product kind, size_t h, const std::vector<double>& x) {
    if (is_cached(q, kind, h)) return slot(q, kind, h);
    batch_product(q, h, x, q.r.data());
    ++recomputed_products_;
    return q.r.data();
  }

  // out_i = Σ_h (X_h x_h)_i − b on the touched rows of every part, batches added in order.
  void sum_products(Product kind, const std::vector<double>& x, double b, RowVector Part::*vec) {
    for (auto& part : parts_) sum_products(*part, kind, x, b, (*part).*vec);
  }
  void sum_products(Part& q, Product kind, const std::vector<double>& x, double b, RowVector& out) {
    const bool all_cached = t_ == 0 || is_cached(q, kind, t_ - 1);
    if (all_cached) {  // one sweep per chunk, same order of operations
      ex_.for_each(q.chunks(), [&](size_t c) {
        const size_t lo = q.layout.chunk_begin(c), hi = q.layout.chunk_end(c);
        std::fill(out.begin() + lo, out.begin() + hi, 0.0);
        for (size_t h = 0; h < t_; ++h) kernels::scatter_add(q.layout, h, c, slot(q, kind, h), out.data());
        kernels::subtract_scalar(b, hi - lo, out.data() + lo);
      });
      return;
    }
    std::fill(out.begin(), out.end(), 0.0);
    for (size_t h = 0; h < t_; ++h) {
      const double* p = product(q, kind, h, x);
      ex_.for_each(q.chunks(), [&](size_t c) { kernels::scatter_add(q.layout, h, c, p, out.data()); });
    }
    ex_.for_each(q.chunks(), [&](size_t c) {
      const size_t lo = q.layout.chunk_begin(c), hi = q.layout.chunk_end(c);
      kernels::subtract_scalar(b, hi - lo, out.data() + lo);
    });
  }

  // ω_trial = S_τ(v − g/τ) (Moreau projection, batch by batch) and the
  // coefficients of X_h(ω_h − v_h) = (scale_h − 1) X_h v_h − (scale_h/τ) X_h g_h;
  // returns ‖ω_trial − v‖².
  double prox_trial(double tau, const std::vector<double>& v, const std::vector<double>& g) {
    const double s = 1.0 / tau;
    for (size_t h = 0; h < t_; ++h) {
      double q = 0;
      for (size_t j = begin(h); j < end(h); ++j) {
        double u = v[j] - s * g[j];
        q += u * u;
      }
      norms_[h] = std::sqrt(q);
    }
    detail::moreau_scales(norms_.data(), t_, s, scales_.data(), order_);
    double dist2 = 0;
    for (size_t h = 0; h < t_; ++h) {
      for (size_t j = begin(h); j < end(h); ++j) {
        w_trial_[j] = scales_[h] * (v[j] - s * g[j]);
        double e = w_trial_[j] - v[j];
        dist2 += e * e;
      }
      coef_v_[h] = scales_[h] - 1.0;
      coef_g_[h] = scales_[h] * s;
    }
    return dist2;
  }

  // On part q: δ = X(ω − v) = Σ_h coef_v_h X_h v_h − coef_g_h X_h g_h on the
  // touched rows (added in batch order, v before g) into q.d, and the part's
  // Σ_i of the loss's Bregman remainder at δ. Untouched rows have δ_i = 0 and
  // add exactly 0. With `loss`, also the part's P at the trial point dv + δ
  // and bias b (the same sums, in the same order, as loss() of those
  // decision values). q.dv: decision values at (v, v_b), where the margins
  // and p were formed.
  double trial_step(Part& q, const std::vector<double>& v, const std::vector<double>& g, double b, double* loss) {
    const double C = opt_.C;
    RowVector& delta = q.d;
    auto sums = [&](size_t c) {
      const size_t lo = q.layout.chunk_begin(c), hi = q.layout.chunk_end(c);
      std::array<double, 2> s{
          kernels::bregman_sum<LossT>(C, q.y + lo, q.dv.data() + lo, q.p_at(lo), delta.data() + lo, hi - lo), 0.0};
      if (loss) {
        kernels::add(q.dv.data() + lo, delta.data() + lo, hi - lo, q.r.data() + lo);
        s[1] = kernels::loss_sum<LossT>(C, q.y + lo, q.r.data() + lo, hi - lo);
      }
      return s;
    };
    std::array<double, 2> total;
    if (q.cached >= 2 * t_) {
      // Everything cached: one fused sweep per row chunk (same order of operations).
      total = ex_.sum<2>(q.chunks(), [&](size_t c) {
        std::fill(delta.begin() + q.layout.chunk_begin(c), delta.begin() + q.layout.chunk_end(c), 0.0);
        for (size_t h = 0; h < t_; ++h)
          kernels::scatter_trial_step(coef_v_[h], slot(q, kXv, h), -coef_g_[h], slot(q, kXg, h), q.layout, h, c,
                                      delta.data());
        return sums(c);
      });
    } else {
      std::fill(delta.begin(), delta.end(), 0.0);
      for (size_t h = 0; h < t_; ++h) {
        for (Product kind : {kXv, kXg}) {
          const double coef = kind == kXv ? coef_v_[h] : -coef_g_[h];
          const double* p = product(q, kind, h, kind == kXv ? v : g);
          ex_.for_each(q.chunks(),
                       [&](size_t c) { kernels::scatter_scaled_add(coef, q.layout, h, c, p, delta.data()); });
        }
      }
      total = ex_.sum<2>(q.chunks(), sums);
    }
    if (loss) *loss = total[1] + q.untouched.loss(b);
    return total[0];
  }

  // Part q's g_j = Σ_i r_i x_ij (one pass over the columns). With `positive`
  // also the positive rows' part g⁺_j (for dual_bound).
  void gradient_part(Part& q, double* g, double* positive) {
    ex_.for_each(cols_, [&](size_t j) {
      if (positive) {
        double s = 0, sp = 0;
        detail::with_fast_popcount([&] {
          q.layout.for_each_entry(j, [&](uint32_t, uint32_t i, float value) {
            const double t = q.r[i] * double(value);
            s += t;
            sp += q.y[i] > 0 ? t : 0.0;
          });
        });
        positive[j] = sp;
        g[j] = s;
      } else {
        g[j] = kernels::gather_dot(q.layout, j, q.r.data());
      }
    }, q.column_grain);
  }

  // ∇_ω P at the decision values whose r every part holds, reduced (one pass over the columns).
  void gradient(std::vector<double>& g) {
    std::vector<std::vector<double>> local(parts_.size(), std::vector<double>(cols_));
    for (size_t k = 0; k < parts_.size(); ++k) gradient_part(*parts_[k], local[k].data(), nullptr);
    g = reduce_.sum(local, cols_);
    ++column_passes_;
    ++gradient_evaluations_;
  }

  double dual_bound(const std::vector<double>& g, const std::vector<double>& g_pos, double pos, double neg, double b);

  // What dual_bound needs at the decision values whose r every part holds
  // (bias b), in one pass over the columns and one reduction: g = ∇_ω P = X'r
  // and, with a bias, the positive rows' part g⁺ and Σα per class; with
  // `loss_of`, also P at the decision values every part holds there.
  struct DualInputs {
    std::vector<double> g, g_pos;
    double pos = 0, neg = 0, loss = 0;
  };
  void dual_inputs(double b, RowVector Part::*loss_of, DualInputs& out);
  double dual_bound(const DualInputs& in, double b) { return dual_bound(in.g, in.g_pos, in.pos, in.neg, b); }

  // Part q's squared column norms over its rows in the fit (label ±1), one per column.
  void column_norms(const Part& q, double* out) const {
    for (size_t j = 0; j < cols_; ++j) {
      double s = 0;
      q.layout.for_each_entry(j, [&](uint32_t, uint32_t i, float value) {
        if (q.y[i] != 0) s += double(value) * double(value);
      });
      out[j] = s;
    }
  }

  // L₀ when no L_t is carried over: the largest diagonal entry of ∇²P's bound
  // C·X'X (C/4·X'X for the logistic loss), max_j C·‖x_j‖², a lower bound on
  // its largest eigenvalue, so the line search only raises it. The paper's
  // L₀ = 0.01nC ignores the data's scale: on data scaled by 10^-3 it is 10^6
  // times too large, and τ then shrinks by η per iteration while the stop
  // rule's reference step Δ_1 is 10^6 times too small. `norms`: the reduced
  // column norms, `fit_rows`: the rows with label ±1.
  double initial_lipschitz(const double* norms, double fit_rows) const {
    double largest = 0;
    for (size_t j = 0; j < cols_; ++j) largest = std::max(largest, norms[j]);
    const double curvature = (LossT::kNeedsSigmoid ? 0.25 : 1.0) * opt_.C * largest;
    if (curvature > 0) return curvature;
    // No column: the paper's 0.01nC over the rows in the fit.
    return 0.01 * fit_rows * opt_.C;
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

  // Part q's P at decision values d on its touched rows and bias b (untouched rows: −b).
  double loss_part(Part& q, const RowVector& d, double b) {
    const double C = opt_.C;
    const double touched = ex_.sum<1>(q.chunks(), [&](size_t c) {
      const size_t lo = q.layout.chunk_begin(c), hi = q.layout.chunk_end(c);
      return std::array<double, 1>{kernels::loss_sum<LossT>(C, q.y + lo, d.data() + lo, hi - lo)};
    })[0];
    return touched + q.untouched.loss(b);
  }
  // P over all parts, reduced.
  double loss(RowVector Part::*vec, double b) {
    std::vector<std::vector<double>> local(parts_.size(), std::vector<double>(1));
    for (size_t k = 0; k < parts_.size(); ++k) local[k][0] = loss_part(*parts_[k], (*parts_[k]).*vec, b);
    return reduce_.sum(local, 1)[0];
  }

  // On every part's touched rows, with margins m_i = y_i d_i: (logistic)
  // p_i = σ(−m_i), optionally r_i = ∂P/∂d_i.
  void margins(RowVector Part::*vec, bool with_r) {
    if (!with_r && !LossT::kNeedsSigmoid) return;  // nothing to store
    for (auto& part : parts_) {
      Part& q = *part;
      const RowVector& d = q.*vec;
      ex_.for_each(q.chunks(), [&](size_t c) {
        const size_t lo = q.layout.chunk_begin(c), hi = q.layout.chunk_end(c);
        kernels::margins<LossT>(opt_.C, q.y + lo, d.data() + lo, hi - lo, q.p_at(lo), q.r.data() + lo, with_r);
      });
    }
  }

  // The ω line search from τ = η τ_{k−1} (τ ← τ/η on rejection), F ≤ Q tested
  // on the cached products. A batched reduction evaluates 2, 4, 8, … trial
  // steps per reduction (and, without a bias, P at each trial point, which
  // then is F's loss): the accepted τ is the first that passes, as one by one.
  // On acceptance w_trial_ and every part's d (= δ) hold the accepted step.
  struct LineSearch {
    bool accepted = false;
    double tau = 0, dist2 = 0;
    bool has_loss = false;
    double loss = 0;  // P at the accepted point (has_loss)
  };
  LineSearch line_search(double tau, const std::vector<double>& v, const std::vector<double>& g, double vb, double& L,
                         ApgResult& res);

  // The b-step (Armijo (36)) at (ω^k, v_b), whose decision values on the
  // touched rows are in every part's d: returns b − v_b and updates d; sets
  // the b part (∂P/∂b)²/τ_b of Δ_k and remembers τ_b.
  double bias_step(double vb, double tau_k, double& model_decrease, ApgResult& res);

  ApgOptions opt_;
  Executor ex_;
  RowSumReduction& reduce_;
  std::vector<std::unique_ptr<Part>> parts_;
  size_t cols_ = 0, t_ = 0;
  std::vector<size_t> batch_begin_;
  std::vector<double> w_trial_, coef_v_, coef_g_, norms_, scales_;  // of the last prox_trial
  std::vector<size_t> order_;
  double tau_b_prev_ = 0;
  int column_passes_ = 0;
  uint64_t recomputed_products_ = 0;
  int gradient_evaluations_ = 0;
};

template <class LossT>
typename ApgSolver<LossT>::LineSearch ApgSolver<LossT>::line_search(double tau, const std::vector<double>& v,
                                                                     const std::vector<double>& g, double vb,
                                                                     double& L, ApgResult& res) {
  const double eta = opt_.eta;
  const bool batched = reduce_.batched();
  LineSearch out;
  out.has_loss = batched && !opt_.bias;
  const size_t width = out.has_loss ? 2 : 1;
  int trials = 0;
  size_t round = batched ? 2 : 1;
  std::vector<double> round_tau, round_dist2;
  while (trials < kMaxLineSearchTrials) {
    const size_t count = std::min<size_t>(round, size_t(kMaxLineSearchTrials - trials));
    round_tau.resize(count);
    round_dist2.resize(count);
    std::vector<std::vector<double>> local(parts_.size(), std::vector<double>(count * width));
    double trial_tau = tau;
    for (size_t i = 0; i < count; ++i) {
      if (i > 0) trial_tau /= eta;
      round_tau[i] = trial_tau;
      round_dist2[i] = prox_trial(trial_tau, v, g);
      for (size_t k = 0; k < parts_.size(); ++k) {
        double* at = local[k].data() + i * width;
        at[0] = trial_step(*parts_[k], v, g, vb, out.has_loss ? at + 1 : nullptr);
      }
    }
    const std::vector<double> sums = reduce_.sum(local, count * width);
    for (size_t i = 0; i < count; ++i) {
      ++trials;
      ++res.line_search_steps;
      if (sums[i * width] <= 0.5 * tau * round_dist2[i]) {
        out.accepted = true;
        out.tau = tau;
        out.dist2 = round_dist2[i];
        if (out.has_loss) out.loss = sums[i * width + 1];
        if (i + 1 != count) {  // a later trial overwrote the accepted step: form it again
          prox_trial(tau, v, g);
          for (auto& part : parts_) trial_step(*part, v, g, vb, nullptr);
        }
        return out;
      }
      if (trials >= kMaxLineSearchTrials) break;
      tau /= eta;  // round_tau[i + 1], bit for bit
      L = std::max(L, tau);  // raise L_t instead of capping τ at it
    }
    round *= 2;
  }
  return out;
}

// A lower bound on min F from Theorem 3's α at the point where every part's
// r (= −α∘y on the touched rows) and g = X'r were formed, with bias b (the
// untouched rows' α follow from it): α is made feasible for the bias
// constraint Σ_i α_i y_i = 0 by scaling the larger class's α down (pos, neg:
// Σα over each class, reduced), then D(θα) is
// maximised over the scalar θ ("dual scaling"; the best multiple of a dual
// point, which keeps the bound close to F while v is still far from ω*; θα
// stays feasible). With A = Σα, S = Σα², M = max_h ‖X_h'(α∘y)‖²:
//   squared hinge  D(θα) = θA − θ²(S/C + M)/2, maximal at θ = A/(S/C + M);
//   logistic       D(θα) = Σ_i C·H(θα_i/C) − θ²M/2 on 0 < θ < C/max α_i,
//                  concave: a few safeguarded Newton steps from θ = 1.
template <class LossT>
double ApgSolver<LossT>::dual_bound(const std::vector<double>& g, const std::vector<double>& g_pos, double pos,
                                    double neg, double b) {
  const double C = opt_.C;
  const double alpha_pos = UntouchedTerms<LossT>::alpha_positive(C, b);
  const double alpha_neg = UntouchedTerms<LossT>::alpha_negative(C, b);
  double scale_pos = 1.0, scale_neg = 1.0;
  if (opt_.bias) {
    const double common = std::min(pos, neg);
    if (pos > 0) scale_pos = common / pos;
    if (neg > 0) scale_neg = common / neg;
  }
  // α_i (feasible) of part q's touched row i, 0 for a row outside this fit.
  auto alpha = [&](const Part& q, size_t i) {
    return q.y[i] == 0 ? 0.0 : -q.r[i] * double(q.y[i]) * (q.y[i] > 0 ? scale_pos : scale_neg);
  };
  // The untouched rows' α by label.
  const std::array<double, 2> class_alpha{alpha_pos * scale_pos, alpha_neg * scale_neg};
  auto class_rows = [](const Part& q) {
    return std::array<double, 2>{q.untouched.positive(), q.untouched.negative()};
  };
  // M: X_h'(α∘y) = −(scale₊ g⁺_h + scale₋ (g_h − g⁺_h)).
  double M = 0;
  for (size_t h = 0; h < t_; ++h) {
    double s = 0;
    for (size_t j = begin(h); j < end(h); ++j) {
      const double c = opt_.bias ? scale_pos * g_pos[j] + scale_neg * (g[j] - g_pos[j]) : g[j];
      s += c * c;
    }
    M = std::max(M, s);
  }
  std::vector<std::vector<double>> local(parts_.size());
  if constexpr (!LossT::kNeedsSigmoid) {
    for (size_t k = 0; k < parts_.size(); ++k) {
      const Part& q = *parts_[k];
      auto AS = ex_.sum<2>(q.chunks(), [&](size_t c) {
        const size_t lo = q.layout.chunk_begin(c), hi = q.layout.chunk_end(c);
        std::array<double, 2> s{};
        for (size_t i = lo; i < hi; ++i) {
          const double x = alpha(q, i);
          s[0] += x;
          s[1] += x * x;
        }
        return s;
      });
      const auto rows = class_rows(q);
      for (size_t c = 0; c < 2; ++c) {
        if (rows[c] == 0) continue;
        AS[0] += rows[c] * class_alpha[c];
        AS[1] += rows[c] * (class_alpha[c] * class_alpha[c]);
      }
      local[k] = {AS[0], AS[1]};
    }
    const std::vector<double> AS = reduce_.sum(local, 2);
    const double A = AS[0], S = AS[1];
    const double curvature = S / C + M;
    return curvature > 0 ? 0.5 * A * A / curvature : A;  // D(θ*α)
  } else {
    double largest = 0;
    for (const auto& part : parts_) {
      const Part& q = *part;
      for (size_t i = 0; i < q.rows; ++i) largest = std::max(largest, alpha(q, i));
      const auto rows = class_rows(q);
      for (size_t c = 0; c < 2; ++c)
        if (rows[c] > 0) largest = std::max(largest, class_alpha[c]);
    }
    largest = reduce_.max(largest);
    if (!(largest > 0)) return 0.0;
    const double theta_max = C / largest;
    // The terms of one α_i at θ: value, first and second derivative of D(θα) in θ.
    auto terms = [&](double x, double theta, std::array<double, 3>& s, double weight) {
      detail::logistic_dual_terms(C, x, theta, s.data(), weight);
    };
    auto at = [&](double theta, double& d1, double& d2) {
      for (size_t k = 0; k < parts_.size(); ++k) {
        const Part& q = *parts_[k];
        std::array<double, 3> s = ex_.sum<3>(q.chunks(), [&](size_t c) {
          const size_t lo = q.layout.chunk_begin(c), hi = q.layout.chunk_end(c);
          std::array<double, 3> part{};
          for (size_t i = lo; i < hi; ++i) terms(alpha(q, i), theta, part, 1.0);
          return part;
        });
        const auto rows = class_rows(q);
        for (size_t c = 0; c < 2; ++c)
          if (rows[c] > 0) terms(class_alpha[c], theta, s, rows[c]);
        local[k] = {s[0], s[1], s[2]};
      }
      const std::vector<double> s = reduce_.sum(local, 3);
      d1 = s[1] - theta * M;
      d2 = s[2] - M;
      return s[0] - 0.5 * theta * theta * M;
    };
    return detail::best_logistic_dual(theta_max, at);
  }
}

template <class LossT>
void ApgSolver<LossT>::dual_inputs(double b, RowVector Part::*loss_of, DualInputs& out) {
  const bool bias = opt_.bias;
  const size_t g_width = bias ? 2 * cols_ : cols_;
  const size_t width = g_width + (bias ? 2 : 0) + (loss_of ? 1 : 0);
  const double alpha_pos = UntouchedTerms<LossT>::alpha_positive(opt_.C, b);
  const double alpha_neg = UntouchedTerms<LossT>::alpha_negative(opt_.C, b);
  std::vector<std::vector<double>> local(parts_.size());
  for (size_t k = 0; k < parts_.size(); ++k) {
    Part& q = *parts_[k];
    std::vector<double>& sums = local[k];
    sums.assign(width, 0.0);
    gradient_part(q, sums.data(), bias ? sums.data() + cols_ : nullptr);
    size_t at = g_width;
    if (bias) {
      const auto totals = ex_.sum<2>(q.chunks(), [&](size_t c) {
        const size_t lo = q.layout.chunk_begin(c), hi = q.layout.chunk_end(c);
        std::array<double, 2> s{};
        for (size_t i = lo; i < hi; ++i) {
          if (q.y[i] > 0) s[0] -= q.r[i];  // α_i = −r_i y_i
          if (q.y[i] < 0) s[1] += q.r[i];
        }
        return s;
      });
      sums[at] = totals[0] + (q.untouched.positive() > 0 ? q.untouched.positive() * alpha_pos : 0.0);
      sums[at + 1] = totals[1] + (q.untouched.negative() > 0 ? q.untouched.negative() * alpha_neg : 0.0);
      at += 2;
    }
    if (loss_of) sums[at] = loss_part(q, q.*loss_of, b);
  }
  const std::vector<double> total = reduce_.sum(local, width);
  ++column_passes_;
  ++gradient_evaluations_;
  out.g.assign(total.begin(), total.begin() + std::ptrdiff_t(cols_));
  if (bias) out.g_pos.assign(total.begin() + std::ptrdiff_t(cols_), total.begin() + std::ptrdiff_t(g_width));
  else out.g_pos.clear();
  size_t at = g_width;
  if (bias) {
    out.pos = total[at];
    out.neg = total[at + 1];
    at += 2;
  }
  out.loss = loss_of ? total[at] : 0.0;
}

template <class LossT>
double ApgSolver<LossT>::bias_step(double vb, double tau_k, double& model_decrease, ApgResult& res) {
  const double C = opt_.C;
  model_decrease = 0;
  margins(&Part::d, false);
  std::vector<std::vector<double>> local(parts_.size(), std::vector<double>(1));
  for (size_t k = 0; k < parts_.size(); ++k) {
    Part& q = *parts_[k];
    const double derivatives = ex_.sum<1>(q.chunks(), [&](size_t c) {
      const size_t lo = q.layout.chunk_begin(c), hi = q.layout.chunk_end(c);
      return std::array<double, 1>{kernels::derivative_sum<LossT>(C, q.y + lo, q.d.data() + lo, q.p_at(lo), hi - lo)};
    })[0];
    local[k][0] = derivatives + q.untouched.derivative(vb);
  }
  const double gb = -reduce_.sum(local, 1)[0];  // ∂P/∂b = −Σ_i ∂P/∂d_i
  if (gb == 0) return 0.0;
  // The paper starts at τ_b = η τ_k. The curvature in b (≈ C·#active
  // samples) is usually far above τ_k, so that costs ~log_{1/η} of the
  // ratio trials every iteration; remembering τ_b like τ does not.
  // It may also be far below τ_k (b and ω have different units: data
  // scaled by s moves τ_k by s² relative to τ_b), so it is not floored at τ_k.
  const double eta = opt_.eta;
  double tau_b = eta * (tau_b_prev_ > 0 ? tau_b_prev_ : tau_k);
  double step = 0;
  for (int j = 0; j < kMaxLineSearchTrials; ++j) {
    ++res.bias_line_search_steps;
    step = -gb / tau_b;  // b − v_b; decision values move by −step
    for (size_t k = 0; k < parts_.size(); ++k) {
      Part& q = *parts_[k];
      const double touched = ex_.sum<1>(q.chunks(), [&](size_t c) {
        const size_t lo = q.layout.chunk_begin(c), hi = q.layout.chunk_end(c);
        return std::array<double, 1>{
            kernels::bias_bregman_sum<LossT>(C, q.y + lo, q.d.data() + lo, q.p_at(lo), step, hi - lo)};
      })[0];
      local[k][0] = touched + q.untouched.bias_bregman(vb, step);
    }
    const double lhs = reduce_.sum(local, 1)[0];
    // (36) ⟺ P(b) − P(v_b) − ∇_b P·(b − v_b) ≤ τ_b/2 (b − v_b)²
    if (lhs <= 0.5 * tau_b * step * step) break;
    tau_b /= eta;
    if (j + 1 == kMaxLineSearchTrials) step = 0;  // no descent found: keep v_b
  }
  tau_b_prev_ = tau_b;
  model_decrease = gb * gb / tau_b;
  if (step != 0) {
    for (auto& part : parts_) {
      Part& q = *part;
      ex_.for_each(q.chunks(), [&](size_t c) {
        const size_t lo = q.layout.chunk_begin(c), hi = q.layout.chunk_end(c);
        kernels::subtract_scalar(step, hi - lo, q.d.data() + lo);
      });
    }
  }
  return step;
}

template <class LossT>
ApgResult ApgSolver<LossT>::solve(ApgState& state) {
  const double eta = opt_.eta;
  const uint64_t reductions_before = reduce_.calls();
  ApgResult res;

  std::vector<double> w = state.w;
  w.resize(cols_, 0.0);  // warm start ω⁰ = [ω_{t−1}; 0]
  double b = opt_.bias ? state.b : 0.0;

  // Inner-product cache: the kept X_h v_h, X_h g_h (batch-major, slot 2h + kind).
  for (auto& part : parts_) {
    Part& q = *part;
    q.products.resize(q.slot_offset[q.cached]);
    q.dv.resize(q.rows);
    q.d.resize(q.rows);
    q.r.resize(q.rows);
    if constexpr (LossT::kNeedsSigmoid) q.p.resize(q.rows);
  }
  std::vector<double> w_prev = w, v = w, g(cols_);
  w_trial_.assign(cols_, 0.0);
  norms_.assign(t_, 0.0);
  scales_.assign(t_, 0.0);
  coef_v_.assign(t_, 0.0);
  coef_g_.assign(t_, 0.0);

  double b_prev = b, vb = b;
  refresh(kXv, v);
  sum_products(kXv, v, vb, &Part::dv);
  // One reduction: P at (v, v_b), and (without an L_t carried over) the column
  // norms and the rows in the fit behind L₀ — which depends only on the rows
  // in the fit (label ±1): a row left out (label 0) must not change the iterates.
  const bool need_l0 = !(state.lipschitz > 0);
  const size_t width = need_l0 ? 2 + cols_ : 1;
  std::vector<std::vector<double>> local(parts_.size(), std::vector<double>(width));
  for (size_t k = 0; k < parts_.size(); ++k) {
    Part& q = *parts_[k];
    local[k][0] = loss_part(q, q.dv, vb);
    if (need_l0) {
      local[k][1] = double(q.layout.fit_rows());
      column_norms(q, local[k].data() + 2);
    }
  }
  const std::vector<double> initial = reduce_.sum(local, width);
  double L = need_l0 ? initial_lipschitz(initial.data() + 2, initial[1]) : state.lipschitz;
  double tau_prev = L;  // τ₀ = L_t
  double F_prev = regularizer(w) + initial[0];
  double rho = 1.0;
  double tau_k = 0;
  double first_mapping = 0;
  // A certified solve keeps the best point seen (APG is not monotone) and the
  // best dual bound, each from its own iterate: F_best − dual_best bounds
  // F_best − min F at every iteration.
  double F_best = F_prev, b_best = b;
  double dual_best = -std::numeric_limits<double>::infinity();
  std::vector<double> w_best = opt_.certify ? w : std::vector<double>();
  DualInputs at_v;

  for (int k = 1; k <= opt_.max_iterations && F_prev > 0; ++k) {
    check_interrupt();
    // --- ω-step: gradient at (v, v_b) (dv holds its decision values), then
    // backtracking on τ using only the cached X_h v_h, X_h g_h.
    margins(&Part::dv, true);
    if (opt_.certify) {
      // The same pass gives what Theorem 3's dual point at (v, v_b) needs
      // (with a bias g⁺ and the class sums): its bound costs O(|R|) more.
      dual_inputs(vb, nullptr, at_v);
      g.swap(at_v.g);
      dual_best = std::max(dual_best, dual_bound(g, at_v.g_pos, at_v.pos, at_v.neg, vb));
    } else {
      gradient(g);
    }
    refresh(kXg, g);

    const LineSearch step = line_search(eta * tau_prev, v, g, vb, L, res);
    if (!step.accepted) {
      res.stalled = true;
      break;
    }
    const double dist2_accepted = step.dist2;
    tau_k = step.tau;
    tau_prev = step.tau;
    std::swap(w_prev, w);
    std::swap(w, w_trial_);
    // Decision values of (ω^k, v_b): X ω^k = X v + δ.
    for (auto& part : parts_) {
      Part& q = *part;
      ex_.for_each(q.chunks(), [&](size_t c) {
        const size_t lo = q.layout.chunk_begin(c), hi = q.layout.chunk_end(c);
        kernels::add(q.dv.data() + lo, q.d.data() + lo, hi - lo, q.d.data() + lo);
      });
    }

    // --- b-step: Armijo (36), gradient at (ω^k, v_b).
    double b_model_decrease = 0;  // (∂P/∂b)²/τ_b at (ω^k, v_b): the b part of Δ_k
    const double b_step = opt_.bias ? bias_step(vb, tau_k, b_model_decrease, res) : 0.0;
    const double b_new = vb + b_step;
    b_prev = b;
    b = b_new;

    // F at (ω^k, b); without a bias the batched line search has P already.
    const double F = regularizer(w) + (step.has_loss ? step.loss : loss(&Part::d, b));
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
    if (opt_.certify) {
      if (F < F_best) {
        F_best = F;
        w_best = w;
        b_best = b;
      }
      // Stop on the certificate; res.converged is set from the exact one below.
      if (fixed_point || F_best - dual_best <= opt_.gap_tolerance * F_best) {
        F_prev = F;
        break;
      }
    } else if (fixed_point || mapping <= opt_.eps_inner * opt_.eps_inner * reference) {
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
    sum_products(kXv, v, vb, &Part::dv);
  }
  if (F_prev == 0 && res.iterations == 0) res.converged = true;
  if (opt_.certify && F_best < F_prev) {  // return the best point seen
    w.swap(w_best);
    b = b_best;
  }

  // Exact decision values and objective at the returned point: X_h ω_h on
  // the touched rows, 0 − b on every other row.
  refresh(kXv, w);
  sum_products(kXv, w, b, &Part::d);
  write_decisions(b);
  // One reduction: the certificate's gradient pass at the returned point
  // (with a bias also its positive rows' part and α summed per class), and P.
  margins(&Part::d, true);
  DualInputs at_end;
  dual_inputs(b, &Part::d, at_end);
  res.regularizer = regularizer(w);
  res.loss = at_end.loss;
  res.objective = res.regularizer + res.loss;
  // Every dual bound is valid for min F, so the best of the iterates' (a
  // certified solve) and the returned point's certifies the returned point.
  res.dual_bound = std::max(dual_best, dual_bound(at_end, b));
  res.relative_gap = res.objective > 0 ? std::max(res.objective - res.dual_bound, 0.0) / res.objective : 0.0;
  res.certified = opt_.certify;
  if (opt_.certify) res.converged = res.relative_gap <= opt_.gap_tolerance;
  res.gradient_evaluations = gradient_evaluations_;
  res.column_passes = column_passes_;
  res.recomputed_products = recomputed_products_;
  for (const auto& part : parts_) {
    res.cached_products += part->cached;
    res.touched_rows += part->rows;
    res.product_entries += part->layout.total_batch_rows();
  }
  res.reductions = reduce_.calls() - reductions_before;
  res.lipschitz_max = L;
  if (tau_k > 0) state.lipschitz = eta * tau_k;  // L_t = η τ_k for the next outer iteration
  else if (state.lipschitz <= 0) state.lipschitz = L;
  state.w = std::move(w);
  state.b = b;
  return res;
}

}  // namespace

ApgResult solve_apg(const std::vector<ApgRowPart>& parts, RowSumReduction& reduction, const ApgOptions& options,
                    ApgState& state, MemoryBudget& budget) {
  FGM_ASSERT(options.C > 0);
  FGM_ASSERT(options.eta > 0 && options.eta < 1);
  FGM_ASSERT(options.threads >= 1);
  for (const ApgRowPart& part : parts)
    for (uint64_t i = 0; i < part.cache->n_rows(); ++i) FGM_ASSERT(part.labels[i] >= -1 && part.labels[i] <= 1);
  const size_t columns = parts.empty() ? 0 : parts[0].cache->num_columns();
  if (options.method == SubproblemMethod::kNewton ||
      (options.method == SubproblemMethod::kAuto && columns <= kProxNewtonMaxColumns))
    return solve_prox_newton(parts, reduction, options, state, budget);
  if (options.loss == Loss::kLogistic) {
    ApgSolver<detail::LogisticLoss> solver(parts, reduction, options, budget);
    return solver.solve(state);
  }
  ApgSolver<detail::SquaredHingeLoss> solver(parts, reduction, options, budget);
  return solver.solve(state);
}

void apg_decision_values(const std::vector<ApgRowPart>& parts, const ApgOptions& options, const ApgState& state,
                         MemoryBudget& budget) {
  LocalRowSums unused;  // forming d reduces nothing
  if (options.loss == Loss::kLogistic) {
    ApgSolver<detail::LogisticLoss>(parts, unused, options, budget).decisions(state);
    return;
  }
  ApgSolver<detail::SquaredHingeLoss>(parts, unused, options, budget).decisions(state);
}

void force_apg_row_index(ApgRowIndex index) { g_forced_row_index = index; }

ApgResult solve_apg(const SelectedFeatureCache& cache, const int8_t* labels,
                    const ApgOptions& options, ApgState& state, std::vector<double>& decision,
                    MemoryBudget& budget) {
  LocalRowSums local;
  return solve_apg({ApgRowPart{&cache, labels, &decision}}, local, options, state, budget);
}

void dual_from_decision(Loss loss, double C, const int8_t* labels,
                        const std::vector<double>& decision, std::vector<double>& alpha) {
  alpha.resize(decision.size());
  for (size_t i = 0; i < decision.size(); ++i) {
    double m = double(labels[i]) * decision[i];
    // α_i = C ξ_i (ξ_i = max(1 − m, 0)) or C σ(ξ_i) with ξ_i = −m (Theorem 3);
    // a row outside the fit (label 0) has no constraint, so α_i = 0.
    if (labels[i] == 0) alpha[i] = 0;
    else alpha[i] = loss == Loss::kLogistic ? C * detail::sigmoid(-m) : C * std::max(1.0 - m, 0.0);
  }
}

double loss_value(Loss loss, double C, const int8_t* labels, const std::vector<double>& decision) {
  // Summed over all rows in fixed chunks: equals the solver's P up to rounding.
  Executor ex(1);
  if (loss == Loss::kLogistic)
    return sum_loss<detail::LogisticLoss>(ex, C, labels, decision.data(), decision.size());
  return sum_loss<detail::SquaredHingeLoss>(ex, C, labels, decision.data(), decision.size());
}

}  // namespace fgm
