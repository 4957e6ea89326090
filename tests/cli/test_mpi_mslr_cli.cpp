// solver = "mslr" on a partitioned store (engine/distributed_mslr.h,
// docs/distributed.md "MSLR"): the same model byte for byte on 1, 2 and 4
// ranks and 1 or 2 threads; a one-partition store gives the single-store
// model bit for bit; the data-parallel subproblem reaches the single-store
// solver's certified optimum on the unpartitioned data; refused settings.
// Tagged [.mpi] like tests/cli/test_mpi_cli.cpp (ctest entry `mpi`).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include "core/json_reader.h"
#include "io/model_file.h"
#include "tests/cli/cli_test_util.h"

namespace fgm::test {
namespace {

// Binary (feature id ≡ 1 mod 3), small-integer (≡ 2) and tied columns (three
// values, ≡ 0), every fifth row a copy of the one before; labels from a
// planted sign with label noise. Values are integers or halves, so the
// scores c_j = Σ_i α_i y_i x_ij at α⁰ = 1 are exact in any summation order.
std::string mixed_libsvm(uint64_t rows, uint32_t features, uint32_t per_row, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> feature(1, features);
  std::uniform_int_distribution<int> small(-3, 3), tied(0, 2), coin(0, 9);
  std::string text, previous;
  for (uint64_t i = 0; i < rows; ++i) {
    if (i % 5 == 4) {
      text += previous;
      continue;
    }
    std::map<uint32_t, double> row;
    for (uint32_t k = 0; k < per_row; ++k) {
      const uint32_t f = feature(rng);
      row[f] = f % 3 == 1 ? 1.0 : f % 3 == 2 ? double(small(rng)) : 0.5 * (1 + tied(rng));
    }
    double score = 0;
    for (const auto& [f, v] : row)
      if (f <= 5) score += (f % 2 ? 1.0 : -1.0) * v;
    const bool positive = (score > 0) != (coin(rng) == 0);
    std::string line = positive ? "+1" : "-1";
    for (const auto& [f, v] : row) {
      char value[32];
      std::snprintf(value, sizeof value, "%g", v);
      line += " " + std::to_string(f) + ":" + value;
    }
    previous = line + "\n";
    text += previous;
  }
  return text;
}

// The model file's bytes apart from the recorded configuration (output.dir
// and engine.threads differ between the runs compared).
std::string model_bytes(const std::string& path) {
  Model m = read_model(path);
  m.config.clear();
  return encode_model(m);
}

const JsonValue* run_json_key(const JsonValue& run, const char* key) {
  const JsonValue* v = run.find(key);
  REQUIRE(v != nullptr);
  return v;
}

}  // namespace

TEST_CASE("MSLR on a partitioned store: the same model byte for byte on 1, 2 and 4 ranks and 1 or 2 threads",
          "[.mpi][mpi][mslr]") {
  TempDir dir("fgm-mpi-mslr");
  dir.write("in.txt", mixed_libsvm(400, 30, 5, 11));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4 --tile-rows 32").code == 0);
  const std::string args = "train solver=mslr data.train=store mslr.r=3 mslr.max_iterations=4 ";
  RunResult one = run(dir, args + "engine.threads=1 output.dir=o1");
  REQUIRE(one.code == 0);
  const std::string reference = model_bytes(dir.file("o1/model.fgm"));
  CHECK(read_model(dir.file("o1/model.fgm")).features.size() >= 6);
  {
    const JsonValue run_json = parse_json(slurp(dir.file("o1/run.json")), "run.json");
    const JsonValue* distributed = run_json_key(run_json, "distributed");
    CHECK(distributed->find("partitions")->number() == 4);
    for (const auto& pass : distributed->find("passes")->items()) CHECK(pass.find("bytes")->number() == 0);
    for (const auto& it : run_json_key(run_json, "iterations")->items()) CHECK(it.find("converged")->boolean());
  }
  for (auto [np, threads] : {std::pair{1, 2}, std::pair{2, 2}, std::pair{4, 1}}) {
    INFO("np " << np << " threads " << threads);
    const std::string out = "o" + std::to_string(np) + "t" + std::to_string(threads);
    RunResult r = run_mpi(dir, np, args + "engine.threads=" + std::to_string(threads) + " output.dir=" + out);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(contains(r.out, "ranks=" + std::to_string(np)));
    CHECK(model_bytes(dir.file(out + "/model.fgm")) == reference);
    const JsonValue run_json = parse_json(slurp(dir.file(out + "/run.json")), "run.json");
    const JsonValue* distributed = run_json_key(run_json, "distributed");
    CHECK(distributed->find("ranks")->number() == np);
    CHECK(distributed->find("rank_resources")->items().size() == size_t(np));
    double scoring_bytes = 0, solve_bytes = 0;
    for (const auto& pass : distributed->find("passes")->items()) {
      if (pass.find("phase")->string() == "scoring") scoring_bytes += pass.find("bytes")->number();
      if (pass.find("phase")->string() == "solve") solve_bytes += pass.find("bytes")->number();
    }
    CHECK((scoring_bytes > 0) == (np > 1));
    CHECK((solve_bytes > 0) == (np > 1));
  }
}

TEST_CASE("MSLR on a one-partition store is the single-store model bit for bit", "[.mpi][mpi][mslr]") {
  TempDir dir("fgm-mpi-mslr");
  dir.write("in.txt", mixed_libsvm(300, 24, 4, 12));
  REQUIRE(run(dir, "ingest in.txt --out store1 --partitions 1").code == 0);
  const std::string args = "train solver=mslr mslr.r=3 mslr.max_iterations=3 ";
  REQUIRE(run(dir, args + "data.train=in.txt output.dir=single").code == 0);
  REQUIRE(run(dir, args + "data.train=store1 output.dir=parted").code == 0);
  const Model single = read_model(dir.file("single/model.fgm")), parted = read_model(dir.file("parted/model.fgm"));
  REQUIRE(single.features.size() == parted.features.size());
  REQUIRE(!single.features.empty());
  for (size_t k = 0; k < single.features.size(); ++k) {
    CHECK(single.features[k].key.ids[0] == parted.features[k].key.ids[0]);
    CHECK(single.features[k].batch == parted.features[k].batch);
    CHECK(std::memcmp(&single.features[k].weight, &parted.features[k].weight, sizeof(double)) == 0);
  }
  CHECK(std::memcmp(&single.objective, &parted.objective, sizeof(double)) == 0);
  CHECK(single.positive_label == parted.positive_label);
}

// An independent check of the data-parallel subproblem (CoCoA+ rounds over 4
// partitions) against the sequential single-store solver on the same rows,
// unpartitioned: both certify their duality gap to mslr.tolerance, so their
// objectives agree to twice that. At α⁰ the scores are exact (integer and
// half values), so both select the same first constraint.
TEST_CASE("MSLR over 4 partitions reaches the single-store solver's certified optimum", "[.mpi][mpi][mslr]") {
  TempDir dir("fgm-mpi-mslr");
  dir.write("in.txt", mixed_libsvm(400, 30, 5, 13));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4").code == 0);
  const double tolerance = 1e-6;
  const std::string args = "train solver=mslr mslr.r=4 mslr.max_iterations=1 mslr.tolerance=1e-6 mslr.q_max=1e6 ";
  REQUIRE(run(dir, args + "data.train=in.txt output.dir=single").code == 0);
  RunResult r = run_mpi(dir, 2, args + "data.train=store output.dir=parted");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const JsonValue single = parse_json(slurp(dir.file("single/run.json")), "run.json");
  const JsonValue parted = parse_json(slurp(dir.file("parted/run.json")), "run.json");
  const JsonValue& s = run_json_key(single, "iterations")->items().at(0);
  const JsonValue& p = run_json_key(parted, "iterations")->items().at(0);
  CHECK(s.find("converged")->boolean());
  CHECK(p.find("converged")->boolean());
  CHECK(p.find("relative_gap")->number() <= tolerance);
  // Each run's bounds bracket the common optimum: D ≤ min max ≤ P on both sides.
  const double ps = s.find("objective")->number(), pp = p.find("objective")->number();
  CHECK(p.find("dual")->number() <= ps * (1 + 1e-12));
  CHECK(s.find("dual")->number() <= pp * (1 + 1e-12));
  CHECK(pp == Approx(ps).epsilon(2 * tolerance));
  const Model ms = read_model(dir.file("single/model.fgm")), mp = read_model(dir.file("parted/model.fgm"));
  REQUIRE(ms.features.size() == mp.features.size());
  for (size_t k = 0; k < ms.features.size(); ++k) {
    CHECK(ms.features[k].key.ids[0] == mp.features[k].key.ids[0]);
    CHECK(mp.features[k].weight == Approx(ms.features[k].weight).epsilon(1e-2).margin(1e-3));
  }
}

TEST_CASE("MSLR on a partitioned store refuses what it does not support, naming the key", "[.mpi][mpi][mslr]") {
  TempDir dir("fgm-mpi-mslr");
  dir.write("in.txt", mixed_libsvm(200, 20, 4, 14));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 2").code == 0);
  for (auto [setting, key] : {std::pair{"features.transform=[\"maxabs\"]", "features.transform"},
                              std::pair{"data.truth=in.txt", "data.truth"}}) {
    INFO(setting);
    RunResult r = run_mpi(dir, 2, std::string("train solver=mslr data.train=store output.dir=out '") + setting + "'");
    CHECK(r.code == 2);
    CHECK(contains(r.err, key));
    CHECK_FALSE(std::filesystem::exists(dir.file("out/model.fgm")));
  }
  // Three labels: MSLR is binary.
  dir.write("three.txt", "1 1:1 2:1\n2 1:2 3:1\n3 2:1 3:2\n1 1:1\n2 2:2\n3 3:3\n");
  REQUIRE(run(dir, "ingest three.txt --out three --partitions 2").code == 0);
  RunResult r = run(dir, "train solver=mslr data.train=three output.dir=out3");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "binary models only"));
  CHECK_FALSE(std::filesystem::exists(dir.file("out3/model.fgm")));
}

}  // namespace fgm::test
