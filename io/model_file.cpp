#include "io/model_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <type_traits>

#include <flatbuffers/flatbuffers.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/messages.h"
#include "io/framed_file.h"
#include "io/libsvm_reader.h"
#include "io/schema/model_generated.h"

namespace fgm {
namespace {

constexpr char kMagic[8] = {'F', 'G', 'M', 'M', 'O', 'D', 'L', '1'};
constexpr size_t kPreamble = 8 + 8 + 8;

}  // namespace

void write_model(const std::string& path, const Model& m) { write_file_atomic(path, encode_model(m)); }

Model class_model(const Model& model, size_t k) {
  FGM_ASSERT(k < model.classes.size());
  Model m = model;
  m.classes.clear();
  const ClassModel& c = model.classes[k];
  m.features = c.features;
  m.bias = c.bias;
  m.objective = c.objective;
  m.iterations = c.iterations;
  m.positive_label = 1;  // the relabelled problem's labels
  m.negative_label = -1;
  return m;
}

namespace {

flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<schema::ModelFeature>>> encode_features(
    flatbuffers::FlatBufferBuilder& fb, const std::vector<ModelFeature>& features) {
  std::vector<flatbuffers::Offset<schema::ModelFeature>> feats;
  feats.reserve(features.size());
  for (const auto& f : features) {
    feats.push_back(schema::CreateModelFeature(fb, static_cast<uint8_t>(f.key.kind), f.key.ids[0],
                                               f.key.ids[1], f.key.level, f.key.group, f.weight,
                                               f.batch));
  }
  return fb.CreateVector(feats);
}

}  // namespace

std::string encode_model(const Model& m) {
  flatbuffers::FlatBufferBuilder fb(1024 + m.features.size() * 64);
  auto feats = encode_features(fb, m.features);
  // A binary model writes no classes vector at all: its bytes are those of
  // a model written before classes existed.
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<schema::ClassModel>>> classes;
  if (m.multiclass()) {
    std::vector<flatbuffers::Offset<schema::ClassModel>> entries;
    for (const auto& c : m.classes) {
      auto cf = encode_features(fb, c.features);
      auto text = fb.CreateString(label_text(c.label));
      entries.push_back(
          schema::CreateClassModel(fb, c.label, text, cf, c.bias, c.objective, c.iterations));
    }
    classes = fb.CreateVector(entries);
  }
  std::vector<flatbuffers::Offset<schema::KeyValue>> kvs;
  for (const auto& [k, v] : m.config)
    kvs.push_back(schema::CreateKeyValue(fb, fb.CreateString(k), fb.CreateString(v)));
  std::vector<flatbuffers::Offset<schema::FeatureTransform>> transforms;
  for (const auto& t : m.transforms)
    transforms.push_back(schema::CreateFeatureTransform(fb, fb.CreateString(t.name),
                                                        fb.CreateVector(t.ids),
                                                        fb.CreateVector(t.factors), t.absent_factor));
  auto root = schema::CreateModel(
      fb, kModelFormatVersion, fb.CreateString(m.engine_version), fb.CreateString(m.loss), m.C, m.B,
      m.iterations, m.has_bias, m.bias, m.n_features, m.index_base, m.positive_label,
      m.negative_label, m.store_checksum, m.input_checksum, fb.CreateString(m.input_path),
      fb.CreateString(m.feature_kind), feats, m.gamma, m.coef0, m.levels, m.order,
      m.period, fb.CreateString(m.kernel), fb.CreateVector(m.scale_min),
      fb.CreateVector(m.scale_max), fb.CreateVector(kvs), m.created_unix, m.objective,
      fb.CreateVector(m.scale_ids), m.transforms.empty() ? 0 : fb.CreateVector(transforms),
      classes, fb.CreateString(m.solver));
  schema::FinishModelBuffer(fb, root);

  return frame_flatbuffer(kMagic, fb.GetBufferPointer(), fb.GetSize());
}

namespace {

// Closes the descriptor on every path out of read_model_bytes.
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

// Reads exactly n bytes (fewer only at end of file); throws kIo on a read error.
size_t read_fully(int fd, void* dst, size_t n, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    ssize_t got = ::read(fd, static_cast<char*>(dst) + done, n - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw Error(ErrorKind::kIo, msg::read_failed(path, std::strerror(errno)));
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

// The FlatBuffer of a model file. The preamble is read and checked first (magic,
// then the recorded length against the file size and the FlatBuffer limit), so
// that a wrong file (a directory, /dev/zero, a huge unrelated file) is refused
// before anything is allocated for it. The buffer is its own allocation, so it
// is aligned for every scalar the FlatBuffer holds.
std::vector<uint8_t> read_model_bytes(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorKind::kIo, msg::cannot_open(path, std::strerror(errno)));
  FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(ErrorKind::kIo, msg::read_failed(path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw Error(ErrorKind::kIo, msg::cannot_open(path, std::strerror(EISDIR)));
  const bool regular = S_ISREG(st.st_mode);

  char preamble[kPreamble];
  size_t got = read_fully(fd, preamble, kPreamble, path);
  if (got < 8 || std::memcmp(preamble, kMagic, 8) != 0)
    throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "no fgm model header"));
  if (got < kPreamble) throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "truncated"));
  uint64_t len;
  std::memcpy(&len, preamble + 8, 8);
  if (len > FLATBUFFERS_MAX_BUFFER_SIZE)
    throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "length field out of range"));
  if (regular && len != static_cast<uint64_t>(st.st_size) - kPreamble)
    throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "truncated"));

  // A pipe or device has no size to check: read len bytes, then expect the end.
  std::vector<uint8_t> buffer(len);
  char extra;
  if (read_fully(fd, buffer.data(), len, path) != len || read_fully(fd, &extra, 1, path) != 0)
    throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "truncated"));
  uint64_t sum;
  std::memcpy(&sum, preamble + 16, 8);
  if (xxh64(buffer.data(), len) != sum)
    throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "checksum mismatch"));
  return buffer;
}


}  // namespace

static void decode_features(
    const flatbuffers::Vector<flatbuffers::Offset<schema::ModelFeature>>* features,
    std::vector<ModelFeature>& out, const std::string& path) {
  if (!features) return;
  for (const auto* f : *features) {
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
    out.push_back(mf);
  }
}

// The model in a checked FlatBuffer (`buf` aligned for every scalar it holds).
static Model decode_flatbuffer(const uint8_t* buf, size_t len, const std::string& path);

Model read_model(const std::string& path) {
  const std::vector<uint8_t> data = read_model_bytes(path);
  return decode_flatbuffer(data.data(), data.size(), path);
}

// A model file's bytes held in memory (e.g. embedded in a resume checkpoint).
// The FlatBuffer is copied into its own allocation first, so its scalars are
// aligned whatever the alignment of `data`.
Model decode_model(std::string_view data, const std::string& path) {
  if (data.size() < 8 || std::memcmp(data.data(), kMagic, 8) != 0)
    throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "no fgm model header"));
  if (data.size() < kPreamble) throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "truncated"));
  uint64_t len, sum;
  std::memcpy(&len, data.data() + 8, 8);
  std::memcpy(&sum, data.data() + 16, 8);
  if (len != data.size() - kPreamble)
    throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "truncated"));
  std::vector<uint8_t> buffer(data.begin() + kPreamble, data.end());
  if (xxh64(buffer.data(), len) != sum)
    throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "checksum mismatch"));
  return decode_flatbuffer(buffer.data(), buffer.size(), path);
}

static Model decode_flatbuffer(const uint8_t* buf, size_t len, const std::string& path) {
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
  m.solver = fm->solver() ? fm->solver()->str() : std::string("fgm");
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
  decode_features(fm->features(), m.features, path);
  if (fm->classes()) {
    for (const auto* c : *fm->classes()) {
      ClassModel cm;
      cm.label = c->label();
      decode_features(c->features(), cm.features, path);
      cm.bias = c->bias();
      cm.objective = c->objective();
      cm.iterations = c->iterations();
      if (!m.classes.empty() && !(cm.label > m.classes.back().label))
        throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "class labels are not increasing"));
      m.classes.push_back(std::move(cm));
    }
    if (m.classes.size() == 1)
      throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "a one-vs-rest model with one class"));
  }
  m.gamma = fm->gamma();
  m.coef0 = fm->coef0();
  m.levels = fm->levels();
  m.order = fm->order();
  m.period = fm->period();
  m.kernel = str(fm->kernel());
  m.scale_min = copy_scalars(fm->scale_min());
  m.scale_max = copy_scalars(fm->scale_max());
  m.scale_ids = copy_scalars(fm->scale_ids());
  if (m.scale_min.size() != m.scale_max.size() ||
      (!m.scale_ids.empty() && m.scale_ids.size() != m.scale_min.size()))
    throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "scale arrays differ in length"));
  if (fm->config())
    for (const auto* kv : *fm->config()) m.config[str(kv->key())] = str(kv->value());
  m.created_unix = fm->created_unix();
  m.objective = fm->objective();
  if (fm->transforms()) {
    for (const auto* t : *fm->transforms()) {
      ModelTransform mt;
      mt.name = str(t->name());
      mt.ids = copy_scalars(t->ids());
      mt.factors = copy_scalars(t->factors());
      mt.absent_factor = t->absent_factor();
      bool finite = std::isfinite(mt.absent_factor);
      for (double f : mt.factors) finite = finite && std::isfinite(f);
      if (mt.ids.size() != mt.factors.size() || !finite ||
          !std::is_sorted(mt.ids.begin(), mt.ids.end()) ||
          std::adjacent_find(mt.ids.begin(), mt.ids.end()) != mt.ids.end())
        throw Error(ErrorKind::kCorruption,
                    msg::not_a_model(path, "transform '" + mt.name + "' has malformed statistics"));
      m.transforms.push_back(std::move(mt));
    }
  }
  return m;
}

}  // namespace fgm
