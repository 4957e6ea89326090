// Shared by the libFuzzer harnesses: a per-process scratch directory for the
// readers that take a path, and the rule for what counts as a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "core/error.h"

namespace fgm::fuzz {

// A directory in /dev/shm (or the temp dir), removed when the process exits.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path base = std::filesystem::exists("/dev/shm")
                                     ? std::filesystem::path("/dev/shm")
                                     : std::filesystem::temp_directory_path();
    std::filesystem::path d = base / ("fgm-fuzz-" + std::to_string(::getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return d;
  }();
  return dir;
}

inline void write_bytes(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) std::abort();  // the harness itself failed, not the code under test
}

// A typed fgm::Error is the expected answer to bad input. kInternal (a failed
// FGM_ASSERT) and any other exception (exit 70 in the CLI) are bugs: abort so
// libFuzzer records the input. Memory errors and UB are caught by the sanitizers.
// With FGM_FUZZ_VERBOSE set (replaying an input by hand), the outcome is
// printed: which check rejected the input, or that it was accepted.
inline bool verbose() {
  static const bool on = std::getenv("FGM_FUZZ_VERBOSE") != nullptr;
  return on;
}

template <class Fn>
void expect_clean_outcome(Fn&& fn) {
  try {
    fn();
    if (verbose()) std::fprintf(stderr, "fuzz input accepted\n");
  } catch (const Error& e) {
    if (verbose()) std::fprintf(stderr, "fuzz input rejected: %s\n", e.what());
    if (e.kind() == ErrorKind::kInternal) {
      std::fprintf(stderr, "fgm internal error on fuzz input: %s\n", e.what());
      std::abort();
    }
  }
}

}  // namespace fgm::fuzz
