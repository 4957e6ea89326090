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

// Memory is proportional to the listed groups: the singleton groups of the
// features no line lists (ids listed_groups.. in feature order) are implicit,
// so a hashed id space (n_features up to 2^63) costs nothing for them.
struct FeatureGroups {
  GroupStructure structure = GroupStructure::kDisjoint;
  uint64_t n_features = 0;
  uint64_t n_groups = 0;             // listed_groups + the singletons
  uint64_t listed_groups = 0;        // groups from the file (ids 0..listed-1, in line order)
  std::vector<uint64_t> member_ptr;  // CSR over the listed groups (size listed_groups+1)
  std::vector<uint64_t> members;     // feature ids, increasing within a group
  std::vector<uint64_t> listed_features;  // every feature some line lists, increasing
  std::vector<uint64_t> line;        // file line of each listed group (for messages)
  // Tree structure (kTree) of the listed groups: children CSR and the roots,
  // each in increasing id (the singletons are roots without children too).
  std::vector<uint64_t> child_ptr;
  std::vector<uint64_t> children;
  std::vector<uint64_t> roots;

  bool is_listed(uint64_t g) const { return g < listed_groups; }
  uint64_t size(uint64_t g) const { return is_listed(g) ? member_ptr[g + 1] - member_ptr[g] : 1; }
  // Member p (< size(g)) of group g, increasing in p.
  uint64_t member(uint64_t g, uint64_t p) const {
    return is_listed(g) ? members[member_ptr[g] + p] : singleton_feature(g);
  }
  // Index of `feature` in listed_features, or UINT64_MAX if no line lists it.
  uint64_t listed_index(uint64_t feature) const;
  // The singleton group of a feature no line lists, and its inverse.
  uint64_t singleton_group(uint64_t feature) const;
  uint64_t singleton_feature(uint64_t group) const;
};

FeatureGroups read_feature_groups(const std::string& path, uint64_t n_features, int index_base,
                                  MemoryBudget& budget,
                                  GroupStructure structure = GroupStructure::kDisjoint);

}  // namespace fgm
