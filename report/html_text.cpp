#include "report/html_text.h"

#include <cmath>

#include <fmt/format.h>

#include "core/json_writer.h"

namespace fgm::report {

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (size_t i = 0; i < text.size();) {
    const size_t len = utf8_sequence_length(text, i);
    if (len == 0) {
      out += "\xef\xbf\xbd";  // U+FFFD for a byte that starts no valid sequence
      ++i;
      continue;
    }
    if (len > 1) {
      out.append(text.substr(i, len));
      i += len;
      continue;
    }
    const char c = text[i++];
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      case '\t':
      case '\n': out += c; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) out += "\xef\xbf\xbd";
        else out += c;
    }
  }
  return out;
}

std::string format_number(double v, int significant) {
  if (!std::isfinite(v)) return "\xe2\x80\x93";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{:.0f}", v);
  return fmt::format("{:.{}g}", v, significant);
}

std::string format_fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "\xe2\x80\x93";
  return fmt::format("{:.{}f}", v, decimals);
}

std::string format_seconds(double seconds) {
  if (!std::isfinite(seconds)) return "\xe2\x80\x93";
  const double a = std::fabs(seconds);
  if (a != 0 && a < 1e-3) return fmt::format("{:.0f} \xc2\xb5s", seconds * 1e6);
  if (a != 0 && a < 1) return fmt::format("{:.3g} ms", seconds * 1e3);
  if (a >= 100) return fmt::format("{:.0f} s", seconds);
  return fmt::format("{:.3g} s", seconds);
}

}  // namespace fgm::report
