#include <catch2/catch.hpp>

#include <string>

#include "core/json_writer.h"

using fgm::json_escape;

TEST_CASE("json_escape keeps valid UTF-8 and replaces every invalid byte with U+FFFD",
          "[core][json]") {
  // Valid 2-, 3- and 4-byte sequences pass through unchanged.
  const std::string valid = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xed\x9f\xbf \xf4\x8f\xbf\xbf";
  REQUIRE(json_escape(valid) == valid);
  REQUIRE(json_escape("a\"b\\c\n\x01") == "a\\\"b\\\\c\\n\\u0001");

  const std::string R = "\\ufffd";
  REQUIRE(json_escape("run-\xff.svm") == "run-" + R + ".svm");
  REQUIRE(json_escape("\x80") == R);                         // lone continuation byte
  REQUIRE(json_escape("\xc0\xaf") == R + R);                 // overlong '/'
  REQUIRE(json_escape("\xe0\x80\xaf") == R + R + R);         // overlong 3-byte form
  REQUIRE(json_escape("\xed\xa0\x80") == R + R + R);         // surrogate U+D800
  REQUIRE(json_escape("\xf4\x90\x80\x80") == R + R + R + R); // above U+10FFFF
  REQUIRE(json_escape("\xf5\x80") == R + R);
  REQUIRE(json_escape("x\xe2\x82") == "x" + R + R);          // truncated at the end
  REQUIRE(json_escape("\xe2\x82" "A") == R + R + "A");       // truncated before ASCII
  REQUIRE(json_escape("\xc3\xa9\xff\xc3\xa9") == "\xc3\xa9" + R + "\xc3\xa9");
}

TEST_CASE("one-line arrays keep their elements on one line inside pretty output", "[core][json]") {
  fgm::JsonWriter j;
  j.begin_object();
  j.key("a").begin_array(true);
  j.value(1.5).value(int64_t{2}).null();
  j.end_array();
  j.key("e").begin_array(true).end_array();
  j.key("b").begin_array();
  j.value(int64_t{3});
  j.end_array();
  j.end_object();
  REQUIRE(j.str() == "{\n  \"a\": [1.5, 2, null],\n  \"e\": [],\n  \"b\": [\n    3\n  ]\n}");
  fgm::JsonWriter compact(false);
  compact.begin_array(true).value(int64_t{1}).value(int64_t{2}).end_array();
  REQUIRE(compact.str() == "[1,2]");
}
