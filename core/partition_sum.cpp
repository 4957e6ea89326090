#include "core/partition_sum.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <utility>

#include "core/error.h"

namespace fgm {

uint32_t partition_tree_split(uint32_t begin, uint32_t end) {
  uint32_t half = 1;
  while (2 * static_cast<uint64_t>(half) < end - begin) half *= 2;
  return begin + half;
}

namespace {

void collect_covering(uint32_t begin, uint32_t end, uint32_t first, uint32_t last, std::vector<PartitionNode>& out) {
  if (end <= first || begin >= last) return;
  if (first <= begin && end <= last) {
    out.push_back({begin, end});
    return;
  }
  const uint32_t mid = partition_tree_split(begin, end);
  collect_covering(begin, mid, first, last, out);
  collect_covering(mid, end, first, last, out);
}

using NodeKey = std::pair<uint32_t, uint32_t>;

// The node's sum into `out` (length doubles): a known node's vector, else its
// children's sums added elementwise (left + right).
void evaluate(uint32_t begin, uint32_t end, const std::map<NodeKey, const double*>& known, size_t length,
              double* out) {
  auto it = known.find({begin, end});
  if (it != known.end()) {
    std::memcpy(out, it->second, length * sizeof(double));
    return;
  }
  if (end - begin < 2) throw Error(ErrorKind::kInternal, "partition sum: partition " + std::to_string(begin) + " missing");
  const uint32_t mid = partition_tree_split(begin, end);
  std::vector<double> right(length);
  evaluate(begin, mid, known, length, out);
  evaluate(mid, end, known, length, right.data());
  for (size_t i = 0; i < length; ++i) out[i] += right[i];
}

// Sparse twin of evaluate(): left + right by key (a missing key is an exact zero).
SparseSums evaluate_sparse(uint32_t begin, uint32_t end, const std::map<NodeKey, const SparseSums*>& known) {
  auto it = known.find({begin, end});
  if (it != known.end()) return *it->second;
  if (end - begin < 2) throw Error(ErrorKind::kInternal, "partition sum: partition " + std::to_string(begin) + " missing");
  const uint32_t mid = partition_tree_split(begin, end);
  const SparseSums left = evaluate_sparse(begin, mid, known), right = evaluate_sparse(mid, end, known);
  SparseSums out;
  out.keys.reserve(left.keys.size() + right.keys.size());
  out.values.reserve(left.keys.size() + right.keys.size());
  size_t p = 0, q = 0;
  while (p < left.keys.size() || q < right.keys.size()) {
    if (q == right.keys.size() || (p < left.keys.size() && left.keys[p] < right.keys[q])) {
      out.keys.push_back(left.keys[p]);
      out.values.push_back(left.values[p++]);
    } else if (p == left.keys.size() || right.keys[q] < left.keys[p]) {
      out.keys.push_back(right.keys[q]);
      out.values.push_back(right.values[q++]);
    } else {
      out.keys.push_back(left.keys[p]);
      out.values.push_back(left.values[p++] + right.values[q++]);
    }
  }
  return out;
}

}  // namespace

std::vector<PartitionNode> covering_nodes(uint32_t partitions, uint32_t first, uint32_t last) {
  std::vector<PartitionNode> out;
  if (partitions > 0) collect_covering(0, partitions, first, last, out);
  return out;
}

PartitionRange partitions_of_rank(uint32_t partitions, int ranks, int rank) {
  if (ranks <= 0 || partitions % static_cast<uint32_t>(ranks) != 0)
    throw Error(ErrorKind::kInternal, "partitions_of_rank: ranks must divide partitions");
  const uint32_t per = partitions / static_cast<uint32_t>(ranks);
  return {per * static_cast<uint32_t>(rank), per};
}

std::vector<double> allreduce_partition_sums(Communicator& comm, uint32_t partitions, uint32_t first_partition,
                                             const std::vector<std::vector<double>>& local, size_t length) {
  const auto last = static_cast<uint32_t>(first_partition + local.size());
  std::map<NodeKey, const double*> mine;
  for (size_t k = 0; k < local.size(); ++k) {
    if (local[k].size() != length) throw Error(ErrorKind::kInternal, "partition sum: vector length differs");
    mine[{first_partition + static_cast<uint32_t>(k), first_partition + static_cast<uint32_t>(k) + 1}] =
        local[k].data();
  }
  // This rank's covering nodes, evaluated from its own partitions, in one buffer:
  // per node its begin and end (as doubles, exact below 2^53) then its vector.
  const std::vector<PartitionNode> nodes = covering_nodes(partitions, first_partition, last);
  std::vector<double> send(nodes.size() * (2 + length));
  for (size_t q = 0; q < nodes.size(); ++q) {
    double* at = send.data() + q * (2 + length);
    at[0] = nodes[q].begin;
    at[1] = nodes[q].end;
    evaluate(nodes[q].begin, nodes[q].end, mine, length, at + 2);
  }
  std::vector<double> everyone;
  if (comm.size() == 1) {
    everyone = std::move(send);
  } else {
    const std::vector<uint8_t> all = comm.allgather(send.data(), send.size() * sizeof(double));
    everyone.resize(all.size() / sizeof(double));
    std::memcpy(everyone.data(), all.data(), everyone.size() * sizeof(double));
  }
  const double* received = everyone.data();
  const size_t received_doubles = everyone.size();
  std::map<NodeKey, const double*> known;
  for (size_t at = 0; at + 2 <= received_doubles; at += 2 + length)
    known[{static_cast<uint32_t>(received[at]), static_cast<uint32_t>(received[at + 1])}] = received + at + 2;
  std::vector<double> out(length);
  if (partitions > 0) evaluate(0, partitions, known, length, out.data());
  return out;
}

namespace {

constexpr uint64_t kImpliedKeys = uint64_t{1} << 63;  // header flag: a node's keys are its destination's spans

void put(std::vector<uint8_t>& out, const void* data, size_t bytes) {
  const auto* b = static_cast<const uint8_t*>(data);
  out.insert(out.end(), b, b + bytes);
}

std::map<NodeKey, const SparseSums*> own_leaves(uint32_t first_partition, const std::vector<SparseSums>& local) {
  std::map<NodeKey, const SparseSums*> mine;
  for (size_t k = 0; k < local.size(); ++k) {
    if (local[k].keys.size() != local[k].values.size())
      throw Error(ErrorKind::kInternal, "partition sum: sparse keys and values differ in length");
    const auto p = first_partition + static_cast<uint32_t>(k);
    mine[{p, p + 1}] = &local[k];
  }
  return mine;
}

// Per node: begin, end, count (| kImpliedKeys), then its keys (unless implied) and values.
void put_node(std::vector<uint8_t>& out, const PartitionNode& node, const SparseSums& sums, bool keys_implied) {
  const uint64_t header[3] = {node.begin, node.end, sums.keys.size() | (keys_implied ? kImpliedKeys : 0)};
  put(out, header, sizeof header);
  if (!keys_implied) put(out, sums.keys.data(), sums.keys.size() * sizeof(uint64_t));
  put(out, sums.values.data(), sums.values.size() * sizeof(double));
}

std::vector<uint64_t> ids_of(const ColumnSpans& spans) {
  std::vector<uint64_t> ids;
  ids.reserve(spans.columns());
  for (const auto& [first, end] : spans.spans)
    for (uint64_t j = first; j < end; ++j) ids.push_back(j);
  return ids;
}

// The nodes put_node wrote, back; a node sent without keys has the ids of
// `implied` (expanded once, when first needed).
void read_nodes(const std::vector<uint8_t>& bytes, const ColumnSpans* implied_spans, std::vector<SparseSums>& sums,
                std::vector<NodeKey>& nodes) {
  std::vector<uint64_t> implied;
  bool expanded = false;
  for (size_t at = 0; at + 3 * sizeof(uint64_t) <= bytes.size();) {
    uint64_t header[3];
    std::memcpy(header, bytes.data() + at, sizeof header);
    at += sizeof header;
    const bool keys_implied = (header[2] & kImpliedKeys) != 0;
    const uint64_t count = header[2] & ~kImpliedKeys;
    SparseSums node;
    node.values.resize(count);
    if (keys_implied) {
      if (!expanded && implied_spans) implied = ids_of(*implied_spans);
      expanded = true;
      if (count != implied.size()) throw Error(ErrorKind::kInternal, "partition sum: implied keys differ in count");
      node.keys = implied;
    } else {
      node.keys.resize(count);
      std::memcpy(node.keys.data(), bytes.data() + at, count * sizeof(uint64_t));
      at += count * sizeof(uint64_t);
    }
    std::memcpy(node.values.data(), bytes.data() + at, count * sizeof(double));
    at += count * sizeof(double);
    sums.push_back(std::move(node));
    nodes.emplace_back(static_cast<uint32_t>(header[0]), static_cast<uint32_t>(header[1]));
  }
}

SparseSums evaluate_received(uint32_t partitions, const std::vector<uint8_t>& bytes, const ColumnSpans* implied) {
  std::vector<SparseSums> received;
  std::vector<NodeKey> received_nodes;
  read_nodes(bytes, implied, received, received_nodes);
  std::map<NodeKey, const SparseSums*> known;
  for (size_t k = 0; k < received.size(); ++k) known[received_nodes[k]] = &received[k];
  return partitions > 0 ? evaluate_sparse(0, partitions, known) : SparseSums{};
}

// The entries of `sums` whose keys lie in `wanted`.
SparseSums restrict_to(const SparseSums& sums, const ColumnSpans& wanted) {
  SparseSums out;
  auto from = sums.keys.begin();
  for (const auto& [first, end] : wanted.spans) {
    const auto lo = std::lower_bound(from, sums.keys.end(), first);
    const auto hi = std::lower_bound(lo, sums.keys.end(), end);
    out.keys.insert(out.keys.end(), lo, hi);
    out.values.insert(out.values.end(), sums.values.begin() + (lo - sums.keys.begin()),
                      sums.values.begin() + (hi - sums.keys.begin()));
    from = hi;
  }
  return out;
}

// `share` with an exact +0.0 at every id of `wanted` it lacks (x + 0.0 = x
// in the tree, so only the sign of a zero sum can change).
SparseSums filled(const SparseSums& share, const ColumnSpans& wanted) {
  SparseSums out;
  out.values.reserve(wanted.columns());
  size_t k = 0;
  for (const auto& [first, end] : wanted.spans)
    for (uint64_t j = first; j < end; ++j) {
      const bool present = k < share.keys.size() && share.keys[k] == j;
      out.keys.push_back(j);
      out.values.push_back(present ? share.values[k++] : 0.0);
    }
  return out;
}

}  // namespace

SparseSums allreduce_partition_sparse_sums(Communicator& comm, uint32_t partitions, uint32_t first_partition,
                                           const std::vector<SparseSums>& local) {
  const auto last = static_cast<uint32_t>(first_partition + local.size());
  const std::map<NodeKey, const SparseSums*> mine = own_leaves(first_partition, local);
  std::vector<uint8_t> send;
  for (const PartitionNode& node : covering_nodes(partitions, first_partition, last))
    put_node(send, node, evaluate_sparse(node.begin, node.end, mine), false);
  const std::vector<uint8_t> everyone =
      comm.size() == 1 ? std::move(send) : comm.allgather(send.data(), send.size());
  return evaluate_received(partitions, everyone, nullptr);
}

uint64_t ColumnSpans::columns() const {
  uint64_t n = 0;
  for (const auto& [first, end] : spans) n += end - first;
  return n;
}

bool ColumnSpans::contains(uint64_t id) const {
  auto it = std::upper_bound(spans.begin(), spans.end(), id,
                             [](uint64_t v, const std::pair<uint64_t, uint64_t>& s) { return v < s.first; });
  return it != spans.begin() && id < std::prev(it)->second;
}

ColumnSpans column_range_of_rank(uint64_t m, int ranks, int rank) {
  auto bound = [&](int r) {
    return static_cast<uint64_t>(static_cast<unsigned __int128>(m) * static_cast<unsigned>(r) /
                                 static_cast<unsigned>(ranks));
  };
  ColumnSpans out;
  if (bound(rank) < bound(rank + 1)) out.spans.emplace_back(bound(rank), bound(rank + 1));
  return out;
}

int rank_of_id(uint64_t j, uint64_t m, int ranks) {
  int d = static_cast<int>(static_cast<unsigned __int128>(j) * static_cast<unsigned>(ranks) / m);
  while (d + 1 < ranks && !column_range_of_rank(m, ranks, d).contains(j)) ++d;
  while (d > 0 && !column_range_of_rank(m, ranks, d).contains(j)) --d;
  return d;
}

std::vector<ColumnSpans> rank_key_ranges(uint64_t m, int ranks, uint64_t width) {
  std::vector<ColumnSpans> out;
  for (int d = 0; d < ranks; ++d) {
    ColumnSpans keys;
    for (const auto& [first, end] : column_range_of_rank(m, ranks, d).spans)
      keys.spans.emplace_back(first * width, end * width);
    out.push_back(std::move(keys));
  }
  return out;
}

ColumnSpans spans_of_sorted_ids(const std::vector<uint64_t>& ids) {
  ColumnSpans out;
  for (uint64_t id : ids) {
    if (!out.spans.empty() && id < out.spans.back().second) continue;  // a duplicate
    if (!out.spans.empty() && id == out.spans.back().second)
      ++out.spans.back().second;
    else
      out.spans.emplace_back(id, id + 1);
  }
  return out;
}

namespace {

// The sum of node [begin, end) from the partials made on demand, children
// released as soon as they are added; `live` counts the bytes held.
SparseSums evaluate_on_demand(uint32_t begin, uint32_t end, const std::function<SparseSums(uint32_t)>& partial,
                              uint64_t& live, Reservation* memory) {
  auto hold = [&](int64_t delta) {
    live = static_cast<uint64_t>(static_cast<int64_t>(live) + delta);
    if (memory) memory->resize(live);
  };
  if (end - begin == 1) {
    SparseSums leaf = partial(begin);
    if (leaf.keys.size() != leaf.values.size())
      throw Error(ErrorKind::kInternal, "partition sum: sparse keys and values differ in length");
    hold(static_cast<int64_t>(16 * leaf.keys.size()));
    return leaf;
  }
  const uint32_t mid = partition_tree_split(begin, end);
  SparseSums left = evaluate_on_demand(begin, mid, partial, live, memory);
  SparseSums right = evaluate_on_demand(mid, end, partial, live, memory);
  const auto children = static_cast<int64_t>(16 * (left.keys.size() + right.keys.size()));
  hold(children);  // the sum: at most as many entries as its children
  const std::map<NodeKey, const SparseSums*> both = {{{begin, mid}, &left}, {{mid, end}, &right}};
  SparseSums sum = evaluate_sparse(begin, end, both);
  hold(static_cast<int64_t>(16 * sum.keys.size()) - 2 * children);
  return sum;
}

}  // namespace

SparseSums reduce_scatter_partition_sparse_sums(Communicator& comm, uint32_t partitions, uint32_t first_partition,
                                                uint32_t count, const std::function<SparseSums(uint32_t)>& partial,
                                                const std::vector<ColumnSpans>& wanted, Reservation* memory) {
  if (wanted.size() != static_cast<size_t>(comm.size()))
    throw Error(ErrorKind::kInternal, "partition reduce-scatter: one set of spans per rank");
  uint64_t live = 0;
  if (comm.size() == 1)
    return partitions > 0 ? restrict_to(evaluate_on_demand(0, partitions, partial, live, memory), wanted[0])
                          : SparseSums{};
  std::vector<std::vector<uint8_t>> parts(wanted.size());
  for (const PartitionNode& node : covering_nodes(partitions, first_partition, first_partition + count)) {
    const SparseSums sums = evaluate_on_demand(node.begin, node.end, partial, live, memory);
    for (size_t d = 0; d < wanted.size(); ++d) {
      const SparseSums share = restrict_to(sums, wanted[d]);
      const uint64_t columns = wanted[d].columns();
      if (share.keys.empty() || 2 * share.keys.size() < columns)
        put_node(parts[d], node, share, false);
      else
        put_node(parts[d], node, filled(share, wanted[d]), true);
    }
    live -= 16 * sums.keys.size();
  }
  uint64_t sent = 0;
  for (const auto& part : parts) sent += part.size();
  if (memory) memory->resize(live + sent);
  const auto me = static_cast<size_t>(comm.rank());
  std::vector<uint8_t> received = comm.alltoallv(parts);
  std::vector<std::vector<uint8_t>>().swap(parts);
  // The received shares, read into node vectors, and the tree over them.
  if (memory) memory->resize(3 * received.size());
  SparseSums out = evaluate_received(partitions, received, &wanted[me]);
  return out;
}

SparseSums reduce_scatter_partition_sparse_sums(Communicator& comm, uint32_t partitions, uint32_t first_partition,
                                                const std::vector<SparseSums>& local,
                                                const std::vector<ColumnSpans>& wanted) {
  return reduce_scatter_partition_sparse_sums(
      comm, partitions, first_partition, static_cast<uint32_t>(local.size()),
      [&](uint32_t p) { return local[p - first_partition]; }, wanted, nullptr);
}

}  // namespace fgm
