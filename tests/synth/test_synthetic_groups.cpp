// The grouped synthetic generator (synth/synthetic_data.h, FGM Section 8.6.1),
// checked by reading its files back with the standard library: groups.txt
// partitions the features into consecutive groups, truth.txt plants exactly the
// features of the groups planted_groups.txt names, every label is the sign of
// the planted model on the values as written, and the planted groups are drawn
// uniformly.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "synth/synthetic_data.h"
#include "tests/test_util.h"

using namespace fgm;
namespace fs = std::filesystem;

namespace {

std::vector<std::vector<uint64_t>> read_lines_of_ids(const std::string& path) {
  std::vector<std::vector<uint64_t>> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    lines.emplace_back();
    uint64_t id = 0;
    while (ss >> id) lines.back().push_back(id);
  }
  return lines;
}

std::map<uint64_t, double> read_truth_text(const std::string& path) {  // 1-based id -> weight
  std::map<uint64_t, double> w;
  std::ifstream in(path);
  uint64_t id = 0;
  double v = 0;
  while (in >> id >> v) w[id] = v;
  return w;
}

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

SynthOptions grouped_options(uint64_t features, uint64_t per_group, uint64_t relevant, uint64_t seed) {
  SynthOptions o;
  o.rows = 300;
  o.test_rows = 100;
  o.features = features;
  o.features_per_group = per_group;
  o.relevant_groups = relevant;
  o.seed = seed;
  return o;
}

}  // namespace

TEST_CASE("grouped synth: the files hold the planted group structure", "[synth][groups]") {
  test::TempDir dir("fgm-synth-groups");
  // 95 features in groups of 10: nine full groups and a last one of 5.
  const SynthOptions o = grouped_options(95, 10, 4, 11);
  const GroupedTruth truth = write_grouped_synthetic(dir.path.string(), o);

  auto groups = read_lines_of_ids(dir.file("groups.txt"));
  REQUIRE(groups.size() == 10);
  uint64_t next = 1;
  for (size_t g = 0; g < groups.size(); ++g) {
    REQUIRE(groups[g].size() == (g + 1 < groups.size() ? 10u : 5u));
    for (uint64_t id : groups[g]) REQUIRE(id == next++);
  }
  REQUIRE(next == 96);

  std::vector<uint64_t> planted;
  for (const auto& line : read_lines_of_ids(dir.file("planted_groups.txt"))) {
    REQUIRE(line.size() == 1);
    planted.push_back(line[0]);
  }
  REQUIRE(planted.size() == 4);
  for (size_t i = 0; i < planted.size(); ++i) {
    REQUIRE(planted[i] >= 1);
    REQUIRE(planted[i] <= 10);
    if (i > 0) REQUIRE(planted[i] > planted[i - 1]);
    REQUIRE(truth.groups[i] + 1 == planted[i]);
  }

  // truth.txt: exactly the features of the planted groups, each with a nonzero weight.
  const auto w = read_truth_text(dir.file("truth.txt"));
  std::set<uint64_t> expected;
  for (uint64_t g : planted)
    for (uint64_t id : groups[g - 1]) expected.insert(id);
  std::set<uint64_t> got;
  for (const auto& [id, v] : w) {
    got.insert(id);
    REQUIRE(v != 0);
  }
  REQUIRE(got == expected);
  REQUIRE(read_truth(dir.file("truth.txt")).ids.size() == expected.size());  // fgm's reader agrees

  // Labels: the sign of the planted model on the written values (0 counts as +1).
  for (const char* split : {"train.svm", "test.svm"}) {
    const auto data = test::parse_libsvm_simple(dir.file(split));
    REQUIRE(data.labels.size() == (std::string(split) == "train.svm" ? o.rows : o.test_rows));
    size_t positive = 0;
    for (size_t r = 0; r < data.rows.size(); ++r) {
      long double margin = 0;
      for (const auto& [j, v] : data.rows[r]) {
        auto it = w.find(j + 1);
        if (it != w.end()) margin += static_cast<long double>(it->second) * v;
      }
      CAPTURE(split, r, static_cast<double>(margin));
      // A margin within rounding of 0 may fall either way; none is that close here.
      REQUIRE(std::fabs(static_cast<double>(margin)) > 1e-9);
      REQUIRE(data.labels[r] == (margin >= 0 ? 1.0 : -1.0));
      positive += data.labels[r] > 0;
    }
    REQUIRE(positive > data.rows.size() / 4);  // both classes well represented
    REQUIRE(positive < 3 * data.rows.size() / 4);
  }
}

TEST_CASE("grouped synth: planted groups are uniform and weights standard normal", "[synth][groups]") {
  // 200 seeds, 10 groups, 3 planted: each group is planted with probability 0.3
  // (expected 60 times, sd 6.5); weights pooled over the seeds have mean 0 and variance 1.
  std::vector<int> count(10, 0);
  double sum = 0, sum_sq = 0;
  size_t n = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    test::TempDir dir("fgm-synth-groups-seed");
    SynthOptions o = grouped_options(40, 4, 3, seed);
    o.rows = 1;
    o.test_rows = 1;
    const GroupedTruth truth = write_grouped_synthetic(dir.path.string(), o);
    REQUIRE(truth.groups.size() == 3);
    for (uint64_t g : truth.groups) ++count[g];
    for (double v : truth.features.weights) {
      sum += v;
      sum_sq += v * v;
      ++n;
    }
  }
  for (int c : count) {
    CAPTURE(c);
    REQUIRE(c >= 35);  // ~4 sd either side of 60
    REQUIRE(c <= 85);
  }
  REQUIRE(n == 200u * 3 * 4);
  const double mean = sum / n, var = sum_sq / n - mean * mean;
  REQUIRE(std::fabs(mean) < 0.15);  // sd of the mean ~0.029
  REQUIRE(std::fabs(var - 1) < 0.15);
}

TEST_CASE("grouped synth: same seed same files, bad sizes refused before writing", "[synth][groups]") {
  test::TempDir a("fgm-synth-groups-a"), b("fgm-synth-groups-b");
  write_grouped_synthetic(a.path.string(), grouped_options(60, 6, 2, 5));
  write_grouped_synthetic(b.path.string(), grouped_options(60, 6, 2, 5));
  for (const char* f : {"train.svm", "test.svm", "truth.txt", "groups.txt", "planted_groups.txt"})
    REQUIRE(file_text(a.file(f)) == file_text(b.file(f)));

  test::TempDir c("fgm-synth-groups-bad");
  const std::string out = (c.path / "out").string();
  REQUIRE_THROWS_AS(write_grouped_synthetic(out, grouped_options(60, 6, 11, 5)), Error);
  REQUIRE_THROWS_AS(write_grouped_synthetic(out, grouped_options(60, 0, 1, 5)), Error);
  REQUIRE(!fs::exists(out));
}

TEST_CASE("grouped synth with --group-overlap: sliding windows, the planted union, labels", "[synth][groups]") {
  test::TempDir dir("fgm-synth-groups-overlap");
  // 100 features, windows of 10 every 7 (overlap 3): starts 0, 7, ..., 91 (14 groups), the last 91..99.
  SynthOptions o = grouped_options(100, 10, 3, 23);
  o.group_overlap = 3;
  const GroupedTruth truth = write_grouped_synthetic(dir.path.string(), o);
  auto groups = read_lines_of_ids(dir.file("groups.txt"));
  REQUIRE(groups.size() == 14);
  for (size_t g = 0; g < groups.size(); ++g) {
    const uint64_t first = 7 * g + 1, last = std::min<uint64_t>(first + 9, 100);
    REQUIRE(groups[g].size() == last - first + 1);
    for (size_t p = 0; p < groups[g].size(); ++p) REQUIRE(groups[g][p] == first + p);
    if (g > 0) REQUIRE(groups[g - 1][7] == groups[g][0]);  // neighbours share 3 features
  }
  REQUIRE(groups.back().back() == 100);
  // truth.txt: exactly the union of the planted windows, one weight each.
  std::set<uint64_t> expected;
  for (const auto& line : read_lines_of_ids(dir.file("planted_groups.txt")))
    for (uint64_t id : groups[line.at(0) - 1]) expected.insert(id);
  const auto w = read_truth_text(dir.file("truth.txt"));
  std::set<uint64_t> got;
  for (const auto& [id, v] : w) got.insert(id);
  REQUIRE(got == expected);
  REQUIRE(truth.features.ids.size() == expected.size());
  const auto data = test::parse_libsvm_simple(dir.file("train.svm"));
  for (size_t r = 0; r < data.rows.size(); ++r) {
    long double margin = 0;
    for (const auto& [j, v] : data.rows[r])
      if (auto it = w.find(j + 1); it != w.end()) margin += static_cast<long double>(it->second) * v;
    REQUIRE(data.labels[r] == (margin >= 0 ? 1.0 : -1.0));
  }
  // Adjacent planted windows share features: still one weight per feature.
  bool adjacent = false;
  for (uint64_t seed = 1; seed <= 40 && !adjacent; ++seed) {
    test::TempDir d("fgm-synth-groups-overlap-seed");
    SynthOptions q = grouped_options(30, 6, 4, seed);
    q.group_overlap = 2;  // starts 0, 4, ..., 24: 7 groups
    q.rows = q.test_rows = 1;
    const GroupedTruth t = write_grouped_synthetic(d.path.string(), q);
    for (size_t i = 1; i < t.groups.size(); ++i) adjacent = adjacent || t.groups[i] == t.groups[i - 1] + 1;
    std::set<uint64_t> ids(t.features.ids.begin(), t.features.ids.end());
    REQUIRE(ids.size() == t.features.ids.size());
    REQUIRE(std::is_sorted(t.features.ids.begin(), t.features.ids.end()));
  }
  REQUIRE(adjacent);
  // An overlap of a whole group is refused before writing.
  const std::string out = (dir.path / "out").string();
  SynthOptions bad = grouped_options(60, 6, 1, 5);
  bad.group_overlap = 6;
  REQUIRE_THROWS_WITH(write_grouped_synthetic(out, bad), Catch::Contains("--group-overlap 6 must be below"));
  REQUIRE(!fs::exists(out));
}
