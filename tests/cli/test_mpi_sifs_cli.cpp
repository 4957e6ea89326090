// solver = sifs on a partitioned store (engine/distributed_sifs.h), with and
// without mpirun: path.csv and the models are the same bits for 1, 2 and 4
// ranks and 1 or 2 threads (three classes: 1 and 2 ranks); the distributed solutions equal the single-store
// SIFS solutions (Prox-SDCA on the unpartitioned data: objective within the
// duality gaps, same support); screening on the partitioned store is safe
// (every screened feature and sample inactive in a high-precision
// unscreened solution). Binary, integer and tied values. Tagged [.mpi] (the
// `mpi` ctest entry).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/json_reader.h"
#include "engine/distributed_sifs.h"
#include "engine/sifs_run.h"
#include "io/model_file.h"
#include "io/shard_store.h"
#include "tests/cli/cli_test_util.h"
#include "tests/cli/mpi_test_util.h"

namespace fgm::test {
namespace {

// Binary rows over 40 features, 8 per row: binary (j % 4 == 0), integer
// (j % 4 == 1) and one-decimal values (ties); the label follows features
// 1-4; every 7th row repeats the row before it (tied rows).
std::string binary_sifs_rows(uint64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> feature(1, 40);
  std::uniform_int_distribution<int> small(1, 3);
  std::normal_distribution<double> normal(0, 1);
  std::ostringstream out;
  std::string previous;
  for (uint64_t i = 0; i < n; ++i) {
    if (i % 7 == 6) {
      out << previous;
      continue;
    }
    std::map<uint32_t, double> row;
    while (row.size() < 8) {
      const uint32_t f = feature(rng);
      row[f] = f % 4 == 0 ? 1.0 : f % 4 == 1 ? double(small(rng)) : std::round(normal(rng) * 10) / 10;
    }
    double score = 0.3 * normal(rng);
    for (const auto& [f, v] : row)
      if (f <= 4) score += (f % 2 ? 1.0 : -1.0) * v;
    std::ostringstream line;
    line << (score > 0 ? "+1" : "-1");
    for (const auto& [f, v] : row) line << ' ' << f << ':' << v;
    line << '\n';
    previous = line.str();
    out << previous;
  }
  return out.str();
}

// Three classes (labels 1-3); class c raises integer features 3c+1..3c+3.
std::string class_rows(uint64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> unif(0, 1);
  std::ostringstream out;
  for (uint64_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i % 3);
    out << c + 1;
    for (int j = 0; j < 15; ++j) {
      double v = unif(rng) < 0.3 ? std::floor(3 * unif(rng)) : 0;
      if (j / 3 == c) v += 1;
      if (v != 0) out << ' ' << j + 1 << ':' << v;
    }
    out << '\n';
  }
  return out.str();
}

const char* kPathConfig =
    "solver = \"sifs\"\n[data]\ntrain = \"store\"\n[sifs]\nbeta_points = 3\nbeta_min_ratio = 0.1\n"
    "alpha_points = 5\nalpha_min_ratio = 0.05\n";

// path.csv's rows as cells, without the wall-time columns.
std::vector<std::vector<std::string>> csv_numbers(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line, cell;
  std::vector<std::string> header;
  while (std::getline(in, line)) {
    std::istringstream cells(line);
    std::vector<std::string> row;
    while (std::getline(cells, cell, ',')) row.push_back(cell);
    if (header.empty()) {
      header = row;
      continue;
    }
    std::vector<std::string> kept;
    for (size_t k = 0; k < row.size(); ++k)
      if (header[k].find("seconds") == std::string::npos) kept.push_back(header[k] + "=" + row[k]);
    rows.push_back(kept);
  }
  return rows;
}

// The named column of path.csv as numbers.
std::vector<double> csv_column(const std::string& text, const std::string& name) {
  std::vector<double> out;
  for (const auto& row : csv_numbers(text))
    for (const auto& cell : row)
      if (cell.rfind(name + "=", 0) == 0) out.push_back(std::stod(cell.substr(name.size() + 1)));
  return out;
}

// The point-<k>.fgm that fgm path wrote.
std::string featured_model(const TempDir& dir, const std::string& out) {
  for (const auto& entry : std::filesystem::directory_iterator(dir.file(out)))
    if (entry.path().extension() == ".fgm") return entry.path().string();
  FAIL("no point model in " << out);
  return "";
}

}  // namespace

TEST_CASE("sifs on a 4-partition store: path.csv and models bit for bit on 1, 2 and 4 ranks, 1 or 2 threads",
          "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-sifs");
  dir.write("in.txt", binary_sifs_rows(280, 1));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4 --tile-rows 32").code == 0);
  dir.write("c.toml", kPathConfig);
  RunResult one = run(dir, "path --config c.toml output.dir=p1");
  REQUIRE(one.code == 0);
  const auto reference = csv_numbers(slurp(dir.file("p1/path.csv")));
  REQUIRE(reference.size() == 15);
  // Something was screened and solved, so the comparison covers both.
  double screened = 0, solved = 0;
  for (double v : csv_column(slurp(dir.file("p1/path.csv")), "samples_screened_L")) screened += v;
  for (double v : csv_column(slurp(dir.file("p1/path.csv")), "epochs")) solved += v;
  CHECK(screened > 0);
  CHECK(solved > 0);
  const std::string train_args = "train solver=sifs data.train=store sifs.beta_ratio=0.2 sifs.alpha_ratio=0.1 "
                                 "sifs.alpha_points=5 output.dir=";
  REQUIRE(run(dir, train_args + "t1").code == 0);
  struct Launch {
    int np;
    int threads;
  };
  for (const Launch l : {Launch{1, 2}, Launch{2, 1}, Launch{4, 2}}) {
    INFO("np = " << l.np << ", threads = " << l.threads);
    const std::string suffix = std::to_string(l.np) + "-" + std::to_string(l.threads);
    const std::string threads = " engine.threads=" + std::to_string(l.threads);
    RunResult p = l.np == 1 ? run(dir, "path --config c.toml output.dir=p" + suffix + threads)
                            : run_mpi(dir, l.np, "path --config c.toml output.dir=p" + suffix + threads);
    REQUIRE(p.code == 0);
    CHECK(csv_numbers(slurp(dir.file("p" + suffix + "/path.csv"))) == reference);
    require_same_model(featured_model(dir, "p1"), featured_model(dir, "p" + suffix));
    RunResult t = l.np == 1 ? run(dir, train_args + "t" + suffix + threads)
                            : run_mpi(dir, l.np, train_args + "t" + suffix + threads);
    REQUIRE(t.code == 0);
    require_same_model(dir.file("t1/model.fgm"), dir.file("t" + suffix + "/model.fgm"));
    const JsonValue json = parse_json(slurp(dir.file("t" + suffix + "/run.json")), "run.json");
    const JsonValue* distributed = json.find("distributed");
    REQUIRE(distributed != nullptr);
    CHECK(distributed->find("ranks")->number() == l.np);
    CHECK(distributed->find("partitions")->number() == 4);
    double bytes = 0;
    for (const auto& pass : distributed->find("passes")->items()) bytes += pass.find("bytes")->number();
    CHECK((bytes > 0) == (l.np > 1));  // without mpirun nothing is communicated
  }
}

TEST_CASE("distributed sifs equals single-store sifs: objective within the gaps, the same support",
          "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-sifs");
  const bool multiclass = GENERATE(false, true);
  INFO((multiclass ? "three classes" : "binary"));
  dir.write("in.txt", multiclass ? class_rows(240, 2) : binary_sifs_rows(280, 2));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4 --tile-rows 32").code == 0);
  dir.write("c.toml", kPathConfig);
  REQUIRE(run_mpi(dir, 2, "path --config c.toml output.dir=dist").code == 0);
  REQUIRE(run(dir, "path --config c.toml output.dir=dist1").code == 0);
  CHECK(csv_numbers(slurp(dir.file("dist1/path.csv"))) == csv_numbers(slurp(dir.file("dist/path.csv"))));
  // The independent twin: the single-store path (screening, Prox-SDCA) on the unpartitioned input.
  REQUIRE(run(dir, "path --config c.toml data.train=in.txt engine.cache_dir=cache output.dir=single").code == 0);
  const std::string d = slurp(dir.file("dist/path.csv")), s = slurp(dir.file("single/path.csv"));
  const auto obj_d = csv_column(d, "train_objective"), obj_s = csv_column(s, "train_objective");
  const auto gap_d = csv_column(d, "gap"), gap_s = csv_column(s, "gap");
  const auto sel_d = csv_column(d, "selected"), sel_s = csv_column(s, "selected");
  const auto conv = csv_column(d, "converged");
  REQUIRE(obj_d.size() == 15);
  REQUIRE(obj_s.size() == obj_d.size());
  for (size_t k = 0; k < obj_d.size(); ++k) {
    INFO("point " << k);
    CHECK(conv[k] == 1);
    CHECK(gap_d[k] <= 1e-9);
    CHECK(std::abs(obj_d[k] - obj_s[k]) <= gap_d[k] + gap_s[k] + 1e-12);
    CHECK(sel_d[k] == sel_s[k]);
  }
  // One model, feature by feature.
  const std::string train_args = "train solver=sifs sifs.beta_ratio=0.2 sifs.alpha_ratio=0.1 sifs.alpha_points=5 ";
  REQUIRE(run_mpi(dir, 4, train_args + "data.train=store output.dir=t4").code == 0);
  REQUIRE(run(dir, train_args + "data.train=in.txt engine.cache_dir=cache output.dir=ts").code == 0);
  const Model md = read_model(dir.file("t4/model.fgm")), ms = read_model(dir.file("ts/model.fgm"));
  auto same_support = [](const std::vector<ModelFeature>& a, const std::vector<ModelFeature>& b) {
    REQUIRE(a.size() == b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      CHECK(a[k].key.ids[0] == b[k].key.ids[0]);
      CHECK(std::abs(a[k].weight - b[k].weight) <= 1e-3 * (1 + std::abs(b[k].weight)));
    }
  };
  REQUIRE(md.classes.size() == ms.classes.size());
  same_support(md.features, ms.features);
  for (size_t c = 0; c < md.classes.size(); ++c) same_support(md.classes[c].features, ms.classes[c].features);
  CHECK(md.positive_label == ms.positive_label);
  CHECK(md.negative_label == ms.negative_label);
}

TEST_CASE("sifs screening on a partitioned store is safe: screened features and samples are inactive in the "
          "unscreened solution",
          "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-sifs");
  const bool multiclass = GENERATE(false, true);
  INFO((multiclass ? "three classes" : "binary"));
  dir.write("in.txt", multiclass ? class_rows(240, 3) : binary_sifs_rows(280, 3));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4 --tile-rows 32").code == 0);
  REQUIRE(run(dir, "ingest in.txt --out single").code == 0);
  MemoryBudget budget(256ull << 20);
  SingleRankCommunicator comm;
  DistributedSifsPasses passes(comm, dir.file("store"), SchedulerOptions{}, 1 << 20, budget);
  SifsSettings settings;
  settings.tol = 1e-9;
  settings.gamma = 0.5;  // with steps of a fine grid, IFS screens features here too
  DistributedSifsSolver solver(passes, settings);
  // The exact twin: the single store, no screening, Prox-SDCA to a 1e-13 gap.
  auto store = ShardStore::open(dir.file("single"), budget);
  const SifsLayout layout = sifs_layout_of(*store);
  BlockStream stream(*store, SchedulerOptions{}, budget);
  SifsData data(stream, store->plan_blocks(1 << 20), layout, budget);
  SifsSettings exact_settings = settings;
  exact_settings.screening = SifsScreening::kNone;
  exact_settings.tol = 1e-13;
  exact_settings.max_epochs = 200000;
  SifsSolver exact(data, exact_settings);
  REQUIRE(passes.columns() == data.columns());
  uint64_t features_screened = 0, samples_screened = 0;
  for (double beta_ratio : {0.5, 0.15}) {
    const double beta = beta_ratio * solver.beta_max();
    SifsReference ref = solver.closed_form(beta);
    const double alpha_max = ref.alpha;
    REQUIRE(alpha_max > 0);
    const SifsReference exact_start = exact.closed_form(beta);
    for (double alpha_ratio : log_spaced(1.0, 0.05, 12)) {
      if (alpha_ratio == 1.0) continue;
      const double target = alpha_ratio * alpha_max;
      INFO("beta ratio " << beta_ratio << ", alpha ratio " << alpha_ratio);
      const ScreenedSets sets = screen(passes, ref, target, settings.gamma, SifsScreening::kSifs);
      SifsReference truth;
      const SifsPoint exact_point = exact.solve(exact_start, target, truth);
      REQUIRE(exact_point.converged);
      std::vector<double> M;
      data.row_pass(truth.w, nullptr, M, nullptr);
      for (uint64_t e = 0; e < sets.weight_free.size(); ++e)
        if (!sets.weight_free[e]) {
          CHECK(truth.w[e] == 0);
          ++features_screened;
        }
      for (uint64_t dd = 0; dd < layout.coordinates(); ++dd) {
        const double margin = 1 + layout.coordinate_dot(dd, M);
        if (sets.coordinate[dd] == CoordinateStatus::kR) {
          CHECK(margin <= 1e-7);
          ++samples_screened;
        } else if (sets.coordinate[dd] == CoordinateStatus::kL) {
          CHECK(margin >= settings.gamma - 1e-7);
          ++samples_screened;
        }
      }
      // The distributed solve from this reference: the exact objective within its gap, the same support.
      SifsReference next;
      const SifsPoint point = solver.solve(ref, target, next);
      CHECK(point.converged);
      CHECK(std::abs(point.objective - exact_point.objective) <= point.gap + exact_point.gap + 1e-12);
      for (uint64_t e = 0; e < next.w.size(); ++e) CHECK((next.w[e] != 0) == (truth.w[e] != 0));
      ref = std::move(next);
    }
  }
  CHECK(features_screened > 0);
  CHECK(samples_screened > 0);
}

TEST_CASE("sifs on a partitioned store: settings it does not support are refused naming the key", "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-sifs");
  dir.write("in.txt", binary_sifs_rows(120, 4));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4").code == 0);
  RunResult r = run(dir, "train solver=sifs data.train=store data.truth=in.txt output.dir=o");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "data.truth"));
  CHECK_FALSE(std::filesystem::exists(dir.file("o")));
  r = run_mpi(dir, 3, "path solver=sifs data.train=store output.dir=o");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "cannot share evenly"));
  // A feature transform is not distributed for fgm path: refused under mpirun too.
  r = run_mpi(dir, 2, "path solver=sifs data.train=store \"features.transform=['maxabs']\" output.dir=o");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "features.transform"));
  CHECK_FALSE(std::filesystem::exists(dir.file("o")));
}

}  // namespace fgm::test
