#include "core/partition_sum.h"

#include <cstring>
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

SparseSums allreduce_partition_sparse_sums(Communicator& comm, uint32_t partitions, uint32_t first_partition,
                                           const std::vector<SparseSums>& local) {
  const auto last = static_cast<uint32_t>(first_partition + local.size());
  std::map<NodeKey, const SparseSums*> mine;
  for (size_t k = 0; k < local.size(); ++k) {
    if (local[k].keys.size() != local[k].values.size())
      throw Error(ErrorKind::kInternal, "partition sum: sparse keys and values differ in length");
    mine[{first_partition + static_cast<uint32_t>(k), first_partition + static_cast<uint32_t>(k) + 1}] = &local[k];
  }
  // Per covering node: begin, end, count (uint64), then its keys and values.
  std::vector<uint8_t> send;
  auto put = [&send](const void* data, size_t bytes) {
    const auto* b = static_cast<const uint8_t*>(data);
    send.insert(send.end(), b, b + bytes);
  };
  for (const PartitionNode& node : covering_nodes(partitions, first_partition, last)) {
    const SparseSums sums = evaluate_sparse(node.begin, node.end, mine);
    const uint64_t header[3] = {node.begin, node.end, sums.keys.size()};
    put(header, sizeof header);
    put(sums.keys.data(), sums.keys.size() * sizeof(uint64_t));
    put(sums.values.data(), sums.values.size() * sizeof(double));
  }
  std::vector<uint8_t> everyone = comm.size() == 1 ? std::move(send) : comm.allgather(send.data(), send.size());
  std::vector<SparseSums> received;
  std::vector<NodeKey> received_nodes;
  for (size_t at = 0; at + 3 * sizeof(uint64_t) <= everyone.size();) {
    uint64_t header[3];
    std::memcpy(header, everyone.data() + at, sizeof header);
    at += sizeof header;
    SparseSums sums;
    sums.keys.resize(header[2]);
    sums.values.resize(header[2]);
    std::memcpy(sums.keys.data(), everyone.data() + at, header[2] * sizeof(uint64_t));
    at += header[2] * sizeof(uint64_t);
    std::memcpy(sums.values.data(), everyone.data() + at, header[2] * sizeof(double));
    at += header[2] * sizeof(double);
    received.push_back(std::move(sums));
    received_nodes.emplace_back(static_cast<uint32_t>(header[0]), static_cast<uint32_t>(header[1]));
  }
  std::map<NodeKey, const SparseSums*> known;
  for (size_t k = 0; k < received.size(); ++k) known[received_nodes[k]] = &received[k];
  return partitions > 0 ? evaluate_sparse(0, partitions, known) : SparseSums{};
}

}  // namespace fgm
