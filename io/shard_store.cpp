// ShardStore::open verifies every file of a store; every later read goes
// through pread and is verified again against the piece checksums.
#include "io/shard_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <new>
#include <limits>

#include "core/error.h"
#include "core/hash.h"
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
  if (pre.format_version != kStoreFormatVersion)
    corrupt(msg::version_mismatch(path, pre.format_version, kStoreFormatVersion));
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

struct Shard {
  std::string path;
  uint64_t first_column = 0, column_count = 0, nnz = 0, file_bytes = 0;
  uint64_t checksum = 0;  // XXH64 of the whole file, from the manifest
  uint64_t raw_offset = 0;
  store::ShardLayout layout;
  std::vector<uint64_t> pieces;  // piece checksums, verified at open
  int fd = -1;  // open since verification (-1: opened per read, too many shards)
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

// The five arrays a block reads: raw-block byte ranges, in buffer order.
struct BlockRanges {
  uint64_t begin[5], end[5];
};

BlockRanges block_ranges(const store::ShardLayout& l, uint64_t local, uint64_t count,
                         uint64_t nz_begin, uint64_t nnz) {
  BlockRanges r{};
  r.begin[0] = l.col_ptr + 8 * local;
  r.end[0] = r.begin[0] + 8 * (count + 1);
  r.begin[1] = l.row_ids + 4 * nz_begin;
  r.end[1] = r.begin[1] + 4 * nnz;
  r.begin[2] = l.values + 4 * nz_begin;
  r.end[2] = r.begin[2] + 4 * nnz;
  r.begin[3] = l.col_min + 4 * local;
  r.end[3] = r.begin[3] + 4 * count;
  r.begin[4] = l.col_max + 4 * local;
  r.end[4] = r.begin[4] + 4 * count;
  return r;
}

uint64_t block_read_bytes(const store::ShardLayout& l, const BlockRanges& r) {
  uint64_t total = 0;
  for (int a = 0; a < 5; ++a) total += store::align_up(piece_extent(l, r.begin[a], r.end[a]).bytes());
  return total;
}

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
  void prefetch_block(const BlockRef& block) const override;
  void read_column(uint64_t feature, std::vector<uint32_t>& rows,
                   std::vector<float>& values) const override;
  float column_min(uint64_t feature) const override { return column_float(feature, true); }
  float column_max(uint64_t feature) const override { return column_float(feature, false); }

 private:
  const Shard& shard_of(const BlockRef& block) const {
    FGM_ASSERT(block.shard < shards_.size());
    const Shard& sh = shards_[block.shard];
    FGM_ASSERT(block.first_column >= sh.first_column &&
               block.first_column + block.column_count <= sh.first_column + sh.column_count &&
               block.nz_begin + block.nnz <= sh.nnz);
    return sh;
  }
  const Shard& shard_of_feature(uint64_t feature) const {
    FGM_ASSERT(feature < info_.n_features);
    auto it = std::upper_bound(first_columns_.begin(), first_columns_.end(), feature);
    return shards_[static_cast<size_t>(it - first_columns_.begin()) - 1];
  }

  int open_shard(const Shard& sh, Fd& fd) const;
  void read_pieces(const Shard& sh, int fd, const PieceExtent& e, uint8_t* dst) const;
  template <class Fn>
  void for_each_verified(const Shard& sh, uint64_t begin, uint64_t end, Fn&& fn) const;
  void read_exact(const Shard& sh, uint64_t begin, uint64_t end, void* dst) const;
  std::pair<uint64_t, uint64_t> column_range(const Shard& sh, uint64_t local) const;
  float column_float(uint64_t feature, bool min) const;
  void check_rows(const Shard& sh, const uint32_t* rows, uint64_t count) const;

  void load_manifest(const std::string& path, std::vector<schema::ShardEntry const*>& entries,
                     std::vector<uint8_t>& buffer);
  void load_class_table(const std::string& path, const schema::Manifest& m);
  void read_label_blocks(const std::string& path, const schema::Manifest& m, FileReader& in,
                         Xxh64& whole, uint64_t header_end);
  void verify(const std::string& manifest_path, Shard& shard);

  StoreInfo info_;
  std::string dir_;
  MemoryBudget& budget_;
  BudgetedArray<int8_t> labels_;
  BudgetedArray<uint16_t> classes_;
  std::vector<Shard> shards_;
  std::vector<uint64_t> first_columns_;
  Reservation shard_metadata_;  // shards_, their paths and piece tables
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
  // Shards must tile [0, n_features) in order.
  uint64_t next = 0, nnz = 0, metadata = shard_metadata_.bytes();
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto* e = entries[i];
    std::string name = e->file_name() ? e->file_name()->str() : "";
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
      corrupt(
          msg::store_inconsistent(manifest_path, fmt::format("shard {} has a bad file name", i)));
    if (e->first_column() != next || e->column_count() == 0)
      corrupt(msg::store_inconsistent(
          manifest_path,
          fmt::format("shard {} starts at column {}, expected {}", name, e->first_column(), next)));
    Shard s;
    s.path = dir_ + "/" + name;
    metadata += s.path.size();
    s.first_column = e->first_column();
    s.column_count = e->column_count();
    s.nnz = e->nnz();
    s.file_bytes = e->file_bytes();
    s.checksum = e->checksum();
    next += s.column_count;
    nnz += s.nnz;
    shards_.push_back(std::move(s));
  }
  shard_metadata_.resize(metadata);
  if (next != info_.n_features || nnz != info_.nnz)
    corrupt(msg::store_inconsistent(
        manifest_path, fmt::format("the shards hold {} columns and {} nonzeros, the manifest "
                                   "says {} and {}",
                                   next, nnz, info_.n_features, info_.nnz)));

  entries.clear();
  buffer = {};

  // Shards stay open from verification on (a store replaced by rename is then
  // still read as verified); only beyond the descriptor limit per read.
  const uint64_t keep_open = descriptors_for_shards(shards_.size());
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (i < keep_open) {
      shards_[i].fd = ::open(shards_[i].path.c_str(), O_RDONLY | O_CLOEXEC);
      if (shards_[i].fd < 0)
        throw Error(ErrorKind::kCorruption,
                    msg::cannot_open(shards_[i].path, store::errno_text(errno)));
    }
    verify(manifest_path, shards_[i]);
    info_.shard_bytes += shards_[i].file_bytes;
    first_columns_.push_back(shards_[i].first_column);
  }
  info_.tile_rows = static_cast<uint32_t>(std::clamp<uint64_t>(info_.n_rows, 1, UINT32_MAX));  // interim: one tile
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
  if (m->format_version() != kStoreFormatVersion)
    corrupt(msg::version_mismatch(path, m->format_version(), kStoreFormatVersion));

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
  FileReader in(path, budget_, verify_buffer_, "store verification", ErrorKind::kCorruption);
  auto buffer = read_preamble_and_header(in, store::kShardMagic, "store shard",
                                         store::kMaxShardHeaderBytes, shard.file_bytes, nullptr);
  flatbuffers::Verifier verifier(buffer.data(), buffer.size());
  if (!schema::VerifySizePrefixedShardHeaderBuffer(verifier))
    corrupt(msg::not_an_fgm_file(path, "store shard"));
  const schema::ShardHeader* h = schema::GetSizePrefixedShardHeader(buffer.data());
  if (h->format_version() != kStoreFormatVersion)
    corrupt(msg::version_mismatch(path, h->format_version(), kStoreFormatVersion));
  // Identity before bytes: a shard from elsewhere (swapped, copied from
  // another store) is reported as such rather than as a bad checksum.
  auto check = [&](const char* field, uint64_t want, uint64_t got) {
    if (want != got)
      corrupt(msg::manifest_mismatch(manifest_path, path, field, num(want), num(got)));
  };
  check("first column", shard.first_column, h->first_column());
  check("column count", shard.column_count, h->column_count());
  check("nnz", shard.nnz, h->nnz());
  check("row count", info_.n_rows, h->n_rows());

  const uint64_t piece_bytes = h->piece_bytes();
  if (piece_bytes < store::kMinPieceBytes || piece_bytes > store::kMaxPieceBytes ||
      piece_bytes % store::kAlign != 0)
    corrupt(msg::store_inconsistent(path, "bad checksum piece size"));
  // Every column takes at least 16 bytes of the data region (col_ptr entry,
  // min, max) and every nonzero 8: larger counts would wrap the layout's
  // offsets into a small, self-consistent layout that lies about the arrays.
  if (h->column_count() > in.size() / 16 || h->nnz() > in.size() / 8)
    corrupt(msg::store_inconsistent(path, "the header's counts do not fit in the file"));
  const store::ShardLayout l = store::shard_layout(h->column_count(), h->nnz(), piece_bytes);
  const uint64_t header_end = sizeof(store::Preamble) + buffer.size();
  if (h->raw_offset() < header_end || h->raw_offset() % store::kAlign != 0 ||
      h->raw_bytes() != l.raw_bytes || h->col_ptr_offset() != l.col_ptr ||
      h->row_ids_offset() != l.row_ids || h->values_offset() != l.values ||
      h->col_min_offset() != l.col_min || h->col_max_offset() != l.col_max ||
      h->piece_count() != l.piece_count || h->piece_table_offset() != l.piece_table)
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

  const uint64_t cp_begin = raw + l.col_ptr, cp_end = cp_begin + 8 * (h->column_count() + 1);
  const uint64_t rows_begin = raw + l.row_ids, rows_end = rows_begin + 4 * h->nnz();
  const uint64_t data_end = raw + l.data_bytes;
  in.seek(0);
  Xxh64 whole, piece;
  uint64_t off = 0, previous = 0, piece_index = 0, piece_fill = 0;
  bool bounds_ok = true;
  const uint64_t size = in.size();
  while (off < size) {
    uint64_t avail = in.refill(verify_buffer_);
    if (avail == 0) corrupt(msg::truncated_file(path, size, off));
    uint64_t n = off + avail >= size ? avail : avail / 8 * 8;
    const uint8_t* p = in.data();
    whole.update(p, n);
    // Piece checksums of the data region.
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
    for (uint64_t a = std::max(off, cp_begin); a + 8 <= std::min(off + n, cp_end); a += 8) {
      uint64_t v;
      std::memcpy(&v, p + (a - off), 8);
      if (a == cp_begin ? v != 0 : v < previous) bounds_ok = false;
      previous = v;
    }
    uint64_t lo = std::max(off, rows_begin), hi = std::min(off + n, rows_end);
    uint32_t max_row = 0;
    for (uint64_t a = lo; a + 4 <= hi; a += 4) {
      uint32_t v;
      std::memcpy(&v, p + (a - off), 4);
      max_row = std::max(max_row, v);
    }
    if (lo < hi && max_row >= info_.n_rows) bounds_ok = false;
    in.consume(n);
    off += n;
  }
  uint64_t file_checksum = whole.digest();
  if (file_checksum != shard.checksum)
    corrupt(msg::checksum_mismatch(path, "shard file", shard.checksum, file_checksum));
  if (piece_index != l.piece_count)
    corrupt(msg::store_inconsistent(path, "the piece table does not cover the data"));
  if (!bounds_ok || previous != h->nnz())
    corrupt(msg::store_inconsistent(path, "column pointers or row ids out of range"));
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
// piece against the table verified at open.
void PreadShardStore::read_pieces(const Shard& sh, int fd, const PieceExtent& e,
                                  uint8_t* dst) const {
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

void PreadShardStore::check_rows(const Shard& sh, const uint32_t* rows, uint64_t count) const {
  uint32_t max_row = 0;
  for (uint64_t i = 0; i < count; ++i) max_row = std::max(max_row, rows[i]);
  if (count > 0 && max_row >= info_.n_rows)
    corrupt(msg::store_changed(sh.path, fmt::format("row id {} is not below {}", max_row,
                                                    info_.n_rows)));
}

// Shard-local [begin, end) nonzero range of one column, verified.
std::pair<uint64_t, uint64_t> PreadShardStore::column_range(const Shard& sh, uint64_t local) const {
  uint64_t cp[2];
  read_exact(sh, sh.layout.col_ptr + 8 * local, sh.layout.col_ptr + 8 * (local + 2), cp);
  if (cp[0] > cp[1] || cp[1] > sh.nnz)
    corrupt(msg::store_changed(sh.path, "column pointers out of range"));
  return {cp[0], cp[1]};
}

std::vector<BlockRef> PreadShardStore::plan_blocks(uint64_t target_bytes) const {
  std::vector<BlockRef> blocks;
  for (uint32_t s = 0; s < shards_.size(); ++s) {
    const Shard& sh = shards_[s];
    BlockRef b;
    uint64_t entry = 0, previous = 0;  // col_ptr entries seen; the last one
    auto start_block = [&](uint64_t local) {
      b = BlockRef{};
      b.shard = s;
      b.first_column = sh.first_column + local;
      b.bytes = 8;  // the closing col_ptr entry
      b.nz_begin = previous;
    };
    auto finish_block = [&] {
      b.read_bytes = block_read_bytes(
          sh.layout, block_ranges(sh.layout, b.first_column - sh.first_column, b.column_count,
                                  b.nz_begin, b.nnz));
      blocks.push_back(b);
    };
    // Entry k of col_ptr is the end of column k-1; streamed in verified chunks.
    const uint64_t cp = sh.layout.col_ptr;
    for_each_verified(sh, cp, cp + 8 * (sh.column_count + 1), [&](const uint8_t* p, uint64_t n) {
      FGM_ASSERT(n % 8 == 0);
      for (uint64_t i = 0; i < n; i += 8, ++entry) {
        uint64_t end;
        std::memcpy(&end, p + i, 8);
        if (entry == 0) {
          if (end != 0) corrupt(msg::store_changed(sh.path, "column pointers out of range"));
          start_block(0);
          continue;
        }
        if (end < previous || end > sh.nnz)
          corrupt(msg::store_changed(sh.path, "column pointers out of range"));
        const uint64_t col_bytes = 16 + 8 * (end - previous);
        if (b.column_count > 0 && b.bytes + col_bytes > target_bytes) {
          finish_block();
          start_block(entry - 1);
        }
        b.bytes += col_bytes;
        b.nnz += end - previous;
        ++b.column_count;
        previous = end;
      }
    });
    if (previous != sh.nnz) corrupt(msg::store_changed(sh.path, "column pointers out of range"));
    finish_block();
  }
  return blocks;
}

ColumnBlock PreadShardStore::read_block(const BlockRef& block, BlockBuffer& buffer) const {
  const Shard& sh = shard_of(block);
  const store::ShardLayout& l = sh.layout;
  const uint64_t local = block.first_column - sh.first_column, count = block.column_count;
  const BlockRanges r = block_ranges(l, local, count, block.nz_begin, block.nnz);
  uint8_t* base = buffer.get(block_read_bytes(l, r));
  Fd fd(sh);
  open_shard(sh, fd);
  // Each array: read its whole pieces into the buffer, verify, point inside.
  uint8_t* at = base;
  uint8_t* array[5];
  for (int a = 0; a < 5; ++a) {
    PieceExtent e = piece_extent(l, r.begin[a], r.end[a]);
    read_pieces(sh, fd.fd, e, at);
    array[a] = at + (r.begin[a] - e.begin);
    at += store::align_up(e.bytes());
  }
  // Bounds before use: the pieces matched, but nothing read from a file
  // indexes memory unchecked.
  auto* col_ptr = reinterpret_cast<uint64_t*>(array[0]);
  if (col_ptr[0] != block.nz_begin || col_ptr[count] != block.nz_begin + block.nnz)
    corrupt(msg::store_changed(sh.path, "column pointers differ from the block plan"));
  for (uint64_t k = 0; k <= count; ++k) {
    col_ptr[k] -= block.nz_begin;
    if (k > 0 && col_ptr[k] < col_ptr[k - 1])
      corrupt(msg::store_changed(sh.path, "column pointers out of range"));
  }
  const auto* rows = reinterpret_cast<const uint32_t*>(array[1]);
  check_rows(sh, rows, block.nnz);
  // Interim: re-express the format-3 block as a one-tile ColumnBlock (only
  // non-empty columns listed; min/max compacted in place).
  auto* mins = reinterpret_cast<float*>(array[3]);
  auto* maxs = reinterpret_cast<float*>(array[4]);
  std::vector<uint64_t>& ids = buffer.interim_ids;
  ids.clear();
  std::vector<uint32_t> ptr{0};
  for (uint64_t k = 0; k < count; ++k) {
    if (col_ptr[k + 1] == col_ptr[k]) continue;
    mins[ids.size()] = mins[k];
    maxs[ids.size()] = maxs[k];
    ids.push_back(block.first_column + k);
    ptr.push_back(static_cast<uint32_t>(col_ptr[k + 1]));
  }
  const uint32_t kk = static_cast<uint32_t>(ids.size());
  std::vector<uint32_t>& u = buffer.interim_u32;
  u.assign(2 + kk + kk + 1, 0);
  u[1] = kk;
  for (uint32_t k = 0; k < kk; ++k) u[2 + k] = k;
  std::copy(ptr.begin(), ptr.end(), u.begin() + 2 + kk);
  ColumnBlock c;
  c.first_column = block.first_column;
  c.end_column = block.first_column + count;
  c.column_count = kk;
  c.column_ids = ids.data();
  c.col_min = mins;
  c.col_max = maxs;
  c.tile_rows = info_.tile_rows;
  c.tile_count = info_.n_rows == 0 ? 0 : 1;
  c.tile_cells = u.data();
  c.cell_column = u.data() + 2;
  c.cell_ptr = u.data() + 2 + kk;
  c.row_ids = rows;
  c.values = reinterpret_cast<const float*>(array[2]);
  return c;
}

void PreadShardStore::prefetch_block(const BlockRef& block) const {
  const Shard& sh = shard_of(block);
  const BlockRanges r = block_ranges(sh.layout, block.first_column - sh.first_column,
                                     block.column_count, block.nz_begin, block.nnz);
  Fd fd(sh);
  if (fd.fd < 0) return;  // only a hint: read_block reports the error
  for (int a = 0; a < 5; ++a)
    if (r.end[a] > r.begin[a])
      ::posix_fadvise(fd.fd, static_cast<off_t>(sh.raw_offset + r.begin[a]),
                      static_cast<off_t>(r.end[a] - r.begin[a]), POSIX_FADV_WILLNEED);
}

void PreadShardStore::read_column(uint64_t feature, std::vector<uint32_t>& rows,
                                  std::vector<float>& values) const {
  const Shard& sh = shard_of_feature(feature);
  auto [b, e] = column_range(sh, feature - sh.first_column);
  rows.resize(e - b);
  values.resize(e - b);
  read_exact(sh, sh.layout.row_ids + 4 * b, sh.layout.row_ids + 4 * e, rows.data());
  read_exact(sh, sh.layout.values + 4 * b, sh.layout.values + 4 * e, values.data());
  check_rows(sh, rows.data(), rows.size());
}

float PreadShardStore::column_float(uint64_t feature, bool min) const {
  const Shard& sh = shard_of_feature(feature);
  const uint64_t at = (min ? sh.layout.col_min : sh.layout.col_max) + 4 * (feature - sh.first_column);
  float v;
  read_exact(sh, at, at + 4, &v);
  return v;
}

}  // namespace

void BlockBuffer::Free::operator()(uint8_t* p) const {
  ::operator delete[](p, std::align_val_t{store::kAlign});
}

uint8_t* BlockBuffer::get(uint64_t bytes) {
  if (bytes > capacity_ || !data_) {
    data_.reset();
    capacity_ = std::max<uint64_t>(bytes, store::kAlign);
    data_.reset(static_cast<uint8_t*>(
        ::operator new[](capacity_, std::align_val_t{store::kAlign})));
  }
  return data_.get();
}

std::unique_ptr<ShardStore> ShardStore::open(const std::string& dir, MemoryBudget& budget) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  auto store = std::make_unique<PreadShardStore>(d, budget);
  store->load();
  return store;
}

}  // namespace fgm
