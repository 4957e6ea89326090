#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>
#include <csignal>
#include <thread>

#include <algorithm>
#include <boost/iostreams/device/file.hpp>
#include <boost/iostreams/filter/gzip.hpp>
#include <boost/iostreams/filter/lzma.hpp>
#include <boost/iostreams/filtering_stream.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/hash.h"
#include "core/memory_budget.h"
#include "io/libsvm_reader.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "io/store_writer.h"

using namespace fgm;
namespace fs = std::filesystem;

namespace {

class TestDir {
 public:
  TestDir() {
    std::string pattern = (fs::temp_directory_path() / "fgm-store-test-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TestDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (fs::path(path_) / name).string(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct GenOptions {
  uint64_t rows = 1000;
  uint64_t features = 500;
  uint64_t avg_nnz = 20;
  uint64_t seed = 1;
  bool dense_first = true;  // feature 1 in every row: a column as long as n
  std::string positive = "+1", negative = "-1";
};

// Random sparse LIBSVM text with the quirks the reader accepts: blank lines,
// trailing spaces, comments, explicit zeros, label spellings. Values are
// multiples of 1/64, exact in float, so any correct parser agrees bit for bit.
std::string generate_libsvm(const GenOptions& g) {
  std::mt19937_64 rng(g.seed);
  std::string out;
  out.reserve(g.rows * (g.avg_nnz * 11 + 8));
  std::vector<uint64_t> idx;
  // Columns in [hole, hole + 7) are never used: empty columns mid-store.
  const uint64_t hole = g.features / 2;
  for (uint64_t r = 0; r < g.rows; ++r) {
    if (r % 997 == 5) out += "\n";
    if (r % 1499 == 7) out += "# a comment line\n";
    bool positive = rng() % 4 == 0;
    out += positive ? g.positive : g.negative;
    if (r % 7 == 3) out += positive ? "" : ".0";  // "-1.0" is the same label as "-1"
    idx.clear();
    if (g.dense_first) idx.push_back(1);
    uint64_t k = g.avg_nnz ? rng() % (2 * g.avg_nnz) : 0;
    for (uint64_t j = 0; j < k; ++j) {
      double u = std::uniform_real_distribution<double>(0, 1)(rng);
      uint64_t f = 2 + static_cast<uint64_t>(static_cast<double>(g.features - 2) * u * u);
      if (f >= hole && f < hole + 7) continue;
      if (f <= g.features) idx.push_back(f);
    }
    if (r == 0) idx.push_back(g.features);  // fixes the width
    std::sort(idx.begin(), idx.end());
    idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
    for (uint64_t f : idx) {
      int64_t q = static_cast<int64_t>(rng() % 8192) - 4096;
      if (q == 0 || rng() % 100 == 0) {
        out += fmt::format(" {}:0", f);  // explicit zero
      } else {
        out += fmt::format(" {}:{}", f, static_cast<double>(q) / 64.0);
      }
    }
    if (r % 13 == 0) out += "  ";
    if (r % 101 == 0) out += " # trailing comment";
    out += "\n";
  }
  return out;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  REQUIRE(f.good());
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void flip_byte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
  REQUIRE(f.good());
}

// Independent reference parse of LIBSVM text into CSR (0-based columns).
struct Reference {
  std::vector<double> labels;
  std::vector<uint64_t> row_ptr{0};
  std::vector<uint64_t> cols;
  std::vector<float> vals;
  uint64_t width = 0;
  uint64_t explicit_zeros = 0;
  uint64_t rows() const { return labels.size(); }
};

Reference parse_reference(const std::string& text) {
  Reference ref;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::vector<std::string> tokens;
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      size_t j = i;
      while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
      if (j > i) tokens.push_back(line.substr(i, j - i));
      i = j;
    }
    if (tokens.empty()) continue;
    ref.labels.push_back(std::strtod(tokens[0].c_str(), nullptr));
    for (size_t t = 1; t < tokens.size(); ++t) {
      size_t colon = tokens[t].find(':');
      uint64_t index = std::strtoull(tokens[t].substr(0, colon).c_str(), nullptr, 10);
      float value = static_cast<float>(std::strtod(tokens[t].c_str() + colon + 1, nullptr));
      if (value == 0) {
        ++ref.explicit_zeros;
        continue;
      }
      ref.cols.push_back(index - 1);
      ref.vals.push_back(value);
      ref.width = std::max(ref.width, index);
    }
    ref.row_ptr.push_back(ref.cols.size());
  }
  return ref;
}

// Rebuilds CSR rows from the column store, streaming blocks like the engine does.
struct Rebuilt {
  std::vector<uint64_t> row_ptr;
  std::vector<uint64_t> cols;
  std::vector<float> vals;
};

Rebuilt rebuild_rows(const ShardStore& store, uint64_t block_bytes) {
  const StoreInfo& info = store.info();
  Rebuilt out;
  out.row_ptr.assign(info.n_rows + 1, 0);
  auto blocks = store.plan_blocks(block_bytes);
  BlockBuffer buffer;
  for (const auto& b : blocks) {
    ColumnBlock c = store.read_block(b, buffer);
    for (uint64_t e = 0; e < c.nnz(); ++e) ++out.row_ptr[c.row_ids[e] + 1];
  }
  for (uint64_t r = 0; r < info.n_rows; ++r) out.row_ptr[r + 1] += out.row_ptr[r];
  out.cols.resize(info.nnz);
  out.vals.resize(info.nnz);
  std::vector<uint64_t> fill(out.row_ptr.begin(), out.row_ptr.end() - 1);
  for (const auto& b : blocks) {
    store.prefetch_block(b);
    ColumnBlock block = store.read_block(b, buffer);
    CscScratch scratch;
    const CscColumns c = csc_columns(block, scratch);
    for (uint64_t k = 0; k < c.column_count; ++k)
      for (uint64_t e = c.col_ptr[k]; e < c.col_ptr[k + 1]; ++e) {
        uint64_t at = fill[c.row_ids[e]]++;
        out.cols[at] = c.column_ids[k];
        out.vals[at] = c.values[e];
      }
  }
  return out;
}

// Every row of the store equals the reference, and so do labels and counts.
void check_store_matches(const ShardStore& store, const Reference& ref) {
  const StoreInfo& info = store.info();
  REQUIRE(info.n_rows == ref.rows());
  REQUIRE(info.nnz == ref.cols.size());
  REQUIRE(info.explicit_zeros == ref.explicit_zeros);
  Rebuilt got = rebuild_rows(store, 1 << 20);
  REQUIRE(got.row_ptr == ref.row_ptr);
  REQUIRE(got.cols == ref.cols);
  REQUIRE(got.vals == ref.vals);
  double pos = std::max_element(ref.labels.begin(), ref.labels.end())[0];
  uint64_t n_pos = 0;
  for (uint64_t r = 0; r < ref.rows(); ++r) {
    int8_t want = ref.labels[r] == pos ? 1 : -1;
    if (store.labels()[r] != want) FAIL("label of row " << r);
    n_pos += want > 0;
  }
  REQUIRE(info.n_positive == n_pos);
  REQUIRE(info.n_negative == ref.rows() - n_pos);
  // Class indices: the rank of the row's label among the distinct labels.
  std::vector<double> distinct = ref.labels;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  REQUIRE(info.class_values == distinct);
  std::vector<uint64_t> counts(distinct.size(), 0);
  for (uint64_t r = 0; r < ref.rows(); ++r) {
    auto want = std::lower_bound(distinct.begin(), distinct.end(), ref.labels[r]) - distinct.begin();
    if (store.classes()[r] != want) FAIL("class of row " << r);
    ++counts[static_cast<size_t>(want)];
  }
  REQUIRE(info.class_counts == counts);
}

std::vector<std::string> store_files(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> shard_files(const std::string& dir) {
  auto names = store_files(dir);
  names.erase(std::remove(names.begin(), names.end(), "manifest.fgm"), names.end());
  return names;
}

void require_same_files(const std::string& a, const std::string& b, bool with_manifest) {
  auto names = with_manifest ? store_files(a) : shard_files(a);
  REQUIRE(names == (with_manifest ? store_files(b) : shard_files(b)));
  for (const auto& n : names) {
    INFO("file " << n);
    REQUIRE(read_bytes(a + "/" + n) == read_bytes(b + "/" + n));
  }
}

// Nothing named like an ingest temp dir is left beside `out_dir`.
bool temp_dirs_left(const std::string& out_dir) {
  std::string stem = fs::path(out_dir).filename().string();
  for (const auto& e : fs::directory_iterator(fs::path(out_dir).parent_path())) {
    std::string name = e.path().filename().string();
    if (name.rfind(stem + ".tmp-", 0) == 0 || name.rfind(stem + ".old-", 0) == 0) return true;
  }
  return false;
}

template <class F>
Error expect_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("expected an fgm::Error");
  return Error(ErrorKind::kInternal, "unreachable");
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A store with several shards, shared by the corruption tests.
struct SmallStore {
  TestDir dir;
  std::string input = dir / "small.svm";
  std::string store = dir / "store";
  std::string text;
  IngestStats stats;
  explicit SmallStore(uint64_t seed = 7, uint64_t shard_target = 16 << 10) {
    GenOptions g;
    g.rows = 3000;
    g.features = 800;
    g.seed = seed;
    text = generate_libsvm(g);
    write_text(input, text);
    IngestOptions opt;
    opt.shard_target_bytes = shard_target;
    opt.block_bytes = 4 << 10;  // several stored blocks per shard
    opt.tile_rows = 1024;       // 3 row tiles
    MemoryBudget budget(64 << 20);
    stats = ingest_libsvm(input, store, opt, budget);
  }
};

Error open_error(const std::string& dir) {
  MemoryBudget budget(64 << 20);
  return expect_error([&] { ShardStore::open(dir, budget); });
}

}  // namespace

TEST_CASE("ingest round trip: 10x the budget, spilled runs, many shards", "[io][store][slow]") {
  TestDir dir;
  GenOptions g;
  g.rows = 110000;
  g.features = 20000;
  g.avg_nnz = 30;
  g.seed = 42;
  std::string text = generate_libsvm(g);
  const uint64_t limit = 4 << 20;
  REQUIRE(text.size() >= 10 * limit);
  write_text(dir / "big.svm", text);

  MemoryBudget budget(limit);
  IngestOptions opt;
  opt.threads = 2;
  IngestStats stats = ingest_libsvm(dir / "big.svm", dir / "store", opt, budget);
  CHECK(stats.spilled_runs > 5);
  CHECK(stats.shards > 5);
  CHECK(budget.peak() <= budget.limit());
  CHECK(budget.used() == 0);
  CHECK(stats.text_bytes == text.size());
  CHECK(stats.input_bytes == text.size());

  Reference ref = parse_reference(text);
  CHECK(stats.n_rows == ref.rows());
  CHECK(stats.nnz == ref.cols.size());
  auto store = ShardStore::open(dir / "store", budget);
  const StoreInfo& info = store->info();
  CHECK(info.format_version == kStoreFormatVersion);
  CHECK(info.n_features == ref.width);
  CHECK(info.input_bytes == text.size());
  CHECK(info.input_checksum == hash_file(dir / "big.svm"));
  CHECK(info.positive_value == 1);
  CHECK(info.negative_value == -1);
  CHECK(shard_files(dir / "store").size() == stats.shards);
  check_store_matches(*store, ref);
  CHECK(budget.peak() <= budget.limit());

  // Streaming reads each block into one reused buffer: resident memory stays
  // near one block however large the store (nothing is mapped).
  uint64_t base = current_rss_bytes(), growth = 0;
  double sum = 0;
  BlockBuffer buffer;
  for (const auto& b : store->plan_blocks(1 << 20)) {
    store->prefetch_block(b);
    ColumnBlock c = store->read_block(b, buffer);
    for (uint64_t e = 0; e < c.nnz(); ++e) sum += c.values[e] + c.row_ids[e];
    for (uint64_t k = 0; k < c.column_count; ++k) sum += c.col_min[k] + c.col_max[k];
    uint64_t rss = current_rss_bytes();
    growth = std::max(growth, rss > base ? rss - base : 0);
  }
  CHECK(sum != 0);
  INFO("store " << store->info().shard_bytes << " B, resident growth " << growth << " B");
  CHECK(store->info().shard_bytes > 16 * 1024 * 1024);
  CHECK(growth < 8 * 1024 * 1024);
}

TEST_CASE("gzip and xz input give the same store as plain text", "[io][store]") {
  TestDir dir;
  GenOptions g;
  g.rows = 4000;
  g.seed = 3;
  std::string text = generate_libsvm(g);
  write_text(dir / "data.svm", text);
  {
    namespace bio = boost::iostreams;
    bio::filtering_ostream gz;
    gz.push(bio::gzip_compressor());
    gz.push(bio::file_sink(dir / "data.svm.gz", std::ios::binary));
    gz << text;
    bio::filtering_ostream xz;
    xz.push(bio::lzma_compressor());
    xz.push(bio::file_sink(dir / "data.xz", std::ios::binary));  // no telling suffix
    xz << text;
  }
  MemoryBudget budget(8 << 20);
  IngestOptions opt;
  opt.shard_target_bytes = 32 << 10;
  ingest_libsvm(dir / "data.svm", dir / "plain", opt, budget);
  IngestStats gz = ingest_libsvm(dir / "data.svm.gz", dir / "gz", opt, budget);
  IngestStats xz = ingest_libsvm(dir / "data.xz", dir / "xz", opt, budget);
  CHECK(gz.text_bytes == text.size());
  CHECK(gz.input_bytes < text.size());
  CHECK(xz.text_bytes == text.size());
  require_same_files(dir / "plain", dir / "gz", false);
  require_same_files(dir / "plain", dir / "xz", false);
  auto a = ShardStore::open(dir / "plain", budget);
  auto b = ShardStore::open(dir / "xz", budget);
  CHECK(b->info().input_bytes == fs::file_size(dir / "data.xz"));
  CHECK(b->info().input_checksum == hash_file(dir / "data.xz"));
  CHECK(a->info().input_checksum != b->info().input_checksum);
  CHECK(std::equal(a->labels(), a->labels() + a->info().n_rows, b->labels()));
  check_store_matches(*b, parse_reference(text));
}

TEST_CASE("corrupted shards are rejected naming the file", "[io][store]") {
  SmallStore s;
  REQUIRE(s.stats.shards >= 4);
  const std::string shard = "shard-00001.fgs";
  auto copy = [&](const std::string& name) {
    std::string to = s.dir / name;
    fs::copy(s.store, to, fs::copy_options::recursive);
    return to;
  };
  {
    MemoryBudget budget(64 << 20);
    REQUIRE_NOTHROW(ShardStore::open(s.store, budget));
  }

  SECTION("a flipped byte in the raw block") {
    std::string dir = copy("flip-raw");
    flip_byte(dir + "/" + shard, fs::file_size(dir + "/" + shard) / 2);
    Error e = open_error(dir);
    CHECK(e.kind() == ErrorKind::kCorruption);
    CHECK(contains(e.what(), shard));
    CHECK(contains(e.what(), "checksum mismatch"));
  }
  SECTION("a flipped byte anywhere in the preamble, header or padding") {
    std::string dir = copy("flip-header");
    std::string path = dir + "/" + shard;
    for (uint64_t offset = 0; offset < 512; ++offset) {
      flip_byte(path, offset);
      Error e = open_error(dir);
      INFO("offset " << offset << ": " << e.what());
      CHECK(e.kind() == ErrorKind::kCorruption);
      CHECK(contains(e.what(), shard));
      flip_byte(path, offset);
    }
  }
  SECTION("a truncated shard") {
    std::string dir = copy("truncated");
    std::string path = dir + "/" + shard;
    uint64_t size = fs::file_size(path);
    for (uint64_t keep : {size - 1, size / 2, uint64_t{100}, uint64_t{10}, uint64_t{0}}) {
      fs::resize_file(path, keep);
      Error e = open_error(dir);
      INFO("kept " << keep << ": " << e.what());
      CHECK(e.kind() == ErrorKind::kCorruption);
      CHECK(contains(e.what(), shard));
    }
    fs::resize_file(path, size / 2);
    CHECK(contains(open_error(dir).what(), "truncated"));
  }
  SECTION("a missing shard") {
    std::string dir = copy("missing");
    fs::remove(dir + "/" + shard);
    Error e = open_error(dir);
    CHECK(e.kind() == ErrorKind::kCorruption);
    CHECK(contains(e.what(), shard));
  }
  SECTION("two shards swapped") {
    std::string dir = copy("swapped");
    fs::rename(dir + "/shard-00001.fgs", dir + "/x");
    fs::rename(dir + "/shard-00002.fgs", dir + "/shard-00001.fgs");
    fs::rename(dir + "/x", dir + "/shard-00002.fgs");
    Error e = open_error(dir);
    CHECK(e.kind() == ErrorKind::kCorruption);
    CHECK(contains(e.what(), shard));
    CHECK(contains(e.what(), "does not match the manifest"));
  }
  SECTION("a shard copied from another store") {
    // Same data cut differently: shard 1 starts at another column.
    SmallStore other(7, 24 << 10);
    std::string dir = copy("foreign");
    fs::copy_file(other.store + "/" + shard, dir + "/" + shard,
                  fs::copy_options::overwrite_existing);
    Error e = open_error(dir);
    CHECK(e.kind() == ErrorKind::kCorruption);
    CHECK(contains(e.what(), "does not match the manifest"));
    // Other data, same cut: only the checksum can tell.
    SmallStore third(8, 16 << 10);
    std::string dir2 = copy("foreign2");
    fs::copy_file(third.store + "/shard-00000.fgs", dir2 + "/shard-00000.fgs",
                  fs::copy_options::overwrite_existing);
    Error e2 = open_error(dir2);
    CHECK(e2.kind() == ErrorKind::kCorruption);
    CHECK(contains(e2.what(), "shard-00000.fgs"));
  }
  SECTION("format version mismatch") {
    std::string dir = copy("version");
    std::string manifest = dir + "/manifest.fgm";
    std::string bytes = read_bytes(manifest);
    uint32_t v = 99;
    std::memcpy(bytes.data() + 8, &v, 4);  // preamble: magic[8], version
    write_text(manifest, bytes);
    Error e = open_error(dir);
    CHECK(e.kind() == ErrorKind::kCorruption);
    CHECK(contains(e.what(), "format version 99"));
    CHECK(contains(e.what(), "manifest.fgm"));
    std::string dir2 = copy("version-shard");
    std::string sbytes = read_bytes(dir2 + "/" + shard);
    std::memcpy(sbytes.data() + 8, &v, 4);
    write_text(dir2 + "/" + shard, sbytes);
    Error e2 = open_error(dir2);
    CHECK(contains(e2.what(), "format version 99"));
    CHECK(contains(e2.what(), shard));
  }
  SECTION("manifest damage") {
    std::string dir = copy("manifest");
    std::string manifest = dir + "/manifest.fgm";
    uint64_t size = fs::file_size(manifest);
    flip_byte(manifest, size - 1);  // in the labels
    Error e = open_error(dir);
    CHECK(e.kind() == ErrorKind::kCorruption);
    CHECK(contains(e.what(), "manifest.fgm"));
    flip_byte(manifest, size - 1);
    for (uint64_t offset = 0; offset < 200; offset += 3) {
      flip_byte(manifest, offset);
      MemoryBudget budget(64 << 20);
      try {
        ShardStore::open(dir, budget);
        // A flip in a field open() does not check is still caught: no way to
        // get here except through a value that round-trips unchanged.
        FAIL("opened a store with a flipped manifest byte at " << offset);
      } catch (const Error& err) {
        CHECK(err.kind() == ErrorKind::kCorruption);
      }
      flip_byte(manifest, offset);
    }
    fs::resize_file(manifest, size - 10);
    CHECK(open_error(dir).kind() == ErrorKind::kCorruption);
    fs::remove(manifest);
    CHECK(open_error(dir).kind() == ErrorKind::kIo);
  }
}

TEST_CASE("a failed ingest leaves nothing behind", "[io][store]") {
  TestDir dir;
  GenOptions g;
  g.rows = 30000;
  g.seed = 11;
  std::string text = generate_libsvm(g);
  // A bad token on the second-to-last line.
  size_t last = text.rfind('\n', text.size() - 2);
  size_t before = text.rfind('\n', last - 1);
  text.insert(before + 1, "+1 3:abc\n");
  uint64_t bad_line =
      static_cast<uint64_t>(std::count(text.begin(), text.begin() + before + 1, '\n')) + 1;
  write_text(dir / "bad.svm", text);
  std::string out = dir / "store";
  MemoryBudget budget(2 << 20);
  for (int threads : {1, 2}) {
    IngestOptions opt;
    opt.threads = threads;
    Error e = expect_error([&] { ingest_libsvm(dir / "bad.svm", out, opt, budget); });
    CHECK(e.kind() == ErrorKind::kInvalidInput);
    CHECK(contains(e.what(), fmt::format("bad.svm:{}:", bad_line)));
    CHECK(!fs::exists(out));
    CHECK(!temp_dirs_left(out));
    CHECK(budget.used() == 0);
  }
  // Replacing an existing store: a failure keeps the old one.
  GenOptions small;
  write_text(dir / "good.svm", generate_libsvm(small));
  ingest_libsvm(dir / "good.svm", out, IngestOptions{}, budget);
  std::string before_manifest = read_bytes(out + "/manifest.fgm");
  CHECK_THROWS_AS(ingest_libsvm(dir / "bad.svm", out, IngestOptions{}, budget), Error);
  CHECK(read_bytes(out + "/manifest.fgm") == before_manifest);
  CHECK(!temp_dirs_left(out));

  SECTION("one label, no rows, missing input") {
    write_text(dir / "one.svm", "1 1:2\n1 3:4\n");
    Error e1 =
        expect_error([&] { ingest_libsvm(dir / "one.svm", dir / "o1", IngestOptions{}, budget); });
    CHECK(e1.kind() == ErrorKind::kInvalidInput);
    CHECK(contains(e1.what(), "'1'"));
    write_text(dir / "empty.svm", "\n\n# nothing\n");
    Error e2 = expect_error(
        [&] { ingest_libsvm(dir / "empty.svm", dir / "o2", IngestOptions{}, budget); });
    CHECK(e2.kind() == ErrorKind::kInvalidInput);
    Error e3 =
        expect_error([&] { ingest_libsvm(dir / "nope.svm", dir / "o3", IngestOptions{}, budget); });
    CHECK(e3.kind() == ErrorKind::kIo);
    // One label more than kMaxClasses (a regression target): refused at its line.
    std::string many;
    for (uint32_t k = 0; k <= kMaxClasses; ++k) many += fmt::format("{}.5 1:1\n", k);
    write_text(dir / "many.svm", many);
    Error e4 = expect_error(
        [&] { ingest_libsvm(dir / "many.svm", dir / "o4", IngestOptions{}, budget); });
    CHECK(e4.kind() == ErrorKind::kInvalidInput);
    CHECK(contains(e4.what(), fmt::format("many.svm:{}:1", kMaxClasses + 1)));
    for (const char* o : {"o1", "o2", "o3", "o4"}) {
      CHECK(!fs::exists(dir / o));
      CHECK(!temp_dirs_left(dir / o));
    }
  }
}

TEST_CASE("ingest refuses to overwrite what is not a store", "[io][store]") {
  TestDir dir;
  write_text(dir / "in.svm", generate_libsvm(GenOptions{}));
  MemoryBudget budget(16 << 20);
  fs::create_directory(dir / "occupied");
  write_text(dir / "occupied/notes.txt", "mine");
  Error e = expect_error(
      [&] { ingest_libsvm(dir / "in.svm", dir / "occupied", IngestOptions{}, budget); });
  CHECK(e.kind() == ErrorKind::kIo);
  CHECK(contains(e.what(), "occupied"));
  CHECK(read_bytes(dir / "occupied/notes.txt") == "mine");
  write_text(dir / "a-file", "data");
  Error e2 =
      expect_error([&] { ingest_libsvm(dir / "in.svm", dir / "a-file", IngestOptions{}, budget); });
  CHECK(e2.kind() == ErrorKind::kIo);
  CHECK(read_bytes(dir / "a-file") == "data");
  // An empty directory is taken; an existing store is replaced.
  fs::create_directory(dir / "empty");
  ingest_libsvm(dir / "in.svm", dir / "empty/", IngestOptions{}, budget);
  CHECK(fs::exists(dir / "empty/manifest.fgm"));
  GenOptions other;
  other.rows = 50;
  other.seed = 99;
  write_text(dir / "other.svm", generate_libsvm(other));
  auto old_store = ShardStore::open(dir / "empty", budget);
  Reference old_ref = parse_reference(read_bytes(dir / "in.svm"));
  ingest_libsvm(dir / "other.svm", dir / "empty", IngestOptions{}, budget);
  auto store = ShardStore::open(dir / "empty", budget);
  CHECK(store->info().n_rows == 50);
  // A store opened before the replacement still reads its own (unlinked) files.
  check_store_matches(*old_store, old_ref);
  CHECK(!temp_dirs_left(dir / "empty"));
}

// Sets how old a file must be for reads to trust its identity, for one test.
struct RecentWriteWindow {
  explicit RecentWriteWindow(double seconds) { set_recent_write_seconds(seconds); }
  ~RecentWriteWindow() { set_recent_write_seconds(2.0); }
};

TEST_CASE("reads after open are verified: a shard changed under an open store", "[io][store]") {
  // Both read paths: a store just written (every read re-hashes its pieces)
  // and one written before the window (reads re-hash only a changed file).
  const bool settled = GENERATE(false, true);
  INFO("store older than the recent-write window: " << settled);
  RecentWriteWindow window(settled ? 0.05 : 2.0);
  SmallStore s(7, 64 << 10);
  if (settled) std::this_thread::sleep_for(std::chrono::milliseconds(120));
  MemoryBudget budget(64 << 20);
  auto store = ShardStore::open(s.store, budget);
  const uint64_t rehashed_at_open = store_bytes_rehashed();
  auto blocks = store->plan_blocks(8 << 10);
  REQUIRE(blocks.size() > 4);
  const std::string shard = store->dir() + "/" + shard_files(s.store)[0];
  // Oracle: what the text says (brute force), read before anything changes.
  Reference ref = parse_reference(s.text);
  BlockBuffer buffer;
  auto block_matches_text = [&](const BlockRef& b) {
    ColumnBlock block = store->read_block(b, buffer);
    CscScratch scratch;
    const CscColumns c = csc_columns(block, scratch);
    REQUIRE(c.col_ptr[0] == 0);
    for (uint64_t k = 0; k < c.column_count; ++k) {
      uint64_t j = c.column_ids[k];
      std::vector<std::pair<uint32_t, float>> expected;
      for (uint64_t r = 0; r < ref.rows(); ++r)
        for (uint64_t e = ref.row_ptr[r]; e < ref.row_ptr[r + 1]; ++e)
          if (ref.cols[e] == j) expected.push_back({static_cast<uint32_t>(r), ref.vals[e]});
      REQUIRE(c.col_ptr[k + 1] - c.col_ptr[k] == expected.size());
      for (uint64_t e = c.col_ptr[k], i = 0; e < c.col_ptr[k + 1]; ++e, ++i) {
        REQUIRE(c.row_ids[e] == expected[i].first);
        REQUIRE(c.values[e] == expected[i].second);
      }
    }
  };
  for (const auto& b : blocks)
    if (b.shard == 0) block_matches_text(b);
  // The unchanged file is hashed again only while its last write is recent.
  CHECK((store_bytes_rehashed() == rehashed_at_open) == settled);

  auto expect_changed = [&](auto&& read) {
    Error e = expect_error(read);
    INFO(e.what());
    CHECK(e.kind() == ErrorKind::kCorruption);
    CHECK(contains(e.what(), shard));
  };
  std::vector<uint32_t> rows;
  std::vector<float> vals;
  SECTION("truncated: a short read is an error, not SIGBUS") {
    fs::resize_file(shard, fs::file_size(shard) / 3);
    for (const auto& b : blocks)
      if (b.shard == 0 && b.nnz > 0) expect_changed([&] { store->read_block(b, buffer); });
    // The per-column maxima sit at the end of the file: gone.
    uint64_t last_of_shard0 = 0;
    for (const auto& b : blocks)
      if (b.shard == 0) last_of_shard0 = b.end_column - 1;
    expect_changed([&] { store->column_max(last_of_shard0); });
  }
  SECTION("0x7f over the row ids: detected before any row id is used") {
    uint64_t size = fs::file_size(shard);
    std::string junk(size / 2, '\x7f');
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 4));
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    f.close();
    bool any = false;
    for (const auto& b : blocks)
      if (b.shard == 0 && b.nnz > 0) {
        try {
          store->read_block(b, buffer);
        } catch (const Error& e) {
          CHECK(e.kind() == ErrorKind::kCorruption);
          CHECK(contains(e.what(), shard));
          any = true;
        }
      }
    CHECK(any);
  }
  SECTION("one stored number changed: a block reading it is refused") {
    // The last nonzero of shard 0's last nonempty block (a value, not padding).
    const BlockRef* target = nullptr;
    for (const auto& b : blocks)
      if (b.shard == 0 && b.nnz > 0) target = &b;
    REQUIRE(target != nullptr);
    ColumnBlock c = store->read_block(*target, buffer);
    float old_value = c.values[c.nnz() - 1];
    // The value's bytes in the file (the last occurrence may be a column
    // min/max equal to it: a stored number all the same).
    std::string bytes = read_bytes(shard);
    std::string pattern(reinterpret_cast<const char*>(&old_value), 4);
    size_t at = bytes.rfind(pattern);
    REQUIRE(at != std::string::npos);
    float new_value = old_value + 1;
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(at));
    f.write(reinterpret_cast<const char*>(&new_value), 4);
    f.close();
    bool refused = false;
    for (const auto& b : blocks)
      if (b.shard == 0) {
        try {
          store->read_block(b, buffer);
        } catch (const Error& e) {
          CHECK(e.kind() == ErrorKind::kCorruption);
          CHECK(contains(e.what(), shard));
          refused = true;
        }
      }
    CHECK(refused);
  }
  SECTION("one stored number changed and the mtime set back: still refused") {
    struct stat st {};
    REQUIRE(::stat(shard.c_str(), &st) == 0);
    const timespec times[2] = {st.st_atim, st.st_mtim};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a later ctime tick
    // The first nonzero's value of shard 0's first nonempty block, changed in place.
    const BlockRef* target = nullptr;
    for (const auto& b : blocks)
      if (!target && b.shard == 0 && b.nnz > 0) target = &b;
    REQUIRE(target != nullptr);
    const float old_value = store->read_block(*target, buffer).values[0];
    std::string bytes = read_bytes(shard);
    const size_t at = bytes.find(std::string(reinterpret_cast<const char*>(&old_value), 4));
    REQUIRE(at != std::string::npos);
    const float new_value = old_value + 1;
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(at));
    f.write(reinterpret_cast<const char*>(&new_value), 4);
    f.close();
    REQUIRE(::utimensat(AT_FDCWD, shard.c_str(), times, 0) == 0);
    bool refused = false;
    for (const auto& b : blocks)
      if (b.shard == 0) {
        try {
          block_matches_text(b);
        } catch (const Error& e) {
          CHECK(e.kind() == ErrorKind::kCorruption);
          CHECK(contains(e.what(), shard));
          refused = true;
        }
      }
    CHECK(refused);
  }
  SECTION("replaced by rename: the open store still reads what it verified") {
    std::string other = s.dir / "other-shard";
    std::ofstream(other, std::ios::binary) << std::string(fs::file_size(shard), '\x7f');
    fs::rename(other, shard);
    for (const auto& b : blocks)
      if (b.shard == 0) block_matches_text(b);
  }
  SECTION("removed: a clean error or the verified data") {
    fs::remove(shard);
    for (const auto& b : blocks)
      if (b.shard == 0) block_matches_text(b);  // kept open since verification
  }
}

TEST_CASE("a store directory without manifest.fgm says so", "[io][store]") {
  TestDir dir;
  fs::create_directories(dir / "empty");
  Error e = open_error(dir / "empty");
  CHECK(e.kind() == ErrorKind::kIo);
  CHECK(contains(e.what(), "no manifest.fgm"));
  CHECK_FALSE(contains(e.what(), "Is a directory"));
}

TEST_CASE("a format-1 store asks to be ingested again", "[io][store]") {
  SmallStore s;
  // Rewrite the manifest preamble's version field to 1 (the old format).
  std::string path = s.store + "/manifest.fgm";
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  uint32_t one = 1;
  f.seekp(8);
  f.write(reinterpret_cast<const char*>(&one), 4);
  f.close();
  Error e = open_error(s.store);
  CHECK(e.kind() == ErrorKind::kCorruption);
  CHECK(contains(e.what(), "format version 1"));
  CHECK(contains(e.what(), "ingest the data again"));
}

TEST_CASE("a format-2 store (no class table) asks to be ingested again", "[io][store]") {
  SmallStore s;
  std::string path = s.store + "/manifest.fgm";
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  uint32_t two = 2;
  f.seekp(8);
  f.write(reinterpret_cast<const char*>(&two), 4);
  f.close();
  Error e = open_error(s.store);
  CHECK(e.kind() == ErrorKind::kCorruption);
  CHECK(contains(e.what(), "format version 2"));
  CHECK(contains(e.what(), "ingest the data again"));
}

TEST_CASE("multi-class input: class table in value order, class block checked", "[io][store]") {
  TestDir dir;
  MemoryBudget budget(16 << 20);
  // scikit-learn's svmlight test files spell classes 1, 2, 3 with integer and
  // float spellings, comments and qid tokens; first appearance is 2, 3, 1.
  const std::string text =
      "# comment line\n2.0 qid:1 1:0.5 3:2\n3 2:-1\n1 1:1\n2 3:4 # trailing\n"
      "+1 2:2.5\n3.000 1:1 2:1\n1e0\n";
  write_text(dir / "m.svm", text);
  ingest_libsvm(dir / "m.svm", dir / "s", IngestOptions{}, budget);
  auto st = ShardStore::open(dir / "s", budget);
  const StoreInfo& info = st->info();
  CHECK(info.classes() == 3);
  CHECK(info.class_values == std::vector<double>{1, 2, 3});
  CHECK(info.class_counts == std::vector<uint64_t>{3, 2, 2});
  CHECK(std::vector<uint16_t>(st->classes(), st->classes() + 7) ==
        std::vector<uint16_t>{1, 2, 0, 1, 0, 2, 0});
  // ±1 labels: the largest label against the rest.
  CHECK(std::vector<int8_t>(st->labels(), st->labels() + 7) ==
        std::vector<int8_t>{-1, 1, -1, -1, -1, 1, -1});
  CHECK(info.positive_value == 3);
  CHECK(info.negative_value == 1);
  CHECK(info.n_positive == 2);

  // A flipped byte in the class block (the manifest's last bytes) is caught.
  const std::string manifest = (dir / "s") + "/manifest.fgm";
  std::string bytes = read_bytes(manifest);
  bytes.back() ^= 1;
  write_text(manifest, bytes);
  Error e = open_error(dir / "s");
  CHECK(e.kind() == ErrorKind::kCorruption);
  CHECK(contains(e.what(), "class indices"));
}

namespace {

}  // namespace

TEST_CASE("a format-3 store (plain CSC of every column) asks to be ingested again", "[io][store]") {
  SmallStore s;
  for (const std::string name : {"manifest.fgm", "shard-00000.fgs"}) {
    TestDir copy;
    fs::copy(s.store, copy / "s", fs::copy_options::recursive);
    std::fstream f(copy / "s/" + name, std::ios::in | std::ios::out | std::ios::binary);
    uint32_t three = 3;
    f.seekp(8);
    f.write(reinterpret_cast<const char*>(&three), 4);
    f.close();
    Error e = open_error(copy / "s");
    CHECK(e.kind() == ErrorKind::kCorruption);
    CHECK(contains(e.what(), "format version 3"));
    CHECK(contains(e.what(), "supports 4"));
    CHECK(contains(e.what(), "ingest the data again"));
    CHECK(contains(e.what(), name));
  }
}

TEST_CASE("ingest refuses a store larger than store.max_bytes or the free space", "[io][store]") {
  TestDir dir;
  MemoryBudget budget(64 << 20);
  SECTION("store.max_bytes: the estimate follows the nonzeros, not the ids") {
    // 2000 rows x 50 nonzeros: ~0.8 MB of row ids and values estimated, > 512 KiB.
    std::string text;
    for (int r = 0; r < 2000; ++r) {
      text += r % 2 ? "+1" : "-1";
      for (int j = 1; j <= 50; ++j) text += fmt::format(" {}:1", j * 1000003);
      text += "\n";
    }
    write_text(dir / "many.svm", text);
    IngestOptions opt;
    opt.max_store_bytes = 512 << 10;
    Error e = expect_error([&] { ingest_libsvm(dir / "many.svm", dir / "s", opt, budget); });
    INFO(e.what());
    CHECK(e.kind() == ErrorKind::kInvalidInput);
    CHECK(contains(e.what(), "store.max_bytes"));
    CHECK_FALSE(fs::exists(dir / "s"));
    CHECK_FALSE(temp_dirs_left(dir / "s"));
    // Under a cap above the estimate it is written, within the estimate.
    opt.max_store_bytes = 8 << 20;
    ingest_libsvm(dir / "many.svm", dir / "s", opt, budget);
    uint64_t bytes = 0;
    for (const auto& f : fs::directory_iterator(dir / "s")) bytes += fs::file_size(f.path());
    CHECK(bytes >= 2000 * 50 * 4);  // row ids (every value is 1: none stored)
    CHECK(bytes <= (8 << 20));
  }
  SECTION("a wide id space alone is not refused") {
    write_text(dir / "wide.svm", "+1 1:1 1099511627776:1\n-1 2:1\n");
    IngestOptions opt;
    opt.max_store_bytes = 1 << 20;
    IngestStats st = ingest_libsvm(dir / "wide.svm", dir / "s", opt, budget);
    CHECK(st.n_features == 1099511627776ull);
    CHECK(st.nonempty_columns == 3);
  }
}

TEST_CASE("ingest removes temporaries of dead processes and keeps live ones", "[io][store]") {
  TestDir dir;
  MemoryBudget budget(64 << 20);
  write_text(dir / "in.svm", "+1 1:1 3:2\n-1 2:1\n");
  const std::string out = dir / "s";
  // A killed ingest: owner lock file present but not held, spill files inside.
  const std::string dead = out + ".tmp-999999-0badf00d";
  fs::create_directories(dead);
  write_text(dead + "/run-000001.tmp", std::string(4096, 'x'));
  write_text(dead + "/.owner.lock", "");
  // A killed ingest before its lock existed: a pid that has exited.
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  const std::string dead_pid = out + ".tmp-" + std::to_string(child) + "-00000001";
  fs::create_directories(dead_pid);
  // A live ingest: its owner lock is held (here, by this process).
  const std::string live = out + ".tmp-" + std::to_string(::getpid()) + "-00000002";
  fs::create_directories(live);
  write_text(live + "/.owner.lock", "");
  int fd = ::open((live + "/.owner.lock").c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);
  // Another target's temporary is not ours to judge.
  const std::string other = std::string(dir / "s2") + ".tmp-999999-0badf00d";
  fs::create_directories(other);

  ingest_libsvm(dir / "in.svm", out, IngestOptions{}, budget);
  CHECK_FALSE(fs::exists(dead));
  CHECK_FALSE(fs::exists(dead_pid));
  CHECK(fs::exists(live));
  CHECK(fs::exists(other));
  CHECK_FALSE(fs::exists(out + ".lock"));
  // The committed store does not contain the owner lock.
  CHECK_FALSE(fs::exists(out + "/.owner.lock"));
  ::close(fd);
}

TEST_CASE("a second writer of the same output fails clearly", "[io][store]") {
  TestDir dir;
  MemoryBudget budget(64 << 20);
  write_text(dir / "in.svm", "+1 1:1 3:2\n-1 2:1\n");
  const std::string out = dir / "s";
  {
    // Another process writing `out` holds its lock (same mechanism).
    int fd = ::open((out + ".lock").c_str(), O_RDWR | O_CREAT, 0644);
    REQUIRE(fd >= 0);
    pid_t child = ::fork();
    if (child == 0) {
      int f = ::open((out + ".lock").c_str(), O_RDWR);
      ::flock(f, LOCK_EX);
      ::pause();
      ::_exit(0);
    }
    // Wait until the child holds it.
    for (int i = 0; i < 5000; ++i) {
      if (::flock(fd, LOCK_EX | LOCK_NB) != 0) break;
      ::flock(fd, LOCK_UN);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    Error e = expect_error([&] { ingest_libsvm(dir / "in.svm", out, IngestOptions{}, budget); });
    CHECK(e.kind() == ErrorKind::kIo);
    CHECK(contains(e.what(), "another fgm process"));
    CHECK(contains(e.what(), out));
    CHECK_FALSE(fs::exists(out));
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    ::close(fd);
  }
  // Once it is gone the output can be written, and the lock file goes with it.
  ingest_libsvm(dir / "in.svm", out, IngestOptions{}, budget);
  CHECK(fs::exists(out + "/manifest.fgm"));
  CHECK_FALSE(fs::exists(out + ".lock"));
}

TEST_CASE("ingest out-of-memory remedies name only real keys", "[io][store]") {
  TestDir dir;
  GenOptions g;
  g.rows = 20000;
  g.features = 2000;
  g.seed = 3;
  write_text(dir / "in.svm", generate_libsvm(g));
  // A shard target beyond the budget leaves the merge no room: out of memory.
  MemoryBudget budget(2 << 20);
  IngestOptions opt;
  opt.shard_target_bytes = 1 << 30;
  Error e = expect_error([&] { ingest_libsvm(dir / "in.svm", dir / "s", opt, budget); });
  INFO(e.what());
  CHECK(e.kind() == ErrorKind::kOutOfMemory);
  CHECK(contains(e.what(), "engine.memory_budget"));
  CHECK_FALSE(contains(e.what(), "store.shard_target_bytes"));
  CHECK_FALSE(temp_dirs_left(dir / "s"));
}

TEST_CASE("per-shard metadata is counted in the budget", "[io][store]") {
  // Many small shards: what the store keeps per shard (bookkeeping and the
  // piece table) is reserved, so it grows with the shard count.
  SmallStore few(7, 1 << 20), many(7, 4 << 10);
  REQUIRE(many.stats.shards > 20 * few.stats.shards);
  MemoryBudget a(64 << 20), b(64 << 20);
  auto sa = ShardStore::open(few.store, a);
  auto sb = ShardStore::open(many.store, b);
  CHECK(b.used() - a.used() >= (many.stats.shards - few.stats.shards) * 200);
}

TEST_CASE("plan_blocks covers every stored block once, grouped within the target", "[io][store]") {
  SmallStore s;
  MemoryBudget budget(64 << 20);
  auto store = ShardStore::open(s.store, budget);
  const StoreInfo& info = store->info();
  REQUIRE(info.block_count > 2 * s.stats.shards);
  // Every stored block alone: target 1 never groups (a format 6 block's
  // head and tail are two entries of block_count, never apart).
  const auto singles = store->plan_blocks(1);
  uint64_t entries = 0;
  for (const BlockRef& b : singles) {
    REQUIRE(b.block_count == (b.has_tail ? 2u : 1u));
    entries += b.block_count;
  }
  REQUIRE(entries == info.block_count);
  auto single_at = [&](uint32_t shard, uint64_t first_block) -> const BlockRef& {
    for (const BlockRef& b : singles)
      if (b.shard == shard && b.first_block == first_block) return b;
    FAIL("no stored block starts at entry " << first_block);
    return singles.front();
  };
  for (uint64_t target :
       {uint64_t{1}, uint64_t{100}, uint64_t{4096}, uint64_t{20000}, uint64_t{1} << 40}) {
    INFO("target " << target);
    auto blocks = store->plan_blocks(target);
    uint64_t next = 0, nnz = 0, columns = 0, stored = 0;
    for (size_t i = 0; i < blocks.size(); ++i) {
      const BlockRef& b = blocks[i];
      REQUIRE(b.first_column >= next);
      REQUIRE(b.end_column > b.first_column);
      REQUIRE(b.column_count >= 1);
      REQUIRE(b.block_count >= 1);
      REQUIRE((b.bytes <= target || single_at(b.shard, b.first_block).block_count == b.block_count));
      BlockBuffer buffer;
      ColumnBlock c = store->read_block(b, buffer);
      REQUIRE(buffer.capacity() >= b.read_bytes);
      REQUIRE(c.first_column == b.first_column);
      REQUIRE(c.end_column == b.end_column);
      REQUIRE(c.column_count == b.column_count);
      REQUIRE(b.nnz == c.nnz());
      REQUIRE(b.bytes == store::block_array_bytes(c.column_count, c.cell_count(), c.nnz(),
                                                  c.tile_count));
      // Greedy: the next stored block of the same shard would not have fit.
      if (i + 1 < blocks.size() && blocks[i + 1].shard == b.shard) {
        const BlockRef& alone = single_at(b.shard, blocks[i + 1].first_block);
        REQUIRE(alone.first_column == blocks[i + 1].first_column);
        REQUIRE(b.bytes + alone.bytes > target);
      }
      if (i > 0) REQUIRE(blocks[i - 1].shard <= b.shard);
      next = b.end_column;
      nnz += b.nnz;
      columns += b.column_count;
      stored += b.block_count;
    }
    REQUIRE(next <= info.n_features);
    REQUIRE(nnz == info.nnz);
    REQUIRE(columns == info.nonempty_columns);
    REQUIRE(stored == info.block_count);
    if (target == (uint64_t{1} << 40)) REQUIRE(blocks.size() == s.stats.shards);
  }
}

TEST_CASE("column min/max and read_column match brute force", "[io][store]") {
  SmallStore s;
  MemoryBudget budget(64 << 20);
  auto store = ShardStore::open(s.store, budget);
  Reference ref = parse_reference(s.text);
  const uint64_t m = store->info().n_features;
  REQUIRE(m == ref.width);
  std::vector<std::vector<std::pair<uint32_t, float>>> columns(m);
  for (uint64_t r = 0; r < ref.rows(); ++r)
    for (uint64_t e = ref.row_ptr[r]; e < ref.row_ptr[r + 1]; ++e)
      columns[ref.cols[e]].push_back({static_cast<uint32_t>(r), ref.vals[e]});
  uint64_t empty = 0, full = 0;
  std::vector<uint32_t> rows;
  std::vector<float> values;
  for (uint64_t j = 0; j < m; ++j) {
    float lo = 0, hi = 0;
    if (!columns[j].empty()) {
      lo = hi = columns[j][0].second;
      for (auto [r, v] : columns[j]) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      if (columns[j].size() < ref.rows()) {
        lo = std::min(lo, 0.0f);
        hi = std::max(hi, 0.0f);
      } else {
        ++full;
      }
    } else {
      ++empty;
    }
    INFO("column " << j);
    REQUIRE(store->column_min(j) == lo);
    REQUIRE(store->column_max(j) == hi);
    store->read_column(j, rows, values);
    REQUIRE(rows.size() == columns[j].size());
    for (size_t k = 0; k < rows.size(); ++k) {
      REQUIRE(rows[k] == columns[j][k].first);
      REQUIRE(values[k] == columns[j][k].second);
    }
  }
  CHECK(empty >= 7);  // the generator's hole
  CHECK(full == 0);   // the dense column has explicit zeros dropped now and then
}

TEST_CASE("ingest output does not depend on threads, chunking or merge levels", "[io][store]") {
  TestDir dir;
  GenOptions g;
  g.rows = 20000;
  g.seed = 5;
  write_text(dir / "in.svm", generate_libsvm(g));
  MemoryBudget budget(2 << 20);
  IngestOptions one;
  one.threads = 1;
  IngestStats a = ingest_libsvm(dir / "in.svm", dir / "t1", one, budget);
  IngestOptions two;
  two.threads = 2;
  two.input_checksum = hash_file(dir / "in.svm");  // as a caching caller would pass it
  ingest_libsvm(dir / "in.svm", dir / "t2", two, budget);
  require_same_files(dir / "t1", dir / "t2", true);
  REQUIRE(a.spilled_runs > 2);

  IngestOptions small_chunks = two;
  small_chunks.reader.chunk_bytes = 4096;
  ingest_libsvm(dir / "in.svm", dir / "chunks", small_chunks, budget);
  require_same_files(dir / "t1", dir / "chunks", true);

  IngestOptions fan_in = two;
  fan_in.merge_fan_in = 2;  // forces several merge levels
  ingest_libsvm(dir / "in.svm", dir / "fanin", fan_in, budget);
  require_same_files(dir / "t1", dir / "fanin", true);

  MemoryBudget big(256 << 20);  // no run files at all, same shard target
  IngestOptions roomy = two;
  roomy.shard_target_bytes = (2 << 20) / 8;
  IngestStats c = ingest_libsvm(dir / "in.svm", dir / "roomy", roomy, big);
  CHECK(c.spilled_runs == 0);
  require_same_files(dir / "t1", dir / "roomy", false);
}

TEST_CASE("label maps, declared width, 0-based indices, label-only rows", "[io][store]") {
  TestDir dir;
  MemoryBudget budget(16 << 20);
  SECTION("labels 1/2 map 2 to +1, declared width adds empty columns") {
    write_text(dir / "a.svm", "1 1:0.5 3:2\n2 2:-1\n2\n1 3:4\n");
    IngestOptions opt;
    opt.reader.declared_features = 10;
    ingest_libsvm(dir / "a.svm", dir / "s", opt, budget);
    auto st = ShardStore::open(dir / "s", budget);
    const StoreInfo& info = st->info();
    CHECK(info.n_rows == 4);
    CHECK(info.n_features == 10);
    CHECK(info.declared_features == 10);
    CHECK(info.nnz == 4);
    CHECK(info.positive_value == 2);
    CHECK(info.negative_value == 1);
    CHECK(info.n_positive == 2);
    CHECK(std::vector<int8_t>(st->labels(), st->labels() + 4) == std::vector<int8_t>{-1, 1, 1, -1});
    CHECK(st->column_min(2) == 0);
    CHECK(st->column_max(2) == 4);
    CHECK(st->column_min(1) == -1);
    CHECK(st->column_max(9) == 0);
    auto blocks = st->plan_blocks(1 << 20);
    CHECK(blocks.back().end_column <= 10);
  }
  SECTION("0/1 labels and 0-based indices") {
    write_text(dir / "b.svm", "0 0:1 5:1\n1 0:3\n");
    IngestOptions opt;
    opt.reader.index_base = 0;
    ingest_libsvm(dir / "b.svm", dir / "s", opt, budget);
    auto st = ShardStore::open(dir / "s", budget);
    CHECK(st->info().n_features == 6);
    CHECK(st->info().index_base == 0);
    CHECK(st->info().positive_value == 1);
    CHECK(st->labels()[0] == -1);
    CHECK(st->column_min(0) == 1);  // dense column: no implicit zero
    CHECK(st->column_max(0) == 3);
    std::vector<uint32_t> rows;
    std::vector<float> vals;
    st->read_column(5, rows, vals);
    CHECK(rows == std::vector<uint32_t>{0});
  }
  SECTION("long runs of empty columns are not stored") {
    std::string text;
    for (int r = 0; r < 40; ++r)
      text += fmt::format("{} 1:{} 3:1 2999:{} 3000:2\n", r % 2 ? "+1" : "-1", r + 1, -r - 1);
    write_text(dir / "gaps.svm", text);
    IngestOptions opt;
    opt.reader.declared_features = 9000;  // 6000 trailing empty columns too
    opt.shard_target_bytes = 4096;
    IngestStats stats = ingest_libsvm(dir / "gaps.svm", dir / "s", opt, budget);
    CHECK(stats.shards == 1);  // 160 nonzeros: one small shard, whatever the width
    CHECK(stats.nonempty_columns == 4);
    auto st = ShardStore::open(dir / "s", budget);
    CHECK(st->info().nonempty_columns == 4);
    CHECK(st->info().shard_bytes < 8192);
    CHECK(st->info().n_features == 9000);
    check_store_matches(*st, parse_reference(text));
    std::vector<uint32_t> rows;
    std::vector<float> vals;
    st->read_column(2998, rows, vals);
    CHECK(rows.size() == 40);
    CHECK(vals[5] == -6);
    st->read_column(5000, rows, vals);
    CHECK(rows.empty());
    CHECK(st->column_max(2999) == 2);
  }
  SECTION("rows without features: no columns, no shards") {
    write_text(dir / "c.svm", "1\n-1\n");
    IngestStats stats = ingest_libsvm(dir / "c.svm", dir / "s", IngestOptions{}, budget);
    CHECK(stats.shards == 0);
    auto st = ShardStore::open(dir / "s", budget);
    CHECK(st->info().n_features == 0);
    CHECK(st->plan_blocks(1000).empty());
  }
}

TEST_CASE("store on a9a", "[io][store]") {
  std::string path = std::string(FGM_SHARED_DATA_DIR) + "/a9a/a9a";
  if (!fs::exists(path)) return;
  TestDir dir;
  MemoryBudget budget(64 << 20);
  IngestOptions opt;
  opt.threads = 2;
  opt.reader.declared_features = 123;
  ingest_libsvm(path, dir / "s", opt, budget);
  auto st = ShardStore::open(dir / "s", budget);
  CHECK(st->info().n_rows == 32561);
  CHECK(st->info().nnz == 451592);
  CHECK(st->info().n_positive == 7841);
  CHECK(st->info().n_features == 123);
  check_store_matches(*st, parse_reference(read_bytes(path)));
}

// Throughput benchmark, run by hand (one configuration per process, so VmHWM
// is this run's): FGM_BENCH_INPUT=file FGM_BENCH_THREADS=2 FGM_BENCH_BUDGET=256MB
//   test_io "[store-bench]"
// With FGM_BENCH_GENERATE=<MB> the input is generated first (and kept).
TEST_CASE("ingest throughput", "[.][store-bench]") {
  const char* input = std::getenv("FGM_BENCH_INPUT");
  if (!input) return;
  const char* threads = std::getenv("FGM_BENCH_THREADS");
  const char* budget_text = std::getenv("FGM_BENCH_BUDGET");
  if (const char* gen = std::getenv("FGM_BENCH_GENERATE"); gen && !fs::exists(input)) {
    GenOptions g;
    g.features = 100000;
    g.avg_nnz = 40;
    g.rows = static_cast<uint64_t>(std::atof(gen) * 1e6 / 600);
    write_text(input, generate_libsvm(g));
  }
  if (std::getenv("FGM_BENCH_DEBUG")) spdlog::set_level(spdlog::level::debug);
  TestDir dir;
  MemoryBudget budget(parse_byte_size(budget_text ? budget_text : "256MB", "FGM_BENCH_BUDGET"));
  IngestOptions opt;
  opt.threads = threads ? std::atoi(threads) : 1;
  opt.progress = true;  // shown only when stderr is a terminal
  auto cpu_seconds = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  };
  uint64_t rss_before = peak_rss_bytes();
  double cpu_before = cpu_seconds();
  IngestStats s = ingest_libsvm(input, dir / "s", opt, budget);
  double cpu = cpu_seconds() - cpu_before;
  auto t0 = std::chrono::steady_clock::now();
  auto st = ShardStore::open(dir / "s", budget);
  double open_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print(
      "input {} threads {} budget {}: {} rows, {} features, {} nnz, text {}, {:.2f} s, "
      "{:.1f} MB/s of text, {:.2f} CPU s; {} runs, {} shards ({}); budget peak {}, VmHWM {} "
      "(before ingest {}); open+verify {:.2f} s\n",
      input, opt.threads, format_bytes(budget.limit()), s.n_rows, s.n_features, s.nnz,
      format_bytes(s.text_bytes), s.seconds, static_cast<double>(s.text_bytes) / 1e6 / s.seconds,
      cpu, s.spilled_runs, s.shards, format_bytes(st->info().shard_bytes),
      format_bytes(budget.peak()), format_bytes(peak_rss_bytes()), format_bytes(rss_before),
      open_s);
}

TEST_CASE("BlockBuffer: 64-byte aligned at every size, reused when large enough, grown when not",
          "[shard_store][block_buffer]") {
  fgm::BlockBuffer buffer;
  REQUIRE(buffer.capacity() == 0);
  // small (operator new) and stored-block sizes (own mappings, core/huge_pages.h)
  for (uint64_t bytes : {uint64_t{1}, uint64_t{4096}, uint64_t{3} << 20, uint64_t{4} << 20, uint64_t{17} << 20}) {
    CAPTURE(bytes);
    uint8_t* p = buffer.get(bytes);
    REQUIRE(reinterpret_cast<uintptr_t>(p) % 64 == 0);
    REQUIRE(buffer.capacity() >= bytes);
    p[0] = 1;
    p[bytes - 1] = 2;  // the whole range is usable
    REQUIRE(buffer.get(bytes / 2 + 1) == p);  // smaller requests reuse the memory
  }
  fgm::BlockBuffer large;
  uint8_t* q = large.get(uint64_t{16} << 20);
  REQUIRE(large.get(uint64_t{8} << 20) == q);
  REQUIRE(large.capacity() == uint64_t{16} << 20);
}
