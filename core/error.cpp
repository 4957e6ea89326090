#include "core/error.h"

#include <fmt/format.h>

namespace fgm {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kIo: return "I/O error";
    case ErrorKind::kInvalidInput: return "invalid input";
    case ErrorKind::kConfig: return "configuration error";
    case ErrorKind::kCorruption: return "corrupted file";
    case ErrorKind::kOutOfMemory: return "out of memory budget";
    case ErrorKind::kInternal: return "internal error";
  }
  return "error";
}

std::string escape_control_bytes(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    if ((byte < 0x20 && ch != '\n' && ch != '\t') || byte == 0x7f)
      out += fmt::format("\\x{:02x}", byte);
    else
      out += ch;
  }
  return out;
}

void throw_error(ErrorKind kind, const std::string& message) { throw Error(kind, message); }

void assertion_failed(const char* expr, const char* file, int line) {
  throw Error(ErrorKind::kInternal,
              fmt::format("assertion failed: {} at {}:{} (this is a bug in fgm; please report it)",
                          expr, file, line));
}

}  // namespace fgm
