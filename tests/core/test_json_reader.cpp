#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "core/error.h"
#include "core/json_reader.h"
#include "core/json_writer.h"

using fgm::Error;
using fgm::ErrorKind;
using fgm::JsonValue;
using fgm::parse_json;

namespace {

// The message of the error parse_json throws for `text` ("" if none).
std::string parse_error(const std::string& text) {
  try {
    parse_json(text, "log.json");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kCorruption);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("JSON reader: values, nesting and member order", "[core][json]") {
  JsonValue v = parse_json(" {\"b\": [1, -2.5e3, 0.125, true, false, null], \"a\": {\"x\": \"y\"}, \"b\": 3} ", "t");
  REQUIRE(v.is_object());
  REQUIRE(v.members().size() == 3);
  CHECK(v.members()[0].first == "b");
  CHECK(v.members()[1].first == "a");
  const JsonValue* b = v.find("b");  // the first of a repeated name
  REQUIRE(b);
  REQUIRE(b->is_array());
  REQUIRE(b->items().size() == 6);
  CHECK(b->items()[0].number() == 1);
  CHECK(b->items()[1].number() == -2500);
  CHECK(b->items()[2].number() == 0.125);
  CHECK(b->items()[3].is_bool());
  CHECK(b->items()[3].boolean());
  CHECK_FALSE(b->items()[4].boolean());
  CHECK(b->items()[5].is_null());
  CHECK(v.find("a")->find("x")->string() == "y");
  CHECK(v.find("missing") == nullptr);
  CHECK(parse_json("[]", "t").items().empty());
  CHECK(parse_json("{}", "t").members().empty());
  CHECK(parse_json("-0", "t").number() == 0);
}

TEST_CASE("JSON reader: string escapes and UTF-8", "[core][json]") {
  CHECK(parse_json(R"("a\"b\\c\/d\b\f\n\r\t")", "t").string() == "a\"b\\c/d\b\f\n\r\t");
  CHECK(parse_json(R"("\u00e9\u20ac")", "t").string() == "\xc3\xa9\xe2\x82\xac");
  CHECK(parse_json(R"("\ud83d\ude00")", "t").string() == "\xf0\x9f\x98\x80");  // surrogate pair
  CHECK(parse_json(R"("\ud83dx")", "t").string() == "\xef\xbf\xbdx");         // lone surrogate
  CHECK(parse_json("\"\xc3\xa9\"", "t").string() == "\xc3\xa9");              // raw UTF-8 passes
}

TEST_CASE("JSON reader reads back what JsonWriter writes", "[core][json]") {
  fgm::JsonWriter j;
  j.begin_object();
  j.key("name\n\"x\"").value(std::string("tab\there \xff end"));
  j.key("pi").value(3.141592653589793);
  j.key("tiny").value(1e-300);
  j.key("nan").value(std::nan(""));
  j.key("big").value(uint64_t{1} << 52);
  j.key("list").begin_array().value(int64_t{-7}).value(true).end_array();
  j.end_object();
  JsonValue v = parse_json(j.str(), "t");
  CHECK(v.find("name\n\"x\"")->string() == "tab\there \xef\xbf\xbd end");
  CHECK(v.find("pi")->number() == 3.141592653589793);
  CHECK(v.find("tiny")->number() == 1e-300);
  CHECK(v.find("nan")->is_null());
  CHECK(v.find("big")->number() == 4503599627370496.0);
  CHECK(v.find("list")->items()[0].number() == -7);
}

TEST_CASE("JSON reader: malformed input names file, line and column", "[core][json]") {
  CHECK(parse_error("{\n  \"a\": 1,\n  \"b\" 2\n}") ==
        "log.json:3:7: not valid JSON: expected ':', found '2'; the file is damaged or was not written by fgm: "
        "rerun the command that writes it");
  CHECK(parse_error("").rfind("log.json:1:1: not valid JSON: expected a value, found end of file", 0) == 0);
  // Each of these is rejected (the position is checked above; here only that it fails).
  for (std::string bad : {"{", "[1,]", "{\"a\":1,}", "01", "1.", ".5", "1e", "+1", "tru", "nul", "\"abc",
                          "\"a\\x\"", "\"\\u12G4\"", "\"a\nb\"", "[1] 2", "{1: 2}", "1e999", "NaN", "[\"a\" \"b\"]"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_error(bad).empty());
  }
  std::string deep(300, '[');
  deep += std::string(300, ']');
  CHECK_FALSE(parse_error(deep).empty());  // nesting limit, not a stack overflow
  std::string fine(200, '[');
  fine += std::string(200, ']');
  CHECK(parse_error(fine).empty());
}
