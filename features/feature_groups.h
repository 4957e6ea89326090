// Feature groups for group feature selection (FGM Sections 2.2–2.3, 4.2–4.3),
// read from a group file: one line per group, whitespace-separated feature ids
// as in the data (index_base applies), '#' starts a comment, blank lines are
// skipped. Features not listed form singleton groups, so ∪ G_j = {1..m}.
//  * disjoint:    a feature listed twice is an error.
//  * overlapping: groups may share features; a selected group brings its own
//                 copy of each column (augmentation, Section 2.3).
//  * tree:        any two groups are disjoint or nested (Definition 1); the
//                 tree is inferred (parent = smallest strict superset) and the
//                 search prunes a subtree whose root scores below the current
//                 B-th best (Remark 2: a child never outscores its parent).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/memory_budget.h"

namespace fgm {

enum class GroupStructure { kDisjoint, kOverlapping, kTree };
GroupStructure parse_group_structure(const std::string& text);

struct FeatureGroups {
  GroupStructure structure = GroupStructure::kDisjoint;
  uint64_t n_groups = 0;
  uint64_t listed_groups = 0;        // groups from the file (ids 0..listed-1, in line order)
  std::vector<uint64_t> member_ptr;  // CSR over groups (size n_groups+1)
  std::vector<uint64_t> members;     // feature ids, increasing within a group
  std::vector<uint64_t> line;        // file line of each listed group (for messages)
  // Tree structure (kTree): children CSR and the roots, each in increasing id.
  std::vector<uint64_t> child_ptr;
  std::vector<uint64_t> children;
  std::vector<uint64_t> roots;
  uint64_t size(uint64_t g) const { return member_ptr[g + 1] - member_ptr[g]; }
};

FeatureGroups read_feature_groups(const std::string& path, uint64_t n_features, int index_base,
                                  MemoryBudget& budget,
                                  GroupStructure structure = GroupStructure::kDisjoint);

}  // namespace fgm
