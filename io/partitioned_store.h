// Partitioned stores (docs/distributed.md): the rows of one LIBSVM input
// split into P consecutive row partitions, each an ordinary store of its own
// (format 4, usable alone: fgm train/inspect open it as any store):
//
//   STORE/partitions.json   the partitioning: P, global rows, features, input,
//                           and each partition's first row and first input line
//   STORE/part-0000 ...     partition p: global rows [first_row[p], first_row[p+1])
//
// Partition p holds the rows floor(p·n/P) .. floor((p+1)·n/P) − 1 (blank and
// comment lines go with the rows before them). Every partition declares the
// input's whole feature width, so column ids agree across partitions. A run
// on K ranks (K divides P) gives each rank P/K consecutive partitions and
// opens only those: no rank ever reads another rank's rows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/memory_budget.h"
#include "io/ingest.h"

namespace fgm {

inline constexpr const char* kPartitionManifestName = "partitions.json";

struct PartitionManifest {
  uint32_t partitions = 0;
  uint64_t n_rows = 0;
  uint64_t n_features = 0;
  int index_base = 1;
  std::string input_path;
  uint64_t input_checksum = 0;     // XXH64 of the input file's bytes
  std::vector<uint64_t> first_row;   // P + 1 entries (the last is n_rows)
  std::vector<uint64_t> first_line;  // P entries: input line (1-based) of each partition's first line
  // P entries: each partition's store checksum (XXH64 of its manifest.fgm,
  // which holds its shards' and labels' checksums), binding the part to this
  // store; checked when a part is opened. Empty for stores ingested before
  // the binding (they still open; their parts are checked for shape only).
  std::vector<uint64_t> part_checksums;
};

// True if `dir` holds a partitions.json.
bool is_partitioned_store(const std::string& dir);
// <dir>/part-NNNN.
std::string partition_dir(const std::string& dir, uint32_t partition);
// Reads and checks <dir>/partitions.json (Error kCorruption naming the file
// and what is wrong).
PartitionManifest read_partition_manifest(const std::string& dir);
// The store checksum of partition `partition` as its files say now (XXH64 of
// its manifest.fgm: cheap, the parts' data checksums are inside it).
uint64_t partition_store_checksum(const std::string& dir, uint32_t partition);
// What identifies the store's data in a resume checkpoint: the input's
// checksum and every partition's current store checksum, so a part replaced
// after the checkpoint was written is a different run.
uint64_t partitioned_store_identity(const std::string& dir, const PartitionManifest& manifest);

struct PartitionedIngestStats {
  PartitionManifest manifest;
  std::vector<IngestStats> parts;
  double seconds = 0;
};

// `fgm ingest IN --out STORE --partitions P`: splits the decompressed text
// of `input` into P row ranges and ingests each into its partition store
// with `options` (tile rows, block bytes, declared width: the input's). Built
// in a temporary directory beside `out_dir` and renamed into place: a failed
// ingest leaves no store. An input error names the input line.
PartitionedIngestStats ingest_partitioned(const std::string& input, const std::string& out_dir, uint32_t partitions,
                                          const IngestOptions& options, MemoryBudget& budget);

}  // namespace fgm
