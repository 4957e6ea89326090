#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/hash.h"
#include "core/messages.h"
#include "io/compressed_input.h"
#include "io/libsvm_reader.h"

using namespace fgm;
namespace fs = std::filesystem;

namespace {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    std::random_device rd;
    path_ = fs::temp_directory_path() /
            ("fgm_reader_test_" + std::to_string(::getpid()) + "_" +
             std::to_string(counter++) + "_" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  REQUIRE(out.good());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string shell_quote(const std::string& s) { return "'" + s + "'"; }

// Compresses `plain` with the system tool into `out` (keeps `plain`).
void compress_with(const std::string& tool, const std::string& plain, const std::string& out) {
  std::string cmd = tool + " -c " + shell_quote(plain) + " > " + shell_quote(out);
  REQUIRE(std::system(cmd.c_str()) == 0);
}

std::string command_output(const std::string& cmd) {
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  REQUIRE(::pclose(pipe) == 0);
  return out;
}

std::string data_file(const std::string& relative) {
  return std::string(FGM_SHARED_DATA_DIR) + "/" + relative;
}

// Everything parsed from a file, in CSR form.
struct Parsed {
  std::vector<double> labels;
  std::vector<uint64_t> lines;
  std::vector<uint32_t> label_columns;
  std::vector<uint64_t> row_ptr{0};
  std::vector<uint64_t> indices;
  std::vector<float> values;
  uint64_t explicit_zeros = 0;
  uint64_t beyond_declared = 0;
  uint64_t first_beyond_line = 0, first_beyond_index = 0;
  uint64_t width = 0;
  uint64_t chunks = 0;
  size_t rows() const { return labels.size(); }
  uint64_t nnz() const { return indices.size(); }
};

// Chunk source + parser, the way ingest uses them; throws like LibsvmReader.
Parsed parse_chunks(const std::string& path, ReaderOptions options = {}) {
  Parsed all;
  LibsvmChunkSource source(path, options.chunk_bytes);
  TextChunk text;
  ParsedChunk chunk;
  uint64_t expected_line = 1;
  while (source.next(text)) {
    REQUIRE(text.index == all.chunks);
    REQUIRE(text.first_line == expected_line);
    expected_line += std::count(text.text.begin(), text.text.end(), '\n');
    ++all.chunks;
    parse_libsvm_chunk(text, path, options, chunk);
    REQUIRE(chunk.index == text.index);
    REQUIRE(chunk.row_ptr.size() == chunk.rows() + 1);
    uint64_t base = all.indices.size();
    all.labels.insert(all.labels.end(), chunk.labels.begin(), chunk.labels.end());
    all.lines.insert(all.lines.end(), chunk.lines.begin(), chunk.lines.end());
    all.label_columns.insert(all.label_columns.end(), chunk.label_columns.begin(),
                             chunk.label_columns.end());
    for (size_t r = 1; r < chunk.row_ptr.size(); ++r) all.row_ptr.push_back(base + chunk.row_ptr[r]);
    all.indices.insert(all.indices.end(), chunk.indices.begin(), chunk.indices.end());
    all.values.insert(all.values.end(), chunk.values.begin(), chunk.values.end());
    all.explicit_zeros += chunk.explicit_zeros;
    if (chunk.beyond_declared > 0 && all.beyond_declared == 0) {
      all.first_beyond_line = chunk.first_beyond_line;
      all.first_beyond_index = chunk.first_beyond_index;
    }
    all.beyond_declared += chunk.beyond_declared;
    all.width = std::max(all.width, chunk.max_index_plus_one);
    if (!chunk.error.empty()) throw Error(ErrorKind::kInvalidInput, chunk.error);
  }
  return all;
}

// The same through LibsvmReader, row by row.
Parsed parse_rows(const std::string& path, ReaderOptions options = {}) {
  Parsed all;
  LibsvmReader reader(path, options);
  SparseRow row;
  while (reader.next(row)) {
    all.labels.push_back(row.label);
    all.lines.push_back(row.line);
    all.indices.insert(all.indices.end(), row.indices.begin(), row.indices.end());
    all.values.insert(all.values.end(), row.values.begin(), row.values.end());
    all.row_ptr.push_back(all.indices.size());
    if (!row.indices.empty()) all.width = std::max(all.width, row.indices.back() + 1);
  }
  REQUIRE(reader.rows_read() == all.rows());
  all.explicit_zeros = reader.explicit_zeros();
  all.beyond_declared = reader.beyond_declared();
  all.first_beyond_line = reader.first_beyond_line();
  all.first_beyond_index = reader.first_beyond_index();
  return all;
}

// An independent, slow, obviously-correct parser for well-formed text.
Parsed reference_parse(const std::string& text) {
  Parsed all;
  std::istringstream in(text);
  std::string line;
  uint64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream tokens(line);
    std::string token;
    if (!(tokens >> token)) continue;
    all.labels.push_back(std::strtod(token.c_str(), nullptr));
    all.lines.push_back(line_number);
    while (tokens >> token) {
      if (token.rfind("qid:", 0) == 0) continue;
      size_t colon = token.find(':');
      uint64_t index = std::stoull(token.substr(0, colon));
      double value = std::strtod(token.c_str() + colon + 1, nullptr);
      if (value == 0) {
        ++all.explicit_zeros;
        continue;
      }
      all.indices.push_back(index - 1);
      all.values.push_back(static_cast<float>(value));
      all.width = std::max(all.width, index);
    }
    all.row_ptr.push_back(all.indices.size());
  }
  return all;
}

template <typename T>
void require_same_vector(const std::vector<T>& a, const std::vector<T>& b, const char* what) {
  INFO(what);
  REQUIRE(a.size() == b.size());
  auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin());
  INFO("first difference at position " << (ia - a.begin()));
  REQUIRE(ia == a.end());
}

void require_same_rows(const Parsed& a, const Parsed& b) {
  require_same_vector(a.labels, b.labels, "labels");
  require_same_vector(a.lines, b.lines, "lines");
  require_same_vector(a.row_ptr, b.row_ptr, "row_ptr");
  require_same_vector(a.indices, b.indices, "indices");
  require_same_vector(a.values, b.values, "values");
  REQUIRE(a.explicit_zeros == b.explicit_zeros);
  REQUIRE(a.width == b.width);
}

// Runs `f` and returns the fgm::Error it throws (fails the test otherwise).
template <typename F>
Error capture_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("expected an fgm::Error");
  return Error(ErrorKind::kInternal, "");
}

std::string location_of(const std::string& path, uint64_t line, uint64_t column) {
  return path + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
}

// Two good lines and a blank one, then `bad` as line 4: exercises line counting.
std::string with_good_prefix(const std::string& bad) {
  return "+1 1:0.5 3:2\n-1 2:1\n\n" + bad + "\n1 1:1\n";
}

// Parses `content` (as line 4 after with_good_prefix) with chunk source and row
// reader and several chunk sizes; each must fail with exactly `expected(path)`.
template <typename Expected>
void require_bad_line(const std::string& bad, Expected expected, ReaderOptions options = {}) {
  TempDir dir;
  std::string path = dir.file("bad.svm");
  write_file(path, with_good_prefix(bad));
  std::string want = expected(path);
  for (uint64_t chunk_bytes : {uint64_t{5}, uint64_t{64}, uint64_t{4} << 20}) {
    options.chunk_bytes = chunk_bytes;
    INFO("line '" << bad << "', chunk_bytes " << chunk_bytes);
    Error e = capture_error([&] { parse_chunks(path, options); });
    REQUIRE(e.kind() == ErrorKind::kInvalidInput);
    REQUIRE(std::string(e.what()) == want);

    // The row reader delivers the two good rows first.
    LibsvmReader reader(path, options);
    SparseRow row;
    REQUIRE(reader.next(row));
    REQUIRE(reader.next(row));
    REQUIRE(row.line == 2);
    Error e2 = capture_error([&] { reader.next(row); });
    REQUIRE(e2.kind() == ErrorKind::kInvalidInput);
    REQUIRE(std::string(e2.what()) == want);
  }
}

// A few hundred KB of valid text with long and short lines.
std::string sample_text(size_t rows) {
  std::mt19937_64 rng(42);
  std::string text;
  for (size_t r = 0; r < rows; ++r) {
    text += (rng() % 2) ? "+1" : "-1";
    uint64_t index = 0;
    size_t nnz = rng() % 40;
    for (size_t k = 0; k < nnz; ++k) {
      index += 1 + rng() % 50;
      text += " " + std::to_string(index) + ":" + std::to_string((rng() % 20001) / 1000.0 - 10);
    }
    text += (r % 17 == 0) ? "\r\n" : "\n";
  }
  return text;
}

}  // namespace

// ---------------------------------------------------------------- format rules

TEST_CASE("reader parses the accepted LIBSVM variants", "[io][reader]") {
  TempDir dir;
  std::string path = dir.file("ok.svm");
  write_file(path,
             "# a comment line\n"
             "+1 1:0.5 3:2.5e1  \t 10:-4\n"    // line 2: tabs and double spaces
             "\n"                              // line 3: blank
             "   \t\n"                         // line 4: whitespace only
             "-1\n"                            // line 5: label only (a row without features)
             "1.000000  2:1 # trailing comment 3:x\n"  // line 6
             "1 qid:7 4:+0.25 5:.5 6:7.\r\n"   // line 7: CRLF, qid, '+' and '.' spellings
             "-1.0 1:0 2:0.0 3:-0 4:0e-999 5:-0.0e60 6:3\n"  // line 8: explicit zeros
             "1 7:1");                         // line 9: no final newline
  for (uint64_t chunk_bytes : {uint64_t{1}, uint64_t{3}, uint64_t{16}, uint64_t{1} << 20}) {
    ReaderOptions options;
    options.chunk_bytes = chunk_bytes;
    Parsed p = parse_chunks(path, options);
    INFO("chunk_bytes " << chunk_bytes);
    REQUIRE(p.labels == std::vector<double>{1, -1, 1, 1, -1, 1});
    REQUIRE(p.lines == std::vector<uint64_t>{2, 5, 6, 7, 8, 9});
    REQUIRE(p.row_ptr == std::vector<uint64_t>{0, 3, 3, 4, 7, 8, 9});
    REQUIRE(p.indices == std::vector<uint64_t>{0, 2, 9, 1, 3, 4, 5, 5, 6});
    REQUIRE(p.values == std::vector<float>{0.5f, 25.f, -4.f, 1.f, 0.25f, 0.5f, 7.f, 3.f, 1.f});
    REQUIRE(p.explicit_zeros == 5);  // 0, 0.0, -0, 0e-999, -0.0e60
    REQUIRE(p.width == 10);
    REQUIRE(p.label_columns == std::vector<uint32_t>{1, 1, 1, 1, 1, 1});

    Parsed rows = parse_rows(path, options);
    require_same_rows(p, rows);
  }
}

TEST_CASE("reader skips a UTF-8 byte order mark", "[io][reader]") {
  TempDir dir;
  std::string path = dir.file("bom.svm");
  write_file(path, "\xEF\xBB\xBF-1 2:1\n+1 1:1\n");
  Parsed p = parse_chunks(path);
  REQUIRE(p.rows() == 2);
  REQUIRE(p.indices == std::vector<uint64_t>{1, 0});
}

TEST_CASE("reader handles lines longer than the chunk size", "[io][reader]") {
  TempDir dir;
  std::string path = dir.file("long.svm");
  std::string long_line = "1";
  for (int i = 1; i <= 5000; ++i) long_line += " " + std::to_string(i) + ":" + std::to_string(i);
  std::string text = "-1 1:1\n" + long_line + "\n-1 3:1\n" + long_line;  // last one unterminated
  write_file(path, text);
  for (uint64_t chunk_bytes : {uint64_t{7}, uint64_t{100}, uint64_t{40000}}) {
    ReaderOptions options;
    options.chunk_bytes = chunk_bytes;
    Parsed p = parse_chunks(path, options);
    REQUIRE(p.rows() == 4);
    REQUIRE(p.nnz() == 10002);
    REQUIRE(p.lines == std::vector<uint64_t>{1, 2, 3, 4});
    REQUIRE(p.values.back() == 5000.f);
  }
  // Chunks hold whole lines; concatenated they are the file.
  LibsvmChunkSource source(path, 7);
  TextChunk chunk;
  std::string joined;
  while (source.next(chunk)) {
    REQUIRE(!chunk.text.empty());
    joined += chunk.text;
    if (joined.size() < text.size()) REQUIRE(chunk.text.back() == '\n');
  }
  REQUIRE(joined == text);
}

TEST_CASE("a line longer than max_line_bytes is an error naming it, read no further", "[io][reader]") {
  TempDir dir;
  std::string path = dir.file("long.svm");
  std::string line = "1";
  for (int i = 1; i <= 5000; ++i) line += " " + std::to_string(i) + ":1";  // about 34 KB
  write_file(path, "-1 1:1\n" + line + "\n" + line + line + line + "\n-1 2:1\n");
  for (uint64_t chunk_bytes : {uint64_t{7}, uint64_t{4096}, uint64_t{1} << 20}) {
    CAPTURE(chunk_bytes);
    ReaderOptions options;
    options.chunk_bytes = chunk_bytes;
    options.max_line_bytes = 2 * line.size();  // line 2 fits, line 3 (three times as long) does not
    options.max_line_key = "--memory-budget";
    LibsvmReader reader(path, options);
    SparseRow row;
    REQUIRE(reader.next(row));
    REQUIRE(reader.next(row));
    REQUIRE(row.line == 2);
    try {
      reader.next(row);
      FAIL("line 3 was read");
    } catch (const Error& e) {
      CAPTURE(e.what());
      REQUIRE(e.kind() == ErrorKind::kOutOfMemory);
      REQUIRE_THAT(e.what(), Catch::Contains("long.svm:3: the line is longer than") &&
                                 Catch::Contains("raise --memory-budget"));
    }
  }
  // The source holds at most max_line_bytes + 1 bytes of the line before it stops.
  LibsvmChunkSource source(path, 64, 1000);
  TextChunk chunk;
  REQUIRE(source.next(chunk));  // line 1
  REQUIRE_THROWS_AS(source.next(chunk), Error);
  REQUIRE(chunk.text.size() <= 1001);
}

TEST_CASE("reader reports each kind of bad input with file:line:column", "[io][reader]") {
  using P = const std::string&;
  // Index 0 with 1-based indices; negative index.
  require_bad_line("1 2:1 0:1", [](P f) { return msg::index_below_base(f, 4, 7, "0:1", 1); });
  require_bad_line("1 -3:1", [](P f) { return msg::index_below_base(f, 4, 3, "-3:1", 1); });
  // Order within a row.
  require_bad_line("1 3:1  2:1", [](P f) { return msg::index_not_increasing(f, 4, 8, 2, 3); });
  require_bad_line("1 3:1 3:2", [](P f) { return msg::duplicate_index(f, 4, 7, 3); });
  // Non-finite values: NaN, Inf.
  for (const char* token : {"2:nan", "2:NaN", "2:inf", "2:-Infinity"}) {
    std::string t = token;
    require_bad_line("-1 1:1 " + t, [&](P f) { return msg::non_finite_value(f, 4, 8, t); });
  }
  // Finite numbers beyond float32 (issue 23 item 7): double overflow, float
  // overflow; not "NaN or Inf".
  for (const char* token : {"2:1e999", "2:1e39", "2:1e200", "2:-3.5e38"}) {
    std::string t = token;
    require_bad_line("-1 1:1 " + t, [&](P f) { return msg::value_beyond_float_range(f, 4, 8, t); });
  }
  // Nonzero values that float32 would round to 0 are refused, not dropped:
  // double underflow, the smallest double denormal, below float's denormals.
  for (const char* token : {"2:1e-999", "2:4.9e-324", "2:1e-300", "2:-1e-60", "2:7e-46"}) {
    std::string t = token;
    require_bad_line("-1 1:1 " + t, [&](P f) { return msg::value_below_float_range(f, 4, 8, t); });
  }
  // Non-numeric index or value.
  for (const char* token : {"a:1", "2:abc", "2:1x", "2:", ":1", "2:1:3", "1.5:2", "+2:1", "2:--1"}) {
    std::string t = token;
    require_bad_line("1 " + t, [&](P f) { return msg::non_numeric_token(f, 4, 3, t); });
  }
  require_bad_line("1 99999999999999999999999:1", [](P f) {
    return msg::non_numeric_token(f, 4, 3, "99999999999999999999999:1");
  });
  // Labels.
  for (const char* label : {"abc", "1:1", "nan", "inf", "+-1", "1e999", "--1", "1,5"}) {
    std::string l = label;
    require_bad_line("  " + l + " 2:1", [&](P f) { return msg::bad_label(f, 4, 3, l); });
  }
  // Tokens without ':'.
  require_bad_line("1 2 3:1", [](P f) { return msg::missing_colon(f, 4, 3, "2"); });
  require_bad_line("1 1:1\tqid", [](P f) { return msg::missing_colon(f, 4, 7, "qid"); });
  // Errors after a CRLF line keep counting columns from the line start.
  require_bad_line("1 1:1 1:1\r", [](P f) { return msg::duplicate_index(f, 4, 7, 1); });
  // Declared width.
  ReaderOptions declared;
  declared.declared_features = 5;
  require_bad_line("1 5:1 6:1", [](P f) { return msg::index_beyond_declared(f, 4, 7, 6, 5); },
                   declared);
}

TEST_CASE("reader truncates very long offending tokens in messages", "[io][reader]") {
  TempDir dir;
  std::string path = dir.file("junk.svm");
  write_file(path, "1 " + std::string(100000, 'x') + "\n");
  Error e = capture_error([&] { parse_chunks(path); });
  REQUIRE(e.kind() == ErrorKind::kInvalidInput);
  REQUIRE(std::string(e.what()).size() < 300);
  REQUIRE(std::string(e.what()).find(location_of(path, 1, 3)) == 0);
}

TEST_CASE("reader finds the right line of an error deep in a file", "[io][reader]") {
  TempDir dir;
  std::string path = dir.file("deep.svm");
  std::string text = sample_text(3000);
  text += "1 5:1 4:1\n";  // line 3001
  text += sample_text(10);
  write_file(path, text);
  for (uint64_t chunk_bytes : {uint64_t{64}, uint64_t{4096}, uint64_t{1} << 22}) {
    ReaderOptions options;
    options.chunk_bytes = chunk_bytes;
    Error e = capture_error([&] { parse_chunks(path, options); });
    REQUIRE(std::string(e.what()) == msg::index_not_increasing(path, 3001, 7, 4, 5));
    LibsvmReader reader(path, options);
    SparseRow row;
    uint64_t rows = 0;
    Error e2 = capture_error([&] {
      while (reader.next(row)) ++rows;
    });
    REQUIRE(rows == 3000);
    REQUIRE(std::string(e2.what()) == std::string(e.what()));
  }
}

TEST_CASE("reader supports 0-based indices", "[io][reader]") {
  TempDir dir;
  std::string path = dir.file("zero.svm");
  write_file(path, "1 0:1 2:3\n-1 1:2\n");
  ReaderOptions options;
  options.index_base = 0;
  Parsed p = parse_rows(path, options);
  REQUIRE(p.indices == std::vector<uint64_t>{0, 2, 1});
  REQUIRE(p.width == 3);
  // The same file is an error when read 1-based.
  Error e = capture_error([&] { parse_rows(path); });
  REQUIRE(std::string(e.what()) == msg::index_below_base(path, 1, 3, "0:1", 1));
  // 0-based with a declared width: index 3 is the fourth column of 3.
  write_file(path, "1 0:1 2:3\n-1 3:2\n");
  options.declared_features = 3;
  e = capture_error([&] { parse_rows(path, options); });
  REQUIRE(std::string(e.what()) == msg::index_beyond_declared(path, 2, 4, 3, 3));
}

TEST_CASE("reader checks and ignores indices beyond the declared width", "[io][reader]") {
  TempDir dir;
  std::string path = dir.file("wide.svm");
  write_file(path, "1 1:1 3:1\n-1 2:1 4:1 9:2\n1 4:0\n-1 1:1\n");
  ReaderOptions options;
  options.declared_features = 3;
  Error e = capture_error([&] { parse_rows(path, options); });
  REQUIRE(e.kind() == ErrorKind::kInvalidInput);
  REQUIRE(std::string(e.what()) == msg::index_beyond_declared(path, 2, 8, 4, 3));

  options.ignore_beyond_declared = true;
  for (uint64_t chunk_bytes : {uint64_t{4}, uint64_t{1} << 20}) {
    options.chunk_bytes = chunk_bytes;
    Parsed p = parse_rows(path, options);
    REQUIRE(p.rows() == 4);
    REQUIRE(p.indices == std::vector<uint64_t>{0, 2, 1, 0});
    REQUIRE(p.beyond_declared == 3);
    REQUIRE(p.first_beyond_line == 2);
    REQUIRE(p.first_beyond_index == 3);  // 0-based
    Parsed c = parse_chunks(path, options);
    REQUIRE(c.beyond_declared == 3);
    REQUIRE(c.first_beyond_line == 2);
    REQUIRE(c.first_beyond_index == 3);
    REQUIRE(c.width == 3);
  }
  // Exactly the declared width is fine.
  write_file(path, "1 3:1\n");
  options.ignore_beyond_declared = false;
  REQUIRE(parse_rows(path, options).width == 3);
}

// ---------------------------------------------------------------- labels

TEST_CASE("label map compares numerically and orders classes by value", "[io][reader][labels]") {
  LabelMap map;
  REQUIRE(map.observe(-1.0, "f", 1, 1) == 0);
  REQUIRE(map.classes() == 1);
  REQUIRE(map.observe(1.0, "f", 2, 1) == 1);
  REQUIRE(map.observe(-1.0, "f", 3, 1) == 0);
  REQUIRE(map.classes() == 2);
  REQUIRE(map.first() == -1.0);
  REQUIRE(map.second() == 1.0);
  REQUIRE(map.positive_value() == 1.0);
  REQUIRE(map.negative_value() == -1.0);
  REQUIRE(map.sign_of_slot(0) == -1);
  REQUIRE(map.sign_of_slot(1) == 1);
  // A third label is a third class (slot in appearance order, class by value).
  REQUIRE(map.observe(0.5, "f", 4, 1) == 2);
  REQUIRE(map.classes() == 3);
  REQUIRE(map.class_values() == std::vector<double>{-1, 0.5, 1});
  REQUIRE(map.class_of_slot(0) == 0);
  REQUIRE(map.class_of_slot(1) == 2);
  REQUIRE(map.class_of_slot(2) == 1);
  REQUIRE(map.sign_of_slot(2) == -1);  // only the largest label maps to +1
  REQUIRE(map.positive_value() == 1.0);

  // Beyond the class cap: an error naming file:line:column.
  LabelMap capped(3);
  for (int k = 0; k < 3; ++k) capped.observe(k, "f", 1, 1);
  REQUIRE(capped.observe(2, "f", 1, 1) == 2);
  Error e = capture_error([&] { capped.observe(7.5, "data.svm", 7, 3); });
  REQUIRE(e.kind() == ErrorKind::kInvalidInput);
  REQUIRE(std::string(e.what()) == msg::too_many_labels("data.svm", 7, 3, 3, "7.5"));
  REQUIRE(std::string(e.what()).find("data.svm:7:3: ") == 0);

  LabelMap zero_one;
  zero_one.observe(1, "f", 1, 1);
  zero_one.observe(0, "f", 2, 1);
  REQUIRE(zero_one.positive_value() == 1);
  REQUIRE(zero_one.sign_of_slot(0) == 1);
  REQUIRE(zero_one.sign_of_slot(1) == -1);
  LabelMap one_two;
  one_two.observe(1, "f", 1, 1);
  one_two.observe(2, "f", 2, 1);
  REQUIRE(one_two.positive_value() == 2);
  REQUIRE(one_two.sign_of_slot(0) == -1);

  REQUIRE(label_text(1) == "1");
  REQUIRE(label_text(-1) == "-1");
  REQUIRE(label_text(0.5) == "0.5");
  REQUIRE(label_text(-0.0) == "0");
  REQUIRE(label_text(1e20) == "1e+20");
}

TEST_CASE("label spellings parse to one numeric label", "[io][reader][labels]") {
  TempDir dir;
  std::string path = dir.file("labels.svm");
  write_file(path, "+1 1:1\n1 1:1\n1.0 1:1\n1.000000 1:1\n-1 1:1\n-1.000000 1:1\n1e0 1:1\n");
  Parsed p = parse_rows(path);
  LabelMap map;
  for (size_t i = 0; i < p.rows(); ++i) map.observe(p.labels[i], path, p.lines[i], 1);
  REQUIRE(map.classes() == 2);
  REQUIRE(map.positive_value() == 1);
  REQUIRE(map.negative_value() == -1);
}

// ---------------------------------------------------------------- compression

TEST_CASE("compression is detected by magic bytes, not by name", "[io][reader][compression]") {
  TempDir dir;
  std::string plain = dir.file("data.txt");
  write_file(plain, sample_text(50));
  compress_with("gzip", plain, dir.file("a.bz2"));  // misleading names on purpose
  compress_with("bzip2", plain, dir.file("b.xz"));
  compress_with("xz", plain, dir.file("c.gz"));
  REQUIRE(detect_compression(plain) == Compression::kNone);
  REQUIRE(detect_compression(dir.file("a.bz2")) == Compression::kGzip);
  REQUIRE(detect_compression(dir.file("b.xz")) == Compression::kBzip2);
  REQUIRE(detect_compression(dir.file("c.gz")) == Compression::kXz);
  write_file(dir.file("tiny"), "1");
  REQUIRE(detect_compression(dir.file("tiny")) == Compression::kNone);
  write_file(dir.file("empty"), "");
  REQUIRE(detect_compression(dir.file("empty")) == Compression::kNone);
  REQUIRE(std::string(compression_name(Compression::kXz)) == "xz");
}

TEST_CASE("plain, gzip, bzip2 and xz of one file parse identically", "[io][reader][compression]") {
  TempDir dir;
  std::string plain = dir.file("data.svm");
  std::string text = sample_text(4000) + "# comment\n\n1 3:1 qid:2 5:0 6:1";  // no final newline
  write_file(plain, text);
  Parsed expected = parse_chunks(plain);
  require_same_rows(expected, reference_parse(text));
  for (const char* tool : {"gzip", "bzip2", "xz"}) {
    std::string packed = dir.file(std::string("data.") + tool);
    compress_with(tool, plain, packed);
    for (uint64_t chunk_bytes : {uint64_t{1000}, uint64_t{4} << 20}) {
      INFO(tool << " chunk_bytes " << chunk_bytes);
      ReaderOptions options;
      options.chunk_bytes = chunk_bytes;
      require_same_rows(parse_chunks(packed, options), expected);
      require_same_rows(parse_rows(packed, options), expected);
    }
    LibsvmChunkSource source(packed);
    REQUIRE(std::string(compression_name(source.compression())) == tool);
    REQUIRE(source.file_bytes() == fs::file_size(packed));
    TextChunk chunk;
    while (source.next(chunk)) {
    }
    REQUIRE(source.compressed_bytes_read() == source.file_bytes());
  }
}

TEST_CASE("concatenated compressed streams read as one file", "[io][reader][compression]") {
  TempDir dir;
  std::string a = dir.file("a.svm"), b = dir.file("b.svm");
  std::string ta = sample_text(300), tb = sample_text(200);
  write_file(a, ta);
  write_file(b, tb);
  for (const char* tool : {"gzip", "bzip2", "xz"}) {
    INFO(tool);
    compress_with(tool, a, a + ".z");
    compress_with(tool, b, b + ".z");
    std::string joined = dir.file("joined.z");
    write_file(joined, read_file(a + ".z") + read_file(b + ".z"));
    require_same_rows(parse_chunks(joined), reference_parse(ta + tb));
  }
}

TEST_CASE("truncated or corrupt compressed streams are detected", "[io][reader][compression]") {
  TempDir dir;
  std::string plain = dir.file("data.svm");
  std::string text = sample_text(6000);
  write_file(plain, text);
  for (const char* tool : {"gzip", "bzip2", "xz"}) {
    std::string packed = dir.file(std::string("full.") + tool);
    compress_with(tool, plain, packed);
    std::string bytes = read_file(packed);
    REQUIRE(bytes.size() > 200);
    std::string codec = tool;
    std::vector<size_t> cuts = {bytes.size() - 1, bytes.size() - 4, bytes.size() - 9,
                                bytes.size() / 2, 12};
    for (size_t cut : cuts) {
      INFO(tool << " cut to " << cut << " of " << bytes.size() << " bytes");
      std::string path = dir.file("cut." + codec);
      write_file(path, bytes.substr(0, cut));
      for (uint64_t chunk_bytes : {uint64_t{100}, uint64_t{4} << 20}) {
        ReaderOptions options;
        options.chunk_bytes = chunk_bytes;
        Error e = capture_error([&] { parse_chunks(path, options); });
        REQUIRE((e.kind() == ErrorKind::kInvalidInput || e.kind() == ErrorKind::kIo));
        std::string m = e.what();
        INFO(m);
        REQUIRE(m.find(path + ": the " + codec + " stream is truncated") == 0);
        Error e2 = capture_error([&] { parse_rows(path, options); });
        REQUIRE(std::string(e2.what()) == m);
      }
    }
    // A flipped byte in the middle: the codec (or its checksum) notices.
    std::string corrupt = bytes;
    corrupt[corrupt.size() / 2] ^= 0x55;
    std::string path = dir.file("corrupt." + codec);
    write_file(path, corrupt);
    Error e = capture_error([&] { parse_chunks(path); });
    INFO(tool << ": " << e.what());
    REQUIRE(e.kind() == ErrorKind::kInvalidInput);
    // Trailing garbage after a complete stream is not silently accepted.
    write_file(path, bytes + "garbage!");
    e = capture_error([&] { parse_chunks(path); });
    REQUIRE(std::string(e.what()).find(path + ": the " + codec + " stream") == 0);
  }
}

TEST_CASE("a small bzip2 bomb of blank lines with a bad CRC fails cleanly", "[io][reader][compression]") {
  // Fuzz finding (libsvm_reader, see RELIABILITY.md): 101 bytes that inflate to
  // 375,000 newlines and then fail bzip2's block CRC (`bzip2 -t` agrees). With
  // 1-byte chunks it took seconds under the sanitizers; it must end in the
  // codec's error, whatever the chunk size.
  static const unsigned char kBytes[] = {
      0x42, 0x5a, 0x68, 0x39, 0x31, 0x41, 0x59, 0x26, 0x53, 0x59, 0x81, 0x91, 0x95, 0x10, 0x00,
      0x00, 0x18, 0x58, 0x00, 0x00, 0x10, 0x40, 0x02, 0x7f, 0xf0, 0x20, 0x00, 0x75, 0x09, 0x26,
      0x49, 0x34, 0x61, 0x06, 0xd2, 0x24, 0xf1, 0x4c, 0x9a, 0x33, 0x42, 0x05, 0x05, 0x3a, 0x74,
      0x45, 0x86, 0x26, 0xc0, 0xd7, 0x54, 0xec, 0xc1, 0x73, 0x23, 0xe1, 0x96, 0x00, 0x00, 0x00,
      0x00, 0x42, 0x11, 0x04, 0x00, 0x00, 0x00, 0x91, 0x8c, 0x26, 0x89, 0x28, 0x13, 0x77, 0x6e,
      0x79, 0x2a, 0x8a, 0x20, 0xd1, 0x4c, 0x3f, 0x0a, 0x9d, 0x78, 0x32, 0x14, 0xe3, 0x6a, 0xf6,
      0xff, 0x91, 0x17, 0x50, 0x72, 0x45, 0x81, 0x38, 0x90, 0x95, 0x10};
  TempDir dir;
  std::string path = dir.file("blank.bz2");
  write_file(path, std::string(reinterpret_cast<const char*>(kBytes), sizeof kBytes));
  for (uint64_t chunk_bytes : {uint64_t{16}, uint64_t{4096}, uint64_t{4} << 20}) {
    ReaderOptions options;
    options.chunk_bytes = chunk_bytes;
    Error e = capture_error([&] { parse_rows(path, options); });
    INFO(e.what());
    REQUIRE(e.kind() == ErrorKind::kInvalidInput);
    REQUIRE(std::string(e.what()).find(path + ": the bzip2 stream") == 0);
  }
}

TEST_CASE("every prefix of a compressed stream is detected as truncated",
          "[io][reader][compression]") {
  TempDir dir;
  std::string plain = dir.file("data.svm");
  write_file(plain, sample_text(300));
  for (const char* tool : {"gzip", "bzip2", "xz"}) {
    std::string packed = dir.file(std::string("full.") + tool);
    compress_with(tool, plain, packed);
    std::string bytes = read_file(packed);
    std::string path = dir.file("cut");
    size_t step = std::max<size_t>(1, bytes.size() / 400);
    for (size_t cut = 1; cut < bytes.size(); cut += (cut < 64 || cut + 64 > bytes.size()) ? 1 : step) {
      write_file(path, bytes.substr(0, cut));
      if (detect_compression(path) == Compression::kNone) continue;  // too short for the magic
      INFO(tool << " cut to " << cut << " of " << bytes.size());
      Error e = capture_error([&] { parse_chunks(path); });
      REQUIRE(std::string(e.what()).find(path + ": the " + tool + " stream is truncated") == 0);
    }
  }
}

TEST_CASE("missing files and directories are I/O errors", "[io][reader]") {
  TempDir dir;
  std::string missing = dir.file("no_such_file.svm");
  std::string want = msg::cannot_open(missing, std::strerror(ENOENT));
  for (auto& f : std::vector<std::function<void()>>{
           [&] { LibsvmChunkSource s(missing); },
           [&] { LibsvmReader r(missing); },
           [&] { detect_compression(missing); },
           [&] { hash_file(missing); },
       }) {
    Error e = capture_error(f);
    REQUIRE(e.kind() == ErrorKind::kIo);
    REQUIRE(std::string(e.what()) == want);
    REQUIRE(std::string(e.what()).find("No such file or directory") != std::string::npos);
  }
  std::string folder = dir.file("folder");
  fs::create_directories(folder);
  Error e = capture_error([&] { LibsvmChunkSource s(folder); });
  REQUIRE(e.kind() == ErrorKind::kIo);
  REQUIRE(std::string(e.what()).find(folder + ": cannot open") == 0);
}

TEST_CASE("empty input yields no chunks and no rows", "[io][reader]") {
  TempDir dir;
  for (const char* content : {"", "\n\n  \n", "# only a comment"}) {
    std::string path = dir.file("empty.svm");
    write_file(path, content);
    Parsed p = parse_rows(path);
    REQUIRE(p.rows() == 0);
  }
  std::string path = dir.file("empty.svm");
  write_file(path, "");
  LibsvmChunkSource source(path);
  TextChunk chunk;
  REQUIRE_FALSE(source.next(chunk));
  REQUIRE_FALSE(source.next(chunk));
}

TEST_CASE("hash_file is XXH64 of the bytes on disk", "[io][reader]") {
  TempDir dir;
  std::string path = dir.file("blob");
  std::mt19937_64 rng(7);
  std::string bytes(3 * (1 << 20) + 12345, '\0');
  for (auto& c : bytes) c = static_cast<char>(rng());
  write_file(path, bytes);
  REQUIRE(hash_file(path) == xxh64(bytes.data(), bytes.size()));
  write_file(path, "");
  REQUIRE(hash_file(path) == xxh64("", 0));
}

// ---------------------------------------------------------------- real datasets

TEST_CASE("a9a parses with the manifest counts, at any chunk size", "[io][reader][data]") {
  std::string path = data_file("a9a/a9a");
  Parsed reference = reference_parse(read_file(path));
  REQUIRE(reference.rows() == 32561);
  REQUIRE(reference.nnz() == 451592);
  for (uint64_t chunk_bytes : {uint64_t{7}, uint64_t{64}, uint64_t{4096}, uint64_t{4} << 20}) {
    INFO("chunk_bytes " << chunk_bytes);
    ReaderOptions options;
    options.chunk_bytes = chunk_bytes;
    Parsed p = parse_chunks(path, options);
    REQUIRE(p.rows() == 32561);
    REQUIRE(p.nnz() == 451592);
    REQUIRE(p.width == 123);
    require_same_rows(p, reference);
  }
  Parsed rows = parse_rows(path);
  require_same_rows(rows, reference);
  LabelMap map;
  std::vector<int> slots;
  for (size_t i = 0; i < rows.rows(); ++i)
    slots.push_back(map.observe(rows.labels[i], path, rows.lines[i], 1));
  uint64_t positives = 0;
  for (int slot : slots) positives += map.sign_of_slot(slot) == 1;
  REQUIRE(positives == 7841);
}

TEST_CASE("w8a parses: label-only rows are rows", "[io][reader][data]") {
  std::string path = data_file("w8a/w8a");
  Parsed p = parse_chunks(path);
  REQUIRE(p.rows() == 49749);
  REQUIRE(p.nnz() == 579586);
  REQUIRE(p.width == 300);
  uint64_t empty_rows = 0;
  for (size_t r = 0; r < p.rows(); ++r) empty_rows += p.row_ptr[r] == p.row_ptr[r + 1];
  REQUIRE(empty_rows == 4203);
  ReaderOptions declared;
  declared.declared_features = 300;
  REQUIRE(parse_rows(path, declared).nnz() == 579586);
}

TEST_CASE("ijcnn1 (bzip2) matches a reference parse of `bzip2 -dc`", "[io][reader][data]") {
  std::string path = data_file("ijcnn1/ijcnn1.trn.bz2");
  Parsed reference = reference_parse(command_output("bzip2 -dc " + shell_quote(path)));
  Parsed p = parse_chunks(path);
  REQUIRE(p.rows() == 49990);
  REQUIRE(p.nnz() + p.explicit_zeros == 649870);
  REQUIRE(p.explicit_zeros == 1);
  require_same_rows(p, reference);
}

TEST_CASE("leu (bzip2, double spaces, 1.000000 labels) parses", "[io][reader][data]") {
  std::string path = data_file("leu/leu.bz2");
  Parsed p = parse_rows(path);
  REQUIRE(p.rows() == 38);
  REQUIRE(p.nnz() + p.explicit_zeros == 270902);
  REQUIRE(p.width == 7129);
  REQUIRE(std::count(p.labels.begin(), p.labels.end(), 1.0) == 27);
  REQUIRE(std::count(p.labels.begin(), p.labels.end(), -1.0) == 11);
}

TEST_CASE("madelon (xz) matches a reference parse of `xz -dc`", "[io][reader][data]") {
  std::string path = data_file("madelon/madelon.xz");
  Parsed reference = reference_parse(command_output("xz -dc " + shell_quote(path)));
  Parsed p = parse_chunks(path);
  REQUIRE(p.rows() == 2000);
  REQUIRE(p.width == 500);
  require_same_rows(p, reference);
}

// ---------------------------------------------------------------- throughput

// Best of several passes over text held in memory: decompression and disk
// excluded, so this is the parser alone (single thread).
TEST_CASE("parse throughput", "[.][bench]") {
  struct Input {
    const char* name;
    std::string text;
  };
  std::vector<Input> inputs;
  inputs.push_back({"a9a", read_file(data_file("a9a/a9a"))});
  inputs.push_back({"ijcnn1", command_output("bzip2 -dc " + shell_quote(data_file("ijcnn1/ijcnn1.trn.bz2")))});
  for (auto& input : inputs) {
    TextChunk chunk;
    chunk.text = input.text;
    ParsedChunk out;
    ReaderOptions options;
    double best = 1e30;
    for (int i = 0; i < 30; ++i) {
      auto start = std::chrono::steady_clock::now();
      parse_libsvm_chunk(chunk, input.name, options, out);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    REQUIRE(out.error.empty());
    WARN("parse_libsvm_chunk on " << input.name << ": " << chunk.text.size() / 1e6 / best
                                  << " MB/s, " << out.indices.size() / best / 1e6 << " M tokens/s");
  }
}

// Whole pipeline (read, decompress, split, parse), single thread.
TEST_CASE("reader throughput", "[.][bench]") {
  TempDir dir;
  std::string a9a_gz = dir.file("a9a.gz");
  compress_with("gzip", data_file("a9a/a9a"), a9a_gz);
  for (std::string path : {data_file("a9a/a9a"), a9a_gz, data_file("ijcnn1/ijcnn1.trn.bz2"),
                           data_file("madelon/madelon.xz")}) {
    uint64_t text_bytes = 0;
    auto start = std::chrono::steady_clock::now();
    LibsvmChunkSource source(path);
    TextChunk chunk;
    ParsedChunk out;
    while (source.next(chunk)) {
      text_bytes += chunk.text.size();
      parse_libsvm_chunk(chunk, path, ReaderOptions{}, out);
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    WARN(path << " (" << compression_name(source.compression()) << "): " << text_bytes / 1e6 / seconds
              << " MB/s of text");
  }
}
