#include "solvers/apg_reduction.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/partition_sum.h"

namespace fgm {

std::vector<double> LocalRowSums::sum(const std::vector<std::vector<double>>& local, size_t length) {
  FGM_ASSERT(local.size() == 1 && local[0].size() == length);
  ++calls_;
  return local[0];
}

std::vector<double> PartitionTreeRowSums::sum(const std::vector<std::vector<double>>& local, size_t length) {
  ++calls_;
  return allreduce_partition_sums(comm_, partitions_, first_partition_, local, length);
}

double PartitionTreeRowSums::max(double value) {
  ++calls_;
  if (comm_.size() == 1) return value;
  const std::vector<uint8_t> all = comm_.allgather(&value, sizeof value);
  double largest = value;
  for (size_t at = 0; at + sizeof(double) <= all.size(); at += sizeof(double)) {
    double v;
    std::memcpy(&v, all.data() + at, sizeof v);
    largest = std::max(largest, v);
  }
  return largest;
}

}  // namespace fgm
