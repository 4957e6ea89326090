// The groups G of the exclusive sparsity norm ‖w‖_e² = Σ_{g∈G} ‖w_g‖₁²
// (seed 002, (1)) over a design's compact column indices 0..p−1. Groups may
// overlap (Fista-pcp, Fista-licp); Fista-locp needs them disjoint.
//
// Two sources:
//  * a group file (features/feature_groups.h format): each listed group keeps
//    its members that are non-empty columns of the store (a group left empty
//    is dropped); every column no line lists is a singleton group, as in the
//    file format — so ‖w_i‖₁² = w_i² acts on it as a ridge term.
//  * random groups (Section 4): the columns shuffled by a seeded Fisher–Yates
//    and dealt round-robin into m groups, so sizes differ by at most 1.
//    default_group_count(s) = max(1, round(s / ln s)) for s expected relevant
//    features (Theorem 5's m ≈ s/log s; its constants are loose, ERRATA 002).
#pragma once

#include <cstdint>
#include <vector>

#include "core/memory_budget.h"
#include "features/feature_groups.h"

namespace fgm::exclusive {

struct ExclusiveGroups {
  uint64_t columns = 0;                  // p
  std::vector<uint64_t> member_ptr;      // CSR: group g holds members[member_ptr[g], member_ptr[g+1])
  std::vector<uint64_t> members;         // compact column indices, increasing within a group
  std::vector<uint64_t> membership_ptr;  // CSR: column k lies in groups memberships[...]
  std::vector<uint64_t> memberships;
  bool disjoint = true;
  Reservation memory;

  uint64_t count() const { return member_ptr.empty() ? 0 : member_ptr.size() - 1; }
  uint64_t size(uint64_t g) const { return member_ptr[g + 1] - member_ptr[g]; }
  uint64_t total_members() const { return members.size(); }
  // max_k Σ_{g∋k} |g|: bounds ‖Q‖ of Fista-pcp's quadratic (Gershgorin; exact for disjoint groups).
  uint64_t max_overlap_weight() const;
  // max_k |{g ∋ k}|: ‖E‖² of Fista-licp's member-to-column map.
  uint64_t max_memberships() const;
};

// Builds the CSR from (group, column) lists; fills memberships and `disjoint`.
ExclusiveGroups make_groups(uint64_t columns, std::vector<std::vector<uint64_t>> groups, MemoryBudget& budget);

ExclusiveGroups random_groups(uint64_t columns, uint64_t group_count, uint64_t seed, MemoryBudget& budget);

uint64_t default_group_count(uint64_t expected_relevant);

// `column_ids` (increasing) are the design's feature ids.
ExclusiveGroups groups_from_file(const FeatureGroups& file, const std::vector<uint64_t>& column_ids,
                                 MemoryBudget& budget);

// The groups restricted to `sorted_columns` (re-indexed 0..|W|−1), empty groups dropped.
ExclusiveGroups restrict_groups(const ExclusiveGroups& groups, const std::vector<uint64_t>& sorted_columns,
                                MemoryBudget& budget);

// Σ_g ‖w_g‖₁² and the per-group ℓ1 norms.
double exclusive_norm_squared(const ExclusiveGroups& groups, const double* w, std::vector<double>* group_l1 = nullptr);

}  // namespace fgm::exclusive
