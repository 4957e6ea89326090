// A store of one partition (`fgm ingest --partitions 1`) is the single store
// on the partitioned path: every solver trains the single store's model from
// it, bit for bit, and both meet the same config checks (data.index_base,
// data.features). Without mpirun here ([cli]); under `mpirun -np 1` and with
// 2 ranks in the [mpi] tests at the end.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/json_reader.h"
#include "io/model_file.h"
#include "tests/cli/cli_test_util.h"
#include "tests/cli/mpi_test_util.h"

namespace fgm::test {
namespace {

// Labels 1, 2, 3: class k raises features 3k+1..3k+3; the rest is noise.
std::string three_classes(uint64_t rows, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0, 1);
  std::string text;
  for (uint64_t i = 0; i < rows; ++i) {
    const int k = static_cast<int>(i % 3);
    text += std::to_string(k + 1);
    for (int j = 1; j <= 15; ++j) {
      double v = std::round(normal(rng) * 100) / 100;
      if (j > 3 * k && j <= 3 * k + 3) v += 2;
      if (v != 0) text += " " + std::to_string(j) + ":" + std::to_string(v).substr(0, 5);
    }
    text += "\n";
  }
  return text;
}

// in.txt (binary) and three.txt (three classes), each as a single store and
// as a store of one partition.
void write_stores(const TempDir& dir) {
  dir.write("in.txt", random_libsvm(400, 30, 0.3, 7, {1, 4, 9, 16}));
  dir.write("three.txt", three_classes(240, 5));
  for (const std::string name : {"in", "three"}) {
    REQUIRE(run(dir, "ingest " + name + ".txt --out " + name + "-single --tile-rows 64").code == 0);
    REQUIRE(run(dir, "ingest " + name + ".txt --out " + name + "-one --partitions 1 --tile-rows 64").code == 0);
  }
}

struct SolverCase {
  std::string name, data, args;
};

// Every solver, fgm one-vs-rest included, on a config it supports on
// partitions. SIFS is not here: one store runs Prox-SDCA with screening, a
// partitioned store the accelerated proximal gradient (engine/distributed_sifs.h),
// so their models agree within the duality gap, not bit for bit (the SIFS
// test below).
const std::vector<SolverCase>& solver_cases() {
  static const std::vector<SolverCase> cases = {
      {"fgm", "in", "fgm.B=2 fgm.max_iterations=3"},
      {"fgm-bias", "in", "fgm.B=2 fgm.max_iterations=3 fgm.bias=true fgm.loss=logistic"},
      {"fgm-one-vs-rest", "three", "fgm.B=2 fgm.max_iterations=2"},
      {"mslr", "in", "solver=mslr mslr.r=2 mslr.max_iterations=3"},
      {"mslr-smoothing", "in", "solver=mslr mslr.r=2 mslr.max_iterations=3 mslr.subproblem=smoothing"},
      {"exclusive", "in", "solver=exclusive exclusive.lambda=0.5 exclusive.random_groups=6"},
      {"pnorm_kta", "in", "solver=pnorm_kta kta.p=1.5"},
  };
  return cases;
}

// `launch` "" (no mpirun) or an mpirun prefix: trains each case on the
// one-partition store and compares with the single store's model.
void require_one_partition_models(const TempDir& dir, const std::string& launch,
                                  const std::vector<SolverCase>& cases = solver_cases()) {
  for (const auto& c : cases) {
    INFO(c.name << (launch.empty() ? "" : " under " + launch));
    const std::string args = "train " + c.args + " output.dir=";
    RunResult single = run(dir, args + c.name + "-s data.train=" + c.data + "-single");
    INFO(single.err);
    REQUIRE(single.code == 0);
    RunResult one = run_launched(dir, launch, args + c.name + "-p" + (launch.empty() ? "" : "m") +
                                                  " data.train=" + c.data + "-one");
    INFO(one.err);
    REQUIRE(one.code == 0);
    require_same_model(dir.file(c.name + "-s/model.fgm"),
                       dir.file(c.name + "-p" + (launch.empty() ? "" : "m") + "/model.fgm"));
    const Model model = read_model(dir.file(c.name + "-s/model.fgm"));
    CHECK_FALSE((model.classes.empty() ? model.features : model.classes.back().features).empty());
  }
}

}  // namespace

TEST_CASE("a one-partition store trains the single store's model bit for bit, for every solver",
          "[cli][partitions]") {
  TempDir dir("fgm-one-partition");
  write_stores(dir);
  require_one_partition_models(dir, "");
}

// Each feature space is one class for both backends (features/feature_space.h):
// over a one-partition store it sums partials in the partition tree and
// scores by column ranges; over the single store it takes its fast paths (the
// pruned fused linear pass, poly2's dense GEMM — in.txt is 30% dense — and
// its pair tables, the block-local expansion pass). Both give the same model.
TEST_CASE("every feature space on a one-partition store gives the single store's model bit for bit",
          "[cli][partitions]") {
  TempDir dir("fgm-one-partition-spaces");
  write_stores(dir);
  dir.write("groups.txt", "1 2 3\n4 5 6\n10 11 12 13\n20 21\n");
  dir.write("tree.txt", "1 2 3 4 5 6\n1 2 3\n4 5\n10 11 12 13\n10 11\n");
  dir.write("three-groups.txt", "1 2 3\n4 5 6\n7 8 9 10\n");
  // 6% dense: poly2's sparse pair tables on the single store.
  dir.write("sparse.txt", random_libsvm(400, 40, 0.06, 11, {1, 4, 9, 16}));
  REQUIRE(run(dir, "ingest sparse.txt --out sparse-single --tile-rows 64").code == 0);
  REQUIRE(run(dir, "ingest sparse.txt --out sparse-one --partitions 1 --tile-rows 64").code == 0);
  const std::string loop = " fgm.B=3 fgm.max_iterations=3";
  require_one_partition_models(
      dir, "",
      {{"poly2", "in", "features.kind=poly2" + loop},
       {"poly2-sparse", "sparse", "features.kind=poly2 fgm.bias=true" + loop},
       {"hik-sparse", "sparse", "features.kind=hik features.levels=5" + loop},
       {"hik", "in", "features.kind=hik features.levels=7" + loop},
       {"additive", "in", "features.kind=additive features.order=2 features.kernel=intersection" + loop},
       {"groups", "in", "features.groups=groups.txt" + loop},
       {"tree", "in", "features.groups=tree.txt features.group_structure=tree" + loop},
       {"poly2-one-vs-rest", "three", "features.kind=poly2 fgm.B=2 fgm.max_iterations=2"},
       {"groups-one-vs-rest", "three", "features.groups=three-groups.txt fgm.B=2 fgm.max_iterations=2"}});
}

// By design (see solver_cases): the same support and the same optimum within
// the solvers' certified gaps (sifs.tol), one model per launch.
void require_one_partition_sifs_optimum(const TempDir& dir, const std::string& launch, const std::string& tag) {
  const std::string args = "train solver=sifs sifs.beta_ratio=0.2 sifs.alpha_ratio=0.1 sifs.alpha_points=5 ";
  REQUIRE(run(dir, args + "data.train=in-single output.dir=sifs-s" + tag).code == 0);
  REQUIRE(run_launched(dir, launch, args + "data.train=in-one output.dir=sifs-p" + tag).code == 0);
  const Model s = read_model(dir.file("sifs-s" + tag + "/model.fgm")), p = read_model(dir.file("sifs-p" + tag + "/model.fgm"));
  REQUIRE(!s.features.empty());
  REQUIRE(s.features.size() == p.features.size());
  for (size_t k = 0; k < s.features.size(); ++k) {
    CHECK(s.features[k].key == p.features[k].key);
    CHECK(std::abs(s.features[k].weight - p.features[k].weight) <= 1e-4 * (1 + std::abs(s.features[k].weight)));
  }
  CHECK(std::abs(s.objective - p.objective) <= 1e-8 * std::abs(s.objective));
}

TEST_CASE("SIFS on a one-partition store reaches the single store's optimum (another solver, by design)",
          "[cli][partitions][sifs]") {
  TempDir dir("fgm-one-partition-sifs");
  write_stores(dir);
  require_one_partition_sifs_optimum(dir, "", "");
}

// path.csv without its timings (the columns named *seconds) and the
// exclusive path's store_passes (one store's design may be held in memory
// after a pass, so it streams fewer passes).
std::vector<std::vector<std::string>> untimed_cells(const std::string& file) {
  std::vector<std::vector<std::string>> rows = csv_cells(slurp(file));
  REQUIRE(!rows.empty());
  const std::vector<std::string> header = rows.front();
  for (auto& row : rows) {
    std::vector<std::string> kept;
    for (size_t c = 0; c < row.size() && c < header.size(); ++c)
      if ((header[c].size() < 7 || header[c].substr(header[c].size() - 7) != "seconds") &&
          header[c] != "store_passes")
        kept.push_back(row[c]);
    row = kept;
  }
  return rows;
}

// MSLR, p-norm KTA and exclusive run one loop over either store
// (engine/mslr_trainer.cpp MslrRows, engine/pnorm_kta_path.h KtaData,
// engine/exclusive_trainer.h ExclusiveData): their paths, point models and
// the figures the loop computes (MSLR's objective with no feature) are the
// same from a one-partition store.
TEST_CASE("a one-partition store gives the single store's MSLR, p-norm KTA and exclusive paths bit for bit",
          "[cli][partitions][mslr][kta][exclusive]") {
  TempDir dir("fgm-one-partition-path");
  write_stores(dir);
  const std::vector<SolverCase> cases = {
      {"mslr", "in", "solver=mslr mslr.r=2 'mslr.features=[2,4]'"},
      {"pnorm_kta", "in", "solver=pnorm_kta kta.p_step=0.25"},
      {"exclusive", "in", "solver=exclusive 'exclusive.path_lambda=[1,0.5,0.2]' exclusive.random_groups=6"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    for (const std::string store : {"single", "one"}) {
      const RunResult r = run(dir, "path " + c.args + " data.train=" + c.data + "-" + store + " output.dir=" +
                                       c.name + "-" + store);
      INFO(r.err);
      REQUIRE(r.code == 0);
    }
    const std::vector<std::vector<std::string>> single = untimed_cells(dir.file(c.name + "-single/path.csv"));
    CHECK(single == untimed_cells(dir.file(c.name + "-one/path.csv")));
    REQUIRE(single.size() >= 3);
    for (size_t k = 1; k < single.size(); ++k)
      require_same_model(dir.file(c.name + "-single/point-" + single[k][0] + ".fgm"),
                         dir.file(c.name + "-one/point-" + single[k][0] + ".fgm"));
  }
  // MSLR's P at w = 0 (C ln 2 per row), and the first decrease relative to it.
  std::vector<JsonValue> runs;
  for (const std::string store : {"single", "one"}) {
    REQUIRE(run(dir, "train solver=mslr mslr.r=2 mslr.max_iterations=2 data.train=in-" + store +
                         " output.dir=mslr-train-" + store)
                .code == 0);
    runs.push_back(parse_json(slurp(dir.file("mslr-train-" + store + "/run.json")), "run.json"));
  }
  const double f0 = runs[0].find("objective_no_features")->number();
  CHECK(f0 == Approx(10 * std::log(2.0) * 400).epsilon(1e-12));  // mslr.C = 10 (default), 400 rows
  CHECK(same_bits(f0, runs[1].find("objective_no_features")->number()));
  CHECK(same_bits(runs[0].find("iterations")->items().at(0).find("rel_decrease")->number(),
                  runs[1].find("iterations")->items().at(0).find("rel_decrease")->number()));
}

// fgm path on a one-partition store (`launch`: "" or an mpirun prefix)
// against the single store's: path.csv apart from timings (test, validation
// and cross-validation figures included) and every point's model and
// de-biased refit, bit for bit; the folds of path.json too.
void require_one_partition_fgm_paths(const TempDir& dir, const std::string& launch) {
  dir.write("valid.txt", random_libsvm(120, 30, 0.3, 8, {1, 4, 9, 16}));
  const std::vector<std::string> cases = {
      "fgm.B=2 'path.features=[2,4,6]' path.folds=3 data.validation=valid.txt data.test=valid.txt",
      "fgm.B=2 fgm.max_iterations=2 fgm.bias=true fgm.loss=logistic 'path.C=[0.5,5]' path.folds=2 path.fold_seed=3",
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    INFO(cases[k] << (launch.empty() ? "" : " under " + launch));
    const std::string out = "fgm-path-" + std::to_string(k);
    RunResult single = run(dir, "path " + cases[k] + " data.train=in-single output.dir=" + out + "-single");
    INFO(single.err);
    REQUIRE(single.code == 0);
    RunResult one = run_launched(dir, launch, "path " + cases[k] + " data.train=in-one output.dir=" + out + "-one");
    INFO(one.err);
    REQUIRE(one.code == 0);
    const std::vector<std::vector<std::string>> cells = untimed_cells(dir.file(out + "-single/path.csv"));
    CHECK(cells == untimed_cells(dir.file(out + "-one/path.csv")));
    REQUIRE(cells.size() >= 3);
    for (size_t r = 1; r < cells.size(); ++r)
      for (const std::string suffix : {".fgm", "-debiased.fgm"})
        require_same_model(dir.file(out + "-single/point-" + cells[r][0] + suffix),
                           dir.file(out + "-one/point-" + cells[r][0] + suffix));
    const JsonValue s = parse_json(slurp(dir.file(out + "-single/path.json")), "path.json");
    const JsonValue o = parse_json(slurp(dir.file(out + "-one/path.json")), "path.json");
    const auto &s_folds = s.find("cv_folds")->items(), &o_folds = o.find("cv_folds")->items();
    REQUIRE(s_folds.size() == o_folds.size());
    REQUIRE(!s_folds.empty());
    for (size_t f = 0; f < s_folds.size(); ++f)
      for (const char* column : {"held_out_accuracy", "held_out_auc"}) {
        const auto &a = s_folds[f].find("points")->find(column)->items(),
                   &b = o_folds[f].find("points")->find(column)->items();
        REQUIRE(a.size() == b.size());
        for (size_t i = 0; i < a.size(); ++i) CHECK(same_bits(a[i].number(), b[i].number()));
      }
    CHECK(s.find("selection")->find("chosen_point")->number() == o.find("selection")->find("chosen_point")->number());
  }
}

TEST_CASE("a one-partition store gives the single store's fgm path bit for bit, folds and refits included",
          "[cli][partitions][path]") {
  TempDir dir("fgm-one-partition-fgm-path");
  write_stores(dir);
  require_one_partition_fgm_paths(dir, "");
}

TEST_CASE("a partitioned store meets the single store's data.index_base and data.features checks",
          "[cli][errors][config][partitions]") {
  TempDir dir("fgm-partition-keys");
  dir.write("t.svm", "+1 1:1 2:1\n-1 2:1 3:1\n+1 1:1 3:0.5\n-1 3:1\n+1 1:2 2:0.5\n-1 3:2\n");
  REQUIRE(run(dir, "ingest t.svm --out single").code == 0);
  REQUIRE(run(dir, "ingest t.svm --out parts --partitions 2").code == 0);
  for (const std::string store : {"single", "parts"}) {
    for (const std::string command : {"train fgm.B=1", "path fgm.B=1 'path.features=[1]'",
                                      "train solver=mslr mslr.r=1", "train solver=exclusive exclusive.random_groups=2"}) {
      INFO(store << ": " << command);
      const std::string base = command + " data.train=" + store + " output.dir=run ";
      RunResult r = run(dir, base + "data.index_base=0");
      CHECK(r.code == 2);
      CHECK(contains(r.err, "key 'data.index_base' = 0 would be ignored: data.train is the store " + store));
      CHECK(contains(r.err, "built with --index-base 1"));
      r = run(dir, base + "data.features=10");
      CHECK(r.code == 2);
      CHECK(contains(r.err, "key 'data.features' = 10 would be ignored"));
      CHECK(contains(r.err, "built with --features 3"));
      CHECK_FALSE(std::filesystem::exists(dir.file("run")));
      // Values that agree with the store are accepted: one config serves both.
      CHECK(run(dir, base + "data.index_base=1 data.features=3").code == 0);
      std::filesystem::remove_all(dir.file("run"));
    }
  }
}

TEST_CASE("under mpirun -np 1 a one-partition store trains the single store's model bit for bit, for every solver",
          "[.mpi][mpi][partitions]") {
  TempDir dir("fgm-one-partition-mpi");
  write_stores(dir);
  require_one_partition_models(dir, kMpirun + "-np 1 ");
  require_one_partition_sifs_optimum(dir, kMpirun + "-np 1 ", "m");
  require_one_partition_fgm_paths(dir, kMpirun + "-np 1 ");
}

TEST_CASE("under mpirun a partitioned store meets the data.index_base and data.features checks",
          "[.mpi][mpi][partitions]") {
  TempDir dir("fgm-partition-keys-mpi");
  dir.write("t.svm", "+1 1:1 2:1\n-1 2:1 3:1\n+1 1:1 3:0.5\n-1 3:1\n+1 1:2 2:0.5\n-1 3:2\n");
  REQUIRE(run(dir, "ingest t.svm --out parts --partitions 2").code == 0);
  for (const std::string command : {"train fgm.B=1", "path fgm.B=1 'path.features=[1]'"}) {
    for (int np : {1, 2}) {
      INFO(command << " on " << np << " rank(s)");
      const std::string base = command + " data.train=parts output.dir=run ";
      RunResult r = run_mpi(dir, np, base + "data.index_base=0");
      CHECK(r.code == 2);
      CHECK(contains(r.err, "key 'data.index_base' = 0 would be ignored"));
      r = run_mpi(dir, np, base + "data.features=10");
      CHECK(r.code == 2);
      CHECK(contains(r.err, "key 'data.features' = 10 would be ignored"));
      CHECK_FALSE(std::filesystem::exists(dir.file("run")));
    }
  }
}

}  // namespace fgm::test
