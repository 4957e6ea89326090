// fgm train with solver = "pnorm_kta" and kta.kernel = "rbf": the kernel-SVM
// model file, scored by fgm predict, against a LIBSVM twin built here from the
// data (explicit n × n kernel of the model's features, kernel weights and
// bandwidths; the bandwidths and weights themselves checked by brute force).
#include <catch2/catch.hpp>

#include <svm.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <random>
#include <sstream>

#include "io/model_file.h"
#include "tests/cli/cli_test_util.h"

using namespace fgm::test;

namespace {

enum class Values { kBinary, kInteger, kTied };

// Dense rows with ±1 labels that depend on features 0 and 1 non-linearly
// (label +1 when both are "middle" or both "extreme"; binary: the majority of
// features 0-2), plus noise features.
struct DenseData {
  std::vector<std::vector<float>> x;
  std::vector<int> y;
  std::string libsvm() const {
    std::ostringstream out;
    for (size_t r = 0; r < x.size(); ++r) {
      out << (y[r] > 0 ? "+1" : "-1");
      for (size_t j = 0; j < x[r].size(); ++j)
        if (x[r][j] != 0) out << ' ' << j + 1 << ':' << x[r][j];
      out << '\n';
    }
    return out.str();
  }
};

float draw(Values kind, std::mt19937_64& rng) {
  switch (kind) {
    case Values::kBinary: return static_cast<float>(rng() % 2);
    case Values::kInteger: return static_cast<float>(rng() % 5);
    case Values::kTied: {  // few distinct values, many ties, a negative one
      static const float levels[] = {0.0f, 0.5f, 0.5f, 1.5f, -2.25f, 0.5f};
      return levels[rng() % 6];
    }
  }
  return 0;
}

DenseData make_data(Values kind, size_t rows, size_t features, uint64_t seed) {
  std::mt19937_64 rng(seed);
  DenseData d;
  for (size_t r = 0; r < rows; ++r) {
    std::vector<float> row(features);
    for (auto& v : row) v = draw(kind, rng);
    double centre = kind == Values::kBinary ? 0.5 : kind == Values::kInteger ? 2.0 : 0.5;
    const bool middle0 = std::fabs(row[0] - centre) < 1.0, middle1 = std::fabs(row[1] - centre) < 1.0;
    int label = middle0 == middle1 ? 1 : -1;
    if (kind == Values::kBinary) label = row[0] + row[1] + row[2] >= 2 ? 1 : -1;  // majority of three
    if (rng() % 10 == 0) label = -label;  // label noise
    d.x.push_back(row);
    d.y.push_back(label);
  }
  return d;
}

std::vector<double> read_scores(const std::string& text) {
  std::vector<double> s;
  std::istringstream in(text);
  double v;
  while (in >> v) s.push_back(v);
  return s;
}

// Σ_j d_j exp(−(x_j − z_j)² / (2 h_j²)) over the model's features, in id order.
double kernel(const fgm::KernelSvm& k, const std::vector<float>& x, const std::vector<float>& z) {
  double s = 0;
  for (size_t j = 0; j < k.feature_ids.size(); ++j) {
    const double d = static_cast<double>(x[k.feature_ids[j]]) - static_cast<double>(z[k.feature_ids[j]]);
    s += k.kernel_weights[j] * std::exp(-d * d / (2.0 * k.bandwidths[j] * k.bandwidths[j]));
  }
  return s;
}

// LIBSVM's C-SVC on the explicit training kernel; decision values of the test
// rows turned towards +1 (LIBSVM's favour label[0]).
std::vector<double> libsvm_twin(const fgm::Model& model, const DenseData& train, const DenseData& test) {
  const fgm::KernelSvm& k = model.kernel_svm;
  const size_t n = train.x.size();
  std::vector<std::vector<svm_node>> rows(n, std::vector<svm_node>(n + 2));
  std::vector<svm_node*> ptrs;
  std::vector<double> labels;
  for (size_t r = 0; r < n; ++r) {
    rows[r][0] = {0, static_cast<double>(r + 1)};
    for (size_t c = 0; c < n; ++c) rows[r][c + 1] = {static_cast<int>(c + 1), kernel(k, train.x[r], train.x[c])};
    rows[r][n + 1] = {-1, 0};
    ptrs.push_back(rows[r].data());
    labels.push_back(train.y[r]);
  }
  svm_problem problem{static_cast<int>(n), labels.data(), ptrs.data()};
  svm_parameter param{};
  param.svm_type = C_SVC;
  param.kernel_type = PRECOMPUTED;
  param.cache_size = 64;
  param.eps = 1e-3;
  param.C = model.C;
  param.shrinking = 1;
  svm_set_print_string_function([](const char*) {});
  svm_model* svm = svm_train(&problem, &param);
  int label[2];
  svm_get_labels(svm, label);
  std::vector<double> out;
  std::vector<svm_node> row(n + 2);
  for (const auto& t : test.x) {
    row[0] = {0, 0};
    for (size_t c = 0; c < n; ++c) row[c + 1] = {static_cast<int>(c + 1), kernel(k, t, train.x[c])};
    row[n + 1] = {-1, 0};
    double dec = 0;
    svm_predict_values(svm, row.data(), &dec);
    out.push_back(label[0] > 0 ? dec : -dec);
  }
  svm_free_and_destroy_model(&svm);
  return out;
}

// The lower median of |x_r − x_s| over pairs r < s with different values.
double median_heuristic(const DenseData& d, size_t j) {
  std::vector<double> gaps;
  for (size_t r = 0; r < d.x.size(); ++r)
    for (size_t s = r + 1; s < d.x.size(); ++s)
      if (d.x[r][j] != d.x[s][j]) gaps.push_back(std::fabs(double(d.x[r][j]) - double(d.x[s][j])));
  std::sort(gaps.begin(), gaps.end());
  return gaps[(gaps.size() + 1) / 2 - 1];
}

// tr(H K_j H) = n − 1ᵀK_j 1 / n of the feature's unweighted RBF kernel.
double centred_trace(const DenseData& d, size_t j, double h) {
  const double n = static_cast<double>(d.x.size());
  double sum = 0;
  for (const auto& a : d.x)
    for (const auto& b : d.x) {
      const double g = double(a[j]) - double(b[j]);
      sum += std::exp(-g * g / (2 * h * h));
    }
  return n - sum / n;
}

const char* kTrainArgs =
    "train solver=pnorm_kta kta.kernel=rbf kta.lambda1=0.01 kta.lambda2=0.1 kta.p_step=0.1 kta.p=1.5 kta.C=4 "
    "data.train=train.svm data.test=test.svm engine.cache_dir=cache engine.progress=off output.dir=out";

}  // namespace

TEST_CASE("fgm train, kernel KTA: predict's decision values equal a LIBSVM twin on binary, integer and tied data",
          "[kta][cli]") {
  for (Values kind : {Values::kBinary, Values::kInteger, Values::kTied}) {
    CAPTURE(static_cast<int>(kind));
    TempDir dir("fgm-kta-kernel");
    const size_t features = 8;
    const DenseData train = make_data(kind, 60, features, 11 + static_cast<int>(kind));
    const DenseData test = make_data(kind, 40, features, 21 + static_cast<int>(kind));
    dir.write("train.svm", train.libsvm());
    dir.write("test.svm", test.libsvm());
    const RunResult r = run(dir, kTrainArgs);
    INFO(r.err);
    REQUIRE(r.code == 0);
    REQUIRE(contains(r.out, "support_vectors="));
    const fgm::Model model = fgm::read_model(dir.file("out/model.fgm"));
    REQUIRE(model.has_kernel_svm());
    REQUIRE(model.solver == "pnorm_kta");
    REQUIRE(model.features.empty());
    const fgm::KernelSvm& k = model.kernel_svm;
    const size_t m = k.feature_ids.size();
    REQUIRE(m > 0);
    REQUIRE(m < features);  // the support vectors are restricted to a proper subset
    REQUIRE(k.training_rows == train.x.size());
    REQUIRE(k.n_support() > 0);

    // Bandwidths are the median heuristic; the weights make the centred
    // combined kernel's trace n: Σ_j d_j tr(H K_j H) = n.
    double weighted_trace = 0;
    for (size_t j = 0; j < m; ++j) {
      const double h = median_heuristic(train, k.feature_ids[j]);
      REQUIRE(k.bandwidths[j] == h);
      weighted_trace += k.kernel_weights[j] * centred_trace(train, k.feature_ids[j], h);
    }
    REQUIRE(weighted_trace == Approx(double(train.x.size())).epsilon(1e-9));

    // Each support vector is a training row restricted to the selected features,
    // with |coef| ≤ C and Σ coef = 0 (LIBSVM's equality constraint).
    double coef_sum = 0;
    for (size_t s = 0; s < k.n_support(); ++s) {
      bool found = false;
      for (const auto& row : train.x) {
        bool same = true;
        for (size_t j = 0; j < m; ++j) same = same && row[k.feature_ids[j]] == k.support_vectors[s * m + j];
        found = found || same;
      }
      REQUIRE(found);
      REQUIRE(std::fabs(k.dual_coefs[s]) <= model.C * (1 + 1e-12));
      coef_sum += k.dual_coefs[s];
    }
    REQUIRE(std::fabs(coef_sum) < 1e-9 * model.C * double(k.n_support()));

    const RunResult p = run(dir, "predict --model out/model.fgm test.svm --out scores.txt");
    INFO(p.err);
    REQUIRE(p.code == 0);
    const std::vector<double> scores = read_scores(slurp(dir.file("scores.txt")));
    REQUIRE(scores.size() == test.x.size());
    const std::vector<double> twin = libsvm_twin(model, train, test);
    for (size_t t = 0; t < scores.size(); ++t) {
      CAPTURE(t);
      REQUIRE(scores[t] == Approx(twin[t]).epsilon(1e-7).margin(1e-7));
      // The explicit kernel sum over the model's own support vectors, here.
      double explicit_sum = -model.bias;
      for (size_t s = 0; s < k.n_support(); ++s) {
        std::vector<float> sv(features, 0.0f);
        for (size_t j = 0; j < m; ++j) sv[k.feature_ids[j]] = k.support_vectors[s * m + j];
        explicit_sum += k.dual_coefs[s] * kernel(k, test.x[t], sv);
      }
      REQUIRE(scores[t] == Approx(explicit_sum).epsilon(1e-7).margin(1e-7));
    }
    // train's printed accuracy (the same scorer) equals predict's.
    const size_t at = r.out.find("accuracy=");
    REQUIRE(at != std::string::npos);
    REQUIRE(contains(p.out, r.out.substr(at, r.out.find(' ', at) - at)));

    const RunResult inspect = run(dir, "inspect out/model.fgm");
    REQUIRE(inspect.code == 0);
    REQUIRE(contains(inspect.out, "\"kernel_svm\""));
    REQUIRE(contains(inspect.out, "\"bandwidth\""));
    REQUIRE(contains(inspect.out, "\"support_vectors\": " + std::to_string(k.n_support())));
    REQUIRE(contains(slurp(dir.file("out/run.json")), "\"kernel_svm\""));
    REQUIRE(run(dir, "report out").code == 0);
    REQUIRE(contains(slurp(dir.file("out/report.html")), "Kernel SVM of model.fgm"));
  }
}

TEST_CASE("kernel KTA: the path's test accuracy at p equals train at kta.p = p scored by predict", "[kta][cli]") {
  TempDir dir("fgm-kta-kernel");
  dir.write("train.svm", make_data(Values::kInteger, 80, 10, 5).libsvm());
  dir.write("test.svm", make_data(Values::kInteger, 50, 10, 6).libsvm());
  const std::string common = "solver=pnorm_kta kta.kernel=rbf kta.lambda1=0.01 kta.lambda2=0.05 kta.p_step=0.25 "
                             "data.train=train.svm data.test=test.svm engine.cache_dir=cache engine.progress=off";
  const RunResult path = run(dir, "path " + common + " output.dir=path");
  INFO(path.err);
  REQUIRE(path.code == 0);
  // path.csv row of p = 1.5 (the third point): its test accuracy column.
  std::istringstream csv(slurp(dir.file("path/path.csv")));
  std::string line;
  for (int i = 0; i < 4; ++i) std::getline(csv, line);
  REQUIRE(line.rfind("3,1.5,", 0) == 0);
  std::vector<std::string> cells;
  std::istringstream ls(line);
  for (std::string c; std::getline(ls, c, ',');) cells.push_back(c);
  const RunResult train = run(dir, "train " + common + " kta.p=1.5 output.dir=train");
  INFO(train.err);
  REQUIRE(train.code == 0);
  const RunResult p = run(dir, "predict --model train/model.fgm test.svm");
  REQUIRE(p.code == 0);
  REQUIRE(std::stod(p.out.substr(p.out.find("accuracy=") + 9)) == Approx(std::stod(cells[4])).margin(1e-6));
}

TEST_CASE("kernel KTA: predict holds the support vectors within --memory-budget", "[kta][cli]") {
  TempDir dir("fgm-kta-kernel");
  dir.write("train.svm", make_data(Values::kTied, 300, 40, 7).libsvm());
  dir.write("test.svm", make_data(Values::kTied, 20, 40, 8).libsvm());
  const RunResult r = run(dir,
                          "train solver=pnorm_kta kta.kernel=rbf kta.lambda2=0.001 kta.p=2 kta.C=100 "
                          "data.train=train.svm engine.cache_dir=cache engine.progress=off output.dir=out");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const fgm::Model model = fgm::read_model(dir.file("out/model.fgm"));
  const uint64_t bytes = model.kernel_svm.bytes();
  REQUIRE(bytes > 20000);
  const RunResult small = run(dir, "predict --model out/model.fgm test.svm --memory-budget " +
                                       std::to_string(bytes / 2) + "B");
  REQUIRE(small.code == 6);
  REQUIRE(contains(small.err, "--memory-budget"));
  const RunResult enough = run(dir, "predict --model out/model.fgm test.svm --memory-budget " +
                                        std::to_string(4 * bytes + (1 << 16)) + "B");
  INFO(enough.err);
  REQUIRE(enough.code == 0);
}
