// Helpers shared by the test suites: temporary directories and an independent
// in-memory LIBSVM parser used as the oracle for out-of-core paths.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace fgm::test {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag = "fgm-test") {
    static std::atomic<int> counter{0};
    path = std::filesystem::temp_directory_path() /
           (tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    return file(name);
  }
};

// Dense-row view of a small LIBSVM file, parsed with the standard library only.
struct InMemoryData {
  std::vector<double> labels;
  std::vector<std::map<uint64_t, double>> rows;  // 0-based feature -> value
  uint64_t width = 0;
};

inline InMemoryData parse_libsvm_simple(const std::string& path, int index_base = 1) {
  InMemoryData d;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    double label;
    if (!(ss >> label)) continue;
    d.labels.push_back(label);
    d.rows.emplace_back();
    std::string tok;
    while (ss >> tok) {
      auto colon = tok.find(':');
      uint64_t idx = std::stoull(tok.substr(0, colon)) - index_base;
      double v = std::stod(tok.substr(colon + 1));
      if (v != 0) d.rows.back()[idx] = v;
      d.width = std::max(d.width, idx + 1);
    }
  }
  return d;
}

// Random sparse binary-classification text with a planted linear rule.
inline std::string random_libsvm(uint64_t rows, uint64_t features, double density, uint64_t seed,
                                 const std::vector<uint64_t>& planted = {}) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::ostringstream out;
  out.precision(6);
  for (uint64_t r = 0; r < rows; ++r) {
    std::ostringstream row;
    row.precision(6);
    double margin = 0;
    for (uint64_t j = 0; j < features; ++j) {
      bool is_planted = std::find(planted.begin(), planted.end(), j) != planted.end();
      if (!is_planted && unif(rng) >= density) continue;
      float v = static_cast<float>(normal(rng));
      if (v == 0) continue;
      row << ' ' << (j + 1) << ':' << v;
      if (is_planted) margin += static_cast<double>(v) * (1.0 + 0.1 * static_cast<double>(j % 7));
    }
    bool positive = planted.empty() ? unif(rng) < 0.4 : margin >= 0;
    out << (positive ? "+1" : "-1") << row.str() << '\n';
  }
  return out.str();
}

}  // namespace fgm::test
