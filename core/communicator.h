// The ranks of a data-parallel run (docs/distributed.md) as the engine sees
// them: rank, size, and the few collectives its algorithms need, each counted
// (bytes and seconds). The engine never calls MPI itself: a run launched by
// mpirun (or srun) gets the MPI world (core/mpi_communicator.cpp), any other
// run a world of one rank that makes no MPI call at all, so `fgm` without
// mpirun behaves exactly as a build without MPI would.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace fgm {

struct CommunicationStats {
  uint64_t bytes = 0;  // payload bytes this rank sent plus received
  uint64_t calls = 0;  // collective calls
  double seconds = 0;  // wall time inside them (waiting for slower ranks included)
};

// What was communicated between two readings of Communicator::stats(), and totals.
inline CommunicationStats operator-(const CommunicationStats& now, const CommunicationStats& before) {
  return {now.bytes - before.bytes, now.calls - before.calls, now.seconds - before.seconds};
}
inline CommunicationStats& operator+=(CommunicationStats& total, const CommunicationStats& part) {
  total.bytes += part.bytes;
  total.calls += part.calls;
  total.seconds += part.seconds;
  return total;
}

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank's `bytes` bytes, concatenated in rank order, on every rank;
  // `sizes` (if given) receives each rank's byte count.
  virtual std::vector<uint8_t> allgather(const void* data, size_t bytes, std::vector<size_t>* sizes = nullptr) = 0;
  // Personalised exchange (a reduce-scatter's transport): `parts[d]` goes to
  // rank d (parts.size() == size()); returns what every rank sent to this
  // one, concatenated in rank order; `sizes` (if given) receives each
  // source's byte count. Counted: bytes sent to and received from the other
  // ranks, plus the exchanged sizes.
  virtual std::vector<uint8_t> alltoallv(const std::vector<std::vector<uint8_t>>& parts,
                                         std::vector<size_t>* sizes = nullptr) = 0;
  // `bytes` bytes of rank `root`'s `data` into every rank's `data`.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // Ends the whole job, every rank, with `exit_code`; `reason` goes to stderr
  // prefixed with this rank's number. Never returns.
  [[noreturn]] virtual void abort(const std::string& reason, int exit_code) = 0;

  const CommunicationStats& stats() const { return stats_; }

 protected:
  CommunicationStats stats_;
};

// One rank, no MPI: collectives copy.
class SingleRankCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::vector<uint8_t> allgather(const void* data, size_t bytes, std::vector<size_t>* sizes) override;
  std::vector<uint8_t> alltoallv(const std::vector<std::vector<uint8_t>>& parts, std::vector<size_t>* sizes) override;
  void broadcast(void*, size_t, int) override {}
  [[noreturn]] void abort(const std::string& reason, int exit_code) override;
};

// True when this process was started by an MPI launcher (Open MPI's mpirun,
// or a PMI/PMIx launcher such as srun).
bool launched_by_mpi();

// The world of this process: MPI's when launched_by_mpi() (MPI_Init here,
// MPI_Finalize when the last reference goes), else a SingleRankCommunicator.
// Created once (by the CLI, before any command runs); later calls return it.
Communicator& world_communicator();

// Releases the world (MPI_Finalize) before exit; world_communicator() must not be used after.
void finalize_world_communicator();

// A string every rank of `comm` passes: throws Error(kInternal) naming the
// first rank whose value differs (a check that all ranks agree on a setting).
void check_same_on_all_ranks(Communicator& comm, const std::string& what, const std::string& value);

// The sorted union of every rank's values (one allgather): the same on every rank.
template <class T>
std::vector<T> sorted_union_of_ranks(Communicator& comm, const std::vector<T>& mine) {
  const std::vector<uint8_t> all = comm.allgather(mine.data(), mine.size() * sizeof(T));
  std::vector<T> values(all.size() / sizeof(T));
  if (!all.empty()) std::memcpy(values.data(), all.data(), all.size());
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

}  // namespace fgm
