#include "solvers/sifs/sifs_path.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/clock.h"
#include "core/error.h"

namespace fgm {

SifsSolver::SifsSolver(SifsData& data, const SifsSettings& settings) : SifsSolver(static_cast<SifsPasses&>(data), settings) {
  data_ = &data;
}

SifsSolver::SifsSolver(SifsPasses& data, const SifsSettings& settings) : passes_(data), settings_(settings) {
  const SifsLayout& layout = data.layout();
  const uint64_t nK = layout.coordinates();
  const uint64_t Km = data.weights();
  // θ, q, h, G, H, M, N, the reference θ (n·K each) and the w-side vectors
  // (z(1), centres, dots, squares, two references' w; K·m each).
  vectors_memory_ = data.budget().reserve((9 * nK + 8 * Km) * sizeof(double), "SIFS per-sample and per-feature vectors",
                                          "use fewer training rows or classes");
  std::vector<double> q(nK, 0.0), G;
  for (uint64_t d = 0; d < nK; ++d)
    if (layout.valid(d)) q[d] = 1;
  layout.column_coefficients(q, G);
  std::vector<double> dots;
  data.column_pass(G, nullptr, dots, nullptr);
  const double n = static_cast<double>(data.total_samples());
  z_one_.resize(Km);
  for (uint64_t e = 0; e < Km; ++e) {
    z_one_[e] = -dots[e] / n;
    beta_max_ = std::max(beta_max_, std::abs(z_one_[e]));
  }
}

double SifsSolver::alpha_max(double beta) {
  if (beta == cached_beta_) return cached_alpha_max_;
  std::vector<double> S(z_one_.size());
  bool any = false;
  for (uint64_t e = 0; e < S.size(); ++e) S[e] = soft_threshold(z_one_[e], beta), any |= S[e] != 0;
  double best = 0;
  if (any) {
    std::vector<double> M;
    passes_.row_pass(S, nullptr, M, nullptr);
    const SifsLayout& layout = passes_.layout();
    best = -INFINITY;
    for (uint64_t d = 0; d < layout.coordinates(); ++d)
      if (layout.valid(d)) best = std::max(best, -layout.coordinate_dot(d, M));
    best = passes_.max_over_processes(best) / (1 - settings_.gamma);
  }
  cached_beta_ = beta;
  cached_alpha_max_ = std::max(best, 0.0);
  return cached_alpha_max_;
}

SifsReference SifsSolver::closed_form(double beta) {
  SifsReference ref;
  ref.beta = beta;
  ref.alpha = alpha_max(beta);
  ref.gap = 0;
  ref.w.assign(z_one_.size(), 0.0);
  if (ref.alpha > 0)
    for (uint64_t e = 0; e < z_one_.size(); ++e) ref.w[e] = soft_threshold(z_one_[e], beta) / ref.alpha;
  const SifsLayout& layout = passes_.layout();
  ref.theta.assign(layout.coordinates(), 0.0);
  for (uint64_t d = 0; d < layout.coordinates(); ++d)
    if (layout.valid(d)) ref.theta[d] = 1;
  return ref;
}

double SifsSolver::closed_form_objective(const SifsReference& ref) const {
  // Every coordinate is in L: loss = Σ_d (1 + ⟨a_d, w⟩ − γ/2) = V(1 − γ/2) − n⟨z(1), w⟩.
  const double n = static_cast<double>(passes_.total_samples());
  const double V = static_cast<double>(passes_.total_valid_coordinates());
  double zw = 0, sq = 0, l1 = 0;
  for (uint64_t e = 0; e < ref.w.size(); ++e) zw += z_one_[e] * ref.w[e], sq += ref.w[e] * ref.w[e], l1 += std::abs(ref.w[e]);
  const double alpha = ref.alpha > 0 ? ref.alpha : 0;
  return (V * (1 - settings_.gamma / 2) - n * zw) / n + alpha / 2 * sq + ref.beta * l1;
}

ReducedProblem SifsSolver::build_reduced(const ScreenedSets& sets, double alpha, double beta) {
  SifsData& data = *data_;
  const SifsLayout& layout = data.layout();
  const uint32_t K = layout.blocks();
  const uint64_t m = data.columns(), n = layout.samples();
  ReducedProblem p;
  p.layout = &layout;
  p.alpha = alpha, p.beta = beta, p.gamma = settings_.gamma;
  std::vector<uint8_t> keep_column(m, 0), keep_row(n, 0);
  for (uint32_t k = 0; k < K; ++k)
    for (uint64_t j = 0; j < m; ++j) keep_column[j] |= sets.weight_free[k * m + j];
  for (uint64_t d = 0; d < layout.coordinates(); ++d)
    if (sets.coordinate[d] == CoordinateStatus::kFree) keep_row[d / K] = 1;
  // z_L = −(1/n) Σ_{d∈L̂} a_d on the kept columns, summed in the extraction pass.
  std::vector<double> L_coefficients, L_dots;
  if (sets.in_L > 0) {
    std::vector<double> q(layout.coordinates(), 0.0);
    for (uint64_t d = 0; d < layout.coordinates(); ++d)
      if (sets.coordinate[d] == CoordinateStatus::kL) q[d] = 1;
    layout.column_coefficients(q, L_coefficients);
  }
  p.kept_features = static_cast<uint64_t>(std::count(keep_column.begin(), keep_column.end(), 1));
  p.kept_samples = static_cast<uint64_t>(std::count(keep_row.begin(), keep_row.end(), 1));
  bool reuse = settings_.reuse_extraction && data.holds_columns() && settings_.screening != SifsScreening::kNone;
  if (reuse) {
    // Every row of a superset of the kept columns (see sifs_path.h). A column
    // kept in X but screened costs the solver a visit per entry and epoch
    // (about 20 operations per entry and point), an extraction about 3 per
    // kept entry: reuse while the screened columns hold at most a tenth of
    // the kept columns' nonzeros.
    const auto affordable = [&](const std::vector<uint8_t>& columns) {
      uint64_t kept = 0, extra = 0;
      for (uint64_t j = 0; j < m; ++j) {
        if (!columns[j]) continue;
        (keep_column[j] ? kept : extra) += data.held_column_nnz(j);
      }
      return extra * 10 <= kept;
    };
    std::vector<uint8_t> cached(m, 0);
    if (cached_X_)
      for (uint32_t j : cached_X_->column_dense) cached[j] = 1;
    bool covers = cached_X_.has_value();
    for (uint64_t j = 0; j < m && covers; ++j) covers = !keep_column[j] || cached[j];
    if (covers && affordable(cached)) {
      p.X = std::move(*cached_X_);
      ++extractions_reused_;
    } else {
      // Columns kept lately are likely kept again: keep them too when affordable.
      std::vector<uint8_t> columns = keep_column;
      for (uint64_t j = 0; j < m; ++j) cached[j] |= keep_column[j];
      if (cached_X_ && affordable(cached)) columns = std::move(cached);
      cached_X_.reset();  // its memory goes back before the new one is reserved
      try {
        p.X = data.extract(columns, std::vector<uint8_t>(n, 1));
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kOutOfMemory) throw;
        reuse = false;  // every row does not fit: extract exactly the kept rows below
      }
    }
    cached_X_.reset();
    // z_L from the rows of the samples in L̂ (every row is in X), each column's
    // sum over increasing rows as the extraction pass adds it.
    if (reuse && sets.in_L > 0) {
      const uint64_t cols = p.X.column_dense.size();
      L_dots.assign(K * cols, 0.0);
      for (uint64_t r = 0; r < p.X.row_sample.size(); ++r) {
        const double* g = &L_coefficients[p.X.row_sample[r] * K];
        bool any = false;
        for (uint32_t k = 0; k < K; ++k) any |= g[k] != 0;
        if (!any) continue;
        for (uint64_t e = p.X.row_ptr[r]; e < p.X.row_ptr[r + 1]; ++e)
          for (uint32_t k = 0; k < K; ++k) L_dots[k * cols + p.X.col[e]] += static_cast<double>(p.X.val[e]) * g[k];
      }
    }
  }
  if (!reuse) {
    p.X = sets.in_L > 0 ? data.extract(keep_column, keep_row, &L_coefficients, &L_dots)
                        : data.extract(keep_column, keep_row);
  }
  const uint64_t cols = p.X.column_dense.size();
  p.memory = data.budget().reserve(K * cols * 9 + p.X.row_sample.size() * K * 12, "SIFS reduced problem (vectors)");
  p.free_weight.assign(K * cols, 0);
  for (uint32_t k = 0; k < K; ++k)
    for (uint64_t c = 0; c < cols; ++c) p.free_weight[k * cols + c] = sets.weight_free[k * m + p.X.column_dense[c]];
  p.z_offset.assign(K * cols, 0.0);
  p.in_L = sets.in_L;
  if (sets.in_L > 0)
    for (uint32_t k = 0; k < K; ++k)
      for (uint64_t c = 0; c < cols; ++c)
        p.z_offset[k * cols + c] =
            -(reuse ? L_dots[k * cols + c] : L_dots[k * m + p.X.column_dense[c]]) / static_cast<double>(n);
  for (uint64_t r = 0; r < p.X.row_sample.size(); ++r) {
    const uint64_t i = p.X.row_sample[r];
    for (uint32_t k = 0; k < K; ++k)
      if (sets.coordinate[i * K + k] == CoordinateStatus::kFree)
        p.coordinate.push_back(i * K + k), p.coordinate_row.push_back(static_cast<uint32_t>(r));
  }
  return p;
}

SifsPoint SifsSolver::solve(const SifsReference& ref, double alpha, SifsReference& next) {
  const SifsLayout& layout = passes_.layout();
  SifsPoint pt;
  pt.beta = ref.beta;
  pt.alpha = alpha;
  auto t0 = std::chrono::steady_clock::now();
  ScreenedSets sets = screen(passes_, ref, alpha, settings_.gamma, settings_.screening);
  pt.screening_seconds = seconds_since(t0);
  pt.weights_screened = sets.weights_screened;
  pt.samples_in_R = sets.in_R;
  pt.samples_in_L = sets.in_L;
  pt.triggers = sets.triggers;
  next.alpha = alpha;
  next.beta = ref.beta;
  next.theta.assign(layout.coordinates(), 0.0);
  for (uint64_t d = 0; d < layout.coordinates(); ++d)
    if (sets.coordinate[d] == CoordinateStatus::kL) next.theta[d] = 1;
  solve_screened(sets, ref, alpha, pt, next);
  for (double v : next.w) pt.nonzeros += v != 0;
  return pt;
}

void SifsSolver::solve_screened(const ScreenedSets& sets, const SifsReference& ref, double alpha, SifsPoint& pt,
                                SifsReference& next) {
  SifsData& data = *data_;
  const SifsLayout& layout = data.layout();
  const uint32_t K = layout.blocks();
  const uint64_t m = data.columns();
  auto t0 = std::chrono::steady_clock::now();
  const uint64_t reused_before = extractions_reused_;
  ReducedProblem* problem;
  std::optional<ReducedProblem> local;
  if (settings_.screening == SifsScreening::kNone) {
    if (!full_problem_) full_problem_ = build_reduced(sets, alpha, ref.beta);
    full_problem_->alpha = alpha, full_problem_->beta = ref.beta;
    problem = &*full_problem_;
  } else {
    local = build_reduced(sets, alpha, ref.beta);
    problem = &*local;
  }
  pt.extract_seconds = seconds_since(t0);
  pt.extraction_reused = extractions_reused_ > reused_before;
  pt.reduced_features = problem->kept_features;
  pt.reduced_samples = problem->kept_samples;
  // The nonzeros the solver visits per pass over its coordinates (a reused
  // matrix holds more rows than that).
  for (uint32_t r : problem->coordinate_row) pt.reduced_nnz += problem->X.row_ptr[r + 1] - problem->X.row_ptr[r];

  t0 = std::chrono::steady_clock::now();
  std::vector<double> theta0(problem->coordinate.size());
  for (size_t q = 0; q < theta0.size(); ++q) theta0[q] = ref.theta[problem->coordinate[q]];
  SdcaResult r = solve_reduced(*problem, std::move(theta0), settings_.tol, settings_.max_epochs);
  pt.solve_seconds = seconds_since(t0);
  pt.objective = r.primal;
  pt.gap = r.gap;
  pt.converged = r.converged;
  pt.epochs = r.epochs;

  next.gap = std::max(r.gap, 0.0);
  next.w.assign(K * m, 0.0);
  const uint64_t cols = problem->X.column_dense.size();
  for (uint32_t k = 0; k < K; ++k)
    for (uint64_t c = 0; c < cols; ++c) next.w[k * m + problem->X.column_dense[c]] = r.w[k * cols + c];
  for (size_t q = 0; q < r.theta.size(); ++q) next.theta[problem->coordinate[q]] = r.theta[q];
  if (local && settings_.reuse_extraction && data.holds_columns() && local->X.row_sample.size() == layout.samples())
    cached_X_ = std::move(local->X);  // every row: reusable (an exact extraction after running out of memory is not)
}

void SifsSolver::run_path(const std::function<void(const SifsPoint&, const SifsReference&)>& on_point) {
  const auto beta_ratios = log_spaced(settings_.beta_max_ratio, settings_.beta_min_ratio, settings_.beta_points);
  const auto alpha_ratios = log_spaced(1.0, settings_.alpha_min_ratio, settings_.alpha_points);
  for (double br : beta_ratios) {
    const double beta = br * beta_max_;
    SifsReference ref = closed_form(beta);
    const bool degenerate = ref.alpha <= 0;  // β ≥ β_max: w* = 0 at every α
    for (double ar : alpha_ratios) {
      SifsPoint pt;
      if (degenerate || ar == 1.0) {
        pt.beta = beta;
        pt.alpha = degenerate ? 0.0 : ref.alpha;
        pt.closed_form = true;
        pt.objective = closed_form_objective(ref);
        for (double v : ref.w) pt.nonzeros += v != 0;
        pt.beta_ratio = br, pt.alpha_ratio = ar;
        on_point(pt, ref);
        continue;
      }
      SifsReference next;
      pt = solve(ref, ar * alpha_max(beta), next);
      pt.beta_ratio = br, pt.alpha_ratio = ar;
      on_point(pt, next);
      ref = std::move(next);
    }
  }
}

}  // namespace fgm
