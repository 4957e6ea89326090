// ShardStore::open verifies every file of a store; every later read goes
// through pread and is verified again against the piece checksums.
#include "io/shard_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <new>
#include <limits>
#include <utility>

#include "core/error.h"
#include "core/hash.h"
#include "core/huge_pages.h"
#include "core/messages.h"
#include "io/framed_file.h"
#include "io/schema/manifest_generated.h"
#include "io/schema/shard_generated.h"
#include "io/store_files.h"
#include "io/store_format.h"

namespace fgm {
namespace {

using store::FileReader;

[[noreturn]] void corrupt(const std::string& message) {
  throw Error(ErrorKind::kCorruption, message);
}

std::string num(uint64_t v) { return std::to_string(v); }

// Reads the preamble and the FlatBuffer behind it (hashing both into `h`).
// `expected_bytes` is the file size the manifest recorded (0: unknown).
std::vector<uint8_t> read_preamble_and_header(FileReader& in, const char* magic, const char* kind,
                                              uint64_t max_header, uint64_t expected_bytes,
                                              Xxh64* h) {
  const std::string& path = in.path();
  store::Preamble pre{};
  if (in.size() < sizeof(pre)) {
    if (expected_bytes > in.size()) corrupt(msg::truncated_file(path, expected_bytes, in.size()));
    corrupt(msg::not_an_fgm_file(path, kind));
  }
  in.read(&pre, sizeof(pre));
  if (h) h->update(&pre, sizeof(pre));
  if (std::memcmp(pre.magic, magic, 8) != 0) corrupt(msg::not_an_fgm_file(path, kind));
  if (!readable_store_format(pre.format_version))
    corrupt(msg::version_mismatch(path, pre.format_version, kOldestReadableStoreFormat,
                                  kStoreFormatVersion));
  if (pre.flatbuffer_bytes < 8 || pre.flatbuffer_bytes > max_header)
    corrupt(msg::not_an_fgm_file(path, kind));
  if (sizeof(pre) + pre.flatbuffer_bytes > in.size())
    corrupt(msg::truncated_file(path, std::max(expected_bytes, sizeof(pre) + pre.flatbuffer_bytes),
                                in.size()));
  std::vector<uint8_t> buffer(pre.flatbuffer_bytes);
  in.read(buffer.data(), buffer.size());
  if (h) h->update(buffer.data(), buffer.size());
  uint64_t checksum = xxh64(buffer.data(), buffer.size());
  if (checksum != pre.flatbuffer_checksum)
    corrupt(msg::checksum_mismatch(path, "header", pre.flatbuffer_checksum, checksum));
  return buffer;
}

// What the kernel says of a file: any write, truncation, rename over it or
// metadata change gives another value (ctime cannot be set by a user).
struct FileIdentity {
  uint64_t device = 0, inode = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FileIdentity& o) const {
    return device == o.device && inode == o.inode && size == o.size && mtime_ns == o.mtime_ns &&
           ctime_ns == o.ctime_ns;
  }
};

FileIdentity identity_of(const struct stat& st) {
  auto ns = [](const timespec& t) { return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec; };
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
          static_cast<uint64_t>(st.st_size), ns(st.st_mtim), ns(st.st_ctim)};
}

std::atomic<double> recent_write_seconds{2.0};
std::atomic<uint64_t> bytes_rehashed{0};

struct Shard {
  std::string path;
  uint64_t first_column = 0, end_column = 0, column_count = 0, nnz = 0, block_count = 0;
  uint64_t file_bytes = 0;
  uint64_t checksum = 0;  // XXH64 of the whole file, from the manifest
  uint64_t raw_offset = 0;
  store::ShardLayout layout;
  std::vector<uint64_t> pieces;            // piece checksums, verified at open
  std::vector<store::BlockEntry> blocks;   // the block table, verified at open
  int fd = -1;  // open since verification (-1: opened per read, too many shards)
  // The file as verified at open; reads re-hash their pieces only when the
  // file they read no longer matches it (or when it was written too recently
  // for its ctime to tell a later write apart).
  FileIdentity verified_as;
  bool identity_trusted = false;
};

// A file descriptor for reading a shard: the one kept since open, or one
// opened for this read (closed on scope exit).
struct Fd {
  int fd = -1;
  bool owned = false;
  explicit Fd(const Shard& sh) : fd(sh.fd) {
    if (fd < 0) {
      fd = ::open(sh.path.c_str(), O_RDONLY | O_CLOEXEC);
      owned = true;
    }
  }
  ~Fd() {
    if (owned && fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// Raises the soft open-file limit toward the hard one so that every shard can
// stay open; returns how many descriptors the store may keep.
uint64_t descriptors_for_shards(uint64_t shards) {
  struct rlimit lim {};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  const rlim_t want = static_cast<rlim_t>(shards) + 256;
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < want) {
    rlimit raised = lim;
    raised.rlim_cur = lim.rlim_max == RLIM_INFINITY ? want : std::min(want, lim.rlim_max);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  if (lim.rlim_cur == RLIM_INFINITY) return shards;
  return lim.rlim_cur > 256 ? std::min<uint64_t>(shards, lim.rlim_cur - 256) : 0;
}

// The bytes of the raw block that [begin, end) covers, widened to whole pieces.
struct PieceExtent {
  uint64_t begin = 0, end = 0;
  uint64_t bytes() const { return end - begin; }
};

PieceExtent piece_extent(const store::ShardLayout& l, uint64_t begin, uint64_t end) {
  if (begin >= end) return {begin, begin};
  const uint64_t p = l.piece_bytes;
  return {begin / p * p, std::min((end + p - 1) / p * p, l.data_bytes)};
}

// Raw-block bytes [begin, end) of stored blocks [first, first + count) of a shard.
std::pair<uint64_t, uint64_t> blocks_extent(const Shard& sh, uint64_t first, uint64_t count) {
  const store::BlockEntry& last = sh.blocks[first + count - 1];
  return {sh.blocks[first].offset, last.offset + last.bytes};
}

// One past the entries of the stored block at entry b: its head, and its
// tail part if one follows (format 6).
uint64_t unit_end(const Shard& sh, uint64_t b) {
  return b + 1 < sh.blocks.size() && sh.blocks[b + 1].tail_part() ? b + 2 : b + 1;
}

// The layout of a stored block from its table entry.
store::BlockLayout layout_of(const store::BlockEntry& e) {
  return store::block_layout(e.column_count, e.cell_count, e.nnz, e.tile_count, e.unit_values());
}

// A view of a stored block whose bytes start at `base`; a unit-valued block's
// values are `ones` (at least e.nnz entries of 1.0f).
ColumnBlock view_of(const store::BlockEntry& e, uint32_t tile_rows, uint8_t* base, const float* ones) {
  const store::BlockLayout l = layout_of(e);
  ColumnBlock c;
  c.first_column = e.first_column;
  c.end_column = e.end_column;
  c.column_count = e.column_count;
  c.column_ids = reinterpret_cast<const uint64_t*>(base + l.column_ids);
  c.col_min = reinterpret_cast<const float*>(base + l.col_min);
  c.col_max = reinterpret_cast<const float*>(base + l.col_max);
  c.tile_rows = tile_rows;
  c.tile_count = e.tile_count;
  c.tile_cells = reinterpret_cast<const uint32_t*>(base + l.tile_cells);
  c.cell_column = reinterpret_cast<const uint32_t*>(base + l.cell_column);
  c.cell_ptr = reinterpret_cast<const uint32_t*>(base + l.cell_ptr);
  c.row_ids = reinterpret_cast<const uint32_t*>(base + l.row_ids);
  c.values = e.unit_values() ? ones : reinterpret_cast<const float*>(base + l.values);
  c.unit_values = e.unit_values();
  return c;
}

// Bounds of everything read_block hands out, checked before use (the pieces
// matched, but nothing read from a file indexes memory unchecked). Returns
// what is wrong, or nullptr.
//
// These checks run on every nonzero of every block read, so they are whole-
// array scans without a branch per cell or per nonzero (ScanU32, four entries
// per SSE2 step): "rows strictly increasing inside every cell" is checked as
// "the row sequence of a tile decreases or repeats exactly where a cell
// starts" — every non-increase of the tile's rows is counted once, the
// non-increases at cell starts once more, and the two counts must agree.

// What one scan of a uint32 array found: how many entries are not above the
// one before (v[i] <= v[i-1], i ≥ 1), and whether every entry lies in [lo, hi].
struct U32Scan {
  uint64_t not_increasing = 0;
  bool in_range = true;
};

// n ≤ 2^32 (arrays of one block): a 32-bit lane counts at most n / 4 steps.
U32Scan scan_u32(const uint32_t* v, uint64_t n, uint32_t lo, uint32_t hi) {
  U32Scan s;
  if (n == 0) return s;
  s.in_range = v[0] >= lo && v[0] <= hi;
  uint64_t i = 1;
#if defined(__SSE2__)
  // Unsigned compares from signed ones: flip the sign bit of both sides.
  const __m128i sign = _mm_set1_epi32(INT32_MIN);
  const __m128i below = _mm_set1_epi32(static_cast<int32_t>(lo ^ 0x80000000u));
  const __m128i above = _mm_set1_epi32(static_cast<int32_t>(hi ^ 0x80000000u));
  __m128i increasing = _mm_setzero_si128(), outside = _mm_setzero_si128();
  for (; i + 4 <= n; i += 4) {
    const __m128i cur = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + i)), sign);
    const __m128i prev = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + i - 1)), sign);
    increasing = _mm_sub_epi32(increasing, _mm_cmpgt_epi32(cur, prev));  // +1 per lane where cur > prev
    outside = _mm_or_si128(outside, _mm_or_si128(_mm_cmpgt_epi32(below, cur), _mm_cmpgt_epi32(cur, above)));
  }
  alignas(16) uint32_t lanes[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes), increasing);
  s.not_increasing += (i - 1) - (uint64_t{lanes[0]} + lanes[1] + lanes[2] + lanes[3]);
  s.in_range = s.in_range && _mm_movemask_epi8(outside) == 0;
#endif
  uint32_t bad = 0, outside_tail = 0;
  for (; i < n; ++i) {
    bad += static_cast<uint32_t>(v[i] <= v[i - 1]);
    outside_tail |= static_cast<uint32_t>(v[i] < lo) | static_cast<uint32_t>(v[i] > hi);
  }
  s.not_increasing += bad;
  s.in_range = s.in_range && outside_tail == 0;
  return s;
}

const char* check_block(const ColumnBlock& c, const store::BlockEntry& e, uint64_t n_rows) {
  const uint64_t k = e.column_count, cells = e.cell_count, T = e.tile_count;
  // Counts come from the verified block table: k ≥ 1, cells ≤ nnz < 2^32.
  for (uint64_t j = 0; j < k; ++j) {
    const uint64_t id = c.column_ids[j];
    if (id < e.first_column || id >= e.end_column || (j > 0 && id <= c.column_ids[j - 1]))
      return "column ids out of order or outside the block's range";
  }
  if (c.tile_cells[0] != 0 || c.tile_cells[T] != cells) return "tile directory out of range";
  for (uint64_t t = 0; t < T; ++t)
    if (c.tile_cells[t + 1] < c.tile_cells[t]) return "tile directory out of range";
  // Cell pointers strictly increasing from 0 to nnz: every cell non-empty and
  // inside the nonzeros.
  const U32Scan ptr = scan_u32(c.cell_ptr, cells + 1, 0, static_cast<uint32_t>(e.nnz));
  if (c.cell_ptr[0] != 0 || c.cell_ptr[cells] != e.nnz || ptr.not_increasing != 0 || !ptr.in_range)
    return "cell pointers out of range";
  for (uint64_t t = 0; t < T; ++t) {
    const uint32_t begin = c.tile_cells[t], end = c.tile_cells[t + 1];
    if (begin == end) continue;
    const U32Scan col = scan_u32(c.cell_column + begin, end - begin, 0, static_cast<uint32_t>(k - 1));
    if (col.not_increasing != 0 || !col.in_range) return "cell columns out of range";
    // Rows of the tile: inside it, and increasing except where a cell starts.
    const uint64_t row_begin = t * uint64_t{c.tile_rows};
    const uint64_t row_end = std::min<uint64_t>(row_begin + c.tile_rows, n_rows);
    if (row_begin >= row_end) return "row ids outside their tile or not increasing";
    const uint32_t p0 = c.cell_ptr[begin], p1 = c.cell_ptr[end];
    const U32Scan rows = scan_u32(c.row_ids + p0, p1 - p0, static_cast<uint32_t>(row_begin),
                                  static_cast<uint32_t>(row_end - 1));
    uint64_t at_cell_starts = 0;
    for (uint32_t x = begin + 1; x < end; ++x) {
      const uint32_t p = c.cell_ptr[x];
      at_cell_starts += static_cast<uint64_t>(c.row_ids[p] <= c.row_ids[p - 1]);
    }
    if (!rows.in_range || rows.not_increasing != at_cell_starts)
      return "row ids outside their tile or not increasing";
  }
  // One tile: csc_columns reads cell c as column c.
  if (T == 1)
    for (uint64_t x = 0; x < cells; ++x)
      if (c.cell_column[x] != x) return "cell columns out of range";
  return nullptr;
}

// `count` floats of 1.0 in pages made read-only once filled: blocks of every
// thread share them, and a consumer that wrote into them by mistake would
// change every later block, so a write faults instead.
class ReadOnlyOnes {
 public:
  ReadOnlyOnes() = default;
  ReadOnlyOnes(MemoryBudget& budget, uint64_t count)
      : bytes_((4 * count + 4095) / 4096 * 4096),
        reservation_(budget.reserve(bytes_, "store unit values (ones for the binary blocks)",
                                    "raise engine.memory_budget")) {
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    std::fill_n(static_cast<float*>(p), bytes_ / 4, 1.0f);
    ::mprotect(p, bytes_, PROT_READ);
    data_ = static_cast<const float*>(p);
  }
  ReadOnlyOnes(ReadOnlyOnes&& o) noexcept
      : bytes_(std::exchange(o.bytes_, 0)), reservation_(std::move(o.reservation_)),
        data_(std::exchange(o.data_, nullptr)) {}
  ReadOnlyOnes& operator=(ReadOnlyOnes&& o) noexcept {
    std::swap(bytes_, o.bytes_);
    std::swap(reservation_, o.reservation_);
    std::swap(data_, o.data_);
    return *this;
  }
  ~ReadOnlyOnes() {
    if (data_) ::munmap(const_cast<float*>(data_), bytes_);
  }
  const float* data() const { return data_; }

 private:
  uint64_t bytes_ = 0;
  Reservation reservation_;
  const float* data_ = nullptr;
};

class PreadShardStore final : public ShardStore {
 public:
  PreadShardStore(std::string dir, MemoryBudget& budget) : dir_(std::move(dir)), budget_(budget) {}
  ~PreadShardStore() override {
    for (auto& s : shards_)
      if (s.fd >= 0) ::close(s.fd);
  }

  void load();

  const StoreInfo& info() const override { return info_; }
  const std::string& dir() const override { return dir_; }
  const int8_t* labels() const override { return labels_.data(); }
  const uint16_t* classes() const override { return classes_.data(); }

  std::vector<BlockRef> plan_blocks(uint64_t target_bytes) const override;
  ColumnBlock read_block(const BlockRef& block, BlockBuffer& buffer) const override;
  bool reads_parts() const override { return true; }
  ColumnBlock read_part(const BlockRef& block, BlockPart part, BlockBuffer& buffer) const override;
  void prefetch_block(const BlockRef& block) const override;
  void prefetch_head(const BlockRef& block) const override;
  void read_column(uint64_t feature, std::vector<uint32_t>& rows,
                   std::vector<float>& values) const override;
  float column_min(uint64_t feature) const override { return column_float(feature, true); }
  float column_max(uint64_t feature) const override { return column_float(feature, false); }

 private:
  const Shard& shard_of(const BlockRef& block) const {
    FGM_ASSERT(block.shard < shards_.size());
    const Shard& sh = shards_[block.shard];
    FGM_ASSERT(block.block_count > 0 && block.first_block + block.block_count <= sh.blocks.size());
    return sh;
  }
  // The stored block whose id range holds `feature`, if any.
  struct Located {
    const Shard* shard = nullptr;
    uint64_t block = 0;
  };
  Located locate(uint64_t feature) const;
  BlockRef ref_of(uint32_t shard, uint64_t first, uint64_t count) const;
  // Position of `feature` among the listed columns of a stored block (-1: empty).
  int64_t column_index(const Shard& sh, const store::BlockEntry& e, uint64_t feature) const;
  std::pair<uint64_t, int64_t> find_column(const Shard& sh, uint64_t head, uint64_t feature) const;

  int open_shard(const Shard& sh, Fd& fd) const;
  void read_pieces(const Shard& sh, int fd, const PieceExtent& e, uint8_t* dst) const;
  template <class Fn>
  void for_each_verified(const Shard& sh, uint64_t begin, uint64_t end, Fn&& fn) const;
  void read_exact(const Shard& sh, uint64_t begin, uint64_t end, void* dst) const;
  float column_float(uint64_t feature, bool min) const;

  void load_manifest(const std::string& path, std::vector<schema::ShardEntry const*>& entries,
                     std::vector<uint8_t>& buffer);
  void load_class_table(const std::string& path, const schema::Manifest& m);
  void read_label_blocks(const std::string& path, const schema::Manifest& m, FileReader& in,
                         Xxh64& whole, uint64_t header_end);
  void verify(const std::string& manifest_path, Shard& shard);
  void check_contents(const std::string& manifest_path, Shard& shard);
  void load_block_table(Shard& shard);

  StoreInfo info_;
  std::string dir_;
  MemoryBudget& budget_;
  BudgetedArray<int8_t> labels_;
  BudgetedArray<uint16_t> classes_;
  // 1.0f for as many nonzeros as the largest unit-valued block holds: the
  // values of every unit-valued block read (format 5).
  ReadOnlyOnes unit_values_;
  std::vector<Shard> shards_;
  // Every stored block in id order: its first id, shard and shard-local index.
  std::vector<uint64_t> block_first_;
  std::vector<std::pair<uint32_t, uint64_t>> block_at_;
  Reservation shard_metadata_;  // shards_, their paths, piece and block tables
  uint64_t verify_buffer_ = 0;
};

void PreadShardStore::load() {
  verify_buffer_ = std::clamp<uint64_t>(budget_.available() / 16 / 4096 * 4096, 64 << 10, 1 << 20);
  const std::string manifest_path = dir_ + "/" + store::kManifestName;
  std::error_code ec;
  if (std::filesystem::is_directory(dir_, ec) &&
      !std::filesystem::exists(manifest_path, ec))
    throw Error(ErrorKind::kIo, msg::no_manifest(dir_));
  std::vector<uint8_t> buffer;
  std::vector<schema::ShardEntry const*> entries;
  load_manifest(manifest_path, entries, buffer);

  // Per-shard bookkeeping stays in memory for the store's lifetime: count it.
  shard_metadata_ = budget_.reserve(entries.size() * (sizeof(Shard) + sizeof(uint64_t) + 64),
                                    "store shard metadata",
                                    "raise the shard size (fewer, larger shards) when ingesting");
  // Shards cover increasing, disjoint id ranges inside [0, n_features).
  uint64_t next = 0, nnz = 0, columns = 0, blocks = 0, metadata = shard_metadata_.bytes();
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto* e = entries[i];
    std::string name = e->file_name() ? e->file_name()->str() : "";
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
      corrupt(
          msg::store_inconsistent(manifest_path, fmt::format("shard {} has a bad file name", i)));
    if (e->first_column() < next || e->end_column() <= e->first_column() ||
        e->end_column() > info_.n_features || e->column_count() == 0 ||
        e->column_count() > e->end_column() - e->first_column() || e->block_count() == 0 ||
        e->nnz() < e->column_count())
      corrupt(msg::store_inconsistent(
          manifest_path, fmt::format("shard {} covers ids {}..{}, after {}: out of order or "
                                     "inconsistent counts",
                                     name, e->first_column(), e->end_column(), next)));
    Shard s;
    s.path = dir_ + "/" + name;
    metadata += s.path.size();
    s.first_column = e->first_column();
    s.end_column = e->end_column();
    s.column_count = e->column_count();
    s.nnz = e->nnz();
    s.block_count = e->block_count();
    s.file_bytes = e->file_bytes();
    s.checksum = e->checksum();
    next = s.end_column;
    nnz += s.nnz;
    columns += s.column_count;
    blocks += s.block_count;
    shards_.push_back(std::move(s));
  }
  shard_metadata_.resize(metadata);
  if (nnz != info_.nnz || columns != info_.nonempty_columns || blocks != info_.block_count)
    corrupt(msg::store_inconsistent(
        manifest_path, fmt::format("the shards hold {} columns, {} nonzeros and {} blocks, the "
                                   "manifest says {}, {} and {}",
                                   columns, nnz, blocks, info_.nonempty_columns, info_.nnz,
                                   info_.block_count)));

  entries.clear();
  buffer = {};

  // Shards stay open from verification on (a store replaced by rename is then
  // still read as verified); only beyond the descriptor limit per read.
  const uint64_t keep_open = descriptors_for_shards(shards_.size());
  uint64_t largest_unit_block = 0;
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (i < keep_open) {
      shards_[i].fd = ::open(shards_[i].path.c_str(), O_RDONLY | O_CLOEXEC);
      if (shards_[i].fd < 0)
        throw Error(ErrorKind::kCorruption,
                    msg::cannot_open(shards_[i].path, store::errno_text(errno)));
    }
    verify(manifest_path, shards_[i]);
    load_block_table(shards_[i]);
    info_.shard_bytes += shards_[i].file_bytes;
    const std::vector<store::BlockEntry>& table = shards_[i].blocks;
    for (uint64_t b = 0; b < table.size(); b = unit_end(shards_[i], b)) {
      // Stored blocks (a head and its tail: one unit) in id order.
      block_first_.push_back(table[b].first_column);
      block_at_.emplace_back(static_cast<uint32_t>(i), b);
      bool unit = true;
      uint64_t nnz = 0;
      for (uint64_t x = b; x < unit_end(shards_[i], b); ++x) {
        unit = unit && table[x].unit_values();
        nnz += table[x].nnz;
        if (table[x].unit_values()) largest_unit_block = std::max(largest_unit_block, table[x].nnz);
      }
      // A head and tail merged by read_block keep shared ones (BlockRef::unit_values).
      if (unit) largest_unit_block = std::max(largest_unit_block, nnz);
    }
  }
  if (largest_unit_block > 0) unit_values_ = ReadOnlyOnes(budget_, largest_unit_block);
}

void PreadShardStore::load_manifest(const std::string& path,
                                    std::vector<schema::ShardEntry const*>& entries,
                                    std::vector<uint8_t>& buffer) {
  FileReader in(path, budget_, verify_buffer_, "store verification");
  Xxh64 whole;
  buffer = read_preamble_and_header(in, store::kManifestMagic, "store manifest",
                                    std::numeric_limits<uint32_t>::max(), 0, &whole);
  flatbuffers::Verifier verifier(buffer.data(), buffer.size(), 64, 1u << 30);
  if (!schema::VerifySizePrefixedManifestBuffer(verifier))
    corrupt(msg::not_an_fgm_file(path, "store manifest"));
  const schema::Manifest* m = schema::GetSizePrefixedManifest(buffer.data());
  if (!readable_store_format(m->format_version()))
    corrupt(msg::version_mismatch(path, m->format_version(), kOldestReadableStoreFormat,
                                  kStoreFormatVersion));

  info_.format_version = m->format_version();
  info_.n_rows = m->n_rows();
  info_.n_features = m->n_features();
  info_.nnz = m->nnz();
  info_.n_positive = m->n_positive();
  info_.n_negative = m->n_negative();
  info_.positive_value = m->positive_value();
  info_.negative_value = m->negative_value();
  info_.index_base = m->index_base();
  info_.declared_features = m->declared_features();
  info_.input_path = m->input_path() ? m->input_path()->str() : "";
  info_.input_bytes = m->input_bytes();
  info_.input_checksum = m->input_checksum();
  info_.explicit_zeros = m->explicit_zeros();
  info_.tile_rows = m->tile_rows();
  info_.nonempty_columns = m->nonempty_columns();
  info_.block_bytes = m->block_bytes();
  info_.block_count = m->block_count();
  if (info_.tile_rows == 0 || info_.nonempty_columns > info_.nnz ||
      info_.nonempty_columns > info_.n_features || info_.n_features > (uint64_t{1} << 63))
    corrupt(msg::store_inconsistent(path, "bad tile size or column counts"));

  load_class_table(path, *m);
  read_label_blocks(path, *m, in, whole, sizeof(store::Preamble) + buffer.size());
  info_.store_checksum = whole.digest();

  if (m->shards())
    for (const auto* e : *m->shards()) entries.push_back(e);
}

// The class table (format 3): increasing label values, their counts adding up
// to n, the binary label map at its ends.
void PreadShardStore::load_class_table(const std::string& path, const schema::Manifest& m) {
  const auto* values = m.class_values();
  const auto* counts = m.class_counts();
  const auto* texts = m.class_texts();
  if (!values || !counts || !texts || values->size() < 2 || values->size() > kMaxClasses ||
      counts->size() != values->size() || texts->size() != values->size())
    corrupt(msg::store_inconsistent(path, "bad class table"));
  // Copied, not read in place: 8-byte elements may be misaligned (copy_scalars).
  const std::vector<double> class_values = copy_scalars(values);
  const std::vector<uint64_t> class_counts = copy_scalars(counts);
  uint64_t total = 0;
  for (size_t k = 0; k < class_values.size(); ++k) {
    const double v = class_values[k];
    if (!std::isfinite(v) || (k > 0 && !(v > info_.class_values.back())))
      corrupt(msg::store_inconsistent(path, "class values are not increasing"));
    info_.class_values.push_back(v);
    info_.class_counts.push_back(class_counts[k]);
    total += class_counts[k];
  }
  if (total != info_.n_rows || info_.class_values.back() != info_.positive_value ||
      info_.class_values.front() != info_.negative_value ||
      info_.class_counts.back() != info_.n_positive)
    corrupt(msg::store_inconsistent(path, "class table disagrees with the label map"));
}

// The padding, the ±1 labels, the padding, the class indices; everything goes
// through the whole-file hash, and each block has its own checksum.
void PreadShardStore::read_label_blocks(const std::string& path, const schema::Manifest& m,
                                        FileReader& in, Xxh64& whole, uint64_t header_end) {
  const uint64_t n = info_.n_rows;
  if (m.labels_bytes() != n || m.labels_offset() < header_end ||
      m.labels_offset() % store::kAlign != 0 || n > std::numeric_limits<uint32_t>::max() ||
      info_.n_positive + info_.n_negative != n)
    corrupt(msg::store_inconsistent(path, "bad label block description"));
  if (m.classes_offset() != store::align_up(m.labels_offset() + n) || m.classes_bytes() != 2 * n)
    corrupt(msg::store_inconsistent(path, "bad class block description"));
  uint64_t expected_size = m.classes_offset() + m.classes_bytes();
  if (in.size() != expected_size) corrupt(msg::truncated_file(path, expected_size, in.size()));

  auto skip_padding = [&](uint64_t pad_bytes) {
    uint8_t pad[store::kAlign];
    while (pad_bytes > 0) {
      uint64_t k = std::min<uint64_t>(pad_bytes, sizeof(pad));
      in.read(pad, k);
      whole.update(pad, k);
      if (std::any_of(pad, pad + k, [](uint8_t b) { return b != 0; }))
        corrupt(msg::store_inconsistent(path, "nonzero padding before the labels"));
      pad_bytes -= k;
    }
  };
  skip_padding(m.labels_offset() - header_end);
  labels_ = BudgetedArray<int8_t>(budget_, n, "store labels");
  if (in.read(labels_.data(), n) != n) corrupt(msg::truncated_file(path, expected_size, in.size()));
  whole.update(labels_.data(), n);
  uint64_t labels_checksum = xxh64(labels_.data(), n);
  if (labels_checksum != m.labels_checksum())
    corrupt(msg::checksum_mismatch(path, "labels", m.labels_checksum(), labels_checksum));

  skip_padding(m.classes_offset() - (m.labels_offset() + n));
  classes_ = BudgetedArray<uint16_t>(budget_, n, "store class indices");
  if (in.read(classes_.data(), 2 * n) != 2 * n)
    corrupt(msg::truncated_file(path, expected_size, in.size()));
  whole.update(classes_.data(), 2 * n);
  uint64_t classes_checksum = xxh64(classes_.data(), 2 * n);
  if (classes_checksum != m.classes_checksum())
    corrupt(msg::checksum_mismatch(path, "class indices", m.classes_checksum(), classes_checksum));

  // Labels and classes agree: +1 exactly for the largest class.
  const uint64_t top = info_.classes() - 1;
  std::vector<uint64_t> counts(info_.classes(), 0);
  for (uint64_t i = 0; i < n; ++i) {
    int8_t y = labels_[i];
    uint16_t c = classes_[i];
    if (y != 1 && y != -1) corrupt(msg::store_inconsistent(path, "a label is not +1 or -1"));
    if (c > top) corrupt(msg::store_inconsistent(path, "a class index is beyond the class table"));
    if ((y > 0) != (c == top))
      corrupt(msg::store_inconsistent(path, "labels disagree with the class indices"));
    ++counts[c];
  }
  if (counts != info_.class_counts)
    corrupt(msg::store_inconsistent(path, "label counts disagree with the labels"));
}

// Checks a shard's header against the manifest, reads its piece table, and
// makes one sequential pass: whole-file hash, every piece's checksum, and
// bounds (col_ptr monotone and ending at nnz, row ids below n).
void PreadShardStore::verify(const std::string& manifest_path, Shard& shard) {
  const std::string& path = shard.path;
  struct stat before {};
  const bool stat_before = ::stat(path.c_str(), &before) == 0;
  check_contents(manifest_path, shard);
  // Reads may skip re-hashing only if nothing wrote the file during the hash
  // and its last write is old enough for a later one to get another ctime
  // (the kernel stamps files with a clock of a few milliseconds' grain).
  struct stat after {};
  if (!stat_before || ::stat(path.c_str(), &after) != 0) return;
  timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const double age = static_cast<double>(now.tv_sec - after.st_ctim.tv_sec) +
                     1e-9 * static_cast<double>(now.tv_nsec - after.st_ctim.tv_nsec);
  shard.verified_as = identity_of(after);
  shard.identity_trusted = identity_of(before) == shard.verified_as && age >= recent_write_seconds.load();
}

void PreadShardStore::check_contents(const std::string& manifest_path, Shard& shard) {
  const std::string& path = shard.path;
  FileReader in(path, budget_, verify_buffer_, "store verification", ErrorKind::kCorruption);
  auto buffer = read_preamble_and_header(in, store::kShardMagic, "store shard",
                                         store::kMaxShardHeaderBytes, shard.file_bytes, nullptr);
  flatbuffers::Verifier verifier(buffer.data(), buffer.size());
  if (!schema::VerifySizePrefixedShardHeaderBuffer(verifier))
    corrupt(msg::not_an_fgm_file(path, "store shard"));
  const schema::ShardHeader* h = schema::GetSizePrefixedShardHeader(buffer.data());
  if (h->format_version() != info_.format_version)
    corrupt(msg::version_mismatch(path, h->format_version(), info_.format_version));
  // Identity before bytes: a shard from elsewhere (swapped, copied from
  // another store) is reported as such rather than as a bad checksum.
  auto check = [&](const char* field, uint64_t want, uint64_t got) {
    if (want != got)
      corrupt(msg::manifest_mismatch(manifest_path, path, field, num(want), num(got)));
  };
  check("first column", shard.first_column, h->first_column());
  check("end column", shard.end_column, h->end_column());
  check("column count", shard.column_count, h->column_count());
  check("nnz", shard.nnz, h->nnz());
  check("block count", shard.block_count, h->block_count());
  check("row count", info_.n_rows, h->n_rows());
  check("tile rows", info_.tile_rows, h->tile_rows());

  const uint64_t piece_bytes = h->piece_bytes();
  if (piece_bytes < store::kMinPieceBytes || piece_bytes > store::kMaxPieceBytes ||
      piece_bytes % store::kAlign != 0)
    corrupt(msg::store_inconsistent(path, "bad checksum piece size"));
  // Every block takes at least 64 bytes of table and every nonzero 4 bytes
  // (8 unless its block is unit-valued): larger counts would wrap the
  // layout's offsets into a small, self-consistent layout that lies about
  // the arrays.
  if (h->block_count() > in.size() / sizeof(store::BlockEntry) || h->nnz() > in.size() / 4 ||
      h->block_table_offset() > in.size() || h->block_table_offset() % store::kAlign != 0)
    corrupt(msg::store_inconsistent(path, "the header's counts do not fit in the file"));
  const store::ShardLayout l =
      store::shard_layout(h->block_table_offset(), h->block_count(), piece_bytes);
  const uint64_t header_end = sizeof(store::Preamble) + buffer.size();
  if (h->raw_offset() < header_end || h->raw_offset() % store::kAlign != 0 ||
      h->raw_bytes() != l.raw_bytes || h->piece_count() != l.piece_count ||
      h->piece_table_offset() != l.piece_table)
    corrupt(msg::store_inconsistent(path, "the header's array layout is wrong"));
  if (in.size() != shard.file_bytes) corrupt(msg::truncated_file(path, shard.file_bytes, in.size()));
  if (h->raw_offset() > in.size() || h->raw_bytes() != in.size() - h->raw_offset())
    corrupt(msg::truncated_file(path, h->raw_offset() + h->raw_bytes(), in.size()));
  const uint64_t raw = h->raw_offset();
  shard.raw_offset = raw;
  shard.layout = l;

  shard_metadata_.resize(shard_metadata_.bytes() + 8 * l.piece_count);
  shard.pieces.resize(l.piece_count);
  in.seek(raw + l.piece_table);
  if (in.read(shard.pieces.data(), 8 * l.piece_count) != 8 * l.piece_count)
    corrupt(msg::truncated_file(path, shard.file_bytes, in.size()));
  uint64_t table_checksum = xxh64(shard.pieces.data(), 8 * l.piece_count);
  if (table_checksum != h->piece_table_checksum())
    corrupt(msg::checksum_mismatch(path, "piece table", h->piece_table_checksum(), table_checksum));

  // One sequential pass: the whole-file hash and every piece's checksum.
  const uint64_t data_end = raw + l.data_bytes;
  in.seek(0);
  Xxh64 whole, piece;
  uint64_t off = 0, piece_index = 0, piece_fill = 0;
  const uint64_t size = in.size();
  while (off < size) {
    uint64_t avail = in.refill(verify_buffer_);
    if (avail == 0) corrupt(msg::truncated_file(path, size, off));
    uint64_t n = avail;
    const uint8_t* p = in.data();
    whole.update(p, n);
    for (uint64_t a = std::max(off, raw); a < std::min(off + n, data_end);) {
      uint64_t k = std::min({off + n - a, data_end - a, piece_bytes - piece_fill});
      piece.update(p + (a - off), k);
      piece_fill += k;
      a += k;
      if (piece_fill == piece_bytes || a == data_end) {
        if (piece.digest() != shard.pieces[piece_index])
          corrupt(msg::checksum_mismatch(path, fmt::format("piece {}", piece_index),
                                         shard.pieces[piece_index], piece.digest()));
        piece = Xxh64();
        piece_fill = 0;
        ++piece_index;
      }
    }
    in.consume(n);
    off += n;
  }
  uint64_t file_checksum = whole.digest();
  if (file_checksum != shard.checksum)
    corrupt(msg::checksum_mismatch(path, "shard file", shard.checksum, file_checksum));
  if (piece_index != l.piece_count)
    corrupt(msg::store_inconsistent(path, "the piece table does not cover the data"));
}

// Reads the block table (verified pieces) and checks it: blocks packed from
// offset 0 up to the table, each laid out as its counts say, id ranges
// increasing inside the shard's, counts adding up to the shard's.
void PreadShardStore::load_block_table(Shard& sh) {
  const store::ShardLayout& l = sh.layout;
  shard_metadata_.resize(shard_metadata_.bytes() + sizeof(store::BlockEntry) * sh.block_count);
  sh.blocks.resize(sh.block_count);
  read_exact(sh, l.block_table, l.data_bytes, sh.blocks.data());
  const uint64_t tiles = store::tile_count_of(info_.n_rows, info_.tile_rows);
  uint64_t offset = 0, next = sh.first_column, columns = 0, nnz = 0;
  for (uint64_t b = 0; b < sh.blocks.size(); ++b) {
    const store::BlockEntry& e = sh.blocks[b];
    if (e.tail_part()) {
      // Format 6: right after its head (not a tail), the head's id range, a
      // finite, non-negative bound (its value is covered by the checksums).
      const store::BlockEntry* head = b > 0 ? &sh.blocks[b - 1] : nullptr;
      const float bound = e.tail_bound();
      if (info_.format_version < 6 || !head || head->tail_part() || e.first_column != head->first_column ||
          e.end_column != head->end_column || !(bound >= 0.0f) || !std::isfinite(bound))
        corrupt(msg::store_inconsistent(sh.path, fmt::format("block {} of the block table is an "
                                                             "inconsistent tail part",
                                                             b)));
      next = head->first_column;  // the head's range again
    } else if ((e.flags >> 32) != 0) {
      corrupt(msg::store_inconsistent(sh.path, fmt::format("block {} of the block table is inconsistent", b)));
    }
    const bool counts_ok =
        e.column_count >= 1 && e.nnz >= e.column_count &&
        e.nnz <= std::numeric_limits<uint32_t>::max() && e.cell_count >= e.column_count &&
        e.cell_count <= e.nnz && e.tile_count == tiles &&
        (tiles != 1 || e.cell_count == e.column_count) &&
        e.nnz <= l.block_table / (e.unit_values() ? 4 : 8) &&
        e.column_count <= l.block_table / 16;
    if (!counts_ok || e.first_column < next || e.end_column <= e.first_column ||
        e.end_column > sh.end_column || e.column_count > e.end_column - e.first_column ||
        (b == 0 && e.first_column != sh.first_column) || e.offset != offset ||
        e.bytes != layout_of(e).bytes || e.bytes > l.block_table - offset ||
        (e.flags & ~store::kBlockFlagBits & 0xffffffffu) != 0 || (e.unit_values() && info_.format_version < 5))
      corrupt(msg::store_inconsistent(sh.path, fmt::format("block {} of the block table is "
                                                           "inconsistent",
                                                           b)));
    offset += e.bytes;
    next = e.end_column;
    columns += e.column_count;
    nnz += e.nnz;
  }
  if (store::align_up(offset) != l.block_table || next != sh.end_column ||
      columns != sh.column_count || nnz != sh.nnz)
    corrupt(msg::store_inconsistent(sh.path, "the block table does not add up to the shard"));
}

// ---------------------------------------------------------------- reads

int PreadShardStore::open_shard(const Shard& sh, Fd& fd) const {
  if (fd.fd < 0) {
    int err = errno;
    if (err == ENOENT) corrupt(msg::store_changed(sh.path, "the file was removed"));
    throw Error(ErrorKind::kIo, msg::cannot_open(sh.path, store::errno_text(err)));
  }
  return fd.fd;
}

// Reads the raw-block extent `e` (whole pieces) into dst and checks every
// piece against the table verified at open, unless the file read is still
// the one verified (same identity, see Shard::verified_as): re-hashing
// unchanged bytes at every pass cost a tenth of a kddb-shaped pass.
void PreadShardStore::read_pieces(const Shard& sh, int fd, const PieceExtent& e,
                                  uint8_t* dst) const {
  bool rehash = true;
  if (sh.identity_trusted) {
    struct stat st {};
    rehash = ::fstat(fd, &st) != 0 || !(identity_of(st) == sh.verified_as);
  }
  uint64_t done = 0;
  while (done < e.bytes()) {
    ssize_t r = ::pread(fd, dst + done, e.bytes() - done,
                        static_cast<off_t>(sh.raw_offset + e.begin + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorKind::kIo, msg::read_failed(sh.path, store::errno_text(errno)));
    }
    if (r == 0) {
      struct stat st {};
      uint64_t now = ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
      corrupt(msg::store_changed(sh.path, fmt::format("it is now {} bytes, {} were verified", now,
                                                      sh.file_bytes)));
    }
    done += static_cast<uint64_t>(r);
  }
  if (!rehash) return;
  bytes_rehashed.fetch_add(e.bytes(), std::memory_order_relaxed);
  const uint64_t p = sh.layout.piece_bytes;
  for (uint64_t at = e.begin; at < e.end; at += p) {
    uint64_t n = std::min(p, e.end - at);
    uint64_t got = xxh64(dst + (at - e.begin), n);
    if (got != sh.pieces[at / p])
      corrupt(msg::store_changed(
          sh.path, fmt::format("bytes {}..{} no longer match their checksum",
                               sh.raw_offset + at, sh.raw_offset + at + n)));
  }
}

// fn(bytes, count) for consecutive verified chunks of raw-block bytes
// [begin, end); chunks start at piece boundaries after the first.
template <class Fn>
void PreadShardStore::for_each_verified(const Shard& sh, uint64_t begin, uint64_t end,
                                        Fn&& fn) const {
  if (begin >= end) return;
  FGM_ASSERT(end <= sh.layout.data_bytes);
  Fd fd(sh);
  open_shard(sh, fd);
  const uint64_t p = sh.layout.piece_bytes;
  const PieceExtent whole = piece_extent(sh.layout, begin, end);
  const uint64_t batch = std::min<uint64_t>(whole.bytes(), std::max<uint64_t>(p, 256 << 10) / p * p);
  std::vector<uint8_t> scratch(batch);  // bounded: at most 256 KiB or one piece
  for (uint64_t at = whole.begin; at < whole.end; at += batch) {
    PieceExtent e{at, std::min(at + batch, whole.end)};
    read_pieces(sh, fd.fd, e, scratch.data());
    uint64_t lo = std::max(begin, e.begin), hi = std::min(end, e.end);
    fn(scratch.data() + (lo - e.begin), hi - lo);
  }
}

void PreadShardStore::read_exact(const Shard& sh, uint64_t begin, uint64_t end, void* dst) const {
  auto* out = static_cast<uint8_t*>(dst);
  for_each_verified(sh, begin, end, [&](const uint8_t* p, uint64_t n) {
    std::memcpy(out, p, n);
    out += n;
  });
}

// Sizes of a group of stored block parts merged into one view.
struct PartCounts {
  uint64_t columns = 0, cells = 0, nnz = 0;
  bool unit = true;
  void add(const store::BlockEntry& e) {
    columns += e.column_count;
    cells += e.cell_count;
    nnz += e.nnz;
    unit = unit && e.unit_values();
  }
};

// What read_part needs for the parts of entries [first, first + count) that
// `keep` selects: each part's whole pieces, then (several parts) the merged view.
template <class Keep>
uint64_t part_read_bytes(const Shard& sh, uint64_t first, uint64_t count, Keep&& keep) {
  uint64_t bytes = 0, parts = 0;
  PartCounts merged;
  for (uint64_t b = first; b < first + count; ++b) {
    const store::BlockEntry& e = sh.blocks[b];
    if (!keep(e)) continue;
    bytes += store::align_up(piece_extent(sh.layout, e.offset, e.offset + e.bytes).bytes());
    merged.add(e);
    ++parts;
  }
  if (parts > 1)
    bytes += store::block_layout(merged.columns, merged.cells, merged.nnz, sh.blocks[first].tile_count).bytes;
  return bytes;
}

bool is_head(const store::BlockEntry& e) { return !e.tail_part(); }
bool is_tail(const store::BlockEntry& e) { return e.tail_part(); }

BlockRef PreadShardStore::ref_of(uint32_t shard, uint64_t first, uint64_t count) const {
  const Shard& sh = shards_[shard];
  BlockRef r;
  r.shard = shard;
  r.first_block = first;
  r.block_count = count;
  r.first_column = sh.blocks[first].first_column;
  r.end_column = sh.blocks[first + count - 1].end_column;
  PartCounts all;
  const uint64_t tiles = sh.blocks[first].tile_count;
  bool any_tail = false;
  for (uint64_t b = first; b < first + count; ++b) {
    const store::BlockEntry& e = sh.blocks[b];
    all.add(e);
    any_tail = any_tail || e.tail_part();
  }
  // Parts are read apart for one stored block only: in a group of several,
  // each part's whole pieces would cost more than the tails save.
  const bool one_unit = unit_end(sh, first) == first + count;
  if (one_unit && any_tail) {
    const store::BlockEntry& tail = sh.blocks[first + 1];
    r.has_tail = true;
    r.tail_columns = tail.column_count;
    r.tail_bound = tail.tail_bound();
  }
  r.column_count = all.columns;
  r.nnz = all.nnz;
  r.bytes = store::block_array_bytes(r.column_count, all.cells, r.nnz, tiles);
  // One stored block (a head and its tail at most) keeps shared ones; a
  // merged group of several has its values in the read buffer.
  r.unit_values = one_unit && all.unit;
  if (r.unit_values) r.bytes -= 4 * r.nnz;
  auto [begin, end] = blocks_extent(sh, first, count);
  r.read_bytes = store::align_up(piece_extent(sh.layout, begin, end).bytes());
  // Several parts are merged into one view after the read (with a tail: and
  // a column map, 4 bytes a column).
  if (count > 1)
    r.read_bytes += store::block_layout(r.column_count, all.cells, r.nnz, tiles, r.unit_values).bytes +
                    (any_tail ? store::align_up(4 * r.column_count) : 0);
  if (r.has_tail) {
    r.head_read_bytes = part_read_bytes(sh, first, count, is_head);
    r.read_bytes = std::max(r.read_bytes, r.head_read_bytes + part_read_bytes(sh, first, count, is_tail));
  }
  return r;
}

std::vector<BlockRef> PreadShardStore::plan_blocks(uint64_t target_bytes) const {
  std::vector<BlockRef> refs;
  for (uint32_t s = 0; s < shards_.size(); ++s) {
    const Shard& sh = shards_[s];
    // Stored blocks (a head and its tail are never apart) grouped while
    // their bytes stay within the target.
    for (uint64_t b = 0; b < sh.blocks.size();) {
      uint64_t end = unit_end(sh, b);
      uint64_t bytes = ref_of(s, b, end - b).bytes;
      while (end < sh.blocks.size()) {
        const uint64_t next = unit_end(sh, end);
        const uint64_t more = ref_of(s, end, next - end).bytes;
        if (bytes + more > target_bytes) break;
        bytes += more;
        end = next;
      }
      refs.push_back(ref_of(s, b, end - b));
      b = end;
    }
  }
  return refs;
}

namespace {

// The arrays of one block laid out at `out` (store::block_layout) to hold
// the columns, cells and nonzeros of `parts` together.
struct MergedArrays {
  uint64_t columns = 0, cells = 0, nnz = 0;
  store::BlockLayout layout;
  uint64_t* column_ids;
  float *col_min, *col_max, *values;
  uint32_t *tile_cells, *cell_column, *cell_ptr, *row_ids;

  // `unit_values`: every value 1, none stored.
  MergedArrays(const std::vector<const ColumnBlock*>& parts, uint8_t* out, bool unit_values) {
    for (const ColumnBlock* p : parts) {
      columns += p->column_count;
      cells += p->cell_count();
      nnz += p->nnz();
    }
    layout = store::block_layout(columns, cells, nnz, parts[0]->tile_count, unit_values);
    column_ids = reinterpret_cast<uint64_t*>(out + layout.column_ids);
    col_min = reinterpret_cast<float*>(out + layout.col_min);
    col_max = reinterpret_cast<float*>(out + layout.col_max);
    tile_cells = reinterpret_cast<uint32_t*>(out + layout.tile_cells);
    cell_column = reinterpret_cast<uint32_t*>(out + layout.cell_column);
    cell_ptr = reinterpret_cast<uint32_t*>(out + layout.cell_ptr);
    row_ids = reinterpret_cast<uint32_t*>(out + layout.row_ids);
    values = unit_values ? nullptr : reinterpret_cast<float*>(out + layout.values);
    tile_cells[0] = 0;
    cell_ptr[0] = 0;
  }

  // The merged block: `first`'s tiles and start, ending at `end_column`;
  // values `ones` when none were copied.
  ColumnBlock block(const ColumnBlock& first, uint64_t end_column, const float* ones) const {
    ColumnBlock c = first;
    c.end_column = end_column;
    c.column_count = columns;
    c.column_ids = column_ids;
    c.col_min = col_min;
    c.col_max = col_max;
    c.tile_cells = tile_cells;
    c.cell_column = cell_column;
    c.cell_ptr = cell_ptr;
    c.row_ids = row_ids;
    c.values = values ? values : ones;
    c.unit_values = values == nullptr;
    return c;
  }
};

// Concatenates the stored blocks `parts` (consecutive, same tiles) into one
// block laid out at `out`: tile by tile, each part's cells in part order, so
// columns stay increasing inside a tile.
ColumnBlock merge_blocks(const std::vector<ColumnBlock>& parts, uint8_t* out) {
  std::vector<const ColumnBlock*> all;
  for (const auto& p : parts) all.push_back(&p);
  MergedArrays m(all, out, false);
  const uint32_t T = parts[0].tile_count;
  uint64_t at = 0;
  for (const auto& p : parts) {
    std::memcpy(m.column_ids + at, p.column_ids, 8 * p.column_count);
    std::memcpy(m.col_min + at, p.col_min, 4 * p.column_count);
    std::memcpy(m.col_max + at, p.col_max, 4 * p.column_count);
    at += p.column_count;
  }
  // Per tile, each part's cells and nonzeros are contiguous: copied in bulk,
  // their pointers and columns shifted (a tall store's cells hold 1-2
  // nonzeros, so a copy per cell would cost more than the copy itself).
  uint32_t cell = 0, nz = 0;
  for (uint32_t t = 0; t < T; ++t) {
    uint32_t column_base = 0;
    for (const auto& p : parts) {
      const uint32_t x0 = p.tile_cells[t], x1 = p.tile_cells[t + 1];
      const uint32_t b = p.cell_ptr[x0], e = p.cell_ptr[x1];
      std::memcpy(m.row_ids + nz, p.row_ids + b, 4 * uint64_t{e - b});
      std::memcpy(m.values + nz, p.values + b, 4 * uint64_t{e - b});
      const uint32_t shift = nz - b;  // modulo 2^32: nz + (ptr − b)
      for (uint32_t x = x0; x < x1; ++x) {
        m.cell_column[cell + (x - x0)] = column_base + p.cell_column[x];
        m.cell_ptr[cell + (x - x0) + 1] = p.cell_ptr[x + 1] + shift;
      }
      cell += x1 - x0;
      nz += e - b;
      column_base += static_cast<uint32_t>(p.column_count);
    }
    m.tile_cells[t + 1] = cell;
  }
  return m.block(parts[0], parts.back().end_column, nullptr);
}

// One stored block of format 6 as read: its head and, if it has one, its tail.
struct StoredParts {
  ColumnBlock head;
  const ColumnBlock* tail = nullptr;
};

// Merges stored blocks whose heads and tails interleave their ids (format 6)
// into one block at `out` (block_layout, then a column map of 4 bytes a
// column): each stored block's columns in id order, and in each tile its
// head's and its tail's cells merged by column. With `ones` (one stored
// block, every value 1) the values are not copied. Returns nullptr and
// `wrong` when a head and its tail list the same id.
const char* merge_with_tails(const std::vector<StoredParts>& blocks, uint8_t* out, const float* ones,
                             ColumnBlock& merged) {
  std::vector<const ColumnBlock*> all;
  for (const auto& s : blocks)
    for (const ColumnBlock* p : {&s.head, s.tail})
      if (p) all.push_back(p);
  MergedArrays m(all, out, ones != nullptr);
  const uint32_t T = blocks[0].head.tile_count;
  // map[head columns of block 0, its tail columns, head columns of block 1, ...]
  auto* map = reinterpret_cast<uint32_t*>(out + m.layout.bytes);
  std::vector<uint64_t> head_map(blocks.size()), tail_map(blocks.size());
  uint32_t at = 0;
  uint64_t map_at = 0;
  for (size_t u = 0; u < blocks.size(); ++u) {
    const ColumnBlock& h = blocks[u].head;
    const ColumnBlock* t = blocks[u].tail;
    const uint64_t hk = h.column_count, tk = t ? t->column_count : 0;
    head_map[u] = map_at;
    tail_map[u] = map_at + hk;
    uint64_t x = 0, y = 0;
    while (x < hk || y < tk) {
      const bool from_head = y == tk || (x < hk && h.column_ids[x] < t->column_ids[y]);
      if (x < hk && y < tk && h.column_ids[x] == t->column_ids[y]) return "a column listed in a head and its tail";
      const ColumnBlock& p = from_head ? h : *t;
      const uint64_t j = from_head ? x++ : y++;
      m.column_ids[at] = p.column_ids[j];
      m.col_min[at] = p.col_min[j];
      m.col_max[at] = p.col_max[j];
      map[(from_head ? head_map[u] : tail_map[u]) + j] = at++;
    }
    map_at += hk + tk;
  }
  uint32_t cell = 0, nz = 0;
  auto copy_cell = [&](const ColumnBlock& p, uint32_t x, uint32_t column) {
    const uint32_t b = p.cell_ptr[x], n = p.cell_ptr[x + 1] - b;
    std::memcpy(m.row_ids + nz, p.row_ids + b, 4 * uint64_t{n});
    if (m.values) std::memcpy(m.values + nz, p.values + b, 4 * uint64_t{n});
    nz += n;
    m.cell_column[cell] = column;
    m.cell_ptr[++cell] = nz;
  };
  for (uint32_t t = 0; t < T; ++t) {
    for (size_t u = 0; u < blocks.size(); ++u) {
      const ColumnBlock& h = blocks[u].head;
      const ColumnBlock* tl = blocks[u].tail;
      uint32_t x = h.tile_cells[t];
      const uint32_t x1 = h.tile_cells[t + 1];
      uint32_t y = tl ? tl->tile_cells[t] : 0;
      const uint32_t y1 = tl ? tl->tile_cells[t + 1] : 0;
      while (x < x1 || y < y1) {
        const uint32_t hc = x < x1 ? map[head_map[u] + h.cell_column[x]] : UINT32_MAX;
        const uint32_t tc = y < y1 ? map[tail_map[u] + tl->cell_column[y]] : UINT32_MAX;
        if (hc < tc) copy_cell(h, x++, hc);
        else copy_cell(*tl, y++, tc);
      }
    }
    m.tile_cells[t + 1] = cell;
  }
  merged = m.block(blocks[0].head, blocks.back().head.end_column, ones);
  return nullptr;
}

}  // namespace

ColumnBlock PreadShardStore::read_block(const BlockRef& block, BlockBuffer& buffer) const {
  const Shard& sh = shard_of(block);
  auto [begin, end] = blocks_extent(sh, block.first_block, block.block_count);
  const PieceExtent e = piece_extent(sh.layout, begin, end);
  // Sized from the table, not from the caller's ref.
  const BlockRef sized = ref_of(block.shard, block.first_block, block.block_count);
  uint8_t* base = buffer.get(sized.read_bytes);
  Fd fd(sh);
  open_shard(sh, fd);
  read_pieces(sh, fd.fd, e, base);
  std::vector<ColumnBlock> parts;
  parts.reserve(block.block_count);
  for (uint64_t b = block.first_block; b < block.first_block + block.block_count; ++b) {
    const store::BlockEntry& entry = sh.blocks[b];
    ColumnBlock c = view_of(entry, info_.tile_rows, base + (entry.offset - e.begin), unit_values_.data());
    if (const char* wrong = check_block(c, entry, info_.n_rows))
      corrupt(msg::store_changed(sh.path, wrong));
    parts.push_back(c);
  }
  if (parts.size() == 1) return parts[0];
  uint8_t* out = base + store::align_up(e.bytes());
  bool any_tail = false;
  for (uint64_t b = block.first_block; b < block.first_block + block.block_count; ++b)
    any_tail = any_tail || sh.blocks[b].tail_part();
  if (!any_tail) return merge_blocks(parts, out);
  std::vector<StoredParts> stored;
  for (uint64_t b = 0; b < parts.size(); ++b) {
    if (sh.blocks[block.first_block + b].tail_part()) stored.back().tail = &parts[b];
    else stored.push_back({parts[b], nullptr});
  }
  ColumnBlock merged;
  if (const char* wrong = merge_with_tails(stored, out, sized.unit_values ? unit_values_.data() : nullptr, merged))
    corrupt(msg::store_changed(sh.path, wrong));
  return merged;
}

ColumnBlock PreadShardStore::read_part(const BlockRef& block, BlockPart part, BlockBuffer& buffer) const {
  FGM_ASSERT(block.has_tail);
  const Shard& sh = shard_of(block);
  uint8_t* base;
  if (part == BlockPart::kHead) {
    base = buffer.get(block.read_bytes);
  } else {
    FGM_ASSERT(buffer.capacity() >= block.read_bytes);  // read_head sized it; the head stays
    base = buffer.get(block.read_bytes) + block.head_read_bytes;
  }
  const bool want_tail = part == BlockPart::kTail;
  Fd fd(sh);
  open_shard(sh, fd);
  std::vector<ColumnBlock> parts;
  uint8_t* at = base;
  for (uint64_t b = block.first_block; b < block.first_block + block.block_count; ++b) {
    const store::BlockEntry& entry = sh.blocks[b];
    if (entry.tail_part() != want_tail) continue;
    const PieceExtent e = piece_extent(sh.layout, entry.offset, entry.offset + entry.bytes);
    read_pieces(sh, fd.fd, e, at);
    ColumnBlock c = view_of(entry, info_.tile_rows, at + (entry.offset - e.begin), unit_values_.data());
    if (const char* wrong = check_block(c, entry, info_.n_rows))
      corrupt(msg::store_changed(sh.path, wrong));
    parts.push_back(c);
    at += store::align_up(e.bytes());
  }
  FGM_ASSERT(!parts.empty());
  if (parts.size() == 1) return parts[0];
  return merge_blocks(parts, at);
}

void PreadShardStore::prefetch_block(const BlockRef& block) const {
  const Shard& sh = shard_of(block);
  auto [begin, end] = blocks_extent(sh, block.first_block, block.block_count);
  Fd fd(sh);
  if (fd.fd < 0) return;  // only a hint: read_block reports the error
  ::posix_fadvise(fd.fd, static_cast<off_t>(sh.raw_offset + begin),
                  static_cast<off_t>(end - begin), POSIX_FADV_WILLNEED);
}

void PreadShardStore::prefetch_head(const BlockRef& block) const {
  const Shard& sh = shard_of(block);
  Fd fd(sh);
  if (fd.fd < 0) return;
  for (uint64_t b = block.first_block; b < block.first_block + block.block_count; ++b) {
    const store::BlockEntry& entry = sh.blocks[b];
    if (entry.tail_part()) continue;
    const PieceExtent e = piece_extent(sh.layout, entry.offset, entry.offset + entry.bytes);
    ::posix_fadvise(fd.fd, static_cast<off_t>(sh.raw_offset + e.begin), static_cast<off_t>(e.bytes()),
                    POSIX_FADV_WILLNEED);
  }
}

PreadShardStore::Located PreadShardStore::locate(uint64_t feature) const {
  FGM_ASSERT(feature < info_.n_features);
  auto it = std::upper_bound(block_first_.begin(), block_first_.end(), feature);
  if (it == block_first_.begin()) return {};
  const auto [shard, b] = block_at_[static_cast<size_t>(it - block_first_.begin()) - 1];
  if (feature >= shards_[shard].blocks[b].end_column) return {};
  return {&shards_[shard], b};
}

int64_t PreadShardStore::column_index(const Shard& sh, const store::BlockEntry& e,
                                      uint64_t feature) const {
  const store::BlockLayout l = layout_of(e);
  const uint64_t ids_at = e.offset + l.column_ids;
  std::vector<uint64_t> ids(e.column_count);
  read_exact(sh, ids_at, ids_at + 8 * e.column_count, ids.data());
  auto it = std::lower_bound(ids.begin(), ids.end(), feature);
  if (it == ids.end() || *it != feature) return -1;
  return it - ids.begin();
}

// The entry of the stored block at `head` (its head, or its tail: format 6)
// listing `feature`, and the column's position there (-1: not listed).
std::pair<uint64_t, int64_t> PreadShardStore::find_column(const Shard& sh, uint64_t head, uint64_t feature) const {
  for (uint64_t b = head; b < unit_end(sh, head); ++b) {
    const int64_t k = column_index(sh, sh.blocks[b], feature);
    if (k >= 0) return {b, k};
  }
  return {head, -1};
}

// Reads only what one column needs: the block's column ids, its tile
// directory and cell columns (to find the column's cells), then those cells'
// pointers, rows and values; every piece verified, every value bounded.
void PreadShardStore::read_column(uint64_t feature, std::vector<uint32_t>& rows,
                                  std::vector<float>& values) const {
  rows.clear();
  values.clear();
  const Located at = locate(feature);
  if (!at.shard) return;
  const Shard& sh = *at.shard;
  const auto [entry, found] = find_column(sh, at.block, feature);
  if (found < 0) return;
  const store::BlockEntry& e = sh.blocks[entry];
  const auto k = static_cast<uint32_t>(found);
  const store::BlockLayout l = layout_of(e);
  const uint64_t T = e.tile_count, cells = e.cell_count;
  std::vector<uint32_t> tile_cells(T + 1), cell_column(cells);
  read_exact(sh, e.offset + l.tile_cells, e.offset + l.tile_cells + 4 * (T + 1), tile_cells.data());
  read_exact(sh, e.offset + l.cell_column, e.offset + l.cell_column + 4 * cells, cell_column.data());
  if (tile_cells[0] != 0 || tile_cells[T] != cells)
    corrupt(msg::store_changed(sh.path, "tile directory out of range"));
  for (uint64_t t = 0; t < T; ++t) {
    if (tile_cells[t + 1] < tile_cells[t] || tile_cells[t + 1] > cells)
      corrupt(msg::store_changed(sh.path, "tile directory out of range"));
    // Cell columns increase inside a tile (checked as far as the search goes).
    const uint32_t* first = cell_column.data() + tile_cells[t];
    const uint32_t* last = cell_column.data() + tile_cells[t + 1];
    const uint32_t* x = std::lower_bound(first, last, k);
    if (x == last || *x != k) continue;
    const uint64_t cell = static_cast<uint64_t>(x - cell_column.data());
    uint32_t ptr[2];
    read_exact(sh, e.offset + l.cell_ptr + 4 * cell, e.offset + l.cell_ptr + 4 * (cell + 2), ptr);
    if (ptr[1] <= ptr[0] || ptr[1] > e.nnz)
      corrupt(msg::store_changed(sh.path, "cell pointers out of range"));
    const uint64_t n = ptr[1] - ptr[0], old = rows.size();
    rows.resize(old + n);
    values.resize(old + n);
    read_exact(sh, e.offset + l.row_ids + 4 * uint64_t{ptr[0]}, e.offset + l.row_ids + 4 * uint64_t{ptr[1]},
               rows.data() + old);
    if (e.unit_values())
      std::fill(values.begin() + static_cast<int64_t>(old), values.end(), 1.0f);
    else
      read_exact(sh, e.offset + l.values + 4 * uint64_t{ptr[0]},
                 e.offset + l.values + 4 * uint64_t{ptr[1]}, values.data() + old);
    const uint64_t row_begin = t * uint64_t{info_.tile_rows};
    const uint64_t row_end = std::min<uint64_t>(row_begin + info_.tile_rows, info_.n_rows);
    for (uint64_t i = old; i < old + n; ++i)
      if (rows[i] < row_begin || rows[i] >= row_end || (i > old && rows[i] <= rows[i - 1]))
        corrupt(msg::store_changed(sh.path, "row ids outside their tile or not increasing"));
  }
}

float PreadShardStore::column_float(uint64_t feature, bool min) const {
  const Located at = locate(feature);
  if (!at.shard) return 0.0f;
  const auto [entry, k] = find_column(*at.shard, at.block, feature);
  if (k < 0) return 0.0f;
  const store::BlockEntry& e = at.shard->blocks[entry];
  const store::BlockLayout l = layout_of(e);
  const uint64_t v_at = e.offset + (min ? l.col_min : l.col_max) + 4 * static_cast<uint64_t>(k);
  float v;
  read_exact(*at.shard, v_at, v_at + 4, &v);
  return v;
}

}  // namespace

void BlockBuffer::release() noexcept {
  if (!data_) return;
  if (capacity_ >= kHugePageMin) huge_page_free(data_, capacity_);
  else ::operator delete[](data_, std::align_val_t{store::kAlign});
  data_ = nullptr;
  capacity_ = 0;
}

uint8_t* BlockBuffer::get(uint64_t bytes) {
  if (bytes > capacity_ || !data_) {
    release();
    const uint64_t capacity = std::max<uint64_t>(bytes, store::kAlign);
    // huge_page_allocate maps sizes >= kHugePageMin 2 MiB-aligned
    data_ = static_cast<uint8_t*>(capacity >= kHugePageMin
                                      ? huge_page_allocate(capacity)
                                      : ::operator new[](capacity, std::align_val_t{store::kAlign}));
    capacity_ = capacity;
  }
  return data_;
}

std::unique_ptr<ShardStore> ShardStore::open(const std::string& dir, MemoryBudget& budget) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  auto store = std::make_unique<PreadShardStore>(d, budget);
  store->load();
  return store;
}

ColumnBlock ShardStore::read_part(const BlockRef&, BlockPart, BlockBuffer&) const {
  throw Error(ErrorKind::kInternal, "read_part on a store that does not split blocks");
}

void set_recent_write_seconds(double seconds) { recent_write_seconds.store(seconds); }
uint64_t store_bytes_rehashed() { return bytes_rehashed.load(); }

}  // namespace fgm
