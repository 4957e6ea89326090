#include "io/libsvm_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>

#include "core/error.h"
#include "core/hash.h"
#include "core/messages.h"
#include "io/compressed_input.h"

namespace fgm {

// ---------------------------------------------------------------- chunk source

struct LibsvmChunkSource::Impl {
  CompressedInput input;
  uint64_t chunk_bytes;
  uint64_t max_line_bytes;  // 0: unbounded
  std::string max_line_key;
  std::string carry;  // partial last line of the previous chunk (holds no '\n')
  uint64_t next_index = 0;
  uint64_t next_line = 1;
  bool eof = false;

  Impl(const std::string& path, uint64_t bytes, uint64_t max_line, std::string key)
      : input(path), chunk_bytes(bytes), max_line_bytes(max_line), max_line_key(std::move(key)) {}

  // Appends up to `want` bytes to `text`; sets eof when the input ends.
  void append(std::string& text, size_t want) {
    size_t old = text.size();
    text.resize(old + want);
    size_t got = 0;
    while (got < want) {
      size_t n = input.read(text.data() + old + got, want - got);
      if (n == 0) {
        eof = true;
        break;
      }
      got += n;
    }
    text.resize(old + got);
  }
};

LibsvmChunkSource::LibsvmChunkSource(const std::string& path, uint64_t chunk_bytes, uint64_t max_line_bytes,
                                     std::string max_line_key) {
  FGM_ASSERT(chunk_bytes > 0);
  impl_ = std::make_unique<Impl>(path, chunk_bytes, max_line_bytes, std::move(max_line_key));
}
LibsvmChunkSource::~LibsvmChunkSource() = default;

bool LibsvmChunkSource::next(TextChunk& chunk) {
  Impl& s = *impl_;
  std::string& text = chunk.text;
  text.clear();
  text.swap(s.carry);  // reuse the caller's buffer for the next carry
  if (s.eof && text.empty()) return false;

  size_t scan_from = text.size();
  size_t want = s.chunk_bytes > text.size() ? s.chunk_bytes - text.size() : 0;
  for (;;) {
    if (!s.eof && want > 0) s.append(text, want);
    if (s.eof) break;  // the rest is whole lines plus maybe a last line without '\n'
    const void* nl = memrchr(text.data() + scan_from, '\n', text.size() - scan_from);
    if (nl) {
      size_t cut = static_cast<const char*>(nl) - text.data() + 1;
      s.carry.assign(text, cut, std::string::npos);
      text.resize(cut);
      break;
    }
    // A line longer than the chunk (`text` holds no '\n': it is all line
    // s.next_line): grow geometrically until it ends, within the bound.
    if (s.max_line_bytes > 0 && text.size() > s.max_line_bytes)
      throw Error(ErrorKind::kOutOfMemory,
                  msg::line_too_long(s.input.path(), s.next_line, s.max_line_bytes, s.max_line_key));
    scan_from = text.size();
    want = std::max<size_t>(s.chunk_bytes, text.size());
    if (s.max_line_bytes > 0) want = std::min<size_t>(want, s.max_line_bytes + 1 - text.size());
  }
  if (text.empty()) return false;
  // A chunk larger than the bound can hold a whole line longer than it: the
  // bound holds for every line, whatever the chunk size.
  if (s.max_line_bytes > 0 && text.size() > s.max_line_bytes) {
    uint64_t line = s.next_line;
    for (size_t at = 0; at < text.size(); ++line) {
      const void* nl = memchr(text.data() + at, '\n', text.size() - at);
      const size_t end = nl ? size_t(static_cast<const char*>(nl) - text.data()) : text.size();
      if (end - at > s.max_line_bytes) {
        if (at == 0)
          throw Error(ErrorKind::kOutOfMemory,
                      msg::line_too_long(s.input.path(), line, s.max_line_bytes, s.max_line_key));
        // The lines before it are this chunk; the error comes when it is reached.
        s.carry.insert(0, text, at, std::string::npos);
        text.resize(at);
        break;
      }
      at = end + 1;
    }
  }
  chunk.index = s.next_index++;
  chunk.first_line = s.next_line;
  s.next_line += static_cast<uint64_t>(std::count(text.begin(), text.end(), '\n'));
  return true;
}

const std::string& LibsvmChunkSource::path() const { return impl_->input.path(); }
Compression LibsvmChunkSource::compression() const { return impl_->input.compression(); }
uint64_t LibsvmChunkSource::file_bytes() const { return impl_->input.file_bytes(); }
uint64_t LibsvmChunkSource::compressed_bytes_read() const {
  return impl_->input.compressed_bytes_read();
}

// ---------------------------------------------------------------- parser

namespace {

// ' ', \t, \r (CRLF files), \v, \f.
constexpr auto kSpaceTable = [] {
  std::array<bool, 256> table{};
  for (unsigned char c : {' ', '\t', '\r', '\v', '\f'}) table[c] = true;
  return table;
}();

inline bool is_space(char c) { return kSpaceTable[static_cast<unsigned char>(c)]; }

inline bool is_digit(char c) { return static_cast<unsigned char>(c - '0') < 10; }

inline const char* token_end(const char* p, const char* end) {
  while (p < end && !is_space(*p)) ++p;
  return p;
}

// Offending tokens go into messages; keep binary junk from flooding them.
std::string_view shown(const char* begin, const char* end) {
  constexpr size_t kMax = 64;
  return std::string_view(begin, std::min<size_t>(end - begin, kMax));
}

enum class NumberStatus { kOk, kNotNumeric, kNonFinite, kOverflow, kUnderflow };

// Fast path for the common spellings "-12", "0.5", "3.25" followed by
// whitespace or `end`: with at most 2^53 as the integer mantissa and at most
// 22 decimals, mantissa / 10^decimals is one correctly rounded IEEE division
// of two exact doubles, so the result is bit-identical to std::from_chars.
// Returns nullptr to defer to the general parser, else the end of the number.
inline const char* parse_plain_decimal(const char* p, const char* end, double& value) {
  static constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                      1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                      1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  bool negative = p < end && *p == '-';
  if (negative) ++p;
  uint64_t mantissa = 0;
  int digits = 0, decimals = 0;
  while (p < end && is_digit(*p)) {
    mantissa = mantissa * 10 + static_cast<uint64_t>(*p++ - '0');
    ++digits;
  }
  if (p < end && *p == '.') {
    ++p;
    while (p < end && is_digit(*p)) {
      mantissa = mantissa * 10 + static_cast<uint64_t>(*p++ - '0');
      ++digits;
      ++decimals;
    }
  }
  if ((p != end && !is_space(*p)) || digits == 0 || digits > 19 || decimals > 22 ||
      mantissa > (uint64_t{1} << 53))
    return nullptr;
  double magnitude = static_cast<double>(mantissa) / kPow10[decimals];
  value = negative ? -magnitude : magnitude;
  return p;
}

// Parses a whole token [begin, end) as a double, accepting a leading '+'
// (strtod does, std::from_chars does not). Underflow gives 0 (or a
// denormal) or kUnderflow when even a double rounds it to 0; overflow of a
// double gives kOverflow; "nan" and "inf" give kNonFinite.
NumberStatus parse_double(const char* begin, const char* end, double& value) {
  const char* p = begin;
  if (p < end && *p == '+') {
    ++p;
    if (p < end && (*p == '+' || *p == '-')) return NumberStatus::kNotNumeric;
  }
  if (p == end) return NumberStatus::kNotNumeric;
  if (parse_plain_decimal(p, end, value) == end) return NumberStatus::kOk;
  auto [ptr, ec] = std::from_chars(p, end, value);
  if (ec == std::errc::invalid_argument || ptr != end) return NumberStatus::kNotNumeric;
  if (ec == std::errc::result_out_of_range) {
    // Rare: let strtod tell overflow (HUGE_VAL) from underflow (0 or denormal).
    std::string copy(p, end);
    value = std::strtod(copy.c_str(), nullptr);
    if (std::isinf(value)) return NumberStatus::kOverflow;
    if (value == 0) return NumberStatus::kUnderflow;  // nonzero digits below the doubles' range
  }
  return std::isfinite(value) ? NumberStatus::kOk : NumberStatus::kNonFinite;
}

class ChunkParser {
 public:
  ChunkParser(const std::string& path, const ReaderOptions& options, ParsedChunk& out)
      : path_(path), out_(out), base_(static_cast<uint64_t>(options.index_base)),
        declared_(options.declared_features), ignore_beyond_(options.ignore_beyond_declared) {}

  // Returns false after recording the first error in out_.error.
  bool parse_line(const char* line_begin, const char* content_end, uint64_t line) {
    const char* p = line_begin;
    while (p < content_end && is_space(*p)) ++p;
    if (p == content_end) return true;  // blank or comment-only

    const char* label_end = token_end(p, content_end);
    double label = 0;
    if (parse_double(p, label_end, label) != NumberStatus::kOk)
      return fail(msg::bad_label(path_, line, column(line_begin, p), shown(p, label_end)));
    out_.labels.push_back(label);
    out_.label_columns.push_back(static_cast<uint32_t>(column(line_begin, p)));
    out_.lines.push_back(line);

    bool has_previous = false;
    uint64_t previous = 0;  // 0-based
    p = label_end;
    for (;;) {
      while (p < content_end && is_space(*p)) ++p;
      if (p == content_end) break;
      const char* token = p;

      // Fast path: digits then ':'.
      uint64_t index = 0;
      bool overflow = false;
      while (p < content_end && is_digit(*p)) {
        uint64_t digit = static_cast<uint64_t>(*p - '0');
        if (index > (std::numeric_limits<uint64_t>::max() - digit) / 10) overflow = true;
        index = index * 10 + digit;
        ++p;
      }
      if (p == token || p == content_end || *p != ':' || overflow) {
        const char* end = token_end(token, content_end);
        if (end - token > 4 && std::memcmp(token, "qid:", 4) == 0) {
          p = end;  // query id (svmlight ranking files): ignored
          continue;
        }
        return fail_token(token, end, line_begin, line);
      }
      const char* value_begin = p + 1;
      double value = 0;
      NumberStatus status = NumberStatus::kOk;
      const char* value_end = parse_plain_decimal(value_begin, content_end, value);
      if (!value_end) {
        value_end = token_end(value_begin, content_end);
        status = parse_double(value_begin, value_end, value);
      }
      if (index < base_)
        return fail(msg::index_below_base(path_, line, column(line_begin, token),
                                          shown(token, value_end), static_cast<int>(base_)));
      uint64_t index0 = index - base_;
      // Feature ids are below 2^63 (n_features = largest id + 1 stays a
      // positive int64 for every consumer).
      if (index0 >= kMaxFeatureIdEnd)
        return fail(msg::index_too_large(path_, line, column(line_begin, token),
                                         shown(token, value_end), kMaxFeatureIdEnd - 1 + base_));
      if (has_previous && index0 <= previous) {
        if (index0 == previous)
          return fail(msg::duplicate_index(path_, line, column(line_begin, token), index));
        return fail(msg::index_not_increasing(path_, line, column(line_begin, token), index,
                                              previous + base_));
      }
      has_previous = true;
      previous = index0;

      if (status == NumberStatus::kNotNumeric)
        return fail(msg::non_numeric_token(path_, line, column(line_begin, token),
                                           shown(token, value_end)));
      float stored = static_cast<float>(value);
      if (status == NumberStatus::kNonFinite)
        return fail(msg::non_finite_value(path_, line, column(line_begin, token),
                                          shown(token, value_end)));
      // Values are stored as float32: a finite number beyond its range is not
      // "Inf" in the file, and one that would round to 0 must not vanish.
      if (status == NumberStatus::kOverflow || !std::isfinite(stored))
        return fail(msg::value_beyond_float_range(path_, line, column(line_begin, token),
                                                  shown(token, value_end)));
      if (status == NumberStatus::kUnderflow || (stored == 0.0f && value != 0.0))
        return fail(msg::value_below_float_range(path_, line, column(line_begin, token),
                                                 shown(token, value_end)));
      p = value_end;

      if (declared_ != 0 && index0 >= declared_) {
        if (!ignore_beyond_)
          return fail(msg::index_beyond_declared(path_, line, column(line_begin, token), index,
                                                 declared_));
        if (out_.beyond_declared++ == 0) {
          out_.first_beyond_line = line;
          out_.first_beyond_index = index0;
        }
        continue;
      }
      // An explicit zero: nothing to store.
      if (stored == 0.0f) {
        ++out_.explicit_zeros;
        continue;
      }
      out_.indices.push_back(index0);
      out_.values.push_back(stored);
    }
    if (has_previous && out_.indices.size() > out_.row_ptr.back())
      out_.max_index_plus_one = std::max(out_.max_index_plus_one, out_.indices.back() + 1);
    out_.row_ptr.push_back(out_.indices.size());
    return true;
  }

 private:
  static uint64_t column(const char* line_begin, const char* at) {
    return static_cast<uint64_t>(at - line_begin) + 1;
  }

  bool fail_token(const char* token, const char* end, const char* line_begin, uint64_t line) {
    uint64_t col = column(line_begin, token);
    const char* colon = static_cast<const char*>(std::memchr(token, ':', end - token));
    if (!colon) return fail(msg::missing_colon(path_, line, col, shown(token, end)));
    // "-3:1": a negative index is below any base.
    if (*token == '-' && colon - token > 1 && std::all_of(token + 1, colon, is_digit))
      return fail(msg::index_below_base(path_, line, col, shown(token, end),
                                        static_cast<int>(base_)));
    return fail(msg::non_numeric_token(path_, line, col, shown(token, end)));
  }

  // Records the error and drops the partly parsed row, so out_ holds only
  // the complete rows before the bad line.
  bool fail(std::string message) {
    out_.error = std::move(message);
    size_t complete = out_.row_ptr.size() - 1;
    out_.labels.resize(complete);
    out_.label_columns.resize(complete);
    out_.lines.resize(complete);
    out_.indices.resize(out_.row_ptr.back());
    out_.values.resize(out_.row_ptr.back());
    return false;
  }

  const std::string& path_;
  ParsedChunk& out_;
  uint64_t base_;
  uint64_t declared_;
  bool ignore_beyond_;
};

}  // namespace

void parse_libsvm_chunk(const TextChunk& chunk, const std::string& path,
                        const ReaderOptions& options, ParsedChunk& out) {
  FGM_ASSERT(options.index_base == 0 || options.index_base == 1);
  out.index = chunk.index;
  out.labels.clear();
  out.label_columns.clear();
  out.lines.clear();
  out.row_ptr.assign(1, 0);
  out.indices.clear();
  out.values.clear();
  out.explicit_zeros = 0;
  out.beyond_declared = 0;
  out.first_beyond_line = 0;
  out.first_beyond_index = 0;
  out.max_index_plus_one = 0;
  out.error.clear();

  const char* p = chunk.text.data();
  const char* const end = p + chunk.text.size();
  // A UTF-8 byte order mark (some Windows editors write one) is not data.
  if (chunk.index == 0 && chunk.first_line == 1 && end - p >= 3 &&
      std::memcmp(p, "\xEF\xBB\xBF", 3) == 0)
    p += 3;

  ChunkParser parser(path, options, out);
  // Searched once per chunk, not per line: most files hold no comments.
  const char* next_hash = static_cast<const char*>(std::memchr(p, '#', end - p));
  if (!next_hash) next_hash = end;
  uint64_t line = chunk.first_line;
  while (p < end) {
    const char* newline = static_cast<const char*>(std::memchr(p, '\n', end - p));
    const char* line_end = newline ? newline : end;
    if (next_hash < p) {
      next_hash = static_cast<const char*>(std::memchr(p, '#', end - p));
      if (!next_hash) next_hash = end;
    }
    const char* content_end = std::min(line_end, next_hash);
    if (!parser.parse_line(p, content_end, line)) return;
    p = newline ? newline + 1 : end;
    ++line;
  }
}

// ---------------------------------------------------------------- row reader

struct LibsvmReader::Impl {
  LibsvmChunkSource source;
  ReaderOptions options;
  TextChunk text;
  ParsedChunk parsed;
  size_t position = 0;
  uint64_t rows_read = 0;
  uint64_t explicit_zeros = 0;
  uint64_t beyond_declared = 0;
  uint64_t first_beyond_line = 0, first_beyond_index = 0;

  Impl(const std::string& path, const ReaderOptions& opts)
      : source(path, opts.chunk_bytes, opts.max_line_bytes, opts.max_line_key), options(opts) {}
};

LibsvmReader::LibsvmReader(const std::string& path, ReaderOptions options)
    : impl_(std::make_unique<Impl>(path, options)) {}
LibsvmReader::~LibsvmReader() = default;

bool LibsvmReader::next(SparseRow& row) {
  Impl& r = *impl_;
  while (r.position >= r.parsed.rows()) {
    // Rows before a bad line are delivered first, then the error.
    if (!r.parsed.error.empty()) throw Error(ErrorKind::kInvalidInput, r.parsed.error);
    if (!r.source.next(r.text)) return false;
    parse_libsvm_chunk(r.text, r.source.path(), r.options, r.parsed);
    r.position = 0;
    r.explicit_zeros += r.parsed.explicit_zeros;
    if (r.parsed.beyond_declared > 0 && r.beyond_declared == 0) {
      r.first_beyond_line = r.parsed.first_beyond_line;
      r.first_beyond_index = r.parsed.first_beyond_index;
    }
    r.beyond_declared += r.parsed.beyond_declared;
  }
  const ParsedChunk& c = r.parsed;
  size_t i = r.position++;
  row.label = c.labels[i];
  row.line = c.lines[i];
  row.indices.assign(c.indices.begin() + c.row_ptr[i], c.indices.begin() + c.row_ptr[i + 1]);
  row.values.assign(c.values.begin() + c.row_ptr[i], c.values.begin() + c.row_ptr[i + 1]);
  ++r.rows_read;
  return true;
}

uint64_t LibsvmReader::rows_read() const { return impl_->rows_read; }
uint64_t LibsvmReader::explicit_zeros() const { return impl_->explicit_zeros; }
uint64_t LibsvmReader::beyond_declared() const { return impl_->beyond_declared; }
uint64_t LibsvmReader::first_beyond_line() const { return impl_->first_beyond_line; }
uint64_t LibsvmReader::first_beyond_index() const { return impl_->first_beyond_index; }

// ---------------------------------------------------------------- labels

int LabelMap::observe(double label, const std::string& path, uint64_t line, uint64_t column) {
  // numeric: "+1", "1.0" and "1" are one label
  if (last_slot_ < classes() && values_[last_slot_] == label) return last_slot_;
  for (int slot = 0; slot < classes(); ++slot)
    if (values_[slot] == label) return last_slot_ = slot;
  if (classes() == max_classes_)
    throw Error(ErrorKind::kInvalidInput,
                msg::too_many_labels(path, line, column, max_classes_, label_text(label)));
  values_.push_back(label);
  return last_slot_ = classes() - 1;
}

double LabelMap::positive_value() const {
  FGM_ASSERT(classes() >= 2);
  return *std::max_element(values_.begin(), values_.end());
}

double LabelMap::negative_value() const {
  FGM_ASSERT(classes() >= 2);
  return *std::min_element(values_.begin(), values_.end());
}

int8_t LabelMap::sign_of_slot(int slot) const {
  FGM_ASSERT(classes() >= 2 && slot >= 0 && slot < classes());
  return values_[slot] == positive_value() ? 1 : -1;
}

int LabelMap::class_of_slot(int slot) const {
  FGM_ASSERT(slot >= 0 && slot < classes());
  int rank = 0;
  for (double v : values_) rank += v < values_[slot];
  return rank;
}

std::vector<double> LabelMap::class_values() const {
  std::vector<double> sorted = values_;
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

std::string label_text(double value) {
  if (value == 0) return "0";  // also -0
  char buffer[64];
  auto [ptr, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);  // shortest round trip
  return std::string(buffer, ptr);
}

// ---------------------------------------------------------------- hashing

uint64_t hash_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(ErrorKind::kIo, msg::cannot_open(path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorKind::kIo, msg::cannot_open(path, msg::not_regular_input()));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::string buffer(1 << 20, '\0');
  Xxh64 hasher;
  for (;;) {
    ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      throw Error(ErrorKind::kIo, msg::read_failed(path, std::strerror(err)));
    }
    if (got == 0) break;
    hasher.update(buffer.data(), static_cast<size_t>(got));
  }
  ::close(fd);
  return hasher.digest();
}

}  // namespace fgm
