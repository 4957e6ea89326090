// ingest_libsvm: LIBSVM text -> shard store (format 4, io/shard_store.h),
// out of core, within the MemoryBudget.
//
// Pass 1 parses the text in parallel, writes the label slots and spills
// (column, row, value) triplets sorted by column into run files; pass 2
// merges the runs column by column into the one store writer
// (io/store_writer.h), which cuts blocks and shards. Only non-empty columns
// are stored, so the store's size and ingest's time and memory depend on the
// nonzeros, not on the largest feature id (ids up to 2^63-1).
// Writes into a temporary directory beside the target and renames it into
// place: a failed or killed ingest leaves no store or a complete one. Holds
// `<out>.lock` (a second writer of the same output fails), refuses before
// writing when the estimated size exceeds IngestOptions::max_store_bytes or
// the target's free space, and removes `<out>.tmp-*` left by dead processes.
// The output is deterministic: the same input and options give byte-identical
// files whatever the thread count or budget.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/memory_budget.h"
#include "io/libsvm_reader.h"

namespace fgm {

// Default rows per tile: a tile's dual slice (8 bytes per row, 512 KiB) fits L2.
inline constexpr uint32_t kDefaultTileRows = 65536;
// Default target bytes of a stored column block: the fastest of 0.25, 1, 4
// and 16 MiB in a tiled linear scoring pass over the tall store (3·10^6 x
// 10^6, 20 nonzeros per row; bench/bench_block_size.cpp, bench/README.md "Stored
// block size"). Bigger blocks give each tile more nonzeros per load of its
// dual slice.
inline constexpr uint64_t kDefaultBlockBytes = 16 << 20;

struct IngestOptions {
  // Refuse (before writing shards) when the store would exceed this many bytes
  // (store.max_bytes, --max-store-bytes); 0: no fixed cap. The free space of
  // the target file system is always checked.
  uint64_t max_store_bytes = 0;
  ReaderOptions reader;
  uint64_t shard_target_bytes = 0;  // 0: automatic, min(64 MiB, budget / 8)
  int threads = 1;                  // parser threads (explicit, never implicit)
  bool progress = false;            // progress bar on stderr
  uint32_t merge_fan_in = 0;        // max runs merged at once; 0: as many as the budget allows
  // Rows per tile of every stored block (store.tile_rows, --tile-rows): the
  // scoring pass keeps the dual slice of one tile in L2 (8 bytes per row).
  uint32_t tile_rows = kDefaultTileRows;
  // Target bytes of a stored column block (store.block_bytes, --block-bytes);
  // 0: kDefaultBlockBytes. A column bigger than it is a block of its own.
  uint64_t block_bytes = 0;
  // hash_file(input) if the caller already has it (e.g. a cache key): saves
  // ingest a second read of the input.
  std::optional<uint64_t> input_checksum;
};

struct IngestStats {
  uint64_t n_rows = 0;
  uint64_t n_features = 0;
  uint64_t nnz = 0;
  uint64_t explicit_zeros = 0;
  uint64_t input_bytes = 0;       // on disk
  uint64_t text_bytes = 0;        // decompressed
  uint64_t spilled_runs = 0;      // sorted runs written to disk (0: all fit in the sort buffer)
  uint64_t shards = 0;
  uint64_t blocks = 0;            // stored column blocks
  uint64_t nonempty_columns = 0;  // columns with at least one nonzero
  double seconds = 0;
};

// Reads `input` and writes a store at `out_dir` (which must not exist yet, or is
// replaced if it is a store). Throws Error on bad input; leaves no partial output.
IngestStats ingest_libsvm(const std::string& input, const std::string& out_dir,
                          const IngestOptions& options, MemoryBudget& budget);

}  // namespace fgm
