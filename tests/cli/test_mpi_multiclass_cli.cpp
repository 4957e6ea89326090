// One-vs-rest on a partitioned store (docs/distributed.md, "Multi-class"):
// the same model file byte for byte on 1, 2 and 4 ranks and any
// engine.threads, class values from all partitions (one partition lacks a
// class), and, as the independent check, the single-store one-vs-rest
// trainer's features and predictions on the same rows. Tagged [.mpi] (ctest
// runs them in the `mpi` entry).
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

namespace fgm::test {
namespace {

// Three classes 1, 2, 3 (spelled "2.0" and "3.000" too) over 24 features:
// class k raises features 4k+1..4k+4 by 3, 2, 1.5 and 1 (distinct strengths,
// so the selection has no near ties), the others hold small integers or
// two-decimal values. Rows [lacking_from, lacking_to) have no class 3.
std::string three_classes(uint64_t rows, uint32_t seed, uint64_t lacking_from = 0, uint64_t lacking_to = 0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> unif(0, 1);
  std::ostringstream out;
  for (uint64_t i = 0; i < rows; ++i) {
    int c = static_cast<int>(rng() % 3);
    if (c == 2 && i >= lacking_from && i < lacking_to) c = static_cast<int>(i % 2);
    out << (c == 0 ? "1" : c == 1 ? (i % 2 ? "2.0" : "2") : (i % 2 ? "3.000" : "3"));
    for (int j = 0; j < 24; ++j) {
      double v = 0;
      if (unif(rng) < 0.3) v = j % 2 ? std::floor(3 * unif(rng)) : std::round(100 * unif(rng)) / 100;
      if (j / 4 == c) v += j % 4 == 0 ? 3.0 : j % 4 == 1 ? 2.0 : j % 4 == 2 ? 1.5 : 1.0;
      if (v != 0) out << ' ' << j + 1 << ':' << v;
    }
    out << '\n';
  }
  return out.str();
}

void write_stores(const TempDir& dir) {
  // 4 partitions of 100 rows; partition 2 (rows 200..299) has no class 3.
  dir.write("train.txt", three_classes(400, 11, 200, 300));
  dir.write("test.txt", three_classes(150, 12));
  REQUIRE(run(dir, "ingest train.txt --out store --partitions 4 --tile-rows 32").code == 0);
  REQUIRE(run(dir, "ingest train.txt --out plain --tile-rows 32").code == 0);
}

std::string config_text(const std::string& store, const std::string& extra = "") {
  return "[data]\ntrain = \"" + store + "\"\n[fgm]\nB = 3\nmax_iterations = 3\nbias = true\n" + extra;
}

// The classes' features, weights, biases and objectives, bit for bit.
void require_same_classes(const Model& a, const Model& b) {
  REQUIRE(a.classes.size() == b.classes.size());
  for (size_t c = 0; c < a.classes.size(); ++c) {
    const ClassModel &x = a.classes[c], &y = b.classes[c];
    CHECK(x.label == y.label);
    REQUIRE(x.features.size() == y.features.size());
    for (size_t k = 0; k < x.features.size(); ++k) {
      CHECK(x.features[k].key.kind == y.features[k].key.kind);
      CHECK(x.features[k].key.ids[0] == y.features[k].key.ids[0]);
      CHECK(x.features[k].key.ids[1] == y.features[k].key.ids[1]);
      CHECK(x.features[k].key.group == y.features[k].key.group);
      CHECK(x.features[k].batch == y.features[k].batch);
      CHECK(std::memcmp(&x.features[k].weight, &y.features[k].weight, sizeof(double)) == 0);
    }
    CHECK(std::memcmp(&x.bias, &y.bias, sizeof(double)) == 0);
    CHECK(std::memcmp(&x.objective, &y.objective, sizeof(double)) == 0);
  }
}

}  // namespace

TEST_CASE("a one-vs-rest model on 1, 2 and 4 ranks is the same file byte for byte, for any thread count",
          "[.mpi][mpi]") {
  TempDir data("fgm-mpi-mc");
  write_stores(data);
  // Runs in separate directories with the same config text (the model records
  // the config, output.dir and engine.threads included).
  std::vector<std::string> files;
  for (int np : {1, 2, 4}) {
    TempDir run_dir("fgm-mpi-mc");
    run_dir.write("c.toml", config_text(data.file("store")));
    RunResult r = np == 1 ? run(run_dir, "train --config c.toml output.dir=out")
                          : run_mpi(run_dir, np, "train --config c.toml output.dir=out");
    INFO("np = " << np << "\n" << r.err);
    REQUIRE(r.code == 0);
    CHECK(contains(r.out, "classes=3"));
    files.push_back(slurp(run_dir.file("out/model.fgm")));
    if (np == 4) {
      // run.json: one entry per class with its own iterations, and every
      // communication record names its class.
      const JsonValue log = parse_json(slurp(run_dir.file("out/run.json")), "run.json");
      CHECK(log.find("multiclass")->string() == "ovr");
      const auto& classes = log.find("classes")->items();
      REQUIRE(classes.size() == 3);
      double rows = 0;
      for (const auto& c : classes) {
        CHECK(!c.find("iterations")->items().empty());
        rows += c.find("rows")->number();
      }
      CHECK(rows == 400);
      // (but the multi-class chance-level counts at the end).
      int of_no_class = 0;
      for (const auto& pass : log.find("distributed")->find("passes")->items())
        if (!pass.find("class") && !pass.find("classes")) {  // "classes": a pass shared in lockstep
          ++of_no_class;
          CHECK(pass.find("phase")->string() == "diagnostics");
        }
      CHECK(of_no_class == 1);
      CHECK(std::filesystem::exists(run_dir.file("out/report.html")));
      CHECK(run(run_dir, "report out").code == 0);
    }
  }
  CHECK(files[0] == files[1]);
  CHECK(files[0] == files[2]);
  // Another thread count: the same classes bit for bit (the file differs only
  // in the recorded engine.threads).
  data.write("c.toml", config_text("store"));
  REQUIRE(run(data, "train --config c.toml output.dir=t1 engine.threads=1").code == 0);
  REQUIRE(run_mpi(data, 2, "train --config c.toml output.dir=t2 engine.threads=2").code == 0);
  require_same_classes(read_model(data.file("t1/model.fgm")), read_model(data.file("t2/model.fgm")));
  // The generated spaces too (hik: each class's scaling is the global column
  // range, combined as on one store).
  for (const std::string kind : {"poly2", "hik"}) {
    INFO("features.kind = " << kind);
    REQUIRE(run(data, "train --config c.toml output.dir=k1" + kind + " features.kind=" + kind).code == 0);
    REQUIRE(run_mpi(data, 4, "train --config c.toml output.dir=k4" + kind + " features.kind=" + kind).code == 0);
    const Model one = read_model(data.file("k1" + kind + "/model.fgm"));
    const Model four = read_model(data.file("k4" + kind + "/model.fgm"));
    require_same_classes(one, four);
    CHECK(one.feature_kind == kind);
    CHECK(one.scale_ids == four.scale_ids);
    CHECK(one.scale_min == four.scale_min);
    CHECK(one.scale_max == four.scale_max);
  }
}

TEST_CASE("distributed one-vs-rest takes the classes of all partitions and picks the single-store trainer's "
          "features and predictions",
          "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-mc");
  write_stores(dir);
  dir.write("c.toml", config_text("store", "[apg]\neps_inner = 1e-8\n"));
  RunResult d = run_mpi(dir, 2, "train --config c.toml output.dir=d data.test=test.txt");
  INFO(d.err);
  REQUIRE(d.code == 0);
  RunResult s = run(dir, "train --config c.toml data.train=plain output.dir=s data.test=test.txt");
  REQUIRE(s.code == 0);
  const Model dm = read_model(dir.file("d/model.fgm")), sm = read_model(dir.file("s/model.fgm"));
  // Partition 2 has no class 3; the model still has all three classes.
  REQUIRE(dm.classes.size() == 3);
  CHECK(dm.classes[2].label == 3);
  REQUIRE(sm.classes.size() == 3);
  for (size_t c = 0; c < 3; ++c) {
    INFO("class " << c);
    CHECK(dm.classes[c].label == sm.classes[c].label);
    REQUIRE(dm.classes[c].features.size() == sm.classes[c].features.size());
    for (size_t k = 0; k < dm.classes[c].features.size(); ++k) {
      CHECK(dm.classes[c].features[k].key.ids[0] == sm.classes[c].features[k].key.ids[0]);
      CHECK(dm.classes[c].features[k].batch == sm.classes[c].features[k].batch);
      CHECK(dm.classes[c].features[k].weight == Approx(sm.classes[c].features[k].weight).epsilon(1e-3).margin(1e-6));
    }
    CHECK(dm.classes[c].bias == Approx(sm.classes[c].bias).epsilon(1e-3).margin(1e-6));
    CHECK(dm.classes[c].objective == Approx(sm.classes[c].objective).epsilon(1e-4));
  }
  // predict reads the distributed model and labels the test rows as the
  // single-store model does; inspect shows the classes.
  RunResult pd = run(dir, "predict --model d/model.fgm test.txt --out d.txt");
  RunResult ps = run(dir, "predict --model s/model.fgm test.txt --out s.txt");
  REQUIRE(pd.code == 0);
  REQUIRE(ps.code == 0);
  CHECK(slurp(dir.file("d.txt")) == slurp(dir.file("s.txt")));
  CHECK(contains(pd.out, "accuracy="));
  RunResult i = run(dir, "inspect d/model.fgm");
  REQUIRE(i.code == 0);
  CHECK(contains(i.out, "\"classes\": ["));
}

TEST_CASE("distributed one-vs-rest with features.transform records the statistics of every class's features",
          "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-mc");
  write_stores(dir);
  dir.write("c.toml", config_text("store", "[features]\ntransform = [\"maxabs\"]\n"));
  REQUIRE(run_mpi(dir, 4, "train --config c.toml output.dir=d").code == 0);
  REQUIRE(run(dir, "train --config c.toml output.dir=d1").code == 0);
  REQUIRE(run(dir, "train --config c.toml data.train=plain output.dir=s").code == 0);
  const Model d = read_model(dir.file("d/model.fgm")), s = read_model(dir.file("s/model.fgm"));
  require_same_classes(d, read_model(dir.file("d1/model.fgm")));
  // maxabs factors are maxima: exactly the single store's. Every class's
  // selected features have theirs (predict scales each class's features),
  // except those whose factor is the absent features' 1 (largest |value| 1,
  // from the training text), which the model leaves out.
  REQUIRE(d.transforms.size() == 1);
  CHECK(d.transforms == s.transforms);
  std::set<uint64_t> used;
  for (const auto& c : d.classes)
    for (const auto& f : c.features) used.insert(f.key.ids[0]);
  std::map<uint64_t, double> largest;  // 0-based id → max |value| in train.txt
  {
    std::istringstream text(slurp(dir.file("train.txt")));
    for (std::string line; std::getline(text, line);) {
      std::istringstream fields(line);
      std::string field;
      fields >> field;  // the label
      while (fields >> field) {
        const size_t colon = field.find(':');
        const uint64_t id = std::stoull(field.substr(0, colon)) - 1;
        largest[id] = std::max(largest[id], std::fabs(std::stod(field.substr(colon + 1))));
      }
    }
  }
  std::set<uint64_t> scaled;
  for (uint64_t id : used)
    if (largest[id] != 1.0) scaled.insert(id);
  CHECK(std::set<uint64_t>(d.transforms[0].ids.begin(), d.transforms[0].ids.end()) == scaled);
  CHECK(used.size() > 3);
  REQUIRE(run(dir, "predict --model d/model.fgm test.txt --out d.txt").code == 0);
  REQUIRE(run(dir, "predict --model s/model.fgm test.txt --out s.txt").code == 0);
  CHECK(slurp(dir.file("d.txt")) == slurp(dir.file("s.txt")));
}

}  // namespace fgm::test
