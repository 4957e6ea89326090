// Store verification (ShardStore::open) and, when a store opens, every read
// the engine makes through it. The input is a small archive of the store
// directory:
//   byte 0      flags; bit 0: repair checksums (see repair_checksums)
//   then records  uint8 name length, name, uint32 (LE) data length, data
// Names other than [A-Za-z0-9._-]+ are skipped. fuzz_make_seeds writes real
// stores made by ingest in this form.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
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

// The FlatBuffer of a file with a store preamble, or nullptr if it does not verify.
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

// Makes every checksum agree with the (mutated) bytes so that mutations reach
// the consistency and bounds checks behind them: shard raw-block and header
// checksums first, then the manifest's per-shard file checksums and sizes,
// its labels checksum and its own header checksum.
void repair_checksums(Files& files) {
  namespace schema = fgm::schema;
  for (auto& [name, file] : files) {
    uint32_t n = 0;
    uint8_t* fb = header_of(file, fgm::store::kShardMagic, n);
    if (!fb) continue;
    flatbuffers::Verifier verifier(fb, n);
    if (schema::VerifySizePrefixedShardHeaderBuffer(verifier)) {
      const auto* h = schema::GetSizePrefixedShardHeader(fb);
      if (h->raw_offset() <= file.size())
        patch_u64(h, schema::ShardHeader::VT_RAW_CHECKSUM,
                  fgm::xxh64(file.data() + h->raw_offset(), file.size() - h->raw_offset()));
    }
    repair_preamble(file, fb, n);
  }
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
        if (shard == files.end()) continue;
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

// Everything the engine reads through an opened store, so that a verification
// gap shows up as an out-of-bounds read here.
uint64_t read_everything(const fgm::ShardStore& store) {
  uint64_t checksum = 0;
  const auto& info = store.info();
  for (uint64_t r = 0; r < info.n_rows; ++r) checksum += static_cast<uint8_t>(store.labels()[r]);
  for (uint64_t target : {uint64_t{64}, uint64_t{1} << 20}) {
    for (const auto& block : store.plan_blocks(target)) {
      fgm::ColumnBlock c = store.map_block(block);
      for (uint64_t k = 0; k < c.column_count; ++k) {
        for (uint64_t p = c.col_ptr[k]; p < c.col_ptr[k + 1]; ++p) {
          if (c.row_ids[p] >= info.n_rows) std::abort();
          float v = c.values[p];
          checksum += c.row_ids[p] + static_cast<uint64_t>(v != v);
        }
        checksum += static_cast<uint64_t>(c.col_min[k] <= c.col_max[k]);
      }
      store.prefetch_block(block);
      store.release_block(block);
    }
  }
  std::vector<uint32_t> rows;
  std::vector<float> values;
  for (uint64_t j = 0; j < info.n_features && j < 4096; ++j) {
    store.read_column(j, rows, values);
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
