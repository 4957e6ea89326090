#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "report/html_text.h"

using fgm::report::format_fixed;
using fgm::report::format_number;
using fgm::report::format_seconds;
using fgm::report::html_escape;

TEST_CASE("html_escape: markup characters, invalid UTF-8 and control characters", "[report][html]") {
  CHECK(html_escape("<script>alert('x') & \"y\"</script>") ==
        "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;");
  CHECK(html_escape("plain text/path_1.svm") == "plain text/path_1.svm");
  CHECK(html_escape("caf\xc3\xa9 \xe2\x82\xac") == "caf\xc3\xa9 \xe2\x82\xac");  // valid UTF-8 passes
  CHECK(html_escape("a\xff" "b") == "a\xef\xbf\xbd" "b");                         // invalid byte -> U+FFFD
  CHECK(html_escape("a\xc3") == "a\xef\xbf\xbd");                                 // truncated sequence
  CHECK(html_escape(std::string("a\0b\x1b", 4)) == "a\xef\xbf\xbd" "b\xef\xbf\xbd");
  CHECK(html_escape("line\nnext\ttab") == "line\nnext\ttab");
  CHECK(html_escape("&amp;") == "&amp;amp;");  // escaping is not idempotent: text is never pre-escaped
}

TEST_CASE("number formats", "[report][html]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::string dash = "\xe2\x80\x93";
  CHECK(format_number(12) == "12");
  CHECK(format_number(-3) == "-3");
  CHECK(format_number(123456789012) == "123456789012");
  CHECK(format_number(0.8125) == "0.8125");
  CHECK(format_number(0.81254) == "0.8125");
  CHECK(format_number(12345.6) == "1.235e+04");
  CHECK(format_number(2.5e-7, 3) == "2.5e-07");
  CHECK(format_number(0.1 + 0.2, 6) == "0.3");
  CHECK(format_number(nan) == dash);
  CHECK(format_number(std::numeric_limits<double>::infinity()) == dash);
  CHECK(format_fixed(0.865, 4) == "0.8650");
  CHECK(format_fixed(nan, 4) == dash);
  CHECK(format_seconds(4.5612) == "4.56 s");
  CHECK(format_seconds(0.0123) == "12.3 ms");
  CHECK(format_seconds(0.00085) == "850 \xc2\xb5s");
  CHECK(format_seconds(0) == "0 s");
  CHECK(format_seconds(1234.4) == "1234 s");
}
