#include "engine/distributed_mslr.h"

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "cache/selected_features.h"
#include "core/error.h"
#include "engine/model_provenance.h"
#include "engine/mslr_loop.h"
#include "solvers/mslr/latent_newton.h"
#include "solvers/mslr/smoothed_minimax.h"

namespace fgm {
namespace {

// This rank's partitions as the MSLR loop's rows: per own partition its
// labels (±1), α, C − α, a = α∘y and its rows of the selected columns.
class PartitionMslrRows final : public MslrRows {
 public:
  PartitionMslrRows(Communicator& comm, const std::string& dir, const MslrSettings& settings, MemoryBudget& budget,
                    PartitionedRun& run);

  std::vector<ScoredCandidate> score(uint64_t batch, std::vector<double>& selected_c,
                                     uint64_t& bytes_streamed) override;
  void add_batch(const std::vector<uint64_t>& ids) override;
  mslr::MinimaxResult solve(const std::vector<std::vector<uint32_t>>& constraints,
                            const std::vector<double>& warm_mu) override;
  const SelectedFeatureCache& columns() const override { return *columns_.front(); }
  void restore_duals(const MslrState& s) override;
  void save_duals(MslrState& s) const override;
  Model model_frame() const override;
  uint64_t fit_rows() const override { return own_.manifest().n_rows; }
  void begin_phase() override { phase_start_ = comm_.stats(); }
  void end_phase(int iteration, const char* phase) override {
    run_.communication.push_back({iteration, phase, comm_.stats() - phase_start_});
  }

 private:
  Communicator& comm_;
  PartitionedRun& run_;
  CommunicationStats phase_start_;  // before the partitions open: their labels are phase "labels"
  OwnPartitions own_;
  const MslrSettings& settings_;
  MemoryBudget& budget_;
  double positive_ = 1, negative_ = -1;
  Reservation row_memory_;
  std::vector<std::vector<int8_t>> labels_;
  std::vector<std::vector<double>> alpha_, beta_, a_;
  std::vector<std::unique_ptr<SelectedFeatureCache>> columns_;
  std::unique_ptr<FeatureSpace> space_;  // linear features over this rank's partitions
};

// Labels as ±1 by the classes of all partitions, α⁰.
PartitionMslrRows::PartitionMslrRows(Communicator& comm, const std::string& dir, const MslrSettings& settings,
                                     MemoryBudget& budget, PartitionedRun& run)
    : comm_(comm),
      run_(run),
      phase_start_(comm.stats()),
      own_(comm, dir, settings.scheduler, settings.block_bytes, budget),
      settings_(settings),
      budget_(budget) {
  FGM_ASSERT(!settings.labels);
  run.describe(own_);
  const std::vector<double> values = own_.class_values();
  if (values.size() > 2)
    throw Error(ErrorKind::kConfig, fmt::format("{}: {} labels, but solver = \"mslr\" trains binary models only "
                                                "(relabel the data to two classes)",
                                                own_.dir(), values.size()));
  negative_ = values[0];
  positive_ = values[1];
  row_memory_ = budget_.reserve(own_.own_rows() * (3 * sizeof(double) + 1), "dual variables of this rank's partitions",
                                "use more ranks (more, smaller partitions)");
  const double C = settings_.minimax.C;
  const double start = std::min(1.0, C / 2);  // strictly inside (0, C) for any C (ERRATA 001)
  for (size_t q = 0; q < own_.size(); ++q) {
    const uint64_t rows = own_.rows(q);
    labels_.push_back(own_.binary_labels(q, positive_));
    alpha_.emplace_back(rows, start);
    beta_.emplace_back(rows, C - start);
    a_.emplace_back(rows, 0.0);
    columns_.push_back(std::make_unique<SelectedFeatureCache>(budget_, rows));
  }
  space_ = make_feature_space(settings_.space, own_, budget_);
  end_phase(0, "labels");
}

// FGM's linear pass over the partitions (features/linear_space.cpp, by
// column ranges): only non-empty columns travel, no rank holds a length-m vector.
std::vector<ScoredCandidate> PartitionMslrRows::score(uint64_t batch, std::vector<double>& selected_c,
                                                      uint64_t& bytes_streamed) {
  ScoringContext context;
  context.B = batch;
  context.budget = &budget_;
  for (size_t q = 0; q < a_.size(); ++q)
    for (uint64_t i = 0; i < a_[q].size(); ++i) a_[q][i] = alpha_[q][i] * labels_[q][i];
  context.parts = own_.scoring_inputs(a_);
  SpaceScores scored = space_->score(context);
  selected_c = std::move(*scored.selected_dots);
  bytes_streamed += scored.pass.bytes_streamed;
  return std::move(scored.top);
}

// The features' rows in this rank's partitions, as the next selected columns.
void PartitionMslrRows::add_batch(const std::vector<uint64_t>& ids) {
  for (auto& cache : columns_) cache->begin_batch();
  for (uint64_t id : ids) {
    space_->mark_selected(id);
    for (size_t q = 0; q < own_.size(); ++q) space_->materialize(*own_[q].store, id, *columns_[q]);
  }
}

// The subproblem over this rank's partitions as row parts, every row sum
// reduced in the partition tree (solvers/mslr/smoothed_minimax.h).
mslr::MinimaxResult PartitionMslrRows::solve(const std::vector<std::vector<uint32_t>>& constraints,
                                             const std::vector<double>& warm_mu) {
  if (settings_.smoothing) {
    std::vector<mslr::SelectedRows> rows;
    for (const auto& cache : columns_) rows.push_back(mslr::SelectedRows::from_cache(*cache, budget_));
    std::vector<mslr::MinimaxPart> parts;
    for (size_t q = 0; q < rows.size(); ++q) parts.push_back({&rows[q], labels_[q].data(), &alpha_[q], &beta_[q]});
    return mslr::solve_smoothed_minimax(parts, {own_.manifest().partitions, own_.range().first}, own_.reduction(),
                                        constraints, settings_.minimax, &budget_);
  }
  std::vector<mslr::LatentPart> parts;
  for (size_t q = 0; q < columns_.size(); ++q)
    parts.push_back({columns_[q].get(), labels_[q].data(), &alpha_[q], &beta_[q]});
  return mslr::solve_minimax_newton(parts, own_.reduction(), constraints, settings_.minimax, settings_.newton, warm_mu,
                                    budget_);
}

// α and C − α are this rank's slice, split over its partitions in order.
void PartitionMslrRows::restore_duals(const MslrState& s) {
  if (s.alpha.size() != own_.own_rows() || s.beta.size() != own_.own_rows())
    throw Error(ErrorKind::kCorruption,
                fmt::format("MSLR resume state: {} dual variables for the {} rows of rank {}'s partitions",
                            s.alpha.size(), own_.own_rows(), comm_.rank()));
  size_t at = 0;
  for (size_t q = 0; q < alpha_.size(); ++q) {
    std::copy_n(s.alpha.begin() + at, alpha_[q].size(), alpha_[q].begin());
    std::copy_n(s.beta.begin() + at, beta_[q].size(), beta_[q].begin());
    at += alpha_[q].size();
  }
}

void PartitionMslrRows::save_duals(MslrState& s) const {
  for (size_t q = 0; q < alpha_.size(); ++q) {
    s.alpha.insert(s.alpha.end(), alpha_[q].begin(), alpha_[q].end());
    s.beta.insert(s.beta.end(), beta_[q].begin(), beta_[q].end());
  }
}

Model PartitionMslrRows::model_frame() const {
  Model m = model_of_partitioned_store(own_.manifest(), negative_, positive_, "mslr");
  m.feature_kind = "linear";
  return m;
}

}  // namespace

std::unique_ptr<MslrRows> open_mslr_partitions(Communicator& comm, const std::string& dir, const MslrSettings& settings,
                                               MemoryBudget& budget, PartitionedRun& run) {
  return std::make_unique<PartitionMslrRows>(comm, dir, settings, budget, run);
}

}  // namespace fgm
