// A one-line progress bar on stderr, shown only when enabled (by default when
// stderr is a terminal). Updates are throttled; thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace fgm {

enum class ProgressMode { kAuto, kOn, kOff };
ProgressMode parse_progress_mode(const std::string& text);
bool progress_enabled(ProgressMode mode);

class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total, bool enabled);
  ~ProgressBar();
  void add(uint64_t amount);
  void set(uint64_t done);
  void finish();

 private:
  void draw(bool force);
  std::string label_;
  uint64_t total_;
  bool enabled_;
  std::atomic<uint64_t> done_{0};
  std::mutex mutex_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  bool finished_ = false;
};

}  // namespace fgm
