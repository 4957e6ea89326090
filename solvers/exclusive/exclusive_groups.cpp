#include "solvers/exclusive/exclusive_groups.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"

namespace fgm::exclusive {

uint64_t ExclusiveGroups::max_overlap_weight() const {
  uint64_t best = 0;
  for (uint64_t k = 0; k < columns; ++k) {
    uint64_t s = 0;
    for (uint64_t q = membership_ptr[k]; q < membership_ptr[k + 1]; ++q) s += size(memberships[q]);
    best = std::max(best, s);
  }
  return best;
}

uint64_t ExclusiveGroups::max_memberships() const {
  uint64_t best = 0;
  for (uint64_t k = 0; k < columns; ++k) best = std::max(best, membership_ptr[k + 1] - membership_ptr[k]);
  return best;
}

ExclusiveGroups make_groups(uint64_t columns, std::vector<std::vector<uint64_t>> groups, MemoryBudget& budget) {
  ExclusiveGroups out;
  out.columns = columns;
  uint64_t total = 0;
  for (const auto& g : groups) total += g.size();
  out.memory = budget.reserve((2 * groups.size() + 2 * columns + 2 * total + 2) * sizeof(uint64_t),
                              "exclusive: groups", "use fewer or smaller groups");
  out.member_ptr.reserve(groups.size() + 1);
  out.member_ptr.push_back(0);
  out.members.reserve(total);
  std::vector<uint64_t> counts(columns + 1, 0);
  for (auto& g : groups) {
    if (g.empty()) continue;
    std::sort(g.begin(), g.end());
    g.erase(std::unique(g.begin(), g.end()), g.end());
    for (uint64_t k : g) {
      FGM_ASSERT(k < columns);
      ++counts[k + 1];
      out.members.push_back(k);
    }
    out.member_ptr.push_back(out.members.size());
  }
  for (uint64_t k = 0; k < columns; ++k) counts[k + 1] += counts[k];
  out.membership_ptr = counts;
  out.memberships.resize(out.members.size());
  for (uint64_t g = 0; g + 1 < out.member_ptr.size(); ++g)
    for (uint64_t q = out.member_ptr[g]; q < out.member_ptr[g + 1]; ++q) out.memberships[counts[out.members[q]]++] = g;
  out.disjoint = true;
  for (uint64_t k = 0; k < columns; ++k)
    if (out.membership_ptr[k + 1] - out.membership_ptr[k] > 1) out.disjoint = false;
  return out;
}

ExclusiveGroups random_groups(uint64_t columns, uint64_t group_count, uint64_t seed, MemoryBudget& budget) {
  FGM_ASSERT(group_count >= 1);
  group_count = std::min<uint64_t>(group_count, std::max<uint64_t>(columns, 1));
  std::vector<uint64_t> order(columns);
  for (uint64_t k = 0; k < columns; ++k) order[k] = k;
  // Fisher–Yates with our own bounded draw (std::shuffle's algorithm is not
  // specified, so the groups could change with the standard library).
  std::mt19937_64 rng(seed);
  for (uint64_t k = columns; k > 1; --k) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % k;
    uint64_t draw;
    do draw = rng();
    while (draw >= limit);
    std::swap(order[k - 1], order[draw % k]);
  }
  std::vector<std::vector<uint64_t>> groups(group_count);
  for (uint64_t q = 0; q < columns; ++q) groups[q % group_count].push_back(order[q]);
  return make_groups(columns, std::move(groups), budget);
}

uint64_t default_group_count(uint64_t expected_relevant) {
  if (expected_relevant < 3) return 1;  // s/ln s < 2 below s = 3 (ln 2 < 1)
  const double s = static_cast<double>(expected_relevant);
  return std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(s / std::log(s))));
}

ExclusiveGroups groups_from_file(const FeatureGroups& file, const std::vector<uint64_t>& column_ids,
                                 MemoryBudget& budget) {
  auto compact = [&](uint64_t feature) -> int64_t {
    auto it = std::lower_bound(column_ids.begin(), column_ids.end(), feature);
    return it != column_ids.end() && *it == feature ? it - column_ids.begin() : -1;
  };
  std::vector<std::vector<uint64_t>> groups;
  std::vector<bool> listed(column_ids.size(), false);
  for (uint64_t g = 0; g < file.listed_groups; ++g) {
    std::vector<uint64_t> members;
    for (uint64_t p = file.member_ptr[g]; p < file.member_ptr[g + 1]; ++p) {
      const int64_t k = compact(file.members[p]);
      if (k < 0) continue;  // an empty column: its weight is 0 whatever the groups
      members.push_back(static_cast<uint64_t>(k));
      listed[static_cast<size_t>(k)] = true;
    }
    if (!members.empty()) groups.push_back(std::move(members));
  }
  for (uint64_t k = 0; k < column_ids.size(); ++k)
    if (!listed[k]) groups.push_back({k});
  return make_groups(column_ids.size(), std::move(groups), budget);
}

ExclusiveGroups restrict_groups(const ExclusiveGroups& groups, const std::vector<uint64_t>& sorted_columns,
                                MemoryBudget& budget) {
  std::vector<int64_t> position(groups.columns, -1);
  for (size_t q = 0; q < sorted_columns.size(); ++q) position[sorted_columns[q]] = static_cast<int64_t>(q);
  std::vector<std::vector<uint64_t>> out;
  for (uint64_t g = 0; g < groups.count(); ++g) {
    std::vector<uint64_t> members;
    for (uint64_t q = groups.member_ptr[g]; q < groups.member_ptr[g + 1]; ++q)
      if (position[groups.members[q]] >= 0) members.push_back(static_cast<uint64_t>(position[groups.members[q]]));
    if (!members.empty()) out.push_back(std::move(members));
  }
  return make_groups(sorted_columns.size(), std::move(out), budget);
}

double exclusive_norm_squared(const ExclusiveGroups& groups, const double* w, std::vector<double>* group_l1) {
  if (group_l1) group_l1->assign(groups.count(), 0.0);
  double total = 0;
  for (uint64_t g = 0; g < groups.count(); ++g) {
    double s = 0;
    for (uint64_t q = groups.member_ptr[g]; q < groups.member_ptr[g + 1]; ++q) s += std::fabs(w[groups.members[q]]);
    if (group_l1) (*group_l1)[g] = s;
    total += s * s;
  }
  return total;
}

}  // namespace fgm::exclusive
