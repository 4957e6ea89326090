#include "solvers/distributed_apg.h"

#include <cmath>

#include "core/error.h"
#include "core/partition_sum.h"
#include "solvers/losses.h"

namespace fgm {
namespace {

// ½(Σ_h ‖x_h‖)² over the batches (x in column space).
double regularizer(const DistributedProblem& problem, const std::vector<double>& x) {
  double sum = 0;
  for (size_t h = 0; h + 1 < problem.batch_begin.size(); ++h) {
    double sq = 0;
    for (size_t j = problem.batch_begin[h]; j < problem.batch_begin[h + 1]; ++j) sq += x[j] * x[j];
    sum += std::sqrt(sq);
  }
  return 0.5 * sum * sum;
}

template <class LossT>
class Solver {
 public:
  Solver(const DistributedProblem& problem, const ApgOptions& options)
      : p_(problem), opt_(options), cols_(problem.columns()) {}

  // P(x) and, with `gradient`, ∇P(x) (cols_ entries) reduced over all partitions.
  double evaluate(const std::vector<double>& x, std::vector<double>* gradient) {
    const size_t length = cols_ * (gradient ? 1 : 0) + 1;
    std::vector<std::vector<double>> local(p_.parts.size(), std::vector<double>(length, 0.0));
    const auto decisions = partition_decisions(p_, x);
    for (size_t q = 0; q < p_.parts.size(); ++q) {
      const PartitionColumns& part = p_.parts[q];
      const std::vector<double>& d = decisions[q];
      double loss = 0;
      r_.assign(gradient ? part.n : 0, 0.0);
      for (uint64_t i = 0; i < part.n; ++i) {
        const double m = double(part.y[i]) * d[i];
        loss += LossT::value(opt_.C, m);
        if (gradient) r_[i] = LossT::deriv(opt_.C, m) * double(part.y[i]);  // ∂P/∂d_i
      }
      std::vector<double>& out = local[q];
      if (gradient)
        for (size_t j = 0; j < cols_; ++j) {
          double s = 0;
          const auto& rows = part.rows[j];
          const auto& values = part.values[j];
          for (size_t k = 0; k < rows.size(); ++k) s += r_[rows[k]] * double(values[k]);
          out[j] = s;
        }
      out[length - 1] = loss;
    }
    std::vector<double> total =
        allreduce_partition_sums(*p_.comm, p_.partitions, p_.first_partition, local, length);
    ++reductions_;
    if (gradient) gradient->assign(total.begin(), total.begin() + static_cast<std::ptrdiff_t>(cols_));
    return total.back();
  }

  // max_j C‖x_j‖² (¼ of it for the logistic loss), reduced; 0.01nC without columns.
  double initial_lipschitz() {
    std::vector<std::vector<double>> local(p_.parts.size(), std::vector<double>(cols_, 0.0));
    for (size_t q = 0; q < p_.parts.size(); ++q)
      for (size_t j = 0; j < cols_; ++j) {
        double s = 0;
        for (float v : p_.parts[q].values[j]) s += double(v) * double(v);
        local[q][j] = s;
      }
    const std::vector<double> norms =
        allreduce_partition_sums(*p_.comm, p_.partitions, p_.first_partition, local, cols_);
    ++reductions_;
    double largest = 0;
    for (double v : norms) largest = std::max(largest, v);
    const double curvature = (LossT::kNeedsSigmoid ? 0.25 : 1.0) * opt_.C * largest;
    return curvature > 0 ? curvature : 0.01 * double(p_.total_rows) * opt_.C;
  }

  // z = S_τ(v − g/τ): the Moreau projection, batch by batch.
  void prox(const std::vector<double>& v, const std::vector<double>& g, double tau, std::vector<double>& z) const {
    const double s = 1.0 / tau;
    const size_t batches = p_.batch_begin.size() - 1;
    std::vector<double> norms(batches);
    z.resize(cols_);
    for (size_t h = 0; h < batches; ++h) {
      double sq = 0;
      for (size_t j = p_.batch_begin[h]; j < p_.batch_begin[h + 1]; ++j) {
        z[j] = v[j] - s * g[j];
        sq += z[j] * z[j];
      }
      norms[h] = std::sqrt(sq);
    }
    const std::vector<double> scales = moreau_group_scales(norms, s);
    for (size_t h = 0; h < batches; ++h)
      for (size_t j = p_.batch_begin[h]; j < p_.batch_begin[h + 1]; ++j) z[j] *= scales[h];
  }

  DistributedApgResult solve(std::vector<double>& w, double& lipschitz) {
    DistributedApgResult res;
    double tau = lipschitz > 0 ? lipschitz : initial_lipschitz();
    std::vector<double> v = w, g, z(cols_), diff(cols_);
    double loss_w = evaluate(w, nullptr);
    double f_w = regularizer(p_, w) + loss_w;
    double t = 1, first_mapping = -1;
    bool v_is_w = true;
    for (int k = 1; k <= opt_.max_iterations; ++k) {
      res.iterations = k;
      const double loss_v = evaluate(v, &g);
      double loss_z = 0, mapping = 0;
      bool accepted = false;
      for (int step = 0; step < 200; ++step) {
        prox(v, g, tau, z);
        double dot = 0, sq = 0;
        for (size_t j = 0; j < cols_; ++j) {
          diff[j] = z[j] - v[j];
          dot += g[j] * diff[j];
          sq += diff[j] * diff[j];
        }
        loss_z = evaluate(z, nullptr);
        mapping = tau * tau * sq;
        if (loss_z <= loss_v + dot + 0.5 * tau * sq) {
          accepted = true;
          break;
        }
        tau /= opt_.eta;
        ++res.line_search_steps;
      }
      if (!accepted) {
        res.stalled = true;
        break;
      }
      const double f_z = regularizer(p_, z) + loss_z;
      if (first_mapping < 0) first_mapping = mapping;
      if (f_z > f_w) {
        if (v_is_w) {  // a proximal step from ω itself that does not descend: rounding floor
          res.stalled = true;
          break;
        }
        v = w;  // momentum reset
        v_is_w = true;
        t = 1;
        ++res.restarts;
        continue;
      }
      const double t_next = 0.5 * (1 + std::sqrt(1 + 4 * t * t));
      const double momentum = (t - 1) / t_next;
      for (size_t j = 0; j < cols_; ++j) v[j] = z[j] + momentum * (z[j] - w[j]);
      v_is_w = momentum == 0;
      w.swap(z);
      f_w = f_z;
      loss_w = loss_z;
      t = t_next;
      if (first_mapping == 0 || std::sqrt(mapping / first_mapping) <= opt_.eps_inner) {
        res.converged = true;
        break;
      }
    }
    lipschitz = opt_.eta * tau;
    res.loss = loss_w;
    res.regularizer = regularizer(p_, w);
    res.objective = f_w;
    res.reductions = reductions_;
    return res;
  }

 private:
  const DistributedProblem& p_;
  const ApgOptions& opt_;
  size_t cols_;
  std::vector<double> r_;
  int reductions_ = 0;
};

}  // namespace

std::vector<std::vector<double>> partition_decisions(const DistributedProblem& problem, const std::vector<double>& w) {
  std::vector<std::vector<double>> out(problem.parts.size());
  for (size_t q = 0; q < problem.parts.size(); ++q) {
    const PartitionColumns& part = problem.parts[q];
    std::vector<double>& d = out[q];
    d.assign(part.n, 0.0);
    for (size_t j = 0; j < problem.columns(); ++j) {
      const auto& rows = part.rows[j];
      const auto& values = part.values[j];
      for (size_t k = 0; k < rows.size(); ++k) d[rows[k]] += w[j] * double(values[k]);
    }
  }
  return out;
}

DistributedApgResult solve_distributed_apg(const DistributedProblem& problem, const ApgOptions& options,
                                           std::vector<double>& w, double& lipschitz) {
  if (options.bias) throw Error(ErrorKind::kConfig, "fgm.bias = true is not supported on a partitioned store yet");
  if (problem.comm == nullptr || problem.batch_begin.empty())
    throw Error(ErrorKind::kInternal, "solve_distributed_apg: problem without communicator or batches");
  w.resize(problem.columns(), 0.0);
  if (options.loss == Loss::kLogistic) return Solver<detail::LogisticLoss>(problem, options).solve(w, lipschitz);
  return Solver<detail::SquaredHingeLoss>(problem, options).solve(w, lipschitz);
}

}  // namespace fgm
