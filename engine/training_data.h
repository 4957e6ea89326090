// Resolves `data.train` to an open ShardStore: a store directory is opened as
// it is; a LIBSVM file is ingested once into <cache_dir>/<input hash>-... and
// the cached store is reused while the input's bytes (and the parse options)
// are unchanged. A cached store that fails verification is rebuilt.
#pragma once

#include <memory>
#include <string>

#include "io/ingest.h"
#include "io/shard_store.h"

namespace fgm {

struct TrainingDataOptions {
  int index_base = 1;
  uint64_t declared_features = 0;
  std::string cache_dir = ".fgm-cache";
  uint64_t max_store_bytes = 0;  // store.max_bytes (0: no cap)
  uint32_t tile_rows = kDefaultTileRows;  // store.tile_rows
  uint64_t block_bytes = kDefaultBlockBytes;  // store.block_bytes
  int threads = 1;
  bool progress = false;
};

struct TrainingData {
  std::unique_ptr<ShardStore> store;
  bool ingested_now = false;   // false: opened an existing store (or cache hit)
  std::string store_dir;
  double ingest_seconds = 0;
};

bool is_store_directory(const std::string& path);

TrainingData open_training_data(const std::string& path, const TrainingDataOptions& options,
                                MemoryBudget& budget);

}  // namespace fgm
