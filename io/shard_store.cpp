// ShardStore::open: verifies every file of a store, then maps the shards.
#include "io/shard_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "core/hash.h"
#include "core/messages.h"
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

struct MappedShard {
  std::string path;
  uint64_t first_column = 0, column_count = 0, nnz = 0, file_bytes = 0;
  uint64_t checksum = 0;  // XXH64 of the whole file, from the manifest
  void* map = nullptr;
  const uint64_t* col_ptr = nullptr;
  const uint32_t* row_ids = nullptr;
  const float* values = nullptr;
  const float* col_min = nullptr;
  const float* col_max = nullptr;
};

class MappedShardStore final : public ShardStore {
 public:
  MappedShardStore(std::string dir, MemoryBudget& budget) : dir_(std::move(dir)), budget_(budget) {}
  ~MappedShardStore() override {
    for (auto& s : shards_)
      if (s.map) ::munmap(s.map, s.file_bytes);
  }

  void load();

  const StoreInfo& info() const override { return info_; }
  const std::string& dir() const override { return dir_; }
  const int8_t* labels() const override { return labels_.data(); }

  std::vector<BlockRef> plan_blocks(uint64_t target_bytes) const override {
    std::vector<BlockRef> blocks;
    for (uint32_t s = 0; s < shards_.size(); ++s) {
      const MappedShard& sh = shards_[s];
      const uint64_t* cp = sh.col_ptr;
      for (uint64_t j = 0; j < sh.column_count;) {
        BlockRef b;
        b.shard = s;
        b.first_column = sh.first_column + j;
        b.bytes = 8;  // the closing col_ptr entry
        uint64_t start = j;
        while (j < sh.column_count) {
          uint64_t col_bytes = 16 + 8 * (cp[j + 1] - cp[j]);
          if (j > start && b.bytes + col_bytes > target_bytes) break;
          b.bytes += col_bytes;
          b.nnz += cp[j + 1] - cp[j];
          ++j;
        }
        b.column_count = j - start;
        blocks.push_back(b);
      }
      // Planning touched this shard's col_ptr through the mapping; hand the
      // pages back so they are not resident outside the budget.
      uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
      uintptr_t begin = (reinterpret_cast<uintptr_t>(cp) + page - 1) / page * page;
      uintptr_t end = reinterpret_cast<uintptr_t>(cp + sh.column_count + 1) / page * page;
      if (begin < end) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
    }
    return blocks;
  }

  ColumnBlock map_block(const BlockRef& block) const override {
    const MappedShard& sh = shard_of(block);
    uint64_t local = block.first_column - sh.first_column;
    ColumnBlock c;
    c.first_column = block.first_column;
    c.column_count = block.column_count;
    c.col_ptr = sh.col_ptr + local;
    c.row_ids = sh.row_ids;
    c.values = sh.values;
    c.col_min = sh.col_min + local;
    c.col_max = sh.col_max + local;
    return c;
  }

  void prefetch_block(const BlockRef& block) const override {
    for_each_range(block, [](uintptr_t begin, uintptr_t end, uintptr_t page) {
      begin = begin / page * page;
      end = (end + page - 1) / page * page;
      if (begin < end) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED);
    });
  }

  void release_block(const BlockRef& block) const override {
    // Only pages wholly inside the block: its neighbours may be in use.
    for_each_range(block, [](uintptr_t begin, uintptr_t end, uintptr_t page) {
      begin = (begin + page - 1) / page * page;
      end = end / page * page;
      if (begin < end) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
    });
  }

  void read_column(uint64_t feature, std::vector<uint32_t>& rows,
                   std::vector<float>& values) const override {
    const MappedShard& sh = shard_of_feature(feature);
    uint64_t local = feature - sh.first_column;
    uint64_t b = sh.col_ptr[local], e = sh.col_ptr[local + 1];
    rows.assign(sh.row_ids + b, sh.row_ids + e);
    values.assign(sh.values + b, sh.values + e);
  }
  float column_min(uint64_t feature) const override {
    const MappedShard& sh = shard_of_feature(feature);
    return sh.col_min[feature - sh.first_column];
  }
  float column_max(uint64_t feature) const override {
    const MappedShard& sh = shard_of_feature(feature);
    return sh.col_max[feature - sh.first_column];
  }

 private:
  const MappedShard& shard_of(const BlockRef& block) const {
    FGM_ASSERT(block.shard < shards_.size());
    const MappedShard& sh = shards_[block.shard];
    FGM_ASSERT(block.first_column >= sh.first_column &&
               block.first_column + block.column_count <= sh.first_column + sh.column_count);
    return sh;
  }
  const MappedShard& shard_of_feature(uint64_t feature) const {
    FGM_ASSERT(feature < info_.n_features);
    auto it = std::upper_bound(first_columns_.begin(), first_columns_.end(), feature);
    return shards_[static_cast<size_t>(it - first_columns_.begin()) - 1];
  }

  // fn(begin, end, page_size) for each byte range the block reads.
  template <class Fn>
  void for_each_range(const BlockRef& block, Fn&& fn) const {
    static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const MappedShard& sh = shard_of(block);
    uint64_t local = block.first_column - sh.first_column;
    uint64_t count = block.column_count;
    auto range = [&](const void* begin, uint64_t bytes) {
      auto b = reinterpret_cast<uintptr_t>(begin);
      if (bytes > 0) fn(b, b + bytes, page);
    };
    uint64_t nz_begin = sh.col_ptr[local], nz_end = sh.col_ptr[local + count];
    range(sh.col_ptr + local, 8 * (count + 1));
    range(sh.row_ids + nz_begin, 4 * (nz_end - nz_begin));
    range(sh.values + nz_begin, 4 * (nz_end - nz_begin));
    range(sh.col_min + local, 4 * count);
    range(sh.col_max + local, 4 * count);
  }

  void load_manifest(const std::string& path, std::vector<schema::ShardEntry const*>& entries,
                     std::vector<uint8_t>& buffer);
  void verify_and_map(const std::string& manifest_path, const MappedShard& expected,
                      MappedShard& out);

  StoreInfo info_;
  std::string dir_;
  MemoryBudget& budget_;
  BudgetedArray<int8_t> labels_;
  std::vector<MappedShard> shards_;
  std::vector<uint64_t> first_columns_;
  uint64_t verify_buffer_ = 0;
};

void MappedShardStore::load() {
  verify_buffer_ = std::clamp<uint64_t>(budget_.available() / 16 / 4096 * 4096, 64 << 10, 1 << 20);
  const std::string manifest_path = dir_ + "/" + store::kManifestName;
  std::vector<uint8_t> buffer;
  std::vector<schema::ShardEntry const*> entries;
  load_manifest(manifest_path, entries, buffer);

  // Shards must tile [0, n_features) in order.
  uint64_t next = 0, nnz = 0;
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
    MappedShard s;
    s.path = dir_ + "/" + name;
    s.first_column = e->first_column();
    s.column_count = e->column_count();
    s.nnz = e->nnz();
    s.file_bytes = e->file_bytes();
    s.checksum = e->checksum();
    next += s.column_count;
    nnz += s.nnz;
    shards_.push_back(std::move(s));
  }
  if (next != info_.n_features || nnz != info_.nnz)
    corrupt(msg::store_inconsistent(
        manifest_path, fmt::format("the shards hold {} columns and {} nonzeros, the manifest "
                                   "says {} and {}",
                                   next, nnz, info_.n_features, info_.nnz)));

  entries.clear();
  buffer = {};

  for (size_t i = 0; i < shards_.size(); ++i) {
    verify_and_map(manifest_path, shards_[i], shards_[i]);
    info_.shard_bytes += shards_[i].file_bytes;
    first_columns_.push_back(shards_[i].first_column);
  }
}

void MappedShardStore::load_manifest(const std::string& path,
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

  uint64_t header_end = sizeof(store::Preamble) + buffer.size();
  if (m->labels_bytes() != info_.n_rows || m->labels_offset() < header_end ||
      m->labels_offset() % store::kAlign != 0 ||
      info_.n_rows > std::numeric_limits<uint32_t>::max() ||
      info_.n_positive + info_.n_negative != info_.n_rows)
    corrupt(msg::store_inconsistent(path, "bad label block description"));
  uint64_t expected_size = m->labels_offset() + m->labels_bytes();
  if (in.size() != expected_size) corrupt(msg::truncated_file(path, expected_size, in.size()));

  // The padding, then the labels; everything goes through the whole-file hash.
  uint8_t pad[store::kAlign];
  uint64_t pad_bytes = m->labels_offset() - header_end;
  while (pad_bytes > 0) {
    uint64_t n = std::min<uint64_t>(pad_bytes, sizeof(pad));
    in.read(pad, n);
    whole.update(pad, n);
    if (std::any_of(pad, pad + n, [](uint8_t b) { return b != 0; }))
      corrupt(msg::store_inconsistent(path, "nonzero padding before the labels"));
    pad_bytes -= n;
  }
  labels_ = BudgetedArray<int8_t>(budget_, info_.n_rows, "store labels");
  if (in.read(labels_.data(), info_.n_rows) != info_.n_rows)
    corrupt(msg::truncated_file(path, expected_size, in.size()));
  whole.update(labels_.data(), info_.n_rows);
  uint64_t labels_checksum = xxh64(labels_.data(), info_.n_rows);
  if (labels_checksum != m->labels_checksum())
    corrupt(msg::checksum_mismatch(path, "labels", m->labels_checksum(), labels_checksum));
  uint64_t positive = 0;
  for (int8_t y : labels_) {
    if (y != 1 && y != -1) corrupt(msg::store_inconsistent(path, "a label is not +1 or -1"));
    positive += y > 0;
  }
  if (positive != info_.n_positive)
    corrupt(msg::store_inconsistent(path, "label counts disagree with the labels"));
  info_.store_checksum = whole.digest();

  if (m->shards())
    for (const auto* e : *m->shards()) entries.push_back(e);
}

void MappedShardStore::verify_and_map(const std::string& manifest_path, const MappedShard& expected,
                                      MappedShard& out) {
  const std::string path = expected.path;
  const uint64_t expected_checksum = expected.checksum;
  {
    FileReader in(path, budget_, verify_buffer_, "store verification", ErrorKind::kCorruption);
    auto buffer =
        read_preamble_and_header(in, store::kShardMagic, "store shard", store::kMaxShardHeaderBytes,
                                 expected.file_bytes, nullptr);
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
    check("first column", expected.first_column, h->first_column());
    check("column count", expected.column_count, h->column_count());
    check("nnz", expected.nnz, h->nnz());
    check("row count", info_.n_rows, h->n_rows());

    store::ShardLayout l = store::shard_layout(h->column_count(), h->nnz());
    uint64_t header_end = sizeof(store::Preamble) + buffer.size();
    if (h->raw_offset() < header_end || h->raw_offset() % store::kAlign != 0 ||
        h->raw_bytes() != l.raw_bytes || h->col_ptr_offset() != l.col_ptr ||
        h->row_ids_offset() != l.row_ids || h->values_offset() != l.values ||
        h->col_min_offset() != l.col_min || h->col_max_offset() != l.col_max)
      corrupt(msg::store_inconsistent(path, "the header's array layout is wrong"));
    if (in.size() != expected.file_bytes)
      corrupt(msg::truncated_file(path, expected.file_bytes, in.size()));
    if (h->raw_offset() + h->raw_bytes() != in.size())
      corrupt(msg::truncated_file(path, h->raw_offset() + h->raw_bytes(), in.size()));

    // One sequential pass: whole-file and raw-block hashes, plus bounds checks
    // (col_ptr monotone and ending at nnz, row ids below n) so that nothing
    // read through the mapping later can point outside it.
    const uint64_t raw = h->raw_offset();
    const uint64_t cp_begin = raw + l.col_ptr, cp_end = cp_begin + 8 * (h->column_count() + 1);
    const uint64_t rows_begin = raw + l.row_ids, rows_end = rows_begin + 4 * h->nnz();
    in.seek(0);
    Xxh64 whole, raw_hash;
    uint64_t off = 0, previous = 0;
    bool bounds_ok = true;
    const uint64_t size = in.size();
    while (off < size) {
      uint64_t avail = in.refill(verify_buffer_);
      if (avail == 0) corrupt(msg::truncated_file(path, size, off));
      uint64_t n = off + avail >= size ? avail : avail / 8 * 8;
      const uint8_t* p = in.data();
      whole.update(p, n);
      if (off + n > raw) {
        uint64_t s = std::max(off, raw);
        raw_hash.update(p + (s - off), off + n - s);
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
    if (file_checksum != expected_checksum)
      corrupt(msg::checksum_mismatch(path, "shard file", expected_checksum, file_checksum));
    if (raw_hash.digest() != h->raw_checksum())
      corrupt(msg::checksum_mismatch(path, "raw block", h->raw_checksum(), raw_hash.digest()));
    if (!bounds_ok || previous != h->nnz())
      corrupt(msg::store_inconsistent(path, "column pointers or row ids out of range"));

    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) corrupt(msg::cannot_open(path, store::errno_text(errno)));
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    ::close(fd);
    if (map == MAP_FAILED)
      throw Error(ErrorKind::kIo, msg::cannot_open(path, "mmap: " + store::errno_text(err)));
    out.map = map;
    const auto* base = static_cast<const uint8_t*>(map) + raw;
    out.col_ptr = reinterpret_cast<const uint64_t*>(base + l.col_ptr);
    out.row_ids = reinterpret_cast<const uint32_t*>(base + l.row_ids);
    out.values = reinterpret_cast<const float*>(base + l.values);
    out.col_min = reinterpret_cast<const float*>(base + l.col_min);
    out.col_max = reinterpret_cast<const float*>(base + l.col_max);
  }
}

}  // namespace

std::unique_ptr<ShardStore> ShardStore::open(const std::string& dir, MemoryBudget& budget) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  auto store = std::make_unique<MappedShardStore>(d, budget);
  store->load();
  return store;
}

}  // namespace fgm
