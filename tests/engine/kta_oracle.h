// The linear p-norm KTA alignments computed directly, the test oracle of
// the alignment passes: a_i = (xᵀỹ)² / ‖x − μ1‖² over all n rows as dense
// vectors (ỹ the centred unit labels; 0 for a constant column), by feature
// (0-based) for every feature some row holds.
#pragma once

#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "tests/test_util.h"

namespace fgm::test {

inline std::map<uint64_t, double> oracle_kta_alignments(const test::InMemoryData& d) {
  const size_t n = d.rows.size();
  double mean_y = 0;
  for (double y : d.labels) mean_y += (y > 0 ? 1.0 : -1.0) / static_cast<double>(n);
  std::vector<double> y(n);
  double norm = 0;
  for (size_t r = 0; r < n; ++r) {
    y[r] = (d.labels[r] > 0 ? 1.0 : -1.0) - mean_y;
    norm += y[r] * y[r];
  }
  for (double& v : y) v /= std::sqrt(norm);
  std::set<uint64_t> features;
  for (const auto& row : d.rows)
    for (const auto& [f, v] : row) features.insert(f);
  std::map<uint64_t, double> a;
  for (uint64_t f : features) {
    std::vector<double> x(n, 0.0);
    for (size_t r = 0; r < n; ++r)
      if (auto it = d.rows[r].find(f); it != d.rows[r].end()) x[r] = it->second;
    double mu = 0;
    for (double v : x) mu += v / static_cast<double>(n);
    double dot = 0, centred = 0;
    for (size_t r = 0; r < n; ++r) {
      dot += x[r] * y[r];
      centred += (x[r] - mu) * (x[r] - mu);
    }
    a[f] = centred > 1e-9 ? dot * dot / centred : 0.0;
  }
  return a;
}

}  // namespace fgm::test
