#include "core/progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace fgm {

ProgressMode parse_progress_mode(const std::string& text) {
  if (text == "on") return ProgressMode::kOn;
  if (text == "off") return ProgressMode::kOff;
  return ProgressMode::kAuto;
}

bool progress_enabled(ProgressMode mode) {
  if (mode == ProgressMode::kOn) return true;
  if (mode == ProgressMode::kOff) return false;
  return isatty(STDERR_FILENO) == 1;
}

ProgressBar::ProgressBar(std::string label, uint64_t total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::add(uint64_t amount) {
  done_ += amount;
  if (enabled_) draw(false);
}

void ProgressBar::set(uint64_t done) {
  done_ = done;
  if (enabled_) draw(false);
}

void ProgressBar::finish() {
  if (!enabled_ || finished_) return;
  draw(true);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!finished_) std::fputc('\n', stderr);
  finished_ = true;
}

void ProgressBar::draw(bool force) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  auto now = std::chrono::steady_clock::now();
  if (!force && now - last_draw_ < std::chrono::milliseconds(200)) return;
  last_draw_ = now;
  double frac = total_ ? std::min(1.0, static_cast<double>(done_.load()) / total_) : 1.0;
  int width = 30;
  int filled = static_cast<int>(frac * width);
  double secs = std::chrono::duration<double>(now - start_).count();
  std::string bar(filled, '#');
  bar.resize(width, '.');
  std::fprintf(stderr, "\r%s [%s] %5.1f%%  %.1fs", label_.c_str(), bar.c_str(), frac * 100, secs);
  std::fflush(stderr);
}

}  // namespace fgm
