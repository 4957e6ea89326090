// features.transform against an explicit transform of the data: the test
// computes every stage in plain C++ from the text (its own statistics, its own
// row norms), writes the transformed copy as LIBSVM text, and checks that
// training on the raw store through TransformedStore gives the model training
// on the copy gives (same features, same weights), and that predict on raw
// rows (ModelScorer with the recorded transforms) equals predict of the
// explicitly transformed test rows.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "engine/evaluate.h"
#include "engine/fgm_trainer.h"
#include "features/transformed_store.h"
#include "io/model_file.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

using Row = std::map<uint64_t, double>;

struct Data {
  std::vector<int> labels;
  std::vector<Row> rows;
};

// Kinds of values: real (Gaussian), integer counts, binary, tied (few distinct values).
enum class Values { kReal, kCounts, kBinary, kTied };

Data make_data(uint64_t rows, uint64_t features, Values kind, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unif(0, 1);
  std::normal_distribution<double> normal(0, 1);
  std::geometric_distribution<int> counts(0.3);
  Data d;
  for (uint64_t i = 0; i < rows; ++i) {
    Row r;
    double margin = 0;
    for (uint64_t j = 0; j < features; ++j) {
      // Popularity falls with j, so document frequencies differ.
      if (unif(rng) > 0.5 / (1.0 + 0.1 * static_cast<double>(j))) continue;
      double v = 0;
      switch (kind) {
        case Values::kReal: v = static_cast<float>(normal(rng) * (1 + j % 5)); break;
        case Values::kCounts: v = 1 + counts(rng) * (1 + j % 3); break;
        case Values::kBinary: v = 1; break;
        case Values::kTied: v = (unif(rng) < 0.5 ? 2 : -0.5); break;
      }
      if (v == 0) continue;
      r[j] = v;
      if (j % 4 == 1) margin += (j % 8 == 1 ? 1 : -1) * std::log1p(std::fabs(v));
    }
    margin += 0.3 * normal(rng);
    d.labels.push_back(margin > 0.1 ? 1 : -1);
    d.rows.push_back(r);
  }
  return d;
}

std::string to_text(const Data& d) {
  std::string out;
  char buf[64];
  for (size_t i = 0; i < d.rows.size(); ++i) {
    out += d.labels[i] > 0 ? "+1" : "-1";
    for (const auto& [j, v] : d.rows[i]) {
      std::snprintf(buf, sizeof buf, " %llu:%.17g", static_cast<unsigned long long>(j + 1), v);
      out += buf;
    }
    out += '\n';
  }
  return out;
}

// Statistics of the training data per stage, as the documentation defines them.
struct ExplicitStats {
  std::vector<std::map<uint64_t, double>> factor;  // per stage, per-feature stages only
};

double feature_factor(const std::string& stage, const std::vector<Row>& rows, uint64_t j, double n) {
  double max_abs = 0, sum_sq = 0, df = 0;
  for (const auto& r : rows) {
    auto it = r.find(j);
    if (it == r.end()) continue;
    max_abs = std::max(max_abs, std::fabs(it->second));
    sum_sq += it->second * it->second;
    df += it->second != 0;
  }
  if (stage == "maxabs") return max_abs > 0 ? 1 / max_abs : 1;
  if (stage == "scale") return sum_sq > 0 ? 1 / std::sqrt(sum_sq / n) : 1;
  return std::log((1 + n) / (1 + df)) + 1;  // tfidf
}

// Applies `stages` to train (statistics from train) and to test (the same
// statistics; row norms of the test rows themselves).
void explicit_transform(const std::vector<std::string>& stages, Data& train, Data& test, uint64_t width) {
  const double n = static_cast<double>(train.rows.size());
  for (const auto& stage : stages) {
    if (stage == "log1p" || stage == "binary") {
      for (Data* d : {&train, &test})
        for (auto& r : d->rows)
          for (auto& [j, v] : r) v = stage == "binary" ? 1.0 : (v < 0 ? -1 : 1) * std::log1p(std::fabs(v));
    } else if (stage == "row_l2" || stage == "row_l1") {
      for (Data* d : {&train, &test})
        for (auto& r : d->rows) {
          double norm = 0;
          for (auto& [j, v] : r) norm += stage == "row_l2" ? v * v : std::fabs(v);
          if (stage == "row_l2") norm = std::sqrt(norm);
          if (norm > 0)
            for (auto& [j, v] : r) v /= norm;
        }
    } else {
      std::vector<double> factor(width);
      for (uint64_t j = 0; j < width; ++j) factor[j] = feature_factor(stage, train.rows, j, n);
      for (Data* d : {&train, &test})
        for (auto& r : d->rows)
          for (auto& [j, v] : r) v *= j < width ? factor[j] : 1.0;
    }
  }
}

// The stored (float) values the engine starts from.
void round_to_float(Data& d) {
  for (auto& r : d.rows)
    for (auto& [j, v] : r) v = static_cast<float>(v);
}

std::unique_ptr<ShardStore> ingest(const test::TempDir& dir, const std::string& name, const std::string& text,
                                   uint64_t width, MemoryBudget& budget) {
  IngestOptions o;
  o.shard_target_bytes = 8 << 10;  // several shards
  o.reader.declared_features = width;
  ingest_libsvm(dir.write(name + ".svm", text), dir.file(name), o, budget);
  return ShardStore::open(dir.file(name), budget);
}

TrainSettings settings_for(const std::string& space) {
  TrainSettings s;
  s.B = 3;
  s.max_iterations = 3;
  s.eps_outer = 0;
  s.apg.C = 1;
  s.apg.eps_inner = 1e-8;
  s.apg.max_iterations = 5000;
  s.block_bytes = 4 << 10;
  s.space.kind = space;
  s.space.levels = 8;
  return s;
}

void require_same_model(const Model& a, const Model& b) {
  REQUIRE(a.features.size() == b.features.size());
  double scale = 1e-12;
  for (const auto& f : b.features) scale = std::max(scale, std::fabs(f.weight));
  for (size_t k = 0; k < a.features.size(); ++k) {
    CAPTURE(k, a.features[k].weight, b.features[k].weight);
    REQUIRE(a.features[k].key == b.features[k].key);
    REQUIRE(std::fabs(a.features[k].weight - b.features[k].weight) <= 1e-4 * scale);
  }
  REQUIRE(std::fabs(a.bias - b.bias) <= 1e-4 * std::max(1.0, std::fabs(b.bias)));
}

struct Case {
  std::vector<std::string> stages;
  std::string space;
  Values values;
};

void check_against_explicit(const Case& c) {
  CAPTURE(c.space, static_cast<int>(c.values));
  std::string stages;
  for (const auto& s : c.stages) stages += s + " ";
  CAPTURE(stages);
  test::TempDir dir("fgm-transform");
  const uint64_t width = 40;
  Data train = make_data(300, width, c.values, 11), test = make_data(120, width, c.values, 12);
  MemoryBudget budget(256ull << 20);
  auto raw = ingest(dir, "raw", to_text(train), width, budget);
  round_to_float(train);
  round_to_float(test);
  const std::string raw_test = dir.write("raw_test.svm", to_text(test));
  Data xtrain = train, xtest = test;
  explicit_transform(c.stages, xtrain, xtest, width);
  auto copy = ingest(dir, "explicit", to_text(xtrain), width, budget);
  const std::string explicit_test = dir.write("explicit_test.svm", to_text(xtest));

  TransformedStore transformed(std::move(raw), parse_transforms(c.stages), budget, 4 << 10);
  TrainSettings s = settings_for(c.space);
  TrainOutcome on_raw = train_fgm(transformed, s, budget);
  TrainOutcome on_copy = train_fgm(*copy, s, budget);
  REQUIRE(!on_raw.model.features.empty());
  require_same_model(on_raw.model, on_copy.model);
  REQUIRE(on_raw.model.transforms.size() == c.stages.size());
  REQUIRE(on_copy.model.transforms.empty());

  // Predict: raw rows through the recorded transforms (after a write/read
  // round trip of the model) against the explicit pipeline's rows.
  write_model(dir.file("m.fgm"), on_raw.model);
  Model read = read_model(dir.file("m.fgm"));
  REQUIRE(read.transforms == on_raw.model.transforms);
  EvalResult a = evaluate_file(raw_test, read, true, budget);
  EvalResult b = evaluate_file(explicit_test, on_copy.model, true, budget);
  REQUIRE(a.scores.size() == b.scores.size());
  double scale = 1e-9;
  for (double v : b.scores) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < a.scores.size(); ++i) {
    CAPTURE(i);
    REQUIRE(std::fabs(a.scores[i] - b.scores[i]) <= 1e-4 * scale);
  }
}

}  // namespace

TEST_CASE("each transform: training on raw data equals training on the explicitly transformed copy",
          "[features][transform]") {
  const std::vector<std::string> single = {"log1p", "binary", "maxabs", "scale", "tfidf", "row_l2", "row_l1"};
  for (const auto& t : single) check_against_explicit({{t}, "linear", Values::kReal});
  check_against_explicit({{"tfidf"}, "linear", Values::kCounts});
  check_against_explicit({{"scale"}, "linear", Values::kBinary});
  check_against_explicit({{"maxabs"}, "linear", Values::kTied});
}

TEST_CASE("chained transforms: per-feature statistics feed a row norm over all features",
          "[features][transform]") {
  check_against_explicit({{"log1p", "row_l2"}, "linear", Values::kCounts});
  check_against_explicit({{"tfidf", "row_l2"}, "linear", Values::kCounts});
  check_against_explicit({{"maxabs", "row_l1", "scale"}, "linear", Values::kReal});
  check_against_explicit({{"binary", "tfidf", "row_l2"}, "linear", Values::kTied});
}

TEST_CASE("transforms feed generated features: poly2 and hik inputs", "[features][transform]") {
  check_against_explicit({{"log1p", "row_l2"}, "poly2", Values::kCounts});
  check_against_explicit({{"scale"}, "poly2", Values::kReal});
  check_against_explicit({{"tfidf", "row_l1"}, "hik", Values::kCounts});
  check_against_explicit({{"log1p", "maxabs"}, "hik", Values::kReal});
}

TEST_CASE("transformed blocks carry the transformed column min and max", "[features][transform]") {
  test::TempDir dir("fgm-transform-minmax");
  Data d = make_data(200, 30, Values::kReal, 5);
  MemoryBudget budget(64ull << 20);
  auto raw = ingest(dir, "raw", to_text(d), 30, budget);
  TransformedStore t(std::move(raw), parse_transforms({"maxabs", "row_l2"}), budget, 2 << 10);
  BlockBuffer buffer;
  for (const BlockRef& ref : t.plan_blocks(2 << 10)) {
    ColumnBlock tiled = t.read_block(ref, buffer);
    CscScratch scratch;
    const CscColumns c = csc_columns(tiled, scratch);
    for (uint64_t k = 0; k < c.column_count; ++k) {
      const uint64_t j = c.column_ids[k];
      std::vector<uint32_t> rows;
      std::vector<float> values;
      t.read_column(j, rows, values);
      REQUIRE(values.size() == c.col_ptr[k + 1] - c.col_ptr[k]);
      float lo = values.size() < 200 ? 0.0f : values[0], hi = lo;
      for (size_t e = 0; e < values.size(); ++e) {
        REQUIRE(values[e] == c.values[c.col_ptr[k] + e]);
        lo = std::min(lo, values[e]);
        hi = std::max(hi, values[e]);
      }
      REQUIRE(c.col_min[k] == lo);
      REQUIRE(c.col_max[k] == hi);
      REQUIRE(t.column_min(j) == lo);
      REQUIRE(t.column_max(j) == hi);
      REQUIRE(hi <= 1.0f);
      REQUIRE(lo >= -1.0f);
    }
  }
}

TEST_CASE("transform statistics cache: reused, and a corrupt or stale file is recomputed",
          "[features][transform]") {
  test::TempDir dir("fgm-transform-cache");
  Data d = make_data(150, 25, Values::kCounts, 8);
  MemoryBudget budget(64ull << 20);
  auto raw = ingest(dir, "raw", to_text(d), 25, budget);
  const std::string store_dir = raw->dir();
  const std::vector<TransformKind> stages = parse_transforms({"log1p", "tfidf", "row_l2"});
  auto open = [&]() { return ShardStore::open(store_dir, budget); };
  auto scores_of = [&](const TransformedStore& t) {
    std::vector<float> all;
    std::vector<uint32_t> rows;
    std::vector<float> values;
    for (uint64_t j = 0; j < 25; ++j) {
      t.read_column(j, rows, values);
      all.insert(all.end(), values.begin(), values.end());
    }
    return all;
  };
  TransformedStore first(std::move(raw), stages, budget, 1 << 10);
  REQUIRE(first.stats_report().stages_computed == 2);
  REQUIRE(first.stats_report().stages_from_cache == 0);
  const std::vector<float> expected = scores_of(first);
  {
    TransformedStore again(open(), stages, budget, 1 << 10);
    REQUIRE(again.stats_report().stages_from_cache == 2);
    REQUIRE(scores_of(again) == expected);
  }
  SECTION("a flipped byte in the factors") {
    const std::string file = first.cache_file(1);
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-20, std::ios::end);
    char byte = 0;
    f.read(&byte, 1);
    f.seekp(-20, std::ios::end);
    byte = static_cast<char>(byte ^ 0x10);
    f.write(&byte, 1);
  }
  SECTION("a truncated file") {
    std::filesystem::resize_file(first.cache_file(2), std::filesystem::file_size(first.cache_file(2)) - 3);
  }
  SECTION("another prefix's file under this name (stale)") {
    std::filesystem::copy_file(first.cache_file(2), first.cache_file(1),
                               std::filesystem::copy_options::overwrite_existing);
  }
  TransformedStore recovered(open(), stages, budget, 1 << 10);
  REQUIRE(recovered.stats_report().stages_computed == 1);
  REQUIRE(recovered.stats_report().stages_from_cache == 1);
  REQUIRE(scores_of(recovered) == expected);
  // The recomputed file was rewritten: the next open trusts both again.
  TransformedStore healed(open(), stages, budget, 1 << 10);
  REQUIRE(healed.stats_report().stages_from_cache == 2);
}

TEST_CASE("features.transform: unknown names are refused naming the key and the element",
          "[features][transform][config]") {
  Config ok = Config::load("", {"features.transform=[\"log1p\", \"row_l2\"]"});
  REQUIRE(ok.get_string_list("features.transform") == std::vector<std::string>{"log1p", "row_l2"});
  REQUIRE(ok.dump().at("features.transform") == "[\"log1p\", \"row_l2\"]");
  REQUIRE(Config().get_string_list("features.transform").empty());
  try {
    Config::load("", {"features.transform=[\"log1p\", \"sqrt\"]"});
    FAIL("accepted an unknown transform");
  } catch (const Error& e) {
    std::string m = e.what();
    CAPTURE(m);
    REQUIRE(e.kind() == ErrorKind::kConfig);
    REQUIRE(m.find("features.transform") != std::string::npos);
    REQUIRE(m.find("element 2") != std::string::npos);
    REQUIRE(m.find("'sqrt'") != std::string::npos);
    REQUIRE(m.find("row_l2") != std::string::npos);  // the allowed names
  }
  test::TempDir dir("fgm-transform-config");
  std::string path = dir.write("c.toml", "[features]\nkind = \"poly2\"\ntransform = [\"log1p\", 3]\n");
  try {
    Config::load(path, {});
    FAIL("accepted a number in features.transform");
  } catch (const Error& e) {
    std::string m = e.what();
    CAPTURE(m);
    REQUIRE(m.find("features.transform") != std::string::npos);
    REQUIRE(m.find("c.toml:3") != std::string::npos);
  }
  REQUIRE_THROWS_AS(Config::load("", {"features.transform=\"log1p\""}), Error);
}

TEST_CASE("a model with malformed transform statistics is refused", "[features][transform]") {
  Model m;
  m.features.push_back({FeatureKey{}, 1.0, 1});
  ModelTransform t;
  t.name = "maxabs";
  t.ids = {3, 1};  // not increasing
  t.factors = {0.5, 0.25};
  m.transforms.push_back(t);
  REQUIRE_THROWS_AS(decode_model(encode_model(m), "m"), Error);
  m.transforms[0].ids = {1, 3};
  REQUIRE(decode_model(encode_model(m), "m").transforms == m.transforms);
  m.transforms[0].name = "cube";
  Model bad = decode_model(encode_model(m), "m");
  REQUIRE_THROWS_AS(RowTransformer(bad.transforms, "m"), Error);
}
