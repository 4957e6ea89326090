// Model file reading (io/model_file.*) on files that are not what they claim:
// crafted FlatBuffers, directories, endless devices.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/hash.h"
#include "io/model_file.h"
#include "io/schema/model_generated.h"
#include "tests/test_util.h"

using fgm::test::TempDir;

namespace {

template <class T>
void put(std::string& buf, size_t at, T value) {
  if (buf.size() < at + sizeof(T)) buf.resize(at + sizeof(T), '\0');
  std::memcpy(buf.data() + at, &value, sizeof(T));
}

// A Model FlatBuffer laid out by hand: format_version 1, scale_min {0.5},
// scale_max {2}, scale_ids {ids_value}, with the scale_ids vector's length at
// offset 112 so that its 8-byte element starts at 116, 4 bytes off alignment.
// FlatBuffers' verifier checks a vector's length field (4-byte alignment),
// not its elements, so the buffer verifies.
std::string misaligned_scale_ids_buffer(uint64_t ids_value) {
  namespace schema = fgm::schema;
  std::string buf;
  const size_t vtable = 8, table = 72;
  const uint16_t fields = schema::Model::VT_SCALE_IDS / 2 - 1;  // entries up to scale_ids
  put<uint32_t>(buf, 0, table);                                 // root table offset
  buf.replace(4, 4, "FGMD");                                    // file identifier
  put<uint16_t>(buf, vtable, static_cast<uint16_t>(4 + 2 * fields));  // vtable bytes
  put<uint16_t>(buf, vtable + 2, 20);                                 // table bytes
  for (uint16_t f = 0; f < fields; ++f) put<uint16_t>(buf, vtable + 4 + 2 * f, 0);
  put<uint16_t>(buf, vtable + schema::Model::VT_FORMAT_VERSION, 4);
  put<uint16_t>(buf, vtable + schema::Model::VT_SCALE_MIN, 8);
  put<uint16_t>(buf, vtable + schema::Model::VT_SCALE_MAX, 12);
  put<uint16_t>(buf, vtable + schema::Model::VT_SCALE_IDS, 16);
  put<int32_t>(buf, table, static_cast<int32_t>(table - vtable));
  put<uint32_t>(buf, table + 4, fgm::kModelFormatVersion);
  put<uint32_t>(buf, table + 8, 92 - (table + 8));    // -> scale_min at 92
  put<uint32_t>(buf, table + 12, 100 - (table + 12)); // -> scale_max at 100
  put<uint32_t>(buf, table + 16, 112 - (table + 16)); // -> scale_ids at 112
  put<uint32_t>(buf, 92, 1);
  put<float>(buf, 96, 0.5f);
  put<uint32_t>(buf, 100, 1);
  put<float>(buf, 104, 2.0f);
  put<uint32_t>(buf, 112, 1);
  put<uint64_t>(buf, 116, ids_value);
  return buf;
}

// Magic, length and XXH64 of `flatbuffer`, then the buffer: a valid preamble.
std::string with_preamble(const std::string& flatbuffer) {
  std::string file = "FGMMODL1";
  put<uint64_t>(file, 8, flatbuffer.size());
  put<uint64_t>(file, 16, fgm::xxh64(flatbuffer.data(), flatbuffer.size()));
  return file + flatbuffer;
}

fgm::ErrorKind error_kind_of(const std::string& path, std::string* message) {
  try {
    fgm::read_model(path);
  } catch (const fgm::Error& e) {
    *message = e.what();
    return e.kind();
  }
  FAIL("read_model accepted " << path);
  return fgm::ErrorKind::kInternal;
}

}  // namespace

TEST_CASE("read_model copies 8-byte vector elements that sit at a 4-byte boundary",
          "[model_file]") {
  // Under UBSan (the fuzz build) the old element-wise copy was a misaligned
  // 8-byte load; here the values must come out exactly as laid down.
  TempDir dir("fgm-model");
  const uint64_t id = 0x0123456789abcdefull;
  std::string path = dir.write("crafted.fgm", with_preamble(misaligned_scale_ids_buffer(id)));
  fgm::Model m = fgm::read_model(path);
  REQUIRE(m.scale_ids == std::vector<uint64_t>{id});
  REQUIRE(m.scale_min == std::vector<float>{0.5f});
  REQUIRE(m.scale_max == std::vector<float>{2.0f});
  REQUIRE(m.features.empty());
}

TEST_CASE("read_model: a directory is an I/O error naming it", "[model_file]") {
  TempDir dir("fgm-model");
  std::string message;
  REQUIRE(error_kind_of(dir.path.string(), &message) == fgm::ErrorKind::kIo);
  REQUIRE_THAT(message, Catch::Contains(dir.path.string()));
  REQUIRE_THAT(message, Catch::Contains("Is a directory"));
}

TEST_CASE("read_model checks the header before reading the rest", "[model_file]") {
  TempDir dir("fgm-model");
  std::string message;
  SECTION("a length field past the FlatBuffer limit is refused before any allocation") {
    std::string file = with_preamble(misaligned_scale_ids_buffer(1));
    put<uint64_t>(file, 8, uint64_t{1} << 40);
    std::string path = dir.write("huge.fgm", file);
    REQUIRE(error_kind_of(path, &message) == fgm::ErrorKind::kCorruption);
    REQUIRE_THAT(message, Catch::Contains(path));
  }
  SECTION("a file shorter than the length field says is truncated") {
    std::string file = with_preamble(misaligned_scale_ids_buffer(1));
    std::string path = dir.write("short.fgm", file.substr(0, file.size() - 3));
    REQUIRE(error_kind_of(path, &message) == fgm::ErrorKind::kCorruption);
    REQUIRE_THAT(message, Catch::Contains("truncated"));
  }
  SECTION("/dev/zero: refused by its magic, within a 1 GiB address-space limit") {
    // In a child process with RLIMIT_AS, so that reading the endless device
    // into memory (the old behaviour) fails fast instead of exhausting the host.
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      rlimit limit{1ull << 30, 1ull << 30};
      ::setrlimit(RLIMIT_AS, &limit);
      int code = 1;
      try {
        fgm::read_model("/dev/zero");
      } catch (const fgm::Error& e) {
        bool named = std::string(e.what()).find("/dev/zero: not an fgm model file") != std::string::npos;
        code = e.kind() == fgm::ErrorKind::kCorruption && named ? 0 : 2;
      } catch (...) {
        code = 3;  // std::bad_alloc: the device was read before its magic was checked
      }
      ::_exit(code);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
  }
}

namespace {

fgm::ModelFeature linear_feature(uint64_t id, double weight, uint32_t batch) {
  fgm::ModelFeature f;
  f.key.kind = fgm::FeatureKind::kLinear;
  f.key.ids[0] = id;
  f.weight = weight;
  f.batch = batch;
  return f;
}

}  // namespace

TEST_CASE("the solver that made a model round-trips; a model without the field reads as fgm",
          "[model_file][solver]") {
  fgm::Model model;
  model.features = {linear_feature(3, 0.5, 1)};
  REQUIRE(fgm::decode_model(fgm::encode_model(model), "default").solver == "fgm");
  model.solver = "sifs";
  REQUIRE(fgm::decode_model(fgm::encode_model(model), "sifs").solver == "sifs");
  // The hand-laid buffer of the alignment test has no solver field.
  TempDir dir("fgm-model-solver");
  REQUIRE(fgm::read_model(dir.write("old.fgm", with_preamble(misaligned_scale_ids_buffer(0)))).solver == "fgm");
}

TEST_CASE("one-vs-rest models round-trip; binary models carry no classes field",
          "[model_file][multiclass]") {
  fgm::Model binary;
  binary.features = {linear_feature(3, 0.5, 1)};
  binary.bias = 0.25;
  binary.positive_label = 2;
  binary.negative_label = 1;
  const std::string bytes = fgm::encode_model(binary);
  // The FlatBuffer of a binary model has no classes vector: what an older
  // reader expects (fields added at the end of the table are absent).
  std::vector<uint8_t> buf(bytes.begin() + 24, bytes.end());
  REQUIRE(fgm::schema::GetModel(buf.data())->classes() == nullptr);
  fgm::Model back = fgm::decode_model(bytes, "binary");
  REQUIRE(!back.multiclass());
  REQUIRE(back.features.size() == 1);
  REQUIRE(back.bias == 0.25);

  fgm::Model multi = binary;
  multi.features.clear();
  for (int k = 0; k < 3; ++k) {
    fgm::ClassModel c;
    c.label = 1.5 * k;
    c.features = {linear_feature(k, -1.0 - k, 1), linear_feature(7, 0.125 * k, 2)};
    c.bias = 0.5 * k;
    c.objective = 10.0 + k;
    c.iterations = static_cast<uint32_t>(2 + k);
    multi.classes.push_back(c);
  }
  fgm::Model got = fgm::decode_model(fgm::encode_model(multi), "multi");
  REQUIRE(got.classes.size() == 3);
  for (int k = 0; k < 3; ++k) {
    const auto& c = got.classes[k];
    REQUIRE(c.label == 1.5 * k);
    REQUIRE(c.bias == 0.5 * k);
    REQUIRE(c.objective == 10.0 + k);
    REQUIRE(c.iterations == static_cast<uint32_t>(2 + k));
    REQUIRE(c.features.size() == 2);
    REQUIRE(c.features[0].key.ids[0] == static_cast<uint64_t>(k));
    REQUIRE(c.features[0].weight == -1.0 - k);
    REQUIRE(c.features[1].batch == 2);
  }
  // class_model: class k as a binary model.
  fgm::Model two = fgm::class_model(got, 2);
  REQUIRE(!two.multiclass());
  REQUIRE(two.bias == 1.0);
  REQUIRE(two.positive_label == 1.0);
  REQUIRE(two.negative_label == -1.0);
  REQUIRE(two.features.size() == 2);

  // Classes out of order are a corrupt model.
  std::swap(multi.classes[0], multi.classes[1]);
  REQUIRE_THROWS_AS(fgm::decode_model(fgm::encode_model(multi), "bad"), fgm::Error);
}
