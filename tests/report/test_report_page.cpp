// The report page: the feature table against the model, escaping of
// everything from the logs, the CV band when path.csv has it, and the errors
// for missing or damaged logs (nothing written).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "io/model_file.h"
#include "report/report_page.h"
#include "report/run_logs.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace fgm;
using namespace fgm::report;
using fgm::test::TempDir;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

ModelFeature feature(FeatureKind kind, uint64_t a, uint64_t b, double weight, uint32_t batch, uint32_t level = 0,
                     uint64_t group = UINT64_MAX) {
  ModelFeature f;
  f.key.kind = kind;
  f.key.ids[0] = a;
  f.key.ids[1] = b;
  f.key.level = level;
  f.key.group = group;
  f.weight = weight;
  f.batch = batch;
  return f;
}

Model sample_model() {
  Model m;
  m.index_base = 1;
  m.feature_kind = "poly2";
  m.features = {feature(FeatureKind::kLinear, 0, 0, 1.5, 1), feature(FeatureKind::kCross, 3, 17, -0.25, 1),
                feature(FeatureKind::kSquare, 9, 0, 0.0625, 2), feature(FeatureKind::kHik, 4, 0, 2e-7, 3, 12),
                feature(FeatureKind::kGroup, 7, 0, -3, 3, 0, 42)};
  return m;
}

struct Row {
  std::string number, label, kind, group, weight, iteration;
};

std::vector<Row> table_rows(const std::string& html) {
  std::regex re(
      "<tr><td class=\"num\">([0-9]+)</td><td>([^<]*)</td><td>([^<]*)</td><td class=\"num\">([^<]*)</td>"
      "<td class=\"num\">([^<]*)</td><td>.*?</td><td class=\"num\">([0-9]+)</td></tr>");
  std::vector<Row> rows;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), re); it != std::sregex_iterator(); ++it)
    rows.push_back({(*it)[1], (*it)[2], (*it)[3], (*it)[4], (*it)[5], (*it)[6]});
  return rows;
}

// A run.json in the shape cli/train_command.cpp writes (the fields the report reads).
std::string run_json(const std::string& config_value, const std::string& warning) {
  return R"({
  "engine_version": "0.1.0",
  "data": {"train": "data/train.svm", "rows": 400},
  "config": {"fgm.B": "3", "data.train": ")" + config_value + R"("},
  "iterations": [
    {"iter": 1, "selected": 3, "added": 3, "objective": 700.5, "rel_decrease": 0.6, "sip_violation": 3.9e6,
     "score_seconds": 0.01, "solve_seconds": 0.002, "apg_iterations": 7, "apg_stop": "converged"},
    {"iter": 2, "selected": 6, "added": 3, "objective": 380, "rel_decrease": 0.17, "sip_violation": 5e5,
     "score_seconds": 0.005, "solve_seconds": 0.004, "apg_iterations": 9, "apg_stop": "converged"}
  ],
  "stop_reason": "max_iterations",
  "final_sip_violation": null,
  "objective_no_features": 2000,
  "warnings": [{"code": "apg_max_iterations", "message": ")" + warning + R"("}]
}
)";
}

}  // namespace

TEST_CASE("feature table: one row per model feature, in model order", "[report][page]") {
  const Model m = sample_model();
  const std::vector<Row> rows = table_rows(feature_table_html(m));
  REQUIRE(rows.size() == m.features.size());
  // Expected values written out from the model by hand: 1-based ids, a pair for the cross.
  const std::vector<std::vector<std::string>> expected = {
      {"1", "1", "linear", "", "1.5", "1"},
      {"2", "(4, 18)", "cross", "", "-0.25", "1"},
      {"3", "10", "square", "", "0.0625", "2"},
      {"4", "5 \xc2\xb7 level 12", "hik", "", "2e-07", "3"},
      {"5", "8", "group", "42", "-3", "3"}};
  for (size_t i = 0; i < rows.size(); ++i) {
    CAPTURE(i);
    CHECK(std::vector<std::string>{rows[i].number, rows[i].label, rows[i].kind, rows[i].group, rows[i].weight,
                                   rows[i].iteration} == expected[i]);
    CHECK(std::stod(rows[i].weight) == Approx(m.features[i].weight).epsilon(1e-6));
  }
  Model zero_based = m;
  zero_based.index_base = 0;
  CHECK(table_rows(feature_table_html(zero_based))[1].label == "(3, 17)");
}

TEST_CASE("feature table: a long model is cut with a note", "[report][page]") {
  Model m;
  for (uint64_t j = 0; j < 30; ++j) m.features.push_back(feature(FeatureKind::kLinear, j, 0, 1.0 + j, 1));
  const std::string html = feature_table_html(m, 10);
  CHECK(table_rows(html).size() == 10);
  CHECK(has(html, "20 more features"));
  CHECK(table_rows(feature_table_html(Model{})).empty());
}

TEST_CASE("train section: text from the logs is escaped", "[report][page]") {
  TempDir dir("fgm-report-page");
  dir.write("run.json", run_json("<script>alert(1)</script>", "cap & <b>bold</b> \\\"q\\\""));
  TrainRunLog log = read_train_log(dir.file("run.json"));
  REQUIRE(log.iterations.size() == 2);
  CHECK(std::isnan(log.final_sip_violation));
  const std::string html = train_section_html(log, sample_model());
  CHECK_FALSE(has(html, "<script"));
  CHECK_FALSE(has(html, "<b>bold"));
  CHECK(has(html, "&lt;script&gt;alert(1)&lt;/script&gt;"));
  CHECK(has(html, "cap &amp; &lt;b&gt;bold&lt;/b&gt; &quot;q&quot;"));
  CHECK(has(html, "1 warning in run.json"));
  CHECK(has(html, "stop_reason</span> = <span class=\"v\">max_iterations"));
  CHECK(has(html, "data.rows</span> = <span class=\"v\">400"));
  // Objective from F_0 at iteration 0, then the two iterations.
  CHECK(has(html, "<title>objective: 2000 at 0</title>"));
  CHECK(has(html, "<title>objective: 380 at 2</title>"));
  CHECK(has(html, "<title>2 APG solve: 0.004</title>"));
  CHECK_FALSE(has(html, "Not drawn on the log scale"));

  // Violations over many decades get a log scale; one that is <= 0 is named instead of drawn.
  std::string text = run_json("x", "w");
  text.replace(text.find("\"sip_violation\": 5e5"), 20, "\"sip_violation\": 2e4");
  text.replace(text.find("\"final_sip_violation\": null"), 27, "\"final_sip_violation\": -5");
  dir.write("run.json", text);
  const std::string logged = train_section_html(read_train_log(dir.file("run.json")), sample_model());
  CHECK(has(logged, "Not drawn on the log scale (\xe2\x89\xa4 0: no violated constraint): -5 at iteration 3."));
  CHECK(has(logged, ">1e7</text>"));  // log ticks up to 10^7 for 3.9e6
  CHECK_FALSE(has(logged, "after the last solve: -5"));  // no dot for it
}

TEST_CASE("path section: the CV band when path.csv has it, nothing when not", "[report][page]") {
  TempDir dir("fgm-report-page");
  dir.write("path.json", R"({"mode": "features", "points": 3, "best_point": 2, "seconds": 0.5,
    "config": {"path.features": "[2, 4, 8]"}, "warnings": []})");
  const std::string base =
      "point,B,C,selected,nonzero,train_objective,test_accuracy,test_auc,validation_accuracy,validation_auc,"
      "debiased_test_accuracy,debiased_test_auc,debiased_validation_accuracy,debiased_validation_auc,seconds,"
      "apg_iterations";
  dir.write("plain.csv", base + "\n1,10,10,2,2,900,0.8,0.85,0.81,0.86,,,,,0.1,5\n2,10,10,4,4,500,0.9,0.95,0.92,"
                                "0.96,,,,,0.2,9\n3,10,10,8,8,300,0.88,0.94,0.9,0.95,,,,,0.4,15\n");
  dir.write("cv.csv", base + ",cv_accuracy,cv_accuracy_se,cv_auc,cv_auc_se\n"
                             "1,10,10,2,2,900,0.8,0.85,0.81,0.86,,,,,0.1,5,0.79,0.02,0.84,0.01\n"
                             "2,10,10,4,4,500,0.9,0.95,0.92,0.96,,,,,0.2,9,0.91,0.01,0.95,\n"
                             "3,10,10,8,8,300,0.88,0.94,0.9,0.95,,,,,0.4,15,0.89,0.015,0.93,0.02\n");
  PathRunLog plain = read_path_log(dir.file("path.json"), dir.file("plain.csv"));
  CHECK(plain.best_point == 2);
  CHECK(std::isnan(plain.points.column("debiased_test_auc")[0]));
  const std::string without = path_section_html(plain, sample_model());
  CHECK_FALSE(has(without, "cross-validation"));
  CHECK_FALSE(has(without, "<polygon"));
  CHECK(has(without, "best on validation"));
  CHECK(has(without, "point 2 (the best on validation)"));
  CHECK_FALSE(has(without, "de-biased"));  // all-empty columns draw no curve

  PathRunLog cv = read_path_log(dir.file("path.json"), dir.file("cv.csv"));
  const std::string with = path_section_html(cv, sample_model());
  CHECK(has(with, "cross-validation mean (band: ± 1 SE)"));
  // Accuracy: a band over all 3 points; AUC: the SE is missing at point 2, so 2 points remain.
  std::regex polygon("<polygon points=\"([^\"]*)\"");
  std::vector<size_t> corners;
  for (auto it = std::sregex_iterator(with.begin(), with.end(), polygon); it != std::sregex_iterator(); ++it) {
    std::string pts = (*it)[1];
    corners.push_back(static_cast<size_t>(std::count(pts.begin(), pts.end(), ' ') + 1));
  }
  CHECK(corners == std::vector<size_t>{6, 4});

  // With a "selection" (path.folds): the chosen point's features, both points marked.
  dir.write("path.json", R"({"mode": "features", "points": 3, "best_point": 2,
    "selection": {"criterion": "cv", "rule": "one_standard_error", "chosen_point": 1, "cv": {"folds": 5}},
    "config": {}, "warnings": []})");
  PathRunLog chosen = read_path_log(dir.file("path.json"), dir.file("cv.csv"));
  CHECK(chosen.chosen_point == 1);
  CHECK(chosen.criterion == "cv");
  CHECK(featured_point(chosen) == 1);
  const std::string html = path_section_html(chosen, sample_model());
  CHECK(has(html, "point 1 (chosen by the one-SE rule on cv)"));
  CHECK(has(html, "chosen (cv, one-SE)"));
  CHECK(has(html, "best on validation"));
  CHECK(has(html, "selection.cv.folds</span> = <span class=\"v\">5"));
}

TEST_CASE("path.csv: empty cells are NaN; a bad cell or row names line and column", "[report][page]") {
  TempDir dir("fgm-report-page");
  NumericCsv ok = read_numeric_csv(dir.write("ok.csv", "a,b\r\n1,\r\n,2.5\n"));
  REQUIRE(ok.rows.size() == 2);
  CHECK(std::isnan(ok.column("b")[0]));
  CHECK(ok.column("b")[1] == 2.5);
  CHECK(ok.column("missing").empty());
  auto message = [&](const std::string& text) -> std::string {
    try {
      read_numeric_csv(dir.write("bad.csv", text));
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kCorruption);
      return e.what();
    }
    return "";
  };
  CHECK(has(message("a,b\n1,2\n3,x4\n"), "bad.csv:3:3: 'x4' in column b is not a number"));
  CHECK(has(message("a,b\n1,2,3\n"), "bad.csv:2: 3 cells where the header has 2"));
  CHECK(has(message(""), "bad.csv: no header line"));
}

TEST_CASE("missing or damaged logs: an error naming the file, and no report written", "[report][page]") {
  TempDir dir("fgm-report-page");
  write_model(dir.file("model.fgm"), sample_model());
  auto failure = [&](ErrorKind kind) -> std::string {
    try {
      write_report(dir.path.string(), detect_sections(dir.path.string()));
    } catch (const Error& e) {
      CHECK(e.kind() == kind);
      return e.what();
    }
    return "";
  };
  // model.fgm alone: the train section needs run.json.
  CHECK(has(failure(ErrorKind::kIo), (dir.path / "run.json").string() + ": cannot open"));
  CHECK_FALSE(fs::exists(dir.file("report.html")));

  std::string good = run_json("data/train.svm", "w");
  dir.write("run.json", good.substr(0, good.size() / 2));  // truncated
  std::string cut = failure(ErrorKind::kCorruption);
  CHECK(has(cut, (dir.path / "run.json").string() + ":"));
  CHECK(has(cut, "not valid JSON"));

  std::string no_iterations = good;
  no_iterations.replace(no_iterations.find("\"iterations\""), 12, "\"iteration_log\"");
  dir.write("run.json", no_iterations);
  CHECK(has(failure(ErrorKind::kCorruption), "run.json: field \"iterations\" is missing or is not an array"));

  std::string bad_type = good;
  bad_type.replace(bad_type.find("\"objective\": 380"), 16, "\"objective\": \"x\"");
  dir.write("run.json", bad_type);
  CHECK(has(failure(ErrorKind::kCorruption), "field \"objective\" is missing or is not a number"));
  CHECK_FALSE(fs::exists(dir.file("report.html")));

  // A previous report survives a failed rewrite untouched.
  dir.write("report.html", "old");
  failure(ErrorKind::kCorruption);
  CHECK(read_text_file(dir.file("report.html")) == "old");

  dir.write("run.json", good);
  const std::string path = write_report(dir.path.string(), detect_sections(dir.path.string()));
  CHECK(path == dir.file("report.html"));
  CHECK(fs::file_size(path) > 1000);
  for (const auto& entry : fs::directory_iterator(dir.path))  // no temporaries left behind
    CHECK(entry.path().filename().string().find(".tmp") == std::string::npos);

  TempDir empty("fgm-report-page");
  try {
    detect_sections(empty.path.string());
    FAIL("no error for a directory without logs");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kIo);
    CHECK(has(e.what(), "no run.json or path.json here"));
  }
}

namespace {

// A multi-class run.json in the shape cli/train_command.cpp writes for
// one-vs-rest: an empty top-level "iterations" and one binary run per class.
std::string multiclass_run_json() {
  auto cls = [](const std::string& label, double f0, double obj1, double obj2, const std::string& sip2) {
    return R"({"label": )" + label + R"(, "rows": 100, "iterations": [
      {"iter": 1, "selected": 2, "added": 2, "objective": )" + fmt::format("{}", obj1) +
           R"(, "rel_decrease": 0.5, "sip_violation": 40,
       "score_seconds": 0.01, "solve_seconds": 0.02, "apg_iterations": 5, "apg_stop": "converged"},
      {"iter": 2, "selected": 3, "added": 1, "objective": )" + fmt::format("{}", obj2) +
           R"(, "rel_decrease": 0.1, "sip_violation": )" + sip2 + R"(,
       "score_seconds": 0.03, "solve_seconds": 0.04, "apg_iterations": 6, "apg_stop": "converged"}],
     "stop_reason": "max_iterations", "final_sip_violation": -1, "objective_no_features": )" +
           fmt::format("{}", f0) + R"(, "objective": )" + fmt::format("{}", obj2) +
           R"(, "selected_features": [], "bias": 0.5, "train_seconds": 0.1, "test_auc": 0.9})";
  };
  return R"({"engine_version": "0.1.0", "data": {"train": "t.svm", "rows": 300},
  "config": {"fgm.B": "2"}, "multiclass": "ovr", "iterations": [],
  "classes": [)" + cls("1", 200, 100, 50, "0.004") + ",\n" + cls("2", 400, 300, 100, "-2") + ",\n" +
         cls("7", 1000, 250, 125, "null") + R"(],
  "test": {"path": "test.svm", "rows": 90, "accuracy": 0.8125, "auc": 0.9375},
  "warnings": []
}
)";
}

Model three_class_model() {
  Model m;
  m.index_base = 1;
  m.feature_kind = "linear";
  const double labels[] = {1, 2, 7};
  for (int c = 0; c < 3; ++c) {
    ClassModel cm;
    cm.label = labels[c];
    cm.bias = 0.25 * c;
    for (int j = 0; j <= c + 1; ++j)  // 2, 3, 4 features: every table differs
      cm.features.push_back(feature(FeatureKind::kLinear, uint64_t(10 * c + j), 0, (c + 1) * (j % 2 ? -0.5 : 1.25), j + 1));
    m.classes.push_back(cm);
  }
  return m;
}

// The part of `html` from `from` up to the next `to` (or the end).
std::string between(const std::string& html, const std::string& from, const std::string& to) {
  size_t a = html.find(from);
  if (a == std::string::npos) return "";
  size_t b = html.find(to, a + from.size());
  return html.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

}  // namespace

TEST_CASE("multi-class train section: one feature table per class, equal to the model's class", "[report][page]") {
  TempDir dir("fgm-report-page");
  dir.write("run.json", multiclass_run_json());
  const TrainRunLog log = read_train_log(dir.file("run.json"));
  REQUIRE(log.multiclass());
  REQUIRE(log.classes.size() == 3);
  CHECK(log.iterations.empty());
  CHECK(log.classes[2].label == 7);
  CHECK(std::isnan(log.classes[2].iterations[1].sip_violation));
  CHECK(log.test_accuracy == 0.8125);
  CHECK(log.test_auc == 0.9375);

  const Model m = three_class_model();
  const std::string html = train_section_html(log, m);
  CHECK(has(html, "one-vs-rest over 3 classes"));
  CHECK(has(html, "Test accuracy <b>0.8125</b> \xc2\xb7 macro AUC <b>0.9375</b>"));
  CHECK(has(html, "9 features over 3 classes"));  // 2 + 3 + 4
  for (size_t c = 0; c < 3; ++c) {
    CAPTURE(c);
    const std::string part = between(html, fmt::format("id=\"class-{}\"", c), "</details>");
    REQUIRE_FALSE(part.empty());
    const std::vector<Row> rows = table_rows(part);
    const auto& features = m.classes[c].features;
    REQUIRE(rows.size() == features.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      CHECK(rows[i].label == std::to_string(features[i].key.ids[0] + 1));
      CHECK(std::stod(rows[i].weight) == features[i].weight);
      CHECK(rows[i].iteration == std::to_string(features[i].batch));
    }
  }
  // Objectives relative to each class's F_0, computed by hand: 100/200, 100/400, 125/1000.
  CHECK(has(html, "<title>class 1: 0.25 at 2</title>"));
  CHECK(has(html, "<title>class 2: 0.25 at 2</title>"));
  CHECK(has(html, "<title>class 7: 0.125 at 2</title>"));
  CHECK(has(html, "<title>class 7: 1 at 0</title>"));
  // SIP: 0.004 .. 40 spans four decades, log scale; -2 is counted, not drawn.
  CHECK(has(html, "1 value \xe2\x89\xa4 0 (no violated constraint) not drawn"));
  CHECK_FALSE(has(html, "<title>class 2: -2 at 2</title>"));
  // Time per outer iteration over all classes: 3 × 0.03 scoring at iteration 2.
  CHECK(has(html, "<title>2 scoring passes: 0.09</title>"));
  // Each class's own objective chart starts at its F_0.
  CHECK(has(html, "<title>objective: 1000 at 0</title>"));

  Model two = m;
  two.classes.pop_back();
  try {
    train_section_html(log, two);
    FAIL("no error for a model with fewer classes than run.json");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kCorruption);
    CHECK(has(e.what(), "classes"));
  }

  std::string damaged = multiclass_run_json();
  damaged.replace(damaged.find("\"stop_reason\""), 13, "\"stopped_by\"");
  dir.write("run.json", damaged);
  try {
    read_train_log(dir.file("run.json"));
    FAIL("no error for a class without stop_reason");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kCorruption);
    CHECK(has(e.what(), "run.json: field \"stop_reason\" is missing or is not a string"));
  }
}

TEST_CASE("path section: objective, SIP violation and time per outer iteration of each run", "[report][page]") {
  TempDir dir("fgm-report-page");
  // path.json "runs" as cli/path_command.cpp writes them: one per B value, columns per field.
  const std::string runs = R"({"mode": "B", "points": 2, "best_point": -1, "config": {}, "warnings": [],
    "runs": [
      {"B": 2, "C": 10, "stop_reason": "max_iterations", "iterations": {
        "iter": [1, 2], "selected": [2, 4], "added": [2, 2], "objective": [160, 72.5],
        "rel_decrease": [0.9, 0.05], "sip_violation": [2.5e6, 4e3], "score_seconds": [0.25, 0.125],
        "solve_seconds": [0.5, 0.0625], "apg_iterations": [24, 23], "apg_stop": ["converged", "converged"],
        "candidates_scored": [60, 60], "bytes_streamed": [100, 100]}},
      {"B": 3, "C": 10, "stop_reason": "eps_outer", "iterations": {
        "iter": [1, 2, 3], "selected": [3, 6, 9], "added": [3, 3, 3], "objective": [70, 54, 46.5],
        "rel_decrease": [0.95, 0.01, 0.004], "sip_violation": [3e6, null, -7], "score_seconds": [0.5, 0.5, 0.5],
        "solve_seconds": [1, 1, 1], "apg_iterations": [29, 5, 5], "apg_stop": ["converged", "stalled", "converged"],
        "candidates_scored": [60, 60, 60], "bytes_streamed": [100, 100, 100]}}]})";
  dir.write("path.json", runs);
  dir.write("path.csv", "point,B,C,selected\n1,2,10,4\n2,3,10,9\n");
  const PathRunLog log = read_path_log(dir.file("path.json"), dir.file("path.csv"));
  REQUIRE(log.runs.size() == 2);
  CHECK(log.runs[1].iterations.size() == 3);
  CHECK(std::isnan(log.runs[1].iterations[1].sip_violation));
  CHECK(log.runs[1].iterations[1].apg_stop == "stalled");
  const std::string html = path_section_html(log, sample_model());
  CHECK(has(html, "Objective per outer iteration"));
  CHECK(has(html, "<title>B=2: 72.5 at 2</title>"));
  CHECK(has(html, "<title>B=3: 46.5 at 3</title>"));
  CHECK(has(html, "<title>B=3: 3000000 at 1</title>"));  // SIP, log scale (4e3 .. 3e6)
  CHECK(has(html, "1 value \xe2\x89\xa4 0 (no violated constraint) not drawn"));
  CHECK(has(html, "<title>B=2 : 2 APG solve: 0.0625</title>"));  // run : iteration, then the stack
  CHECK(has(html, "<title>B=3 : 3 scoring pass: 0.5</title>"));

  // A path.json without "runs" (written before they were logged): no such charts.
  dir.write("old.json", R"({"mode": "features", "points": 2, "best_point": -1, "config": {}, "warnings": []})");
  CHECK_FALSE(has(path_section_html(read_path_log(dir.file("old.json"), dir.file("path.csv")), sample_model()),
                  "per outer iteration"));

  // Columns of different lengths are damage, named.
  std::string damaged = runs;
  damaged.replace(damaged.find("\"objective\": [70, 54, 46.5]"), 27, "\"objective\": [70, 54]");
  dir.write("path.json", damaged);
  try {
    read_path_log(dir.file("path.json"), dir.file("path.csv"));
    FAIL("no error for a short column");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kCorruption);
    CHECK(has(e.what(), "runs[].iterations.objective"));
  }
}

TEST_CASE("multi-class train section without test data says so", "[report][page]") {
  TempDir dir("fgm-report-page");
  std::string text = multiclass_run_json();
  const size_t at = text.find("  \"test\":");
  text.erase(at, text.find('\n', at) - at + 1);
  dir.write("run.json", text);
  const TrainRunLog log = read_train_log(dir.file("run.json"));
  CHECK(std::isnan(log.test_accuracy));
  const std::string html = train_section_html(log, three_class_model());
  CHECK(has(html, "No test data (data.test) \xc2\xb7 9 features over 3 classes"));
  CHECK_FALSE(has(html, "Test accuracy"));
}

TEST_CASE("path without point models (pnorm_kta, RBF): the report says so instead of a feature table",
          "[report][page][kta]") {
  TempDir dir("fgm-report-page");
  dir.write("path.json", R"({"solver": "pnorm_kta", "mode": "p", "points": 2, "point_models": false,
    "best_point": -1, "config": {}, "warnings": []})");
  dir.write("path.csv", "point,p,selected,test_accuracy,seconds\n1,2,9,0.7,0.5\n2,1,4,0.75,0.9\n");
  const PathRunLog log = read_path_log(dir.file("path.json"), dir.file("path.csv"));
  CHECK_FALSE(log.point_models);
  const std::string html = path_section_html(log, nullptr);
  CHECK(has(html, "has no model file"));
  CHECK_FALSE(has(html, "Selected features of"));
  // The whole page builds without a point-<n>.fgm on disk.
  CHECK(has(build_report_html(dir.path.string(), {.train = false, .path = true}), "has no model file"));
  // "point_models" must be a boolean.
  dir.write("path.json", R"({"mode": "p", "points": 2, "point_models": 1, "best_point": -1, "config": {}, "warnings": []})");
  CHECK_THROWS_WITH(read_path_log(dir.file("path.json"), dir.file("path.csv")), Catch::Contains("point_models"));
}
