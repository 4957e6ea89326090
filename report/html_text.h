// Text put into the HTML report: escaping and number formats.
#pragma once

#include <string>
#include <string_view>

namespace fgm::report {

// Safe as element text and inside a double- or single-quoted attribute:
// & < > " ' become entities; each byte that starts no valid UTF-8 sequence
// and each control character other than tab / newline becomes U+FFFD.
std::string html_escape(std::string_view text);

// `significant` significant digits, shortest form ("0.8125", "1.235e+04");
// whole numbers below 10^15 in full; NaN and infinities as an en dash.
std::string format_number(double v, int significant = 4);
// Fixed decimals ("0.8650"); NaN as an en dash.
std::string format_fixed(double v, int decimals);
// Seconds in a readable unit: "850 µs", "12.3 ms", "4.56 s".
std::string format_seconds(double seconds);

}  // namespace fgm::report
