// The BlockStream pipeline over oneTBB: a serial in-order source (which also
// hints the kernel to read ahead), a parallel transform stage, a serial
// in-order consume stage; the token count bounds the blocks in flight.
#include "features/block_stream.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <utility>

#include <sys/mman.h>

#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>

#include "core/interrupt.h"
#include "core/loop_rendezvous.h"
#include "core/progress.h"
#include "features/block_scores.h"
#include "features/column_pruning.h"

namespace fgm {

// Verified blocks kept between passes (keep_resident): compact copies of the
// block's arrays, each column's nonzero count (the pruned linear pass's
// bounds), and for a block of short cells (wants_row_order: tall sparse
// stores) its row order, which the block kernels sum about twice as fast;
// at most `capacity` bytes in all (BlockRef::bytes plus the counts' and the
// row order's bytes each; a block list other than the first one streamed is
// read from the store again). Blocks are copied outside the lock: threads keep different blocks.
class ResidentBlocks {
 public:
  explicit ResidentBlocks(uint64_t capacity) : capacity_(capacity) {}
  const ColumnBlock* find(const BlockRef& ref) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(key(ref));
    return it == blocks_.end() ? nullptr : &it->second->view;
  }
  void keep(const BlockRef& ref, const ColumnBlock& c) {
    const bool ordered = wants_row_order(c);
    const uint64_t order_bytes = ordered ? row_order_size(c).bytes() : 0;
    const uint64_t nnz_bytes = up8(4 * c.column_count);  // column_nnz
    const uint64_t extra = order_bytes + nnz_bytes;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (used_ + ref.bytes + extra > capacity_ || blocks_.count(key(ref))) return;
      used_ += ref.bytes + extra;
    }
    auto e = std::make_unique<Entry>();
    const uint64_t copy_bytes = copy_arrays_bytes(c);
    e->memory = LargeBuffer(copy_bytes + extra);
    copy_arrays(c, e->memory.data(), e->view);
    if (ordered) {
      e->order = build_row_order(e->view, e->memory.data() + copy_bytes);
      e->view.row_order = &e->order;
    }
    auto* column_nnz = reinterpret_cast<uint32_t*>(e->memory.data() + copy_bytes + order_bytes);
    column_nonzeros(e->view, column_nnz);
    e->view.column_nnz = column_nnz;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!blocks_.emplace(key(ref), std::move(e)).second) used_ -= ref.bytes + extra;
  }
  bool holds_all(const std::vector<BlockRef>& blocks) const {
    for (const auto& b : blocks)
      if (!find(b)) return false;
    return true;
  }

 private:
  // Memory for one kept block, not zero-filled by us. From 2 MiB on it is an
  // anonymous mapping in transparent huge pages where the kernel allows
  // (madvise): a tall store's first pass writes gigabytes of fresh pages, and
  // 4 KiB faults cost more than the copy (measured: ~3 s of system time for
  // 1.4 GB on this VM). Smaller blocks come from the heap (a store of many
  // small shards must not use up the process's mappings).
  class LargeBuffer {
   public:
    LargeBuffer() = default;
    explicit LargeBuffer(uint64_t bytes) : bytes_(std::max<uint64_t>(bytes, 1)) {
      if (bytes_ < kMapBytes) {
        data_ = static_cast<uint8_t*>(::operator new(bytes_));
        return;
      }
      void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
      ::madvise(p, bytes_, MADV_HUGEPAGE);
#endif
      data_ = static_cast<uint8_t*>(p);
    }
    LargeBuffer(LargeBuffer&& o) noexcept : data_(std::exchange(o.data_, nullptr)), bytes_(o.bytes_) {}
    LargeBuffer& operator=(LargeBuffer&& o) noexcept {
      std::swap(data_, o.data_);
      std::swap(bytes_, o.bytes_);
      return *this;
    }
    ~LargeBuffer() {
      if (!data_) return;
      if (bytes_ < kMapBytes) ::operator delete(data_);
      else ::munmap(data_, bytes_);
    }
    uint8_t* data() const { return data_; }

   private:
    static constexpr uint64_t kMapBytes = uint64_t{2} << 20;
    uint8_t* data_ = nullptr;
    uint64_t bytes_ = 0;
  };
  struct Entry {
    LargeBuffer memory;  // the block's arrays (each 8-byte aligned), then its row order
    RowOrder order;      // valid when view.row_order is set
    ColumnBlock view;
  };
  static uint64_t up8(uint64_t b) { return (b + 7) / 8 * 8; }
  static uint64_t copy_arrays_bytes(const ColumnBlock& c) {
    const uint64_t k = c.column_count, cells = c.cell_count(), nnz = c.nnz();
    const uint64_t tiles = c.tile_count == 0 ? 0 : c.tile_count + 1;
    return up8(8 * k) + 2 * up8(4 * k) + up8(4 * tiles) + up8(4 * cells) +
           up8(c.tile_count ? 4 * (cells + 1) : 0) + (c.unit_values ? 1 : 2) * up8(4 * nnz);
  }
  static void copy_arrays(const ColumnBlock& c, uint8_t* at, ColumnBlock& view) {
    const uint64_t k = c.column_count, cells = c.cell_count(), nnz = c.nnz();
    const uint64_t tiles = c.tile_count == 0 ? 0 : c.tile_count + 1;
    auto copy = [&](const void* src, uint64_t size) {
      if (size) std::memcpy(at, src, size);
      const uint8_t* begin = at;
      at += up8(size);
      return begin;
    };
    view = c;
    view.row_order = nullptr;
    view.column_nnz = nullptr;
    view.column_ids = reinterpret_cast<const uint64_t*>(copy(c.column_ids, 8 * k));
    view.col_min = reinterpret_cast<const float*>(copy(c.col_min, 4 * k));
    view.col_max = reinterpret_cast<const float*>(copy(c.col_max, 4 * k));
    view.tile_cells = reinterpret_cast<const uint32_t*>(copy(c.tile_cells, 4 * tiles));
    view.cell_column = reinterpret_cast<const uint32_t*>(copy(c.cell_column, 4 * cells));
    view.cell_ptr = reinterpret_cast<const uint32_t*>(copy(c.cell_ptr, c.tile_count ? 4 * (cells + 1) : 0));
    view.row_ids = reinterpret_cast<const uint32_t*>(copy(c.row_ids, 4 * nnz));
    // Unit values stay the store's shared ones (the store outlives its stream).
    if (!c.unit_values) view.values = reinterpret_cast<const float*>(copy(c.values, 4 * nnz));
  }
  static std::pair<uint64_t, uint64_t> key(const BlockRef& r) { return {r.first_column, r.end_column}; }
  mutable std::mutex mutex_;
  std::map<std::pair<uint64_t, uint64_t>, std::unique_ptr<Entry>> blocks_;
  uint64_t capacity_;
  uint64_t used_ = 0;
};

uint64_t resident_store_bytes(const StoreInfo& info) {
  const bool tall = info.n_rows > info.tile_rows && info.tile_rows <= (uint64_t{1} << 16);
  const uint64_t tiles = info.tile_rows == 0 ? 0 : (info.n_rows + info.tile_rows - 1) / info.tile_rows;
  // Each kept block's column_nnz: 4 bytes per column, 8-byte aligned.
  const uint64_t column_nnz = 4 * info.nonempty_columns + 8 * info.block_count;
  return info.shard_bytes + column_nnz +
         (tall ? row_order_bytes_bound(info.nnz, tiles) + (8 * (tiles + 1) + 48) * info.block_count : 0);
}

// Read buffers of the blocks in flight, reused across the blocks of a pass
// and, while the budget allows, across passes (BlockStream keeps the pool):
// a streamed pass of a tall store reads units of tens of MiB, and mapping
// them afresh every pass costs more in page faults than the pass's reads
// (measured: 0.2-0.3 s of faults per 100 MB on this VM). A buffer grows to
// the largest block it has read and keeps that size.
class BlockBufferPool {
 public:
  std::unique_ptr<BlockBuffer> take(uint64_t bytes) {
    std::unique_ptr<BlockBuffer> b;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!free_.empty()) {
        b = std::move(free_.back());
        free_.pop_back();
      }
    }
    if (!b) b = std::make_unique<BlockBuffer>();
    if (b->capacity() < bytes) b->get(bytes);
    return b;
  }
  void give(std::unique_ptr<BlockBuffer> b) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(std::move(b));
  }
  // Bytes the pooled buffers hold (no buffer may be out: between passes).
  uint64_t bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t total = 0;
    for (const auto& b : free_) total += b->capacity();
    return total;
  }
  uint64_t largest() {
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t most = 0;
    for (const auto& b : free_) most = std::max(most, b->capacity());
    return most;
  }
  // Frees buffers until at most `count` remain, each at most `capacity` bytes
  // (smaller ones are kept: take() regrows them).
  void trim(uint64_t count, uint64_t capacity) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::unique_ptr<BlockBuffer>> kept;
    for (auto& b : free_)
      if (kept.size() < count && b->capacity() <= capacity) kept.push_back(std::move(b));
    free_ = std::move(kept);
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<BlockBuffer>> free_;
};

namespace {

// The memory of a pass in flight: read buffers (none when every block is
// resident), held only inside a transform, so at most one per thread; and
// each transform's scratch and result, which waits in its token's slot, so
// one per token. A tight budget runs fewer tokens (and so fewer threads
// reading), down to one. Returns the token count.
int reserve_in_flight(const std::vector<BlockRef>& blocks, bool all_resident, int tokens, int threads,
                      const BlockStages& stages, MemoryBudget& budget, Reservation& in_flight) {
  uint64_t read = 0, scratch = 0, single = 0;
  for (const auto& b : blocks) {
    const uint64_t r = all_resident ? 0 : b.read_bytes, s = stages.scratch_bytes(b);
    read = std::max(read, r);
    scratch = std::max(scratch, s);
    single = std::max(single, r + s);
  }
  // One token: the largest block with its scratch (a tight budget must still
  // run); more: the buffers of the threads reading and the slots' scratch.
  auto bytes_for = [&](uint64_t t) {
    return t == 1 ? single : std::min<uint64_t>(t, static_cast<uint64_t>(threads)) * read + t * scratch;
  };
  const uint64_t one = bytes_for(1);
  if (one == 0) return tokens;
  // Any byte count (unit 1), not a multiple of `one`: that rounding capped a
  // pass at 2 tokens, and at 1 (one block at a time, one thread busy) when the
  // largest read and the largest scratch belong to different blocks.
  in_flight = budget.reserve_up_to(bytes_for(static_cast<uint64_t>(tokens)), 1, "scoring blocks in flight");
  if (in_flight.bytes() < one) {
    in_flight.release();  // not even one: fail with the usual message
    in_flight = budget.reserve(one, "scoring blocks in flight",
                               "lower engine.block_bytes (or, when one stored block is larger than it, ingest "
                               "again with a smaller store.block_bytes)");
    return 1;
  }
  uint64_t fit = static_cast<uint64_t>(tokens);
  while (fit > 1 && bytes_for(fit) > in_flight.bytes()) --fit;
  in_flight.resize(bytes_for(fit));
  return static_cast<int>(fit);
}

// The largest read of a pass (0: every block resident).
uint64_t largest_read(const std::vector<BlockRef>& blocks, bool all_resident) {
  uint64_t read = 0;
  if (!all_resident)
    for (const auto& b : blocks) read = std::max(read, b.read_bytes);
  return read;
}

}  // namespace

BlockStream::BlockStream(const ShardStore& store, const SchedulerOptions& options, MemoryBudget& budget)
    : store_(store), options_(options), budget_(budget), buffers_(std::make_unique<BlockBufferPool>()) {
  if (options.keep_resident) resident_ = std::make_unique<ResidentBlocks>(resident_store_bytes(store.info()));
}

BlockStream::~BlockStream() = default;

PassStats BlockStream::run(const std::vector<BlockRef>& blocks, const std::string& label,
                           BlockStages& stages) const {
  const auto start = std::chrono::steady_clock::now();
  PassStats stats;
  ResidentBlocks* resident = resident_.get();
  const bool all_resident = resident && resident->holds_all(blocks);
  // The buffers kept since the last pass join this pass's reservation.
  kept_buffers_.release();
  Reservation in_flight;
  int tokens = 1;
  try {
    tokens = reserve_in_flight(blocks, all_resident, effective_tokens(options_), options_.threads, stages, budget_,
                               in_flight);
  } catch (...) {
    buffers_->trim(0, 0);  // no memory outside a reservation
    throw;
  }
  const uint64_t read_bytes = largest_read(blocks, all_resident);
  const uint64_t readers = std::min(tokens, options_.threads);
  buffers_->trim(read_bytes == 0 ? 0 : readers, read_bytes);
  stages.open(static_cast<size_t>(tokens));
  uint64_t total = 0;
  for (const auto& b : blocks) total += b.bytes;
  BlockBufferPool& buffers = *buffers_;
  ProgressBar bar(label, total, options_.progress);
  size_t next = 0, prefetched = 0;
  // A block with a tail is read in parts when nothing else needs it whole.
  const bool split_reads = !resident && !observer_ && stages.takes_parts() && store_.reads_parts();
  // Read-ahead: the blocks the tokens will hold next (of a split read, the head).
  auto prefetch_until = [&](size_t end) {
    for (end = std::min(end, blocks.size()); prefetched < end; ++prefetched) {
      const BlockRef& ref = blocks[prefetched];
      if (resident && resident->find(ref)) continue;
      if (split_reads && ref.has_tail) store_.prefetch_head(ref);
      else store_.prefetch_block(ref);
    }
  };
  auto source = [&](tbb::flow_control& fc) -> size_t {
    check_interrupt();  // between blocks: the pass stops as on a read error
    if (next >= blocks.size()) {
      fc.stop();
      return 0;
    }
    prefetch_until(next + static_cast<size_t>(tokens) + 1);
    return next++;
  };
  // Test binaries: the first block waits for a second thread (core/loop_rendezvous.h).
  const bool overlap = options_.threads > 1 && tokens > 1 && blocks.size() > 1;
  LoopRendezvous rendezvous;
  auto transform = [&](size_t index) {
    if (overlap) rendezvous.arrive();
    const BlockRef& ref = blocks[index];
    const size_t slot = index % static_cast<size_t>(tokens);
    if (const ColumnBlock* kept = resident ? resident->find(ref) : nullptr) {
      if (observer_) observer_(*kept);
      stages.transform(slot, ref, *kept);
      return index;
    }
    const bool parts = split_reads && ref.has_tail;
    std::unique_ptr<BlockBuffer> buffer = buffers.take(ref.read_bytes);
    if (parts) {
      // The head now, the tail only if the stages ask (the same buffer).
      const ColumnBlock head = store_.read_part(ref, BlockPart::kHead, *buffer);
      const TailReader tail(store_, ref, *buffer);
      stages.transform_parts(slot, ref, head, tail);
      buffers.give(std::move(buffer));
      return index;
    }
    ColumnBlock block = store_.read_block(ref, *buffer);
    // A block just kept is transformed from its copy (with its row order), and
    // the read buffer goes back to the pool at once.
    const ColumnBlock* kept = nullptr;
    if (resident) {
      resident->keep(ref, block);
      kept = resident->find(ref);
    }
    if (kept) buffers.give(std::move(buffer));
    const ColumnBlock& use = kept ? *kept : block;
    if (observer_) observer_(use);
    stages.transform(slot, ref, use);
    if (!kept) buffers.give(std::move(buffer));
    return index;
  };
  auto consume = [&](size_t index) {
    const BlockRef& ref = blocks[index];
    stats.blocks += 1;
    stats.bytes_streamed += ref.bytes;
    bar.add(ref.bytes);
    stages.consume(index % static_cast<size_t>(tokens));
  };
  tbb::task_arena arena(options_.threads);
  try {
    arena.execute([&] {
      tbb::parallel_pipeline(static_cast<size_t>(tokens),
                             tbb::make_filter<void, size_t>(tbb::filter_mode::serial_in_order, source) &
                                 tbb::make_filter<size_t, size_t>(tbb::filter_mode::parallel, transform) &
                                 tbb::make_filter<size_t, void>(tbb::filter_mode::serial_in_order, consume));
    });
  } catch (...) {
    buffers_->trim(0, 0);  // a failed pass keeps nothing (its reservation ends here)
    throw;
  }
  bar.finish();
  keep_buffers(in_flight);
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

// After a pass: its read buffers stay for the next pass (with a reservation of
// their bytes) when they are large (SchedulerOptions::keep_buffers_from) and
// take at most a quarter of what the budget has free (what runs between
// passes, e.g. a solver, keeps the rest); otherwise they are unmapped now.
void BlockStream::keep_buffers(Reservation& in_flight) const {
  const uint64_t held = buffers_->bytes(), largest = buffers_->largest();
  in_flight.release();
  if (held == 0) return;
  if (largest >= options_.keep_buffers_from && held <= budget_.available() / 4) {
    kept_buffers_ = budget_.reserve_up_to(held, held, "scoring read buffers kept between passes");
    if (kept_buffers_.bytes() == held) return;
  }
  kept_buffers_.release();
  buffers_->trim(0, 0);
}

}  // namespace fgm
