#include "synth/synthetic_data.h"

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

namespace {

// The first `count` of a uniform random permutation of 0..n-1 (partial
// Fisher–Yates), sorted.
std::vector<uint64_t> draw_subset(uint64_t n, uint64_t count, std::mt19937_64& rng) {
  std::vector<uint64_t> all(n);
  for (uint64_t j = 0; j < n; ++j) all[j] = j;
  for (uint64_t i = 0; i < count; ++i) {
    std::uniform_int_distribution<uint64_t> pick(i, n - 1);
    std::swap(all[i], all[pick(rng)]);
  }
  all.resize(count);
  std::sort(all.begin(), all.end());
  return all;
}

// Both splits from the dense w, then truth.txt ("<1-based id> <weight>").
void write_splits_and_truth(const std::string& dir, const SynthOptions& o, const PlantedTruth& truth,
                            std::mt19937_64& rng) {
  std::vector<double> w(o.features, 0.0);
  for (size_t i = 0; i < truth.ids.size(); ++i) w[truth.ids[i]] = truth.weights[i];
  write_split((std::filesystem::path(dir) / "train.svm").string(), o.rows, o, w, rng);
  write_split((std::filesystem::path(dir) / "test.svm").string(), o.test_rows, o, w, rng);
  std::string t;
  for (size_t i = 0; i < truth.ids.size(); ++i)
    t += fmt::format("{} {:.17g}\n", truth.ids[i] + 1, truth.weights[i]);
  write_file_atomic((std::filesystem::path(dir) / "truth.txt").string(), t);
}

}  // namespace

PlantedTruth write_gaussian_synthetic(const std::string& dir, const SynthOptions& o) {
  if (o.relevant > o.features)
    throw Error(ErrorKind::kConfig, "synth: --relevant must not exceed --features");
  std::filesystem::create_directories(dir);
  std::mt19937_64 rng(o.seed);
  PlantedTruth truth;
  truth.ids = draw_subset(o.features, o.relevant, rng);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  for (size_t i = 0; i < truth.ids.size(); ++i) truth.weights.push_back(unif(rng));
  write_splits_and_truth(dir, o, truth, rng);
  return truth;
}

GroupedTruth write_grouped_synthetic(const std::string& dir, const SynthOptions& o) {
  if (o.features_per_group == 0)
    throw Error(ErrorKind::kConfig, "synth: --features-per-group must be at least 1");
  if (o.group_overlap >= o.features_per_group)
    throw Error(ErrorKind::kConfig,
                fmt::format("synth: --group-overlap {} must be below --features-per-group {}", o.group_overlap,
                            o.features_per_group));
  // Windows of features_per_group starting every `stride` features, until one reaches the last feature.
  const uint64_t stride = o.features_per_group - o.group_overlap;
  const uint64_t n_groups =
      o.features <= o.features_per_group ? 1 : (o.features - o.features_per_group + stride - 1) / stride + 1;
  auto group_begin = [&](uint64_t g) { return g * stride; };
  auto group_end = [&](uint64_t g) { return std::min(o.features, g * stride + o.features_per_group); };
  if (o.relevant_groups > n_groups)
    throw Error(ErrorKind::kConfig,
                fmt::format("synth: --relevant-groups {} exceeds the {} groups of --features {} / "
                            "--features-per-group {}{}",
                            o.relevant_groups, n_groups, o.features, o.features_per_group,
                            o.group_overlap ? fmt::format(" / --group-overlap {}", o.group_overlap) : ""));
  std::filesystem::create_directories(dir);
  std::mt19937_64 rng(o.seed);
  GroupedTruth truth;
  truth.groups = draw_subset(n_groups, o.relevant_groups, rng);
  // The planted features in increasing order (the groups' union), one weight each.
  std::normal_distribution<double> normal(0.0, 1.0);
  for (uint64_t g : truth.groups) {
    const uint64_t from = truth.features.ids.empty() ? group_begin(g)
                                                     : std::max(group_begin(g), truth.features.ids.back() + 1);
    for (uint64_t j = from; j < group_end(g); ++j) {
      truth.features.ids.push_back(j);
      truth.features.weights.push_back(normal(rng));
    }
  }
  write_splits_and_truth(dir, o, truth.features, rng);
  std::string groups, planted;
  for (uint64_t g = 0; g < n_groups; ++g) {
    for (uint64_t j = group_begin(g); j < group_end(g); ++j)
      fmt::format_to(std::back_inserter(groups), "{}{}", j == group_begin(g) ? "" : " ", j + 1);
    groups += '\n';
  }
  for (uint64_t g : truth.groups) planted += fmt::format("{}\n", g + 1);
  write_file_atomic((std::filesystem::path(dir) / "groups.txt").string(), groups);
  write_file_atomic((std::filesystem::path(dir) / "planted_groups.txt").string(), planted);
  return truth;
}

PlantedTruth read_truth(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorKind::kIo, msg::cannot_open(path, "no such file or not readable"));
  PlantedTruth truth;
  std::string line;
  uint64_t line_no = 0;
  auto bad = [&](const char* expected) {
    throw Error(ErrorKind::kInvalidInput, msg::location(path, line_no, 1) + "expected " + expected);
  };
  auto read_id = [&](std::istringstream& ss, const char* expected) {
    uint64_t id = 0;
    if (!(ss >> id) || id == 0) bad(expected);
    return id - 1;
  };
  while (std::getline(in, line)) {
    ++line_no;
    line = line.substr(0, line.find('#'));
    std::istringstream ss(line);
    std::string first;
    if (!(ss >> first)) continue;  // blank or comment
    if (first == "linear") {
      const char* expected = "'linear <1-based feature id> <weight>'";
      uint64_t id = read_id(ss, expected);
      double w = 0;
      if (!(ss >> w)) bad(expected);
      truth.ids.push_back(id);
      truth.weights.push_back(w);
    } else if (first == "cross") {
      const char* expected = "'cross <1-based id> <1-based id> <weight>'";
      uint64_t j = read_id(ss, expected), k = read_id(ss, expected);
      double w = 0;
      if (!(ss >> w) || j == k) bad(expected);
      truth.cross_ids.emplace_back(std::min(j, k), std::max(j, k));
      truth.cross_weights.push_back(w);
    } else if (first == "bias") {
      if (!(ss >> truth.bias)) bad("'bias <value>'");
    } else {
      // The dense generator's "<id> <weight>" (the weight may be missing).
      std::istringstream legacy(line);
      uint64_t id = read_id(legacy, "'<1-based feature id> <weight>'");
      double w = 0;
      legacy >> w;
      truth.ids.push_back(id);
      truth.weights.push_back(w);
    }
  }
  return truth;
}

}  // namespace fgm
