// solver = "sifs" from the command line: fgm train writes a linear model that
// fgm predict and fgm inspect read (its test accuracy recomputed here from
// the model's weights), fgm path writes path.csv / path.json (with the
// screening = none comparison), multi-class train and path, and bad keys are
// errors naming the key with no output left behind.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "core/json_reader.h"
#include "io/model_file.h"
#include "tests/cli/cli_test_util.h"

using namespace fgm;
using namespace fgm::test;

namespace {

// Binary rows whose label follows features 1-3; 30 features in all.
std::string binary_rows(uint64_t n, uint64_t seed) {
  return random_libsvm(n, 30, 0.3, seed, {0, 1, 2});
}

// K classes; class c raises features 3c+1..3c+3.
std::string class_rows(uint64_t n, int K, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unif(0, 1);
  std::ostringstream out;
  for (uint64_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i % K);
    out << c + 1;
    for (int j = 0; j < 3 * K + 6; ++j) {
      double v = unif(rng) < 0.3 ? std::floor(3 * unif(rng)) : 0;
      if (j / 3 == c) v += 1;
      if (v != 0) out << ' ' << j + 1 << ':' << v;
    }
    out << '\n';
  }
  return out.str();
}

size_t csv_rows(const std::string& text) {
  size_t lines = 0;
  for (char ch : text) lines += ch == '\n';
  return lines - 1;  // header
}

}  // namespace

TEST_CASE("fgm train solver=sifs: a linear model that predict and inspect read", "[cli][sifs]") {
  TempDir dir("fgm-sifs-cli");
  dir.write("train.svm", binary_rows(400, 3));
  dir.write("test.svm", binary_rows(200, 4));
  RunResult r = run(dir, "train solver=sifs data.train=train.svm data.test=test.svm output.dir=run "
                         "sifs.beta_ratio=0.3 sifs.alpha_ratio=0.2 sifs.alpha_points=6 engine.cache_dir=cache "
                         "engine.progress=off");
  CAPTURE(r.out, r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.out, "solver=sifs"));
  const std::string run_json = slurp(dir.file("run/run.json"));
  REQUIRE(contains(run_json, "\"solver\": \"sifs\""));
  REQUIRE(contains(run_json, "\"beta_max\""));
  REQUIRE(std::filesystem::exists(dir.file("run/report.html")));
  const Model model = read_model(dir.file("run/model.fgm"));
  REQUIRE(model.solver == "sifs");
  REQUIRE(!model.features.empty());
  REQUIRE(model.features.size() < 30);  // the l1 term made it sparse

  // The model's decisions recomputed from its weights: sign(w'x) against the labels.
  const InMemoryData test = parse_libsvm_simple(dir.file("test.svm"));
  std::map<uint64_t, double> w;
  for (const auto& f : model.features) w[f.key.ids[0]] = f.weight;
  uint64_t correct = 0;
  for (size_t i = 0; i < test.rows.size(); ++i) {
    double s = 0;
    for (const auto& [j, v] : test.rows[i])
      if (w.count(j)) s += w[j] * v;
    correct += (s > 0 ? 1.0 : -1.0) == test.labels[i];
  }
  const double accuracy = static_cast<double>(correct) / static_cast<double>(test.rows.size());
  RunResult p = run(dir, "predict --model run/model.fgm test.svm --out scores.txt");
  CAPTURE(p.out, p.err);
  REQUIRE(p.code == 0);
  REQUIRE(contains(p.out, fmt::format("accuracy={:.4f}", accuracy)));
  REQUIRE(contains(r.out, fmt::format("accuracy={:.4f}", accuracy)));
  RunResult i = run(dir, "inspect run/model.fgm");
  REQUIRE(i.code == 0);
  REQUIRE(contains(i.out, "sifs"));
}

TEST_CASE("fgm path solver=sifs: path.csv per point, path.json totals and the speedup", "[cli][sifs]") {
  TempDir dir("fgm-sifs-path");
  dir.write("train.svm", binary_rows(300, 5));
  dir.write("test.svm", binary_rows(100, 6));
  RunResult r = run(dir, "path solver=sifs data.train=train.svm data.test=test.svm output.dir=p "
                         "sifs.beta_points=2 sifs.alpha_points=4 sifs.beta_max_ratio=0.6 sifs.compare=true "
                         "engine.cache_dir=cache engine.progress=off");
  CAPTURE(r.out, r.err);
  REQUIRE(r.code == 0);
  const std::string csv = slurp(dir.file("p/path.csv"));
  REQUIRE(csv_rows(csv) == 8);
  for (const char* column : {"beta", "alpha", "selected", "train_objective", "gap", "features_screened",
                             "samples_screened_R", "samples_screened_L", "screening_seconds", "solve_seconds",
                             "test_accuracy"})
    REQUIRE(contains(csv.substr(0, csv.find('\n')), column));
  const JsonValue json = parse_json(slurp(dir.file("p/path.json")), "path.json");
  REQUIRE(json.find("speedup"));
  REQUIRE(json.find("cpu_speedup"));
  REQUIRE(json.find("baseline"));
  // The screened run holds the (small) store's columns; the baseline holds its whole problem instead.
  REQUIRE(json.find("totals")->find("columns_held")->boolean());
  REQUIRE(!json.find("baseline")->find("columns_held")->boolean());
  REQUIRE(json.find("max_objective_excess_over_gaps")->number() <= 1e-12);
  REQUIRE(std::filesystem::exists(dir.file("p/report.html")));
  RunResult rep = run(dir, "report p");
  CAPTURE(rep.err);
  REQUIRE(rep.code == 0);
}

TEST_CASE("solver=sifs multi-class: train, predict and path on four classes", "[cli][sifs]") {
  TempDir dir("fgm-sifs-multi");
  dir.write("train.svm", class_rows(240, 4, 7));
  dir.write("test.svm", class_rows(80, 4, 8));
  RunResult r = run(dir, "train solver=sifs data.train=train.svm data.test=test.svm output.dir=run "
                         "sifs.beta_ratio=0.3 sifs.alpha_ratio=0.3 sifs.alpha_points=4 engine.cache_dir=cache "
                         "engine.progress=off");
  CAPTURE(r.out, r.err);
  REQUIRE(r.code == 0);
  const Model model = read_model(dir.file("run/model.fgm"));
  REQUIRE(model.classes.size() == 4);
  RunResult p = run(dir, "predict --model run/model.fgm test.svm --out pred.txt");
  REQUIRE(p.code == 0);
  REQUIRE(contains(p.out, "accuracy="));
  RunResult path = run(dir, "path solver=sifs data.train=train.svm output.dir=p sifs.beta_points=2 "
                            "sifs.alpha_points=3 sifs.beta_max_ratio=0.5 engine.cache_dir=cache engine.progress=off");
  CAPTURE(path.err);
  REQUIRE(path.code == 0);
  REQUIRE(csv_rows(slurp(dir.file("p/path.csv"))) == 6);
}

TEST_CASE("solver=sifs: bad and misplaced keys are errors naming the key, with no output", "[cli][sifs]") {
  TempDir dir("fgm-sifs-bad");
  dir.write("train.svm", binary_rows(60, 9));
  const std::string base = "data.train=train.svm output.dir=out engine.cache_dir=cache engine.progress=off ";
  struct Case {
    std::string args, key;
  };
  const Case cases[] = {
      {"train solver=sifs sifs.beta_points=3", "sifs.beta_points"},
      {"train solver=sifs sifs.alpha_min_ratio=0.1", "sifs.alpha_min_ratio"},
      {"path solver=sifs sifs.alpha_ratio=0.5", "sifs.alpha_ratio"},
      {"path solver=sifs data.validation=train.svm", "data.validation"},
      {"train sifs.gamma=0.1", "sifs.gamma"},  // solver = fgm
      {"train solver=sifs fgm.C=3", "fgm.C"},
      {"train solver=sifs sifs.gamma=1.5", "sifs.gamma"},
      {"train solver=sifs sifs.tol=0", "sifs.tol"},
      {"path solver=sifs sifs.screening=fast", "sifs.screening"},
      {"train solver=sifs features.kind=poly2", "features.kind"},
      {"train solver=sifs sifs.gama=0.1", "sifs.gama"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    RunResult r = run(dir, c.args.substr(0, c.args.find(' ')) + " " + base + c.args.substr(c.args.find(' ') + 1));
    CAPTURE(r.err);
    REQUIRE(r.code != 0);
    REQUIRE(contains(r.err, c.key));
    REQUIRE(!std::filesystem::exists(dir.file("out")));
  }
}
