#include "io/model_file.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

#include <flatbuffers/flatbuffers.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/messages.h"
#include "io/schema/model_generated.h"

namespace fgm {
namespace {

constexpr char kMagic[8] = {'F', 'G', 'M', 'M', 'O', 'D', 'L', '1'};
constexpr size_t kPreamble = 8 + 8 + 8;

}  // namespace

void write_model(const std::string& path, const Model& m) { write_file_atomic(path, encode_model(m)); }

std::string encode_model(const Model& m) {
  flatbuffers::FlatBufferBuilder fb(1024 + m.features.size() * 64);
  std::vector<flatbuffers::Offset<schema::ModelFeature>> feats;
  feats.reserve(m.features.size());
  for (const auto& f : m.features) {
    feats.push_back(schema::CreateModelFeature(fb, static_cast<uint8_t>(f.key.kind), f.key.ids[0],
                                               f.key.ids[1], f.key.level, f.key.group, f.weight,
                                               f.batch));
  }
  std::vector<flatbuffers::Offset<schema::KeyValue>> kvs;
  for (const auto& [k, v] : m.config)
    kvs.push_back(schema::CreateKeyValue(fb, fb.CreateString(k), fb.CreateString(v)));
  auto root = schema::CreateModel(
      fb, kModelFormatVersion, fb.CreateString(m.engine_version), fb.CreateString(m.loss), m.C, m.B,
      m.iterations, m.has_bias, m.bias, m.n_features, m.index_base, m.positive_label,
      m.negative_label, m.store_checksum, m.input_checksum, fb.CreateString(m.input_path),
      fb.CreateString(m.feature_kind), fb.CreateVector(feats), m.gamma, m.coef0, m.levels, m.order,
      m.period, fb.CreateString(m.kernel), fb.CreateVector(m.scale_min),
      fb.CreateVector(m.scale_max), fb.CreateVector(kvs), m.created_unix, m.objective,
      fb.CreateVector(m.scale_ids));
  schema::FinishModelBuffer(fb, root);

  std::string out;
  out.reserve(kPreamble + fb.GetSize());
  out.append(kMagic, 8);
  uint64_t len = fb.GetSize();
  uint64_t sum = xxh64(fb.GetBufferPointer(), fb.GetSize());
  out.append(reinterpret_cast<const char*>(&len), 8);
  out.append(reinterpret_cast<const char*>(&sum), 8);
  out.append(reinterpret_cast<const char*>(fb.GetBufferPointer()), fb.GetSize());
  return out;
}

Model read_model(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIo, msg::cannot_open(path, std::strerror(errno)));
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return decode_model(data, path);
}

Model decode_model(std::string_view data, const std::string& path) {
  if (data.size() < kPreamble || std::memcmp(data.data(), kMagic, 8) != 0)
    throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "no fgm model header"));
  uint64_t len, sum;
  std::memcpy(&len, data.data() + 8, 8);
  std::memcpy(&sum, data.data() + 16, 8);
  if (len != data.size() - kPreamble)
    throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "truncated"));
  const auto* buf = reinterpret_cast<const uint8_t*>(data.data() + kPreamble);
  if (xxh64(buf, len) != sum)
    throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "checksum mismatch"));
  flatbuffers::Verifier verifier(buf, len);
  if (!schema::VerifyModelBuffer(verifier))
    throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "invalid FlatBuffer"));
  const schema::Model* fm = schema::GetModel(buf);
  if (fm->format_version() != kModelFormatVersion)
    throw Error(ErrorKind::kCorruption,
                msg::version_mismatch(path, fm->format_version(), kModelFormatVersion));
  auto str = [](const flatbuffers::String* s) { return s ? s->str() : std::string(); };
  Model m;
  m.engine_version = str(fm->engine_version());
  m.loss = str(fm->loss());
  m.C = fm->c();
  m.B = fm->b_per_iteration();
  m.iterations = fm->iterations();
  m.has_bias = fm->has_bias();
  m.bias = fm->bias();
  m.n_features = fm->n_features();
  m.index_base = fm->index_base();
  m.positive_label = fm->positive_label();
  m.negative_label = fm->negative_label();
  m.store_checksum = fm->store_checksum();
  m.input_checksum = fm->input_checksum();
  m.input_path = str(fm->input_path());
  m.feature_kind = str(fm->feature_kind());
  if (fm->features()) {
    for (const auto* f : *fm->features()) {
      ModelFeature mf;
      if (f->kind() > static_cast<uint8_t>(FeatureKind::kGroup))
        throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "unknown feature kind"));
      mf.key.kind = static_cast<FeatureKind>(f->kind());
      mf.key.ids[0] = f->id0();
      mf.key.ids[1] = f->id1();
      mf.key.level = f->level();
      mf.key.group = f->group();
      mf.weight = f->weight();
      mf.batch = f->batch();
      m.features.push_back(mf);
    }
  }
  m.gamma = fm->gamma();
  m.coef0 = fm->coef0();
  m.levels = fm->levels();
  m.order = fm->order();
  m.period = fm->period();
  m.kernel = str(fm->kernel());
  if (fm->scale_min()) m.scale_min.assign(fm->scale_min()->begin(), fm->scale_min()->end());
  if (fm->scale_max()) m.scale_max.assign(fm->scale_max()->begin(), fm->scale_max()->end());
  if (fm->scale_ids()) m.scale_ids.assign(fm->scale_ids()->begin(), fm->scale_ids()->end());
  if (m.scale_min.size() != m.scale_max.size() ||
      (!m.scale_ids.empty() && m.scale_ids.size() != m.scale_min.size()))
    throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "scale arrays differ in length"));
  if (fm->config())
    for (const auto* kv : *fm->config()) m.config[str(kv->key())] = str(kv->value());
  m.created_unix = fm->created_unix();
  m.objective = fm->objective();
  return m;
}

}  // namespace fgm
