// solver = "pnorm_kta" on a partitioned store (docs/distributed.md, "p-norm
// KTA"): fgm path and fgm train give the same path.csv (but its seconds) and
// the same models bit for bit on 1, 2 and 4 ranks and 1 or 2 threads; every
// point's selected features are the closed form {i : a_i > 2λ₁ε + λ₂pε^(p−1)}
// of alignments computed directly from the text (an independent oracle), and
// the single-store run on the unpartitioned data selects the same features
// with the same models up to rounding; kta.kernel = "rbf" is refused naming
// the key. Tagged [.mpi] like tests/cli/test_mpi_cli.cpp.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/json_reader.h"
#include "io/model_file.h"
#include "solvers/pnorm_kta/kta_path.h"
#include "tests/cli/cli_test_util.h"
#include "tests/engine/kta_oracle.h"

namespace fgm::test {
namespace {

enum class Values { kBinary, kIntegerTied };

// Features 1–3 carry the label, 4–6 weaker and weaker, 7–10 are noise; binary values are all 1,
// integer values 1..3 (many ties).
std::string kta_libsvm(uint64_t rows, Values values, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(0, 3);
  std::uniform_real_distribution<double> u(0, 1);
  auto value = [&](int v) { return values == Values::kBinary ? (v > 0 ? 1 : 0) : v; };
  std::string text;
  for (uint64_t r = 0; r < rows; ++r) {
    const bool positive = u(rng) < 0.45;
    text += positive ? "+1" : "-1";
    std::vector<int> x(11, 0);
    x[1] = value(positive != (u(rng) < 0.2) ? 1 + small(rng) % 3 : 0);
    x[2] = value(std::min(3, small(rng) + (positive ? 1 : 0)));
    x[3] = value(positive ? small(rng) : small(rng) / 2);
    for (int j = 4; j <= 6; ++j)  // weaker and weaker signals
      x[j] = value(std::min(3, small(rng) + (positive && u(rng) < 0.2 * (7 - j) ? 1 : 0)));
    for (int j = 7; j <= 10; ++j) x[j] = value(small(rng));
    for (int j = 1; j <= 10; ++j)
      if (x[j]) text += " " + std::to_string(j) + ":" + std::to_string(x[j]);
    text += "\n";
  }
  return text;
}

size_t column_of(const std::vector<std::string>& header, const std::string& name) {
  const size_t c = csv_column(header, name);
  if (c == header.size()) FAIL("no column " << name);
  return c;
}

// Two path.csv files agree cell for cell but in the timing columns.
void require_same_path_csv(const std::string& a, const std::string& b) {
  const auto ra = csv_cells(slurp(a)), rb = csv_cells(slurp(b));
  REQUIRE(ra.size() == rb.size());
  REQUIRE(ra.size() > 2);
  const std::set<std::string> timing{"seconds", "path_seconds", "svm_seconds"};
  for (size_t r = 0; r < ra.size(); ++r) {
    REQUIRE(ra[r].size() == rb[r].size());
    for (size_t c = 0; c < ra[r].size(); ++c)
      if (!timing.count(ra[0][c])) CHECK(ra[r][c] == rb[r][c]);
  }
}

void require_same_model(const std::string& a, const std::string& b) {
  const Model ma = read_model(a), mb = read_model(b);
  REQUIRE(ma.features.size() == mb.features.size());
  for (size_t k = 0; k < ma.features.size(); ++k) {
    CHECK(ma.features[k].key.ids[0] == mb.features[k].key.ids[0]);
    CHECK(std::memcmp(&ma.features[k].weight, &mb.features[k].weight, sizeof(double)) == 0);
  }
  CHECK(std::memcmp(&ma.bias, &mb.bias, sizeof(double)) == 0);
  CHECK(std::memcmp(&ma.objective, &mb.objective, sizeof(double)) == 0);
}

std::string np_dir(const std::string& tag, int np, int threads) {
  return tag + "-np" + std::to_string(np) + "-t" + std::to_string(threads);
}

// `command` (path or train) on 1 rank with 1 and 2 threads and on 2 and 4
// ranks under mpirun; every output is the first run's.
void require_rank_invariant(const TempDir& dir, const std::string& command, const std::string& tag,
                            const std::string& args, uint64_t points) {
  const std::string first = np_dir(tag, 1, 1);
  for (const auto& [np, threads] : std::vector<std::pair<int, int>>{{1, 1}, {1, 2}, {2, 2}, {4, 1}}) {
    INFO(command << " np = " << np << ", threads = " << threads);
    const std::string out = np_dir(tag, np, threads);
    const std::string line = command + " " + args + " output.dir=" + out + " engine.threads=" + std::to_string(threads);
    const RunResult r = np == 1 ? run(dir, line) : run_mpi(dir, np, line);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(contains(r.out, "ranks=" + std::to_string(np)));
    if (command == "train") {
      require_same_model(dir.file(first + "/model.fgm"), dir.file(out + "/model.fgm"));
      continue;
    }
    require_same_path_csv(dir.file(first + "/path.csv"), dir.file(out + "/path.csv"));
    for (uint64_t k = 1; k <= points; ++k)
      require_same_model(dir.file(first + "/point-" + std::to_string(k) + ".fgm"),
                         dir.file(out + "/point-" + std::to_string(k) + ".fgm"));
  }
}

constexpr double kLambda1 = 0.005, kLambda2 = 0.05;
const std::string kConfig =
    "solver = \"pnorm_kta\"\n[data]\ntrain = \"store\"\ntest = \"test.svm\"\n"
    "[kta]\nlambda1 = 0.005\nlambda2 = 0.05\np_step = 0.1\n[apg]\neps_inner = 1e-7\n"
    "[engine]\nprogress = \"off\"\nblock_bytes = \"1KB\"\n";

// path.csv p, selected and test_accuracy by point.
struct PathColumns {
  std::vector<double> p, test_accuracy;
  std::vector<uint64_t> selected;
};
PathColumns path_columns(const std::string& file) {
  const auto rows = csv_cells(slurp(file));
  const size_t cp = column_of(rows[0], "p"), cs = column_of(rows[0], "selected"),
               ca = column_of(rows[0], "test_accuracy");
  PathColumns out;
  for (size_t r = 1; r < rows.size(); ++r) {
    out.p.push_back(std::stod(rows[r][cp]));
    out.selected.push_back(std::stoull(rows[r][cs]));
    out.test_accuracy.push_back(std::stod(rows[r][ca]));
  }
  return out;
}

// Every point's model holds the closed-form active set of the oracle
// alignments, and equals the single-store model on the same rows up to rounding.
void require_closed_form_and_single_store(const TempDir& dir, const std::string& text_file,
                                          const std::string& distributed, const std::string& single) {
  const std::map<uint64_t, double> oracle = oracle_kta_alignments(parse_libsvm_simple(dir.file(text_file)));
  kta::PathOptions o;
  o.lambda1 = kLambda1;
  o.lambda2 = kLambda2;
  const PathColumns d = path_columns(dir.file(distributed + "/path.csv"));
  const PathColumns s = path_columns(dir.file(single + "/path.csv"));
  REQUIRE(d.p.size() == 11);
  CHECK(d.selected == s.selected);
  o.p_step = 0.1;
  const std::vector<double> grid = kta::path_grid(o);
  REQUIRE(grid.size() == d.p.size());
  std::set<uint64_t> sizes;
  for (size_t k = 0; k < d.p.size(); ++k) {
    INFO("point " << k + 1 << ", p = " << d.p[k]);
    CHECK(d.p[k] == Approx(grid[k]).margin(1e-6));
    const double t = kta::active_threshold(grid[k], o);
    std::set<uint64_t> closed_form;
    for (const auto& [f, a] : oracle) {
      REQUIRE(std::fabs(a - t) > 1e-9);
      if (a > t) closed_form.insert(f);
    }
    const std::string name = "/point-" + std::to_string(k + 1) + ".fgm";
    const Model md = read_model(dir.file(distributed + name)), ms = read_model(dir.file(single + name));
    std::set<uint64_t> selected;
    for (const auto& f : md.features) selected.insert(f.key.ids[0]);
    CHECK(selected == closed_form);
    sizes.insert(selected.size());
    REQUIRE(md.features.size() == ms.features.size());
    for (size_t j = 0; j < md.features.size(); ++j) {
      CHECK(md.features[j].key.ids[0] == ms.features[j].key.ids[0]);
      CHECK(md.features[j].weight == Approx(ms.features[j].weight).epsilon(1e-5).margin(1e-7));
    }
    CHECK(md.bias == Approx(ms.bias).epsilon(1e-5).margin(1e-7));
    CHECK(d.test_accuracy[k] == Approx(s.test_accuracy[k]).margin(0.006));  // one test row of 200
  }
  CHECK(sizes.size() > 2);  // the path changes the selection
}

}  // namespace

TEST_CASE("pnorm_kta paths and models on 2 and 4 ranks are the 1-process ones bit for bit, the closed form and "
          "the single store's",
          "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-kta");
  for (const Values values : {Values::kIntegerTied, Values::kBinary}) {
    const std::string kind = values == Values::kBinary ? "binary" : "integer";
    INFO(kind << " values");
    dir.write("in-" + kind + ".txt", kta_libsvm(400, values, values == Values::kBinary ? 5 : 6));
    dir.write("test.svm", kta_libsvm(200, Values::kIntegerTied, 7));
    REQUIRE(run(dir, "ingest in-" + kind + ".txt --out store-" + kind + " --partitions 4 --tile-rows 32").code == 0);
    REQUIRE(run(dir, "ingest in-" + kind + ".txt --out plain-" + kind + " --tile-rows 32").code == 0);
    dir.write("c.toml", kConfig);
    const std::string args = "--config c.toml data.train=store-" + kind;
    require_rank_invariant(dir, "path", kind, args, 11);
    const RunResult r = run(dir, "path --config c.toml data.train=plain-" + kind + " output.dir=" + kind + "-single");
    INFO(r.err);
    REQUIRE(r.code == 0);
    require_closed_form_and_single_store(dir, "in-" + kind + ".txt", np_dir(kind, 1, 1), kind + "-single");
    require_rank_invariant(dir, "train", kind + "-train", args + " kta.p=1.3", 0);
  }
  // Rank 0 wrote the distributed sections and the report.
  const JsonValue path_json = parse_json(slurp(dir.file(np_dir("binary", 4, 1) + "/path.json")), "path.json");
  const JsonValue* distributed = path_json.find("distributed");
  REQUIRE(distributed);
  CHECK(distributed->find("ranks")->number() == 4);
  std::set<std::string> phases;
  for (const auto& pass : distributed->find("passes")->items()) {
    phases.insert(pass.find("phase")->string());
    CHECK(pass.find("bytes")->number() > 0);
  }
  CHECK(phases == std::set<std::string>{"labels", "alignments", "svm"});
  CHECK(path_json.find("data")->find("partitions")->number() == 4);
  CHECK(std::filesystem::exists(dir.file(np_dir("binary", 4, 1) + "/report.html")));
  const JsonValue run_json =
      parse_json(slurp(dir.file(np_dir("binary-train", 2, 2) + "/run.json")), "run.json");
  CHECK(run_json.find("solver")->string() == "pnorm_kta");
  CHECK(run_json.find("distributed")->find("ranks")->number() == 2);
  CHECK(run_json.find("p")->number() == Approx(1.3));
  CHECK(run(dir, "predict --model " + np_dir("binary-train", 2, 2) + "/model.fgm test.svm").code == 0);
}

TEST_CASE("pnorm_kta with kta.kernel = rbf on a partitioned store is refused naming the key", "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-kta");
  dir.write("in.txt", kta_libsvm(200, Values::kIntegerTied, 9));
  dir.write("test.svm", kta_libsvm(50, Values::kIntegerTied, 10));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 2").code == 0);
  dir.write("c.toml", "solver = \"pnorm_kta\"\n[data]\ntrain = \"store\"\ntest = \"test.svm\"\n");
  for (const std::string command : {"path", "train"}) {
    const RunResult one = run(dir, command + " --config c.toml kta.kernel=rbf output.dir=o-" + command);
    CHECK(one.code != 0);
    CHECK(contains(one.err, "kta.kernel"));
    CHECK(contains(one.err, "n x n"));
    const RunResult two = run_mpi(dir, 2, command + " --config c.toml kta.kernel=rbf output.dir=o-" + command);
    CHECK(two.code != 0);
    CHECK(contains(two.err, "kta.kernel"));
    CHECK(!std::filesystem::exists(dir.file("o-" + command)));
  }
}

}  // namespace fgm::test
