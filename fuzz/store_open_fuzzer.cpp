// Store verification (ShardStore::open) and, when a store opens, every read
// the engine makes through it. The input is a small archive of the store
// directory:
//   byte 0      flags; bit 0: repair checksums (see repair_checksums)
//   then records  uint8 name length, name, uint32 (LE) data length, data
// Names other than [A-Za-z0-9._-]+ are skipped. fuzz_make_seeds writes real
// stores made by ingest in this form.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <flatbuffers/flatbuffers.h>

#include "core/hash.h"
#include "core/memory_budget.h"
#include "fuzz/fuzz_support.h"
#include "io/schema/manifest_generated.h"
#include "io/schema/shard_generated.h"
#include "io/shard_store.h"
#include "io/store_format.h"

namespace {

using Files = std::map<std::string, std::string>;

bool safe_name(const std::string& name) {
  if (name.empty() || name == "." || name == "..") return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
      return false;
  return true;
}

Files unpack(const uint8_t* data, size_t size) {
  Files files;
  size_t pos = 0;
  while (pos < size && files.size() < 8) {
    size_t name_len = data[pos++];
    if (pos + name_len + 4 > size) break;
    std::string name(reinterpret_cast<const char*>(data + pos), name_len);
    pos += name_len;
    uint32_t len;
    std::memcpy(&len, data + pos, 4);
    pos += 4;
    len = static_cast<uint32_t>(std::min<size_t>(len, size - pos));
    if (safe_name(name)) files[name].assign(reinterpret_cast<const char*>(data + pos), len);
    pos += len;
  }
  return files;
}

// Writes `value` into a present uint64 field of a verified FlatBuffer table.
template <class T>
void patch_u64(const T* table, flatbuffers::voffset_t field, uint64_t value) {
  const uint8_t* at = reinterpret_cast<const flatbuffers::Table*>(table)->GetAddressOf(field);
  if (at) std::memcpy(const_cast<uint8_t*>(at), &value, 8);
}

// The FlatBuffer of a file with a store preamble, or nullptr if it is not
// inside the file.
uint8_t* header_of(std::string& file, const char* magic, uint32_t& fb_bytes) {
  if (file.size() < sizeof(fgm::store::Preamble) || std::memcmp(file.data(), magic, 8) != 0)
    return nullptr;
  fgm::store::Preamble pre;
  std::memcpy(&pre, file.data(), sizeof(pre));
  if (pre.flatbuffer_bytes < 8 || pre.flatbuffer_bytes > file.size() - sizeof(pre)) return nullptr;
  fb_bytes = pre.flatbuffer_bytes;
  return reinterpret_cast<uint8_t*>(file.data() + sizeof(pre));
}

void repair_preamble(std::string& file, const uint8_t* fb, uint32_t fb_bytes) {
  uint64_t sum = fgm::xxh64(fb, fb_bytes);
  std::memcpy(file.data() + offsetof(fgm::store::Preamble, flatbuffer_checksum), &sum, 8);
}

// Recomputes a shard's piece table from its data region as ingest does
// (PieceHasher over the layout's data region, table at the layout's offset)
// and returns the table's XXH64; nothing when the header's piece size is one
// open() rejects anyway or the layout does not lie inside the file.
std::optional<uint64_t> repair_piece_table(std::string& file, const fgm::schema::ShardHeader& h) {
  namespace store = fgm::store;
  const uint64_t piece_bytes = h.piece_bytes();
  if (piece_bytes < store::kMinPieceBytes || piece_bytes > store::kMaxPieceBytes) return {};
  // The layout open() checks the header against (fuzzed counts may wrap it).
  const uint64_t size = file.size(), raw = h.raw_offset();
  if (h.block_count() > size / sizeof(store::BlockEntry) || h.block_table_offset() > size) return {};
  const store::ShardLayout l =
      store::shard_layout(h.block_table_offset(), h.block_count(), piece_bytes);
  if (raw > size || l.data_bytes > size - raw || l.piece_table > size - raw ||
      l.piece_count > (size - raw - l.piece_table) / 8)
    return {};
  store::PieceHasher pieces(piece_bytes);
  pieces.update(file.data() + raw, l.data_bytes);
  const std::vector<uint64_t> table = pieces.finish();
  if (table.size() != l.piece_count) return {};
  if (!table.empty()) std::memcpy(file.data() + raw + l.piece_table, table.data(), 8 * table.size());
  return fgm::xxh64(table.data(), 8 * table.size());
}

// A shard file: its piece table, the table's checksum in the header, then the
// header's checksum in the preamble.
void repair_shard(std::string& file) {
  namespace schema = fgm::schema;
  uint32_t n = 0;
  uint8_t* fb = header_of(file, fgm::store::kShardMagic, n);
  if (!fb) return;
  flatbuffers::Verifier verifier(fb, n);
  if (schema::VerifySizePrefixedShardHeaderBuffer(verifier)) {
    const auto* h = schema::GetSizePrefixedShardHeader(fb);
    if (auto table_checksum = repair_piece_table(file, *h)) {
      // A fuzzed layout may put the piece table over the header itself: patch
      // only a header that still verifies after the table was written.
      flatbuffers::Verifier again(fb, n);
      if (schema::VerifySizePrefixedShardHeaderBuffer(again))
        patch_u64(schema::GetSizePrefixedShardHeader(fb), schema::ShardHeader::VT_PIECE_TABLE_CHECKSUM,
                  *table_checksum);
    }
  }
  repair_preamble(file, fb, n);
}

// The manifest, after the shards: each listed shard's file checksum and size,
// the labels checksum, then its own header checksum.
void repair_manifest(Files& files) {
  namespace schema = fgm::schema;
  auto it = files.find(fgm::store::kManifestName);
  if (it == files.end()) return;
  std::string& manifest = it->second;
  uint32_t n = 0;
  uint8_t* fb = header_of(manifest, fgm::store::kManifestMagic, n);
  if (!fb) return;
  flatbuffers::Verifier verifier(fb, n);
  if (schema::VerifySizePrefixedManifestBuffer(verifier)) {
    const auto* m = schema::GetSizePrefixedManifest(fb);
    if (m->shards())
      for (const auto* e : *m->shards()) {
        auto shard = e->file_name() ? files.find(e->file_name()->str()) : files.end();
        if (shard == files.end() || shard == it) continue;
        patch_u64(e, schema::ShardEntry::VT_CHECKSUM,
                  fgm::xxh64(shard->second.data(), shard->second.size()));
        patch_u64(e, schema::ShardEntry::VT_FILE_BYTES, shard->second.size());
      }
    if (m->labels_offset() <= manifest.size() &&
        m->labels_bytes() <= manifest.size() - m->labels_offset())
      patch_u64(m, schema::Manifest::VT_LABELS_CHECKSUM,
                fgm::xxh64(manifest.data() + m->labels_offset(), m->labels_bytes()));
  }
  repair_preamble(manifest, fb, n);
}

// Makes every checksum agree with the (mutated) bytes so that mutations reach
// the consistency and bounds checks behind them (a crafted store can carry
// valid checksums), in the order the writers compute them: every shard first
// (pieces, piece-table checksum, header checksum), then the manifest.
void repair_checksums(Files& files) {
  for (auto& [name, file] : files)
    if (name != fgm::store::kManifestName) repair_shard(file);
  repair_manifest(files);
}

// The engine's assumptions about what it reads, beyond memory safety: a
// violation means open() or a read let an inconsistency through.
void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "store_open fuzzer: %s\n", what);
    std::abort();
  }
}

// Every block of plan_blocks(target) through read_block, as the chunk
// scheduler does (buffers from a small pool, reused and grown across blocks),
// and every array of the tiled view walked the way consumers walk it.
uint64_t read_blocks(const fgm::ShardStore& store, uint64_t target) {
  const auto& info = store.info();
  fgm::BlockBuffer pool[2];
  uint64_t checksum = 0, next_column = 0, nnz = 0, columns = 0, i = 0;
  for (const auto& ref : store.plan_blocks(target)) {
    require(ref.first_column >= next_column && ref.end_column > ref.first_column &&
                ref.end_column <= info.n_features && ref.column_count > 0,
            "plan_blocks ranges overlap or leave the id space");
    next_column = ref.end_column;
    nnz += ref.nnz;
    columns += ref.column_count;
    store.prefetch_block(ref);
    fgm::BlockBuffer& buffer = pool[i++ % 2];
    if (ref.has_tail) {
      // Format 6: the head, then the tail beside it; together the block's columns.
      const fgm::ColumnBlock head = store.read_part(ref, fgm::BlockPart::kHead, buffer);
      const fgm::ColumnBlock tail = store.read_part(ref, fgm::BlockPart::kTail, buffer);
      require(head.column_count + tail.column_count == ref.column_count && tail.column_count == ref.tail_columns &&
                  head.nnz() + tail.nnz() == ref.nnz,
              "head and tail do not add up to the block");
      for (const fgm::ColumnBlock* p : {&head, &tail})
        for (uint64_t k = 0; k < p->column_count; ++k)
          require(p->column_ids[k] >= ref.first_column && p->column_ids[k] < ref.end_column,
                  "a part's column outside the block's range");
    }
    fgm::ColumnBlock c = store.read_block(ref, buffer);
    require(buffer.capacity() >= ref.read_bytes, "read_block buffer smaller than read_bytes");
    require(c.first_column == ref.first_column && c.end_column == ref.end_column &&
                c.column_count == ref.column_count && c.nnz() == ref.nnz,
            "read_block returned another block");
    for (uint64_t k = 0; k < c.column_count; ++k) {
      require(c.column_ids[k] >= c.first_column && c.column_ids[k] < c.end_column &&
                  (k == 0 || c.column_ids[k] > c.column_ids[k - 1]),
              "column ids out of order");
      checksum += static_cast<uint64_t>(c.col_min[k] <= c.col_max[k]);
    }
    require(c.tile_cells[0] == 0, "tile directory does not start at 0");
    for (uint32_t t = 0; t < c.tile_count; ++t) {
      require(c.tile_cells[t] <= c.tile_cells[t + 1], "tile directory decreases");
      for (uint32_t x = c.tile_cells[t]; x < c.tile_cells[t + 1]; ++x) {
        require(c.cell_column[x] < c.column_count, "cell column out of range");
        require(c.cell_ptr[x] < c.cell_ptr[x + 1] && c.cell_ptr[x + 1] <= c.nnz(),
                "cell pointers out of range");
        for (uint32_t p = c.cell_ptr[x]; p < c.cell_ptr[x + 1]; ++p) {
          require(c.row_ids[p] < info.n_rows && c.row_ids[p] / c.tile_rows == t,
                  "row id outside its tile");
          float v = c.values[p];
          checksum += c.row_ids[p] + static_cast<uint64_t>(v != v);
        }
      }
    }
    fgm::CscScratch scratch;
    const fgm::CscColumns cols = fgm::csc_columns(c, scratch);
    for (uint64_t k = 0; k < cols.column_count; ++k)
      for (uint32_t p = cols.col_ptr[k]; p < cols.col_ptr[k + 1]; ++p) checksum += cols.row_ids[p];
  }
  require(nnz == info.nnz && columns == info.nonempty_columns,
          "plan_blocks does not cover the store");
  return checksum;
}

// Everything the engine reads through an opened store, so that a verification
// gap shows up as an out-of-bounds read or a failed requirement here.
uint64_t read_everything(const fgm::ShardStore& store) {
  uint64_t checksum = 0;
  const auto& info = store.info();
  for (uint64_t r = 0; r < info.n_rows; ++r) checksum += static_cast<uint8_t>(store.labels()[r]);
  for (uint64_t target : {uint64_t{64}, uint64_t{4096}, uint64_t{1} << 20})
    checksum += read_blocks(store, target);
  std::vector<uint32_t> rows;
  std::vector<float> values;
  for (uint64_t j = 0; j < info.n_features && j < 4096; ++j) {
    store.read_column(j, rows, values);
    require(rows.size() == values.size(), "read_column sizes differ");
    for (uint32_t r : rows) require(r < info.n_rows, "read_column row id out of range");
    checksum += rows.size() + static_cast<uint64_t>(store.column_min(j) <= store.column_max(j));
  }
  return checksum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  Files files = unpack(data + 1, size - 1);
  if (data[0] & 1) repair_checksums(files);

  const auto dir = fgm::fuzz::scratch_dir() / "store";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const auto& [name, bytes] : files) fgm::fuzz::write_bytes(dir / name, bytes);

  fgm::fuzz::expect_clean_outcome([&] {
    fgm::MemoryBudget budget(64ull << 20);
    auto store = fgm::ShardStore::open(dir.string(), budget);
    volatile uint64_t sink = read_everything(*store);
    (void)sink;
  });
  return 0;
}
