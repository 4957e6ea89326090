// The pnorm_kta cross-validation (engine/pnorm_kta_cv.h) against a brute-force
// twin built only from the single-fit API: each fold's training rows written
// as a LIBSVM file and ingested as a store of their own, the path run there
// (KtaData::align, run_kta_path) for every (λ₁, λ₂, C) with the fold's
// held-out rows as data.test, and the correct counts summed over folds. The
// candidates' counts, the choice (an independent sort on the documented tie
// rule) and the folds (a brute-force count per class and fold) must agree;
// on Gaussian (grid-valued), binary and integer data with ties, linear and
// RBF kernels; and the CV is the same for 1 and 2 threads.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "core/error.h"
#include "engine/path_selection.h"
#include "engine/pnorm_kta_cv.h"
#include "io/ingest.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

enum class Values { kGaussian, kBinary, kIntegerTied };

// Features 1–3 carry the label (3 through |x| as well), 4–8 are noise. The
// Gaussian values are multiples of 1/64 (exact in float and in the text).
std::vector<std::string> cv_rows(uint64_t rows, Values values, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> g(0, 1);
  std::uniform_int_distribution<int> small(-3, 3);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::string> out;
  for (uint64_t r = 0; r < rows; ++r) {
    const bool positive = u(rng) < 0.45;
    const double shift = positive ? 0.8 : -0.8;
    std::ostringstream line;
    line << (positive ? "+1" : "-1");
    for (int j = 1; j <= 8; ++j) {
      double v = 0;
      const double signal = j <= 2 ? shift : 0.0;
      switch (values) {
        case Values::kGaussian:
          v = std::round((g(rng) + signal) * 64) / 64;
          if (j == 3) v = std::round((positive ? 2 * g(rng) : 0.5 * g(rng)) * 64) / 64;
          break;
        case Values::kBinary:
          v = u(rng) < (j <= 3 ? (positive ? 0.7 : 0.25) : 0.4) ? 1 : 0;
          break;
        case Values::kIntegerTied:
          v = small(rng) + (j <= 2 ? (positive ? 1 : -1) : 0);
          if (j == 3) v = positive ? 3 * small(rng) / 3 : 0;
          break;
      }
      if (v != 0) line << ' ' << j << ':' << v;
    }
    out.push_back(line.str());
  }
  return out;
}

std::string join(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

IngestOptions small_blocks() {
  IngestOptions o;
  o.reader.declared_features = 8;
  o.block_bytes = 512;
  o.tile_rows = 16;
  return o;
}

KtaSettings base_settings(kta::KernelKind kernel, int threads) {
  KtaSettings s;
  s.kernel = kernel;
  s.path.p_step = 0.25;  // p = 2, 1.75, 1.5, 1.25, 1
  s.apg.eps_inner = 1e-8;
  s.apg.gap_tolerance = 1e-9;
  s.apg.max_iterations = 200000;
  s.scheduler.threads = threads;
  s.block_bytes = 1024;
  return s;
}

KtaCvOptions grid(int folds) {
  KtaCvOptions o;
  o.folds = folds;
  o.seed = 7;
  o.lambda1s = {0.02, 0.1};
  o.lambda2s = {0.01, 0.04};
  o.Cs = {0.5, 4};
  return o;
}

// The twin: per fold, a store of its training rows and a file of its held-out rows.
std::vector<KtaCvCandidate> brute_force(const std::vector<std::string>& lines, const std::vector<int8_t>& labels,
                                        const KtaCvOptions& o, kta::KernelKind kernel, test::TempDir& dir,
                                        MemoryBudget& budget) {
  const BudgetedArray<uint16_t> folds = assign_folds(labels.data(), labels.size(), o.folds, o.seed, budget);
  std::vector<KtaCvCandidate> out;
  for (int f = 0; f < o.folds; ++f) {
    std::vector<std::string> train, held;
    for (size_t r = 0; r < lines.size(); ++r) (folds[r] == f ? held : train).push_back(lines[r]);
    const std::string name = "fold" + std::to_string(f);
    const std::string train_file = dir.write(name + "-train.svm", join(train));
    const std::string held_file = dir.write(name + "-held.svm", join(held));
    ingest_libsvm(train_file, dir.file(name + "-store"), small_blocks(), budget);
    const auto store = ShardStore::open(dir.file(name + "-store"), budget);
    size_t index = 0;
    for (double l1 : o.lambda1s)
      for (double l2 : o.lambda2s) {
        std::vector<KtaRun> runs;
        for (double C : o.Cs) {
          KtaSettings s = base_settings(kernel, 1);
          s.path.lambda1 = l1;
          s.path.lambda2 = l2;
          s.C = C;
          s.test_path = held_file;
          const std::unique_ptr<KtaData> data = open_kta_store(*store, budget);
          KtaRun run = data->align(s);
          run_kta_path(*data, s, budget, run, {});
          runs.push_back(std::move(run));
        }
        for (size_t j = 0; j < runs[0].points.size(); ++j)
          for (size_t c = 0; c < o.Cs.size(); ++c, ++index) {
            if (f == 0) {
              KtaCvCandidate k;
              k.lambda1 = l1;
              k.lambda2 = l2;
              k.C = o.Cs[c];
              k.p = runs[c].points[j].p;
              k.point = static_cast<int>(j) + 1;
              out.push_back(k);
            }
            const double acc = runs[c].points[j].test.accuracy;
            out[index].correct += static_cast<uint64_t>(std::llround(acc * static_cast<double>(held.size())));
            out[index].rows += held.size();
          }
      }
  }
  return out;
}

// The documented tie rule as a sort: most correct, larger λ₂, larger λ₁, smaller C, smaller p.
size_t sorted_choice(const std::vector<KtaCvCandidate>& c) {
  std::vector<size_t> order(c.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::make_tuple(-static_cast<int64_t>(c[a].correct), -c[a].lambda2, -c[a].lambda1, c[a].C, c[a].p) <
           std::make_tuple(-static_cast<int64_t>(c[b].correct), -c[b].lambda2, -c[b].lambda1, c[b].C, c[b].p);
  });
  return order.front();
}

std::vector<int8_t> labels_of(const std::vector<std::string>& lines) {
  std::vector<int8_t> y;
  for (const auto& l : lines) y.push_back(l[0] == '+' ? 1 : -1);
  return y;
}

}  // namespace

TEST_CASE("KTA CV folds: stratified per class, deterministic, FGM's assignment", "[kta][engine][cv]") {
  MemoryBudget budget{16ull << 20};
  const std::vector<int8_t> y = labels_of(cv_rows(103, Values::kBinary, 3));
  uint64_t per_class[2] = {0, 0};
  for (int8_t v : y) ++per_class[v > 0];
  for (int k : {2, 3, 5}) {
    CAPTURE(k);
    const BudgetedArray<uint16_t> a = assign_folds(y.data(), y.size(), k, 11, budget);
    const BudgetedArray<uint16_t> b = assign_folds(y.data(), y.size(), k, 11, budget);
    std::vector<uint64_t> count(2 * k, 0);
    for (size_t r = 0; r < y.size(); ++r) {
      REQUIRE(a[r] == b[r]);
      REQUIRE(a[r] < k);
      ++count[2 * a[r] + (y[r] > 0)];
    }
    for (int f = 0; f < k; ++f)
      for (int c = 0; c < 2; ++c) {
        REQUIRE(count[2 * f + c] >= per_class[c] / k);
        REQUIRE(count[2 * f + c] <= (per_class[c] + k - 1) / k);
      }
    const BudgetedArray<uint16_t> other = assign_folds(y.data(), y.size(), k, 12, budget);
    bool differs = false;
    for (size_t r = 0; r < y.size(); ++r) differs |= other[r] != a[r];
    REQUIRE(differs);  // the seed matters
  }
}

TEST_CASE("KTA CV: every candidate's held-out count and the choice equal the per-fold store twin",
          "[kta][engine][cv]") {
  const auto kernel = GENERATE(kta::KernelKind::kLinear, kta::KernelKind::kRbf);
  const auto values = GENERATE(Values::kGaussian, Values::kBinary, Values::kIntegerTied);
  CAPTURE(kta::kernel_name(kernel), static_cast<int>(values));
  test::TempDir dir("fgm-kta-cv");
  MemoryBudget budget{64ull << 20};
  const std::vector<std::string> lines = cv_rows(70, values, 5 + static_cast<uint32_t>(values));
  const std::string train = dir.write("train.svm", join(lines));
  ingest_libsvm(train, dir.file("store"), small_blocks(), budget);
  const auto store = ShardStore::open(dir.file("store"), budget);
  const KtaCvOptions o = grid(3);
  const KtaCvResult cv = cross_validate_kta(*store, base_settings(kernel, 1), o, budget);
  const std::vector<KtaCvCandidate> twin = brute_force(lines, labels_of(lines), o, kernel, dir, budget);
  REQUIRE(cv.candidates.size() == twin.size());
  REQUIRE(cv.candidates.size() == 2 * 2 * 5 * 2);
  uint64_t distinct_counts = 0;
  for (size_t i = 0; i < twin.size(); ++i) {
    CAPTURE(i, twin[i].lambda1, twin[i].lambda2, twin[i].C, twin[i].p);
    REQUIRE(cv.candidates[i].lambda1 == twin[i].lambda1);
    REQUIRE(cv.candidates[i].lambda2 == twin[i].lambda2);
    REQUIRE(cv.candidates[i].C == twin[i].C);
    REQUIRE(cv.candidates[i].p == Approx(twin[i].p).margin(1e-12));
    REQUIRE(cv.candidates[i].rows == lines.size());
    REQUIRE(cv.candidates[i].correct == twin[i].correct);
    distinct_counts += i > 0 && twin[i].correct != twin[0].correct;
  }
  REQUIRE(distinct_counts > 0);  // the grid matters: a choice is made, not a constant
  REQUIRE(cv.chosen == static_cast<int>(sorted_choice(twin)));
  uint64_t held = 0;
  for (uint64_t r : cv.fold_rows) held += r;
  REQUIRE(held == lines.size());
}

TEST_CASE("KTA CV: 1 and 2 threads give the same candidates and choice", "[kta][engine][cv]") {
  const auto kernel = GENERATE(kta::KernelKind::kLinear, kta::KernelKind::kRbf);
  test::TempDir dir("fgm-kta-cv-threads");
  MemoryBudget budget{64ull << 20};
  const std::vector<std::string> lines = cv_rows(90, Values::kIntegerTied, 21);
  ingest_libsvm(dir.write("train.svm", join(lines)), dir.file("store"), small_blocks(), budget);
  const auto store = ShardStore::open(dir.file("store"), budget);
  const KtaCvResult one = cross_validate_kta(*store, base_settings(kernel, 1), grid(4), budget);
  const KtaCvResult two = cross_validate_kta(*store, base_settings(kernel, 2), grid(4), budget);
  REQUIRE(one.chosen == two.chosen);
  REQUIRE(one.candidates.size() == two.candidates.size());
  for (size_t i = 0; i < one.candidates.size(); ++i) {
    REQUIRE(one.candidates[i].correct == two.candidates[i].correct);
    REQUIRE(one.candidates[i].fold_accuracy == two.candidates[i].fold_accuracy);
    REQUIRE(one.candidates[i].mean_selected == two.candidates[i].mean_selected);
  }
}

TEST_CASE("KTA CV tie rule: most correct, then larger lambda2, larger lambda1, smaller C, smaller p",
          "[kta][engine][cv]") {
  auto cand = [](uint64_t correct, double l1, double l2, double C, double p) {
    KtaCvCandidate c;
    c.correct = correct;
    c.rows = 100;
    c.lambda1 = l1;
    c.lambda2 = l2;
    c.C = C;
    c.p = p;
    return c;
  };
  REQUIRE(choose_kta_candidate({}) == -1);
  REQUIRE(choose_kta_candidate({cand(5, 1, 1, 1, 2), cand(6, 1, 1, 1, 2)}) == 1);
  REQUIRE(choose_kta_candidate({cand(6, 1, 0.1, 1, 2), cand(6, 1, 0.2, 1, 2)}) == 1);
  REQUIRE(choose_kta_candidate({cand(6, 0.2, 0.1, 1, 2), cand(6, 0.1, 0.1, 1, 2)}) == 0);
  REQUIRE(choose_kta_candidate({cand(6, 0.1, 0.1, 10, 2), cand(6, 0.1, 0.1, 1, 2)}) == 1);
  REQUIRE(choose_kta_candidate({cand(6, 0.1, 0.1, 1, 1.5), cand(6, 0.1, 0.1, 1, 2)}) == 0);
  REQUIRE(choose_kta_candidate({cand(7, 0.1, 0.1, 1, 2), cand(6, 0.1, 0.5, 0.1, 1)}) == 0);
}

TEST_CASE("KTA CV: a class with fewer rows than folds is a config error naming path.folds", "[kta][engine][cv]") {
  test::TempDir dir("fgm-kta-cv-small");
  MemoryBudget budget{16ull << 20};
  const std::string text = "+1 1:1\n+1 1:2\n-1 2:1\n-1 1:3\n-1 2:2\n-1 1:1 2:1\n";
  ingest_libsvm(dir.write("train.svm", text), dir.file("store"), small_blocks(), budget);
  const auto store = ShardStore::open(dir.file("store"), budget);
  try {
    cross_validate_kta(*store, base_settings(kta::KernelKind::kLinear, 1), grid(3), budget);
    FAIL("no error");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::kConfig);
    REQUIRE(std::string(e.what()).find("path.folds") != std::string::npos);
  }
}
