// Writes the binary seed corpora of the fuzzers, made by fgm's own writers so
// they follow the current file formats: model files (write_model) and small
// stores (ingest_libsvm, packed in the store_open fuzzer's archive form).
// Usage: fuzz_make_seeds <out_dir>  -> <out_dir>/model_reader/, <out_dir>/store_open/
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>

#include "core/memory_budget.h"
#include "io/model_file.h"
#include "io/ingest.h"
#include "io/shard_store.h"

namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void spit(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

fgm::ModelFeature feature(fgm::FeatureKind kind, uint64_t a, uint64_t b, uint32_t level, double w) {
  fgm::ModelFeature f;
  f.key.kind = kind;
  f.key.ids[0] = a;
  f.key.ids[1] = b;
  f.key.level = level;
  f.weight = w;
  f.batch = 1;
  return f;
}

void write_model_seeds(const fs::path& dir, const fs::path& tmp) {
  fgm::Model linear;
  linear.engine_version = "seed";
  linear.C = 10;
  linear.B = 2;
  linear.iterations = 1;
  linear.has_bias = true;
  linear.bias = 0.25;
  linear.n_features = 123;
  linear.input_path = "a9a";
  linear.features = {feature(fgm::FeatureKind::kLinear, 3, 0, 0, 0.5),
                     feature(fgm::FeatureKind::kLinear, 40, 0, 0, -1.5)};
  linear.config = {{"fgm.B", "2"}, {"fgm.C", "10.0"}};

  fgm::Model poly2 = linear;
  poly2.feature_kind = "poly2";
  poly2.gamma = 0.5;
  poly2.coef0 = 1;
  poly2.features = {feature(fgm::FeatureKind::kCross, 2, 7, 0, 1.0),
                    feature(fgm::FeatureKind::kSquare, 5, 0, 0, -0.125)};

  fgm::Model hik = linear;
  hik.feature_kind = "hik";
  hik.levels = 4;
  hik.features = {feature(fgm::FeatureKind::kHik, 1, 0, 2, 0.75),
                  feature(fgm::FeatureKind::kHik, 9, 0, 3, 0.5)};
  hik.scale_min = {0.0f, -1.0f};
  hik.scale_max = {1.0f, 2.0f};
  hik.scale_ids = {1, 9};

  int i = 0;
  for (const fgm::Model* m : {&linear, &poly2, &hik}) {
    fs::path file = tmp / "model.fgmm";
    fgm::write_model(file.string(), *m);
    spit(dir / ("model" + std::to_string(i++)), "\x01" + slurp(file));
  }
}

// Archive form of the store_open fuzzer: flags byte, then per file
// uint8 name length, name, uint32 (LE) length, bytes.
std::string pack_store(const fs::path& store) {
  std::string out = "\x01";
  for (const auto& entry : fs::directory_iterator(store)) {
    std::string name = entry.path().filename().string();
    std::string bytes = slurp(entry.path());
    out += static_cast<char>(name.size());
    out += name;
    uint32_t len = static_cast<uint32_t>(bytes.size());
    out.append(reinterpret_cast<const char*>(&len), 4);
    out += bytes;
  }
  return out;
}

void write_store_seeds(const fs::path& dir, const fs::path& tmp) {
  const fs::path text = tmp / "seed.svm";
  spit(text,
       "+1 1:0.5 3:1 7:-2\n"
       "-1 2:1 3:0.25\n"
       "\n"
       "1 1:1 2:2 4:0 8:3.5\n"
       "-1.0 5:1e-3\n"
       "+1 3:7 6:1 8:-1\n");
  // A store whose shard spans more than one checksum piece (16 KiB): 320 rows
  // of 10 small-integer values (ties included), about 25 KiB of data.
  const fs::path multi_piece = tmp / "multi_piece.svm";
  std::string rows;
  for (int r = 0; r < 320; ++r) {
    rows += r % 3 == 0 ? "+1" : "-1";
    for (int k = 0; k < 10; ++k)  // increasing indices k*6+1+(r mod 6)
      rows += " " + std::to_string(6 * k + 1 + r % 6) + ":" + std::to_string(1 + (r + k) % 4);
    rows += "\n";
  }
  spit(multi_piece, rows);
  // The same with column 61 in every row: above the tail threshold (16 a
  // tile, 5 tiles), so stored blocks split into a head and a tail (format 6).
  const fs::path with_tail = tmp / "with_tail.svm";
  std::string tailed;
  for (int r = 0; r < 320; ++r) {
    tailed += r % 3 == 0 ? "+1" : "-1";
    for (int k = 0; k < 10; ++k)
      tailed += " " + std::to_string(6 * k + 1 + r % 6) + ":" + std::to_string(1 + (r + k) % 4);
    tailed += " 61:1\n";
  }
  spit(with_tail, tailed);
  int i = 0;
  // (input, shard target, rows per tile, stored block target): one tile, and
  // tiles of 2 and 64 rows with several stored blocks per shard.
  struct Seed {
    fs::path input;
    uint64_t shard_target;
    uint32_t tile_rows;
    uint64_t block_bytes;
  };
  const Seed stores[] = {{text, 0, 65536, 0}, {text, 200, 2, 128}, {multi_piece, 0, 64, 2048},
                          {with_tail, 0, 64, 0}};  // one block: column 61 shares it
  for (const auto& [input, shard_target, tile_rows, block_bytes] : stores) {
    fgm::MemoryBudget budget(256ull << 20);
    fgm::IngestOptions options;
    options.shard_target_bytes = shard_target;
    options.tile_rows = tile_rows;
    options.block_bytes = block_bytes;
    const fs::path store = tmp / ("store" + std::to_string(i));
    fgm::ingest_libsvm(input.string(), store.string(), options, budget);
    spit(dir / ("store" + std::to_string(i++)), pack_store(store));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <out_dir>\n", argv[0]);
    return 2;
  }
  const fs::path out = argv[1];
  const fs::path tmp = out / "tmp";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  fs::create_directories(out / "model_reader");
  fs::create_directories(out / "store_open");
  write_model_seeds(out / "model_reader", tmp);
  write_store_seeds(out / "store_open", tmp);
  fs::remove_all(tmp);
  return 0;
}
