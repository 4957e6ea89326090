#include "solvers/mslr/latent_newton.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "core/error.h"
#include "solvers/apg.h"
#include "solvers/prox_newton.h"

namespace fgm::mslr {
namespace {

// One group per constraint: constraint t's columns copied as batch t.
std::unique_ptr<SelectedFeatureCache> latent_columns(const SelectedFeatureCache& columns,
                                                     const std::vector<std::vector<uint32_t>>& constraints,
                                                     MemoryBudget& budget) {
  auto latent = std::make_unique<SelectedFeatureCache>(budget, columns.n_rows());
  for (const auto& d : constraints) {
    latent->begin_batch();
    for (uint32_t k : d) {
      FGM_ASSERT(k < columns.num_columns());
      latent->add_column_copy(columns, k);
    }
  }
  return latent;
}

// C σ(−m), for m = y_i w'x_i, kept ≥ the smallest normal double.
double scaled_sigmoid(double C, double m) {
  const double s = m >= 0 ? std::exp(-m) / (1 + std::exp(-m)) : 1 / (1 + std::exp(m));
  return std::max(C * s, std::numeric_limits<double>::min());
}

// c_k = Σ_i α_i y_i x_ik per selected column, summed per part and reduced.
std::vector<double> column_products(const std::vector<LatentPart>& parts, RowSumReduction& reduction,
                                    uint32_t n_columns) {
  std::vector<std::vector<double>> local;
  for (const LatentPart& part : parts) {
    const std::vector<double>& alpha = *part.alpha;
    std::vector<double> c(n_columns, 0.0);
    for (uint32_t k = 0; k < n_columns; ++k)
      part.columns->column(k).for_each([&](uint32_t row, float value) {
        if (part.labels[row] != 0) c[k] += alpha[row] * part.labels[row] * value;
      });
    local.push_back(std::move(c));
  }
  return reduction.sum(local, n_columns);
}

// v_t = μ_t c∘d^t for the constraints the previous solve had (its optimality
// condition, header), 0 for the rest; v = 0 without μ.
std::vector<double> warm_start(const std::vector<LatentPart>& parts, RowSumReduction& reduction,
                               const std::vector<std::vector<uint32_t>>& constraints,
                               const std::vector<double>& warm_mu, const SelectedFeatureCache& groups) {
  std::vector<double> v(groups.num_columns(), 0.0);
  if (warm_mu.empty()) return v;
  FGM_ASSERT(warm_mu.size() <= constraints.size());
  const std::vector<double> c =
      column_products(parts, reduction, static_cast<uint32_t>(parts.front().columns->num_columns()));
  for (size_t t = 0; t < warm_mu.size(); ++t)
    for (size_t at = 0; at < constraints[t].size(); ++at)
      v[groups.batch_begin(t) + at] = warm_mu[t] * c[constraints[t][at]];
  return v;
}

}  // namespace

MinimaxResult solve_minimax_newton(const std::vector<LatentPart>& parts, RowSumReduction& reduction,
                                   const std::vector<std::vector<uint32_t>>& constraints,
                                   const MinimaxOptions& options, const LatentNewtonOptions& newton,
                                   const std::vector<double>& warm_mu, MemoryBudget& budget) {
  const size_t T = constraints.size();
  FGM_ASSERT(T >= 1 && T <= kMaxConstraints && !parts.empty());
  const uint32_t n_columns = static_cast<uint32_t>(parts.front().columns->num_columns());
  std::vector<std::unique_ptr<SelectedFeatureCache>> latent;
  std::vector<std::vector<double>> decision(parts.size());
  std::vector<ApgRowPart> rows;
  for (size_t p = 0; p < parts.size(); ++p) {
    FGM_ASSERT(parts[p].columns->num_columns() == n_columns);
    latent.push_back(latent_columns(*parts[p].columns, constraints, budget));
    decision[p].assign(parts[p].columns->n_rows(), 0.0);
    rows.push_back({latent.back().get(), parts[p].labels, &decision[p]});
  }
  ApgOptions apg;
  apg.loss = Loss::kLogistic;
  apg.method = SubproblemMethod::kAuto;
  apg.C = options.C;
  apg.bias = false;
  apg.certify = true;
  apg.gap_tolerance = options.tolerance;
  const size_t copies = latent.front()->num_columns();
  apg.max_iterations = copies <= kProxNewtonMaxColumns ? newton.max_iterations : 20 * newton.max_iterations;
  apg.threads = newton.threads;
  ApgState state;
  state.w = warm_start(parts, reduction, constraints, warm_mu, *latent.front());
  const ApgResult solved = solve_apg(rows, reduction, apg, state, budget);

  MinimaxResult out;
  out.primal = solved.objective;
  out.dual = solved.dual_bound;
  out.relative_gap = solved.relative_gap;
  out.converged = solved.converged;
  out.q = 0;
  out.stages = 1;
  out.sweeps = solved.column_passes;
  out.newton_steps = static_cast<uint64_t>(solved.iterations);
  // μ_t ∝ ‖v_t‖, the model w = Σ_t v_t on the selected columns, d̄ = Σ_t μ_t d^t.
  const SelectedFeatureCache& groups = *latent.front();
  out.mu.assign(T, 0.0);
  double norm_sum = 0;
  for (size_t t = 0; t < T; ++t) {
    double sq = 0;
    for (size_t k = groups.batch_begin(t); k < groups.batch_end(t); ++k) sq += state.w[k] * state.w[k];
    out.mu[t] = std::sqrt(sq);
    norm_sum += out.mu[t];
  }
  for (double& m : out.mu) m = norm_sum > 0 ? m / norm_sum : 1.0 / static_cast<double>(T);
  out.weights.assign(n_columns, 0.0);
  out.scale.assign(n_columns, 0.0);
  for (size_t t = 0; t < T; ++t)
    for (size_t at = 0; at < constraints[t].size(); ++at) {
      const uint32_t k = constraints[t][at];
      out.weights[k] += state.w[groups.batch_begin(t) + at];
      out.scale[k] += out.mu[t];
    }
  // Theorem 3's α from the decision values, and c = Σ_i α_i y_i x_i over the parts.
  for (size_t p = 0; p < parts.size(); ++p) {
    const LatentPart& part = parts[p];
    for (size_t i = 0; i < decision[p].size(); ++i) {
      if (part.labels[i] == 0) continue;
      const double margin = part.labels[i] * decision[p][i];
      (*part.alpha)[i] = scaled_sigmoid(options.C, margin);
      (*part.beta)[i] = scaled_sigmoid(options.C, -margin);
    }
  }
  out.c = column_products(parts, reduction, n_columns);
  out.half_norms.assign(T, 0.0);
  for (size_t t = 0; t < T; ++t)
    for (uint32_t k : constraints[t]) out.half_norms[t] += 0.5 * out.c[k] * out.c[k];
  return out;
}

}  // namespace fgm::mslr
