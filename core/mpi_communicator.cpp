// The one file that calls MPI (core/communicator.h). Errors of MPI calls are
// fatal (MPI_ERRORS_ARE_FATAL, the default): a rank that dies or fails ends
// the job through the launcher instead of leaving the others waiting.
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <numeric>

#include "core/communicator.h"
#include "core/error.h"

namespace fgm {
namespace {

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) MPI_Init(nullptr, nullptr);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::vector<uint8_t> allgather(const void* data, size_t bytes, std::vector<size_t>* sizes) override {
    const auto start = std::chrono::steady_clock::now();
    if (bytes > static_cast<size_t>(INT_MAX))
      throw Error(ErrorKind::kInternal, "one rank's part of an allgather exceeds 2 GiB (" + std::to_string(bytes) +
                                            " bytes): use more ranks");
    const int mine = static_cast<int>(bytes);
    std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
    MPI_Allgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
    uint64_t total = 0;
    for (int r = 0; r < size_; ++r) {
      if (total > static_cast<uint64_t>(INT_MAX))
        throw Error(ErrorKind::kInternal, "an allgather exceeds 2 GiB in all");
      displs[static_cast<size_t>(r)] = static_cast<int>(total);
      total += static_cast<uint64_t>(counts[static_cast<size_t>(r)]);
    }
    std::vector<uint8_t> out(total);
    MPI_Allgatherv(data, mine, MPI_BYTE, out.data(), counts.data(), displs.data(), MPI_BYTE, MPI_COMM_WORLD);
    if (sizes) sizes->assign(counts.begin(), counts.end());
    count(bytes + (total - bytes) + sizeof(int) * static_cast<uint64_t>(size_), start);
    return out;
  }

  std::vector<uint8_t> alltoallv(const std::vector<std::vector<uint8_t>>& parts, std::vector<size_t>* sizes) override {
    const auto start = std::chrono::steady_clock::now();
    const auto K = static_cast<size_t>(size_);
    if (parts.size() != K) throw Error(ErrorKind::kInternal, "alltoallv: one part per rank");
    std::vector<int> send_counts(K), send_displs(K), recv_counts(K), recv_displs(K);
    std::vector<uint8_t> send;
    for (size_t d = 0; d < K; ++d) {
      if (parts[d].size() > static_cast<size_t>(INT_MAX) || send.size() > static_cast<size_t>(INT_MAX))
        throw Error(ErrorKind::kInternal, "a rank's part of an alltoallv exceeds 2 GiB: use more ranks");
      send_displs[d] = static_cast<int>(send.size());
      send_counts[d] = static_cast<int>(parts[d].size());
      send.insert(send.end(), parts[d].begin(), parts[d].end());
    }
    MPI_Alltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
    uint64_t total = 0, exchanged = 0;
    for (size_t s = 0; s < K; ++s) {
      if (total > static_cast<uint64_t>(INT_MAX)) throw Error(ErrorKind::kInternal, "an alltoallv exceeds 2 GiB");
      recv_displs[s] = static_cast<int>(total);
      total += static_cast<uint64_t>(recv_counts[s]);
      if (s != static_cast<size_t>(rank_))
        exchanged += static_cast<uint64_t>(recv_counts[s]) + static_cast<uint64_t>(send_counts[s]);
    }
    std::vector<uint8_t> out(total);
    MPI_Alltoallv(send.data(), send_counts.data(), send_displs.data(), MPI_BYTE, out.data(), recv_counts.data(),
                  recv_displs.data(), MPI_BYTE, MPI_COMM_WORLD);
    if (sizes) sizes->assign(recv_counts.begin(), recv_counts.end());
    count(exchanged + sizeof(int) * static_cast<uint64_t>(size_), start);
    return out;
  }

  void broadcast(void* data, size_t bytes, int root) override {
    const auto start = std::chrono::steady_clock::now();
    if (bytes > static_cast<size_t>(INT_MAX)) throw Error(ErrorKind::kInternal, "a broadcast exceeds 2 GiB");
    MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD);
    count(bytes, start);
  }

  [[noreturn]] void abort(const std::string& reason, int exit_code) override {
    std::fprintf(stderr, "fgm: rank %d of %d: %s\n", rank_, size_, reason.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
  }

 private:
  void count(uint64_t bytes, std::chrono::steady_clock::time_point start) {
    stats_.bytes += bytes;
    stats_.calls += 1;
    stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() { return std::make_unique<MpiCommunicator>(); }

}  // namespace fgm
