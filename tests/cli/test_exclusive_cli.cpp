// solver = "exclusive" from the command line: fgm train writes a linear model
// that fgm predict / fgm inspect / fgm report read, fgm path writes one model
// per λ, the same model for 1 and 2 threads, and every misused key is an error
// that names it and leaves no output.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "io/model_file.h"
#include "tests/cli/cli_test_util.h"
#include "tests/test_util.h"

using namespace fgm::test;

namespace {

void make_data(const TempDir& dir) {
  REQUIRE(run(dir, "synth --out data --rows 300 --test-rows 100 --features 60 --relevant 5 --seed 9").code == 0);
}

const std::string kBase =
    "data.train=data/train.svm data.test=data/test.svm engine.cache_dir=cache solver=exclusive "
    "exclusive.random_groups=4 exclusive.lambda=2 ";

// The "selected_features" array of a run.json.
std::string selected_features(const std::string& run_json) {
  const auto begin = run_json.find("\"selected_features\"");
  const auto end = run_json.find(']', begin);
  return run_json.substr(begin, end - begin);
}

// The progress line of point k of n (cli/exclusive_command.cpp).
std::string fmt_point(size_t k, size_t n) { return "point " + std::to_string(k) + "/" + std::to_string(n) + ": "; }

}  // namespace

TEST_CASE("fgm train solver=exclusive writes a model predict, inspect and report read", "[exclusive][cli]") {
  TempDir dir("fgm-exclusive-cli");
  make_data(dir);
  auto r = run(dir, "train " + kBase + "output.dir=out1 engine.threads=1");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "accuracy="));
  const std::string run_json = slurp(dir.file("out1/run.json"));
  CHECK(contains(run_json, "\"solver\": \"exclusive\""));
  CHECK(contains(run_json, "\"exclusive\": {"));
  CHECK(contains(run_json, "\"algorithm\": \"pcp\""));
  CHECK(contains(run_json, "\"source\": \"random\""));
  CHECK(std::filesystem::exists(dir.file("out1/report.html")));
  auto p = run(dir, "predict --model out1/model.fgm data/test.svm");
  REQUIRE(p.code == 0);
  CHECK(contains(p.out, "accuracy="));
  auto i = run(dir, "inspect out1/model.fgm");
  REQUIRE(i.code == 0);
  CHECK(contains(i.out, "\"solver\": \"exclusive\""));
  CHECK(run(dir, "report out1").code == 0);
  // Two threads: the same model.
  REQUIRE(run(dir, "train " + kBase + "output.dir=out2 engine.threads=2").code == 0);
  CHECK(selected_features(slurp(dir.file("out2/run.json"))) == selected_features(run_json));
  // E-SVM (licp; its loss defaults to the squared hinge, the paper's hinge
  // by exclusive.loss) and locp on random (disjoint) groups.
  REQUIRE(run(dir, "train " + kBase + "output.dir=out3 exclusive.algorithm=licp exclusive.ridge=0.5").code == 0);
  CHECK(contains(slurp(dir.file("out3/run.json")), "\"duality_gap\""));
  CHECK(fgm::read_model(dir.file("out3/model.fgm")).loss == "squared_hinge");
  REQUIRE(run(dir, "train " + kBase + "output.dir=out3h exclusive.algorithm=licp exclusive.loss=hinge").code == 0);
  CHECK(fgm::read_model(dir.file("out3h/model.fgm")).loss == "hinge");
  REQUIRE(run(dir, "train " + kBase + "output.dir=out4 exclusive.algorithm=locp exclusive.loss=squared").code == 0);
  // Groups from a file (overlapping): pcp runs, locp refuses.
  dir.write("groups.txt", "1 2 3 4\n4 5 6\n10 11 12 13 14\n");
  const std::string file_groups = "data.train=data/train.svm engine.cache_dir=cache solver=exclusive "
                                  "features.groups=groups.txt features.group_structure=overlapping ";
  REQUIRE(run(dir, "train " + file_groups + "output.dir=out5").code == 0);
  CHECK(contains(slurp(dir.file("out5/run.json")), "\"source\": \"file\""));
  auto locp = run(dir, "train " + file_groups + "output.dir=out6 exclusive.algorithm=locp");
  CHECK(locp.code == 2);
  CHECK(contains(locp.err, "exclusive.algorithm"));
  CHECK_FALSE(std::filesystem::exists(dir.file("out6/model.fgm")));
}

TEST_CASE("fgm path solver=exclusive writes one model per exclusive.path_lambda, and a report", "[exclusive][cli]") {
  TempDir dir("fgm-exclusive-path");
  make_data(dir);
  const std::string path = "path data.train=data/train.svm data.test=data/test.svm engine.cache_dir=cache "
                           "solver=exclusive exclusive.expected_relevant=20 'exclusive.path_lambda=[50.0, 5.0, 0.5]' "
                           "exclusive.tolerance=1e-8 exclusive.kkt_tolerance=1e-7 ";
  auto r = run(dir, path + "output.dir=p");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string csv = slurp(dir.file("p/path.csv"));
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 4);
  CHECK(contains(csv, "point,lambda,selected,train_objective"));
  const std::string json = slurp(dir.file("p/path.json"));
  CHECK(contains(json, "\"solver\": \"exclusive\""));
  CHECK(contains(json, "\"warm_started\": true"));  // points 1 and 2 start from the previous λ
  for (int k = 0; k < 3; ++k) {
    auto p = run(dir, "predict --model p/point-" + std::to_string(k) + ".fgm data/test.svm");
    CHECK(p.code == 0);
  }
  // The report: written by the path, and again by fgm report; it shows the points table.
  const std::string html = slurp(dir.file("p/report.html"));
  CHECK(contains(html, "<section id=\"path\">"));
  CHECK(contains(html, "fista_iterations"));
  CHECK(contains(html, "Selected features of point"));
  std::filesystem::remove(dir.file("p/report.html"));
  REQUIRE(run(dir, "report p").code == 0);
  CHECK(std::filesystem::exists(dir.file("p/report.html")));
  // Cold starts (exclusive.path_warm_start=false): the same models within the tolerance.
  REQUIRE(run(dir, path + "output.dir=cold exclusive.path_warm_start=false").code == 0);
  CHECK(contains(slurp(dir.file("cold/path.json")), "\"warm_started\": false"));
  CHECK_FALSE(contains(slurp(dir.file("cold/path.json")), "\"warm_started\": true"));
  for (int k = 0; k < 3; ++k) {
    auto warm = run(dir, "predict --model p/point-" + std::to_string(k) + ".fgm data/test.svm");
    auto cold = run(dir, "predict --model cold/point-" + std::to_string(k) + ".fgm data/test.svm");
    CHECK(warm.out == cold.out);
  }
  // output.report=false: no report.
  REQUIRE(run(dir, path + "output.dir=quiet output.report=false").code == 0);
  CHECK_FALSE(std::filesystem::exists(dir.file("quiet/report.html")));
}

TEST_CASE("misused exclusive keys are errors naming the key; nothing is written", "[exclusive][cli]") {
  TempDir dir("fgm-exclusive-bad");
  make_data(dir);
  const std::string data = "data.train=data/train.svm engine.cache_dir=cache output.dir=out ";
  struct Bad {
    std::string command, args, key;
  };
  const Bad cases[] = {
      {"train", "exclusive.lambda=1", "exclusive.lambda"},  // another solver's key (solver = fgm)
      {"train", "solver=exclusive exclusive.random_groups=3 fgm.B=4", "fgm.B"},
      {"train", "solver=exclusive exclusive.random_groups=3 exclusive.ridge=2", "exclusive.ridge"},
      {"train", "solver=exclusive", "features.groups"},  // no groups at all
      {"train", "solver=exclusive exclusive.random_groups=3 exclusive.expected_relevant=9", "exclusive.expected_relevant"},
      {"train", "solver=exclusive exclusive.random_groups=3 exclusive.loss=hinge", "exclusive.loss"},
      {"train", "solver=exclusive exclusive.random_groups=3 exclusive.algorithm=licp exclusive.loss=squared",
       "exclusive.loss"},
      {"train", "solver=exclusive exclusive.random_groups=3 exclusive.lambda=-1", "exclusive.lambda"},
      {"train", "solver=exclusive exclusive.random_groups=3 exclusive.algorithm=fast", "exclusive.algorithm"},
      {"train", "solver=exclusive exclusive.random_groups=3 'exclusive.path_lambda=[1.0]'", "exclusive.path_lambda"},
      {"train", "solver=exclusive exclusive.random_groups=3 exclusive.working_set=false exclusive.kkt_tolerance=0.1",
       "exclusive.kkt_tolerance"},
      {"path", "solver=exclusive exclusive.random_groups=3", "exclusive.path_lambda"},
      {"train", "solver=exclusive exclusive.random_groups=3 exclusive.path_warm_start=false",
       "exclusive.path_warm_start"},
      {"path", "solver=exclusive exclusive.random_groups=3 'exclusive.path_lambda=[1.0]' exclusive.lambda=2",
       "exclusive.lambda"},
      {"train", "solver=exclusive exclusive.random_groups=3 exclusive.loss=squared_hinge", "exclusive.loss"},  // pcp
      {"train", "solver=exclusive 'exclusive.path_random_groups=[2, 3]'", "exclusive.path_random_groups"},
      {"path", "solver=exclusive 'exclusive.path_lambda=[1.0]' 'exclusive.path_random_groups=[2, 3]' "
               "exclusive.random_groups=3", "exclusive.random_groups"},
      {"path", "solver=exclusive 'exclusive.path_lambda=[1.0]' 'exclusive.path_random_groups=[2, 3]' "
               "exclusive.expected_relevant=9", "exclusive.expected_relevant"},
      {"path", "solver=exclusive 'exclusive.path_lambda=[1.0]' 'exclusive.path_random_groups=[0, 3]'",
       "exclusive.path_random_groups"},
  };
  for (const Bad& b : cases) {
    auto r = run(dir, b.command + " " + data + b.args);
    INFO(b.command << " " << b.args << "\n" << r.err);
    CHECK(r.code == 2);
    CHECK(contains(r.err, b.key));
    // No output: not even the output directory, which the failed run made
    // (cli/resume.h removes it again when the run fails before writing).
    CHECK(!std::filesystem::exists(dir.file("out")));
  }
}

// A multi-class store: one-vs-rest, each class's model exactly the binary run's
// on the data relabelled by hand (+1 for the class, -1 for the rest).
TEST_CASE("fgm train solver=exclusive on three classes equals three binary runs", "[exclusive][cli][multiclass]") {
  TempDir dir("fgm-exclusive-multi");
  std::string all, binary[3];
  uint64_t state = 12345;
  auto next = [&] { return state = state * 6364136223846793005ULL + 1442695040888963407ULL, state >> 33; };
  for (int i = 0; i < 240; ++i) {
    const int label = i % 3 + 1;  // class c is told by features 3c+1 .. 3c+3 (integers), plus noise features
    std::string row;
    int feature = 0;
    for (int f = 1; f <= 30; ++f) {
      const bool own = f > 3 * label && f <= 3 * label + 3;
      if (own ? next() % 4 != 0 : next() % 5 != 0) continue;
      row += " " + std::to_string(f) + ":" + std::to_string(1 + next() % 3);
      ++feature;
    }
    all += std::to_string(label) + row + "\n";
    for (int c = 0; c < 3; ++c) binary[c] += std::string(label == c + 1 ? "+1" : "-1") + row + "\n";
  }
  dir.write("multi.svm", all);
  const std::string keys = " engine.cache_dir=cache solver=exclusive exclusive.random_groups=5 data.features=30 ";
  auto r = run(dir, "train data.train=multi.svm data.test=multi.svm output.dir=multi exclusive.lambda=0.5" + keys);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "classes=3"));
  const std::string multi = slurp(dir.file("multi/run.json"));
  CHECK(contains(multi, "\"multiclass\": \"ovr\""));
  CHECK(std::filesystem::exists(dir.file("multi/report.html")));
  CHECK(run(dir, "predict --model multi/model.fgm multi.svm").code == 0);
  // fgm path fits binary stores only: a clear error, no output.
  auto path = run(dir, "path data.train=multi.svm output.dir=multipath 'exclusive.path_lambda=[1.0]'" + keys);
  CHECK(path.code == 2);
  CHECK(contains(path.err, "3 classes"));
  CHECK_FALSE(std::filesystem::exists(dir.file("multipath")));
  size_t at = 0;
  for (int c = 0; c < 3; ++c) {
    dir.write("bin" + std::to_string(c) + ".svm", binary[c]);
    REQUIRE(run(dir, "train data.train=bin" + std::to_string(c) + ".svm exclusive.lambda=0.5 output.dir=bin" +
                         std::to_string(c) + keys)
                .code == 0);
    const std::string single = selected_features(slurp(dir.file("bin" + std::to_string(c) + "/run.json")));
    at = multi.find("\"selected_features\"", at + 1);
    REQUIRE(at != std::string::npos);
    const std::string of_class = multi.substr(at, multi.find(']', at) - at);
    auto squeeze = [](std::string t) {  // the class's array is indented deeper
      t.erase(std::remove_if(t.begin(), t.end(), [](char ch) { return ch == ' ' || ch == '\n'; }), t.end());
      return t;
    };
    CHECK(squeeze(of_class) == squeeze(single));
    CHECK(contains(of_class, "\"weight\""));  // a class with features
  }
}

namespace {

// The number after "key": in a JSON text, from `from` on.
double json_number(const std::string& text, const std::string& key, size_t from = 0) {
  const auto at = text.find("\"" + key + "\":", from);
  REQUIRE(at != std::string::npos);
  return std::stod(text.substr(at + key.size() + 3));
}

}  // namespace

// exclusive.bias: the model carries b and fgm predict adds it. The decision
// values predict writes equal Σ w_k x_k − bias recomputed here from run.json's
// weights and bias on a hand-written test file; the classes are unbalanced
// (b matters), for licp (E-SVM) and pcp (logistic).
TEST_CASE("fgm train with exclusive.bias writes the bias and fgm predict uses it", "[exclusive][cli][bias]") {
  TempDir dir("fgm-exclusive-bias");
  std::ostringstream train, test;
  std::vector<std::map<int, double>> test_rows;
  for (int i = 0; i < 80; ++i) {
    std::map<int, double> row;
    for (int k = 1; k <= 6; ++k) row[k] = std::round(10 * std::sin(1.7 * i + 2.3 * k)) / 4;  // integer quarters
    const double score = row[1] - 0.5 * row[2] + 0.8;
    std::ostringstream line;
    line << (score > 0 ? 1 : -1);
    for (const auto& [k, v] : row) line << ' ' << k << ':' << v;
    (i < 60 ? train : test) << line.str() << '\n';
    if (i >= 60) test_rows.push_back(row);
  }
  dir.write("train.svm", train.str());
  dir.write("test.svm", test.str());
  const std::string base = "data.train=train.svm engine.cache_dir=cache solver=exclusive exclusive.random_groups=2 ";
  // The first: E-SVM with the hinge; the third: E-SVM with its default, the
  // squared hinge (licp_coordinate.h), its bias by best_squared_hinge_bias.
  for (const std::string algorithm : {"licp exclusive.loss=hinge", "pcp", "licp"}) {
    INFO(algorithm);
    const std::string out = algorithm == "licp" ? "sq" : algorithm == "pcp" ? "pcp" : "licp";
    auto r = run(dir, "train " + base + "exclusive.algorithm=" + algorithm + " exclusive.bias=true output.dir=o-" + out);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const std::string run_json = slurp(dir.file("o-" + out + "/run.json"));
    if (out == "sq") CHECK(contains(run_json, "squared_hinge"));
    const double bias = json_number(run_json, "bias", run_json.find("\"selected_features\""));
    CHECK(bias != 0.0);
    std::map<int, double> weights;
    const std::string features = selected_features(run_json);
    for (size_t at = features.find("\"id\":"); at != std::string::npos; at = features.find("\"id\":", at + 1))
      weights[int(json_number(features, "id", at))] = json_number(features, "weight", at);
    REQUIRE(!weights.empty());
    auto p = run(dir, "predict --model o-" + out + "/model.fgm --out decisions.txt test.svm");
    REQUIRE(p.code == 0);
    std::istringstream decisions(slurp(dir.file("decisions.txt")));
    for (const auto& row : test_rows) {
      double expected = -bias, got = 0;
      for (const auto& [k, w] : weights) expected += w * row.at(k);
      REQUIRE(decisions >> got);
      CHECK(got == Approx(expected).margin(1e-9));
    }
    auto i = run(dir, "inspect o-" + out + "/model.fgm");
    CHECK(contains(i.out, "\"has_bias\": true"));
  }
}

// fgm path with data.validation: every point's validation accuracy in
// path.csv equals the accuracy recomputed here from point-<k>.fgm's weights
// (fgm inspect) on the validation rows, and the chosen point is the one-SE
// rule recomputed here: the fewest selected features whose accuracy is at
// least the best minus √(best(1 − best)/rows) (ties: the larger λ). A
// validation file with a syntax error stops the path before any output.
TEST_CASE("fgm path solver=exclusive chooses a λ on data.validation by the one-SE rule", "[exclusive][cli][validation]") {
  TempDir dir("fgm-exclusive-validation");
  REQUIRE(run(dir, "synth --out data --rows 200 --test-rows 160 --features 40 --relevant 6 --seed 4").code == 0);
  std::istringstream test_text(slurp(dir.file("data/test.svm")));
  std::string line, validation, test;
  for (int i = 0; std::getline(test_text, line); ++i) (i < 100 ? validation : test) += line + '\n';
  dir.write("val.svm", validation);
  dir.write("test.svm", test);
  const std::vector<double> lambdas = {300.0, 30.0, 3.0, 0.3, 0.03};
  const std::string plain = "path data.train=data/train.svm data.test=test.svm engine.cache_dir=cache "
                            "solver=exclusive exclusive.algorithm=licp exclusive.random_groups=3 "
                            "'exclusive.path_lambda=[300.0, 30.0, 3.0, 0.3, 0.03]' output.report=false ";
  const std::string path = plain + "data.validation=val.svm ";
  auto r = run(dir, path + "output.dir=p");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto cells = csv_cells(slurp(dir.file("p/path.csv")));
  REQUIRE(cells.size() == lambdas.size() + 1);
  const size_t acc_col = csv_column(cells[0], "validation_accuracy"), sel_col = csv_column(cells[0], "selected");
  REQUIRE(acc_col < cells[0].size());
  const InMemoryData rows = parse_libsvm_simple(dir.file("val.svm"));
  std::vector<double> accuracy;
  std::vector<size_t> selected;
  for (size_t k = 0; k < lambdas.size(); ++k) {
    auto i = run(dir, "inspect p/point-" + std::to_string(k) + ".fgm");
    REQUIRE(i.code == 0);
    std::map<uint64_t, double> w;  // 0-based feature -> weight
    const auto features = i.out.find("\"features\"");
    for (size_t at = i.out.find("\"id\":", features); at != std::string::npos; at = i.out.find("\"id\":", at + 1))
      w[uint64_t(json_number(i.out, "id", at)) - 1] = json_number(i.out, "weight", at);
    size_t correct = 0;
    for (size_t row = 0; row < rows.labels.size(); ++row) {
      double score = 0;
      for (const auto& [feature, value] : rows.rows[row])
        if (w.count(feature)) score += w[feature] * value;
      correct += (score > 0 ? 1.0 : -1.0) == rows.labels[row];
    }
    accuracy.push_back(double(correct) / double(rows.labels.size()));
    selected.push_back(w.size());
    CHECK(std::stoull(cells[k + 1][sel_col]) == w.size());
    CHECK(std::stod(cells[k + 1][acc_col]) == Approx(accuracy.back()).margin(1e-6));
  }
  const double best = *std::max_element(accuracy.begin(), accuracy.end());
  const double threshold = best - std::sqrt(best * (1 - best) / double(rows.labels.size()));
  int64_t chosen = -1;
  for (size_t k = 0; k < lambdas.size(); ++k)  // larger λ first, so a tie in selected keeps the larger λ
    if (accuracy[k] >= threshold && (chosen < 0 || selected[k] < selected[size_t(chosen)])) chosen = int64_t(k);
  const std::string json = slurp(dir.file("p/path.json"));
  CHECK(json_number(json, "chosen_point", json.find("\"selection\"")) == double(chosen));
  CHECK(contains(json, "\"criterion\": \"validation\""));
  CHECK(contains(r.out, "chosen_point=" + std::to_string(chosen) + " "));
  // The models do not depend on data.validation: the same points without it.
  REQUIRE(run(dir, plain + "output.dir=plain").code == 0);
  for (size_t k = 0; k < lambdas.size(); ++k) {
    const std::string with = run(dir, "inspect p/point-" + std::to_string(k) + ".fgm").out;
    const std::string without = run(dir, "inspect plain/point-" + std::to_string(k) + ".fgm").out;
    auto features = [](const std::string& s) {  // the weights, not the config (output.dir differs)
      const auto begin = s.find("\"features\"");
      return s.substr(begin, s.find("\"config\"") - begin);
    };
    CHECK(features(with) == features(without));
  }
  // A bad validation file: an error naming file and line, nothing written.
  dir.write("bad.svm", validation + "+1 3:x\n");
  auto bad = run(dir, path + "output.dir=bad data.validation=bad.svm");
  CHECK(bad.code != 0);
  CHECK(contains(bad.err, "bad.svm:101"));
  CHECK_FALSE(std::filesystem::exists(dir.file("bad/path.csv")));
}

namespace {

// A model's weights (0-based feature -> weight) and its bias, read back with fgm inspect.
std::pair<std::map<uint64_t, double>, double> inspected_weights(const TempDir& dir, const std::string& model) {
  auto i = run(dir, "inspect " + model);
  REQUIRE(i.code == 0);
  std::map<uint64_t, double> w;
  const auto features = i.out.find("\"features\"");
  for (size_t at = i.out.find("\"id\":", features); at != std::string::npos; at = i.out.find("\"id\":", at + 1))
    w[uint64_t(json_number(i.out, "id", at)) - 1] = json_number(i.out, "weight", at);
  return {w, json_number(i.out, "bias")};
}

}  // namespace

// exclusive.debias: each λ's nonzero weights refit by ½‖w‖² + (C/2)Σ ξ_i²,
// ξ_i = max(0, 1 − y_i(w'x_i − bias)). Checked here on the training rows in
// long double against that problem's optimality conditions, w = C Σ ξ_i y_i x_i
// on the support and Σ ξ_i y_i = 0 (the bias), not against the solver; the
// refit keeps the support, is the same for 1 and 2 threads, and the key is
// refused where it would be ignored.
TEST_CASE("fgm path solver=exclusive with exclusive.debias refits each support to its optimum", "[exclusive][cli][debias]") {
  TempDir dir("fgm-exclusive-debias");
  REQUIRE(run(dir, "synth --out data --rows 200 --test-rows 100 --features 40 --relevant 6 --seed 4").code == 0);
  const double C = 0.5;
  const std::string path = "path data.train=data/train.svm data.test=data/test.svm data.validation=data/test.svm "
                           "engine.cache_dir=cache solver=exclusive exclusive.algorithm=licp exclusive.random_groups=3 "
                           "exclusive.bias=true 'exclusive.path_lambda=[30.0, 3.0, 0.3]' exclusive.debias=true "
                           "exclusive.debias_C=0.5 exclusive.tolerance=1e-10 output.report=false ";
  auto r = run(dir, path + "output.dir=p engine.threads=1");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "chosen_debiased_point="));
  const auto cells = csv_cells(slurp(dir.file("p/path.csv")));
  REQUIRE(cells.size() == 4);
  const size_t refit_col = csv_column(cells[0], "debiased_test_accuracy");
  REQUIRE(refit_col < cells[0].size());
  const InMemoryData train = parse_libsvm_simple(dir.file("data/train.svm"));
  for (int k = 0; k < 3; ++k) {
    INFO("point " << k);
    CHECK_FALSE(cells[size_t(k) + 1][refit_col].empty());
    const auto [fit, fit_bias] = inspected_weights(dir, "p/point-" + std::to_string(k) + ".fgm");
    const auto [w, bias] = inspected_weights(dir, "p/point-" + std::to_string(k) + "-debiased.fgm");
    REQUIRE(!w.empty());
    for (const auto& [feature, weight] : w) CHECK(fit.count(feature) == 1);  // no feature added
    CHECK(w.size() == fit.size());
    std::map<uint64_t, long double> gradient;  // C Σ ξ_i y_i x_i on the support
    long double bias_condition = 0, scale = 0;
    for (size_t i = 0; i < train.labels.size(); ++i) {
      long double decision = -bias;
      for (const auto& [feature, value] : train.rows[i])
        if (w.count(feature)) decision += (long double)w.at(feature) * value;
      const long double y = train.labels[i] > 0 ? 1 : -1, xi = std::max<long double>(0, 1 - y * decision);
      bias_condition += xi * y;
      scale += xi;
      for (const auto& [feature, value] : train.rows[i])
        if (w.count(feature)) gradient[feature] += C * xi * y * value;
    }
    long double largest = 0;
    for (const auto& [feature, weight] : w) largest = std::max(largest, std::fabs((long double)weight));
    for (const auto& [feature, weight] : w) CHECK(double(std::fabs(weight - gradient[feature])) < 1e-4 * double(largest));
    CHECK(double(std::fabs(bias_condition)) < 1e-4 * double(scale));
  }
  REQUIRE(run(dir, path + "output.dir=p2 engine.threads=2").code == 0);
  for (int k = 0; k < 3; ++k) {
    const std::string name = "/point-" + std::to_string(k) + "-debiased.fgm";
    CHECK(inspected_weights(dir, "p" + name) == inspected_weights(dir, "p2" + name));
  }
  // Where the keys would be ignored: errors naming them, nothing written.
  const std::string train_keys = "data.train=data/train.svm engine.cache_dir=cache solver=exclusive "
                                 "exclusive.algorithm=licp exclusive.random_groups=3 ";
  auto on_train = run(dir, "train " + train_keys + "exclusive.debias=true output.dir=t1");
  CHECK(on_train.code == 2);
  CHECK(contains(on_train.err, "exclusive.debias"));
  CHECK_FALSE(std::filesystem::exists(dir.file("t1/model.fgm")));
  auto no_refit = run(dir, "path " + train_keys + "'exclusive.path_lambda=[1.0]' exclusive.debias_C=2 output.dir=t2");
  CHECK(no_refit.code == 2);
  CHECK(contains(no_refit.err, "exclusive.debias_C"));
  CHECK_FALSE(std::filesystem::exists(dir.file("t2/path.csv")));
}

// exclusive.path_random_groups: the λ path once per group count m. Each m's
// block of points must be, model for model, the separate path run with
// exclusive.random_groups = m (an independent run of the one-m command), the
// choice on data.validation the one-SE rule over all (m, λ) points recomputed
// here from those runs' validation accuracies, and every point announced on
// stderr as it finishes, in order.
TEST_CASE("fgm path solver=exclusive chooses the group count m with λ on data.validation",
          "[exclusive][cli][validation][groups_grid]") {
  TempDir dir("fgm-exclusive-groups-grid");
  REQUIRE(run(dir, "synth --out data --rows 200 --test-rows 160 --features 40 --relevant 6 --seed 4").code == 0);
  std::istringstream test_text(slurp(dir.file("data/test.svm")));
  std::string line, validation, test;
  for (int i = 0; std::getline(test_text, line); ++i) (i < 100 ? validation : test) += line + '\n';
  dir.write("val.svm", validation);
  dir.write("test.svm", test);
  const std::vector<uint64_t> counts = {1, 3, 8};
  const size_t lambdas = 4;
  const std::string common = "path data.train=data/train.svm data.test=test.svm data.validation=val.svm "
                             "engine.cache_dir=cache solver=exclusive exclusive.algorithm=licp exclusive.bias=true "
                             "'exclusive.path_lambda=[30.0, 3.0, 0.3, 0.03]' output.report=false ";
  auto r = run(dir, common + "'exclusive.path_random_groups=[1, 3, 8]' output.dir=grid");
  INFO(r.err);
  REQUIRE(r.code == 0);
  size_t at = 0;
  for (size_t k = 0; k < counts.size() * lambdas; ++k) {  // progress, one line per point, in order
    at = r.err.find(fmt_point(k + 1, counts.size() * lambdas), at);
    REQUIRE(at != std::string::npos);
  }
  const auto cells = csv_cells(slurp(dir.file("grid/path.csv")));
  REQUIRE(cells.size() == counts.size() * lambdas + 1);
  const size_t acc_col = csv_column(cells[0], "validation_accuracy"), sel_col = csv_column(cells[0], "selected");
  const size_t groups_col = csv_column(cells[0], "groups");
  REQUIRE(groups_col < cells[0].size());
  std::vector<double> accuracy;
  std::vector<size_t> selected;
  for (size_t q = 0; q < counts.size(); ++q) {
    const std::string one = "one" + std::to_string(counts[q]);
    REQUIRE(run(dir, common + "exclusive.random_groups=" + std::to_string(counts[q]) + " output.dir=" + one).code == 0);
    const auto single = csv_cells(slurp(dir.file(one + "/path.csv")));
    for (size_t l = 0; l < lambdas; ++l) {
      const size_t k = q * lambdas + l;
      CHECK(cells[k + 1][groups_col] == std::to_string(counts[q]));
      CHECK(cells[k + 1][sel_col] == single[l + 1][sel_col]);
      CHECK(cells[k + 1][acc_col] == single[l + 1][acc_col]);
      const auto grid_model = inspected_weights(dir, "grid/point-" + std::to_string(k) + ".fgm");
      const auto one_model = inspected_weights(dir, one + "/point-" + std::to_string(l) + ".fgm");
      CHECK(grid_model.first == one_model.first);
      CHECK(grid_model.second == one_model.second);
      accuracy.push_back(std::stod(single[l + 1][acc_col]));
      selected.push_back(std::stoull(single[l + 1][sel_col]));
    }
  }
  const double best = *std::max_element(accuracy.begin(), accuracy.end());
  const double threshold = best - std::sqrt(best * (1 - best) / 100.0) - 1e-9;
  int64_t chosen = -1;  // the fewest nonzeros within one SE; ties: larger λ, then the earlier m
  for (size_t k = 0; k < accuracy.size(); ++k) {
    if (accuracy[k] < threshold) continue;
    const bool better = chosen < 0 || selected[k] < selected[size_t(chosen)] ||
                        (selected[k] == selected[size_t(chosen)] && k % lambdas < size_t(chosen) % lambdas);
    if (better) chosen = int64_t(k);
  }
  const std::string json = slurp(dir.file("grid/path.json"));
  CHECK(json_number(json, "chosen_point", json.find("\"selection\"")) == double(chosen));
  CHECK(json_number(json, "chosen_groups", json.find("\"selection\"")) == double(counts[size_t(chosen) / lambdas]));
  CHECK(contains(r.out, "chosen_groups=" + std::to_string(counts[size_t(chosen) / lambdas])));
}

// a9a (32,561 rows, a quarter positive, one-hot columns present in most
// rows): the coordinate licp with the bias starts from the balanced dual at
// zero, whose w(u) is far off. Its multiplier of yᵀu = 0 once started at that
// point's bias (−8,365) and moved ~5 an epoch: after 300 epochs per round no
// certificate and a model with P = 2.7·10⁷. Now it starts at the better of
// that bias and the empty model's, with ρ at 100 coordinates' curvature:
// the squared hinge (the default loss) certifies within 300 epochs a round.
TEST_CASE("licp with a bias certifies on a9a within 300 epochs a round", "[exclusive][cli][bias][a9a]") {
  const std::string a9a = std::string(FGM_SHARED_DATA_DIR) + "/a9a/a9a";
  if (!std::filesystem::exists(a9a)) {
    WARN("a9a not present: " << a9a);
    return;
  }
  TempDir dir("fgm-exclusive-a9a-bias");
  auto r = run(dir, "train data.train=" + a9a +
                        " engine.cache_dir=cache solver=exclusive exclusive.algorithm=licp "
                        "exclusive.random_groups=8 exclusive.bias=true exclusive.max_iterations=300 "
                        "engine.threads=2 output.dir=out");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK_FALSE(contains(r.err, "before its stopping rule held"));
  const std::string run_json = slurp(dir.file("out/run.json"));
  CHECK(contains(run_json, "\"loss\": \"squared_hinge\""));
  CHECK(contains(run_json, "\"converged\": true"));
  CHECK_FALSE(contains(run_json, "\"converged\": false"));
}
