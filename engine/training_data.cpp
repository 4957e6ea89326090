#include "engine/training_data.h"

#include <chrono>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/hash.h"
#include "core/messages.h"
#include "io/store_files.h"

namespace fgm {

namespace {

// The cached store at `dir` if there is a valid one; a damaged one is logged
// (and rebuilt by the caller).
std::unique_ptr<ShardStore> open_cached(const std::string& dir, const std::string& input,
                                        MemoryBudget& budget) {
  if (!is_store_directory(dir)) return nullptr;
  try {
    auto store = ShardStore::open(dir, budget);
    spdlog::info("using cached store {} for {}", dir, input);
    return store;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kCorruption) throw;
    spdlog::warn("cached store {} is damaged ({}); ingesting again", dir, e.what());
    return nullptr;
  }
}

}  // namespace

bool is_store_directory(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) &&
         std::filesystem::exists(std::filesystem::path(path) / "manifest.fgm", ec);
}

TrainingData open_training_data(const std::string& path, const TrainingDataOptions& options,
                                MemoryBudget& budget) {
  TrainingData out;
  if (is_store_directory(path)) {
    out.store_dir = path;
    out.store = ShardStore::open(path, budget);
    return out;
  }
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw Error(ErrorKind::kIo, msg::cannot_open(path, "no such file or directory"));
  if (std::filesystem::is_directory(path, ec)) throw Error(ErrorKind::kIo, msg::no_manifest(path));
  uint64_t hash = hash_file(path);
  std::string key = fmt::format("{}-b{}-m{}", hex64(hash), options.index_base, options.declared_features);
  // The layout options change the store's bytes (not its data): own entries
  // only when they differ from the defaults.
  if (options.tile_rows != kDefaultTileRows || options.block_bytes != kDefaultBlockBytes)
    key += fmt::format("-t{}-k{}", options.tile_rows, options.block_bytes);
  std::string dir = (std::filesystem::path(options.cache_dir) / key).string();
  out.store_dir = dir;
  if (auto cached = open_cached(dir, path, budget)) {
    out.store = std::move(cached);
    return out;
  }
  std::filesystem::create_directories(options.cache_dir, ec);
  if (ec) throw Error(ErrorKind::kIo, msg::cannot_write(options.cache_dir, ec.message()));
  // One ingest per entry: a concurrent run with the same input waits here for
  // the first one's ingest and then uses its result instead of repeating it.
  store::FileLock entry_lock(dir + ".cache-lock", dir, /*wait=*/true);
  if (auto cached = open_cached(dir, path, budget)) {
    out.store = std::move(cached);
    return out;
  }
  // Temporaries of killed runs (their owner lock is free) only waste disk.
  int removed = store::remove_stale_temporaries(options.cache_dir, "");
  if (removed > 0)
    spdlog::info("removed {} temporary directories left in {} by interrupted runs", removed,
                 options.cache_dir);
  IngestOptions ingest;
  ingest.reader.index_base = options.index_base;
  ingest.reader.declared_features = options.declared_features;
  ingest.threads = options.threads;
  ingest.progress = options.progress;
  ingest.input_checksum = hash;  // already computed for the cache key: no second read
  ingest.max_store_bytes = options.max_store_bytes;
  ingest.tile_rows = options.tile_rows;
  ingest.block_bytes = options.block_bytes;
  auto start = std::chrono::steady_clock::now();
  IngestStats stats = ingest_libsvm(path, dir, ingest, budget);
  out.ingest_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("ingested {}: {} rows, {} features, {} nonzeros in {:.2f}s -> {}", path, stats.n_rows,
               stats.n_features, stats.nnz, out.ingest_seconds, dir);
  out.ingested_now = true;
  out.store = ShardStore::open(dir, budget);
  return out;
}

}  // namespace fgm
