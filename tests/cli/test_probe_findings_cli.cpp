// Findings of the adversarial probe of issue 23 (items 5–9, 14, 15, 17 and
// the two follow-ups), each through the `fgm` binary: what the old code let
// through silently is now an error naming the file/key or a warning.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/json_reader.h"
#include "io/model_file.h"
#include "tests/cli/cli_test_util.h"

namespace fs = std::filesystem;

namespace fgm::test {
namespace {

// Two synthetic data sets of the same shape (rows, declared width) but
// other values and labels, each ingested into a 4-partition store.
void two_partitioned_stores(const TempDir& dir) {
  REQUIRE(run(dir, "synth --out a --rows 400 --test-rows 100 --features 60 --relevant 6 --seed 11").code == 0);
  REQUIRE(run(dir, "synth --out b --rows 400 --test-rows 100 --features 60 --relevant 6 --seed 12").code == 0);
  REQUIRE(run(dir, "ingest a/train.svm --out pa --partitions 4 --features 60").code == 0);
  REQUIRE(run(dir, "ingest b/train.svm --out pb --partitions 4 --features 60").code == 0);
}

void replace_part(const TempDir& dir, const std::string& store, const std::string& from, const char* part) {
  fs::remove_all(dir.path / store / part);
  fs::copy(dir.path / from / part, dir.path / store / part, fs::copy_options::recursive);
}

// partitions.json as written before the parts were bound to their store.
void strip_binding(const TempDir& dir, const std::string& store) {
  const std::string file = (dir.path / store / "partitions.json").string();
  std::string text = slurp(file);
  text = std::regex_replace(text, std::regex(",\\s*\"part_checksums\":\\s*\\[[^\\]]*\\]"), "");
  REQUIRE_FALSE(contains(text, "part_checksums"));
  std::ofstream(file, std::ios::trunc) << text;
}

std::vector<double> weights_of(const TempDir& dir, const std::string& model) {
  std::vector<double> w;
  for (const auto& f : read_model((dir.path / model).string()).features) w.push_back(f.weight);
  return w;
}

const std::string kTrain = "train fgm.B=3 fgm.max_iterations=4 engine.cache_dir=cache ";

}  // namespace

// Item 5.
TEST_CASE("a partition copied from another store is refused at open, naming it; stores without the binding open",
          "[cli][partitions]") {
  TempDir dir("fgm-probe");
  two_partitioned_stores(dir);
  REQUIRE(slurp(dir.file("pa/partitions.json")) .find("\"part_checksums\"") != std::string::npos);
  RunResult control = run(dir, kTrain + "data.train=pa output.dir=control");
  CAPTURE(control.err);
  REQUIRE(control.code == 0);

  replace_part(dir, "pa", "pb", "part-0001");
  RunResult r = run(dir, kTrain + "data.train=pa output.dir=mixed");
  CAPTURE(r.err);
  REQUIRE(r.code == 5);
  REQUIRE(contains(r.err, "part-0001: this partition is not the one the store was ingested with"));
  REQUIRE_FALSE(fs::exists(dir.path / "mixed" / "model.fgm"));
}

TEST_CASE("a store ingested before the partition binding trains as before", "[cli][partitions]") {
  TempDir dir("fgm-probe");
  REQUIRE(run(dir, "synth --out a --rows 400 --features 60 --relevant 6 --seed 11").code == 0);
  REQUIRE(run(dir, "ingest a/train.svm --out pa --partitions 4 --features 60").code == 0);
  RunResult bound = run(dir, kTrain + "data.train=pa output.dir=bound");
  REQUIRE(bound.code == 0);
  strip_binding(dir, "pa");
  RunResult old = run(dir, kTrain + "data.train=pa output.dir=old");
  CAPTURE(old.err);
  REQUIRE(old.code == 0);
  REQUIRE(weights_of(dir, "old/model.fgm") == weights_of(dir, "bound/model.fgm"));
}

// Item 6 (and item 14's second half: an evaluation failure keeps the model).
TEST_CASE("resuming after a partition changed is refused as a different run, bound or not",
          "[cli][partitions][resume]") {
  TempDir dir("fgm-probe");
  two_partitioned_stores(dir);
  // A test file that passes the syntax pass but holds a label the model
  // does not know: training finishes (checkpoint written), evaluation fails.
  dir.write("unknown_label.svm", "+1 1:0.5\n7 2:0.25\n");
  const std::string args = kTrain + "data.train=pa output.dir=out fgm.max_iterations=6 ";
  RunResult r = run(dir, args + "data.test=unknown_label.svm");
  CAPTURE(r.err);
  REQUIRE(r.code == 3);
  REQUIRE(contains(r.err, "unknown_label.svm:2"));
  REQUIRE(contains(r.err, "the trained model is kept in out/model.fgm"));
  REQUIRE(fs::exists(dir.path / "out" / "model.fgm"));
  REQUIRE(fs::exists(dir.path / "out" / "checkpoint.fgm"));
  REQUIRE_FALSE(fs::exists(dir.path / "out" / "run.json"));

  SECTION("bound store") {
    replace_part(dir, "pa", "pb", "part-0002");
  }
  SECTION("store without the binding") {
    strip_binding(dir, "pa");
    replace_part(dir, "pa", "pb", "part-0002");
  }
  r = run(dir, args);
  CAPTURE(r.err);
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "written by a different run"));
  REQUIRE(contains(r.err, "training store checksum"));
  REQUIRE_FALSE(contains(r.err, "resuming"));
}

// Item 14.
TEST_CASE("a bad data.test is found before training; an evaluation failure keeps the trained model",
          "[cli][errors]") {
  TempDir dir("fgm-probe");
  std::string train;
  for (int i = 0; i < 90; ++i)
    train += std::to_string(i % 3 + 1) + " " + std::to_string(i % 3 + 1) + ":1 4:" + std::to_string(i % 7) + "\n";
  dir.write("train.svm", train);
  dir.write("bad_test.svm", "1 1:1\n2 2:x\n");
  const std::string args = "train data.train=train.svm engine.cache_dir=cache output.dir=out fgm.B=2 ";
  RunResult r = run(dir, args + "data.test=bad_test.svm");
  CAPTURE(r.err);
  REQUIRE(r.code == 3);
  REQUIRE(contains(r.err, "bad_test.svm:2:3"));
  REQUIRE_FALSE(contains(r.err, "training on"));  // refused before any class was trained
  REQUIRE_FALSE(fs::exists(dir.path / "out"));
  dir.write("empty_test.svm", "# nothing\n");
  r = run(dir, args + "data.test=empty_test.svm");
  REQUIRE(r.code == 3);
  REQUIRE(contains(r.err, "empty_test.svm: the file holds no data rows"));

  // A label no class has: known only after training; the model is kept.
  dir.write("label9_test.svm", "1 1:1\n9 2:1\n");
  r = run(dir, args + "data.test=label9_test.svm");
  CAPTURE(r.err);
  REQUIRE(r.code == 3);
  REQUIRE(contains(r.err, "label9_test.svm:2"));
  REQUIRE(contains(r.err, "the trained model is kept in out/model.fgm"));
  const Model kept = read_model(dir.file("out/model.fgm"));
  REQUIRE(kept.classes.size() == 3);
  // The same model as a run without data.test.
  REQUIRE(run(dir, "train data.train=train.svm engine.cache_dir=cache output.dir=plain fgm.B=2").code == 0);
  const Model plain = read_model(dir.file("plain/model.fgm"));
  for (size_t c = 0; c < 3; ++c) {
    REQUIRE(kept.classes[c].features.size() == plain.classes[c].features.size());
    for (size_t j = 0; j < plain.classes[c].features.size(); ++j)
      REQUIRE(kept.classes[c].features[j].weight == plain.classes[c].features[j].weight);
  }
}

// Item 7.
TEST_CASE("values beyond float32 are errors naming file:line:column, not 'NaN or Inf' and not silent zeros",
          "[cli][errors]") {
  TempDir dir("fgm-probe");
  dir.write("big.svm", "+1 1:1\n-1 2:1e200\n");
  RunResult r = run(dir, "ingest big.svm --out s1");
  CAPTURE(r.err);
  REQUIRE(r.code == 3);
  REQUIRE(contains(r.err, "big.svm:2:4: value in '2:1e200' exceeds float32's range"));
  REQUIRE_FALSE(contains(r.err, "NaN or Inf"));
  REQUIRE_FALSE(fs::exists(dir.path / "s1"));
  for (const char* tiny : {"1e-300", "4.9e-324"}) {
    dir.write("tiny.svm", std::string("+1 1:1\n-1 2:") + tiny + "\n");
    r = run(dir, "ingest tiny.svm --out s2");
    CAPTURE(r.err);
    REQUIRE(r.code == 3);
    REQUIRE(contains(r.err, "tiny.svm:2:4: value in '2:" + std::string(tiny) + "' is nonzero but below float32's range"));
    REQUIRE_FALSE(fs::exists(dir.path / "s2"));
  }
}

// Item 8.
TEST_CASE("one command-line override is one key and one value", "[cli][errors]") {
  TempDir dir("fgm-probe");
  dir.write("t.svm", "+1 1:1\n-1 2:1\n");
  const std::string base = "train data.train=t.svm engine.cache_dir=cache output.dir=out ";
  RunResult r = run(dir, base + "\"$(printf 'fgm.B=3\\nfgm.C=2')\"");
  CAPTURE(r.err);
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "command-line override 'fgm.B=3\\nfgm.C=2' is not one key=value"));
  r = run(dir, base + "'fgm.B=3 # x'");
  CAPTURE(r.err);
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "command-line override 'fgm.B=3 # x' is not one key=value: '# x' follows the value"));
  REQUIRE_FALSE(fs::exists(dir.path / "out"));
}

// Item 15.
TEST_CASE("messages escape control bytes from data; printed ranges are the checked ones", "[cli][errors]") {
  TempDir dir("fgm-probe");
  dir.write("esc.svm", std::string("+1 1:1\n-1 2:\x1b[31mred\n"));
  RunResult r = run(dir, "ingest esc.svm --out s");
  CAPTURE(r.err);
  REQUIRE(r.code == 3);
  REQUIRE(r.err.find('\x1b') == std::string::npos);
  REQUIRE(contains(r.err, "'2:\\x1b[31mred'"));
  dir.write("nul.svm", std::string("+1 1:1\n-1 2:1 x\0y:1 tail\n", 25));
  r = run(dir, "ingest nul.svm --out s");
  CAPTURE(r.err);
  REQUIRE(r.code == 3);
  REQUIRE(r.err.find('\0') == std::string::npos);
  REQUIRE(contains(r.err, "x\\x00y:1"));
  REQUIRE(contains(r.err, "is not a number"));  // the text after the NUL is there

  r = run(dir, "train --help-config");
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.out + r.err, "fgm.C  (a number, default 10.0, range (0, 1e12])"));
  REQUIRE_FALSE(contains(r.out + r.err, "∞"));
  r = run(dir, "train data.train=t.svm fgm.C=2e12");
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "(0, 1e12]"));
  // The largest size the error names is accepted (then the missing directory is the error).
  r = run(dir, "report nowhere --memory-budget 9223372036854775807B");
  CAPTURE(r.err);
  REQUIRE(r.code == 4);
  REQUIRE_FALSE(contains(r.err, "larger than"));
  r = run(dir, "report nowhere --memory-budget 9223372036854775808B");
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "larger than the largest supported size (9223372036854775807 bytes)"));
}

// Items 9 and 17 (FGM and MSLR paths).
TEST_CASE("paths refuse counts they cannot reach and warn when they deliver fewer points", "[cli][path]") {
  TempDir dir("fgm-probe");
  REQUIRE(run(dir, "synth --out data --rows 300 --test-rows 100 --features 50 --relevant 5 --seed 3").code == 0);
  REQUIRE(run(dir, "ingest data/train.svm --out store").code == 0);
  const std::string path = "path data.train=store data.test=data/test.svm output.dir=p ";
  RunResult r = run(dir, path + "'path.features=[5, 60, 70]'");
  CAPTURE(r.err);
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "path.features: 70 features asked for, but the training data has only 50 features"));
  REQUIRE_FALSE(fs::exists(dir.path / "p"));
  // The same on a partitioned store (its width from partitions.json).
  REQUIRE(run(dir, "ingest data/train.svm --out parts --partitions 2").code == 0);
  r = run(dir, "path data.train=parts output.dir=pp 'path.features=[5, 70]'");
  CAPTURE(r.err);
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "path.features: 70 features asked for, but the training data has only 50 features"));
  REQUIRE_FALSE(fs::exists(dir.path / "pp"));
  r = run(dir, path + "solver=mslr 'mslr.features=[5, 70]'");
  CAPTURE(r.err);
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "mslr.features: 70 features asked for"));
  // No path delivers fewer points for want of iterations (issue 22): FGM's
  // path.features run takes as many as its counts need, whatever
  // fgm.max_iterations says; MSLR's raises or refuses (test_mslr_cli.cpp).
  r = run(dir, path + "output.dir=few fgm.B=2 fgm.max_iterations=1 'path.features=[2, 6, 10]' path.debias=false");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.out, "points=3"));
  REQUIRE(contains(slurp(dir.file("few/path.csv")), "\n3,2,10,10,"));
  REQUIRE_FALSE(contains(slurp(dir.file("few/path.json")), "path_points_missing"));
  // MSLR's refusal on a partitioned store too, before any output.
  r = run(dir, "path data.train=parts output.dir=pm solver=mslr mslr.r=1 mslr.max_iterations=5 'mslr.features=[10]'");
  CAPTURE(r.err);
  REQUIRE(r.code == 2);
  REQUIRE(contains(r.err, "command line: mslr.max_iterations"));
  REQUIRE(contains(r.err, "set mslr.max_iterations to at least 10"));
  REQUIRE_FALSE(fs::exists(dir.path / "pm"));

  // Declared wider than the data: 80 columns, 30 of them empty. The counts
  // pass the width check but 75 cannot be reached: warned, in path.json too.
  REQUIRE(run(dir, "ingest data/train.svm --out wide --features 80").code == 0);
  r = run(dir, "path data.train=wide output.dir=w 'path.features=[5, 10, 75]' path.debias=false");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.err, "path.features: no point at 75 features"));
  REQUIRE(contains(slurp(dir.file("w/path.json")), "\"path_points_missing\""));
  r = run(dir, "path data.train=wide output.dir=m solver=mslr 'mslr.features=[5, 75]'");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.err, "mslr.features: no point at 75 features"));
  REQUIRE(contains(slurp(dir.file("m/path.json")), "\"path_points_missing\""));
}

// Follow-up: fgm predict on rows without labels.
TEST_CASE("fgm predict --unlabelled writes predicted labels and decision values", "[cli][predict]") {
  TempDir dir("fgm-probe");
  REQUIRE(run(dir, "synth --out data --rows 300 --test-rows 50 --features 40 --relevant 5 --seed 8").code == 0);
  REQUIRE(run(dir, "train data.train=data/train.svm engine.cache_dir=cache output.dir=out fgm.B=3").code == 0);
  // The labelled scores, and the same rows with a placeholder label 0.
  REQUIRE(run(dir, "predict --model out/model.fgm data/test.svm --out labelled.txt").code == 0);
  std::istringstream in(slurp(dir.file("data/test.svm")));
  std::string line, unlabelled;
  while (std::getline(in, line)) unlabelled += "0" + line.substr(line.find(' ')) + "\n";
  dir.write("unlabelled.svm", unlabelled);
  RunResult refused = run(dir, "predict --model out/model.fgm unlabelled.svm");
  REQUIRE(refused.code == 3);
  RunResult r = run(dir, "predict --model out/model.fgm unlabelled.svm --unlabelled --out predicted.txt");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.out, "rows=50"));
  const Model model = read_model(dir.file("out/model.fgm"));
  std::istringstream decisions(slurp(dir.file("labelled.txt"))), predicted(slurp(dir.file("predicted.txt")));
  double d = 0, label = 0, decision = 0;
  int n = 0;
  while (decisions >> d) {
    REQUIRE(predicted >> label >> decision);
    REQUIRE(decision == Approx(d).epsilon(1e-8));
    REQUIRE(label == (d > 0 ? model.positive_label : model.negative_label));
    ++n;
  }
  REQUIRE(n == 50);
}

// Follow-up: fgm report reads its logs within a budget.
TEST_CASE("fgm report reads the run logs within --memory-budget", "[cli][report]") {
  TempDir dir("fgm-probe");
  REQUIRE(run(dir, "synth --out data --rows 300 --features 40 --relevant 5 --seed 8").code == 0);
  REQUIRE(run(dir, "train data.train=data/train.svm engine.cache_dir=cache output.dir=out fgm.B=3").code == 0);
  RunResult r = run(dir, "report out --memory-budget 16KB");
  CAPTURE(r.err);
  REQUIRE(r.code == 6);
  REQUIRE(contains(r.err, "run.json"));
  REQUIRE(contains(r.err, "--memory-budget"));
  r = run(dir, "report out");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(fs::exists(dir.path / "out" / "report.html"));
}

// Item 14 for every solver's fgm train: an evaluation that fails after
// training keeps the model, the same model as a run without data.test.
TEST_CASE("every solver keeps its trained model when only the evaluation fails", "[cli][errors]") {
  TempDir dir("fgm-probe-solvers");
  REQUIRE(run(dir, "synth --out data --rows 200 --test-rows 10 --features 40 --relevant 5 --seed 3").code == 0);
  dir.write("label9_test.svm", "1 1:1\n9 2:1\n");
  const std::vector<std::string> solvers = {"solver=sifs", "solver=exclusive exclusive.random_groups=4",
                                            "solver=mslr", "solver=pnorm_kta"};
  for (const std::string& solver : solvers) {
    CAPTURE(solver);
    const std::string args = "train data.train=data/train.svm engine.cache_dir=cache " + solver + " ";
    RunResult r = run(dir, args + "output.dir=out data.test=label9_test.svm");
    CAPTURE(r.err);
    REQUIRE(r.code == 3);
    REQUIRE(contains(r.err, "label9_test.svm:2"));
    REQUIRE(contains(r.err, "the trained model is kept in out/model.fgm"));
    REQUIRE(run(dir, args + "output.dir=plain").code == 0);
    const Model kept = read_model(dir.file("out/model.fgm")), plain = read_model(dir.file("plain/model.fgm"));
    REQUIRE(kept.features.size() == plain.features.size());
    for (size_t j = 0; j < plain.features.size(); ++j) REQUIRE(kept.features[j].weight == plain.features[j].weight);
    fs::remove_all(dir.path / "out");
    fs::remove_all(dir.path / "plain");
  }
}

}  // namespace fgm::test
