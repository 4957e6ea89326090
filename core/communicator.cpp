#include "core/communicator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace fgm {

std::vector<uint8_t> SingleRankCommunicator::allgather(const void* data, size_t bytes, std::vector<size_t>* sizes) {
  if (sizes) *sizes = {bytes};
  const auto* p = static_cast<const uint8_t*>(data);
  return std::vector<uint8_t>(p, p + bytes);
}

std::vector<uint8_t> SingleRankCommunicator::alltoallv(const std::vector<std::vector<uint8_t>>& parts,
                                                       std::vector<size_t>* sizes) {
  if (parts.size() != 1) throw Error(ErrorKind::kInternal, "alltoallv: one part per rank");
  if (sizes) *sizes = {parts[0].size()};
  return parts[0];
}

void SingleRankCommunicator::abort(const std::string& reason, int exit_code) {
  std::fprintf(stderr, "fgm: %s\n", reason.c_str());
  std::exit(exit_code);
}

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(name)) return true;
  return false;
}

std::unique_ptr<Communicator> make_mpi_communicator();  // core/mpi_communicator.cpp

namespace {
std::unique_ptr<Communicator>& world_slot() {
  static std::unique_ptr<Communicator> world;
  return world;
}
}  // namespace

Communicator& world_communicator() {
  auto& world = world_slot();
  if (!world) world = launched_by_mpi() ? make_mpi_communicator() : std::make_unique<SingleRankCommunicator>();
  return *world;
}

void finalize_world_communicator() { world_slot().reset(); }

void check_same_on_all_ranks(Communicator& comm, const std::string& what, const std::string& value) {
  if (comm.size() == 1) return;
  std::vector<size_t> sizes;
  const std::vector<uint8_t> all = comm.allgather(value.data(), value.size(), &sizes);
  size_t at = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    const std::string theirs(reinterpret_cast<const char*>(all.data()) + at, sizes[r]);
    at += sizes[r];
    if (theirs == value) continue;
    size_t first = 0;  // where they first differ, shown with some context
    while (first < theirs.size() && first < value.size() && theirs[first] == value[first]) ++first;
    auto around = [&](const std::string& s) { return s.substr(first > 40 ? first - 40 : 0, 80); };
    throw Error(ErrorKind::kConfig, "rank " + std::to_string(r) + " has a different " + what + " (\"" +
                                        around(theirs) + "\") than rank " + std::to_string(comm.rank()) + " (\"" +
                                        around(value) + "\"): every rank must run the same command on the same files");
  }
}

}  // namespace fgm
