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
  flatbuffers::FlatBufferBuilder fb(1024 + m.features.size() * 64 + m.kernel_svm.bytes());
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
  flatbuffers::Offset<schema::KernelSvm> kernel_svm;
  if (m.has_kernel_svm()) {
    const KernelSvm& k = m.kernel_svm;
    kernel_svm = schema::CreateKernelSvm(fb, fb.CreateString(k.kernel), fb.CreateVector(k.feature_ids),
                                         fb.CreateVector(k.kernel_weights), fb.CreateVector(k.bandwidths),
                                         fb.CreateVector(k.support_vectors), fb.CreateVector(k.dual_coefs),
                                         k.training_rows);
  }
  auto root = schema::CreateModel(
      fb, m.has_kernel_svm() ? kKernelModelFormatVersion : kModelFormatVersion, fb.CreateString(m.engine_version), fb.CreateString(m.loss), m.C, m.B,
      m.iterations, m.has_bias, m.bias, m.n_features, m.index_base, m.positive_label,
      m.negative_label, m.store_checksum, m.input_checksum, fb.CreateString(m.input_path),
      fb.CreateString(m.feature_kind), feats, m.gamma, m.coef0, m.levels, m.order,
      m.period, fb.CreateString(m.kernel), fb.CreateVector(m.scale_min),
      fb.CreateVector(m.scale_max), fb.CreateVector(kvs), m.created_unix, m.objective,
      fb.CreateVector(m.scale_ids), m.transforms.empty() ? 0 : fb.CreateVector(transforms),
      classes, fb.CreateString(m.solver), kernel_svm);
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
std::vector<uint8_t> read_model_bytes(const std::string& path, MemoryBudget* budget = nullptr) {
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
  // With a budget the buffer is reserved (returned when decoding is done).
  Reservation buffer_memory;
  if (budget) buffer_memory = budget->reserve(len, "model file buffer", "raise --memory-budget");
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

// A kernel SVM's arrays, checked for consistency: a known kernel, one weight
// and bandwidth (finite, > 0) per selected feature (strictly increasing ids
// inside the model's width), one support vector of that many finite values
// per finite dual coefficient, and no linear weights beside it.
static void decode_kernel_svm(const schema::KernelSvm& k, Model& m, const std::string& path) {
  auto bad = [&](const std::string& what) {
    throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "kernel SVM: " + what));
  };
  KernelSvm& out = m.kernel_svm;
  out.kernel = k.kernel() ? k.kernel()->str() : std::string();
  if (out.kernel != "rbf") bad("unknown kernel '" + out.kernel + "'");
  out.feature_ids = copy_scalars(k.feature_ids());
  out.kernel_weights = copy_scalars(k.kernel_weights());
  out.bandwidths = copy_scalars(k.bandwidths());
  out.support_vectors = copy_scalars(k.support_vectors());
  out.dual_coefs = copy_scalars(k.dual_coefs());
  out.training_rows = k.training_rows();
  const size_t features = out.feature_ids.size();
  if (out.kernel_weights.size() != features || out.bandwidths.size() != features)
    bad("kernel weights or bandwidths do not match the selected features");
  for (size_t j = 0; j < features; ++j) {
    if (out.feature_ids[j] >= m.n_features || (j > 0 && out.feature_ids[j] <= out.feature_ids[j - 1]))
      bad("feature ids are not increasing within the model's width");
    if (!(std::isfinite(out.kernel_weights[j]) && out.kernel_weights[j] > 0 && std::isfinite(out.bandwidths[j]) &&
          out.bandwidths[j] > 0))
      bad("a kernel weight or bandwidth is not a positive finite number");
  }
  if (out.support_vectors.size() != out.n_support() * features)
    bad("support vectors do not have one value per selected feature");
  if (out.n_support() > out.training_rows) bad("more support vectors than training rows");
  if (features == 0 && out.n_support() > 0) bad("support vectors without selected features");
  for (float v : out.support_vectors)
    if (!std::isfinite(v)) bad("a support vector value is not finite");
  for (double c : out.dual_coefs)
    if (!std::isfinite(c)) bad("a dual coefficient is not finite");
  if (!std::isfinite(m.bias)) bad("the bias is not finite");
  if (!m.features.empty() || m.multiclass()) bad("linear weights beside the kernel SVM");
}

// The model in a checked FlatBuffer (`buf` aligned for every scalar it holds).
// With a budget, a kernel SVM's decoded arrays are reserved in *kernel_memory.
static Model decode_flatbuffer(const uint8_t* buf, size_t len, const std::string& path,
                               MemoryBudget* kernel_budget = nullptr, Reservation* kernel_memory = nullptr);

Model read_model(const std::string& path) {
  const std::vector<uint8_t> data = read_model_bytes(path);
  return decode_flatbuffer(data.data(), data.size(), path);
}

Model read_model(const std::string& path, MemoryBudget& budget, Reservation& kernel_memory) {
  const std::vector<uint8_t> data = read_model_bytes(path, &budget);
  return decode_flatbuffer(data.data(), data.size(), path, &budget, &kernel_memory);
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

static Model decode_flatbuffer(const uint8_t* buf, size_t len, const std::string& path,
                               MemoryBudget* kernel_budget, Reservation* kernel_memory) {
  flatbuffers::Verifier verifier(buf, len);
  if (!schema::VerifyModelBuffer(verifier))
    throw Error(ErrorKind::kCorruption, msg::not_a_model(path, "invalid FlatBuffer"));
  const schema::Model* fm = schema::GetModel(buf);
  if (fm->format_version() != kModelFormatVersion && fm->format_version() != kKernelModelFormatVersion)
    throw Error(ErrorKind::kCorruption,
                msg::version_mismatch(path, fm->format_version(), kKernelModelFormatVersion));
  if ((fm->format_version() == kKernelModelFormatVersion) != (fm->kernel_svm() != nullptr))
    throw Error(ErrorKind::kCorruption,
                msg::not_a_model(path, fm->kernel_svm() ? "a kernel SVM in a version-1 model"
                                                        : "a version-2 model without its kernel SVM"));
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
  if (fm->kernel_svm()) {
    if (kernel_budget) {
      const auto* k = fm->kernel_svm();
      const uint64_t bytes = (k->feature_ids() ? k->feature_ids()->size() * 24 : 0) +
                             (k->support_vectors() ? k->support_vectors()->size() * sizeof(float) : 0) +
                             (k->dual_coefs() ? k->dual_coefs()->size() * sizeof(double) : 0);
      *kernel_memory = kernel_budget->reserve(bytes, "kernel SVM of the model (support vectors)",
                                              "raise --memory-budget");
    }
    decode_kernel_svm(*fm->kernel_svm(), m, path);
  }
  return m;
}

}  // namespace fgm
