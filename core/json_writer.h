// Minimal streaming JSON writer for run logs and `fgm inspect` (output only).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fgm {

class JsonWriter {
 public:
  explicit JsonWriter(bool pretty = true) : pretty_(pretty) {}
  JsonWriter& begin_object();
  JsonWriter& end_object();
  // one_line: the elements (numbers, strings) on one line, for long columns.
  JsonWriter& begin_array(bool one_line = false);
  JsonWriter& end_array();
  JsonWriter& key(const std::string& k);
  JsonWriter& value(const std::string& v);
  JsonWriter& value(const char* v) { return value(std::string(v)); }
  JsonWriter& value(double v);
  JsonWriter& value(int64_t v);
  JsonWriter& value(uint64_t v);
  JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(bool v);
  JsonWriter& null();
  const std::string& str() const { return out_; }

 private:
  void before_value();
  void newline();
  bool pretty_;
  std::string out_;
  std::vector<bool> first_;     // per open container: no element yet
  std::vector<bool> one_line_;  // per open container: elements not on lines of their own
  bool after_key_ = false;
};

// The body of a JSON string literal for `s`. Valid UTF-8 passes through;
// each byte that starts no well-formed UTF-8 sequence (paths on Linux are
// arbitrary bytes) becomes \ufffd, so the output is always valid JSON.
std::string json_escape(const std::string& s);

// Length of the well-formed UTF-8 sequence starting at s[i] (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF), or 0 if there is
// none. Shared with the HTML escaping of `fgm report`.
size_t utf8_sequence_length(std::string_view s, size_t i);

}  // namespace fgm
