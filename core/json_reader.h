// Minimal JSON reader for the run logs fgm writes itself (run.json,
// path.json), read back by `fgm report`. The whole of RFC 8259; numbers are
// doubles, objects keep their members in file order.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fgm {

class Reservation;

class JsonValue {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  using Member = std::pair<std::string, JsonValue>;

  JsonValue() = default;
  static JsonValue make_bool(bool b);
  static JsonValue make_number(double v);
  static JsonValue make_string(std::string s);
  static JsonValue make_array(std::vector<JsonValue> items);
  static JsonValue make_object(std::vector<Member> members);

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  // The value; meaningful only for the matching type (false / 0 / empty otherwise).
  bool boolean() const { return bool_; }
  double number() const { return number_; }
  const std::string& string() const { return string_; }
  const std::vector<JsonValue>& items() const { return items_; }
  const std::vector<Member>& members() const { return members_; }
  // The first member named `key` of an object, or nullptr.
  const JsonValue* find(std::string_view key) const;

 private:
  Type type_ = Type::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<JsonValue> items_;
  std::vector<Member> members_;
};

// Parses one JSON document (surrounding whitespace allowed). Throws
// Error(kCorruption) naming `source`:line:column and what was expected:
// everything fgm reads as JSON is a file fgm wrote.
JsonValue parse_json(std::string_view text, std::string_view source);
// The same, growing `memory` (a Reservation of a MemoryBudget) to what the
// tree holds as it is built (each value's slot with a vector's growth slack,
// each string's heap bytes): a document too large for the budget fails with
// Error(kOutOfMemory) naming the reservation's purpose, before the memory is used.
JsonValue parse_json(std::string_view text, std::string_view source, Reservation& memory);

}  // namespace fgm
