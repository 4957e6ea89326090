// Small mixed-type training data for engine tests (Gaussian, binary and
// small-integer count columns).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace fgm::test {

// Mixed columns by j % 3: Gaussian, sparse binary, small integer counts
// (0..3); labels from an interaction plus linear and count terms, so poly-2
// selects linear, square and cross features.
inline std::string mixed_libsvm(uint64_t n, uint64_t m, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> unif(0, 1);
  std::ostringstream out;
  for (uint64_t i = 0; i < n; ++i) {
    std::vector<double> x(m, 0.0);
    for (uint64_t j = 0; j < m; ++j) {
      if (j % 3 == 0) x[j] = static_cast<float>(normal(rng));
      else if (j % 3 == 1) x[j] = unif(rng) < 0.3 ? 1 : 0;
      else x[j] = std::floor(4 * unif(rng) * unif(rng));
    }
    double margin = 2 * x[3] * x[6] + 0.8 * x[9] - 0.6 * x[2] + 0.4 * x[4] + 0.2 * normal(rng);
    out << (margin >= 0 ? "+1" : "-1");
    for (uint64_t j = 0; j < m; ++j)
      if (x[j] != 0) out << ' ' << j + 1 << ':' << static_cast<float>(x[j]);
    out << '\n';
  }
  return out.str();
}

}  // namespace fgm::test
