// Sums over row partitions that give the same bits for every rank count
// (docs/distributed.md, "Determinism"). A partitioned store has P row
// partitions, fixed at ingest; a run on K ranks (K divides P) gives each rank
// P/K consecutive partitions. A quantity summed over rows (scores c_j, the
// gradient of the selected set, loss values) is first summed per partition,
// by the same single-process code as ever, and the P partition partials are
// then added in ONE fixed binary tree over the partitions:
//
//   sum[l, r) = partial_l                       if r − l = 1
//             = sum[l, m) + sum[m, r)           m = l + 2^(⌈log2(r−l)⌉−1)
//
// The tree depends on P only. A rank evaluates the largest tree nodes that
// lie inside its own partitions (covering_nodes), exchanges those, and every
// rank evaluates the rest of the tree from them: the additions are the same
// additions in the same order whatever K is, so the result is too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/communicator.h"
#include "core/memory_budget.h"

namespace fgm {

struct PartitionNode {
  uint32_t begin = 0, end = 0;  // partitions [begin, end)
  bool operator==(const PartitionNode& o) const { return begin == o.begin && end == o.end; }
};

// Where the fixed tree splits [begin, end) (end − begin ≥ 2).
uint32_t partition_tree_split(uint32_t begin, uint32_t end);

// The maximal nodes of the tree over `partitions` leaves that lie inside
// [first, last), left to right; they tile [first, last).
std::vector<PartitionNode> covering_nodes(uint32_t partitions, uint32_t first, uint32_t last);

// The partitions [first, first + count) of rank `rank` when `partitions` are
// dealt to `ranks` ranks in consecutive runs of partitions / ranks (ranks
// must divide partitions).
struct PartitionRange {
  uint32_t first = 0, count = 0;
};
PartitionRange partitions_of_rank(uint32_t partitions, int ranks, int rank);

// Σ over all partitions of the per-partition vectors, in the tree order, on
// every rank. `local[k]` is the `length`-vector of partition
// `first_partition + k` (this rank's partitions, consecutive). Communicates
// the covering nodes' vectors (covering_nodes(...).size()·length doubles from
// each rank); counted in the communicator's stats.
std::vector<double> allreduce_partition_sums(Communicator& comm, uint32_t partitions, uint32_t first_partition,
                                             const std::vector<std::vector<double>>& local, size_t length);

// A sparse vector: values at keys, keys strictly increasing.
struct SparseSums {
  std::vector<uint64_t> keys;
  std::vector<double> values;
};

// The same tree sum for sparse vectors (the poly-2 pair partials, whose key
// sets differ between partitions): a key missing from a node's vector is an
// exact zero, a key in both children is left + right. A node's key set is the
// union of its partitions' key sets, so the result (keys and bits) does not
// depend on the rank count either. Communicates each covering node's entries
// (16 bytes per key, plus 24 bytes per node) in one allgather.
SparseSums allreduce_partition_sparse_sums(Communicator& comm, uint32_t partitions, uint32_t first_partition,
                                           const std::vector<SparseSums>& local);

// Column ids in increasing, disjoint spans [first, second).
struct ColumnSpans {
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  uint64_t columns() const;
  bool contains(uint64_t id) const;
};
// Rank `rank`'s share of the ids [0, m) when K = `ranks` ranks split them
// into consecutive ranges: [⌊rank·m/K⌋, ⌊(rank+1)·m/K⌋) (any m < 2^64).
ColumnSpans column_range_of_rank(uint64_t m, int ranks, int rank);
// The rank whose range of [0, m) (column_range_of_rank) holds id j < m.
int rank_of_id(uint64_t j, uint64_t m, int ranks);
// Every rank's range of [0, m), each id j standing for the keys [j·width, (j + 1)·width).
std::vector<ColumnSpans> rank_key_ranges(uint64_t m, int ranks, uint64_t width);
// The fewest spans holding exactly `ids` (sorted, duplicates allowed).
ColumnSpans spans_of_sorted_ids(const std::vector<uint64_t>& ids);

// The reduce-scatter twin of allreduce_partition_sparse_sums: this rank
// receives, and sums in the same tree, only the keys in
// `wanted[comm.rank()]` (every rank passes every rank's spans). Restricting
// to a key set commutes with the tree's keywise additions, so each key's
// bits are those of the full tree sum whatever K is. Each rank sends each
// other rank its covering nodes' entries in that rank's spans (one
// alltoallv), 24 bytes per node plus 16 per entry (id, value), or, when the
// node has at least half of the spans' ids, 8 per id of the spans (values
// only, +0.0 where the node has none: x + 0.0 = x, so only the sign of a
// zero sum can differ from the unfilled tree).
SparseSums reduce_scatter_partition_sparse_sums(Communicator& comm, uint32_t partitions, uint32_t first_partition,
                                                const std::vector<SparseSums>& local,
                                                const std::vector<ColumnSpans>& wanted);

// The same, with each own partition's sparse vector made on demand by
// `partial(p)` (p = first_partition .. first_partition + count − 1, each
// called once, in increasing order) and added into its tree node at once:
// a rank holds at most one pending vector per tree level, not all of its
// partitions' vectors. `memory` (if given) is resized to the bytes of the
// vectors alive (16 per entry), so the budget sees the peak.
SparseSums reduce_scatter_partition_sparse_sums(Communicator& comm, uint32_t partitions, uint32_t first_partition,
                                                uint32_t count, const std::function<SparseSums(uint32_t)>& partial,
                                                const std::vector<ColumnSpans>& wanted, Reservation* memory);

// Every rank's two lists of trivially copyable items, each concatenated in
// rank order, on every rank: one allgather (none on one process). The
// exchanges of top lists and candidate sets that follow a reduce-scatter.
template <class T, class U>
std::pair<std::vector<T>, std::vector<U>> allgather_lists(Communicator& comm, const std::vector<T>& first,
                                                          const std::vector<U>& second) {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_copyable_v<U>);
  if (comm.size() == 1) return {first, second};
  std::vector<uint8_t> send;
  auto put = [&send](const auto& list) {
    const uint64_t count = list.size();
    const auto* b = reinterpret_cast<const uint8_t*>(&count);
    send.insert(send.end(), b, b + sizeof count);
    const auto* d = reinterpret_cast<const uint8_t*>(list.data());
    send.insert(send.end(), d, d + list.size() * sizeof(list[0]));
  };
  put(first);
  put(second);
  const std::vector<uint8_t> all = comm.allgather(send.data(), send.size());
  std::pair<std::vector<T>, std::vector<U>> out;
  size_t at = 0;
  auto take = [&](auto& into) {
    uint64_t count = 0;
    std::memcpy(&count, all.data() + at, sizeof count);
    at += sizeof count;
    const size_t old = into.size();
    into.resize(old + count);
    std::memcpy(into.data() + old, all.data() + at, count * sizeof(into[0]));
    at += count * sizeof(into[0]);
  };
  while (at < all.size()) {
    take(out.first);
    take(out.second);
  }
  return out;
}

}  // namespace fgm
