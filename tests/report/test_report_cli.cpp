// `fgm report` and the report fgm train / fgm path write by default, through
// the binary: exit codes, messages naming the file, output.report = false.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "tests/cli/cli_test_util.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using fgm::test::contains;
using fgm::test::run;
using fgm::test::RunResult;
using fgm::test::slurp;
using fgm::test::TempDir;

namespace {
const char* kCommon = " data.train=data/train.svm data.test=data/test.svm engine.cache_dir=cache engine.progress=off";

void make_data(const TempDir& dir) {
  REQUIRE(run(dir, "synth --out data --rows 300 --test-rows 100 --features 60 --relevant 5 --seed 9").code == 0);
}

// Labels 1, 2, 5 in turn; class k's rows carry features 3k+1..3k+3, plus one noise feature.
std::string three_classes(int rows) {
  std::string out;
  const int labels[] = {1, 2, 5};
  for (int i = 0; i < rows; ++i) {
    const int c = i % 3;
    out += std::to_string(labels[c]);
    for (int j = 0; j < 3; ++j) out += " " + std::to_string(3 * c + j + 1) + ":" + std::to_string(1 + (i + j) % 3);
    out += " " + std::to_string(10 + i % 7) + ":1\n";
  }
  return out;
}
}  // namespace

TEST_CASE("fgm train and fgm path write report.html unless output.report = false", "[report][cli]") {
  TempDir dir("fgm-report-cli");
  make_data(dir);
  RunResult r = run(dir, std::string("train") + kCommon + " output.dir=on fgm.B=2 fgm.max_iterations=2");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  const std::string html = slurp(dir.file("on/report.html"));
  CHECK(contains(html, "<h2>Training run</h2>"));
  CHECK_FALSE(contains(html, "id=\"path\""));

  r = run(dir, std::string("train") + kCommon + " output.dir=off fgm.B=2 fgm.max_iterations=2 output.report=false");
  REQUIRE(r.code == 0);
  CHECK(fs::exists(dir.file("off/model.fgm")));
  CHECK_FALSE(fs::exists(dir.file("off/report.html")));

  r = run(dir, std::string("path") + kCommon + " output.dir=p 'path.features=[2,4]'");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  const std::string path_html = slurp(dir.file("p/report.html"));
  CHECK(contains(path_html, "<h2>Path</h2>"));
  CHECK(contains(path_html, "point 2 (the last point)"));  // no validation data: the last point's features
  r = run(dir, std::string("path") + kCommon + " output.dir=p2 'path.features=[2,4]' output.report=false");
  REQUIRE(r.code == 0);
  CHECK_FALSE(fs::exists(dir.file("p2/report.html")));
  r = run(dir, "report p2");
  REQUIRE(r.code == 0);
  CHECK(fs::exists(dir.file("p2/report.html")));

  r = run(dir, "train --config /dev/null output.report=maybe data.train=data/train.svm");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "output.report"));
}

TEST_CASE("fgm report: bad directories and damaged logs fail naming the file; no report", "[report][cli]") {
  TempDir dir("fgm-report-cli");
  make_data(dir);
  REQUIRE(run(dir, std::string("train") + kCommon + " output.dir=run fgm.B=2 fgm.max_iterations=2 output.report=false")
              .code == 0);
  RunResult r = run(dir, "report nowhere");
  CHECK(r.code == 4);
  CHECK(contains(r.err, "nowhere"));
  fs::create_directories(dir.path / "empty");
  r = run(dir, "report empty");
  CHECK(r.code == 4);
  CHECK(contains(r.err, "empty: no run.json or path.json here"));
  r = run(dir, "report");
  CHECK(r.code == 2);

  const std::string log = slurp(dir.file("run/run.json"));
  dir.write("run/run.json", log.substr(0, log.size() - 40));
  r = run(dir, "report run");
  CHECK(r.code == 5);
  CHECK(contains(r.err, "run/run.json:"));
  CHECK(contains(r.err, "not valid JSON"));
  CHECK_FALSE(fs::exists(dir.file("run/report.html")));

  fs::remove(dir.path / "run/run.json");
  r = run(dir, "report run");
  CHECK(r.code == 4);
  CHECK(contains(r.err, "run/run.json: cannot open"));
  CHECK_FALSE(fs::exists(dir.file("run/report.html")));
}

TEST_CASE("fgm report escapes the directory name and draws the CV band of path.folds", "[report][cli]") {
  TempDir dir("fgm-report-cli");
  make_data(dir);
  const std::string out = "o<i>&'x";
  RunResult r = run(dir, std::string("path") + kCommon + " data.validation=data/test.svm \"output.dir=o<i>&'x\" "
                         "'path.features=[1,2,3]' path.folds=3 output.report=false");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  r = run(dir, "report \"o<i>&'x\"");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  const std::string html = slurp((dir.path / out / "report.html").string());
  CHECK(contains(html, "<title>fgm report: o&lt;i&gt;&amp;&#39;x</title>"));
  CHECK_FALSE(contains(html, "<i>&"));
  CHECK(contains(html, "cross-validation mean (band: ± 1 SE)"));
  CHECK(contains(html, "<polygon"));
  CHECK(contains(html, "chosen (cv, one-SE)"));
  CHECK(contains(html, "(chosen by the one-SE rule on cv)"));
}

TEST_CASE("multi-class train writes report.html with a part per class; fgm report reads its run.json",
          "[report][cli]") {
  TempDir dir("fgm-report-cli");
  dir.write("train.svm", three_classes(120));
  dir.write("test.svm", three_classes(30));
  const std::string common =
      " data.train=train.svm data.test=test.svm engine.cache_dir=cache engine.progress=off fgm.B=1 "
      "fgm.max_iterations=2";
  RunResult r = run(dir, "train" + common + " output.dir=mc");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(contains(r.out, "classes=3"));
  const std::string html = slurp(dir.file("mc/report.html"));
  CHECK(contains(html, "one-vs-rest over 3 classes"));
  for (const char* part : {"id=\"class-0\"", "id=\"class-1\"", "id=\"class-2\"", "class 5: "}) {
    CAPTURE(part);
    CHECK(contains(html, part));
  }
  // The headline is run.json's test accuracy, printed by train too.
  const size_t at = r.out.find("accuracy=");
  REQUIRE(at != std::string::npos);
  CHECK(contains(html, "Test accuracy <b>" + r.out.substr(at + 9, 6) + "</b>"));

  r = run(dir, "train" + common + " output.dir=quiet output.report=false");
  REQUIRE(r.code == 0);
  CHECK_FALSE(fs::exists(dir.file("quiet/report.html")));
  r = run(dir, "report quiet");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  CHECK_FALSE(contains(r.err, "objective_no_features"));
  const std::string rewritten = slurp(dir.file("quiet/report.html"));
  CHECK(contains(rewritten, "one-vs-rest over 3 classes"));
  CHECK(contains(rewritten, "id=\"class-2\""));
}
