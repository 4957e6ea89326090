// Store format 4 against an in-memory twin: the LIBSVM text parsed into
// triplets independently (tests/test_util.h), every stored block rebuilt from
// them tile by tile and compared array by array; sparse id spaces; crafted
// blocks that break each bound read_block checks.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/hash.h"
#include "core/memory_budget.h"
#include "io/ingest.h"
#include "io/schema/shard_generated.h"
#include "io/shard_store.h"
#include "io/store_format.h"
#include "io/store_writer.h"
#include "tests/test_util.h"

using namespace fgm;
namespace fs = std::filesystem;

namespace {

// The twin: column id -> (row, value) in row order, from the text alone.
struct Twin {
  uint64_t n_rows = 0, n_features = 0;
  std::map<uint64_t, std::vector<std::pair<uint32_t, float>>> columns;
};

Twin twin_of(const std::string& path, uint64_t declared = 0) {
  test::InMemoryData d = test::parse_libsvm_simple(path);
  Twin t;
  t.n_rows = d.labels.size();
  for (size_t r = 0; r < d.rows.size(); ++r)
    for (auto [j, v] : d.rows[r]) {
      const float f = static_cast<float>(v);
      if (f == 0) continue;  // explicit zeros are not stored
      t.columns[j].push_back({static_cast<uint32_t>(r), f});
      t.n_features = std::max(t.n_features, j + 1);
    }
  if (declared) t.n_features = declared;
  return t;
}

std::pair<float, float> twin_range(const Twin& t, uint64_t j) {
  auto it = t.columns.find(j);
  if (it == t.columns.end()) return {0.0f, 0.0f};
  float lo = it->second[0].second, hi = lo;
  for (auto [r, v] : it->second) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (it->second.size() < t.n_rows) {
    lo = std::min(lo, 0.0f);
    hi = std::max(hi, 0.0f);
  }
  return {lo, hi};
}

// The block the twin says a store must hold for `ids` (tile-major cells).
void check_block_against_twin(const ColumnBlock& c, const Twin& t, uint32_t tile_rows) {
  const uint64_t k = c.column_count;
  REQUIRE(k >= 1);
  REQUIRE(c.tile_rows == tile_rows);
  REQUIRE(c.tile_count == (t.n_rows + tile_rows - 1) / tile_rows);
  std::vector<uint32_t> tile_cells{0}, cell_column, cell_ptr{0}, rows;
  std::vector<float> values;
  for (uint64_t x = 0; x < k; ++x) {
    const uint64_t id = c.column_ids[x];
    REQUIRE(t.columns.count(id) == 1);  // only non-empty columns are listed
    REQUIRE(id >= c.first_column);
    REQUIRE(id < c.end_column);
    if (x > 0) REQUIRE(id > c.column_ids[x - 1]);
    auto [lo, hi] = twin_range(t, id);
    REQUIRE(c.col_min[x] == lo);
    REQUIRE(c.col_max[x] == hi);
  }
  for (uint32_t tile = 0; tile < c.tile_count; ++tile) {
    const uint64_t begin = uint64_t{tile} * tile_rows, end = begin + tile_rows;
    for (uint64_t x = 0; x < k; ++x) {
      bool any = false;
      for (auto [r, v] : t.columns.at(c.column_ids[x]))
        if (r >= begin && r < end) {
          rows.push_back(r);
          values.push_back(v);
          any = true;
        }
      if (any) {
        cell_column.push_back(static_cast<uint32_t>(x));
        cell_ptr.push_back(static_cast<uint32_t>(rows.size()));
      }
    }
    tile_cells.push_back(static_cast<uint32_t>(cell_column.size()));
  }
  REQUIRE(std::vector<uint32_t>(c.tile_cells, c.tile_cells + c.tile_count + 1) == tile_cells);
  REQUIRE(c.cell_count() == cell_column.size());
  REQUIRE(std::vector<uint32_t>(c.cell_column, c.cell_column + c.cell_count()) == cell_column);
  REQUIRE(std::vector<uint32_t>(c.cell_ptr, c.cell_ptr + c.cell_count() + 1) == cell_ptr);
  REQUIRE(c.nnz() == rows.size());
  REQUIRE(std::vector<uint32_t>(c.row_ids, c.row_ids + c.nnz()) == rows);
  REQUIRE(std::vector<float>(c.values, c.values + c.nnz()) == values);
}

// Every block (alone and grouped), and the column and range of every id (of
// the ids the twin lists and those around them, when the id space is huge).
void check_store_against_twin(const ShardStore& store, const Twin& t, uint32_t tile_rows) {
  const StoreInfo& info = store.info();
  REQUIRE(info.n_rows == t.n_rows);
  REQUIRE(info.n_features == t.n_features);
  REQUIRE(info.nonempty_columns == t.columns.size());
  REQUIRE(info.tile_rows == tile_rows);
  uint64_t listed = 0;
  for (uint64_t target : {uint64_t{1}, uint64_t{2048}, uint64_t{1} << 30}) {
    listed = 0;
    BlockBuffer buffer;
    for (const BlockRef& ref : store.plan_blocks(target)) {
      ColumnBlock c = store.read_block(ref, buffer);
      check_block_against_twin(c, t, tile_rows);
      listed += c.column_count;
    }
    REQUIRE(listed == t.columns.size());
  }
  std::vector<uint64_t> ids;
  if (t.n_features <= 100000) {
    for (uint64_t j = 0; j < t.n_features; ++j) ids.push_back(j);
  } else {
    for (const auto& [j, column] : t.columns)
      for (uint64_t d : {uint64_t{0}, uint64_t{1}, uint64_t{2}})
        for (uint64_t id : {j - d, j + d})
          if (id < t.n_features) ids.push_back(id);
    ids.push_back(0);
    ids.push_back(t.n_features - 1);
  }
  std::vector<uint32_t> rows;
  std::vector<float> values;
  for (uint64_t j : ids) {
    INFO("column " << j);
    store.read_column(j, rows, values);
    auto it = t.columns.find(j);
    const size_t n = it == t.columns.end() ? 0 : it->second.size();
    REQUIRE(rows.size() == n);
    REQUIRE(values.size() == n);
    for (size_t e = 0; e < n; ++e) {
      REQUIRE(rows[e] == it->second[e].first);
      REQUIRE(values[e] == it->second[e].second);
    }
    auto [lo, hi] = twin_range(t, j);
    REQUIRE(store.column_min(j) == lo);
    REQUIRE(store.column_max(j) == hi);
  }
}

enum class Kind { kBinary, kInteger, kTied, kNegative };

// Random rows with empty rows, an empty id range and a column in every row.
std::string random_text(Kind kind, uint64_t rows, uint64_t width, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string text;
  for (uint64_t r = 0; r < rows; ++r) {
    text += rng() % 2 ? "+1" : "-1";
    if (r % 11 == 4) {  // an empty row
      text += "\n";
      continue;
    }
    std::vector<uint64_t> ids{1};
    for (int e = 0; e < 6; ++e) {
      uint64_t j = 2 + rng() % width;
      if (j >= width / 3 && j < width / 2) continue;  // never used: empty columns
      ids.push_back(j);
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (uint64_t j : ids) {
      std::string v;
      switch (kind) {
        case Kind::kBinary: v = "1"; break;
        case Kind::kInteger: v = std::to_string(1 + rng() % 9); break;
        case Kind::kTied: v = rng() % 2 ? "2.5" : "0.5"; break;
        case Kind::kNegative: v = fmt::format("{}", -static_cast<double>(1 + rng() % 64) / 8); break;
      }
      text += fmt::format(" {}:{}", j, v);
    }
    text += "\n";
  }
  return text;
}

uint64_t dir_bytes(const std::string& dir) {
  uint64_t bytes = 0;
  for (const auto& f : fs::directory_iterator(dir)) bytes += fs::file_size(f.path());
  return bytes;
}

}  // namespace

TEST_CASE("format 4 blocks, columns and ranges equal an in-memory twin", "[io][store][format4]") {
  test::TempDir dir("fgm-format4");
  MemoryBudget budget(64 << 20);
  const uint32_t tile_rows = GENERATE(1u, 3u, 64u, kDefaultTileRows);
  const Kind kind = GENERATE(Kind::kBinary, Kind::kInteger, Kind::kTied, Kind::kNegative);
  CAPTURE(tile_rows, static_cast<int>(kind));
  const std::string path =
      dir.write("t.svm", random_text(kind, tile_rows == 1 ? 60 : 300, 90, 11 + tile_rows));
  const uint64_t declared = 120;  // trailing empty columns too
  IngestOptions o;
  o.tile_rows = tile_rows;
  o.block_bytes = 1024;  // several stored blocks
  o.shard_target_bytes = 8 << 10;
  o.reader.declared_features = declared;
  ingest_libsvm(path, dir.file("s"), o, budget);
  auto store = ShardStore::open(dir.file("s"), budget);
  CHECK(store->info().block_count > 1);
  check_store_against_twin(*store, twin_of(path, declared), tile_rows);
}

TEST_CASE("a store of one tall column bigger than the shard buffer equals the twin",
          "[io][store][format4]") {
  // The writer streams such a column straight to disk; its cells are found
  // on the way.
  test::TempDir dir("fgm-format4");
  MemoryBudget budget(64 << 20);
  std::string text;
  for (int r = 0; r < 3000; ++r) text += fmt::format("{} 2:{} {}:1\n", r % 2 ? "+1" : "-1", r % 7 + 1, 5 + r % 4);
  const std::string path = dir.write("tall.svm", text);
  IngestOptions o;
  o.tile_rows = 100;
  o.shard_target_bytes = 4096;  // column 2 (24 KB) is a shard of its own
  o.block_bytes = 1024;
  IngestStats st = ingest_libsvm(path, dir.file("s"), o, budget);
  CHECK(st.shards >= 2);
  auto store = ShardStore::open(dir.file("s"), budget);
  check_store_against_twin(*store, twin_of(path), 100);
}

TEST_CASE("a hashed id 2^32+1 costs nothing: two rows, a store under 1 MB", "[io][store][format4]") {
  test::TempDir dir("fgm-format4");
  MemoryBudget budget(64 << 20);
  const std::string path = dir.write("hashed.svm", "+1 1:0.5 4294967297:2\n-1 3:1\n");
  auto t0 = std::chrono::steady_clock::now();
  IngestStats st = ingest_libsvm(path, dir.file("s"), IngestOptions{}, budget);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t bytes = dir_bytes(dir.file("s"));
  INFO("ingest " << seconds << " s, store " << bytes << " bytes");
  CHECK(st.n_features == 4294967297ull);
  CHECK(st.nonempty_columns == 3);
  CHECK(bytes < (1 << 20));
  auto store = ShardStore::open(dir.file("s"), budget);
  check_store_against_twin(*store, twin_of(path), kDefaultTileRows);
  // Spot checks at the ends of the hashed range.
  std::vector<uint32_t> rows;
  std::vector<float> values;
  store->read_column(4294967296ull, rows, values);
  CHECK(rows == std::vector<uint32_t>{0});
  CHECK(values == std::vector<float>{2});
  store->read_column(4294967295ull, rows, values);
  CHECK(rows.empty());
  CHECK(store->column_max(4294967296ull) == 2);
  CHECK(store->column_min(4294967296ull) == 0);
  CHECK(store->column_max(12345678) == 0);
}

TEST_CASE("ids up to 2^63-1 are stored; larger ones are an error naming the place",
          "[io][store][format4]") {
  test::TempDir dir("fgm-format4");
  MemoryBudget budget(64 << 20);
  const uint64_t top = (uint64_t{1} << 63) - 1;  // the largest id
  SECTION("1-based: index 2^63 is id 2^63-1") {
    const std::string path =
        dir.write("top.svm", "+1 1:1 9223372036854775807:3 9223372036854775808:4\n-1 2:1\n");
    IngestStats st = ingest_libsvm(path, dir.file("s"), IngestOptions{}, budget);
    CHECK(st.n_features == top + 1);
    auto store = ShardStore::open(dir.file("s"), budget);
    std::vector<uint32_t> rows;
    std::vector<float> values;
    store->read_column(top, rows, values);
    CHECK(values == std::vector<float>{4});
    store->read_column(top - 1, rows, values);
    CHECK(values == std::vector<float>{3});
    store->read_column(top - 2, rows, values);
    CHECK(rows.empty());
    CHECK(store->column_min(top) == 0);
    CHECK(store->column_max(top) == 4);
    CHECK(dir_bytes(dir.file("s")) < (1 << 20));
  }
  SECTION("1-based: index 2^63+1 is refused") {
    const std::string path = dir.write("over.svm", "+1 1:1\n-1 2:1 9223372036854775809:1\n");
    try {
      ingest_libsvm(path, dir.file("s"), IngestOptions{}, budget);
      FAIL("ingested an id of 2^63");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kInvalidInput);
      CHECK(std::string(e.what()).find("over.svm:2:8") != std::string::npos);
      CHECK(std::string(e.what()).find("too large") != std::string::npos);
    }
    CHECK_FALSE(fs::exists(dir.file("s")));
  }
  SECTION("0-based: index 2^63-1 is stored, 2^63 refused") {
    IngestOptions o;
    o.reader.index_base = 0;
    const std::string ok = dir.write("ok0.svm", "+1 0:1 9223372036854775807:2\n-1 1:1\n");
    IngestStats st = ingest_libsvm(ok, dir.file("s0"), o, budget);
    CHECK(st.n_features == top + 1);
    const std::string bad = dir.write("bad0.svm", "+1 0:1 9223372036854775808:2\n-1 1:1\n");
    try {
      ingest_libsvm(bad, dir.file("s1"), o, budget);
      FAIL("ingested an id of 2^63");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kInvalidInput);
      CHECK(std::string(e.what()).find("bad0.svm:1:8") != std::string::npos);
    }
  }
}

TEST_CASE("ids drawn from [0, 2^40) store within 1.5x of the same nonzeros with dense ids",
          "[io][store][format4]") {
  test::TempDir dir("fgm-format4");
  MemoryBudget budget(256 << 20);
  // 20,000 rows x ~10 nonzeros over 50,000 distinct ids: hashed ids spread
  // over 2^40, dense ids their ranks (same rows, same values, same order).
  std::mt19937_64 rng(5);
  std::vector<uint64_t> hashed(50000);
  for (auto& h : hashed) h = 1 + rng() % (uint64_t{1} << 40);
  std::vector<uint64_t> sorted = hashed;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::string wide, dense;
  for (int r = 0; r < 20000; ++r) {
    std::vector<uint64_t> picks;
    for (int e = 0; e < 10; ++e) picks.push_back(hashed[rng() % hashed.size()]);
    std::sort(picks.begin(), picks.end());
    picks.erase(std::unique(picks.begin(), picks.end()), picks.end());
    const std::string label = r % 3 ? "+1" : "-1";
    wide += label;
    dense += label;
    for (uint64_t h : picks) {
      const uint64_t rank = std::lower_bound(sorted.begin(), sorted.end(), h) - sorted.begin() + 1;
      const int v = 1 + static_cast<int>(h % 5);
      wide += fmt::format(" {}:{}", h, v);
      dense += fmt::format(" {}:{}", rank, v);
    }
    wide += "\n";
    dense += "\n";
  }
  IngestStats a = ingest_libsvm(dir.write("wide.svm", wide), dir.file("wide"), IngestOptions{}, budget);
  IngestStats b = ingest_libsvm(dir.write("dense.svm", dense), dir.file("dense"), IngestOptions{}, budget);
  REQUIRE(a.nnz == b.nnz);
  REQUIRE(a.nonempty_columns == b.nonempty_columns);
  const uint64_t wide_bytes = dir_bytes(dir.file("wide")), dense_bytes = dir_bytes(dir.file("dense"));
  INFO("2^40 ids: " << wide_bytes << " bytes, dense ids: " << dense_bytes << " bytes");
  CHECK(a.n_features > (uint64_t{1} << 39));
  CHECK(wide_bytes <= dense_bytes * 3 / 2);
  CHECK(wide_bytes >= dense_bytes);  // the same arrays; only the ids' values differ
}

// ----------------------------------------------------------------- crafted

namespace {

// One shard with one stored block, written with the writer's own header and
// manifest helpers and valid checksums everywhere: what a crafted file can
// look like. The block table entry is derived from the arrays' sizes.
struct CraftedBlock {
  uint64_t n_rows = 4;
  uint32_t tile_rows = 2;
  std::vector<uint64_t> column_ids{0, 1};
  std::vector<float> col_min{-1, 0}, col_max{2.5f, 4};
  std::vector<uint32_t> tile_cells{0, 2, 3};  // tile 0: columns 0, 1; tile 1: column 0
  std::vector<uint32_t> cell_column{0, 1, 0};
  std::vector<uint32_t> cell_ptr{0, 1, 2, 3};
  std::vector<uint32_t> rows{0, 1, 3};
  std::vector<float> values{2.5f, 4, -1};
  uint64_t n_features = 2;
  uint64_t entry_nnz = 0;  // nonzero: what the block table entry claims instead
  uint64_t shard_nnz = 0;  // nonzero: what the header and manifest claim instead
  uint64_t flags = 0;      // the block table entry's flags (values are then not written)
};

void write_crafted_store(const std::string& dir, const CraftedBlock& c) {
  fs::create_directories(dir);
  const uint64_t k = c.column_ids.size(), cells = c.cell_column.size(), nnz = c.rows.size();
  const uint64_t T = c.tile_cells.size() - 1;
  const bool unit = (c.flags & store::kBlockUnitValues) != 0;
  const store::BlockLayout bl = store::block_layout(k, cells, nnz, T, unit);
  const store::ShardLayout l = store::shard_layout(bl.bytes, 1);
  std::string raw(l.raw_bytes, '\0');
  auto put = [&](uint64_t at, const auto& v) {
    std::memcpy(raw.data() + at, v.data(), sizeof(v[0]) * v.size());
  };
  put(bl.row_ids, c.rows);
  if (!unit) put(bl.values, c.values);
  put(bl.column_ids, c.column_ids);
  put(bl.col_min, c.col_min);
  put(bl.col_max, c.col_max);
  put(bl.tile_cells, c.tile_cells);
  put(bl.cell_column, c.cell_column);
  put(bl.cell_ptr, c.cell_ptr);
  store::BlockEntry e{};
  e.first_column = c.column_ids.front();
  e.end_column = c.column_ids.back() + 1;
  if (e.end_column <= e.first_column) e.end_column = e.first_column + k;
  e.column_count = k;
  e.nnz = c.entry_nnz ? c.entry_nnz : nnz;
  e.offset = 0;
  e.bytes = bl.bytes;
  e.cell_count = static_cast<uint32_t>(cells);
  e.tile_count = static_cast<uint32_t>(T);
  e.flags = c.flags;
  std::memcpy(raw.data() + l.block_table, &e, sizeof(e));
  store::PieceHasher pieces;
  pieces.update(raw.data(), l.data_bytes);
  const std::vector<uint64_t> table = pieces.finish();
  std::memcpy(raw.data() + l.piece_table, table.data(), 8 * table.size());
  store::ShardHeaderFields h;
  h.first_column = e.first_column;
  h.end_column = e.end_column;
  h.column_count = k;
  h.nnz = c.shard_nnz ? c.shard_nnz : nnz;
  h.n_rows = c.n_rows;
  h.tile_rows = c.tile_rows;
  h.block_count = 1;
  h.raw_offset = store::shard_raw_offset();
  h.piece_table_checksum = xxh64(table.data(), 8 * table.size());
  std::vector<uint8_t> header = store::shard_header_bytes(h, l);
  std::string shard(header.begin(), header.end());
  shard.resize(h.raw_offset, '\0');
  shard += raw;
  const std::string shard_name = store::shard_file_name(0);
  std::ofstream(dir + "/" + shard_name, std::ios::binary) << shard;

  store::ManifestFields m;
  m.n_rows = c.n_rows;
  m.n_features = std::max(c.n_features, e.end_column);
  m.nnz = h.nnz;
  m.tile_rows = c.tile_rows;
  m.nonempty_columns = k;
  m.block_bytes = 1 << 20;
  m.block_count = 1;
  std::string labels(c.n_rows, '\0');
  for (uint64_t r = 0; r < c.n_rows; ++r) labels[r] = r % 2 == 0 ? 1 : -1;
  m.n_positive = (c.n_rows + 1) / 2;
  m.n_negative = c.n_rows / 2;
  m.shards.push_back({shard_name, e.first_column, e.end_column, k, h.nnz, 1, shard.size(),
                      xxh64(shard.data(), shard.size())});
  const std::vector<uint16_t> classes =
      store::class_indices_of_signs(reinterpret_cast<const int8_t*>(labels.data()), c.n_rows);
  m.class_values = {-1, 1};
  m.class_counts = {m.n_negative, m.n_positive};
  m.classes_checksum = xxh64(classes.data(), 2 * c.n_rows);
  m.labels_offset = store::align_up(store::manifest_bytes(m).size());
  m.labels_checksum = xxh64(labels.data(), labels.size());
  std::vector<uint8_t> bytes = store::manifest_bytes(m);
  std::string manifest(bytes.begin(), bytes.end());
  manifest.resize(m.labels_offset, '\0');
  manifest += labels;
  manifest.resize(store::classes_offset(m), '\0');
  manifest.append(reinterpret_cast<const char*>(classes.data()), 2 * c.n_rows);
  std::ofstream(dir + "/" + store::kManifestName, std::ios::binary) << manifest;
}

// Opens the crafted store and reads its block; returns the error text ("" if none).
std::string crafted_error(const std::string& dir) {
  MemoryBudget budget(64 << 20);
  try {
    auto store = ShardStore::open(dir, budget);
    BlockBuffer buffer;
    for (const auto& ref : store->plan_blocks(1 << 20)) store->read_block(ref, buffer);
    std::vector<uint32_t> rows;
    std::vector<float> values;
    store->read_column(0, rows, values);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kCorruption);
    CHECK(std::string(e.what()).find("shard-00000.fgs") != std::string::npos);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("read_block checks every bound of a crafted block before use", "[io][store][format4]") {
  test::TempDir dir("fgm-format4-crafted");
  SECTION("control: a sane crafted block reads back") {
    write_crafted_store(dir.file("sane"), CraftedBlock{});
    MemoryBudget budget(64 << 20);
    auto store = ShardStore::open(dir.file("sane"), budget);
    std::vector<uint32_t> rows;
    std::vector<float> values;
    store->read_column(0, rows, values);
    CHECK(rows == std::vector<uint32_t>{0, 3});
    CHECK(values == std::vector<float>{2.5f, -1});
    store->read_column(1, rows, values);
    CHECK(rows == std::vector<uint32_t>{1});
    CHECK(crafted_error(dir.file("sane")).empty());
  }
  auto broken = [&](const char* name, auto&& edit, const char* expected) {
    CraftedBlock c;
    edit(c);
    write_crafted_store(dir.file(name), c);
    const std::string error = crafted_error(dir.file(name));
    INFO(name << ": " << error);
    CHECK(error.find(expected) != std::string::npos);
  };
  broken("cell-column", [](CraftedBlock& c) { c.cell_column[2] = 2; }, "cell columns out of range");
  broken("cell-column-order", [](CraftedBlock& c) { c.cell_column = {1, 0, 0}; },
         "cell columns out of range");
  broken("cell-ptr", [](CraftedBlock& c) { c.cell_ptr = {0, 2, 1, 3}; }, "cell pointers out of range");
  broken("cell-ptr-end", [](CraftedBlock& c) { c.cell_ptr = {0, 1, 2, 2}; },
         "cell pointers out of range");
  broken("row-outside-tile", [](CraftedBlock& c) { c.rows = {2, 1, 3}; },
         "row ids outside their tile");
  broken("row-beyond-n", [](CraftedBlock& c) { c.rows = {0, 1, 4}; }, "row ids outside their tile");
  broken("rows-not-increasing", [](CraftedBlock& c) {
    c.cell_ptr = {0, 2, 3, 4};  // cell 0 holds rows 1, 0
    c.rows = {1, 0, 1, 3};
    c.values = {2.5f, 4, 1, -1};
  }, "row ids outside their tile or not increasing");
  broken("empty-cell", [](CraftedBlock& c) {
    c.cell_ptr = {0, 2, 2, 3};
    c.rows = {0, 1, 3};
  }, "cell pointers out of range");
  broken("rows-repeated", [](CraftedBlock& c) {
    c.cell_column = {0, 1, 0};
    c.cell_ptr = {0, 1, 2, 4};
    c.rows = {0, 1, 3, 3};
    c.values = {2.5f, 4, -1, 1};
  }, "not increasing");
  broken("tile-cells", [](CraftedBlock& c) { c.tile_cells = {0, 3, 2}; }, "out of range");
  broken("tile-cells-start", [](CraftedBlock& c) { c.tile_cells = {1, 2, 3}; },
         "tile directory out of range");
  broken("column-ids", [](CraftedBlock& c) { c.column_ids = {1, 0}; }, "column ids out of order");
  broken("unknown-flag", [](CraftedBlock& c) { c.flags = 2; }, "inconsistent");
  broken("column-ids-equal", [](CraftedBlock& c) {
    c.column_ids = {0, 0};  // a range of one id cannot list two columns
    c.n_features = 5;
  }, "inconsistent");
}

// read_block scans rows, cell pointers and cell columns four entries at a
// time: long cells (and tiles of many cells) put every kind of fault in the
// vector part and in the scalar tail of the scan, at every position.
TEST_CASE("read_block checks long cells at every position", "[io][store][format4]") {
  test::TempDir dir("fgm-format4-long");
  // 64 rows in tiles of 32; column 0 dense (one 32-row cell per tile), column
  // 1 on rows 5 and 40, column 2 on the odd rows of tile 1.
  auto sane = [] {
    CraftedBlock c;
    c.n_rows = 64;
    c.tile_rows = 32;
    c.column_ids = {0, 1, 2};
    c.col_min = {0, 0, 0};
    c.col_max = {1, 1, 1};
    c.n_features = 3;
    c.rows.clear();
    c.values.clear();
    c.cell_column.clear();
    c.cell_ptr = {0};
    c.tile_cells = {0};
    auto cell = [&](uint32_t column, std::vector<uint32_t> rows) {
      c.cell_column.push_back(column);
      for (uint32_t r : rows) {
        c.rows.push_back(r);
        c.values.push_back(1);
      }
      c.cell_ptr.push_back(static_cast<uint32_t>(c.rows.size()));
    };
    std::vector<uint32_t> tile0, tile1, odd;
    for (uint32_t r = 0; r < 32; ++r) tile0.push_back(r);
    for (uint32_t r = 32; r < 64; ++r) tile1.push_back(r);
    for (uint32_t r = 33; r < 64; r += 2) odd.push_back(r);
    cell(0, tile0);
    cell(1, {5});
    c.tile_cells.push_back(static_cast<uint32_t>(c.cell_column.size()));
    cell(0, tile1);
    cell(1, {40});
    cell(2, odd);
    c.tile_cells.push_back(static_cast<uint32_t>(c.cell_column.size()));
    return c;
  };
  {
    write_crafted_store(dir.file("sane"), sane());
    CHECK(crafted_error(dir.file("sane")).empty());
    MemoryBudget budget(64 << 20);
    auto store = ShardStore::open(dir.file("sane"), budget);
    std::vector<uint32_t> rows;
    std::vector<float> values;
    store->read_column(0, rows, values);
    CHECK(rows.size() == 64);
  }
  int cases = 0;
  auto expect = [&](const CraftedBlock& c, const char* expected) {
    const std::string name = "case-" + std::to_string(cases++);
    write_crafted_store(dir.file(name), c);
    const std::string error = crafted_error(dir.file(name));
    INFO(name << ": " << error);
    CHECK(error.find(expected) != std::string::npos);
  };
  const uint32_t nnz = static_cast<uint32_t>(sane().rows.size());
  for (uint32_t p = 1; p < nnz; ++p) {
    // A row equal to the one before it: a repeat inside a cell, or across a
    // cell boundary (allowed there only when the rows are in different cells).
    CraftedBlock c = sane();
    c.rows[p] = c.rows[p - 1];
    const bool cell_start = std::find(c.cell_ptr.begin(), c.cell_ptr.end(), p) != c.cell_ptr.end();
    if (!cell_start) expect(c, "row ids outside their tile or not increasing");
    // A row beyond its tile (the next tile's first row).
    c = sane();
    const uint32_t tile = c.rows[p] / 32;
    c.rows[p] = (tile + 1) * 32;
    expect(c, "row ids outside their tile or not increasing");
  }
  for (uint32_t x = 0; x < sane().cell_column.size(); ++x) {
    CraftedBlock c = sane();
    c.cell_column[x] = 3;  // beyond the listed columns
    expect(c, "cell columns out of range");
  }
  for (uint32_t x = 1; x < sane().cell_ptr.size() - 1; ++x) {
    CraftedBlock c = sane();
    c.cell_ptr[x] = c.cell_ptr[x - 1];  // an empty cell
    expect(c, "out of range");
  }
  CHECK(cases > 100);
}

TEST_CASE("counts that overflow the file are rejected at open", "[io][store][format4]") {
  test::TempDir dir("fgm-format4-crafted");
  auto open_error = [&](const std::string& name) -> std::string {
    MemoryBudget budget(64 << 20);
    try {
      ShardStore::open(dir.file(name), budget);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kCorruption);
      return e.what();
    }
    return "";
  };
  SECTION("the block table entry claims 2^40 nonzeros") {
    CraftedBlock c;
    c.entry_nnz = uint64_t{1} << 40;
    write_crafted_store(dir.file("entry"), c);
    CHECK(open_error("entry").find("block 0 of the block table is inconsistent") !=
          std::string::npos);
  }
  SECTION("the shard header, manifest and entry all claim 2^61 nonzeros") {
    CraftedBlock c;
    c.entry_nnz = uint64_t{1} << 61;
    c.shard_nnz = uint64_t{1} << 61;
    write_crafted_store(dir.file("all"), c);
    CHECK(open_error("all").find("counts do not fit") != std::string::npos);
  }
}

// Ingest leaves room for the writer before it sizes the final merge's run
// buffers (an 8 MB ingest of many runs failed when the block layout was not
// counted): peak_bytes must cover every reservation the writer makes, through
// shards written and finished, for tile counts from one to many.
TEST_CASE("StoreWriter::peak_bytes covers what the writer reserves", "[io][store][budget]") {
  test::TempDir dir("fgm-writer-peak");
  for (uint32_t tile_rows : {3u, 64u, 65536u}) {
    CAPTURE(tile_rows);
    store::StoreWriterOptions o;
    o.n_rows = 5000;
    o.tile_rows = tile_rows;
    o.shard_target_bytes = 64 << 10;
    o.block_target_bytes = 16 << 10;
    o.io_bytes = 16 << 10;
    MemoryBudget budget(64 << 20);
    const std::string target = dir.file(fmt::format("store-{}", tile_rows));
    {
      store::TempDir tmp(target);
      store::StoreWriter writer(tmp, budget, o);
      std::mt19937_64 rng(tile_rows);
      std::vector<uint32_t> rows;
      std::vector<float> values;
      for (uint64_t id = 0; id < 3000; id += 1 + rng() % 3) {
        rows.clear();
        values.clear();
        for (uint32_t r = static_cast<uint32_t>(rng() % 7); r < o.n_rows; r += 1 + static_cast<uint32_t>(rng() % 400)) {
          rows.push_back(r);
          values.push_back(static_cast<float>(rng() % 4));  // binary, integer and tied values
        }
        if (!rows.empty()) writer.add_column(id, rows.data(), values.data(), rows.size());
      }
      store::WrittenShards w = writer.finish();
      REQUIRE(w.shards.size() > 3);  // several shard files were written
    }
    REQUIRE(budget.peak() <= store::StoreWriter::peak_bytes(o));
    REQUIRE(budget.used() == 0);
  }
}

// ------------------------------------------------------ unit-valued blocks

TEST_CASE("a unit-valued crafted block reads as ones", "[io][store][format4]") {
  test::TempDir dir("fgm-format5-crafted");
  CraftedBlock c;
  c.flags = store::kBlockUnitValues;
  c.values = {1, 1, 1};
  c.col_min = {0, 0};
  c.col_max = {1, 1};
  write_crafted_store(dir.file("unit"), c);
  MemoryBudget budget(64 << 20);
  auto store = ShardStore::open(dir.file("unit"), budget);
  BlockBuffer buffer;
  const std::vector<BlockRef> refs = store->plan_blocks(1 << 20);
  REQUIRE(refs.size() == 1);
  const ColumnBlock block = store->read_block(refs[0], buffer);
  REQUIRE(block.nnz() == 3);
  for (uint64_t q = 0; q < block.nnz(); ++q) CHECK(block.values[q] == 1.0f);
  std::vector<uint32_t> rows;
  std::vector<float> values;
  store->read_column(0, rows, values);
  CHECK(rows == std::vector<uint32_t>{0, 3});
  CHECK(values == std::vector<float>{1, 1});
}

namespace {

// Σ_i a_i x_ij per column over every block, in the store's own block order.
std::map<uint64_t, double> column_sums(const ShardStore& store, const std::vector<double>& a) {
  std::map<uint64_t, double> sums;
  BlockBuffer buffer;
  for (const BlockRef& ref : store.plan_blocks(1 << 20)) {
    const ColumnBlock c = store.read_block(ref, buffer);
    for (uint32_t t = 0; t < c.tile_count; ++t)
      for (uint32_t x = c.tile_cells[t]; x < c.tile_cells[t + 1]; ++x)
        for (uint32_t q = c.cell_ptr[x]; q < c.cell_ptr[x + 1]; ++q)
          sums[c.column_ids[c.cell_column[x]]] += a[c.row_ids[q]] * static_cast<double>(c.values[q]);
  }
  return sums;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size())
    text.replace(at, from.size(), to);
  return text;
}

}  // namespace

TEST_CASE("binary columns are stored without values: 4 bytes a nonzero less, the same sums",
          "[io][store][format4]") {
  // The twin: the same text with every value 2 (a store that keeps its
  // values). Doubling is exact in floating point, so every column sum of the
  // unit-valued store is exactly half the twin's.
  test::TempDir dir("fgm-format5-unit");
  MemoryBudget budget(64 << 20);
  const uint32_t tile_rows = GENERATE(3u, kDefaultTileRows);
  const std::string ones = random_text(Kind::kBinary, 400, 90, 5);
  const std::string twos = replace_all(ones, ":1 ", ":2 ");
  const std::string twos_eol = replace_all(twos, ":1\n", ":2\n");
  IngestOptions o;
  o.tile_rows = tile_rows;
  o.block_bytes = 1024;
  o.shard_target_bytes = 8 << 10;
  ingest_libsvm(dir.write("ones.svm", ones), dir.file("ones"), o, budget);
  ingest_libsvm(dir.write("twos.svm", twos_eol), dir.file("twos"), o, budget);
  auto unit = ShardStore::open(dir.file("ones"), budget);
  auto kept = ShardStore::open(dir.file("twos"), budget);
  CHECK(unit->info().format_version == kStoreFormatVersion);
  check_store_against_twin(*unit, twin_of(dir.file("ones.svm")), tile_rows);
  check_store_against_twin(*kept, twin_of(dir.file("twos.svm")), tile_rows);
  const uint64_t nnz = unit->info().nnz;
  REQUIRE(kept->info().nnz == nnz);
  // Each block drops its values array (64-byte aligned, so up to 63 bytes of
  // padding per block less or more).
  const uint64_t saved = kept->info().shard_bytes - unit->info().shard_bytes;
  CHECK(saved + 64 * unit->info().block_count >= 4 * nnz);
  CHECK(saved <= 4 * nnz + 64 * unit->info().block_count);
  std::mt19937_64 rng(3);
  std::vector<double> a(unit->info().n_rows);
  for (double& v : a) v = std::uniform_real_distribution<double>(-1, 1)(rng);
  const auto u = column_sums(*unit, a), k = column_sums(*kept, a);
  REQUIRE(u.size() == k.size());
  for (const auto& [j, s] : u) {
    INFO("column " << j);
    CHECK(2 * s == k.at(j));
  }
}

TEST_CASE("a tall column streamed to disk keeps its values exactly, ones held back or not",
          "[io][store][format4]") {
  // The writer holds back leading ones of a column bigger than the shard
  // buffer; a later other value must write them first, in place.
  test::TempDir dir("fgm-format5-tall");
  MemoryBudget budget(64 << 20);
  const int other_at = GENERATE(-1, 0, 1, 1023, 1024, 1025, 2999);
  CAPTURE(other_at);
  std::string text;
  for (int r = 0; r < 3000; ++r)
    text += fmt::format("{} 2:{} {}:1\n", r % 2 ? "+1" : "-1", r == other_at ? "0.5" : "1", 5 + r % 4);
  const std::string path = dir.write("tall.svm", text);
  IngestOptions o;
  o.tile_rows = 100;
  o.shard_target_bytes = 4096;  // column 2 is a shard of its own
  o.block_bytes = 1024;
  IngestStats st = ingest_libsvm(path, dir.file("s"), o, budget);
  CHECK(st.shards >= 2);
  auto store = ShardStore::open(dir.file("s"), budget);
  check_store_against_twin(*store, twin_of(path), 100);
}

TEST_CASE("a format 4 store written by an earlier fgm still reads, equal to its text",
          "[io][store][format4]") {
  const std::string fixture = std::string(FGM_SOURCE_DIR) + "/tests/io/data/format4";
  MemoryBudget budget(64 << 20);
  auto old_store = ShardStore::open(fixture, budget);
  CHECK(old_store->info().format_version == 4);
  const Twin twin = twin_of(fixture + "/source.svm");
  check_store_against_twin(*old_store, twin, 16);
  // The same text ingested now: format 5, its binary blocks without values.
  test::TempDir dir("fgm-format4-again");
  IngestOptions o;
  o.tile_rows = 16;
  o.block_bytes = 512;
  ingest_libsvm(fixture + "/source.svm", dir.file("s"), o, budget);
  auto new_store = ShardStore::open(dir.file("s"), budget);
  CHECK(new_store->info().format_version == kStoreFormatVersion);
  CHECK(new_store->info().shard_bytes < old_store->info().shard_bytes);
  check_store_against_twin(*new_store, twin, 16);
}

// ---------------------------------------------------------------- format 6

namespace {

// The block table of a store's shard file, as written.
std::vector<store::BlockEntry> block_table_of(const std::string& shard_path, uint64_t& raw_offset) {
  std::ifstream in(shard_path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  store::Preamble pre{};
  std::memcpy(&pre, file.data(), sizeof(pre));
  const auto* h = schema::GetSizePrefixedShardHeader(file.data() + sizeof(pre));
  raw_offset = h->raw_offset();
  std::vector<store::BlockEntry> table(h->block_count());
  std::memcpy(table.data(), file.data() + raw_offset + h->block_table_offset(),
              sizeof(store::BlockEntry) * table.size());
  return table;
}

}  // namespace

TEST_CASE("format 6: heads and tails equal the twin, read whole and in parts, bounds hold",
          "[io][store][format6]") {
  for (Kind kind : {Kind::kBinary, Kind::kInteger, Kind::kTied, Kind::kNegative}) {
    CAPTURE(static_cast<int>(kind));
    test::TempDir dir("fgm-format6");
    // Column 1 in every row (a head column), the others ~100 nonzeros each:
    // below the default tail threshold, 16 a tile (20 tiles: 320).
    const std::string path = dir.write("d.svm", random_text(kind, 1000, 60, 11 + static_cast<int>(kind)));
    const Twin twin = twin_of(path);
    MemoryBudget budget(64 << 20);
    IngestOptions o;
    o.tile_rows = 50;
    o.block_bytes = 16 << 10;  // column 1 shares a block with the rare ones
    ingest_libsvm(path, dir.file("s"), o, budget);
    auto store = ShardStore::open(dir.file("s"), budget);
    REQUIRE(store->info().format_version == 6);
    check_store_against_twin(*store, twin, 50);
    const uint64_t tail_below = 16 * 20;
    uint64_t tails = 0;
    for (uint64_t target : {uint64_t{1}, uint64_t{2048}, uint64_t{1} << 30}) {
      for (const BlockRef& ref : store->plan_blocks(target)) {
        if (!ref.has_tail) continue;
        ++tails;
        BlockBuffer whole_buffer, buffer;
        const ColumnBlock whole = store->read_block(ref, whole_buffer);
        const ColumnBlock head = store->read_part(ref, BlockPart::kHead, buffer);
        const ColumnBlock tail = store->read_part(ref, BlockPart::kTail, buffer);
        REQUIRE(buffer.capacity() >= ref.read_bytes);
        check_block_against_twin(head, twin, 50);  // the head's view outlives the tail's read
        check_block_against_twin(tail, twin, 50);
        REQUIRE(tail.column_count == ref.tail_columns);
        REQUIRE(head.column_count + tail.column_count == whole.column_count);
        std::vector<uint64_t> ids(head.column_ids, head.column_ids + head.column_count);
        ids.insert(ids.end(), tail.column_ids, tail.column_ids + tail.column_count);
        std::sort(ids.begin(), ids.end());
        REQUIRE(ids == std::vector<uint64_t>(whole.column_ids, whole.column_ids + whole.column_count));
        // One stored block: its head is its popular columns (grouped with
        // others, the head read holds every entry that is not a tail).
        if (ref.block_count == 2)
          for (uint64_t k = 0; k < head.column_count; ++k)
            REQUIRE(twin.columns.at(head.column_ids[k]).size() >= tail_below);
        for (uint64_t k = 0; k < tail.column_count; ++k) {
          const auto& col = twin.columns.at(tail.column_ids[k]);
          REQUIRE(col.size() < tail_below);
          auto [lo, hi] = twin_range(twin, tail.column_ids[k]);
          const double x_max = std::max(std::fabs(double{lo}), std::fabs(double{hi}));
          REQUIRE(static_cast<double>(col.size()) * x_max <= ref.tail_bound);
        }
      }
    }
    CHECK(tails > 0);
  }
}

TEST_CASE("format 6: a changed tail is refused when read, whole or as a part", "[io][store][format6]") {
  test::TempDir dir("fgm-format6-changed");
  const std::string path = dir.write("d.svm", random_text(Kind::kInteger, 1000, 60, 5));
  MemoryBudget budget(64 << 20);
  IngestOptions o;
  o.tile_rows = 50;
  o.block_bytes = 16 << 10;  // column 1 shares a block with the rare ones
  ingest_libsvm(path, dir.file("s"), o, budget);
  auto store = ShardStore::open(dir.file("s"), budget);
  const std::string shard = dir.file("s") + "/" + store::shard_file_name(0);
  uint64_t raw = 0;
  const std::vector<store::BlockEntry> table = block_table_of(shard, raw);
  uint64_t tail_entry = table.size();
  for (uint64_t b = 0; b < table.size(); ++b)
    if (table[b].tail_part() && tail_entry == table.size()) tail_entry = b;
  REQUIRE(tail_entry < table.size());
  REQUIRE(table[tail_entry].tail_bound() > 0);
  const BlockRef* ref = nullptr;
  const auto refs = store->plan_blocks(1);
  for (const BlockRef& r : refs)
    if (r.shard == 0 && r.first_block + 1 == tail_entry) ref = &r;
  REQUIRE(ref != nullptr);
  REQUIRE(ref->has_tail);
  // The tail's first row id, changed in place (a later write: a new ctime).
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    const auto at = static_cast<std::streamoff>(raw + table[tail_entry].offset);
    f.seekg(at);
    uint32_t row = 0;
    f.read(reinterpret_cast<char*>(&row), 4);
    row ^= 1;
    f.seekp(at);
    f.write(reinterpret_cast<const char*>(&row), 4);
  }
  auto expect_refused = [&](auto&& read) {
    try {
      read();
      FAIL("the changed tail was read");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kCorruption);
      CHECK(std::string(e.what()).find("shard-00000.fgs") != std::string::npos);
    }
  };
  BlockBuffer buffer;
  expect_refused([&] { store->read_block(*ref, buffer); });
  expect_refused([&] {
    store->read_part(*ref, BlockPart::kHead, buffer);
    store->read_part(*ref, BlockPart::kTail, buffer);
  });
  // Opening it again: the shard's checksums no longer match.
  MemoryBudget again(64 << 20);
  expect_refused([&] { ShardStore::open(dir.file("s"), again); });
}

TEST_CASE("format 6: a tail entry out of place is refused at open", "[io][store][format6]") {
  // A crafted block table entry flagged as a tail with nothing before it.
  test::TempDir dir("fgm-format6-crafted");
  CraftedBlock c;
  c.flags = store::kBlockTailPart | (uint64_t{store::tail_bound_bits(4.0)} << 32);
  write_crafted_store(dir.file("s"), c);
  const std::string e = crafted_error(dir.file("s"));
  CHECK(e.find("tail part") != std::string::npos);
}

TEST_CASE("a format 5 store written by an earlier fgm still reads, equal to its text", "[io][store][format5]") {
  const std::string fixture = std::string(FGM_SOURCE_DIR) + "/tests/io/data/format5";
  MemoryBudget budget(64 << 20);
  auto old_store = ShardStore::open(fixture, budget);
  CHECK(old_store->info().format_version == 5);
  check_store_against_twin(*old_store, twin_of(fixture + "/source.svm"), 16);
}
