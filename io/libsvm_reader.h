// Streaming reader for LIBSVM / svmlight text, plain or gzip/bzip2/xz
// compressed (detected by magic bytes, not by file name). Never holds the whole
// file: text is read in chunks that end at line boundaries.
//
// Two ways to use it:
//  * LibsvmReader::next(row) — one row at a time (predict, small tools).
//  * LibsvmChunkSource + parse_libsvm_chunk — a serial chunk source and a
//    thread-safe parser, for a oneTBB pipeline (ingest). A parse error is
//    stored in the ParsedChunk (not thrown) so the in-order consumer reports
//    the first bad line of the file, whatever the thread timing.
//
// Accepted: blank lines, trailing/repeated spaces and tabs, explicit zeros
// (counted, dropped), labels in any numeric spelling (+1, 1, 1.0, 1.000000),
// '#' comments to the end of a line, an optional "qid:N" token (ignored).
// Rejected with file:line:column: non-numeric tokens, index below the base,
// non-increasing or duplicate indices, NaN/Inf values, index beyond the
// declared width (unless options.ignore_beyond_declared).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fgm {

// Feature ids (0-based) are below this: 2^63.
inline constexpr uint64_t kMaxFeatureIdEnd = uint64_t{1} << 63;

enum class Compression { kNone, kGzip, kBzip2, kXz };
const char* compression_name(Compression c);
// Reads the first bytes of `path`; throws an I/O error if it cannot be opened.
Compression detect_compression(const std::string& path);

struct ReaderOptions {
  int index_base = 1;                  // 1 (LIBSVM default) or 0
  uint64_t declared_features = 0;      // 0: no declared width
  bool ignore_beyond_declared = false; // predict: drop such features (caller warns once)
  uint64_t chunk_bytes = 4 << 20;      // target size of a text chunk
  // A line longer than this is an error (kOutOfMemory, naming the file, the
  // line and max_line_key) before more of it is held; 0: unbounded. Callers
  // set it from their memory budget (max_line_bytes_for).
  uint64_t max_line_bytes = 0;
  std::string max_line_key = "engine.memory_budget";
};

// The longest line a memory budget of `budget_limit` bytes admits: an eighth
// of it (a line's text, the chunk it is carried into and its parsed row, up
// to 12 bytes per 4-character "i:v" token, are held at once), at least 64 KiB.
inline uint64_t max_line_bytes_for(uint64_t budget_limit) {
  return budget_limit / 8 > (uint64_t{64} << 10) ? budget_limit / 8 : uint64_t{64} << 10;
}

// A block of whole lines of decompressed text.
struct TextChunk {
  uint64_t index = 0;        // 0,1,2... in file order
  uint64_t first_line = 1;   // 1-based line number of the first line in `text`
  std::string text;
};

// Parsed rows of one chunk, CSR. Indices are 0-based (base already subtracted).
struct ParsedChunk {
  uint64_t index = 0;
  std::vector<double> labels;          // numeric label per row
  std::vector<uint32_t> label_columns; // 1-based column of each row's label (for messages)
  std::vector<uint64_t> lines;         // 1-based line of each row
  std::vector<uint64_t> row_ptr;       // size rows+1
  std::vector<uint64_t> indices;
  std::vector<float> values;           // stored precision of the engine
  uint64_t explicit_zeros = 0;
  uint64_t beyond_declared = 0;        // features dropped (ignore_beyond_declared)
  uint64_t first_beyond_line = 0, first_beyond_index = 0;
  uint64_t max_index_plus_one = 0;     // width implied by this chunk
  std::string error;                   // non-empty: the first error in this chunk (kInvalidInput)
  size_t rows() const { return labels.size(); }
};

// Serial source of TextChunks. Not thread-safe: call from one thread.
class LibsvmChunkSource {
 public:
  // max_line_bytes / max_line_key: as in ReaderOptions.
  LibsvmChunkSource(const std::string& path, uint64_t chunk_bytes = 4 << 20, uint64_t max_line_bytes = 0,
                    std::string max_line_key = "engine.memory_budget");
  ~LibsvmChunkSource();
  // Fills `chunk` and returns true, or returns false at end of input.
  // Throws Error(kIo / kInvalidInput) on read or decompression failure
  // (e.g. a truncated gzip/xz stream), naming the file and codec.
  bool next(TextChunk& chunk);
  const std::string& path() const;
  Compression compression() const;
  uint64_t file_bytes() const;        // size of the file on disk
  uint64_t compressed_bytes_read() const;  // progress, in on-disk bytes

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Thread-safe: parses a chunk; errors go to out.error with file:line:column.
void parse_libsvm_chunk(const TextChunk& chunk, const std::string& path,
                        const ReaderOptions& options, ParsedChunk& out);

// One row at a time, built on the two above.
struct SparseRow {
  double label = 0;
  uint64_t line = 0;
  std::vector<uint64_t> indices;  // 0-based
  std::vector<float> values;
};

class LibsvmReader {
 public:
  LibsvmReader(const std::string& path, ReaderOptions options = {});
  ~LibsvmReader();
  // Throws Error(kInvalidInput) at the first bad row, Error(kIo) on I/O failure.
  bool next(SparseRow& row);
  uint64_t rows_read() const;
  uint64_t explicit_zeros() const;
  uint64_t beyond_declared() const;  // count of dropped features (ignore_beyond_declared)
  uint64_t first_beyond_line() const;
  uint64_t first_beyond_index() const;  // 0-based

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Label bookkeeping in file order. Slots are numbered in first-appearance
// order; classes in increasing numeric order of the value (class k is the
// k-th smallest label). The numerically largest label becomes +1, every other
// -1 (so 1/-1, 1/0 map 1 -> +1, and 1/2 maps 2 -> +1).
class LabelMap {
 public:
  // At most this many distinct labels (io/shard_store.h kMaxClasses).
  explicit LabelMap(int max_classes = 1024) : max_classes_(max_classes) {}
  // Returns the slot (0 = first label seen, 1 = second, ...). Throws
  // kInvalidInput naming path:line:column on a label beyond max_classes.
  int observe(double label, const std::string& path, uint64_t line, uint64_t column);
  int classes() const { return static_cast<int>(values_.size()); }
  double first() const { return values_.at(0); }
  double second() const { return values_.at(1); }
  double positive_value() const;  // the largest label; requires classes() >= 2
  double negative_value() const;  // the smallest
  // +1/-1 for a slot from observe().
  int8_t sign_of_slot(int slot) const;
  // The class index (rank in increasing value order) of a slot.
  int class_of_slot(int slot) const;
  // Label values by class index (increasing).
  std::vector<double> class_values() const;

 private:
  std::vector<double> values_;  // by slot
  int max_classes_;
  int last_slot_ = 0;           // most rows repeat a recent label: checked first
};

// Canonical text of a label value (e.g. 1 -> "1", -1 -> "-1", 0.5 -> "0.5").
std::string label_text(double value);

// XXH64 of a file's bytes as stored on disk (the ingest cache key).
uint64_t hash_file(const std::string& path);

}  // namespace fgm
