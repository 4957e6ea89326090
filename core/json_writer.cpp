#include "core/json_writer.h"

#include <cmath>

#include <fmt/format.h>

namespace fgm {

size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t len;
  unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) len = 2;
  else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    if (c == 0xe0) lo = 0xa0;       // overlong
    else if (c == 0xed) hi = 0x9f;  // U+D800..U+DFFF
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    if (c == 0xf0) lo = 0x90;       // overlong
    else if (c == 0xf4) hi = 0x8f;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < len; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  return len;
}

std::string json_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = utf8_sequence_length(s, i);
    if (len == 0) {
      out += "\\ufffd";  // a byte that starts no valid sequence
      ++i;
      continue;
    }
    if (len > 1) {
      out.append(s, i, len);
      i += len;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
    ++i;
  }
  return out;
}

void JsonWriter::newline() {
  if (!pretty_) return;
  out_ += '\n';
  out_.append(first_.size() * 2, ' ');
}

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    const bool first = first_.back();
    if (!first) out_ += ',';
    first_.back() = false;
    if (!one_line_.back()) newline();
    else if (!first && pretty_) out_ += ' ';
  }
}

JsonWriter& JsonWriter::begin_object() {
  before_value();
  out_ += '{';
  first_.push_back(true);
  one_line_.push_back(false);
  return *this;
}
JsonWriter& JsonWriter::end_object() {
  bool empty = first_.back();
  first_.pop_back();
  one_line_.pop_back();
  if (!empty) newline();
  out_ += '}';
  return *this;
}
JsonWriter& JsonWriter::begin_array(bool one_line) {
  before_value();
  out_ += '[';
  first_.push_back(true);
  one_line_.push_back(one_line);
  return *this;
}
JsonWriter& JsonWriter::end_array() {
  bool empty = first_.back();
  bool one_line = one_line_.back();
  first_.pop_back();
  one_line_.pop_back();
  if (!empty && !one_line) newline();
  out_ += ']';
  return *this;
}
JsonWriter& JsonWriter::key(const std::string& k) {
  before_value();
  out_ += '"' + json_escape(k) + "\":";
  if (pretty_) out_ += ' ';
  after_key_ = true;
  return *this;
}
JsonWriter& JsonWriter::value(const std::string& v) {
  before_value();
  out_ += '"' + json_escape(v) + '"';
  return *this;
}
JsonWriter& JsonWriter::value(double v) {
  before_value();
  if (!std::isfinite(v)) out_ += "null";
  else out_ += fmt::format("{}", v);  // shortest round-trip representation
  return *this;
}
JsonWriter& JsonWriter::value(int64_t v) {
  before_value();
  out_ += std::to_string(v);
  return *this;
}
JsonWriter& JsonWriter::value(uint64_t v) {
  before_value();
  out_ += std::to_string(v);
  return *this;
}
JsonWriter& JsonWriter::value(bool v) {
  before_value();
  out_ += v ? "true" : "false";
  return *this;
}
JsonWriter& JsonWriter::null() {
  before_value();
  out_ += "null";
  return *this;
}

}  // namespace fgm
