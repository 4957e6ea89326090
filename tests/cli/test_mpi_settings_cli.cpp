// fgm.max_features, data.truth, the final certificate pass and the
// single-store trainer's warnings on a partitioned store
// (docs/distributed.md): the same model bit for bit on 1, 2 and 4 ranks, and
// each checked against the single-store trainer on the same rows. Tagged
// [.mpi] (ctest runs them in the `mpi` entry).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "core/json_reader.h"
#include "io/model_file.h"
#include "tests/cli/cli_test_util.h"
#include "tests/cli/mpi_test_util.h"

namespace fgm::test {
namespace {

// A planted problem over `features` features: the label is the sign of a
// weighted sum of features 1..6 (weights 3, −2.5, 2, −1.5, 1, −0.8) plus
// noise; values are small integers or two-decimal reals. `huge` (1-based, 0:
// none) takes values around 10^6, for the value-span warning.
std::string planted(uint64_t rows, uint32_t features, uint32_t seed, uint32_t huge = 0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> unif(0, 1);
  const double weight[6] = {3, -2.5, 2, -1.5, 1, -0.8};
  std::ostringstream out;
  for (uint64_t i = 0; i < rows; ++i) {
    std::map<uint32_t, double> row;
    for (uint32_t j = 1; j <= features; ++j)
      if (unif(rng) < (j <= 6 ? 0.5 : 0.2))
        row[j] = j % 2 ? std::floor(1 + 3 * unif(rng)) : std::round(200 * unif(rng) - 100) / 100;
    if (huge) row[huge] = std::round(1e6 * (1 + unif(rng)));
    double score = 0.3 * (unif(rng) - 0.5);
    for (const auto& [j, v] : row)
      if (j <= 6) score += weight[j - 1] * v;
    out << (score > 0 ? "+1" : "-1");
    for (const auto& [j, v] : row) out << ' ' << j << ':' << v;
    out << '\n';
  }
  return out.str();
}

void ingest_both(const TempDir& dir, const std::string& text) {
  dir.write("in.txt", text);
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4 --tile-rows 32").code == 0);
  REQUIRE(run(dir, "ingest in.txt --out plain --tile-rows 32").code == 0);
}

JsonValue run_log(const TempDir& dir, const std::string& out) {
  return parse_json(slurp(dir.file(out + "/run.json")), "run.json");
}

std::map<std::string, std::string> warnings_of(const JsonValue& log) {
  std::map<std::string, std::string> out;
  for (const auto& w : log.find("warnings")->items()) out[w.find("code")->string()] = w.find("message")->string();
  return out;
}

size_t scoring_passes(const JsonValue& log) {
  size_t passes = 0;
  for (const auto& p : log.find("distributed")->find("passes")->items()) passes += p.find("phase")->string() == "scoring";
  return passes;
}

}  // namespace

TEST_CASE("fgm.max_features on a partitioned store: the single-store cap, the same model on 1, 2 and 4 ranks",
          "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-set");
  ingest_both(dir, planted(400, 30, 5));
  dir.write("c.toml", "[data]\ntrain = \"store\"\n[fgm]\nB = 3\nmax_iterations = 5\nmax_features = 7\n"
                      "eps_outer = 0\nbias = true\n[apg]\neps_inner = 1e-8\n");
  REQUIRE(run(dir, "train --config c.toml output.dir=d1").code == 0);
  for (int np : {2, 4}) {
    const RunResult r = run_mpi(dir, np, "train --config c.toml output.dir=d" + std::to_string(np) +
                                             " engine.threads=" + std::to_string(np == 2 ? 2 : 1));
    INFO(r.err);
    REQUIRE(r.code == 0);
    require_same_model(dir.file("d1/model.fgm"), dir.file("d" + std::to_string(np) + "/model.fgm"));
  }
  REQUIRE(run(dir, "train --config c.toml data.train=plain output.dir=s").code == 0);
  const Model d = read_model(dir.file("d1/model.fgm")), s = read_model(dir.file("s/model.fgm"));
  // Batches of 3, 3 and 1: the last one shortened to land on the cap.
  REQUIRE(d.features.size() == 7);
  CHECK(d.features.back().batch == 3);
  CHECK(d.features[5].batch == 2);
  REQUIRE(s.features.size() == 7);
  for (size_t k = 0; k < 7; ++k) {
    CHECK(d.features[k].key.ids[0] == s.features[k].key.ids[0]);
    CHECK(d.features[k].batch == s.features[k].batch);
    CHECK(d.features[k].weight == Approx(s.features[k].weight).epsilon(1e-3).margin(1e-6));
  }
  CHECK(d.objective == Approx(s.objective).epsilon(1e-4));
  const JsonValue dl = run_log(dir, "d1"), sl = run_log(dir, "s");
  CHECK(dl.find("stop_reason")->string() == "max_features");
  CHECK(sl.find("stop_reason")->string() == "max_features");
  // The final certificate: one more pass after the last solve, the final α's
  // violation (37) as the single-store trainer measures it.
  CHECK(scoring_passes(dl) == 4);
  CHECK(dl.find("final_sip_violation")->number() ==
        Approx(sl.find("final_sip_violation")->number()).epsilon(1e-3).margin(1e-6));
  // Without the certificate: no extra pass, and no violation to report.
  REQUIRE(run_mpi(dir, 2, "train --config c.toml output.dir=nc fgm.final_certificate=false").code == 0);
  REQUIRE(run(dir, "train --config c.toml data.train=plain output.dir=snc fgm.final_certificate=false").code == 0);
  const JsonValue nl = run_log(dir, "nc");
  CHECK(scoring_passes(nl) == 3);
  CHECK(nl.find("final_sip_violation")->is_null());
  CHECK(run_log(dir, "snc").find("final_sip_violation")->is_null());
  require_same_model(dir.file("d1/model.fgm"), dir.file("nc/model.fgm"));
}

TEST_CASE("data.truth on a partitioned store reports the single-store recovery", "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-set");
  REQUIRE(run(dir, "synth --kind sparse --out data --rows 2000 --test-rows 10 --features 400 --seed 7 "
                   "--planted-linear 8 --planted-cross 0 --nnz-per-row 12")
              .code == 0);
  REQUIRE(run(dir, "ingest data/train.svm --out store --partitions 4").code == 0);
  REQUIRE(run(dir, "ingest data/train.svm --out plain").code == 0);
  dir.write("c.toml", "[data]\ntrain = \"store\"\ntruth = \"data/truth.txt\"\n[fgm]\nB = 4\nmax_iterations = 3\n");
  const RunResult d = run_mpi(dir, 2, "train --config c.toml output.dir=d");
  INFO(d.err);
  REQUIRE(d.code == 0);
  const RunResult s = run(dir, "train --config c.toml data.train=plain output.dir=s");
  REQUIRE(s.code == 0);
  const JsonValue dlog = run_log(dir, "d"), slog = run_log(dir, "s");
  const JsonValue* dt = dlog.find("truth");
  const JsonValue* st = slog.find("truth");
  REQUIRE(dt);
  REQUIRE(st);
  CHECK(dt->find("planted")->number() == 8);
  CHECK(dt->find("recovered")->number() == st->find("recovered")->number());
  CHECK(dt->find("recovered")->number() > 0);
  // The printed summary names it too, as on one store.
  const std::string recovered = "recovered=" + std::to_string(static_cast<int>(dt->find("recovered")->number())) + "/8";
  CHECK(contains(d.out, recovered));
  CHECK(contains(s.out, recovered));
  // Recovery counts the model's features: check it against the model itself.
  std::set<uint64_t> chosen;
  for (const auto& f : read_model(dir.file("d/model.fgm")).features) chosen.insert(f.key.ids[0] + 1);
  std::istringstream truth(slurp(dir.file("data/truth.txt")));
  std::string line;
  double hits = 0;
  while (std::getline(truth, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string kind;
    uint64_t id = 0;
    if (fields >> kind >> id && kind == "linear") hits += chosen.count(id);
  }
  CHECK(hits == dt->find("recovered")->number());
}

TEST_CASE("the single-store trainer's warnings on a partitioned store", "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-set");
  // Feature 9 holds values around 10^6: the value span over all partitions
  // is the single store's (per-column maxima are exact), message included.
  ingest_both(dir, planted(400, 30, 9, 9));
  dir.write("c.toml", "[data]\ntrain = \"store\"\n[fgm]\nB = 2\nmax_iterations = 2\n[apg]\nmethod = \"apg\"\nmax_iterations = 3\neps_inner = 1e-9\n");
  REQUIRE(run_mpi(dir, 4, "train --config c.toml output.dir=d").code == 0);
  REQUIRE(run(dir, "train --config c.toml data.train=plain output.dir=s").code == 0);
  const auto dw = warnings_of(run_log(dir, "d")), sw = warnings_of(run_log(dir, "s"));
  REQUIRE(dw.count("feature_value_span"));
  CHECK(dw.at("feature_value_span") == sw.at("feature_value_span"));
  // APG capped at 3 iterations: not converged, as on one store.
  CHECK(dw.count("apg_max_iterations"));
  std::set<std::string> dcodes, scodes;
  for (const auto& [code, message] : dw) dcodes.insert(code);
  for (const auto& [code, message] : sw) scodes.insert(code);
  CHECK(dcodes == scodes);
  // Labels independent of the features: the model is at chance level on its
  // training rows (counted over all partitions), and the first solve barely
  // moves F_0; both trainers say so.
  std::string noise;
  std::mt19937 rng(3);
  for (int i = 0; i < 400; ++i) {
    noise += (i % 2 ? "+1" : "-1");
    for (int j = 1; j <= 20; ++j)
      if (rng() % 5 == 0) noise += " " + std::to_string(j) + ":1";
    noise += "\n";
  }
  TempDir flat("fgm-mpi-set");
  ingest_both(flat, noise);
  flat.write("c.toml", "[data]\ntrain = \"store\"\n[fgm]\nB = 1\nmax_iterations = 1\nC = 1e-4\n");
  REQUIRE(run_mpi(flat, 2, "train --config c.toml output.dir=d").code == 0);
  REQUIRE(run(flat, "train --config c.toml data.train=plain output.dir=s").code == 0);
  const auto fd = warnings_of(run_log(flat, "d")), fs = warnings_of(run_log(flat, "s"));
  std::set<std::string> fdc, fsc;
  for (const auto& [code, message] : fd) fdc.insert(code);
  for (const auto& [code, message] : fs) fsc.insert(code);
  CHECK(fdc == fsc);
  CHECK(fdc.count("chance_level_model"));
}

}  // namespace fgm::test

namespace fgm::test {
namespace {

// Columns of very different scales (feature j times 10^(j mod 4)): what the
// per-feature transforms are for.
std::string scaled(const std::string& text) {
  std::istringstream in(text);
  std::ostringstream out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string label, entry;
    fields >> label;
    out << label;
    while (fields >> entry) {
      const auto colon = entry.find(':');
      const int j = std::stoi(entry.substr(0, colon));
      out << ' ' << j << ':' << std::stod(entry.substr(colon + 1)) * std::pow(10.0, j % 4);
    }
    out << '\n';
  }
  return out.str();
}

}  // namespace

TEST_CASE("features.transform on a partitioned store: statistics over all partitions, the single-store model",
          "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-set");
  ingest_both(dir, scaled(planted(400, 24, 13)));
  dir.write("test.txt", scaled(planted(100, 24, 14)));
  const InMemoryData raw = parse_libsvm_simple(dir.file("in.txt"));
  for (const std::string list : {"\"scale\"", "\"log1p\", \"maxabs\", \"row_l2\"", "\"tfidf\", \"row_l1\"",
                                 "\"maxabs\""}) {
    INFO("features.transform = [" << list << "]");
    dir.write("c.toml", "[data]\ntrain = \"store\"\n[features]\ntransform = [" + list +
                            "]\n[fgm]\nB = 3\nmax_iterations = 2\nbias = true\n[apg]\neps_inner = 1e-8\n"
                            "gap_tolerance = 1e-10\n");  // the final solve stops on its gap: tight, as the others
    REQUIRE(run(dir, "train --config c.toml output.dir=d1").code == 0);
    for (int np : {2, 4}) {
      const RunResult r = run_mpi(dir, np, "train --config c.toml output.dir=d" + std::to_string(np) +
                                               " engine.threads=" + std::to_string(np == 2 ? 2 : 1));
      INFO(r.err);
      REQUIRE(r.code == 0);
      require_same_model(dir.file("d1/model.fgm"), dir.file("d" + std::to_string(np) + "/model.fgm"));
      CHECK(read_model(dir.file("d1/model.fgm")).transforms ==
            read_model(dir.file("d" + std::to_string(np) + "/model.fgm")).transforms);
    }
    REQUIRE(run(dir, "train --config c.toml data.train=plain output.dir=s").code == 0);
    const Model d = read_model(dir.file("d1/model.fgm")), s = read_model(dir.file("s/model.fgm"));
    // The recorded statistics are the single store's: the same ids, factors
    // equal to rounding (maxima and counts exactly; sums in another order).
    REQUIRE(d.transforms.size() == s.transforms.size());
    for (size_t k = 0; k < d.transforms.size(); ++k) {
      CHECK(d.transforms[k].name == s.transforms[k].name);
      CHECK(d.transforms[k].ids == s.transforms[k].ids);
      CHECK(d.transforms[k].absent_factor == s.transforms[k].absent_factor);
      REQUIRE(d.transforms[k].factors.size() == s.transforms[k].factors.size());
      for (size_t q = 0; q < d.transforms[k].factors.size(); ++q) {
        if (d.transforms[k].name == "scale")
          CHECK(d.transforms[k].factors[q] == Approx(s.transforms[k].factors[q]).epsilon(1e-13));
        else
          CHECK(d.transforms[k].factors[q] == s.transforms[k].factors[q]);
      }
    }
    // scale alone, against the definition: 1 / sqrt(Σ_i x_ij² / n) over all
    // rows of all partitions (n = 400, not a partition's 100).
    if (d.transforms.size() == 1 && d.transforms[0].name == "scale")
      for (size_t q = 0; q < d.transforms[0].ids.size(); ++q) {
        double squares = 0;
        for (const auto& row : raw.rows)
          if (auto it = row.find(d.transforms[0].ids[q]); it != row.end()) {
            const double x = static_cast<float>(it->second);  // the store holds float values
            squares += x * x;
          }
        CHECK(d.transforms[0].factors[q] == Approx(1 / std::sqrt(squares / 400)).epsilon(1e-12));
      }
    REQUIRE(d.features.size() == s.features.size());
    for (size_t k = 0; k < d.features.size(); ++k) {
      CHECK(d.features[k].key.ids[0] == s.features[k].key.ids[0]);
      CHECK(d.features[k].weight == Approx(s.features[k].weight).epsilon(1e-3).margin(1e-6));
    }
    // predict applies the recorded transforms to raw rows: the decision values
    // of the two models agree.
    REQUIRE(run(dir, "predict --model d1/model.fgm test.txt --out pd.txt").code == 0);
    REQUIRE(run(dir, "predict --model s/model.fgm test.txt --out ps.txt").code == 0);
    std::istringstream pd(slurp(dir.file("pd.txt"))), ps(slurp(dir.file("ps.txt")));
    double a = 0, b = 0;
    int rows = 0;
    while (pd >> a && ps >> b) {
      CHECK(a == Approx(b).epsilon(1e-3).margin(1e-4));
      ++rows;
    }
    CHECK(rows == 100);
  }
}

}  // namespace fgm::test
