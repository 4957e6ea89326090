// Kernel-SVM model files (io/model_file.h KernelSvm, format_version 2): round
// trip, linear models still written as version 1, and every inconsistency of
// the kernel arrays detected as corruption naming the file.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <flatbuffers/flatbuffers.h>

#include "core/error.h"
#include "core/hash.h"
#include "io/model_file.h"
#include "io/schema/model_generated.h"
#include "tests/test_util.h"

namespace {

fgm::Model kernel_model() {
  fgm::Model m;
  m.solver = "pnorm_kta";
  m.n_features = 10;
  m.has_bias = true;
  m.bias = -0.375;
  m.C = 4;
  fgm::KernelSvm& k = m.kernel_svm;
  k.kernel = "rbf";
  k.feature_ids = {1, 4, 9};
  k.kernel_weights = {0.5, 1.25, 2.0};
  k.bandwidths = {0.75, 1.0, 3.5};
  k.support_vectors = {0, 1, 2, 3, 4, 5};  // two support vectors
  k.dual_coefs = {1.5, -1.5};
  k.training_rows = 7;
  return m;
}

uint32_t version_of(const std::string& bytes) {
  std::vector<uint8_t> buf(bytes.begin() + 24, bytes.end());
  return fgm::schema::GetModel(buf.data())->format_version();
}

// A model file whose FlatBuffer is built by hand (version and kernel table chosen).
std::string hand_built(uint32_t version, bool with_kernel) {
  flatbuffers::FlatBufferBuilder fb;
  flatbuffers::Offset<fgm::schema::KernelSvm> kernel;
  if (with_kernel) {
    std::vector<uint64_t> ids = {0};
    std::vector<double> one = {1.0};
    kernel = fgm::schema::CreateKernelSvm(fb, fb.CreateString("rbf"), fb.CreateVector(ids), fb.CreateVector(one),
                                          fb.CreateVector(one), fb.CreateVector(std::vector<float>{}),
                                          fb.CreateVector(std::vector<double>{}), 3);
  }
  fgm::schema::ModelBuilder b(fb);
  b.add_format_version(version);
  b.add_n_features(5);
  if (with_kernel) b.add_kernel_svm(kernel);
  fgm::schema::FinishModelBuffer(fb, b.Finish());
  std::string file = "FGMMODL1";
  const uint64_t len = fb.GetSize(), sum = fgm::xxh64(fb.GetBufferPointer(), fb.GetSize());
  file.append(reinterpret_cast<const char*>(&len), 8);
  file.append(reinterpret_cast<const char*>(&sum), 8);
  file.append(reinterpret_cast<const char*>(fb.GetBufferPointer()), fb.GetSize());
  return file;
}

std::string corruption_of(const std::string& bytes) {
  try {
    fgm::decode_model(bytes, "bad.fgm");
  } catch (const fgm::Error& e) {
    REQUIRE(e.kind() == fgm::ErrorKind::kCorruption);
    return e.what();
  }
  FAIL("decode_model accepted the model");
  return {};
}

}  // namespace

TEST_CASE("kernel SVM models round-trip as version 2; linear models stay version 1", "[model_file][kta]") {
  const fgm::Model m = kernel_model();
  const std::string bytes = fgm::encode_model(m);
  REQUIRE(version_of(bytes) == fgm::kKernelModelFormatVersion);
  const fgm::Model back = fgm::decode_model(bytes, "kernel.fgm");
  REQUIRE(back.has_kernel_svm());
  REQUIRE(back.kernel_svm.kernel == "rbf");
  REQUIRE(back.kernel_svm.feature_ids == m.kernel_svm.feature_ids);
  REQUIRE(back.kernel_svm.kernel_weights == m.kernel_svm.kernel_weights);
  REQUIRE(back.kernel_svm.bandwidths == m.kernel_svm.bandwidths);
  REQUIRE(back.kernel_svm.support_vectors == m.kernel_svm.support_vectors);
  REQUIRE(back.kernel_svm.dual_coefs == m.kernel_svm.dual_coefs);
  REQUIRE(back.kernel_svm.training_rows == 7);
  REQUIRE(back.bias == m.bias);

  fgm::Model linear;
  linear.n_features = 10;
  fgm::ModelFeature f;
  f.key.ids[0] = 2;
  f.weight = 0.5;
  linear.features = {f};
  const std::string linear_bytes = fgm::encode_model(linear);
  REQUIRE(version_of(linear_bytes) == fgm::kModelFormatVersion);
  REQUIRE_FALSE(fgm::decode_model(linear_bytes, "linear.fgm").has_kernel_svm());
}

TEST_CASE("read_model with a budget reserves a kernel model's arrays", "[model_file][kta]") {
  fgm::test::TempDir dir("fgm-kernel-model");
  fgm::Model m = kernel_model();
  m.kernel_svm.support_vectors.assign(3 * 2000, 0.5f);
  m.kernel_svm.dual_coefs.assign(2000, 0.0);
  m.kernel_svm.training_rows = 2000;
  fgm::write_model(dir.file("m.fgm"), m);
  fgm::MemoryBudget small(m.kernel_svm.bytes() / 2, "--memory-budget");
  fgm::Reservation held;
  try {
    fgm::read_model(dir.file("m.fgm"), small, held);
    FAIL("a budget of half the support vectors held them");
  } catch (const fgm::Error& e) {
    REQUIRE(e.kind() == fgm::ErrorKind::kOutOfMemory);
  }
  fgm::MemoryBudget enough(4 * m.kernel_svm.bytes(), "--memory-budget");
  const fgm::Model back = fgm::read_model(dir.file("m.fgm"), enough, held);
  REQUIRE(back.kernel_svm.n_support() == 2000);
  REQUIRE(enough.used() == m.kernel_svm.bytes());  // the file's buffer was returned
}

TEST_CASE("inconsistent kernel SVM models are corruption naming the file", "[model_file][kta]") {
  const std::vector<std::pair<std::string, std::function<void(fgm::Model&)>>> cases = {
      {"unknown kernel", [](fgm::Model& m) { m.kernel_svm.kernel = "poly"; }},
      {"kernel weights or bandwidths", [](fgm::Model& m) { m.kernel_svm.kernel_weights.pop_back(); }},
      {"kernel weights or bandwidths", [](fgm::Model& m) { m.kernel_svm.bandwidths.push_back(1); }},
      {"not increasing", [](fgm::Model& m) { m.kernel_svm.feature_ids = {1, 1, 9}; }},
      {"not increasing", [](fgm::Model& m) { m.kernel_svm.feature_ids = {4, 1, 9}; }},
      {"within the model's width", [](fgm::Model& m) { m.kernel_svm.feature_ids = {1, 4, 10}; }},
      {"positive finite", [](fgm::Model& m) { m.kernel_svm.bandwidths[1] = 0; }},
      {"positive finite", [](fgm::Model& m) { m.kernel_svm.kernel_weights[0] = -1; }},
      {"positive finite", [](fgm::Model& m) { m.kernel_svm.bandwidths[2] = std::nan(""); }},
      {"one value per selected feature", [](fgm::Model& m) { m.kernel_svm.support_vectors.pop_back(); }},
      {"one value per selected feature", [](fgm::Model& m) { m.kernel_svm.dual_coefs.push_back(0); }},
      {"more support vectors than training rows", [](fgm::Model& m) { m.kernel_svm.training_rows = 1; }},
      {"support vector value is not finite",
       [](fgm::Model& m) { m.kernel_svm.support_vectors[3] = std::numeric_limits<float>::infinity(); }},
      {"dual coefficient is not finite", [](fgm::Model& m) { m.kernel_svm.dual_coefs[1] = std::nan(""); }},
      {"bias is not finite", [](fgm::Model& m) { m.bias = std::numeric_limits<double>::infinity(); }},
      {"linear weights beside",
       [](fgm::Model& m) {
         fgm::ModelFeature f;
         f.weight = 1;
         m.features = {f};
       }},
      {"without selected features",
       [](fgm::Model& m) {
         m.kernel_svm.feature_ids.clear();
         m.kernel_svm.kernel_weights.clear();
         m.kernel_svm.bandwidths.clear();
         m.kernel_svm.support_vectors.clear();
       }},
  };
  for (const auto& [needle, spoil] : cases) {
    CAPTURE(needle);
    fgm::Model m = kernel_model();
    spoil(m);
    const std::string what = corruption_of(fgm::encode_model(m));
    REQUIRE(what.find("bad.fgm") != std::string::npos);
    REQUIRE(what.find(needle) != std::string::npos);
  }
  // An empty selection with no support vectors is a valid (constant) model.
  fgm::Model empty = kernel_model();
  empty.kernel_svm.feature_ids.clear();
  empty.kernel_svm.kernel_weights.clear();
  empty.kernel_svm.bandwidths.clear();
  empty.kernel_svm.support_vectors.clear();
  empty.kernel_svm.dual_coefs.clear();
  REQUIRE(fgm::decode_model(fgm::encode_model(empty), "empty.fgm").kernel_svm.n_support() == 0);
}

TEST_CASE("the version and the kernel table must agree", "[model_file][kta]") {
  REQUIRE(corruption_of(hand_built(1, true)).find("kernel SVM in a version-1 model") != std::string::npos);
  REQUIRE(corruption_of(hand_built(2, false)).find("version-2 model without its kernel SVM") != std::string::npos);
  REQUIRE(corruption_of(hand_built(3, true)).find("version") != std::string::npos);
  REQUIRE(fgm::decode_model(hand_built(2, true), "ok.fgm").kernel_svm.feature_ids.size() == 1);
  REQUIRE_FALSE(fgm::decode_model(hand_built(1, false), "ok.fgm").has_kernel_svm());
}
