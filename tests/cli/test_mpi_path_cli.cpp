// fgm path on a partitioned store (docs/distributed.md, "fgm path"): every
// point's model and its refit are the same bits for 1 process and 2 and 4
// ranks at 1 or 2 threads; the points agree with the single-store fgm path on
// the same rows ingested without partitions (another summation order, so to a
// tolerance); path.folds gives the single-store path's folds and CV figures;
// unsupported settings are refused naming their key. Tagged
// [.mpi] (ctest runs them in the `mpi` entry).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "core/json_reader.h"
#include "io/model_file.h"
#include "tests/cli/cli_test_util.h"

namespace fgm::test {
namespace {

// Binary indicator features and small integers (many exact ties), labels
// from four of them plus noise; every block of rows holds both classes.
std::string binary_integer_libsvm(uint64_t rows, uint32_t features, uint32_t seed) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution present(0.2);
  std::uniform_int_distribution<int> small(1, 4);
  std::normal_distribution<double> noise(0, 0.5);
  std::string text;
  for (uint64_t i = 0; i < rows; ++i) {
    std::string entries;
    double score = noise(rng);
    for (uint32_t f = 1; f <= features; ++f) {
      if (!present(rng)) continue;
      const int v = f % 4 == 0 ? small(rng) : 1;
      entries += " " + std::to_string(f) + ":" + std::to_string(v);
      if (f <= 4) score += (f % 2 ? 1.0 : -1.2) * v;
    }
    text += (score > 0 ? "+1" : "-1") + entries + "\n";
  }
  return text;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Features, weights, bias and objective of two models, bit for bit.
void require_same_model(const std::string& a, const std::string& b) {
  INFO(a << " vs " << b);
  const Model ma = read_model(a), mb = read_model(b);
  REQUIRE(ma.features.size() == mb.features.size());
  REQUIRE(!ma.features.empty());
  for (size_t k = 0; k < ma.features.size(); ++k) {
    CHECK(ma.features[k].key.ids[0] == mb.features[k].key.ids[0]);
    CHECK(ma.features[k].batch == mb.features[k].batch);
    CHECK(same_bits(ma.features[k].weight, mb.features[k].weight));
  }
  CHECK(ma.has_bias == mb.has_bias);
  CHECK(same_bits(ma.bias, mb.bias));
  CHECK(same_bits(ma.objective, mb.objective));
}

// path.csv without its seconds column (the 15th).
std::string csv_without_seconds(const std::string& file) {
  std::istringstream in(slurp(file));
  std::string out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream cells(line);
    int column = 0;
    for (std::string cell; std::getline(cells, cell, ','); ++column)
      if (column != 14) out += cell + ",";
    out += "\n";
  }
  return out;
}

std::set<uint64_t> feature_ids(const Model& m) {
  std::set<uint64_t> ids;
  for (const auto& f : m.features) ids.insert(f.key.ids[0]);
  return ids;
}

// Runs `fgm path <args>` on 1 process and under mpirun -np 2 (2 threads) and
// -np 4 (1 thread), into <prefix>1, <prefix>2, <prefix>4, and checks that
// every point and refit is the same on all three.
void require_same_path_on_1_2_4_ranks(const TempDir& dir, const std::string& args, const std::string& prefix,
                                      int points) {
  RunResult one = run(dir, args + " output.dir=" + prefix + "1");
  INFO(one.err);
  REQUIRE(one.code == 0);
  CHECK(contains(one.out, "points=" + std::to_string(points)));
  for (int np : {2, 4}) {
    INFO("np = " << np);
    const std::string out = prefix + std::to_string(np);
    RunResult r = run_mpi(dir, np, args + " output.dir=" + out + " engine.threads=" + (np == 2 ? "2" : "1"));
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(contains(r.out, "ranks=" + std::to_string(np)));
    for (int k = 1; k <= points; ++k) {
      const std::string point = "/point-" + std::to_string(k);
      require_same_model(dir.file(prefix + "1" + point + ".fgm"), dir.file(out + point + ".fgm"));
      require_same_model(dir.file(prefix + "1" + point + "-debiased.fgm"), dir.file(out + point + "-debiased.fgm"));
    }
    CHECK(csv_without_seconds(dir.file(prefix + "1/path.csv")) == csv_without_seconds(dir.file(out + "/path.csv")));
    const JsonValue json = parse_json(slurp(dir.file(out + "/path.json")), "path.json");
    const JsonValue* distributed = json.find("distributed");
    REQUIRE(distributed);
    CHECK(distributed->find("ranks")->number() == np);
    CHECK(distributed->find("partitions")->number() == 4);
    CHECK(distributed->find("bytes")->number() > 0);
  }
  const JsonValue json = parse_json(slurp(dir.file(prefix + "1/path.json")), "path.json");
  CHECK(json.find("distributed")->find("bytes")->number() == 0);  // one process: nothing communicated
}

}  // namespace

TEST_CASE("fgm path on a partitioned store gives every point and refit bit for bit on 1, 2 and 4 ranks",
          "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-path");
  dir.write("in.txt", binary_integer_libsvm(700, 40, 11));
  dir.write("test.txt", binary_integer_libsvm(200, 40, 12));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4 --tile-rows 64").code == 0);
  // Feature counts: one run; B = 3 lands on 7 by a shortened batch.
  const std::string base = "path data.train=store data.test=test.txt data.validation=test.txt fgm.B=3 ";
  require_same_path_on_1_2_4_ranks(dir, base + "'path.features=[3,7,10]'", "f", 3);
  const Model seven = read_model(dir.file("f1/point-2.fgm"));
  CHECK(seven.features.size() == 7);
  CHECK(seven.features.back().batch == 3);  // 3 + 3 + 1
  CHECK(read_model(dir.file("f1/point-3.fgm")).features.size() == 10);
  const std::string csv = slurp(dir.file("f1/path.csv"));
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 4);
  // Rank 0 wrote the report; path.json names the chosen point (validation).
  CHECK(std::filesystem::exists(dir.file("f4/report.html")));
  const JsonValue json = parse_json(slurp(dir.file("f4/path.json")), "path.json");
  CHECK(json.find("selection")->find("criterion")->string() == "validation");
  CHECK(json.find("mode")->string() == "features");
  // C values, logistic loss with a bias: one run per value, refit at the end of each.
  require_same_path_on_1_2_4_ranks(
      dir, base + "fgm.max_iterations=2 fgm.bias=true fgm.loss=logistic 'path.C=[1,10]'", "c", 2);
  CHECK(read_model(dir.file("c4/point-1.fgm")).C == 1);
  CHECK(read_model(dir.file("c4/point-2-debiased.fgm")).has_bias);
  // A generated space: the refits run on the ranks' rows of the generated (pair) columns.
  require_same_path_on_1_2_4_ranks(dir, base + "features.kind=poly2 'path.features=[2,5]'", "q", 2);
  CHECK(read_model(dir.file("q1/point-2-debiased.fgm")).feature_kind == "poly2");
}

TEST_CASE("fgm path on a partitioned store agrees with the single-store fgm path", "[.mpi][mpi]") {
  // Independent check: the single-store path (train_fgm, one store) on the
  // same rows. Both solve the same problems; only the order of the row sums
  // differs, so the selected features are the same and the objectives (of
  // the points and of their refits) agree to the solvers' tolerance.
  TempDir dir("fgm-mpi-path");
  dir.write("in.txt", binary_integer_libsvm(600, 30, 21));
  // Declared 1000 wide (970 empty columns): path.features=[...,1000] passes the
  // width check (a count above the width is refused, issue 23 item 9) and the
  // run runs out of new features first.
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4 --tile-rows 64 --features 1000").code == 0);
  REQUIRE(run(dir, "ingest in.txt --out plain --tile-rows 64 --features 1000").code == 0);
  struct Case {
    std::string args;
    int points;
  };
  const std::vector<Case> cases = {
      {"fgm.B=2 'path.features=[2,5,8]' apg.eps_inner=1e-7 path.debias_C=1", 3},
      {"fgm.B=3 fgm.max_iterations=2 fgm.bias=true apg.eps_inner=1e-7 'path.B=[1,3]'", 2},
      // More than the 30 features: the last point is where the run ran out of new ones.
      {"fgm.B=12 'path.features=[3,7,1000]' apg.eps_inner=1e-7", 3},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    REQUIRE(run(dir, "path data.train=store output.dir=d " + c.args).code == 0);
    REQUIRE(run_mpi(dir, 2, "path data.train=store output.dir=d2 " + c.args).code == 0);
    REQUIRE(run(dir, "path data.train=plain output.dir=s " + c.args).code == 0);
    for (int k = 1; k <= c.points; ++k) {
      INFO("point " << k);
      const std::string point = "/point-" + std::to_string(k);
      for (const std::string suffix : {".fgm", "-debiased.fgm"}) {
        const Model d = read_model(dir.file("d" + point + suffix)), s = read_model(dir.file("s" + point + suffix));
        const Model d2 = read_model(dir.file("d2" + point + suffix));
        CHECK(feature_ids(d) == feature_ids(s));
        CHECK(d.features.size() == s.features.size());
        CHECK(d.objective == Approx(s.objective).epsilon(1e-4));
        CHECK(d.C == s.C);
        CHECK(same_bits(d.objective, d2.objective));
      }
    }
    const JsonValue d_json = parse_json(slurp(dir.file("d/path.json")), "path.json");
    const JsonValue s_json = parse_json(slurp(dir.file("s/path.json")), "path.json");
    const auto& d_runs = d_json.find("runs")->items();
    const auto& s_runs = s_json.find("runs")->items();
    REQUIRE(d_runs.size() == s_runs.size());
    for (size_t r = 0; r < d_runs.size(); ++r)
      CHECK(d_runs[r].find("stop_reason")->string() == s_runs[r].find("stop_reason")->string());
    std::filesystem::remove_all(dir.file("d"));
    std::filesystem::remove_all(dir.file("d2"));
    std::filesystem::remove_all(dir.file("s"));
  }
}

namespace {

// path.json's cv_folds: per fold its row counts, and per point the held-out
// accuracy and AUC and per outer iteration the objective (shortest
// round-trip text, so equal numbers are equal bits).
struct FoldFigures {
  double training_rows = 0, held_out_rows = 0;
  std::vector<double> accuracy, auc, objective, selected;
};

std::vector<FoldFigures> fold_figures(const std::string& path_json) {
  const JsonValue json = parse_json(slurp(path_json), "path.json");
  std::vector<FoldFigures> out;
  for (const JsonValue& f : json.find("cv_folds")->items()) {
    FoldFigures r;
    r.training_rows = f.find("training_rows")->number();
    r.held_out_rows = f.find("held_out_rows")->number();
    auto numbers = [](const JsonValue* list, std::vector<double>& to) {
      for (const JsonValue& v : list->items()) to.push_back(v.number());
    };
    numbers(f.find("points")->find("held_out_accuracy"), r.accuracy);
    numbers(f.find("points")->find("held_out_auc"), r.auc);
    numbers(f.find("iterations")->find("objective"), r.objective);
    numbers(f.find("iterations")->find("selected"), r.selected);
    out.push_back(std::move(r));
  }
  return out;
}

bool same_numbers(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_bits(a[i], b[i])) return false;
  return true;
}

// The chosen point and its criterion.
std::pair<double, std::string> chosen(const std::string& path_json) {
  const JsonValue json = parse_json(slurp(path_json), "path.json");
  const JsonValue* selection = json.find("selection");
  return {selection->find("chosen_point")->number(), selection->find("criterion")->string()};
}

}  // namespace

TEST_CASE("cross-validation on a partitioned store: the same folds and figures on 1, 2 and 4 ranks as on one store",
          "[.mpi][mpi]") {
  // Independent check: the single-store path.folds on the same rows ingested
  // without partitions (its folds from assign_folds over all labels, its
  // held-out figures from one cache). The folds must be the same rows (equal
  // fold sizes and per-fold paths), the CV figures equal to the solvers'
  // tolerance and the chosen point the same; across rank counts and threads
  // everything is the same bits.
  TempDir dir("fgm-mpi-path");
  dir.write("in.txt", binary_integer_libsvm(703, 40, 51));  // 703 rows: folds of unequal size
  dir.write("test.txt", binary_integer_libsvm(150, 40, 52));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4 --tile-rows 64").code == 0);
  REQUIRE(run(dir, "ingest in.txt --out plain --tile-rows 64").code == 0);
  struct Case {
    std::string args;
    int points, folds;
  };
  const std::vector<Case> cases = {
      {"fgm.B=2 'path.features=[2,4,8]' path.folds=4 apg.eps_inner=1e-8 data.validation=test.txt", 3, 4},
      // One run per C value, logistic loss with a bias: each fold's point at the end of each run.
      {"fgm.B=3 fgm.max_iterations=2 fgm.bias=true fgm.loss=logistic apg.eps_inner=1e-8 'path.C=[0.1,10]' "
       "path.folds=3 path.fold_seed=5",
       2, 3},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    const std::string args = "path data.train=store " + c.args;
    require_same_path_on_1_2_4_ranks(dir, args, "v", c.points);
    const std::vector<FoldFigures> one = fold_figures(dir.file("v1/path.json"));
    REQUIRE(one.size() == size_t(c.folds));
    for (int np : {2, 4}) {
      INFO("np = " << np);
      const std::vector<FoldFigures> other = fold_figures(dir.file("v" + std::to_string(np) + "/path.json"));
      REQUIRE(other.size() == one.size());
      for (size_t f = 0; f < one.size(); ++f) {
        CHECK(same_numbers(one[f].accuracy, other[f].accuracy));
        CHECK(same_numbers(one[f].auc, other[f].auc));
        CHECK(same_numbers(one[f].objective, other[f].objective));
      }
      const JsonValue json = parse_json(slurp(dir.file("v" + std::to_string(np) + "/path.json")), "path.json");
      CHECK(json.find("distributed")->find("cross_validation")->find("bytes")->number() > 0);
    }
    REQUIRE(run(dir, "path data.train=plain output.dir=s " + c.args).code == 0);
    const std::vector<FoldFigures> single = fold_figures(dir.file("s/path.json"));
    REQUIRE(single.size() == one.size());
    double held_out = 0;
    for (size_t f = 0; f < one.size(); ++f) {
      INFO("fold " << f + 1);
      CHECK(one[f].training_rows == single[f].training_rows);
      CHECK(one[f].held_out_rows == single[f].held_out_rows);
      CHECK(one[f].selected == single[f].selected);
      REQUIRE(one[f].objective.size() == single[f].objective.size());
      for (size_t t = 0; t < one[f].objective.size(); ++t)
        CHECK(one[f].objective[t] == Approx(single[f].objective[t]).epsilon(1e-4));
      REQUIRE(one[f].accuracy.size() == single[f].accuracy.size());
      for (size_t p = 0; p < one[f].accuracy.size(); ++p) {
        CHECK(one[f].accuracy[p] == Approx(single[f].accuracy[p]).margin(2.0 / one[f].held_out_rows));
        CHECK(one[f].auc[p] == Approx(single[f].auc[p]).margin(1e-3));
      }
      held_out += one[f].held_out_rows;
    }
    CHECK(held_out == 703);
    CHECK(chosen(dir.file("v1/path.json")) == chosen(dir.file("s/path.json")));
    CHECK(chosen(dir.file("v1/path.json")).second == "cv");
    for (const std::string& d : {"v1", "v2", "v4", "s"}) std::filesystem::remove_all(dir.file(d));
  }
}

TEST_CASE("a distributed fgm path killed mid-run resumes on the same rank count to the uninterrupted points",
          "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-path");
  dir.write("in.txt", binary_integer_libsvm(1500, 60, 41));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4").code == 0);
  const std::string args = "path data.train=store fgm.B=1 'path.features=[2,4,6,8,10,12,14,16,18,20,22,24]' ";
  REQUIRE(run_mpi(dir, 2, args + "output.dir=u").code == 0);
  // Rank 1 killed once rank 0 has logged point 3 (after 6 of the 24 outer iterations).
  start_mpi(dir, 2, args + "output.dir=o");
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  while (!contains(slurp(dir.file("err.txt")), "point 3:")) {
    REQUIRE(seconds() < 120);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill_last_rank(dir);
  while (slurp(dir.file("rc.txt")).empty()) {
    REQUIRE(seconds() < 180);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(std::stoi(slurp(dir.file("rc.txt"))) != 0);  // killed mid-run, not finished
  REQUIRE_FALSE(std::filesystem::exists(dir.file("o/path.csv")));
  REQUIRE(std::filesystem::exists(dir.file("o/checkpoint.fgm")));
  // Another rank count is refused, naming the difference; the checkpoint stays.
  RunResult r = run_mpi(dir, 4, args + "output.dir=o");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "written by a run on 2 rank(s), this run has 4"));
  REQUIRE(std::filesystem::exists(dir.file("o/checkpoint.fgm")));
  // The same count resumes: every point and refit as the uninterrupted run's.
  r = run_mpi(dir, 2, args + "output.dir=o");
  REQUIRE(r.code == 0);
  CHECK(contains(r.err, "resuming from iteration"));
  for (int k = 1; k <= 12; ++k) {
    const std::string point = "/point-" + std::to_string(k);
    require_same_model(dir.file("u" + point + ".fgm"), dir.file("o" + point + ".fgm"));
    require_same_model(dir.file("u" + point + "-debiased.fgm"), dir.file("o" + point + "-debiased.fgm"));
  }
  CHECK(csv_without_seconds(dir.file("u/path.csv")) == csv_without_seconds(dir.file("o/path.csv")));
  CHECK_FALSE(std::filesystem::exists(dir.file("o/checkpoint.fgm")));
}

TEST_CASE("fgm path on a partitioned store refuses what it does not support, naming the key", "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-path");
  dir.write("in.txt", binary_integer_libsvm(200, 20, 31));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4").code == 0);
  const std::string base = "path data.train=store fgm.B=2 'path.features=[2,4]' ";
  // More folds than the smaller class has rows (5, counted over all
  // partitions; no partition holds 5): refused before output.dir exists,
  // naming the key, as on one store.
  std::string few;
  for (int i = 0; i < 40; ++i) few += std::string(i % 8 == 3 ? "+1" : "-1") + " 1:" + std::to_string(i % 3 + 1) + " 2:1\n";
  dir.write("few.txt", few);
  REQUIRE(run(dir, "ingest few.txt --out few --partitions 4").code == 0);
  const std::string folds6 = "path data.train=few fgm.B=1 'path.features=[1,2]' path.folds=6 ";
  REQUIRE(run(dir, folds6 + "path.folds=5 output.dir=ok").code == 0);  // 5 folds: one positive row each
  RunResult r = run(dir, folds6 + "output.dir=o");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "path.folds"));
  CHECK(contains(r.err, "at most the 5 training rows of the smallest class"));
  CHECK_FALSE(std::filesystem::exists(dir.file("o")));
  r = run_mpi(dir, 2, folds6 + "output.dir=o");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "at most the 5 training rows of the smallest class"));
  CHECK_FALSE(std::filesystem::exists(dir.file("o")));
  r = run(dir, base + "\"features.transform=['maxabs']\" output.dir=o");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "features.transform: a feature transform is not supported by fgm path on a partitioned store"));
  CHECK_FALSE(std::filesystem::exists(dir.file("o")));
  // A rank count that does not divide the partitions: the trainer's check, on every rank.
  r = run_mpi(dir, 3, base + "output.dir=o");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "which 3 ranks cannot share evenly"));
  CHECK_FALSE(std::filesystem::exists(dir.file("o/path.csv")));
  // A bad test file (read on rank 0 at the first point): the job ends, no output.
  dir.write("bad.txt", "+1 1:1\n-1 2:x\n");
  r = run_mpi(dir, 2, base + "data.test=bad.txt output.dir=o");
  CHECK(r.code == 3);
  CHECK(contains(r.err, "bad.txt"));
  CHECK_FALSE(std::filesystem::exists(dir.file("o/path.csv")));
  CHECK_FALSE(std::filesystem::exists(dir.file("o/point-1.fgm")));
}

}  // namespace fgm::test
