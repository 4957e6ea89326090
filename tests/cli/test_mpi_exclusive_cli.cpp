// solver = "exclusive" on a partitioned store (docs/distributed.md,
// "Exclusive sparsity"): the same model bit for bit on 1, 2 and 4 ranks and
// 1 or 2 threads, and the same optimum as the single-store solver on the
// unpartitioned data (an independent run: one store, one row range, no
// partition tree). Tagged [.mpi] like tests/cli/test_mpi_cli.cpp.
#include <catch2/catch.hpp>

#include <cstring>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>

#include "core/json_reader.h"
#include "io/model_file.h"
#include "tests/cli/cli_test_util.h"
#include "tests/cli/mpi_test_util.h"

namespace fgm::test {
namespace {

enum class Values { kBinary, kIntegerTied };

// `rows` rows over `features` features, labels from the first six features
// (classes > 2: the class whose features sum highest). Binary values are all
// 1; integer values are 1..3, so many rows tie.
std::string exclusive_libsvm(uint64_t rows, uint32_t features, uint32_t per_row, Values values, int classes,
                             uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> feature(1, features);
  std::uniform_int_distribution<int> small(1, 3);
  std::normal_distribution<double> noise(0, 0.5);
  std::string text;
  for (uint64_t i = 0; i < rows; ++i) {
    std::map<uint32_t, int> row;
    for (uint32_t k = 0; k < per_row; ++k) row[feature(rng)] = values == Values::kBinary ? 1 : small(rng);
    std::vector<double> score(static_cast<size_t>(std::max(classes, 2)), 0.0);
    score[0] = noise(rng);
    for (const auto& [f, v] : row)
      if (f <= 6) score[classes > 2 ? f % classes : 0] += (classes > 2 || f % 2 ? 1.0 : -1.0) * v;
    if (classes > 2) {
      text += std::to_string(1 + (std::max_element(score.begin(), score.end()) - score.begin()) * 3);
    } else {
      text += score[0] > 0 ? "+1" : "-1";
    }
    for (const auto& [f, v] : row) text += " " + std::to_string(f) + ":" + std::to_string(v);
    text += "\n";
  }
  return text;
}

std::string np_dir(const std::string& tag, int np, int threads) {
  return tag + "-np" + std::to_string(np) + "-t" + std::to_string(threads);
}

// Trains on 1 rank (without mpirun) with 1 and 2 threads and on 2 and 4
// ranks under mpirun; every model is the first one bit for bit.
void require_rank_invariant(const TempDir& dir, const std::string& tag, const std::string& args) {
  const std::string first = np_dir(tag, 1, 1);
  RunResult r = run(dir, "train " + args + " output.dir=" + first + " engine.threads=1");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "ranks=1"));
  REQUIRE(run(dir, "train " + args + " output.dir=" + np_dir(tag, 1, 2) + " engine.threads=2").code == 0);
  require_same_model(dir.file(first + "/model.fgm"), dir.file(np_dir(tag, 1, 2) + "/model.fgm"));
  for (const auto& [np, threads] : std::vector<std::pair<int, int>>{{2, 2}, {4, 1}}) {
    INFO("np = " << np << ", threads = " << threads);
    const std::string out = np_dir(tag, np, threads);
    r = run_mpi(dir, np, "train " + args + " output.dir=" + out + " engine.threads=" + std::to_string(threads));
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(contains(r.out, "ranks=" + std::to_string(np)));
    require_same_model(dir.file(first + "/model.fgm"), dir.file(out + "/model.fgm"));
  }
}

// The objective and support of a single-store run and a partitioned one.
// licp differs in algorithm (single store: coordinate ascent with an exact
// prox, so exact zeros; partitions: FISTA, whose answer may keep weights of
// order 1e-7), so supports are compared above 1e-6 and weights with a margin,
// `weight_margin`.
void require_same_optimum(const std::string& single, const std::string& distributed, double tolerance,
                          double weight_margin = 1e-6) {
  const Model s = read_model(single), d = read_model(distributed);
  CHECK(s.solver == "exclusive");
  CHECK(d.solver == "exclusive");
  auto by_key = [](const Model& m) {
    std::map<std::pair<size_t, uint64_t>, double> out;
    if (m.classes.empty())
      for (const auto& f : m.features) out[{0, f.key.ids[0]}] = f.weight;
    for (size_t c = 0; c < m.classes.size(); ++c)
      for (const auto& f : m.classes[c].features) out[{c, f.key.ids[0]}] = f.weight;
    return out;
  };
  const auto ws = by_key(s), wd = by_key(d);
  std::set<std::pair<size_t, uint64_t>> support_s, support_d;
  for (const auto& [key, w] : ws)
    if (std::fabs(w) > 1e-6) support_s.insert(key);
  for (const auto& [key, w] : wd)
    if (std::fabs(w) > 1e-6) support_d.insert(key);
  CHECK(support_s == support_d);
  CHECK(d.objective == Approx(s.objective).epsilon(tolerance));
  auto at = [](const std::map<std::pair<size_t, uint64_t>, double>& m, const std::pair<size_t, uint64_t>& key) {
    const auto it = m.find(key);
    return it == m.end() ? 0.0 : it->second;
  };
  for (const auto& [key, w] : ws) CHECK(at(wd, key) == Approx(w).epsilon(1e-4).margin(weight_margin));
  for (const auto& [key, w] : wd) CHECK(at(ws, key) == Approx(w).epsilon(1e-4).margin(weight_margin));
}

const std::string kConfig =
    "solver = \"exclusive\"\n[data]\ntrain = \"store\"\n[exclusive]\nlambda = 0.5\nrandom_groups = 6\n"
    "tolerance = 1e-9\nmax_iterations = 20000\n";

}  // namespace

TEST_CASE("exclusive models on 2 and 4 ranks are the 1-process model bit for bit, and the single-store optimum",
          "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-exclusive");
  for (const Values values : {Values::kIntegerTied, Values::kBinary}) {
    const std::string kind = values == Values::kBinary ? "binary" : "integer";
    INFO(kind << " values");
    dir.write("in-" + kind + ".txt", exclusive_libsvm(500, 40, 6, values, 2, values == Values::kBinary ? 11 : 12));
    REQUIRE(run(dir, "ingest in-" + kind + ".txt --out store-" + kind + " --partitions 4 --tile-rows 64").code == 0);
    REQUIRE(run(dir, "ingest in-" + kind + ".txt --out plain-" + kind).code == 0);
    dir.write("c.toml", kConfig);
    // licp: the hinge; the squared hinge with the bias; the hinge with the bias
    // (the FISTA licp on partitions, the coordinate solver on the single store).
    for (const std::string variant : {"pcp", "locp", "licp", "licp-sqh-bias", "licp-bias"}) {
      INFO("variant " << variant);
      const std::string algorithm = variant.substr(0, 4);
      std::string extra = algorithm == "licp" ? " exclusive.ridge=0.5" : algorithm == "locp" ? " exclusive.loss=squared" : "";
      if (variant == "licp") extra += " exclusive.loss=hinge";
      if (variant == "licp-sqh-bias") extra += " exclusive.loss=squared_hinge exclusive.bias=true";
      if (variant == "licp-bias") extra += " exclusive.loss=hinge exclusive.bias=true";
      const std::string args = "--config c.toml data.train=store-" + kind + " exclusive.algorithm=" + algorithm + extra;
      const std::string tag = kind + "-" + variant;
      require_rank_invariant(dir, tag, args);
      REQUIRE(run(dir, "train " + args + " data.train=plain-" + kind + " output.dir=" + tag + "-single").code == 0);
      // The squared hinge's optimum is smooth, not at a kink: two points
      // certified to 1e-9·P lie within √(2(gap₁ + gap₂)/α) ≈ 1e-3 of each
      // other (α-strong convexity), and its weights differ by up to 3e-5.
      require_same_optimum(dir.file(tag + "-single/model.fgm"), dir.file(np_dir(tag, 1, 1) + "/model.fgm"), 1e-7,
                           variant == "licp-sqh-bias" ? 1e-4 : 1e-6);
    }
  }
  // Rank 0 wrote run.json with the communication of each phase, and the report.
  const std::string out = np_dir("binary-pcp", 4, 1);
  const JsonValue run_json = parse_json(slurp(dir.file(out + "/run.json")), "run.json");
  const JsonValue* distributed = run_json.find("distributed");
  REQUIRE(distributed);
  CHECK(distributed->find("ranks")->number() == 4);
  CHECK(distributed->find("partitions_per_rank")->number() == 1);
  std::set<std::string> phases;
  for (const auto& pass : distributed->find("passes")->items()) {
    phases.insert(pass.find("phase")->string());
    CHECK(pass.find("bytes")->number() > 0);
  }
  CHECK(phases == std::set<std::string>{"setup", "fit"});
  CHECK(run_json.find("exclusive")->find("converged")->boolean());
  CHECK(std::filesystem::exists(dir.file(out + "/report.html")));
  CHECK(run(dir, "report " + out).code == 0);
  // Without mpirun nothing is communicated.
  for (const auto& pass :
       parse_json(slurp(dir.file(np_dir("binary-pcp", 1, 1) + "/run.json")), "run.json").find("distributed")->find("passes")->items())
    CHECK(pass.find("bytes")->number() == 0);
}

TEST_CASE("a multi-class exclusive model on 4 ranks is the 1-process model, and the single-store one-vs-rest optimum",
          "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-exclusive");
  dir.write("in.txt", exclusive_libsvm(600, 30, 5, Values::kIntegerTied, 3, 21));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4").code == 0);
  REQUIRE(run(dir, "ingest in.txt --out plain").code == 0);
  dir.write("c.toml", kConfig + "loss = \"logistic\"\n");
  require_rank_invariant(dir, "ovr", "--config c.toml");
  REQUIRE(run(dir, "train --config c.toml data.train=plain output.dir=single").code == 0);
  const Model d = read_model(dir.file(np_dir("ovr", 1, 1) + "/model.fgm"));
  const Model s = read_model(dir.file("single/model.fgm"));
  REQUIRE(d.classes.size() == 3);
  REQUIRE(s.classes.size() == 3);
  for (size_t c = 0; c < 3; ++c) {
    CHECK(d.classes[c].label == s.classes[c].label);
    CHECK(d.classes[c].features.size() == s.classes[c].features.size());
  }
  require_same_optimum(dir.file("single/model.fgm"), dir.file(np_dir("ovr", 1, 1) + "/model.fgm"), 1e-7);
}

TEST_CASE("an exclusive run streams a store several times its per-rank memory budget", "[.mpi][mpi]") {
  // Without the working set every FISTA iteration streams the store (two
  // passes); 300 iterations, not to convergence: the bits must still agree.
  TempDir dir("fgm-mpi-exclusive");
  dir.write("in.txt", exclusive_libsvm(6000, 400, 60, Values::kIntegerTied, 2, 31));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4 --block-bytes 64KB").code == 0);
  REQUIRE(run(dir, "ingest in.txt --out plain --block-bytes 64KB").code == 0);
  uint64_t store_bytes = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.file("store")))
    if (e.is_regular_file()) store_bytes += e.file_size();
  const uint64_t budget = 768 << 10;
  REQUIRE(store_bytes > 3 * budget);
  dir.write("c.toml", kConfig + "working_set = false\n[engine]\nmemory_budget = \"768KB\"\n"
                                "block_bytes = \"64KB\"\n");
  const std::string args = "train --config c.toml exclusive.max_iterations=300 ";
  REQUIRE(run(dir, args + "output.dir=o1").code == 0);
  RunResult r = run_mpi(dir, 4, args + "output.dir=o4 engine.threads=2");
  INFO(r.err);
  REQUIRE(r.code == 0);
  require_same_model(dir.file("o1/model.fgm"), dir.file("o4/model.fgm"));
  // The FISTA licp streamed the same way, with the squared hinge and the bias
  // (every projection and every best b a collective): the same bits.
  const std::string licp = args + "exclusive.algorithm=licp exclusive.loss=squared_hinge exclusive.bias=true "
                                  "exclusive.max_iterations=60 engine.memory_budget=4MB ";
  REQUIRE(run(dir, licp + "output.dir=l1").code == 0);
  r = run_mpi(dir, 4, licp + "output.dir=l4 engine.threads=2");
  INFO(r.err);
  REQUIRE(r.code == 0);
  require_same_model(dir.file("l1/model.fgm"), dir.file("l4/model.fgm"));
  CHECK(read_model(dir.file("l4/model.fgm")).has_bias);
  const JsonValue run_json = parse_json(slurp(dir.file("o4/run.json")), "run.json");
  CHECK(run_json.find("exclusive")->find("store_passes")->number() > 600);
  for (const auto& rank : run_json.find("distributed")->find("rank_resources")->items())
    CHECK(rank.find("memory_budget_peak_bytes")->number() <= budget);
  // The single store on the same iterations: the same objective up to the
  // rounding of a different summation order.
  REQUIRE(run(dir, args + "data.train=plain output.dir=single").code == 0);
  CHECK(read_model(dir.file("o1/model.fgm")).objective ==
        Approx(read_model(dir.file("single/model.fgm")).objective).epsilon(1e-9));
}

TEST_CASE("an exclusive lambda path on 4 ranks is the 1-process path, and the single-store path", "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-exclusive");
  dir.write("in.txt", exclusive_libsvm(500, 40, 6, Values::kIntegerTied, 2, 41));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4").code == 0);
  REQUIRE(run(dir, "ingest in.txt --out plain").code == 0);
  dir.write("p.toml",
            "solver = \"exclusive\"\n[data]\ntrain = \"store\"\n[exclusive]\npath_lambda = [4.0, 1.0, 0.25]\n"
            "random_groups = 6\ntolerance = 1e-9\nmax_iterations = 20000\n");
  REQUIRE(run(dir, "path --config p.toml output.dir=p1").code == 0);
  RunResult r = run_mpi(dir, 4, "path --config p.toml output.dir=p4 engine.threads=2");
  INFO(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(run(dir, "path --config p.toml data.train=plain output.dir=single").code == 0);
  for (int k = 0; k < 3; ++k) {
    INFO("point " << k);
    const std::string point = "/point-" + std::to_string(k) + ".fgm";
    require_same_model(dir.file("p1" + point), dir.file("p4" + point));
    require_same_optimum(dir.file("single" + point), dir.file("p1" + point), 1e-7);
  }
  CHECK(parse_json(slurp(dir.file("p4/path.json")), "path.json").find("distributed")->find("ranks")->number() == 4);
  // A feature transform is refused on a partitioned store, naming the key, and nothing is written.
  dir.write("c.toml", kConfig);
  r = run(dir, "train --config c.toml \"features.transform=['maxabs']\" output.dir=transformed");
  CHECK(r.code != 0);
  CHECK(contains(r.err, "features.transform"));
  CHECK_FALSE(std::filesystem::exists(dir.file("transformed")));
  r = run(dir, "train --config c.toml data.truth=c.toml output.dir=truth");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "data.truth: truth recovery is not supported with solver = exclusive"));
  CHECK_FALSE(std::filesystem::exists(dir.file("truth")));
  // Under mpirun a path needs a partitioned store.
  r = run_mpi(dir, 2, "path --config p.toml data.train=plain output.dir=refused");
  CHECK(r.code != 0);
  CHECK(contains(r.err, "is not a partitioned store"));
  CHECK_FALSE(std::filesystem::exists(dir.file("refused")));
}

// exclusive.path_random_groups on a partitioned store: each rank redraws the
// groups over the same columns for every m, so the points are the 1-process
// points bit for bit, and the single store's optimum.
TEST_CASE("an exclusive path over group counts on 2 ranks is the 1-process path, and the single-store path",
          "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-exclusive-groups");
  dir.write("in.txt", exclusive_libsvm(400, 36, 6, Values::kIntegerTied, 2, 43));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4").code == 0);
  REQUIRE(run(dir, "ingest in.txt --out plain").code == 0);
  dir.write("p.toml",
            "solver = \"exclusive\"\n[data]\ntrain = \"store\"\n[exclusive]\npath_lambda = [4.0, 0.5]\n"
            "path_random_groups = [3, 9]\ntolerance = 1e-9\nmax_iterations = 20000\n");
  REQUIRE(run(dir, "path --config p.toml output.dir=p1").code == 0);
  RunResult r = run_mpi(dir, 2, "path --config p.toml output.dir=p2");
  INFO(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(run(dir, "path --config p.toml data.train=plain output.dir=single").code == 0);
  for (int k = 0; k < 4; ++k) {
    INFO("point " << k);
    const std::string point = "/point-" + std::to_string(k) + ".fgm";
    require_same_model(dir.file("p1" + point), dir.file("p2" + point));
    require_same_optimum(dir.file("single" + point), dir.file("p1" + point), 1e-7);
  }
  const auto cells = csv_cells(slurp(dir.file("p2/path.csv")));
  const size_t groups = csv_column(cells[0], "groups");
  REQUIRE(groups < cells[0].size());
  CHECK(cells[1][groups] == "3");
  CHECK(cells[3][groups] == "9");
}

}  // namespace fgm::test
