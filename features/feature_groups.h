// Disjoint feature groups for group feature selection (FGM Section 2.2 / 4.2),
// read from a group file: one line per group, whitespace-separated feature ids
// as in the data (index_base applies), '#' starts a comment, blank lines are
// skipped. Features not listed form singleton groups, so the groups cover all
// features (∪ G_j = {1..m}). A feature listed twice is an error (overlapping
// groups are handled by augmentation, not here).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/memory_budget.h"

namespace fgm {

struct FeatureGroups {
  uint64_t n_groups = 0;
  uint64_t listed_groups = 0;            // groups from the file (ids 0..listed-1, in line order)
  BudgetedArray<uint64_t> group_of;      // feature -> group
  std::vector<uint64_t> member_ptr;      // CSR over groups (size n_groups+1)
  std::vector<uint64_t> members;         // feature ids, increasing within a group
  uint64_t size(uint64_t g) const { return member_ptr[g + 1] - member_ptr[g]; }
};

FeatureGroups read_feature_groups(const std::string& path, uint64_t n_features, int index_base,
                                  MemoryBudget& budget);

}  // namespace fgm
