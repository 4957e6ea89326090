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
  std::vector<flatbuffers::Offset<schema::FeatureTransform>> transforms;
  for (const auto& t : m.transforms)
    transforms.push_back(schema::CreateFeatureTransform(fb, fb.CreateString(t.name),
                                                        fb.CreateVector(t.ids),
                                                        fb.CreateVector(t.factors), t.absent_factor));
  auto root = schema::CreateModel(
      fb, kModelFormatVersion, fb.CreateString(m.engine_version), fb.CreateString(m.loss), m.C, m.B,
      m.iterations, m.has_bias, m.bias, m.n_features, m.index_base, m.positive_label,
      m.negative_label, m.store_checksum, m.input_checksum, fb.CreateString(m.input_path),
      fb.CreateString(m.feature_kind), fb.CreateVector(feats), m.gamma, m.coef0, m.levels, m.order,
      m.period, fb.CreateString(m.kernel), fb.CreateVector(m.scale_min),
      fb.CreateVector(m.scale_max), fb.CreateVector(kvs), m.created_unix, m.objective,
      fb.CreateVector(m.scale_ids), m.transforms.empty() ? 0 : fb.CreateVector(transforms));
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

// Copies a FlatBuffer vector of scalars. The verifier checks the alignment of
// a vector's length field (4 bytes) but not of its elements, so 8-byte
// elements may sit at any 4-byte boundary: copy bytes, never dereference.
// (Files are little-endian, like every target of the engine.)
template <class T>
void copy_scalars(const flatbuffers::Vector<T>* v, std::vector<T>& out) {
  static_assert(std::is_arithmetic_v<T>);
  if (!v) return;
  out.resize(v->size());
  if (!out.empty()) std::memcpy(out.data(), v->Data(), out.size() * sizeof(T));
}

}  // namespace

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
  copy_scalars(fm->scale_min(), m.scale_min);
  copy_scalars(fm->scale_max(), m.scale_max);
  copy_scalars(fm->scale_ids(), m.scale_ids);
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
      copy_scalars(t->ids(), mt.ids);
      copy_scalars(t->factors(), mt.factors);
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
