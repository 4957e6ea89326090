// Typed errors (DuckDB style). Every user-facing failure is one of these kinds;
// the message says what went wrong, where (file:line:column or config key), and
// what to change. Assertions (FGM_ASSERT) are only for programmer errors.
#pragma once

#include <stdexcept>
#include <string>

namespace fgm {

enum class ErrorKind {
  kIo,            // a file could not be opened, read or written
  kInvalidInput,  // the user's data is malformed
  kConfig,        // a configuration key or command-line argument is wrong
  kCorruption,    // a file written by fgm fails verification
  kOutOfMemory,   // the memory budget would be exceeded
  kInternal,      // a bug in fgm
};

const char* error_kind_name(ErrorKind kind);

// Every byte below 0x20 except line feed and tab, and 0x7f, as \xNN.
std::string escape_control_bytes(const std::string& text);

class Error : public std::runtime_error {
 public:
  // Control bytes in the message (from data or arguments) are written as \xNN:
  // an ESC would reach the terminal and a NUL would cut what() short.
  Error(ErrorKind kind, const std::string& message)
      : std::runtime_error(escape_control_bytes(message)), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

[[noreturn]] void throw_error(ErrorKind kind, const std::string& message);
[[noreturn]] void assertion_failed(const char* expr, const char* file, int line);

}  // namespace fgm

#define FGM_ASSERT(expr) \
  ((expr) ? (void)0 : ::fgm::assertion_failed(#expr, __FILE__, __LINE__))
