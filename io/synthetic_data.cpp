#include "io/synthetic_data.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/messages.h"

namespace fgm {
namespace {

// Streams rows into a temporary file and renames it at the end.
class TextSink {
 public:
  explicit TextSink(const std::string& path) : path_(path), tmp_(path + ".tmp") {
    file_ = std::fopen(tmp_.c_str(), "wb");
    if (!file_) throw Error(ErrorKind::kIo, msg::cannot_write(tmp_, "cannot create"));
  }
  ~TextSink() {
    if (file_) {
      std::fclose(file_);
      std::remove(tmp_.c_str());
    }
  }
  void write(const fmt::memory_buffer& buf) {
    if (std::fwrite(buf.data(), 1, buf.size(), file_) != buf.size())
      throw Error(ErrorKind::kIo, msg::cannot_write(tmp_, "short write"));
  }
  void commit() {
    if (std::fclose(file_) != 0) throw Error(ErrorKind::kIo, msg::cannot_write(tmp_, "close failed"));
    file_ = nullptr;
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
      throw Error(ErrorKind::kIo, msg::cannot_write(path_, "rename failed"));
  }

 private:
  std::string path_, tmp_;
  FILE* file_ = nullptr;
};

void write_split(const std::string& path, uint64_t rows, const SynthOptions& o,
                 const std::vector<double>& w_dense, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  TextSink sink(path);
  fmt::memory_buffer buf, row;
  const std::string value_spec = fmt::format("{{:.{}g}}", o.digits);
  char tmp[64];
  for (uint64_t r = 0; r < rows; ++r) {
    double margin = 0;
    row.clear();
    for (uint64_t j = 0; j < o.features; ++j) {
      // The label is computed from the value as written, so text and truth agree exactly.
      auto res = fmt::format_to_n(tmp, sizeof(tmp) - 1, fmt::runtime(value_spec), normal(rng));
      double v = 0;
      std::from_chars(tmp, res.out, v);
      if (v == 0) continue;
      margin += w_dense[j] * v;
      fmt::format_to(std::back_inserter(row), " {}:", j + 1);
      row.append(tmp, res.out);
    }
    buf.clear();
    buf.append(std::string_view(margin >= 0 ? "+1" : "-1"));
    buf.append(row.data(), row.data() + row.size());
    buf.push_back('\n');
    sink.write(buf);
  }
  sink.commit();
}

}  // namespace

PlantedTruth write_gaussian_synthetic(const std::string& dir, const SynthOptions& o) {
  if (o.relevant > o.features)
    throw Error(ErrorKind::kConfig, "synth: --relevant must not exceed --features");
  std::filesystem::create_directories(dir);
  std::mt19937_64 rng(o.seed);
  std::vector<uint64_t> all(o.features);
  for (uint64_t j = 0; j < o.features; ++j) all[j] = j;
  // Partial Fisher–Yates for the planted support.
  for (uint64_t i = 0; i < o.relevant; ++i) {
    std::uniform_int_distribution<uint64_t> pick(i, o.features - 1);
    std::swap(all[i], all[pick(rng)]);
  }
  PlantedTruth truth;
  truth.ids.assign(all.begin(), all.begin() + static_cast<long>(o.relevant));
  std::sort(truth.ids.begin(), truth.ids.end());
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  std::vector<double> w(o.features, 0.0);
  for (uint64_t id : truth.ids) {
    double v = unif(rng);
    w[id] = v;
    truth.weights.push_back(v);
  }
  write_split((std::filesystem::path(dir) / "train.svm").string(), o.rows, o, w, rng);
  write_split((std::filesystem::path(dir) / "test.svm").string(), o.test_rows, o, w, rng);
  std::string t;
  for (size_t i = 0; i < truth.ids.size(); ++i)
    t += fmt::format("{} {:.17g}\n", truth.ids[i] + 1, truth.weights[i]);
  write_file_atomic((std::filesystem::path(dir) / "truth.txt").string(), t);
  return truth;
}

PlantedTruth read_truth(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorKind::kIo, msg::cannot_open(path, "no such file or not readable"));
  PlantedTruth truth;
  std::string line;
  uint64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    uint64_t id;
    double w = 0;
    if (!(ss >> id) || id == 0)
      throw Error(ErrorKind::kInvalidInput,
                  msg::location(path, line_no, 1) + "expected '<1-based feature id> <weight>'");
    ss >> w;
    truth.ids.push_back(id - 1);
    truth.weights.push_back(w);
  }
  return truth;
}

}  // namespace fgm
