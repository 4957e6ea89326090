// Cross-validation over the path (engine/path_selection.h, path.folds in
// engine/fgm_path.cpp), checked against explicit computations: stores written
// from only the training rows of a fold, held-out rows scored from their text
// by engine/evaluate, means and standard errors computed here.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <set>
#include <sstream>

#include "core/communicator.h"
#include "core/error.h"
#include "engine/distributed_fgm.h"
#include "engine/evaluate.h"
#include "engine/fgm_path.h"
#include "engine/path_selection.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

// Training text by data kind: "binary" (0/1 values), "integer" (small counts)
// or "tied" (columns that are exact copies of others, values on a coarse grid,
// repeated rows). Labels from a sparse rule plus noise, ~35% positive.
std::vector<std::string> make_rows(const std::string& kind, uint64_t n, uint64_t m, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unif(0, 1);
  std::normal_distribution<double> normal(0, 1);
  std::vector<std::string> rows;
  std::vector<double> x(m);
  for (uint64_t i = 0; i < n; ++i) {
    if (kind == "tied" && i % 7 == 6) {  // a repeated row
      rows.push_back(rows[i - 1]);
      continue;
    }
    for (uint64_t j = 0; j < m; ++j) {
      if (kind == "binary") x[j] = unif(rng) < 0.3 ? 1 : 0;
      else if (kind == "integer") x[j] = std::floor(5 * unif(rng) * unif(rng));
      else if (j % 3 == 2) x[j] = x[j - 1];  // tied: an exact copy of the previous column
      else x[j] = unif(rng) < 0.5 ? 0 : std::round(2 * normal(rng)) / 2;
    }
    double margin = 1.2 * x[0] - 0.9 * x[1] + 0.7 * x[3] + 0.5 * x[4] - 0.4 + 0.6 * normal(rng);
    std::ostringstream line;
    line << (margin >= 0 ? "+1" : "-1");
    for (uint64_t j = 0; j < m; ++j)
      if (x[j] != 0) line << ' ' << j + 1 << ':' << x[j];
    rows.push_back(line.str());
  }
  return rows;
}

std::string join(const std::vector<std::string>& rows, const BudgetedArray<uint16_t>* folds = nullptr,
                 int fold = -1, bool held_out = false) {
  std::string text;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (folds && (((*folds)[i] == fold) != held_out)) continue;
    text += rows[i] + "\n";
  }
  return text;
}

std::unique_ptr<ShardStore> ingest(const test::TempDir& dir, const std::string& name, const std::string& text,
                                   uint64_t width, MemoryBudget& budget) {
  dir.write(name + ".svm", text);
  IngestOptions o;
  o.reader.declared_features = width;
  ingest_libsvm(dir.file(name + ".svm"), dir.file(name + ".store"), o, budget);
  return ShardStore::open(dir.file(name + ".store"), budget);
}

TrainSettings small_settings(Loss loss, int threads = 1) {
  TrainSettings s;
  s.B = 2;
  s.max_iterations = 4;
  s.eps_outer = 0;
  s.apg.loss = loss;
  s.apg.C = 0.5;
  s.apg.bias = true;
  s.apg.eps_inner = 1e-9;
  s.apg.max_iterations = 5000;
  s.apg.threads = threads;
  s.scheduler.threads = threads;
  s.final_certificate = false;
  return s;
}

void require_same_model(const Model& a, const Model& b) {
  REQUIRE(a.features.size() == b.features.size());
  for (size_t k = 0; k < a.features.size(); ++k) {
    CAPTURE(k);
    REQUIRE(a.features[k].key.ids[0] == b.features[k].key.ids[0]);
    REQUIRE(a.features[k].weight == Approx(b.features[k].weight).margin(1e-9));
  }
  REQUIRE(a.bias == Approx(b.bias).margin(1e-9));
}

}  // namespace

TEST_CASE("folds partition the rows, stratified, deterministic, and skip rows outside the data",
          "[engine][cv][folds]") {
  MemoryBudget budget(64 << 20);
  std::mt19937_64 rng(5);
  const uint64_t n = 1003;
  std::vector<int8_t> labels(n);
  for (auto& y : labels) {
    uint64_t r = rng() % 10;
    y = r < 3 ? 1 : r < 9 ? -1 : 0;  // ~30% +1, ~60% −1, ~10% outside the data
  }
  for (int k : {2, 3, 5, 10}) {
    CAPTURE(k);
    BudgetedArray<uint16_t> folds = assign_folds(labels.data(), n, k, 7, budget);
    std::vector<uint64_t> pos(k), neg(k);
    for (uint64_t i = 0; i < n; ++i) {
      if (labels[i] == 0) {
        REQUIRE(folds[i] == kNoFold);
        continue;
      }
      REQUIRE(folds[i] < k);  // every row of the data in exactly one fold
      (labels[i] > 0 ? pos : neg)[folds[i]]++;
    }
    // Stratified: each class split within one row, and so is the total.
    auto spread = [](const std::vector<uint64_t>& v) {
      return *std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end());
    };
    std::vector<uint64_t> total(k);
    for (int f = 0; f < k; ++f) total[f] = pos[f] + neg[f];
    REQUIRE(spread(pos) <= 1);
    REQUIRE(spread(neg) <= 1);
    REQUIRE(spread(total) <= 1);
    // Deterministic; another seed deals other rows.
    BudgetedArray<uint16_t> again = assign_folds(labels.data(), n, k, 7, budget);
    BudgetedArray<uint16_t> other = assign_folds(labels.data(), n, k, 8, budget);
    uint64_t same = 0, differ = 0;
    for (uint64_t i = 0; i < n; ++i) {
      same += again[i] == folds[i];
      differ += other[i] != folds[i];
    }
    REQUIRE(same == n);
    REQUIRE(differ > n / 4);
  }
}

TEST_CASE("folds of a store split into partitions equal assign_folds over all rows, for any rank's share",
          "[engine][cv]") {
  // Oracle: assign_folds on the concatenated labels. Partitions of uneven
  // sizes, one without positives, one empty, rows outside the data (label 0),
  // a single-row class; every rank's share of the partitions for 1, 2, 4 and 8 ranks.
  MemoryBudget budget(64 << 20);
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 6; ++trial) {
    CAPTURE(trial);
    std::vector<uint64_t> sizes = {57, 0, 131, 9, 203, 1, 64, 88};
    std::vector<std::vector<int8_t>> parts;
    std::vector<int8_t> all;
    for (size_t p = 0; p < sizes.size(); ++p) {
      std::vector<int8_t> y(sizes[p]);
      for (auto& v : y) {
        const uint64_t r = rng() % 10;
        v = p == 3 ? int8_t{-1} : r < 1 ? int8_t{0} : r < (trial < 3 ? 5 : 8) ? int8_t{-1} : int8_t{1};
      }
      if (trial == 5) std::fill(y.begin(), y.end(), int8_t{-1});  // then one +1 row below: a class of one row
      parts.push_back(y);
      all.insert(all.end(), y.begin(), y.end());
    }
    if (trial == 5) {
      parts[4][17] = 1;
      all[57 + 131 + 9 + 17] = 1;
    }
    std::vector<std::array<uint64_t, 2>> label_rows(sizes.size(), {0, 0});
    for (size_t p = 0; p < sizes.size(); ++p)
      for (int8_t v : parts[p])
        if (v != 0) ++label_rows[p][v > 0];
    for (int k : {2, 3, 7}) {
      CAPTURE(k);
      const uint64_t seed = 11 + uint64_t(trial);
      BudgetedArray<uint16_t> oracle = assign_folds(all.data(), all.size(), k, seed, budget);
      for (uint32_t ranks : {1u, 2u, 4u, 8u})  // 1, 2, 4: the dense replay, 8: mostly the tracked one
        for (uint32_t rank = 0; rank < ranks; ++rank) {
          CAPTURE(ranks, rank);
          const uint32_t per = uint32_t(sizes.size()) / ranks, first = rank * per;
          std::vector<const int8_t*> labels;
          std::vector<uint64_t> rows;
          uint64_t row0 = 0;
          for (uint32_t p = 0; p < first; ++p) row0 += sizes[p];
          for (uint32_t p = first; p < first + per; ++p) {
            labels.push_back(parts[p].data());
            rows.push_back(sizes[p]);
          }
          const auto folds = assign_partition_folds(label_rows, first, labels, rows, k, seed, budget);
          REQUIRE(folds.size() == per);
          for (uint32_t q = 0; q < per; ++q) {
            REQUIRE(folds[q].size() == rows[q]);
            for (uint64_t i = 0; i < rows[q]; ++i) REQUIRE(folds[q][i] == oracle[row0 + i]);
            row0 += rows[q];
          }
        }
    }
  }
}

TEST_CASE("mean and standard error, binomial SE", "[engine][cv]") {
  MeanSe a = mean_and_se({0.8, 0.9});
  REQUIRE(a.count == 2);
  REQUIRE(a.mean == Approx(0.85).epsilon(1e-15));
  REQUIRE(a.se == Approx(0.05).epsilon(1e-12));  // sample sd 0.0707, /√2
  MeanSe b = mean_and_se({0.75, std::nan(""), 0.75, 0.75});
  REQUIRE(b.count == 3);
  REQUIRE(b.mean == 0.75);
  REQUIRE(b.se == 0.0);
  MeanSe c = mean_and_se({0.6});
  REQUIRE(c.mean == 0.6);
  REQUIRE(std::isnan(c.se));
  REQUIRE(std::isnan(mean_and_se({}).mean));
  REQUIRE(binomial_se(0.9, 100) == Approx(0.03).epsilon(1e-12));
  REQUIRE(binomial_se(1.0, 50) == 0.0);
  REQUIRE(std::isnan(binomial_se(0.5, 0)));
}

TEST_CASE("one-standard-error rule on a hand-made table", "[engine][cv][select]") {
  // point:     0     1     2     3     4
  std::vector<uint64_t> selected = {5, 10, 20, 40, 80};
  std::vector<uint64_t> B(5, 5);
  std::vector<double> C(5, 1.0);
  std::vector<int> order = simplicity_order(selected, B, C);
  REQUIRE(order == std::vector<int>{0, 1, 2, 3, 4});
  SECTION("the simplest point within one SE of the best mean") {
    PointChoice c = choose_point({0.80, 0.85, 0.86, 0.87, 0.86}, {0.01, 0.01, 0.01, 0.015, 0.01}, order);
    REQUIRE(c.best == 3);
    REQUIRE(c.threshold == Approx(0.855));
    REQUIRE(c.one_se == 2);  // 0.85 < 0.855 ≤ 0.86
  }
  SECTION("tied best means: the point with fewer features") {
    PointChoice c = choose_point({0.80, 0.84, 0.86, 0.86, 0.86}, {0.0, 0.0, 0.0, 0.0, 0.0}, order);
    REQUIRE(c.best == 2);
    REQUIRE(c.one_se == 2);
  }
  SECTION("a mean exactly at the threshold qualifies; NaN means never do") {
    PointChoice c = choose_point({std::nan(""), 0.75, 0.80, 0.70, 0.78}, {0.0, 0.0, 0.05, 0.0, 0.0}, order);
    REQUIRE(c.best == 2);
    REQUIRE(c.one_se == 1);
  }
  SECTION("nothing finite: no choice") {
    PointChoice c = choose_point(std::vector<double>(5, std::nan("")), std::vector<double>(5, 0.0), order);
    REQUIRE(c.best == -1);
    REQUIRE(c.one_se == -1);
  }
  SECTION("equal feature counts: smaller B, then smaller C is simpler") {
    std::vector<int> o = simplicity_order({10, 10, 10, 8}, {5, 5, 2, 9}, {10.0, 0.1, 1.0, 1.0});
    REQUIRE(o == std::vector<int>{3, 2, 1, 0});
    PointChoice c = choose_point({0.9, 0.9, 0.9, 0.5}, {0, 0, 0, 0}, o);
    REQUIRE(c.best == 2);
  }
}

TEST_CASE("a fold's training never sees a held-out row: masked run = run on a store of the training rows",
          "[engine][cv][leak]") {
  const uint64_t n = 240, m = 15;
  for (const std::string kind : {"binary", "integer", "tied"}) {
    for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
      CAPTURE(kind, loss_name(loss));
      test::TempDir dir("fgm-cv-leak");
      MemoryBudget budget(256 << 20);
      std::vector<std::string> rows = make_rows(kind, n, m, 11);
      auto full = ingest(dir, "full", join(rows), m, budget);
      BudgetedArray<uint16_t> folds = assign_folds(full->labels(), n, 3, 1, budget);
      BudgetedArray<int8_t> train(budget, n, "test");
      const int fold = 1;
      for (uint64_t i = 0; i < n; ++i) train[i] = folds[i] == fold ? int8_t{0} : full->labels()[i];  // the fold left out
      TrainSettings s = small_settings(loss);
      s.labels = train.data();
      TrainOutcome masked = train_fgm(*full, s, budget);
      auto subset = ingest(dir, "subset", join(rows, &folds, fold, false), m, budget);
      REQUIRE(subset->info().n_rows < n);
      TrainOutcome explicit_run = train_fgm(*subset, small_settings(loss), budget);
      // The path's mechanism on either backend: the fold's rows left out by the hooks.
      std::vector<std::vector<uint8_t>> left_out(1, std::vector<uint8_t>(n));
      for (uint64_t i = 0; i < n; ++i) left_out[0][i] = folds[i] == fold;
      DistributedHooks hooks;
      hooks.left_out = &left_out;
      SingleRankCommunicator comm;
      const FgmOutcome hooked = train_fgm_on({comm, full.get()}, small_settings(loss), budget, hooks);
      require_same_model(hooked.model, masked.model);
      REQUIRE(hooked.model.objective == masked.model.objective);
      REQUIRE(masked.model.features.size() == 8);
      require_same_model(masked.model, explicit_run.model);
      REQUIRE(masked.model.objective == Approx(explicit_run.model.objective).epsilon(1e-9));
      REQUIRE(masked.iterations.size() == explicit_run.iterations.size());
      for (size_t t = 0; t < masked.iterations.size(); ++t)
        REQUIRE(masked.iterations[t].objective ==
                Approx(explicit_run.iterations[t].objective).epsilon(1e-9));
    }
  }
}

TEST_CASE("CV estimates equal a direct computation from per-fold stores and held-out text",
          "[engine][cv][path]") {
  const uint64_t n = 300, m = 12;
  const int k = 3;
  for (const std::string mode : {"features", "C"}) {
    CAPTURE(mode);
    test::TempDir dir("fgm-cv-path");
    MemoryBudget budget(256 << 20);
    std::vector<std::string> rows = make_rows("integer", n, m, 23);
    auto full = ingest(dir, "full", join(rows), m, budget);
    PathSettings ps;
    ps.base = small_settings(Loss::kSquaredHinge);
    ps.base.max_iterations = 3;
    if (mode == "features") ps.feature_counts = {1, 3, 6};
    else ps.C_values = {0.05, 0.5, 5.0};
    ps.debias = false;
    ps.folds = k;
    ps.fold_seed = 4;
    PathOutcome out = run_fgm_path(*full, ps, budget);
    REQUIRE(out.folds.size() == size_t(k));
    const size_t points = out.points.size();
    REQUIRE(points == 3);

    BudgetedArray<uint16_t> folds = assign_folds(full->labels(), n, k, 4, budget);
    std::vector<std::vector<double>> acc(points), auc(points);
    for (int f = 0; f < k; ++f) {
      CAPTURE(f);
      auto subset = ingest(dir, "fold" + std::to_string(f), join(rows, &folds, f, false), m, budget);
      std::string held = dir.write("held" + std::to_string(f) + ".svm", join(rows, &folds, f, true));
      PathSettings plain = ps;
      plain.folds = 0;
      PathOutcome fold_path = run_fgm_path(*subset, plain, budget);
      REQUIRE(fold_path.points.size() == points);
      REQUIRE(out.folds[f].held_out_rows == n - subset->info().n_rows);
      for (size_t p = 0; p < points; ++p) {
        EvalResult e = evaluate_file(held, fold_path.points[p].model, false, budget);
        REQUIRE(out.folds[f].points[p].rows == e.rows);
        REQUIRE(out.folds[f].points[p].accuracy == Approx(e.accuracy).margin(1e-12));
        REQUIRE(out.folds[f].points[p].auc == Approx(e.auc).margin(1e-12));
        acc[p].push_back(e.accuracy);
        auc[p].push_back(e.auc);
      }
    }
    std::vector<double> means;
    for (size_t p = 0; p < points; ++p) {
      for (auto* v : {&acc[p], &auc[p]}) {
        double mean = 0, ss = 0;
        for (double x : *v) mean += x / k;
        for (double x : *v) ss += (x - mean) * (x - mean);
        double se = std::sqrt(ss / (k - 1) / k);
        const MeanSe& got = v == &acc[p] ? out.points[p].cv.accuracy : out.points[p].cv.auc;
        REQUIRE(got.count == k);
        REQUIRE(got.mean == Approx(mean).margin(1e-12));
        REQUIRE(got.se == Approx(se).margin(1e-12));
      }
      means.push_back(out.points[p].cv.accuracy.mean);
    }
    // The chosen point follows the rule: simplest within one SE of the best.
    REQUIRE(out.selection.criterion == "cv");
    REQUIRE(out.selection.has_cv);
    const int best = out.selection.cv.best;
    REQUIRE(best >= 0);
    for (size_t p = 0; p < points; ++p) REQUIRE(means[p] <= means[size_t(best)]);
    const int chosen = out.selection.chosen;
    REQUIRE(chosen == out.selection.cv.one_se);
    const double threshold = means[size_t(best)] - out.points[size_t(best)].cv.accuracy.se;
    REQUIRE(means[size_t(chosen)] >= threshold);
    for (size_t p = 0; p < points; ++p)
      if (out.points[p].selected < out.points[size_t(chosen)].selected) REQUIRE(means[p] < threshold);
  }
}

TEST_CASE("CV results are the same for 1 and 2 threads", "[engine][cv][threads]") {
  const uint64_t n = 400, m = 20;
  test::TempDir dir("fgm-cv-threads");
  MemoryBudget budget(256 << 20);
  auto full = ingest(dir, "full", join(make_rows("tied", n, m, 3)), m, budget);
  PathOutcome runs[2];
  for (int threads : {1, 2}) {
    PathSettings ps;
    ps.base = small_settings(Loss::kLogistic, threads);
    ps.feature_counts = {2, 4, 8};
    ps.debias = false;
    ps.folds = 4;
    runs[threads - 1] = run_fgm_path(*full, ps, budget);
  }
  REQUIRE(runs[0].folds.size() == 4);
  for (size_t f = 0; f < 4; ++f) {
    REQUIRE(runs[0].folds[f].objective == runs[1].folds[f].objective);
    REQUIRE(runs[0].folds[f].selected == runs[1].folds[f].selected);
    for (size_t p = 0; p < runs[0].folds[f].points.size(); ++p) {
      REQUIRE(runs[0].folds[f].points[p].accuracy == runs[1].folds[f].points[p].accuracy);
      REQUIRE(runs[0].folds[f].points[p].auc == runs[1].folds[f].points[p].auc);
    }
  }
  for (size_t p = 0; p < runs[0].points.size(); ++p) {
    REQUIRE(runs[0].points[p].cv.accuracy.mean == runs[1].points[p].cv.accuracy.mean);
    REQUIRE(runs[0].points[p].cv.accuracy.se == runs[1].points[p].cv.accuracy.se);
  }
  REQUIRE(runs[0].selection.chosen == runs[1].selection.chosen);
}

TEST_CASE("path.folds larger than the smaller class is a config error naming the key", "[engine][cv]") {
  test::TempDir dir("fgm-cv-small");
  MemoryBudget budget(64 << 20);
  auto store = ingest(dir, "s", "+1 1:1\n-1 2:1\n-1 1:1 2:1\n+1 2:2\n-1 1:3\n", 2, budget);
  PathSettings ps;
  ps.base = small_settings(Loss::kSquaredHinge);
  ps.feature_counts = {1};
  ps.folds = 3;  // only 2 positive rows
  try {
    run_fgm_path(*store, ps, budget);
    FAIL("expected a config error");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::kConfig);
    REQUIRE(std::string(e.what()).find("path.folds") != std::string::npos);
  }
  ps.folds = 2;
  PathOutcome out = run_fgm_path(*store, ps, budget);
  REQUIRE(out.folds.size() == 2);
}

TEST_CASE("validation selection: best accuracy and the one-SE rule with the binomial SE", "[engine][cv][select]") {
  const uint64_t n = 300, m = 12;
  int rule_mattered = 0;  // data sets where the one-SE point is simpler than the best one
  for (uint64_t seed = 31; seed < 39; ++seed) {
    CAPTURE(seed);
    test::TempDir dir("fgm-cv-validation");
    MemoryBudget budget(256 << 20);
    auto full = ingest(dir, "full", join(make_rows("integer", n, m, seed)), m, budget);
    std::string validation = dir.write("valid.svm", join(make_rows("integer", 150, m, seed + 100)));
    PathSettings ps;
    ps.base = small_settings(Loss::kSquaredHinge);
    ps.feature_counts = {1, 2, 3, 5, 8};
    ps.debias = false;
    ps.validation_path = validation;
    PathOutcome out = run_fgm_path(*full, ps, budget);
    REQUIRE(out.points.size() == 5);
    REQUIRE(out.selection.criterion == "validation");
    REQUIRE(!out.selection.has_cv);
    REQUIRE(out.selection.validation_rows == 150);
    // Direct: each point's accuracy from its model on the validation text.
    std::vector<double> acc;
    for (const auto& p : out.points) acc.push_back(evaluate_file(validation, p.model, false, budget).accuracy);
    size_t best = 0;
    for (size_t p = 1; p < acc.size(); ++p)
      if (acc[p] > acc[best]) best = p;  // points are in increasing feature counts: ties keep fewer
    REQUIRE(out.selection.validation.best == int(best));
    REQUIRE(out.best == int(best));
    const double se = std::sqrt(acc[best] * (1 - acc[best]) / 150.0);
    size_t one_se = 0;
    while (acc[one_se] < acc[best] - se) ++one_se;
    CAPTURE(acc, best, one_se, se);
    REQUIRE(out.selection.validation.one_se == int(one_se));
    REQUIRE(out.selection.chosen == int(one_se));
    REQUIRE(out.selection.validation.threshold == Approx(acc[best] - se).margin(1e-15));
    rule_mattered += one_se != best;
  }
  REQUIRE(rule_mattered > 0);
}
