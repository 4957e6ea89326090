#include "io/store_writer.h"

#include <cstring>

#include "core/error.h"
#include "core/hash.h"
#include "io/libsvm_reader.h"
#include "io/schema/manifest_generated.h"
#include "io/schema/shard_generated.h"
#include "io/shard_store.h"

namespace fgm::store {
namespace {

// Preamble (magic, version, FlatBuffer length and XXH64) followed by the buffer.
std::vector<uint8_t> framed(const char (&magic)[8], const flatbuffers::FlatBufferBuilder& fbb) {
  Preamble pre{};
  std::memcpy(pre.magic, magic, 8);
  pre.format_version = kStoreFormatVersion;
  pre.flatbuffer_bytes = fbb.GetSize();
  pre.flatbuffer_checksum = xxh64(fbb.GetBufferPointer(), fbb.GetSize());
  std::vector<uint8_t> bytes(sizeof(pre) + fbb.GetSize());
  std::memcpy(bytes.data(), &pre, sizeof(pre));
  std::memcpy(bytes.data() + sizeof(pre), fbb.GetBufferPointer(), fbb.GetSize());
  return bytes;
}

}  // namespace

std::vector<uint8_t> shard_header_bytes(uint32_t index, uint64_t first, uint64_t count,
                                        uint64_t nnz, uint64_t n_rows, uint64_t raw_offset,
                                        const ShardLayout& layout,
                                        uint64_t piece_table_checksum) {
  flatbuffers::FlatBufferBuilder fbb(512);
  fbb.ForceDefaults(true);
  auto header = schema::CreateShardHeader(
      fbb, kStoreFormatVersion, index, first, count, nnz, n_rows, raw_offset, layout.raw_bytes,
      layout.col_ptr, layout.row_ids, layout.values, layout.col_min, layout.col_max,
      layout.piece_bytes, layout.piece_count, layout.piece_table, piece_table_checksum);
  schema::FinishSizePrefixedShardHeaderBuffer(fbb, header);
  return framed(kShardMagic, fbb);
}

uint64_t shard_raw_offset() {
  return align_up(shard_header_bytes(0, 0, 0, 0, 0, 0, shard_layout(0, 0), 0).size());
}

std::vector<uint16_t> class_indices_of_signs(const int8_t* labels, uint64_t n) {
  std::vector<uint16_t> classes(n);
  for (uint64_t i = 0; i < n; ++i) classes[i] = labels[i] > 0 ? 1 : 0;
  return classes;
}

std::vector<uint8_t> manifest_bytes(const ManifestFields& m) {
  flatbuffers::FlatBufferBuilder fbb(1024 + 128 * m.shards.size());
  fbb.ForceDefaults(true);
  std::vector<flatbuffers::Offset<schema::ShardEntry>> entries;
  entries.reserve(m.shards.size());
  for (const auto& s : m.shards)
    entries.push_back(schema::CreateShardEntry(fbb, fbb.CreateString(s.file_name), s.first_column,
                                               s.column_count, s.nnz, s.file_bytes, s.checksum));
  auto shards = fbb.CreateVector(entries);
  auto engine_version = fbb.CreateString(FGM_VERSION);
  auto positive_text = fbb.CreateString(label_text(m.positive_value));
  auto negative_text = fbb.CreateString(label_text(m.negative_value));
  auto input_path = fbb.CreateString(m.input_path);
  FGM_ASSERT(m.class_values.size() == m.class_counts.size());
  auto class_values = fbb.CreateVector(m.class_values);
  std::vector<flatbuffers::Offset<flatbuffers::String>> texts;
  for (double v : m.class_values) texts.push_back(fbb.CreateString(label_text(v)));
  auto class_texts = fbb.CreateVector(texts);
  auto class_counts = fbb.CreateVector(m.class_counts);
  auto root = schema::CreateManifest(
      fbb, kStoreFormatVersion, engine_version, m.n_rows, m.n_features, m.nnz, m.n_positive,
      m.n_negative, m.positive_value, m.negative_value, positive_text, negative_text, m.index_base,
      m.declared_features, input_path, m.input_bytes, m.input_checksum, m.explicit_zeros,
      m.shard_target_bytes, shards, m.labels_offset, m.n_rows, m.labels_checksum, class_values,
      class_texts, class_counts, classes_offset(m), 2 * m.n_rows, m.classes_checksum);
  schema::FinishSizePrefixedManifestBuffer(fbb, root);
  return framed(kManifestMagic, fbb);
}

}  // namespace fgm::store
