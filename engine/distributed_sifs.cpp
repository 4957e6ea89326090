#include "engine/distributed_sifs.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/clock.h"
#include "engine/model_provenance.h"
#include "engine/sifs_run.h"
#include "engine/train_settings.h"
#include "solvers/sifs/sifs_fista.h"

namespace fgm {
namespace {

// Own partition q's layout by the class values of all partitions.
SifsLayout layout_of(const OwnPartitions& own, size_t q, const std::vector<double>& values) {
  if (values.size() > 2)
    return SifsLayout::multiclass(own.class_indices(q, values), static_cast<uint32_t>(values.size()));
  return SifsLayout::binary(own.binary_labels(q, values[1]));
}

SifsLayout concatenated(const std::vector<std::unique_ptr<SifsLayout>>& parts) {
  if (!parts[0]->is_multiclass()) {
    std::vector<int8_t> labels;
    for (const auto& p : parts)
      for (uint64_t i = 0; i < p->samples(); ++i) labels.push_back(p->label(i));
    return SifsLayout::binary(std::move(labels));
  }
  std::vector<uint16_t> classes;
  for (const auto& p : parts)
    for (uint64_t i = 0; i < p->samples(); ++i) classes.push_back(p->class_of(i));
  return SifsLayout::multiclass(std::move(classes), parts[0]->blocks());
}

}  // namespace

DistributedSifsPasses::DistributedSifsPasses(Communicator& comm, const std::string& dir,
                                             const SchedulerOptions& scheduler, uint64_t block_bytes,
                                             MemoryBudget& budget)
    : budget_(budget) {
  own_ = std::make_unique<OwnPartitions>(comm, dir, scheduler, block_bytes, budget);
  class_values_ = own_->class_values();
  uint64_t rows = 0;
  for (size_t q = 0; q < own_->size(); ++q) {
    OwnPartition& part = (*own_)[q];
    part_layouts_.push_back(std::make_unique<SifsLayout>(layout_of(*own_, q, class_values_)));
    // The block plan of engine.block_bytes alone (not of the budget a rank
    // has left): row sums add per block, so the plan fixes their bits.
    data_.push_back(std::make_unique<SifsData>(*part.stream, part.store->plan_blocks(block_bytes),
                                               *part_layouts_.back(), budget));
    rows += part.store->info().n_rows;
    part_ends_.push_back(rows);
  }
  layout_ = concatenated(part_layouts_);
  // The weight space: every partition's non-empty columns, merged.
  std::vector<uint64_t> mine;
  for (const auto& d : data_)
    for (uint64_t j = 0; j < d->columns(); ++j) mine.push_back(d->column_id(j));
  ids_ = sorted_union_of_ranks(own_->comm(), mine);
  for (const auto& d : data_) {
    std::vector<uint32_t> map(d->columns());
    for (uint64_t j = 0; j < d->columns(); ++j)
      map[j] = static_cast<uint32_t>(std::lower_bound(ids_.begin(), ids_.end(), d->column_id(j)) - ids_.begin());
    to_global_.push_back(std::move(map));
  }
}

uint64_t DistributedSifsPasses::total_valid_coordinates() const {
  const uint64_t n = total_samples();
  return layout_.is_multiclass() ? n * (layout_.blocks() - 1) : n;
}

std::vector<double> DistributedSifsPasses::sum_parts(const std::vector<std::vector<double>>& local, size_t length) {
  return own_->sum(local, length);
}

template <class T>
std::vector<T> DistributedSifsPasses::to_part(size_t q, const std::vector<T>& c) const {
  const uint32_t K = layout_.blocks();
  const uint64_t m = columns(), mq = data_[q]->columns();
  std::vector<T> out(K * mq);
  for (uint32_t k = 0; k < K; ++k)
    for (uint64_t j = 0; j < mq; ++j) out[k * mq + j] = c[k * m + to_global_[q][j]];
  return out;
}

void DistributedSifsPasses::row_pass(const std::vector<double>& c, const std::vector<uint8_t>* mask,
                                     std::vector<double>& M, std::vector<double>* N) {
  const uint32_t K = layout_.blocks();
  M.assign(layout_.coordinates(), 0.0);
  if (N) N->assign(layout_.coordinates(), 0.0);
  for (size_t q = 0; q < data_.size(); ++q) {
    std::vector<double> Mq, Nq;
    std::vector<uint8_t> mask_q;
    if (mask) mask_q = to_part(q, *mask);
    data_[q]->row_pass(to_part(q, c), mask ? &mask_q : nullptr, Mq, N ? &Nq : nullptr);
    std::copy(Mq.begin(), Mq.end(), M.begin() + part_begin(q) * K);
    if (N) std::copy(Nq.begin(), Nq.end(), N->begin() + part_begin(q) * K);
  }
}

void DistributedSifsPasses::column_pass(const std::vector<double>& G, const std::vector<double>* H,
                                        std::vector<double>& dots, std::vector<double>* squares,
                                        const std::vector<uint8_t>* columns) {
  const uint32_t K = layout_.blocks();
  const uint64_t m = this->columns();
  const bool with_squares = H != nullptr && squares != nullptr;
  // Only the columns asked for travel: `asked` lists them (the same on every rank).
  std::vector<uint64_t> asked;
  std::vector<int64_t> slot(m, -1);
  for (uint64_t j = 0; j < m; ++j)
    if (!columns || (*columns)[j]) slot[j] = static_cast<int64_t>(asked.size()), asked.push_back(j);
  const uint64_t A = asked.size();
  const size_t length = (with_squares ? 2 : 1) * K * A;
  std::vector<std::vector<double>> local(data_.size());
  for (size_t q = 0; q < data_.size(); ++q) {
    const uint64_t mq = data_[q]->columns();
    const auto first = G.begin() + static_cast<int64_t>(part_begin(q) * K);
    const auto last = G.begin() + static_cast<int64_t>(part_ends_[q] * K);
    const std::vector<double> Gq(first, last);
    std::vector<double> Hq;
    if (with_squares)
      Hq.assign(H->begin() + static_cast<int64_t>(part_begin(q) * K), H->begin() + static_cast<int64_t>(part_ends_[q] * K));
    std::vector<uint8_t> columns_q;
    if (columns) {
      columns_q.assign(mq, 0);
      for (uint64_t j = 0; j < mq; ++j) columns_q[j] = (*columns)[to_global_[q][j]];
    }
    std::vector<double> dq, sq;
    data_[q]->column_pass(Gq, with_squares ? &Hq : nullptr, dq, with_squares ? &sq : nullptr,
                          columns ? &columns_q : nullptr);
    local[q].assign(length, 0.0);
    for (uint64_t j = 0; j < mq; ++j) {
      const int64_t s = slot[to_global_[q][j]];
      if (s < 0) continue;
      for (uint32_t k = 0; k < K; ++k) {
        local[q][k * A + static_cast<uint64_t>(s)] = dq[k * mq + j];
        if (with_squares) local[q][K * A + k * A + static_cast<uint64_t>(s)] = sq[k * mq + j];
      }
    }
  }
  const std::vector<double> total = own_->sum(local, length);
  dots.assign(K * m, 0.0);
  if (squares) squares->assign(K * m, 0.0);
  for (uint64_t s = 0; s < A; ++s)
    for (uint32_t k = 0; k < K; ++k) {
      dots[k * m + asked[s]] = total[k * A + s];
      if (with_squares) (*squares)[k * m + asked[s]] = total[K * A + k * A + s];
    }
}

SifsPassCounters DistributedSifsPasses::counters() const {
  // Passes: every part runs the same passes (the most of any part, as one
  // pass over the rank's data); seconds and bytes: all parts together.
  SifsPassCounters all;
  for (const auto& d : data_) {
    const SifsPassCounters& c = std::as_const(*d).counters();
    all.column_passes = std::max(all.column_passes, c.column_passes);
    all.row_passes = std::max(all.row_passes, c.row_passes);
    all.extract_passes = std::max(all.extract_passes, c.extract_passes);
    all.norm_reuses = std::max(all.norm_reuses, c.norm_reuses);
    all.skipped_passes = std::max(all.skipped_passes, c.skipped_passes);
    all.seconds += c.seconds;
    all.bytes_streamed += c.bytes_streamed;
  }
  return all;
}

DistributedSifsSolver::DistributedSifsSolver(DistributedSifsPasses& passes, const SifsSettings& settings)
    : SifsSolver(static_cast<SifsPasses&>(passes), settings), passes_(passes) {}

void DistributedSifsSolver::solve_screened(const ScreenedSets& sets, const SifsReference& ref, double alpha,
                                           SifsPoint& pt, SifsReference& next) {
  const SifsLayout& layout = passes_.layout();
  const uint32_t K = layout.blocks();
  const uint64_t m = passes_.columns();
  const double n = static_cast<double>(passes_.total_samples());
  auto t0 = std::chrono::steady_clock::now();
  // Kept columns (a free entry in some block), in increasing order.
  std::vector<uint8_t> keep_column(m, 0);
  for (uint32_t k = 0; k < K; ++k)
    for (uint64_t j = 0; j < m; ++j) keep_column[j] |= sets.weight_free[k * m + j];
  std::vector<uint32_t> kept;
  std::vector<uint32_t> reduced_of(m, UINT32_MAX);
  for (uint64_t j = 0; j < m; ++j)
    if (keep_column[j]) reduced_of[j] = static_cast<uint32_t>(kept.size()), kept.push_back(static_cast<uint32_t>(j));
  const uint64_t cols = kept.size();
  // z_L = −(1/n) Σ_{d∈L̂} a_d on the kept columns: one column pass, tree-summed.
  std::vector<double> z_offset(K * cols, 0.0);
  if (sets.in_L > 0) {
    std::vector<double> q(layout.coordinates(), 0.0), G, L_dots;
    for (uint64_t d = 0; d < layout.coordinates(); ++d)
      if (sets.coordinate[d] == CoordinateStatus::kL) q[d] = 1;
    layout.column_coefficients(q, G);
    passes_.column_pass(G, nullptr, L_dots, nullptr, &keep_column);
    for (uint32_t k = 0; k < K; ++k)
      for (uint64_t c = 0; c < cols; ++c) z_offset[k * cols + c] = -L_dots[k * m + kept[c]] / n;
  }
  std::vector<uint8_t> free_weight(K * cols);
  for (uint32_t k = 0; k < K; ++k)
    for (uint64_t c = 0; c < cols; ++c) free_weight[k * cols + c] = sets.weight_free[k * m + kept[c]];
  // Each partition's kept rows of the kept columns.
  std::vector<ReducedProblem> parts;
  std::vector<std::vector<double>> counts;  // per part: kept samples, nonzeros the solver visits
  for (size_t q = 0; q < passes_.parts(); ++q) {
    SifsData& data = passes_.part(q);
    const SifsLayout& part_layout = passes_.part_layout(q);
    const uint64_t begin = passes_.part_begin(q);
    std::vector<uint8_t> keep_column_q(data.columns()), keep_row_q(part_layout.samples(), 0);
    for (uint64_t j = 0; j < data.columns(); ++j) keep_column_q[j] = keep_column[passes_.global_column(q, j)];
    for (uint64_t d = 0; d < part_layout.coordinates(); ++d)
      if (sets.coordinate[begin * K + d] == CoordinateStatus::kFree) keep_row_q[d / K] = 1;
    ReducedProblem p;
    p.layout = &part_layout;
    p.alpha = alpha, p.beta = ref.beta, p.gamma = settings().gamma;
    p.X = data.extract(keep_column_q, keep_row_q);
    for (uint32_t& c : p.X.col) c = reduced_of[passes_.global_column(q, p.X.column_dense[c])];
    p.X.column_dense = kept;
    p.memory = passes_.budget().reserve(K * cols * 9 + p.X.row_sample.size() * K * 12, "SIFS reduced problem (vectors)");
    p.free_weight = free_weight;
    p.z_offset = z_offset;
    p.in_L = sets.in_L;
    double nnz = 0;
    for (uint64_t r = 0; r < p.X.row_sample.size(); ++r) {
      const uint64_t i = p.X.row_sample[r];
      for (uint32_t k = 0; k < K; ++k)
        if (sets.coordinate[(begin + i) * K + k] == CoordinateStatus::kFree) {
          p.coordinate.push_back(i * K + k), p.coordinate_row.push_back(static_cast<uint32_t>(r));
          nnz += static_cast<double>(p.X.row_ptr[r + 1] - p.X.row_ptr[r]);
        }
    }
    counts.push_back({static_cast<double>(p.X.row_sample.size()), nnz});
    parts.push_back(std::move(p));
  }
  const std::vector<double> totals = passes_.sum_parts(counts, 2);
  pt.extract_seconds = seconds_since(t0);
  pt.reduced_features = cols;
  pt.reduced_samples = static_cast<uint64_t>(totals[0]);
  pt.reduced_nnz = static_cast<uint64_t>(totals[1]);

  t0 = std::chrono::steady_clock::now();
  // The solver's iterates, evaluations and per-part sums (about 10 + 2·parts
  // vectors of K·cols) and four margins per free coordinate.
  uint64_t free_coordinates = 0;
  for (const ReducedProblem& p : parts) free_coordinates += p.coordinate.size();
  const Reservation solver_memory =
      passes_.budget().reserve(((10 + 2 * parts.size()) * K * cols + 4 * free_coordinates) * sizeof(double),
                               "SIFS accelerated gradient vectors");
  std::vector<double> w0(K * cols);
  for (uint32_t k = 0; k < K; ++k)
    for (uint64_t c = 0; c < cols; ++c) w0[k * cols + c] = ref.w[k * m + kept[c]];
  FistaResult r = solve_reduced_fista(parts, passes_.total_samples(), passes_.own().reduction(), std::move(w0),
                                      settings().tol, settings().max_epochs);
  reductions_ += static_cast<uint64_t>(r.reductions);
  pt.solve_seconds = seconds_since(t0);
  pt.objective = r.primal;
  pt.gap = r.gap;
  pt.converged = r.converged;
  pt.epochs = r.iterations;
  next.gap = std::max(r.gap, 0.0);
  next.w.assign(K * m, 0.0);
  for (uint32_t k = 0; k < K; ++k)
    for (uint64_t c = 0; c < cols; ++c) next.w[k * m + kept[c]] = r.w[k * cols + c];
  for (size_t q = 0; q < parts.size(); ++q) {
    const uint64_t begin = passes_.part_begin(q);
    for (size_t i = 0; i < parts[q].coordinate.size(); ++i) next.theta[begin * K + parts[q].coordinate[i]] = r.theta[q][i];
  }
}

namespace {

SifsPassCounters counters_since(const SifsPassCounters& now, const SifsPassCounters& before) {
  SifsPassCounters d = now;
  d.column_passes -= before.column_passes, d.row_passes -= before.row_passes;
  d.extract_passes -= before.extract_passes, d.norm_reuses -= before.norm_reuses;
  d.skipped_passes -= before.skipped_passes, d.seconds -= before.seconds, d.bytes_streamed -= before.bytes_streamed;
  return d;
}

class PartitionedSifs final : public SifsBackend {
 public:
  PartitionedSifs(Communicator& comm, const std::string& dir, const Config& config, MemoryBudget& budget,
                  PartitionedRun& run)
      : passes_(comm, dir, scheduler_options_from_config(config), config.get_bytes("engine.block_bytes"), budget),
        run_(run) {
    run.describe(passes_.own());
  }
  std::unique_ptr<SifsSolver> solver(const SifsSettings& settings) override {
    at_solver_ = passes_.counters();
    return std::make_unique<DistributedSifsSolver>(passes_, settings);
  }
  SifsPasses& passes() override { return passes_; }
  SifsPassCounters counters() const override { return counters_since(passes_.counters(), at_solver_); }
  Model model(const SifsReference& solution, double objective) const override {
    const std::vector<double>& values = passes_.class_values();
    Model m = model_of_partitioned_store(passes_.manifest(), values.front(), values.back(), "sifs");
    set_sifs_weights(m, passes_.layout(), values, passes_.columns(), [&](uint64_t j) { return passes_.column_id(j); },
                     solution, objective);
    return m;
  }
  void record(int step, const char* phase) override {
    const CommunicationStats& now = passes_.own().comm().stats();
    run_.communication.push_back({step, phase, now - last_});
    last_ = now;
  }

 private:
  DistributedSifsPasses passes_;
  PartitionedRun& run_;
  SifsPassCounters at_solver_;
  CommunicationStats last_;
};

}  // namespace

std::unique_ptr<SifsBackend> open_sifs_partitions(Communicator& comm, const std::string& dir, const Config& config,
                                                  MemoryBudget& budget, PartitionedRun& run) {
  return std::make_unique<PartitionedSifs>(comm, dir, config, budget, run);
}

}  // namespace fgm
