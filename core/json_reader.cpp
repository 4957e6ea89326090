#include "core/json_reader.h"

#include <charconv>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "core/memory_budget.h"
#include "core/messages.h"

namespace fgm {

JsonValue JsonValue::make_bool(bool b) {
  JsonValue v;
  v.type_ = Type::kBool;
  v.bool_ = b;
  return v;
}
JsonValue JsonValue::make_number(double x) {
  JsonValue v;
  v.type_ = Type::kNumber;
  v.number_ = x;
  return v;
}
JsonValue JsonValue::make_string(std::string s) {
  JsonValue v;
  v.type_ = Type::kString;
  v.string_ = std::move(s);
  return v;
}
JsonValue JsonValue::make_array(std::vector<JsonValue> items) {
  JsonValue v;
  v.type_ = Type::kArray;
  v.items_ = std::move(items);
  return v;
}
JsonValue JsonValue::make_object(std::vector<Member> members) {
  JsonValue v;
  v.type_ = Type::kObject;
  v.members_ = std::move(members);
  return v;
}

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [k, v] : members_)
    if (k == key) return &v;
  return nullptr;
}

namespace {

// Deeper nesting than any fgm log has; the limit keeps a damaged file from
// overflowing the stack.
constexpr int kMaxDepth = 256;

class Parser {
 public:
  Parser(std::string_view text, std::string_view source, Reservation* memory)
      : text_(text), source_(source), memory_(memory) {}

  JsonValue document() {
    skip_whitespace();
    JsonValue v = value(0);
    skip_whitespace();
    if (pos_ != text_.size()) fail("end of the document");
    return v;
  }

 private:
  [[noreturn]] void fail(std::string_view expected) const {
    uint64_t line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string found = pos_ >= text_.size() ? std::string("end of file")
                                             : "'" + std::string(1, text_[pos_]) + "'";
    throw Error(ErrorKind::kCorruption, msg::bad_json(source_, line, column, expected, found));
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  void skip_whitespace() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
  }

  void expect_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) fail(std::string(word));
    pos_ += word.size();
  }

  // What the tree holds, grown into `memory_` as it is built: each value
  // twice (a vector's slot and its growth slack), each string's heap bytes.
  void account(uint64_t bytes) {
    if (!memory_) return;
    accounted_ += bytes;
    if (accounted_ > memory_->bytes()) memory_->resize(accounted_ + (uint64_t{1} << 20));
  }
  void account_string(const std::string& s) {
    if (s.capacity() > sizeof(std::string) - 1) account(s.capacity() + 1);
  }

  JsonValue value(int depth) {
    if (depth > kMaxDepth) fail("less nesting");
    account(2 * sizeof(JsonValue::Member));
    switch (peek()) {
      case '{': return object(depth);
      case '[': return array(depth);
      case '"': {
        std::string s = string();
        account_string(s);
        return JsonValue::make_string(std::move(s));
      }
      case 't': expect_word("true"); return JsonValue::make_bool(true);
      case 'f': expect_word("false"); return JsonValue::make_bool(false);
      case 'n': expect_word("null"); return JsonValue();
      default: return JsonValue::make_number(number());
    }
  }

  JsonValue object(int depth) {
    ++pos_;  // '{'
    std::vector<JsonValue::Member> members;
    skip_whitespace();
    if (peek() == '}') {
      ++pos_;
      return JsonValue::make_object(std::move(members));
    }
    for (;;) {
      skip_whitespace();
      if (peek() != '"') fail("a member name in double quotes");
      std::string key = string();
      account_string(key);
      skip_whitespace();
      if (peek() != ':') fail("':'");
      ++pos_;
      skip_whitespace();
      JsonValue v = value(depth + 1);
      members.emplace_back(std::move(key), std::move(v));
      skip_whitespace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return JsonValue::make_object(std::move(members));
      }
      fail("',' or '}'");
    }
  }

  JsonValue array(int depth) {
    ++pos_;  // '['
    std::vector<JsonValue> items;
    skip_whitespace();
    if (peek() == ']') {
      ++pos_;
      return JsonValue::make_array(std::move(items));
    }
    for (;;) {
      skip_whitespace();
      items.push_back(value(depth + 1));
      skip_whitespace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return JsonValue::make_array(std::move(items));
      }
      fail("',' or ']'");
    }
  }

  // The grammar of RFC 8259 section 6, checked before conversion (from_chars
  // alone would accept "1." or leading zeros).
  double number() {
    const size_t start = pos_;
    auto digits = [&] {
      const size_t from = pos_;
      while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
      return pos_ > from;
    };
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
    } else if (!digits()) {
      pos_ = start;
      fail("a value");
    }
    if (peek() == '.') {
      ++pos_;
      if (!digits()) fail("a digit after '.'");
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!digits()) fail("a digit in the exponent");
    }
    double v = 0;
    auto [end, ec] = std::from_chars(text_.data() + start, text_.data() + pos_, v);
    if (ec != std::errc() || end != text_.data() + pos_ || !std::isfinite(v)) {
      pos_ = start;
      fail("a number that fits a double");
    }
    return v;
  }

  unsigned hex4() {
    unsigned code = 0;
    for (int i = 0; i < 4; ++i) {
      char c = peek();
      unsigned d;
      if (c >= '0' && c <= '9') d = static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') d = static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') d = static_cast<unsigned>(c - 'A' + 10);
      else fail("four hex digits after \\u");
      code = code * 16 + d;
      ++pos_;
    }
    return code;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  // A \u escape, with a following low surrogate when it starts a pair; a lone
  // surrogate becomes U+FFFD (it has no UTF-8 form).
  unsigned unicode_escape() {
    unsigned cp = hex4();
    if (cp >= 0xd800 && cp <= 0xdbff && text_.substr(pos_, 2) == "\\u") {
      const size_t save = pos_;
      pos_ += 2;
      unsigned low = hex4();
      if (low >= 0xdc00 && low <= 0xdfff) return 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
      pos_ = save;
    }
    if (cp >= 0xd800 && cp <= 0xdfff) return 0xfffd;
    return cp;
  }

  std::string string() {
    ++pos_;  // '"'
    std::string out;
    for (;;) {
      if (at_end()) fail("'\"' closing the string");
      char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) fail("no control character inside a string");
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      ++pos_;
      char e = peek();
      ++pos_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': append_utf8(out, unicode_escape()); break;
        default: --pos_; fail("an escape: one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u");
      }
    }
  }

  std::string_view text_;
  std::string_view source_;
  Reservation* memory_ = nullptr;
  uint64_t accounted_ = 0;
  size_t pos_ = 0;
};

}  // namespace

JsonValue parse_json(std::string_view text, std::string_view source) {
  return Parser(text, source, nullptr).document();
}
JsonValue parse_json(std::string_view text, std::string_view source, Reservation& memory) {
  return Parser(text, source, &memory).document();
}

}  // namespace fgm
