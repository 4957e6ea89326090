#include "engine/distributed_spaces.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <unordered_set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/messages.h"
#include "core/partition_sum.h"
#include "features/feature_groups.h"
#include "features/kernel_maps.h"
#include "features/partition_spaces.h"
#include "features/poly2_space.h"

namespace fgm {
namespace {

// Linear features (no features.groups) or groups of them, scored by column
// ranges (OwnPartitions::score_by_ranges); the pass carries the selected
// columns' c_j for (37). A candidate's columns are base columns, read as stored.
class PartitionedLinear final : public FeatureSpace {
 public:
  PartitionedLinear(const FeatureSpaceSettings& s, OwnPartitions& own, MemoryBudget& budget) : own_(own) {
    if (!s.groups_path.empty())
      groups_ = std::make_unique<FeatureGroups>(read_feature_groups(s.groups_path, own.manifest().n_features,
                                                                    own.manifest().index_base, budget,
                                                                    parse_group_structure(s.group_structure)));
  }
  std::string kind() const override { return groups_ ? "group" : "linear"; }
  double dimension() const override { return static_cast<double>(candidates()); }
  SpaceScores score(const ScoringContext& ctx) override {
    ScoreRequest request;
    request.space = this;
    request.parts = ctx.parts;
    request.B = ctx.B;
    return std::move(score_many(ctx, {request}).front());
  }
  void mark_selected(uint64_t id) override {
    if (id >= candidates() || !is_selected_.insert(id).second)  // a corrupt checkpoint
      throw Error(ErrorKind::kCorruption, fmt::format("checkpoint: candidate {} is repeated or beyond the {} "
                                                      "candidates of {}",
                                                      id, candidates(), own_.dir()));
    for (uint64_t p = 0; p < (groups_ ? groups_->size(id) : 1); ++p) {
      selected_.push_back(groups_ ? groups_->member(id, p) : id);
      column_group_.push_back(groups_ ? id : 0);
    }
  }
  std::vector<GeneratedColumn> columns(const ShardStore& partition, uint64_t id) override {
    return groups_ ? group_columns(partition, *groups_, id) : linear_columns(partition, id);
  }
  bool keeps_empty_columns() const override { return true; }
  uint64_t candidate_of(const FeatureKey& key) const override { return groups_ ? key.group : key.ids[0]; }
  void describe(Model& model) const override { model.feature_kind = kind(); }

  std::vector<SpaceScores> score_many(const ScoringContext&, const std::vector<ScoreRequest>& requests) override {
    std::vector<OwnPartitions::RangeRequest> ranges;
    for (const ScoreRequest& request : requests) {
      const auto* space = dynamic_cast<const PartitionedLinear*>(request.space);
      FGM_ASSERT(space);
      ranges.push_back({duals(request.parts), space->is_selected(), &space->selected_, &space->column_group_,
                        request.B});
    }
    uint64_t bytes = 0;
    std::vector<OwnPartitions::RangeScores> scored = own_.score_by_ranges(groups_.get(), ranges, bytes);
    std::vector<SpaceScores> out;
    for (size_t r = 0; r < requests.size(); ++r) out.push_back(take(std::move(scored[r]), bytes));
    return out;
  }

 private:
  static std::vector<const double*> duals(const std::vector<PartitionScoringInput>& parts) {
    std::vector<const double*> a;
    for (const PartitionScoringInput& p : parts) a.push_back(p.a);
    return a;
  }
  std::function<bool(uint64_t)> is_selected() const {
    return [this](uint64_t id) { return is_selected_.count(id) > 0; };
  }
  uint64_t candidates() const { return groups_ ? groups_->n_groups : own_.manifest().n_features; }
  SpaceScores take(OwnPartitions::RangeScores scored, uint64_t bytes) const {
    SpaceScores out;
    out.top = std::move(scored.top);
    out.top_memory = std::move(scored.top_memory);
    out.selected_dots = std::move(scored.selected_dots);
    out.candidates_scored = candidates();
    out.pass.bytes_streamed = bytes;
    return out;
  }

  OwnPartitions& own_;
  std::unique_ptr<FeatureGroups> groups_;
  std::unordered_set<uint64_t> is_selected_;  // selected features or groups
  std::vector<uint64_t> selected_;            // the selected columns' features, in order
  std::vector<uint64_t> column_group_;        // and their groups (group spaces)
};

class DistributedPoly2 final : public FeatureSpace {
 public:
  DistributedPoly2(const FeatureSpaceSettings& s, OwnPartitions& own, MemoryBudget& budget)
      : own_(own),
        comm_(own.comm()),
        m_(own.manifest().n_features),
        budget_(budget),
        gamma_(s.gamma),
        coef0_(s.coef0),
        seed_features_(s.pair_block_features > 0 ? s.pair_block_features : 256),
        selected_(&budget) {
    if (m_ >= (uint64_t{1} << 31))
      throw Error(ErrorKind::kConfig,
                  msg::out_of_range("", "features.kind", "poly2",
                                    fmt::format("at most 2^31-1 base features (the store has {})", m_)));
  }
  std::string kind() const override { return "poly2"; }
  double dimension() const override {
    const double m = static_cast<double>(m_);
    return 2 * m + m * (m - 1) / 2;  // as Poly2Space
  }
  SpaceScores score(const ScoringContext& ctx) override;
  void mark_selected(uint64_t candidate) override { selected_.insert(candidate); }
  std::vector<GeneratedColumn> columns(const ShardStore& partition, uint64_t candidate) override {
    return poly2_columns(partition, candidate, gamma_, coef0_);
  }
  uint64_t candidate_of(const FeatureKey& key) const override { return poly2_candidate_of(key); }
  void describe(Model& model) const override {
    model.feature_kind = "poly2";
    model.gamma = gamma_;
    model.coef0 = coef0_;
  }

 private:
  // Σ over all partitions of each partition's exact sums of the pairs of `active`.
  SparseSums pair_sums(const std::vector<PartitionScoringInput>& parts, const Poly2ActiveSet& active,
                       SpaceScores& out, Reservation& sums_memory) {
    std::vector<SparseSums> local;
    PassStats pass;
    Reservation held = budget_.reserve(0, "poly2 candidate-pair partials of this rank's partitions",
                                       "use more ranks (more, smaller partitions) or a smaller fgm.B");
    for (const auto& p : parts) {
      local.push_back(poly2_partition_pair_sums(*p.stream, *p.blocks, p.a, active, budget_, &pass, &out.pair_updates));
      held.resize(held.bytes() + local.back().keys.size() * 16);
    }
    out.pass.bytes_streamed += pass.bytes_streamed;
    SparseSums sums = own_.sum(local);
    // The received nodes and the result (16 bytes a pair each) while the partials are held.
    sums_memory = budget_.reserve(sums.keys.size() * 16 * (2 + static_cast<uint64_t>(comm_.size())),
                                         "poly2 candidate-pair sums of all partitions",
                                         "use more ranks (more, smaller partitions) or a smaller fgm.B");
    return sums;
  }
  void offer_pairs(const SparseSums& sums, TopBCache& top) const {
    for (size_t e = 0; e < sums.keys.size(); ++e) {
      const double s = cross_scale() * sums.values[e] * sums.values[e];
      if (s > 0 && top.may_admit(s) && !selected_.test(sums.keys[e])) top.offer({s, sums.keys[e]});
    }
  }
  double cross_scale() const { return 2.0 * gamma_ * gamma_; }
  SparseSums range_moments(const std::vector<PartitionScoringInput>& parts, SpaceScores& out,
                           Reservation& memory);

  OwnPartitions& own_;
  Communicator& comm_;
  const uint64_t m_;  // base features
  MemoryBudget& budget_;
  double gamma_, coef0_;
  uint64_t seed_features_;
  CandidateSet selected_;
};

// A base feature and its pair bound u_j; ranked by decreasing u, ties to the smaller id.
struct BoundedFeature {
  uint64_t id = 0;
  double u = 0;
};
bool bound_before(const BoundedFeature& x, const BoundedFeature& y) { return x.u != y.u ? x.u > y.u : x.id < y.id; }

// 1. The moments c_j, q_j, w_j by column ranges: each partition's sparse
// moments (its non-empty columns), one reduce-scatter in the partition tree,
// so rank r holds the global moments of base features [⌊r·m/K⌋, ⌊(r+1)·m/K⌋).
// From them it offers its range's linear and square scores and keeps its
// range's features with u_j > 0 (`range_u`).
SparseSums DistributedPoly2::range_moments(const std::vector<PartitionScoringInput>& parts, SpaceScores& out,
                                           Reservation& memory) {
  // The three keys 3j, 3j + 1, 3j + 2 of each feature j of each rank's range.
  const std::vector<ColumnSpans> wanted = rank_key_ranges(m_, comm_.size(), 3);
  PassStats pass;
  SparseSums moments = own_.reduce_scatter(
      [&](size_t q) { return poly2_partition_moments(*parts[q].stream, *parts[q].blocks, parts[q].a, &pass); }, wanted,
      &memory);
  out.pass.bytes_streamed += pass.bytes_streamed;
  memory.resize(16 * moments.keys.size());
  return moments;
}

SpaceScores DistributedPoly2::score(const ScoringContext& ctx) {
  const std::vector<PartitionScoringInput>& parts = ctx.parts;
  const uint64_t B = ctx.B;
  SpaceScores out;
  const double lin_scale = 2.0 * gamma_ * coef0_, sq_scale = gamma_ * gamma_;
  Reservation moments_memory = budget_.reserve(0, "poly2 moments of a distributed scoring pass",
                                               "use more ranks (more, smaller partitions) or more memory per rank");
  std::vector<BoundedFeature> range_u;
  TopBCache singles(B, &budget_);
  {
    const SparseSums moments = range_moments(parts, out, moments_memory);
    for (size_t e = 0; e < moments.keys.size();) {
      const uint64_t j = moments.keys[e] / 3;
      double v[3] = {0, 0, 0};  // c_j, q_j, w_j (a key no partition has is an exact zero)
      for (; e < moments.keys.size() && moments.keys[e] / 3 == j; ++e) v[moments.keys[e] % 3] = moments.values[e];
      const double u = std::sqrt(v[2]), sl = lin_scale * v[0] * v[0], sq = sq_scale * v[1] * v[1];
      const uint64_t lid = poly2_id(kPoly2Linear, j), qid = poly2_id(kPoly2Square, j);
      if (sl > 0 && singles.may_admit(sl) && !selected_.test(lid)) singles.offer({sl, lid});
      if (sq > 0 && singles.may_admit(sq) && !selected_.test(qid)) singles.offer({sq, qid});
      if (u > 0) range_u.push_back({j, u});
    }
    moments_memory.resize(range_u.size() * sizeof(BoundedFeature));
  }
  out.candidates_scored = 2 * m_;
  // 2. seed: the S features of largest bound over all ranges (each range's S
  // best, merged in the same order), their pairs summed exactly; θ from them
  // and the singles' top-B (each range's B best, merged: the global B best).
  const size_t range_seed = std::min<size_t>(seed_features_, range_u.size());
  std::partial_sort(range_u.begin(), range_u.begin() + static_cast<std::ptrdiff_t>(range_seed), range_u.end(),
                    bound_before);
  Reservation top_memory;
  std::vector<ScoredCandidate> range_top = singles.take_sorted(&top_memory);
  auto [all_top, seed_list] = allgather_lists(
      comm_, range_top,
      std::vector<BoundedFeature>(range_u.begin(), range_u.begin() + static_cast<std::ptrdiff_t>(range_seed)));
  TopBCache top(B, &budget_);
  for (const ScoredCandidate& c : all_top) top.offer(c);
  std::sort(seed_list.begin(), seed_list.end(), bound_before);
  seed_list.resize(std::min<size_t>(seed_features_, seed_list.size()));
  const double u_max = seed_list.empty() ? 0.0 : seed_list.front().u;
  Poly2ActiveSet seeds;
  for (const BoundedFeature& f : seed_list) {
    seeds.ids.push_back(static_cast<uint32_t>(f.id));
    seeds.bound.push_back(f.u);
  }
  seeds.t = 0;  // every pair of the seed
  double theta = 0;
  Reservation seed_memory, candidate_memory;
  const SparseSums seed_sums = pair_sums(parts, seeds, out, seed_memory);
  {
    TopBCache seeded = top;
    offer_pairs(seed_sums, seeded);
    if (seeded.full()) theta = seeded.worst().score;
  }
  // 3. candidates: every pair whose bound can reach θ, summed exactly. H =
  // {j : u_j·u_max ≥ t}, each range's members gathered, by decreasing u.
  Poly2ActiveSet active;
  active.t = pair_bound_threshold(theta, cross_scale(), own_.manifest().n_rows);
  std::vector<BoundedFeature> range_active;
  for (const BoundedFeature& f : range_u)
    if (f.u * u_max >= active.t) range_active.push_back(f);
  Reservation active_memory = budget_.reserve(range_active.size() * sizeof(BoundedFeature), "poly2 active set");
  std::vector<BoundedFeature> all_active = allgather_lists(comm_, range_active, std::vector<char>{}).first;
  active_memory.resize(all_active.size() * (sizeof(BoundedFeature) + sizeof(uint32_t) + sizeof(double)));
  std::sort(all_active.begin(), all_active.end(), bound_before);
  for (const BoundedFeature& f : all_active) {
    active.ids.push_back(static_cast<uint32_t>(f.id));
    active.bound.push_back(f.u);
  }
  // The seed features lead H (both are by decreasing u, and H holds every
  // feature ranked before one of its members): their pairs are summed already.
  while (active.summed_prefix < active.ids.size() && active.summed_prefix < seeds.ids.size() &&
         active.ids[active.summed_prefix] == seeds.ids[active.summed_prefix])
    ++active.summed_prefix;
  const SparseSums candidates = pair_sums(parts, active, out, candidate_memory);
  out.candidates_scored += seed_sums.keys.size() + candidates.keys.size();  // the pairs summed exactly
  offer_pairs(seed_sums, top);  // each pair once: the seed's, then the rest of H's
  offer_pairs(candidates, top);
  out.top = top.take_sorted(&out.top_memory);
  return out;
}

// A column's global range as the ranks exchange it.
struct RangeRecord {
  uint64_t id = 0;
  float lo = 0, hi = 0;
};
bool id_before(const RangeRecord& x, const RangeRecord& y) { return x.id < y.id; }

template <class T>
void append(std::vector<uint8_t>& out, const T* data, size_t count) {
  const auto* b = reinterpret_cast<const uint8_t*>(data);
  out.insert(out.end(), b, b + count * sizeof(T));
}

class DistributedExpansion final : public FeatureSpace {
 public:
  DistributedExpansion(const FeatureSpaceSettings& s, OwnPartitions& own, MemoryBudget& budget)
      : own_(own), comm_(own.comm()), m_(own.manifest().n_features), budget_(budget),
        map_(expansion_map_from_settings(s)), selected_(&budget) {
    if (m_ > std::numeric_limits<uint64_t>::max() / map_.dim())
      throw Error(ErrorKind::kConfig,
                  msg::out_of_range("", s.kind == "hik" ? "features.levels" : "features.order",
                                    std::to_string(s.kind == "hik" ? s.levels : s.order),
                                    fmt::format("at most 2^64 component sums ({} base features)", m_)));
    exchange_ranges();
  }
  std::string kind() const override { return map_.kind() == FeatureKind::kHik ? "hik" : "additive"; }
  double dimension() const override { return static_cast<double>(m_) * map_.dim(); }
  SpaceScores score(const ScoringContext& ctx) override;
  void mark_selected(uint64_t candidate) override;
  uint64_t candidate_of(const FeatureKey& key) const override { return key.ids[0]; }
  std::vector<GeneratedColumn> columns(const ShardStore& partition, uint64_t j) override {
    const RangeRecord range = selected_range(j);
    return expansion_columns(partition, map_, j, range.lo, range.hi);
  }
  void describe(Model& model) const override {
    describe_expansion_model(map_, selected_ids_,
                             [&](uint64_t j) {
                               const RangeRecord r = selected_range(j);
                               return std::pair{r.lo, r.hi};
                             },
                             model);
  }

 private:
  void exchange_ranges();
  std::vector<RangeRecord> owned_ranges(const std::vector<uint8_t>& received, const std::vector<size_t>& sizes,
                                        std::vector<std::vector<uint64_t>>& asked) const;
  RangeRecord selected_range(uint64_t j) const {
    const auto at = std::lower_bound(selected_ranges_.begin(), selected_ranges_.end(), RangeRecord{j}, id_before);
    if (at == selected_ranges_.end() || at->id != j)
      throw Error(ErrorKind::kInternal, "hik/additive: no range for selected feature " + std::to_string(j));
    return *at;
  }
  RangeRecord known_range(uint64_t j) const {
    const size_t at = ranges_.find(j);
    return at == ranges_.ids.size() ? RangeRecord{j} : RangeRecord{j, ranges_.lo[at], ranges_.hi[at]};
  }

  OwnPartitions& own_;
  Communicator& comm_;
  const uint64_t m_;  // base features
  MemoryBudget& budget_;
  ExpansionMap map_;
  Reservation range_memory_;
  // Global ranges of this rank's partitions' non-empty columns, of every
  // column whose scaled zero is positive (`raised_zero_`), and of its column range.
  ColumnRanges ranges_;
  std::vector<uint64_t> raised_zero_;
  CandidateSet selected_;
  std::vector<uint64_t> selected_ids_;
  std::vector<RangeRecord> selected_ranges_;  // by id
  std::vector<RangeRecord> top_ranges_;       // the last pass's gathered candidates, by id (the same on every rank)
};

// The global range of each column, min/max over the partitions with implicit
// zeros (exact, so only a fold order that is the same for every K matters:
// ranks in order, each over its partitions in order, as one process folds its
// partitions). By column ranges, never m-sized: each rank sends the owner of
// each of its non-empty columns its range over its partitions (a rank without
// the column would send 0 and 0, so the owner folds in 0 for it); the owner
// returns the global range of what each rank asked for, and to every rank the
// columns of its range whose zero scales above 0 (every partition sums those).
// Two alltoallv, in the phase that calls the constructor.
void DistributedExpansion::exchange_ranges() {
  const int K = comm_.size();
  range_memory_ = budget_.reserve(0, "hik/additive column ranges", "use more ranks (more, smaller partitions)");
  // Each own partition's non-empty columns with their min/max, then per
  // column of any of them the fold over the partitions in order (an empty
  // column's min/max is 0 and 0).
  std::vector<ColumnRanges> partitions;
  uint64_t listed = 0;
  for (size_t q = 0; q < own_.size(); ++q) {
    partitions.push_back(partition_column_ranges(*own_[q].store, budget_));
    listed += partitions.back().ids.size();
    range_memory_.resize(16 * listed);
  }
  std::vector<uint64_t> mine;
  for (const ColumnRanges& p : partitions) {
    std::vector<uint64_t> both;
    std::set_union(mine.begin(), mine.end(), p.ids.begin(), p.ids.end(), std::back_inserter(both));
    mine.swap(both);
  }
  range_memory_.resize(16 * listed + 24 * mine.size());
  std::vector<std::vector<uint8_t>> parts(static_cast<size_t>(K));
  std::vector<std::vector<uint64_t>> sent(static_cast<size_t>(K));  // ids sent to each owner, in order
  std::vector<size_t> next(partitions.size(), 0);
  for (uint64_t j : mine) {
    RangeRecord r{j, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
    for (size_t q = 0; q < partitions.size(); ++q) {
      const ColumnRanges& p = partitions[q];
      const bool listed_here = next[q] < p.ids.size() && p.ids[next[q]] == j;
      r.lo = std::min(r.lo, listed_here ? p.lo[next[q]] : 0.0f);
      r.hi = std::max(r.hi, listed_here ? p.hi[next[q]] : 0.0f);
      next[q] += listed_here;
    }
    const auto d = static_cast<size_t>(rank_of_id(j, m_, K));
    append(parts[d], &r, 1);
    sent[d].push_back(j);
  }
  std::vector<ColumnRanges>().swap(partitions);
  std::vector<size_t> sizes;
  std::vector<uint8_t> received = comm_.alltoallv(parts, &sizes);
  std::vector<std::vector<uint8_t>>().swap(parts);
  std::vector<std::vector<uint64_t>> asked;
  const std::vector<RangeRecord> owned = owned_ranges(received, sizes, asked);
  std::vector<uint8_t>().swap(received);
  // Back: each asker's ranges in its order (8 bytes each), then the raised zeros of this range.
  std::vector<RangeRecord> raised;
  for (const RangeRecord& r : owned)
    if (scale_to_unit(0.0, r.lo, r.hi) > 0) raised.push_back(r);
  parts.assign(static_cast<size_t>(K), {});
  for (int s = 0; s < K; ++s) {
    for (uint64_t j : asked[static_cast<size_t>(s)]) {
      const RangeRecord& r = *std::lower_bound(owned.begin(), owned.end(), RangeRecord{j}, id_before);
      const float lohi[2] = {r.lo, r.hi};
      append(parts[static_cast<size_t>(s)], lohi, 2);
    }
    append(parts[static_cast<size_t>(s)], raised.data(), raised.size());
  }
  received = comm_.alltoallv(parts, &sizes);
  std::vector<std::vector<uint8_t>>().swap(parts);
  std::vector<RangeRecord> table = owned;
  size_t at = 0;
  for (int d = 0; d < K; ++d) {
    const size_t end = at + sizes[static_cast<size_t>(d)];
    for (uint64_t j : sent[static_cast<size_t>(d)]) {
      float lohi[2];
      std::memcpy(lohi, received.data() + at, sizeof lohi);
      at += sizeof lohi;
      table.push_back({j, lohi[0], lohi[1]});
    }
    for (; at < end; at += sizeof(RangeRecord)) {
      RangeRecord r;
      std::memcpy(&r, received.data() + at, sizeof r);
      table.push_back(r);
      raised_zero_.push_back(r.id);  // increasing: the ranges are, and each owner's list is
    }
  }
  std::stable_sort(table.begin(), table.end(), id_before);
  table.erase(std::unique(table.begin(), table.end(), [](const RangeRecord& x, const RangeRecord& y) { return x.id == y.id; }),
              table.end());
  for (const RangeRecord& r : table) {
    ranges_.ids.push_back(r.id);
    ranges_.lo.push_back(r.lo);
    ranges_.hi.push_back(r.hi);
  }
  range_memory_.resize(16 * ranges_.ids.size() + 8 * raised_zero_.size());
}

// The global ranges of the columns of this rank's range that some rank has,
// folded over the ranks in order (0 and 0 from a rank that sent nothing);
// `asked[s]`: the ids rank s sent, in its order.
std::vector<RangeRecord> DistributedExpansion::owned_ranges(const std::vector<uint8_t>& received,
                                                            const std::vector<size_t>& sizes,
                                                            std::vector<std::vector<uint64_t>>& asked) const {
  const int K = comm_.size();
  struct FromRank {
    RangeRecord range;
    int rank;
  };
  std::vector<FromRank> all;
  asked.assign(static_cast<size_t>(K), {});
  size_t at = 0;
  for (int s = 0; s < K; ++s)
    for (const size_t end = at + sizes[static_cast<size_t>(s)]; at < end; at += sizeof(RangeRecord)) {
      FromRank f{{}, s};
      std::memcpy(&f.range, received.data() + at, sizeof f.range);
      asked[static_cast<size_t>(s)].push_back(f.range.id);
      all.push_back(f);
    }
  std::sort(all.begin(), all.end(), [](const FromRank& x, const FromRank& y) {
    return x.range.id != y.range.id ? x.range.id < y.range.id : x.rank < y.rank;
  });
  std::vector<RangeRecord> owned;
  for (size_t k = 0; k < all.size();) {
    RangeRecord r{all[k].range.id, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
    for (int s = 0; s < K; ++s) {
      const bool has = k < all.size() && all[k].range.id == r.id && all[k].rank == s;
      r.lo = std::min(r.lo, has ? all[k].range.lo : 0.0f);
      r.hi = std::max(r.hi, has ? all[k].range.hi : 0.0f);
      k += has;
    }
    owned.push_back(r);
  }
  return owned;
}

// s_j = Σ_l c_{j,l}² by column ranges: each partition's sparse component sums
// (its non-empty and raised-zero columns), one reduce-scatter in the partition
// tree (rank r gets the keys j·D + l of its features [⌊r·m/K⌋, ⌊(r+1)·m/K⌋)),
// its range's top-B, and one allgather of the K lists with the candidates'
// ranges (ties to the smaller id).
SpaceScores DistributedExpansion::score(const ScoringContext& ctx) {
  const std::vector<PartitionScoringInput>& parts = ctx.parts;
  const uint64_t B = ctx.B;
  SpaceScores out;
  const uint64_t D = map_.dim();
  Reservation memory = budget_.reserve(0, "hik/additive component sums of a distributed scoring pass",
                                       "use more ranks (more, smaller partitions), a smaller "
                                       "features.levels/features.order, or more memory per rank");
  const std::vector<ColumnSpans> wanted = rank_key_ranges(m_, comm_.size(), D);
  PassStats pass;
  const auto is_selected = [&](uint64_t j) { return selected_.test(j); };
  const SparseSums sums = own_.reduce_scatter(
      [&](size_t q) {
        const PartitionScoringInput& in = parts[q];
        return expansion_partition_sums(*in.stream, *in.blocks, in.a, map_, ranges_, raised_zero_, is_selected, &pass);
      },
      wanted, &memory);
  out.pass.bytes_streamed = pass.bytes_streamed;
  memory.resize(16 * sums.keys.size());
  TopBCache range_top(B, &budget_);
  for (size_t e = 0; e < sums.keys.size();) {
    const uint64_t j = sums.keys[e] / D;
    double s = 0;  // Σ_l c_l² in level order (an absent component is an exact zero: s + 0 = s)
    for (; e < sums.keys.size() && sums.keys[e] / D == j; ++e) s += sums.values[e] * sums.values[e];
    if (s > 0 && range_top.may_admit(s) && !selected_.test(j)) range_top.offer({s, j});
  }
  Reservation range_top_memory;
  const std::vector<ScoredCandidate> mine = range_top.take_sorted(&range_top_memory);
  std::vector<RangeRecord> mine_ranges;
  for (const ScoredCandidate& c : mine) mine_ranges.push_back(known_range(c.id));
  auto [tops, ranges] = allgather_lists(comm_, mine, mine_ranges);
  TopBCache top(B, &budget_);
  for (const ScoredCandidate& c : tops) top.offer(c);
  std::sort(ranges.begin(), ranges.end(), id_before);
  top_ranges_ = std::move(ranges);
  out.candidates_scored = m_ * D;
  out.top = top.take_sorted(&out.top_memory);
  return out;
}

// The range of a new selection comes with the pass that chose it; a candidate
// chosen before this run (a resumed checkpoint) is asked of its range's owner
// (one allgather; every rank calls mark_selected with the same candidates).
void DistributedExpansion::mark_selected(uint64_t candidate) {
  if (!selected_.insert(candidate)) return;
  selected_ids_.push_back(candidate);
  RangeRecord range;
  const auto at = std::lower_bound(top_ranges_.begin(), top_ranges_.end(), RangeRecord{candidate}, id_before);
  if (at != top_ranges_.end() && at->id == candidate) {
    range = *at;
  } else {
    std::vector<RangeRecord> mine;
    if (rank_of_id(candidate, m_, comm_.size()) == comm_.rank()) mine.push_back(known_range(candidate));
    const std::vector<RangeRecord> all = allgather_lists(comm_, mine, std::vector<char>{}).first;
    if (all.size() != 1) throw Error(ErrorKind::kInternal, "hik/additive: no owner for a selected feature's range");
    range = all.front();
  }
  selected_ranges_.insert(
      std::lower_bound(selected_ranges_.begin(), selected_ranges_.end(), range, id_before), range);
}

}  // namespace

std::unique_ptr<FeatureSpace> make_distributed_space(const FeatureSpaceSettings& settings, OwnPartitions& own,
                                                         MemoryBudget& budget) {
  if (settings.kind == "linear") return std::make_unique<PartitionedLinear>(settings, own, budget);
  if (settings.kind == "poly2") return std::make_unique<DistributedPoly2>(settings, own, budget);
  if (settings.kind == "hik" || settings.kind == "additive")
    return std::make_unique<DistributedExpansion>(settings, own, budget);
  throw Error(ErrorKind::kConfig, msg::out_of_range("", "features.kind", settings.kind,
                                                   "a kind with a partitioned form on a partitioned store "
                                                   "(linear, poly2, hik, additive)"));
}

}  // namespace fgm
