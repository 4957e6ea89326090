#include "io/partitioned_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/json_reader.h"
#include "core/json_writer.h"
#include "core/messages.h"
#include "io/compressed_input.h"
#include "io/libsvm_reader.h"
#include "io/store_files.h"
#include "io/store_format.h"

namespace fgm {
namespace fs = std::filesystem;

bool is_partitioned_store(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / kPartitionManifestName, ec);
}

std::string partition_dir(const std::string& dir, uint32_t partition) {
  return (fs::path(dir) / fmt::format("part-{:04d}", partition)).string();
}

namespace {

// The lines of the decompressed input, one at a time (without the newline).
class LineReader {
 public:
  // A line longer than `max_line_bytes` is an error naming it and `budget_key` (msg::line_too_long).
  LineReader(const std::string& path, uint64_t max_line_bytes, std::string budget_key)
      : input_(path), buffer_(1 << 20), max_line_bytes_(max_line_bytes), budget_key_(std::move(budget_key)) {}
  bool next(std::string& line) {
    line.clear();
    ++line_;
    for (;;) {
      if (line.size() > max_line_bytes_)
        throw Error(ErrorKind::kOutOfMemory, msg::line_too_long(input_.path(), line_, max_line_bytes_, budget_key_));
      if (pos_ == fill_) {
        fill_ = input_.read(buffer_.data(), buffer_.size());
        pos_ = 0;
        if (fill_ == 0) return !line.empty();
      }
      const char* begin = buffer_.data() + pos_;
      const char* nl = static_cast<const char*>(std::memchr(begin, '\n', fill_ - pos_));
      if (nl) {
        line.append(begin, nl);
        pos_ += static_cast<size_t>(nl - begin) + 1;
        return true;
      }
      line.append(begin, fill_ - pos_);
      pos_ = fill_;
    }
  }

 private:
  CompressedInput input_;
  std::vector<char> buffer_;
  size_t pos_ = 0, fill_ = 0;
  uint64_t max_line_bytes_;
  std::string budget_key_;
  uint64_t line_ = 0;  // 1-based number of the line being read
};

// A data line (a row): something other than blanks before any '#'.
bool is_row(const std::string& line) {
  for (char ch : line) {
    if (ch == '#') return false;
    if (ch != ' ' && ch != '\t' && ch != '\r') return true;
  }
  return false;
}

// The largest feature index on a row ("index:value" tokens after the label;
// qid and malformed tokens are left to the partition's ingest to judge).
uint64_t max_index_on(const std::string& line) {
  uint64_t best = 0;
  size_t p = line.find_first_of(" \t");
  while (p != std::string::npos && p < line.size()) {
    while (p < line.size() && (line[p] == ' ' || line[p] == '\t')) ++p;
    if (p >= line.size() || line[p] == '#') break;
    uint64_t v = 0;
    size_t q = p;
    bool digits = false;
    while (q < line.size() && line[q] >= '0' && line[q] <= '9' && v < (uint64_t{1} << 62)) {
      v = v * 10 + static_cast<uint64_t>(line[q] - '0');
      ++q;
      digits = true;
    }
    if (digits && q < line.size() && line[q] == ':') best = std::max(best, v);
    p = line.find_first_of(" \t", p);
  }
  return best;
}

void write_manifest(const std::string& path, const PartitionManifest& m) {
  JsonWriter w;
  w.begin_object();
  w.key("format").value("fgm-partitions");
  w.key("version").value(1);
  w.key("partitions").value(static_cast<uint64_t>(m.partitions));
  w.key("n_rows").value(m.n_rows);
  w.key("n_features").value(m.n_features);
  w.key("index_base").value(m.index_base);
  w.key("input_path").value(m.input_path);
  w.key("input_checksum").value(fmt::format("{:016x}", m.input_checksum));
  w.key("first_row").begin_array(true);
  for (uint64_t r : m.first_row) w.value(r);
  w.end_array();
  w.key("first_line").begin_array(true);
  for (uint64_t l : m.first_line) w.value(l);
  w.end_array();
  w.key("part_checksums").begin_array(true);
  for (uint64_t c : m.part_checksums) w.value(fmt::format("{:016x}", c));
  w.end_array();
  w.end_object();
  write_file_atomic(path, w.str() + "\n");
}

}  // namespace

PartitionManifest read_partition_manifest(const std::string& dir) {
  const std::string path = (fs::path(dir) / kPartitionManifestName).string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIo, "cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  const JsonValue doc = parse_json(text.str(), path);
  auto bad = [&](const std::string& what) { return Error(ErrorKind::kCorruption, path + ": " + what); };
  auto number = [&](const char* key) {
    const JsonValue* v = doc.find(key);
    if (!v || !v->is_number() || v->number() < 0) throw bad(std::string("missing or invalid \"") + key + "\"");
    return static_cast<uint64_t>(v->number());
  };
  const JsonValue* format = doc.find("format");
  if (!format || format->string() != "fgm-partitions") throw bad("not an fgm partition manifest");
  if (number("version") != 1) throw bad("unsupported version (this fgm reads version 1)");
  PartitionManifest m;
  m.partitions = static_cast<uint32_t>(number("partitions"));
  m.n_rows = number("n_rows");
  m.n_features = number("n_features");
  m.index_base = static_cast<int>(number("index_base"));
  if (const JsonValue* v = doc.find("input_path")) m.input_path = v->string();
  if (const JsonValue* v = doc.find("input_checksum")) m.input_checksum = std::stoull(v->string(), nullptr, 16);
  auto list = [&](const char* key, std::vector<uint64_t>& out) {
    const JsonValue* v = doc.find(key);
    if (!v || !v->is_array()) throw bad(std::string("missing \"") + key + "\"");
    for (const auto& item : v->items()) out.push_back(static_cast<uint64_t>(item.number()));
  };
  list("first_row", m.first_row);
  list("first_line", m.first_line);
  if (const JsonValue* v = doc.find("part_checksums")) {
    if (!v->is_array()) throw bad("\"part_checksums\" is not an array");
    for (const auto& item : v->items()) {
      const std::string hex = item.is_string() ? item.string() : std::string();
      if (hex.size() != 16 || hex.find_first_not_of("0123456789abcdef") != std::string::npos)
        throw bad("\"part_checksums\" holds an entry that is not 16 hex digits");
      m.part_checksums.push_back(std::stoull(hex, nullptr, 16));
    }
    if (m.part_checksums.size() != m.partitions) throw bad("\"part_checksums\" does not have one entry per partition");
  }
  if (m.partitions == 0 || m.first_row.size() != m.partitions + 1 || m.first_line.size() != m.partitions ||
      m.first_row.front() != 0 || m.first_row.back() != m.n_rows)
    throw bad("inconsistent partition table");
  for (uint32_t p = 0; p < m.partitions; ++p)
    if (m.first_row[p] > m.first_row[p + 1]) throw bad("partition rows decrease");
  return m;
}

uint64_t partition_store_checksum(const std::string& dir, uint32_t partition) {
  return hash_file((fs::path(partition_dir(dir, partition)) / store::kManifestName).string());
}

uint64_t partitioned_store_identity(const std::string& dir, const PartitionManifest& manifest) {
  Xxh64 identity;
  identity.update(&manifest.input_checksum, sizeof manifest.input_checksum);
  for (uint32_t p = 0; p < manifest.partitions; ++p) {
    const uint64_t part = partition_store_checksum(dir, p);
    identity.update(&part, sizeof part);
  }
  return identity.digest();
}

PartitionedIngestStats ingest_partitioned(const std::string& input, const std::string& out_dir, uint32_t partitions,
                                          const IngestOptions& options, MemoryBudget& budget) {
  const auto start = std::chrono::steady_clock::now();
  if (partitions < 1) throw Error(ErrorKind::kConfig, "--partitions must be at least 1");
  PartitionedIngestStats stats;
  PartitionManifest& m = stats.manifest;
  m.partitions = partitions;
  m.index_base = options.reader.index_base;
  m.input_path = fs::absolute(input).string();
  m.input_checksum = options.input_checksum ? *options.input_checksum : hash_file(input);
  // Pass 1: rows and the widest feature index.
  uint64_t max_index = 0;
  {
    LineReader lines(input, max_line_bytes_for(budget.limit()), budget.limit_key());
    std::string line;
    while (lines.next(line))
      if (is_row(line)) {
        ++m.n_rows;
        max_index = std::max(max_index, max_index_on(line));
      }
  }
  if (m.n_rows < partitions)
    throw Error(ErrorKind::kInvalidInput, fmt::format("{} has {} rows, fewer than the {} partitions asked for",
                                                      input, m.n_rows, partitions));
  for (uint32_t p = 0; p <= partitions; ++p) m.first_row.push_back(m.n_rows * p / partitions);
  // "<out>.tmp-<pid>-partitions": the name remove_stale_temporaries parses, so
  // the directory of a killed ingest is removed by the next one (never a live
  // one's); created by mkdir, which follows no symlink planted at the name.
  const fs::path parent = fs::path(out_dir).parent_path().empty() ? fs::path(".") : fs::path(out_dir).parent_path();
  const std::string target_name = fs::path(out_dir).filename().string();
  store::remove_stale_temporaries(parent.string(), target_name);
  const fs::path tmp = parent / fmt::format("{}.tmp-{}-partitions", target_name, ::getpid());
  fs::remove_all(tmp);
  if (::mkdir(tmp.c_str(), 0755) != 0)
    throw Error(ErrorKind::kIo, msg::cannot_write(tmp.string(), std::strerror(errno)));
  struct Cleanup {
    fs::path dir;
    bool keep = false;
    ~Cleanup() {
      std::error_code ec;
      if (!keep) fs::remove_all(dir, ec);
    }
  } cleanup{tmp};
  // Pass 2: each partition's lines into a text file of its own.
  {
    LineReader lines(input, max_line_bytes_for(budget.limit()), budget.limit_key());
    std::string line;
    uint64_t row = 0, line_no = 0;
    uint32_t p = 0;
    // The distinct labels of each partition, up to two: a partition is a store
    // of its own and needs both classes.
    std::vector<std::vector<std::string>> labels(partitions);
    std::FILE* out = nullptr;
    auto open_part = [&](uint32_t q) {
      if (out && std::fclose(out) != 0) throw Error(ErrorKind::kIo, "cannot write partition text");
      out = std::fopen((tmp / fmt::format("part-{:04d}.txt", q)).c_str(), "wb");
      if (!out) throw Error(ErrorKind::kIo, "cannot create a partition text file in " + tmp.string());
      m.first_line.push_back(line_no);
    };
    while (lines.next(line)) {
      ++line_no;
      if (!out) open_part(0);
      if (is_row(line)) {
        while (p + 1 < partitions && row >= m.first_row[p + 1]) open_part(++p);
        ++row;
        const size_t begin = line.find_first_not_of(" \t");
        const std::string label = line.substr(begin, line.find_first_of(" \t#\r", begin) - begin);
        auto& seen = labels[p];
        if (seen.size() < 2 && std::find(seen.begin(), seen.end(), label) == seen.end()) seen.push_back(label);
      }
      if (std::fwrite(line.data(), 1, line.size(), out) != line.size() || std::fputc('\n', out) == EOF)
        throw Error(ErrorKind::kIo, "cannot write partition text in " + tmp.string());
    }
    if (out && std::fclose(out) != 0) throw Error(ErrorKind::kIo, "cannot write partition text");
    for (uint32_t q = 0; q < partitions; ++q)
      if (labels[q].size() < 2)
        throw Error(ErrorKind::kInvalidInput,
                    fmt::format("{}: partition {} of {} (rows {}..{}, from line {}) has only label '{}'; each "
                                "partition is a store of its own and needs both classes: shuffle the rows of "
                                "the input or use fewer partitions",
                                input, q, partitions, m.first_row[q] + 1, m.first_row[q + 1], m.first_line[q],
                                labels[q].empty() ? "" : labels[q].front()));
  }
  // Every partition declares the input's width, so ids agree across partitions.
  IngestOptions part_options = options;
  const uint64_t inferred = max_index + 1 - static_cast<uint64_t>(std::min<uint64_t>(max_index + 1, m.index_base));
  part_options.reader.declared_features = options.reader.declared_features ? options.reader.declared_features : inferred;
  part_options.input_checksum.reset();
  for (uint32_t p = 0; p < partitions; ++p) {
    const std::string text = (tmp / fmt::format("part-{:04d}.txt", p)).string();
    try {
      stats.parts.push_back(ingest_libsvm(text, partition_dir(tmp.string(), p), part_options, budget));
    } catch (const Error& e) {
      throw Error(e.kind(), fmt::format("{} (partition {} of {}: its line 1 is line {} of {})", e.what(), p,
                                        partitions, m.first_line[p], input));
    }
    fs::remove(text);
    m.n_features = stats.parts.back().n_features;
    m.part_checksums.push_back(partition_store_checksum(tmp.string(), p));
  }
  write_manifest((tmp / kPartitionManifestName).string(), m);
  std::error_code ec;
  if (fs::exists(out_dir, ec)) {
    if (!is_partitioned_store(out_dir) && !fs::is_empty(out_dir, ec))
      throw Error(ErrorKind::kIo, out_dir + " exists and is not a partitioned store: not replaced");
    fs::remove_all(out_dir);
  }
  fs::rename(tmp, out_dir);
  cleanup.keep = true;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace fgm
