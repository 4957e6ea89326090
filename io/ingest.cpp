// ingest_libsvm: LIBSVM text -> column-block shard store, out of core.
//
// Pass 1 (oneTBB pipeline): serial chunk reader -> parallel parser -> serial
// consumer. The consumer writes one label slot per row to labels.tmp and
// appends (column, row, value) triplets to a budgeted buffer; a full buffer is
// sorted by column (stable radix sort: rows arrive in order, so this is a
// (column, row) sort) and spilled as a run file of column groups.
// Pass 2: runs hold consecutive row ranges, so a column's entries are the
// concatenation of its groups in run order: the k-way merge only orders
// columns (a heap of run heads), never individual entries. Too many runs for
// the budget are first merged in consecutive groups (multi-level merge).
// Merged columns stream into shards; then the manifest is written and the
// temporary directory is renamed into place.
#include <fmt/format.h>
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <limits>
#include <mutex>
#include <queue>
#include <vector>

#include "core/error.h"
#include "core/hash.h"
#include "core/interrupt.h"
#include "core/loop_rendezvous.h"
#include "core/messages.h"
#include "io/schema/manifest_generated.h"
#include "io/schema/shard_generated.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "io/store_files.h"
#include "io/store_format.h"
#include "io/store_writer.h"

namespace fs = std::filesystem;

namespace fgm {
namespace {

using store::align_up;
using store::ColumnSink;
using store::FileReader;
using store::FileWriter;
using store::ManifestFields;
using store::ShardEntryInfo;
using store::TempDir;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * 1024;
constexpr uint64_t kMinRunBuffer = 32 * kKiB;
constexpr const char* kRemedy = "lower --threads";

// ------------------------------------------------------------------ progress

class IngestProgress {
 public:
  IngestProgress(bool wanted, uint64_t total) : enabled_(wanted && ::isatty(2)), total_(total) {}
  void update(uint64_t done) {
    if (!enabled_) return;
    auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(250)) return;
    last_ = now;
    double secs = std::chrono::duration<double>(now - start_).count();
    double pct = total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 0;
    fmt::print(stderr, "\ringest: reading {:5.1f}% ({} of {}, {:.0f} MB/s)   ", pct,
               format_bytes(done), format_bytes(total_),
               secs > 0 ? static_cast<double>(done) / 1e6 / secs : 0.0);
    std::fflush(stderr);
  }
  void phase(const std::string& text) {
    if (!enabled_) return;
    fmt::print(stderr, "\ringest: {:<60}", text);
    std::fflush(stderr);
  }
  void finish() {
    if (enabled_) fmt::print(stderr, "\n");
    enabled_ = false;
  }
  ~IngestProgress() { finish(); }

 private:
  bool enabled_;
  uint64_t total_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_{};
};

// ------------------------------------------------------------------ run files
// A run file is a sequence of column groups in increasing column order:
//   uint64 column, uint64 count, uint32 rows[count], float values[count].

struct Triplet {
  uint64_t column;
  uint32_t row;
  float value;
};

// Fills one buffer while the previous one is sorted and written by a task in
// the ingest arena, so a spill does not stall the pipeline (a synchronous
// spill idles every parser once the tokens run out). One spill at a time:
// the radix scratch is shared.
class RunSpiller {
 public:
  // `capacity`: the most triplets a buffer may hold (the budget's share). The
  // buffers grow by need up to it, so a small input never takes what a large
  // budget would allow: a budget is a cap, not a request.
  RunSpiller(const TempDir& dir, MemoryBudget& budget, uint64_t capacity, uint64_t writer_bytes)
      : dir_(dir),
        budget_(budget),
        capacity_(capacity),
        buffer_(budget, std::min(capacity, kFirstTriplets), kPurpose),
        writer_bytes_(writer_bytes) {}
  ~RunSpiller() { abandon(); }

  void add(uint64_t column, uint32_t row, float value) {
    if (size_ == buffer_.size()) {
      if (buffer_.size() < capacity_) grow();
      else hand_off();
    }
    buffer_[size_++] = Triplet{column, row, value};
    max_column_ = std::max(max_column_, column);
  }

  // Spills what is left and frees the sort buffers; returns the run paths in
  // row order. Call inside the arena.
  std::vector<std::string> finish() {
    wait_pending();
    if (size_ > 0) {
      runs_.push_back(next_path());
      write_run(buffer_.data(), size_, max_column_, runs_.back());
    }
    buffer_ = {};
    spilling_ = {};
    scratch_ = {};
    return std::move(runs_);
  }

  // When nothing was spilled: sorts the buffer and keeps it, so the final
  // merge reads it from memory (no run file written and read back). Call
  // inside the arena. Returns false (and does nothing) if runs exist.
  bool finish_in_memory() {
    wait_pending();
    if (!runs_.empty()) return false;
    if (sort(buffer_.data(), size_, max_column_) != buffer_.data()) std::swap(buffer_, scratch_);
    spilling_ = {};
    scratch_ = {};
    return true;
  }
  const Triplet* sorted() const { return buffer_.data(); }
  uint64_t sorted_size() const { return size_; }
  void release() { buffer_ = {}; }

  // Waits for a spill in flight, ignoring its errors (we are unwinding one
  // already). Call inside the arena: with one thread, only we can run it.
  void abandon() noexcept {
    if (!pending_) return;
    pending_ = false;
    try {
      tasks_.wait();
    } catch (...) {
    }
  }

 private:
  std::string next_path() const { return dir_.file(fmt::format("run-{:06d}.tmp", runs_.size())); }

  void wait_pending() {
    if (!pending_) return;
    pending_ = false;
    tasks_.wait();  // rethrows a failed spill (e.g. disk full)
  }

  // Doubles the filling buffer (at most to capacity_), keeping its triplets.
  void grow() {
    BudgetedArray<Triplet> bigger(budget_, std::min(capacity_, 2 * buffer_.size()), kPurpose);
    std::memcpy(bigger.data(), buffer_.data(), size_ * sizeof(Triplet));
    buffer_ = std::move(bigger);
  }

  // Called with buffer_ full at capacity_: it is written while a second
  // buffer of the same size fills (allocated at the first hand-off).
  void hand_off() {
    wait_pending();
    if (spilling_.size() < buffer_.size()) {
      spilling_ = {};
      spilling_ = BudgetedArray<Triplet>(budget_, buffer_.size(), kPurpose);
    }
    std::swap(buffer_, spilling_);
    runs_.push_back(next_path());
    pending_ = true;
    tasks_.run([this, n = size_, max_column = max_column_, path = runs_.back()] {
      write_run(spilling_.data(), n, max_column, path);
    });
    size_ = 0;
    max_column_ = 0;
  }

  // Stable LSD radix sort by column, 11 bits per pass, only over the bits in use.
  const Triplet* sort(Triplet* data, uint64_t n, uint64_t max_column) {
    if (scratch_.size() < n) {  // by need: the largest run sorted so far
      scratch_ = {};
      scratch_ = BudgetedArray<Triplet>(budget_, n, kPurpose);
    }
    Triplet* src = data;
    Triplet* dst = scratch_.data();
    int bits = max_column == 0 ? 0 : 64 - __builtin_clzll(max_column);
    constexpr int kDigit = 11;
    constexpr uint64_t kMask = (1u << kDigit) - 1;
    std::vector<uint64_t> counts(1u << kDigit);
    for (int shift = 0; shift < bits; shift += kDigit) {
      std::fill(counts.begin(), counts.end(), 0);
      for (uint64_t i = 0; i < n; ++i) ++counts[(src[i].column >> shift) & kMask];
      uint64_t sum = 0;
      for (auto& c : counts) {
        uint64_t k = c;
        c = sum;
        sum += k;
      }
      for (uint64_t i = 0; i < n; ++i) dst[counts[(src[i].column >> shift) & kMask]++] = src[i];
      std::swap(src, dst);
    }
    return src;
  }

  void write_run(Triplet* data, uint64_t n, uint64_t max_column, const std::string& path) {
    const Triplet* t = sort(data, n, max_column);
    FileWriter out(path, budget_, writer_bytes_, "ingest run writer");
    for (uint64_t i = 0; i < n;) {
      uint64_t j = i;
      while (j < n && t[j].column == t[i].column) ++j;
      out.put<uint64_t>(t[i].column);
      out.put<uint64_t>(j - i);
      for (uint64_t k = i; k < j; ++k) out.put<uint32_t>(t[k].row);
      for (uint64_t k = i; k < j; ++k) out.put<float>(t[k].value);
      i = j;
    }
    out.close(false);  // temporary: no fsync
  }

  static constexpr uint64_t kFirstTriplets = uint64_t{1} << 16;  // 1 MiB
  static constexpr const char* kPurpose = "ingest sort buffer";
  const TempDir& dir_;
  MemoryBudget& budget_;
  uint64_t capacity_;
  BudgetedArray<Triplet> buffer_, spilling_, scratch_;
  uint64_t writer_bytes_;
  uint64_t size_ = 0;
  uint64_t max_column_ = 0;
  std::vector<std::string> runs_;
  tbb::task_group tasks_;
  bool pending_ = false;
};

class RunReader {
 public:
  RunReader(const std::string& path, MemoryBudget& budget, uint64_t buffer_bytes)
      : in_(path, budget, buffer_bytes, "ingest merge buffers") {}

  // Reads the next group header; false at the end of the run.
  bool next_group() {
    if (in_.refill(16) == 0) return false;
    if (in_.available() < 16) broken();
    std::memcpy(&column_, in_.data(), 8);
    std::memcpy(&count_, in_.data() + 8, 8);
    in_.consume(16);
    return true;
  }
  uint64_t column() const { return column_; }
  uint64_t count() const { return count_; }
  void copy_rows(ColumnSink& sink) { copy(sink, true); }
  void copy_values(ColumnSink& sink) { copy(sink, false); }
  const std::string& path() const { return in_.path(); }

 private:
  void copy(ColumnSink& sink, bool rows) {
    uint64_t left = count_;
    while (left > 0) {
      if (in_.available() < 4 && in_.refill(4 * left) < 4) broken();
      uint64_t n = std::min(left, in_.available() / 4);
      if (rows)
        sink.rows(in_.data(), n);
      else
        sink.values(in_.data(), n);
      in_.consume(4 * n);
      left -= n;
    }
  }
  [[noreturn]] void broken() {
    throw Error(ErrorKind::kIo, msg::read_failed(in_.path(), "temporary run file ends early"));
  }

  FileReader in_;
  uint64_t column_ = 0, count_ = 0;
};

// Merges runs (consecutive row ranges, in row order) column by column:
// on_column(column, nnz, fill) where fill(sink) streams the column's entries.
template <class OnColumn>
void merge_runs(std::vector<std::unique_ptr<RunReader>>& runs, OnColumn&& on_column) {
  using Head = std::pair<uint64_t, uint32_t>;  // (column, run): ties pop in run order
  std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heap;
  for (uint32_t i = 0; i < runs.size(); ++i)
    if (runs[i]->next_group()) heap.emplace(runs[i]->column(), i);
  std::vector<uint32_t> group;
  while (!heap.empty()) {
    uint64_t column = heap.top().first;
    group.clear();
    uint64_t nnz = 0;
    while (!heap.empty() && heap.top().first == column) {
      group.push_back(heap.top().second);
      nnz += runs[heap.top().second]->count();
      heap.pop();
    }
    on_column(column, nnz, [&](ColumnSink& sink) {
      for (uint32_t r : group) runs[r]->copy_rows(sink);
      for (uint32_t r : group) runs[r]->copy_values(sink);
    });
    for (uint32_t r : group)
      if (runs[r]->next_group()) heap.emplace(runs[r]->column(), r);
  }
}

// The single-run case of merge_runs, from the sorted triplets in memory.
template <class OnColumn>
void merge_sorted(const Triplet* t, uint64_t n, OnColumn&& on_column) {
  constexpr uint64_t kBatch = 2048;
  uint32_t gathered[kBatch];
  for (uint64_t i = 0; i < n;) {
    uint64_t j = i;
    while (j < n && t[j].column == t[i].column) ++j;
    on_column(t[i].column, j - i, [&](ColumnSink& sink) {
      for (uint64_t b = i; b < j; b += kBatch) {
        uint64_t m = std::min(kBatch, j - b);
        for (uint64_t k = 0; k < m; ++k) gathered[k] = t[b + k].row;
        sink.rows(reinterpret_cast<const uint8_t*>(gathered), m);
      }
      for (uint64_t b = i; b < j; b += kBatch) {
        uint64_t m = std::min(kBatch, j - b);
        for (uint64_t k = 0; k < m; ++k) std::memcpy(&gathered[k], &t[b + k].value, 4);
        sink.values(reinterpret_cast<const uint8_t*>(gathered), m);
      }
    });
    i = j;
  }
}

class RunWriterSink final : public ColumnSink {
 public:
  explicit RunWriterSink(FileWriter& out) : out_(out) {}
  void rows(const uint8_t* data, uint64_t n) override { out_.write(data, 4 * n); }
  void values(const uint8_t* data, uint64_t n) override { out_.write(data, 4 * n); }

 private:
  FileWriter& out_;
};

// ------------------------------------------------------------------ manifest

// Streams the label slots (labels.tmp: uint16 per row, first-appearance
// order) back as ±1 labels and class indices, out(signs, classes, n); each
// call reads the file once.
template <class Out>
void map_labels(const std::string& slots_path, const LabelMap& labels, MemoryBudget& budget,
                uint64_t buffer_bytes, Out&& out) {
  FileReader in(slots_path, budget, buffer_bytes, "ingest label buffer");
  std::vector<int8_t> sign_of(labels.classes());
  std::vector<uint16_t> class_of(labels.classes());
  for (int slot = 0; slot < labels.classes(); ++slot) {
    sign_of[slot] = labels.sign_of_slot(slot);
    class_of[slot] = static_cast<uint16_t>(labels.class_of_slot(slot));
  }
  constexpr uint64_t kRows = 4096;
  int8_t signs[kRows];
  uint16_t classes[kRows];
  while (in.refill(2 * kRows) > 0) {
    if (in.available() % 2 != 0)
      throw Error(ErrorKind::kIo, msg::read_failed(slots_path, "temporary label file ends early"));
    uint64_t n = std::min<uint64_t>(in.available() / 2, kRows);
    for (uint64_t i = 0; i < n; ++i) {
      uint16_t slot;
      std::memcpy(&slot, in.data() + 2 * i, 2);
      FGM_ASSERT(slot < sign_of.size());
      signs[i] = sign_of[slot];
      classes[i] = class_of[slot];
    }
    in.consume(2 * n);
    out(signs, classes, n);
  }
}

std::string normalized_dir(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

struct Token {
  TextChunk chunk;
  ParsedChunk parsed;
  Reservation text_reservation, parsed_reservation;
  std::exception_ptr error;  // reader/parser failure, rethrown in file order
};

uint64_t parsed_bytes(const ParsedChunk& p) {
  return p.labels.capacity() * sizeof(double) + p.label_columns.capacity() * sizeof(uint32_t) +
         p.lines.capacity() * sizeof(uint64_t) + p.row_ptr.capacity() * sizeof(uint64_t) +
         p.indices.capacity() * sizeof(uint64_t) + p.values.capacity() * sizeof(float) +
         p.error.capacity();
}

// Tokens in flight are owned here, so a cancelled pipeline frees them (and
// their budget reservations) when ingest unwinds.
class TokenPool {
 public:
  explicit TokenPool(MemoryBudget& budget) : budget_(budget) {}
  Token* take() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) {
      all_.push_back(std::make_unique<Token>());
      all_.back()->text_reservation = budget_.reserve(0, "ingest text chunks", kRemedy);
      all_.back()->parsed_reservation = budget_.reserve(0, "ingest parsed chunks", kRemedy);
      return all_.back().get();
    }
    Token* t = free_.back();
    free_.pop_back();
    return t;
  }
  // Buffers keep their capacity (and its reservation): fresh ones for every
  // chunk cost page faults and page clearing, measured at ~15% of ingest.
  void give_back(Token* t) {
    t->error = nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(t);
  }

 private:
  MemoryBudget& budget_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Token>> all_;
  std::vector<Token*> free_;
};

// Bytes of the store ingest would write, an upper bound that depends on the
// nonzeros only (empty columns are not stored): per nonzero 8 bytes (row id,
// value), at most one listed column (16 bytes) and one cell (8 bytes); per
// stored block its tile directory (4 bytes per tile) and alignment; per shard
// header and tables; and the manifest. Saturates instead of wrapping.
uint64_t estimate_store_bytes(uint64_t n_rows, uint64_t nnz, uint64_t tile_rows,
                              uint64_t block_target, uint64_t shard_target) {
  using Wide = unsigned __int128;
  const Wide data = Wide{32} * nnz;
  const Wide tiles = store::tile_count_of(n_rows, tile_rows);
  const Wide blocks = data / std::max<uint64_t>(block_target, 1) + data / std::max<uint64_t>(shard_target, 1) + 1;
  const Wide shards = data / std::max<uint64_t>(shard_target, 1) + 1;
  const Wide per_block = 4 * (tiles + 1) + 9 * store::kAlign + sizeof(store::BlockEntry);
  const Wide per_shard = 1024 + 3 * store::kAlign + 8;  // header, padding, table rounding
  const Wide manifest = 4096 + Wide{3} * n_rows + 3 * store::kAlign + shards * 200;
  const Wide stored = data + blocks * per_block;
  const Wide total = stored + stored / store::kMinPieceBytes * 8 + shards * per_shard + manifest;
  return total > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(total);
}

// Refuses before anything big is written: the store must fit under
// `max_bytes` (0: no cap) and in the free space of the target file system.
void check_store_size(const std::string& out_dir, const std::string& on_fs, uint64_t estimate,
                      uint64_t n_features, uint64_t nnz, uint64_t max_bytes, bool declared) {
  (void)declared;
  const std::string remedy =
      "The size depends on the nonzeros only (empty columns are not stored): free space on the "
      "target or choose another output directory.";
  if (max_bytes > 0 && estimate > max_bytes)
    throw Error(ErrorKind::kInvalidInput,
                msg::store_too_big(out_dir, estimate, n_features, nnz,
                                   "store.max_bytes / --max-store-bytes", max_bytes,
                                   remedy + " Raise store.max_bytes (--max-store-bytes) if the "
                                            "size is intended."));
  const uint64_t free_bytes = store::free_bytes_at(on_fs);
  if (estimate > free_bytes)
    throw Error(ErrorKind::kIo, msg::store_too_big(out_dir, estimate, n_features, nnz,
                                                   "the free space of its file system",
                                                   free_bytes, remedy));
}

}  // namespace

IngestStats ingest_libsvm(const std::string& input, const std::string& out_dir_arg,
                          const IngestOptions& options, MemoryBudget& budget) {
  auto started = std::chrono::steady_clock::now();
  auto lap = [last = started]() mutable {
    auto now = std::chrono::steady_clock::now();
    double s = std::chrono::duration<double>(now - last).count();
    last = now;
    return s;
  };
  if (options.threads < 1)
    throw Error(ErrorKind::kConfig,
                msg::out_of_range("ingest", "threads", std::to_string(options.threads), ">= 1"));
  const std::string out_dir = normalized_dir(out_dir_arg);
  store::check_output_dir(out_dir);  // fail before the expensive part
  // The checksum first: it refuses a pipe or device (read twice, the second
  // read would block or find nothing) before any of it is consumed.
  const uint64_t input_checksum = options.input_checksum ? *options.input_checksum : hash_file(input);
  // One writer per output: a second ingest into the same directory fails
  // instead of silently replacing the first one's result.
  store::FileLock out_lock(out_dir + ".lock", out_dir, /*wait=*/false);
  {
    fs::path target(out_dir);
    std::string parent = target.parent_path().string();
    int removed = store::remove_stale_temporaries(parent.empty() ? "." : parent,
                                                  target.filename().string());
    if (removed > 0)
      spdlog::info("removed {} temporary directories left by interrupted ingests of {}", removed,
                   out_dir);
  }

  // Budget plan. Pass 1: half for the sort buffers (filling, spilling, radix
  // scratch), the rest for chunks in flight and file buffers. Pass 2: shard
  // buffer, file buffers, and what is left for the merge's per-run buffers.
  const uint64_t avail = budget.available();
  const uint64_t io_bytes = std::clamp<uint64_t>(avail / 32 / 4096 * 4096, 16 * kKiB, 4 * kMiB);
  const uint64_t label_buffer = std::min<uint64_t>(io_bytes, 64 * kKiB);
  const uint64_t triplet_capacity = std::max<uint64_t>(avail / 2 / (3 * sizeof(Triplet)), 1024);
  const int tokens = 2 * options.threads + 1;
  const uint64_t pipeline_share =
      avail > avail / 2 + io_bytes + label_buffer ? avail - avail / 2 - io_bytes - label_buffer : 0;
  // A parsed chunk takes about as many bytes as its text, and a token keeps
  // both; leave room for growth slack on top.
  // A small file still gets a few chunks per thread, so it is parsed in
  // parallel (chunking does not change the output).
  std::error_code size_error;
  const uint64_t file_bytes = fs::file_size(input, size_error);
  const uint64_t small_file_chunk =
      !size_error && file_bytes > 0
          ? std::max<uint64_t>(file_bytes / (4 * options.threads), 64 * kKiB)
          : options.reader.chunk_bytes;
  const uint64_t chunk_bytes = std::clamp<uint64_t>(
      std::min({options.reader.chunk_bytes, pipeline_share / (4 * tokens), small_file_chunk}),
      4 * kKiB, std::max<uint64_t>(options.reader.chunk_bytes, 4 * kKiB));
  const uint64_t shard_target = options.shard_target_bytes
                                    ? options.shard_target_bytes
                                    : std::max<uint64_t>(std::min(64 * kMiB, avail / 8), 4 * kKiB);

  if (options.tile_rows == 0)
    throw Error(ErrorKind::kConfig, msg::out_of_range("ingest", "tile_rows", "0", ">= 1"));
  const uint64_t block_target = options.block_bytes ? options.block_bytes : kDefaultBlockBytes;

  IngestStats stats;
  // The source keeps a chunk-sized carry buffer of its own.
  Reservation reader_buffer = budget.reserve(chunk_bytes, "ingest text chunks", kRemedy);
  auto source = std::make_unique<LibsvmChunkSource>(
      input, chunk_bytes,
      options.reader.max_line_bytes ? options.reader.max_line_bytes : max_line_bytes_for(budget.limit()),
      budget.limit_key());
  const std::string path = source->path();
  stats.input_bytes = source->file_bytes();
  TempDir tmp(out_dir);
  IngestProgress progress(options.progress, stats.input_bytes);

  // ---- pass 1: parse, spill sorted runs, write label slots
  LabelMap labels(kMaxClasses);
  uint64_t n_rows = 0, nnz = 0, width = 0, explicit_zeros = 0;
  std::vector<std::string> runs;
  const std::string slots_path = tmp.file("labels.tmp");
  RunSpiller spiller(tmp, budget, triplet_capacity, io_bytes);
  bool in_memory = false;  // one buffer held everything: no run files
  {
    FileWriter slots(slots_path, budget, label_buffer, "ingest label buffer");
    TokenPool pool(budget);
    bool source_failed = false;
    // Stage 1 (serial, in order): the next text chunk. A read error travels in
    // the token so that an earlier chunk's bad line is still reported first.
    auto read_chunk = [&](tbb::flow_control& fc) -> Token* {
      if (source_failed) {
        fc.stop();
        return nullptr;
      }
      Token* t = pool.take();
      try {
        if (!source->next(t->chunk)) {
          pool.give_back(t);
          fc.stop();
          return nullptr;
        }
        t->text_reservation.resize(t->chunk.text.capacity());
      } catch (...) {
        t->error = std::current_exception();
        source_failed = true;
      }
      stats.text_bytes += t->chunk.text.size();
      progress.update(source->compressed_bytes_read());
      return t;
    };
    // Stage 2 (parallel): parse. Test binaries: the first chunk waits for a
    // second thread (core/loop_rendezvous.h).
    LoopRendezvous rendezvous(options.threads > 1);
    auto parse_chunk = [&](Token* t) -> Token* {
      rendezvous.arrive();
      if (t->error) return t;
      try {
        parse_libsvm_chunk(t->chunk, path, options.reader, t->parsed);
        t->parsed_reservation.resize(parsed_bytes(t->parsed));
      } catch (...) {
        t->error = std::current_exception();
      }
      return t;
    };
    // Stage 3 (serial, in order): labels, row ids, triplets.
    auto consume_chunk = [&](Token* t) {
      struct GiveBack {
        TokenPool& pool;
        Token* t;
        ~GiveBack() { pool.give_back(t); }
      } give_back{pool, t};
      if (t->error) std::rethrow_exception(t->error);
      check_interrupt();
      const ParsedChunk& p = t->parsed;
      if (!p.error.empty()) throw Error(ErrorKind::kInvalidInput, p.error);
      for (size_t r = 0; r < p.rows(); ++r) {
        if (n_rows == std::numeric_limits<uint32_t>::max())
          throw Error(ErrorKind::kInvalidInput, msg::too_many_rows(path, p.lines[r]));
        int slot = labels.observe(p.labels[r], path, p.lines[r], p.label_columns[r]);
        slots.put<uint16_t>(static_cast<uint16_t>(slot));
        auto row = static_cast<uint32_t>(n_rows);
        for (uint64_t j = p.row_ptr[r]; j < p.row_ptr[r + 1]; ++j)
          spiller.add(p.indices[j], row, p.values[j]);
        ++n_rows;
      }
      nnz += p.indices.size();
      explicit_zeros += p.explicit_zeros;
      width = std::max(width, p.max_index_plus_one);
    };
    tbb::task_arena arena(options.threads);
    arena.execute([&] {
      try {
        tbb::parallel_pipeline(
            static_cast<size_t>(tokens),
            tbb::make_filter<void, Token*>(tbb::filter_mode::serial_in_order, read_chunk) &
                tbb::make_filter<Token*, Token*>(tbb::filter_mode::parallel, parse_chunk) &
                tbb::make_filter<Token*, void>(tbb::filter_mode::serial_in_order, consume_chunk));
        in_memory = spiller.finish_in_memory();
        if (!in_memory) runs = spiller.finish();
      } catch (...) {
        spiller.abandon();  // inside the arena: with one thread only we can run the spill
        throw;
      }
    });
    slots.close(false);
  }
  source.reset();
  reader_buffer.release();
  if (n_rows == 0) throw Error(ErrorKind::kInvalidInput, msg::empty_input(path));
  if (labels.classes() < 2)
    throw Error(ErrorKind::kInvalidInput, msg::single_label(path, label_text(labels.first())));
  stats.n_rows = n_rows;
  stats.nnz = nnz;
  stats.explicit_zeros = explicit_zeros;
  stats.spilled_runs = runs.size();
  spdlog::debug(
      "ingest {}: parsed {} rows, {} nonzeros into {} sorted runs in {:.2f}s "
      "(chunks of {}, sort buffer {} entries, shard target {})",
      input, n_rows, nnz, runs.size(), lap(), format_bytes(chunk_bytes), triplet_capacity,
      format_bytes(shard_target));
  const uint64_t n_features =
      options.reader.declared_features ? options.reader.declared_features : width;
  stats.n_features = n_features;
  // The sorted runs are on disk already (free space counts them); the store
  // comes on top while they are merged.
  check_store_size(out_dir, tmp.path(),
                   estimate_store_bytes(n_rows, nnz, options.tile_rows, block_target, shard_target),
                   n_features, nnz, options.max_store_bytes, options.reader.declared_features > 0);

  // ---- pass 2a: merge runs in consecutive groups until few enough remain
  auto fan_in_for = [&](uint64_t fixed) -> uint64_t {
    uint64_t free_bytes = budget.available();
    uint64_t for_runs = free_bytes > fixed ? (free_bytes - fixed) / 10 * 9 : 0;
    uint64_t fan_in = for_runs / kMinRunBuffer;
    if (options.merge_fan_in > 0) fan_in = std::min<uint64_t>(fan_in, options.merge_fan_in);
    if (fan_in < 2 && for_runs < 2 * kMinRunBuffer) {
      // Throws the budget's out-of-memory error, which names what holds memory.
      budget.reserve(fixed + 2 * kMinRunBuffer, "ingest merge buffers");
    }
    return std::max<uint64_t>(fan_in, 2);
  };
  auto open_runs = [&](const std::vector<std::string>& paths, uint64_t fixed) {
    uint64_t free_bytes = budget.available();
    uint64_t for_runs = free_bytes > fixed ? (free_bytes - fixed) / 10 * 9 : 0;
    uint64_t each = std::clamp<uint64_t>(for_runs / std::max<size_t>(paths.size(), 1) / 4096 * 4096,
                                         kMinRunBuffer, 8 * kMiB);
    std::vector<std::unique_ptr<RunReader>> readers;
    for (const auto& p : paths) readers.push_back(std::make_unique<RunReader>(p, budget, each));
    return readers;
  };
  // Each level merges consecutive runs (row order must be kept), only as many
  // as needed to get down to what the final merge can open at once.
  store::StoreWriterOptions writer_options;
  writer_options.n_rows = n_rows;
  writer_options.tile_rows = options.tile_rows;
  writer_options.shard_target_bytes = shard_target;
  writer_options.block_target_bytes = block_target;
  writer_options.io_bytes = io_bytes;
  const uint64_t final_fixed = store::StoreWriter::peak_bytes(writer_options) + io_bytes + 64 * kKiB;
  uint64_t merge_level = 0;
  for (uint64_t final_fan_in; runs.size() > (final_fan_in = fan_in_for(final_fixed));) {
    const uint64_t fan_in = fan_in_for(io_bytes + 64 * kKiB);
    ++merge_level;
    progress.phase(fmt::format("merging {} runs (level {})", runs.size(), merge_level));
    std::vector<std::string> next;
    for (size_t begin = 0; begin < runs.size();) {
      uint64_t left = runs.size() - begin;
      uint64_t excess = next.size() + left > final_fan_in ? next.size() + left - final_fan_in : 0;
      if (excess == 0) {
        next.insert(next.end(), runs.begin() + begin, runs.end());
        break;
      }
      uint64_t take = std::min({fan_in, excess + 1, left});
      std::vector<std::string> group(runs.begin() + begin, runs.begin() + begin + take);
      begin += take;
      if (take < 2) {
        next.push_back(group[0]);
        continue;
      }
      std::string path = tmp.file(fmt::format("run-L{}-{:06d}.tmp", merge_level, next.size()));
      {
        auto readers = open_runs(group, io_bytes + 64 * kKiB);
        FileWriter out(path, budget, io_bytes, "ingest run writer");
        RunWriterSink sink(out);
        merge_runs(readers, [&](uint64_t column, uint64_t count, auto&& fill) {
          out.put<uint64_t>(column);
          out.put<uint64_t>(count);
          fill(sink);
        });
        out.close(false);
      }
      for (const auto& p : group) fs::remove(p);
      next.push_back(path);
    }
    runs = std::move(next);
  }

  if (merge_level > 0)
    spdlog::debug("ingest {}: {} merge levels down to {} runs in {:.2f}s", input, merge_level,
                  runs.size(), lap());

  // ---- pass 2b: final merge into shards
  progress.phase(fmt::format("writing shards from {} runs", in_memory ? 1 : runs.size()));
  store::WrittenShards written;
  {
    store::StoreWriter writer(tmp, budget, writer_options);
    uint64_t merged = 0;
    auto on_column = [&](uint64_t column, uint64_t count, auto&& fill) {
      FGM_ASSERT(column < n_features);
      writer.add_column(column, count, [&](ColumnSink& sink) { fill(sink); });
      merged += count;
    };
    if (in_memory) {
      merge_sorted(spiller.sorted(), spiller.sorted_size(), on_column);
      spiller.release();
    } else {
      // The writer holds its buffers already; its shard file's write buffer
      // comes when the first shard is written.
      auto readers = open_runs(runs, 2 * io_bytes + 64 * kKiB);
      merge_runs(readers, on_column);
    }
    FGM_ASSERT(merged == nnz);
    written = writer.finish();
  }
  for (const auto& p : runs) fs::remove(p);
  stats.shards = written.shards.size();
  stats.nonempty_columns = written.nonempty_columns;
  stats.blocks = written.block_count;
  spdlog::debug("ingest {}: wrote {} shards ({} blocks) in {:.2f}s", input, written.shards.size(),
                written.block_count, lap());

  // ---- manifest: FlatBuffer, then the labels block
  progress.phase("writing manifest");
  ManifestFields m;
  m.n_rows = n_rows;
  m.n_features = n_features;
  m.nnz = nnz;
  m.positive_value = labels.positive_value();
  m.negative_value = labels.negative_value();
  m.index_base = options.reader.index_base;
  m.declared_features = options.reader.declared_features;
  {
    std::error_code ec;
    auto abs = fs::absolute(input, ec);
    m.input_path = ec ? input : abs.lexically_normal().string();
  }
  m.input_bytes = stats.input_bytes;
  m.input_checksum = input_checksum;
  m.explicit_zeros = explicit_zeros;
  m.shard_target_bytes = shard_target;
  m.tile_rows = options.tile_rows;
  m.nonempty_columns = written.nonempty_columns;
  m.block_bytes = block_target;
  m.block_count = written.block_count;
  m.shards = std::move(written.shards);
  m.class_values = labels.class_values();
  m.class_counts.assign(m.class_values.size(), 0);
  {
    Xxh64 label_hash, class_hash;
    map_labels(slots_path, labels, budget, io_bytes,
               [&](const int8_t* signs, const uint16_t* classes, uint64_t n) {
                 label_hash.update(signs, n);
                 class_hash.update(classes, 2 * n);
                 for (uint64_t i = 0; i < n; ++i) {
                   m.n_positive += signs[i] > 0;
                   ++m.class_counts[classes[i]];
                 }
               });
    m.labels_checksum = label_hash.digest();
    m.classes_checksum = class_hash.digest();
    m.n_negative = n_rows - m.n_positive;
  }
  store::write_manifest(
      tmp, m, budget, io_bytes,
      [&](FileWriter& out) {
        map_labels(slots_path, labels, budget, io_bytes,
                   [&](const int8_t* signs, const uint16_t*, uint64_t n) { out.write(signs, n); });
      },
      [&](FileWriter& out) {
        map_labels(slots_path, labels, budget, io_bytes, [&](const int8_t*, const uint16_t* classes,
                                                             uint64_t n) { out.write(classes, 2 * n); });
      });
  fs::remove(slots_path);

  tmp.commit();
  out_lock.release_and_remove();
  progress.finish();
  spdlog::debug("ingest {}: input hash, manifest and commit in {:.2f}s", input, lap());
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return stats;
}

}  // namespace fgm
