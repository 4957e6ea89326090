// Wall time of a phase, for logs and run.json.
#pragma once

#include <chrono>

namespace fgm {

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace fgm
