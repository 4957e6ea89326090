#include "engine/distributed_spaces.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "core/messages.h"
#include "core/partition_sum.h"
#include "features/kernel_maps.h"
#include "features/partition_spaces.h"
#include "features/poly2_space.h"

namespace fgm {
namespace {

// The certified bound threshold of features/poly2_space.cpp (same derivation:
// a pair sum of N ≤ n terms in ANY order, here the partition tree's, is off by
// at most γ_{N−1}·Σ|terms|, so ŝ_jk ≥ θ implies û_j·û_k ≥ t).
double pair_bound_threshold(double theta, double cross_scale, uint64_t n) {
  const double rho = 4.0 * (static_cast<double>(n) + 8.0) * std::ldexp(1.0, -53);
  return std::sqrt(theta / cross_scale) * std::max(0.0, 1.0 - rho);
}

// Bytes allreduce_partition_sums holds for a vector of `length` doubles:
// the own partitions' vectors, the K received nodes, send buffer and result.
uint64_t tree_sum_bytes(uint64_t length, size_t own, int ranks) {
  return length * sizeof(double) * (own + static_cast<uint64_t>(ranks) + 2);
}

class DistributedPoly2 final : public DistributedSpace {
 public:
  DistributedPoly2(const FeatureSpaceSettings& s, Communicator& comm, const PartitionLayout& layout, MemoryBudget& budget)
      : comm_(comm),
        layout_(layout),
        budget_(budget),
        gamma_(s.gamma),
        coef0_(s.coef0),
        seed_features_(s.pair_block_features > 0 ? s.pair_block_features : 256),
        selected_(&budget) {
    if (layout.n_features >= (uint64_t{1} << 31))
      throw Error(ErrorKind::kConfig,
                  msg::out_of_range("", "features.kind", "poly2",
                                    fmt::format("at most 2^31-1 base features (the store has {})", layout.n_features)));
  }
  std::string kind() const override { return "poly2"; }
  DistributedScores score(const std::vector<PartitionScoringInput>& parts, uint64_t B) override;
  void mark_selected(uint64_t candidate) override { selected_.insert(candidate); }
  std::vector<GeneratedColumn> columns(const ShardStore& partition, uint64_t candidate) override {
    GeneratedColumn col;
    const uint64_t kind = poly2_kind(candidate);
    col.key.kind = kind == kPoly2Linear ? FeatureKind::kLinear : kind == kPoly2Square ? FeatureKind::kSquare
                                                                                       : FeatureKind::kCross;
    col.key.ids[0] = poly2_first(candidate);
    if (kind == kPoly2Cross) col.key.ids[1] = poly2_second(candidate);
    poly2_partition_column(partition, candidate, gamma_, coef0_, col.rows, col.values);
    return {std::move(col)};
  }
  void describe(Model& model) const override {
    model.feature_kind = "poly2";
    model.gamma = gamma_;
    model.coef0 = coef0_;
  }

 private:
  // Σ over all partitions of each partition's exact sums of the pairs of `active`.
  SparseSums pair_sums(const std::vector<PartitionScoringInput>& parts, const Poly2ActiveSet& active,
                       DistributedScores& out, Reservation& sums_memory) {
    std::vector<SparseSums> local;
    PassStats pass;
    Reservation held = budget_.reserve(0, "poly2 candidate-pair partials of this rank's partitions",
                                       "use more ranks (more, smaller partitions) or a smaller fgm.B");
    for (const auto& p : parts) {
      local.push_back(poly2_partition_pair_sums(*p.stream, *p.blocks, p.a, active, budget_, &pass, &out.pair_updates));
      held.resize(held.bytes() + local.back().keys.size() * 16);
    }
    out.bytes_streamed += pass.bytes_streamed;
    SparseSums sums = allreduce_partition_sparse_sums(comm_, layout_.partitions, layout_.first_partition, local);
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
  SparseSums range_moments(const std::vector<PartitionScoringInput>& parts, DistributedScores& out,
                           Reservation& memory);

  Communicator& comm_;
  PartitionLayout layout_;
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
SparseSums DistributedPoly2::range_moments(const std::vector<PartitionScoringInput>& parts, DistributedScores& out,
                                           Reservation& memory) {
  const uint64_t m = layout_.n_features;
  std::vector<ColumnSpans> wanted;
  for (int d = 0; d < comm_.size(); ++d) {
    ColumnSpans keys;  // the three keys 3j, 3j + 1, 3j + 2 of each feature j of d's range
    for (const auto& [first, end] : column_range_of_rank(m, comm_.size(), d).spans) keys.spans.emplace_back(3 * first, 3 * end);
    wanted.push_back(keys);
  }
  PassStats pass;
  SparseSums moments = reduce_scatter_partition_sparse_sums(
      comm_, layout_.partitions, layout_.first_partition, static_cast<uint32_t>(parts.size()),
      [&](uint32_t p) {
        const PartitionScoringInput& in = parts[p - layout_.first_partition];
        return poly2_partition_moments(*in.stream, *in.blocks, in.a, &pass);
      },
      wanted, &memory);
  out.bytes_streamed += pass.bytes_streamed;
  memory.resize(16 * moments.keys.size());
  return moments;
}

DistributedScores DistributedPoly2::score(const std::vector<PartitionScoringInput>& parts, uint64_t B) {
  DistributedScores out;
  const uint64_t m = layout_.n_features;
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
  out.candidates_scored = 2 * m;
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
  out.threshold = theta;
  // 3. candidates: every pair whose bound can reach θ, summed exactly. H =
  // {j : u_j·u_max ≥ t}, each range's members gathered, by decreasing u.
  Poly2ActiveSet active;
  active.t = pair_bound_threshold(theta, cross_scale(), layout_.total_rows);
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
  out.candidate_pairs = seed_sums.keys.size() + candidates.keys.size();
  out.candidates_scored += out.candidate_pairs;
  offer_pairs(seed_sums, top);  // each pair once: the seed's, then the rest of H's
  offer_pairs(candidates, top);
  out.top = top.take_sorted(&out.top_memory);
  return out;
}

class DistributedExpansion final : public DistributedSpace {
 public:
  DistributedExpansion(const FeatureSpaceSettings& s, Communicator& comm, const PartitionLayout& layout,
                       const std::vector<const ShardStore*>& own, MemoryBudget& budget)
      : comm_(comm), layout_(layout), budget_(budget), map_(map_from_settings(s)) {
    const uint64_t m = layout.n_features;
    range_memory_ = budget.reserve(m * (2 * sizeof(float) + 1) + 2 * m * sizeof(float) * (comm.size() + 1),
                                   "hik/additive column ranges", "use fewer base features");
    // The global range of each column: min/max over the partitions (each with
    // its implicit zeros) — exact, so the order does not matter.
    std::vector<float> mine(2 * m);
    for (uint64_t j = 0; j < m; ++j) {
      mine[j] = std::numeric_limits<float>::infinity();
      mine[m + j] = -std::numeric_limits<float>::infinity();
      for (const ShardStore* store : own) {
        mine[j] = std::min(mine[j], store->column_min(j));
        mine[m + j] = std::max(mine[m + j], store->column_max(j));
      }
    }
    const std::vector<uint8_t> all =
        comm.size() == 1 ? std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(mine.data()),
                                                reinterpret_cast<const uint8_t*>(mine.data() + mine.size()))
                         : comm.allgather(mine.data(), mine.size() * sizeof(float));
    std::vector<float> every(all.size() / sizeof(float));
    std::memcpy(every.data(), all.data(), every.size() * sizeof(float));
    lo_.assign(m, std::numeric_limits<float>::infinity());
    hi_.assign(m, -std::numeric_limits<float>::infinity());
    for (size_t r = 0; r < every.size() / (2 * m); ++r)
      for (uint64_t j = 0; j < m; ++j) {
        lo_[j] = std::min(lo_[j], every[r * 2 * m + j]);
        hi_[j] = std::max(hi_[j], every[r * 2 * m + m + j]);
      }
    range_memory_.resize(m * (2 * sizeof(float) + 1));
    selected_.assign(m, 0);
  }
  std::string kind() const override { return map_.kind() == FeatureKind::kHik ? "hik" : "additive"; }
  DistributedScores score(const std::vector<PartitionScoringInput>& parts, uint64_t B) override {
    DistributedScores out;
    const uint64_t m = layout_.n_features, D = map_.dim();
    // The partitions' and the tree's m·D sums, and per feature the entry counts and their Σ a_i.
    Reservation memory = budget_.reserve(tree_sum_bytes(m * D, parts.size(), comm_.size()) + 16 * m,
                                         "hik/additive component sums of a distributed scoring pass",
                                         "use fewer base features, a smaller features.levels/features.order, or "
                                         "more memory per rank");
    std::vector<std::vector<double>> local;
    PassStats pass;
    for (const auto& p : parts)
      local.push_back(expansion_partition_sums(*p.stream, *p.blocks, p.a, map_, lo_, hi_, selected_, &pass));
    out.bytes_streamed = pass.bytes_streamed;
    const std::vector<double> c =
        allreduce_partition_sums(comm_, layout_.partitions, layout_.first_partition, local, m * D);
    local.clear();
    TopBCache top(B, &budget_);
    for (uint64_t j = 0; j < m; ++j) {
      if (selected_[j]) continue;
      double s = 0;
      for (uint64_t l = 0; l < D; ++l) s += c[j * D + l] * c[j * D + l];
      if (s > 0 && top.may_admit(s)) top.offer({s, j});
    }
    out.candidates_scored = m * D;
    out.top = top.take_sorted(&out.top_memory);
    return out;
  }
  void mark_selected(uint64_t candidate) override {
    if (!selected_[candidate]) selected_ids_.push_back(candidate);
    selected_[candidate] = 1;
  }
  std::vector<GeneratedColumn> columns(const ShardStore& partition, uint64_t j) override {
    std::vector<std::vector<uint32_t>> rows;
    std::vector<std::vector<float>> values;
    expansion_partition_columns(partition, map_, j, lo_[j], hi_[j], rows, values);
    std::vector<GeneratedColumn> out(map_.dim());
    for (uint32_t l = 0; l < map_.dim(); ++l) {
      out[l].key.kind = map_.kind();
      out[l].key.ids[0] = j;
      out[l].key.group = j;
      out[l].key.level = l;
      out[l].rows = std::move(rows[l]);
      out[l].values = std::move(values[l]);
    }
    return out;
  }
  void describe(Model& model) const override {
    describe_expansion_model(map_, selected_ids_, [&](uint64_t j) { return std::pair{lo_[j], hi_[j]}; }, model);
  }


 private:
  static ExpansionMap map_from_settings(const FeatureSpaceSettings& s) {
    if (s.kind == "hik") return ExpansionMap::hik(s.levels);
    auto kernel = parse_additive_kernel(s.kernel);
    if (!kernel) throw Error(ErrorKind::kConfig, msg::bad_enum("", "features.kernel", s.kernel, "chi2, intersection"));
    return ExpansionMap::additive(*kernel, s.order, s.period > 0 ? s.period : additive_default_period(*kernel, s.order));
  }

  Communicator& comm_;
  PartitionLayout layout_;
  MemoryBudget& budget_;
  ExpansionMap map_;
  Reservation range_memory_;
  std::vector<float> lo_, hi_;  // global column ranges
  std::vector<char> selected_;
  std::vector<uint64_t> selected_ids_;
};

}  // namespace

std::unique_ptr<DistributedSpace> make_distributed_space(const FeatureSpaceSettings& settings, Communicator& comm,
                                                         const PartitionLayout& layout,
                                                         const std::vector<const ShardStore*>& own,
                                                         MemoryBudget& budget) {
  if (settings.kind == "poly2") return std::make_unique<DistributedPoly2>(settings, comm, layout, budget);
  if (settings.kind == "hik" || settings.kind == "additive")
    return std::make_unique<DistributedExpansion>(settings, comm, layout, own, budget);
  throw Error(ErrorKind::kInternal, "make_distributed_space: features.kind = " + settings.kind);
}

}  // namespace fgm
