// area_under_roc and macro_auc on scores that are not finite (issue 23 item
// 1): NaN gives a NaN AUC at once (the tie walk once looped forever on it),
// ±inf rank as the extremes, against a brute-force count over all pairs.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "engine/evaluate.h"

using namespace fgm;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Runs `check` in a child process: true when it returned within `seconds`
// (it exits 0 when check() is true), so a hang fails the test instead of blocking it.
bool passes_within(int seconds, const std::function<bool()>& check) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(check() ? 0 : 1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// P(score of a positive > score of a negative) + P(tie) / 2, over all pairs.
double brute_force_auc(const std::vector<double>& s, const std::vector<int8_t>& y) {
  double wins = 0, pairs = 0;
  for (size_t i = 0; i < s.size(); ++i)
    for (size_t j = 0; j < s.size(); ++j)
      if (y[i] > 0 && y[j] < 0) {
        pairs += 1;
        wins += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
      }
  return wins / pairs;
}

}  // namespace

TEST_CASE("area_under_roc of scores holding NaN is NaN, returned at once", "[engine][evaluate]") {
  for (size_t at : {size_t{0}, size_t{3}, size_t{7}}) {
    CAPTURE(at);
    REQUIRE(passes_within(20, [at] {
      std::vector<double> s = {0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8};
      std::vector<int8_t> y = {1, -1, 1, 1, -1, -1, 1, -1};
      s[at] = kNaN;
      return std::isnan(area_under_roc(s, y));
    }));
  }
  REQUIRE(passes_within(20, [] {  // every score NaN (inf − inf on every row)
    return std::isnan(area_under_roc(std::vector<double>(100, kNaN), std::vector<int8_t>(100, 1)));
  }));
}

TEST_CASE("area_under_roc ranks ±inf as the extremes, ties included", "[engine][evaluate]") {
  std::mt19937_64 rng(23);
  std::uniform_int_distribution<int> pick(0, 5);
  const double values[] = {-kInf, -1.0, 0.0, 0.5, 2.0, kInf};
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<double> s(40);
    std::vector<int8_t> y(40);
    for (size_t i = 0; i < s.size(); ++i) {
      s[i] = values[pick(rng)];
      y[i] = i % 3 == 0 ? 1 : -1;
    }
    REQUIRE(area_under_roc(s, y) == Approx(brute_force_auc(s, y)).epsilon(1e-12));
  }
}

TEST_CASE("macro_auc leaves a class with NaN decision values out of the mean", "[engine][evaluate]") {
  // Three classes, rows of class k have decision 1 for class k and 0 elsewhere; class 1's column is NaN.
  const size_t n = 30, K = 3;
  std::vector<double> d(n * K);
  std::vector<uint16_t> truth(n);
  for (size_t i = 0; i < n; ++i) {
    truth[i] = static_cast<uint16_t>(i % K);
    for (size_t k = 0; k < K; ++k) d[i * K + k] = k == 1 ? kNaN : (truth[i] == k ? 1.0 : 0.0);
  }
  std::vector<double> per_class;
  REQUIRE(passes_within(20, [&] {
    return macro_auc(d, truth, K, &per_class) == 1.0;
  }));
  macro_auc(d, truth, K, &per_class);
  REQUIRE(per_class[0] == 1.0);
  REQUIRE(std::isnan(per_class[1]));
  REQUIRE(per_class[2] == 1.0);
}
