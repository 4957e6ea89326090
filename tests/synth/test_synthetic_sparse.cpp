// The sparse synthetic generator (synth/synthetic_sparse.h): the direct store is
// the store ingest makes from the text, the text is LIBSVM whose labels follow
// the planted model in truth.txt, popularity is Zipf-like, output depends on
// the seed only, memory stays within the budget.
#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/memory_budget.h"
#include "io/libsvm_reader.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "synth/synthetic_data.h"
#include "synth/synthetic_sparse.h"
#include "tests/test_util.h"

using namespace fgm;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kMiB = 1024 * 1024;

SparseSynthOptions small_options() {
  SparseSynthOptions o;
  o.rows = 3000;
  o.test_rows = 600;
  o.features = 20000;
  o.planted_linear = 8;
  o.planted_cross = 6;
  o.seed = 7;
  o.threads = 2;
  return o;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every regular file of a directory, by name.
std::map<std::string, std::string> files_of(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) out[e.path().filename().string()] = slurp(e.path().string());
  return out;
}

// Margin of the planted model, recomputed from a parsed row and truth.txt.
double planted_margin(const std::map<uint64_t, double>& row, const PlantedTruth& t) {
  double m = t.bias;
  auto value = [&](uint64_t id) {
    auto it = row.find(id);
    return it == row.end() ? 0.0 : it->second;
  };
  for (size_t i = 0; i < t.ids.size(); ++i) m += t.weights[i] * value(t.ids[i]);
  for (size_t i = 0; i < t.cross_ids.size(); ++i)
    m += t.cross_weights[i] * value(t.cross_ids[i].first) * value(t.cross_ids[i].second);
  return m;
}

int run_fgm(const std::string& args) {
  std::string cmd = std::string(FGM_BINARY_PATH) + " " + args + " >/dev/null 2>&1";
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace

TEST_CASE("sparse synth: the direct store equals ingesting the text", "[io][synth]") {
  auto values = GENERATE(SynthValues::kBinary, SynthValues::kReal);
  CAPTURE(values == SynthValues::kBinary ? "binary" : "real");
  test::TempDir dir("fgm-synth");
  MemoryBudget budget(256 * kMiB);
  SparseSynthOptions o = small_options();
  o.values = values;
  o.shard_target_bytes = 64 * 1024;  // many shards
  o.tile_rows = 97;                  // many tiles
  o.block_bytes = 8 * 1024;          // several stored blocks per shard
  SparseSynthResult text = write_sparse_synthetic(dir.file("text"), o, budget);
  o.store = true;
  o.column_buffer_bytes = 96 * 1024;  // several groups of shards, one pass each
  SparseSynthResult direct = write_sparse_synthetic(dir.file("direct"), o, budget);
  CHECK(direct.generation_passes > 2);
  CHECK(direct.shards > 4);
  CHECK(fs::exists(dir.file("direct/store/manifest.fgm")));
  CHECK(!fs::exists(dir.file("direct/train.svm")));
  CHECK(slurp(text.test_path) == slurp(direct.test_path));
  CHECK(slurp(text.truth_path) == slurp(direct.truth_path));
  CHECK(text.train_nnz == direct.train_nnz);
  CHECK(text.train_positive == direct.train_positive);
  CHECK(text.term_rows == direct.term_rows);

  IngestOptions io;
  io.reader.declared_features = o.features;  // the highest ids may not occur
  io.shard_target_bytes = o.shard_target_bytes;
  io.tile_rows = o.tile_rows;
  io.block_bytes = o.block_bytes;
  io.threads = 2;
  IngestStats s = ingest_libsvm(text.train_path, dir.file("ingested"), io, budget);
  CHECK(s.shards == direct.shards);

  auto a = ShardStore::open(direct.train_path, budget);
  auto b = ShardStore::open(dir.file("ingested"), budget);
  const StoreInfo &ia = a->info(), &ib = b->info();
  REQUIRE(ia.n_rows == o.rows);
  REQUIRE(ia.n_rows == ib.n_rows);
  REQUIRE(ia.n_features == o.features);
  REQUIRE(ia.n_features == ib.n_features);
  REQUIRE(ia.nnz == ib.nnz);
  CHECK(ia.nnz == direct.train_nnz);
  CHECK(ia.n_positive == ib.n_positive);
  CHECK(ia.n_negative == ib.n_negative);
  CHECK(ia.positive_value == ib.positive_value);
  CHECK(ia.negative_value == ib.negative_value);
  CHECK(ia.index_base == ib.index_base);
  CHECK(ia.declared_features == ib.declared_features);
  CHECK(ia.shard_bytes == ib.shard_bytes);
  CHECK(ia.tile_rows == 97);
  CHECK(ia.block_count == ib.block_count);
  CHECK(ia.block_count > 2 * direct.shards);
  CHECK(ia.nonempty_columns == ib.nonempty_columns);
  CHECK(std::equal(a->labels(), a->labels() + ia.n_rows, b->labels()));

  std::vector<uint32_t> ra, rb;
  std::vector<float> va, vb;
  uint64_t mismatches = 0, nonempty = 0;
  for (uint64_t j = 0; j < ia.n_features; ++j) {
    a->read_column(j, ra, va);
    b->read_column(j, rb, vb);
    nonempty += !ra.empty();
    if (ra != rb || va != vb || a->column_min(j) != b->column_min(j) ||
        a->column_max(j) != b->column_max(j))
      ++mismatches;
  }
  CHECK(mismatches == 0);
  CHECK(nonempty > 1000);

  // The shard files are the same bytes (the manifests differ in the input).
  auto fa = files_of(direct.train_path), fb = files_of(dir.file("ingested"));
  fa.erase("manifest.fgm");
  fb.erase("manifest.fgm");
  CHECK(fa.size() == direct.shards);
  CHECK(fa == fb);
}

TEST_CASE("sparse synth: LIBSVM text whose labels follow the planted model", "[io][synth]") {
  auto values = GENERATE(SynthValues::kBinary, SynthValues::kReal);
  CAPTURE(values == SynthValues::kBinary ? "binary" : "real");
  test::TempDir dir("fgm-synth");
  MemoryBudget budget(256 * kMiB);
  SparseSynthOptions o = small_options();
  o.values = values;
  SparseSynthResult r = write_sparse_synthetic(dir.path.string(), o, budget);

  // Valid LIBSVM for the engine's reader, within the declared width.
  for (const std::string& path : {r.train_path, r.test_path}) {
    ReaderOptions ro;
    ro.declared_features = o.features;
    LibsvmReader reader(path, ro);
    SparseRow row;
    uint64_t rows = 0, nnz = 0;
    std::set<double> labels;
    while (reader.next(row)) {
      ++rows;
      nnz += row.indices.size();
      labels.insert(row.label);
      for (float v : row.values) {
        REQUIRE(v > 0);
        REQUIRE(v <= 1);
        if (values == SynthValues::kBinary) REQUIRE(v == 1);
      }
    }
    CHECK(rows == (path == r.train_path ? o.rows : o.test_rows));
    CHECK(nnz == (path == r.train_path ? r.train_nnz : r.test_nnz));
    CHECK(labels == std::set<double>{-1.0, 1.0});
  }
  CHECK(std::abs(static_cast<double>(r.train_nnz) / o.rows - o.nnz_per_row) < 1.0);

  // truth.txt holds what the generator returned, exactly.
  PlantedTruth t = read_truth(r.truth_path);
  REQUIRE(t.ids.size() == o.planted_linear);
  REQUIRE(t.cross_ids.size() == o.planted_cross);
  CHECK(t.ids == r.truth.ids);
  CHECK(t.weights == r.truth.weights);
  CHECK(t.cross_ids == r.truth.cross_ids);
  CHECK(t.cross_weights == r.truth.cross_weights);
  CHECK(t.bias == r.truth.bias);
  std::set<uint64_t> linear(t.ids.begin(), t.ids.end());
  for (size_t i = 0; i < t.ids.size(); ++i) {
    CHECK(t.ids[i] < o.features);
    CHECK(std::abs(t.weights[i]) >= 0.5);
    CHECK(std::abs(t.weights[i]) <= 1.5);
  }
  for (size_t i = 0; i < t.cross_ids.size(); ++i) {
    CHECK(t.cross_ids[i].first < t.cross_ids[i].second);
    CHECK(t.cross_ids[i].second < o.features);
    CHECK(linear.count(t.cross_ids[i].first) == 0);  // pure interactions
    CHECK(linear.count(t.cross_ids[i].second) == 0);
    CHECK(std::abs(t.cross_weights[i]) >= 0.5);
  }

  // Labels are the sign of the planted model, recomputed from the text with an
  // independent parser; no row sits on the threshold.
  for (const std::string& path : {r.train_path, r.test_path}) {
    test::InMemoryData d = test::parse_libsvm_simple(path);
    uint64_t wrong = 0, close = 0, positive = 0;
    for (size_t i = 0; i < d.rows.size(); ++i) {
      double m = planted_margin(d.rows[i], t);
      close += std::abs(m) < 1e-9;
      wrong += (m > 0 ? 1.0 : -1.0) != d.labels[i];
      positive += d.labels[i] > 0;
    }
    CHECK(wrong == 0);
    CHECK(close == 0);
    double share = static_cast<double>(positive) / static_cast<double>(d.rows.size());
    CHECK(share > 0.3);
    CHECK(share < 0.7);
  }

  // Every planted term occurs in at least min_term_frequency of the rows (the
  // pilot is the whole training set here), popular and mid-popularity terms both.
  test::InMemoryData d = test::parse_libsvm_simple(r.train_path);
  std::map<uint64_t, uint64_t> feature_rows;
  for (const auto& row : d.rows)
    for (const auto& [id, v] : row) ++feature_rows[id];
  const auto min_rows = static_cast<uint64_t>(std::ceil(o.min_term_frequency * o.rows));
  const auto popular_rows = static_cast<uint64_t>(std::ceil(10 * o.min_term_frequency * o.rows));
  std::vector<uint64_t> term_rows;
  uint64_t linear_popular = 0, cross_popular = 0;
  for (uint64_t id : t.ids) {
    term_rows.push_back(feature_rows[id]);
    linear_popular += feature_rows[id] >= popular_rows;
  }
  for (const auto& [j, k] : t.cross_ids) {
    uint64_t n = 0;
    for (const auto& row : d.rows) n += row.count(j) && row.count(k);
    term_rows.push_back(n);
    cross_popular += feature_rows[j] >= popular_rows && feature_rows[k] >= popular_rows;
  }
  CHECK(term_rows == r.term_rows);
  for (uint64_t n : term_rows) {
    CHECK(n >= min_rows);
    CHECK(n <= o.rows / 2);
  }
  CHECK(linear_popular == (o.planted_linear + 1) / 2);
  CHECK(cross_popular == (o.planted_cross + 1) / 2);
}

TEST_CASE("sparse synth: label noise flips the requested share of labels", "[io][synth]") {
  test::TempDir dir("fgm-synth");
  MemoryBudget budget(256 * kMiB);
  SparseSynthOptions o = small_options();
  o.rows = 6000;
  o.test_rows = 0;
  o.label_noise = 0.2;
  SparseSynthResult r = write_sparse_synthetic(dir.path.string(), o, budget);
  CHECK(r.test_path.empty());
  CHECK(!fs::exists(dir.file("test.svm")));
  PlantedTruth t = read_truth(r.truth_path);
  test::InMemoryData d = test::parse_libsvm_simple(r.train_path);
  uint64_t flipped = 0;
  for (size_t i = 0; i < d.rows.size(); ++i)
    flipped += (planted_margin(d.rows[i], t) > 0 ? 1.0 : -1.0) != d.labels[i];
  CHECK(std::abs(static_cast<double>(flipped) / o.rows - 0.2) < 0.03);
}

TEST_CASE("sparse synth: feature popularity is Zipf-like", "[io][synth]") {
  test::TempDir dir("fgm-synth");
  MemoryBudget budget(256 * kMiB);
  SparseSynthOptions o = small_options();
  o.rows = 5000;
  o.test_rows = 0;
  o.features = 200000;
  o.cooccur = 0;  // plain Zipf draws, so that the slope is the exponent
  o.zipf = 1.05;
  SparseSynthResult r = write_sparse_synthetic(dir.path.string(), o, budget);
  test::InMemoryData d = test::parse_libsvm_simple(r.train_path);
  std::map<uint64_t, uint64_t> rows_of;
  for (const auto& row : d.rows)
    for (const auto& [id, v] : row) ++rows_of[id];
  std::vector<uint64_t> f;
  for (const auto& [id, n] : rows_of) f.push_back(n);
  std::sort(f.rbegin(), f.rend());
  const uint64_t total = std::accumulate(f.begin(), f.end(), uint64_t{0});
  // Head: the top feature is in most rows; the top 1% of the features that
  // occur hold a large share of the nonzeros, the median one occurs once or twice.
  CHECK(f[0] > o.rows / 2);
  uint64_t top = std::accumulate(f.begin(), f.begin() + static_cast<long>(f.size() / 100), uint64_t{0});
  CHECK(static_cast<double>(top) > 0.4 * static_cast<double>(total));
  CHECK(f[f.size() / 2] <= 2);
  CHECK(f.size() < o.features / 2);  // most features never occur
  // Slope of log frequency against log rank between ranks 10 and 300 ~ -zipf.
  double slope = std::log(static_cast<double>(f[299]) / static_cast<double>(f[9])) / std::log(30.0);
  CHECK(slope < -0.8);
  CHECK(slope > -1.3);
  // Popular ids are spread over the id range, not packed at its start.
  std::vector<uint64_t> top_ids;
  for (const auto& [id, n] : rows_of)
    if (n >= f[99]) top_ids.push_back(id);
  uint64_t upper_half = 0;
  for (uint64_t id : top_ids) upper_half += id >= o.features / 2;
  CHECK(upper_half > top_ids.size() / 4);
  CHECK(upper_half < 3 * top_ids.size() / 4);
}

TEST_CASE("sparse synth: companions make popularity groups co-occur", "[io][synth]") {
  // With cooccur = 1 every drawn feature brings a member of its group, so the
  // most frequent pair is far more frequent than independence would make it.
  test::TempDir dir("fgm-synth");
  MemoryBudget budget(256 * kMiB);
  SparseSynthOptions o = small_options();
  o.rows = 4000;
  o.test_rows = 0;
  o.features = 200000;
  double lift[2] = {0, 0};
  for (int with : {0, 1}) {
    o.cooccur = with;
    SparseSynthResult r = write_sparse_synthetic(dir.file(fmt::format("c{}", with)), o, budget);
    test::InMemoryData d = test::parse_libsvm_simple(r.train_path);
    std::map<uint64_t, uint64_t> rows_of;
    for (const auto& row : d.rows)
      for (const auto& [id, v] : row) ++rows_of[id];
    // Features ranked 20..200 (mid popularity): best lift P(j,k) / (P(j) P(k)).
    std::vector<std::pair<uint64_t, uint64_t>> by_rows;
    for (const auto& [id, n] : rows_of) by_rows.emplace_back(n, id);
    std::sort(by_rows.rbegin(), by_rows.rend());
    std::map<uint64_t, int> mid;
    for (size_t i = 20; i < 200; ++i) mid[by_rows[i].second] = static_cast<int>(i);
    std::map<std::pair<uint64_t, uint64_t>, uint64_t> pairs;
    for (const auto& row : d.rows) {
      std::vector<uint64_t> in;
      for (const auto& [id, v] : row)
        if (mid.count(id)) in.push_back(id);
      for (size_t x = 0; x < in.size(); ++x)
        for (size_t y = x + 1; y < in.size(); ++y) ++pairs[{in[x], in[y]}];
    }
    for (const auto& [p, n] : pairs) {
      if (n < 10) continue;
      double l = static_cast<double>(n) * o.rows /
                 (static_cast<double>(rows_of[p.first]) * static_cast<double>(rows_of[p.second]));
      lift[with] = std::max(lift[with], l);
    }
  }
  INFO("lift without companions " << lift[0] << ", with " << lift[1]);
  CHECK(lift[0] < 8);
  CHECK(lift[1] > 20);
}

TEST_CASE("sparse synth: the same seed gives the same bytes, whatever the threads", "[io][synth]") {
  test::TempDir dir("fgm-synth");
  MemoryBudget budget(256 * kMiB);
  SparseSynthOptions o = small_options();
  o.values = SynthValues::kReal;
  o.shard_target_bytes = 128 * 1024;
  std::map<std::string, std::string> text[2], stores[2];
  for (int threads : {1, 3}) {
    o.threads = threads;
    o.store = false;
    std::string a = dir.file(fmt::format("text{}", threads));
    write_sparse_synthetic(a, o, budget);
    o.store = true;
    o.column_buffer_bytes = threads == 1 ? 0 : 64 * 1024;  // one pass vs several
    std::string b = dir.file(fmt::format("store{}", threads));
    write_sparse_synthetic(b, o, budget);
    text[threads > 1] = files_of(a);
    stores[threads > 1] = files_of(b + "/store");
    stores[threads > 1]["truth.txt"] = slurp(b + "/truth.txt");
    stores[threads > 1]["test.svm"] = slurp(b + "/test.svm");
  }
  CHECK(text[0].size() == 3);
  CHECK(text[0] == text[1]);
  CHECK(stores[0] == stores[1]);
  // Another seed: other data.
  o.seed += 1;
  o.store = false;
  write_sparse_synthetic(dir.file("other"), o, budget);
  CHECK(slurp(dir.file("other/train.svm")) != text[0]["train.svm"]);
}

TEST_CASE("sparse synth: gzip text reads back as the plain text", "[io][synth]") {
  test::TempDir dir("fgm-synth");
  MemoryBudget budget(256 * kMiB);
  SparseSynthOptions o = small_options();
  o.rows = 1500;
  write_sparse_synthetic(dir.file("plain"), o, budget);
  o.gzip = true;
  SparseSynthResult r = write_sparse_synthetic(dir.file("gz"), o, budget);
  CHECK(r.train_path == dir.file("gz/train.svm.gz"));
  CHECK(detect_compression(r.train_path) == Compression::kGzip);
  CHECK(detect_compression(r.test_path) == Compression::kGzip);
  for (const char* name : {"train", "test"}) {
    LibsvmReader plain(dir.file(fmt::format("plain/{}.svm", name)));
    LibsvmReader gz(dir.file(fmt::format("gz/{}.svm.gz", name)));
    SparseRow x, y;
    uint64_t rows = 0;
    while (plain.next(x)) {
      REQUIRE(gz.next(y));
      REQUIRE(x.label == y.label);
      REQUIRE(x.indices == y.indices);
      REQUIRE(x.values == y.values);
      ++rows;
    }
    CHECK(!gz.next(y));
    CHECK(rows > 0);
  }
}

TEST_CASE("sparse synth: a store bigger than the budget is written within it", "[io][synth]") {
  // 160k rows x 2M features: ~57 MB of shards (empty columns are not
  // stored; real values, so every value is stored) from a 32 MB budget
  // (column counts 8 MB, row chunks, the writer's shard buffer, and a column
  // buffer that takes several passes).
  test::TempDir dir("fgm-synth");
  const uint64_t limit = 32 * kMiB;
  MemoryBudget budget(limit);
  SparseSynthOptions o;
  o.rows = 160000;
  o.test_rows = 1000;
  o.features = 2000000;
  o.threads = 2;
  o.store = true;
  o.values = SynthValues::kReal;
  o.seed = 3;
  // Reset VmHWM to the current RSS (Linux >= 4.0), so the peak is this run's.
  bool hwm_reset = false;
  {
    std::ofstream f("/proc/self/clear_refs");
    f << "5";
    f.close();
    hwm_reset = !f.fail();
  }
  const uint64_t base = current_rss_bytes();
  hwm_reset = hwm_reset && peak_rss_bytes() <= base + 4 * kMiB;
  SparseSynthResult r = write_sparse_synthetic(dir.path.string(), o, budget);
  const uint64_t hwm = peak_rss_bytes();
  INFO("budget peak " << format_bytes(budget.peak()) << ", VmHWM " << format_bytes(hwm)
                      << " from " << format_bytes(base) << ", store " << format_bytes(r.output_bytes)
                      << ", passes " << r.generation_passes);
  CHECK(budget.peak() <= limit);
  CHECK(r.output_bytes > limit * 3 / 2);
  CHECK(r.generation_passes >= 3);
  if (hwm_reset && hwm >= base) {
    CHECK(hwm - base < limit + 24 * kMiB);  // the budget, plus thread stacks and allocator slack
  } else {
    WARN("could not reset VmHWM; only the budget was checked");
  }
  MemoryBudget open_budget(64 * kMiB);
  auto s = ShardStore::open(r.train_path, open_budget);
  CHECK(s->info().n_rows == o.rows);
  CHECK(s->info().nnz == r.train_nnz);
  CHECK(s->info().n_features == o.features);
}

TEST_CASE("sparse synth: options are validated", "[io][synth]") {
  test::TempDir dir("fgm-synth");
  MemoryBudget budget(64 * kMiB);
  auto fails = [&](auto change) {
    SparseSynthOptions o = small_options();
    change(o);
    try {
      write_sparse_synthetic(dir.file("x"), o, budget);
    } catch (const Error& e) {
      return e.kind() == ErrorKind::kConfig;
    }
    return false;
  };
  CHECK(fails([](SparseSynthOptions& o) { o.features = 1; }));
  CHECK(fails([](SparseSynthOptions& o) { o.rows = 0; }));
  CHECK(fails([](SparseSynthOptions& o) { o.zipf = 0; }));
  CHECK(fails([](SparseSynthOptions& o) { o.nnz_per_row = 0.5; }));
  CHECK(fails([](SparseSynthOptions& o) { o.cooccur = 1.5; }));
  CHECK(fails([](SparseSynthOptions& o) { o.min_term_frequency = 0.6; }));
  CHECK(fails([](SparseSynthOptions& o) { o.label_noise = 0.7; }));
  CHECK(fails([](SparseSynthOptions& o) { o.planted_linear = o.planted_cross = 0; }));
  // More planted terms than the data has features for.
  CHECK(fails([](SparseSynthOptions& o) {
    o.features = 40;
    o.planted_linear = 50;
  }));
  CHECK(!fs::exists(dir.file("x/train.svm")));
}

TEST_CASE("read_truth reads both truth formats", "[io][synth]") {
  test::TempDir dir("fgm-synth");
  PlantedTruth legacy = read_truth(dir.write("legacy.txt", "3 0.5\n# comment\n\n7 -1.25\n"));
  CHECK(legacy.ids == std::vector<uint64_t>{2, 6});
  CHECK(legacy.weights == std::vector<double>{0.5, -1.25});
  CHECK(legacy.cross_ids.empty());
  CHECK(legacy.bias == 0);

  PlantedTruth sparse = read_truth(dir.write(
      "sparse.txt", "# header\nbias -0.25\nlinear 3 0.5  # 120\ncross 9 4 -1.5 # 33\nlinear 10 1\n"));
  CHECK(sparse.ids == std::vector<uint64_t>{2, 9});
  CHECK(sparse.weights == std::vector<double>{0.5, 1.0});
  REQUIRE(sparse.cross_ids.size() == 1);
  CHECK(sparse.cross_ids[0] == std::pair<uint64_t, uint64_t>{3, 8});
  CHECK(sparse.cross_weights == std::vector<double>{-1.5});
  CHECK(sparse.bias == -0.25);

  for (const char* junk : {"linear x 1\n", "linear 0 1\n", "cross 3 1\n", "cross 2 2 1\n",
                           "bias\n", "junk 1\n"}) {
    std::string path = dir.write("junk.txt", std::string("# ok\n") + junk);
    try {
      read_truth(path);
      FAIL("accepted " << junk);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kInvalidInput);
      CHECK(std::string(e.what()).find("junk.txt:2") != std::string::npos);
    }
  }

  // The dense generator's truth.txt still reads back as written.
  SynthOptions so;
  so.rows = 20;
  so.test_rows = 5;
  so.features = 30;
  so.relevant = 4;
  PlantedTruth dense = write_gaussian_synthetic(dir.file("dense"), so);
  PlantedTruth back = read_truth(dir.file("dense/truth.txt"));
  CHECK(back.ids == dense.ids);
  CHECK(back.weights == dense.weights);
}

TEST_CASE("fgm synth --kind sparse on the command line", "[io][synth][cli]") {
  if (!fs::exists(FGM_BINARY_PATH)) {
    WARN("no fgm binary at " << FGM_BINARY_PATH << "; build the fgm target");
    return;
  }
  test::TempDir dir("fgm-synth");
  const std::string out = dir.file("cli");
  const std::string common = fmt::format(
      "synth --kind sparse --out {} --rows 2000 --test-rows 300 --features 5000 --planted-linear 4 "
      "--planted-cross 3 --seed 5 --threads 2",
      out);
  REQUIRE(run_fgm(common + " --store") == 0);
  MemoryBudget budget(64 * kMiB);
  auto s = ShardStore::open(out + "/store", budget);
  CHECK(s->info().n_rows == 2000);
  CHECK(s->info().n_features == 5000);
  PlantedTruth t = read_truth(out + "/truth.txt");
  CHECK(t.ids.size() == 4);
  CHECK(t.cross_ids.size() == 3);
  CHECK(fs::exists(out + "/test.svm"));
  REQUIRE(run_fgm(common) == 0);
  CHECK(fs::exists(out + "/train.svm"));
  // Options of the other kind are usage errors.
  CHECK(run_fgm(common + " --relevant 5") == 2);
  CHECK(run_fgm(fmt::format("synth --out {}/g --zipf 1.2", out)) == 2);
  CHECK(run_fgm(common + " --zipf 0") == 2);
  CHECK(!fs::exists(out + "/g"));
  // The default kind is still the dense generator.
  REQUIRE(run_fgm(fmt::format("synth --out {}/g --rows 30 --test-rows 10 --features 20 --relevant 3",
                              out)) == 0);
  CHECK(read_truth(out + "/g/truth.txt").ids.size() == 3);
}
