#include "core/memory_budget.h"

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/messages.h"

namespace fgm {

Reservation::Reservation(Reservation&& other) noexcept
    : budget_(other.budget_),
      bytes_(other.bytes_),
      purpose_(std::move(other.purpose_)),
      remedy_(std::move(other.remedy_)) {
  other.budget_ = nullptr;
  other.bytes_ = 0;
}

Reservation& Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    release();
    budget_ = other.budget_;
    bytes_ = other.bytes_;
    purpose_ = std::move(other.purpose_);
    remedy_ = std::move(other.remedy_);
    other.budget_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

Reservation::~Reservation() { release(); }

void Reservation::resize(uint64_t new_bytes) {
  FGM_ASSERT(budget_ != nullptr);
  budget_->adjust(purpose_, bytes_, new_bytes, remedy_);
  bytes_ = new_bytes;
}

void Reservation::release() {
  if (budget_ != nullptr) {
    budget_->adjust(purpose_, bytes_, 0, {});
    budget_ = nullptr;
    bytes_ = 0;
  }
}

MemoryBudget::MemoryBudget(uint64_t limit_bytes, std::string limit_key)
    : limit_(limit_bytes), limit_key_(std::move(limit_key)) {}

Reservation MemoryBudget::reserve(uint64_t bytes, std::string_view purpose,
                                  std::string_view remedy) {
  std::string name(purpose);
  adjust(name, 0, bytes, remedy);
  return Reservation(this, bytes, std::move(name), std::string(remedy));
}

Reservation MemoryBudget::reserve_up_to(uint64_t max_bytes, uint64_t unit, std::string_view purpose) {
  FGM_ASSERT(unit > 0);
  std::string name(purpose);
  std::lock_guard<std::mutex> lock(mutex_);  // measure and take in one step
  const uint64_t bytes = std::min(max_bytes, limit_ - used_) / unit * unit;
  if (bytes > 0) {
    used_ += bytes;
    by_purpose_[name] += bytes;
    peak_ = std::max(peak_, used_);
  }
  return Reservation(this, bytes, std::move(name));
}

void MemoryBudget::adjust(const std::string& purpose, uint64_t old_bytes, uint64_t new_bytes,
                          std::string_view remedy) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (new_bytes > old_bytes) {
    uint64_t grow = new_bytes - old_bytes;
    if (used_ + grow > limit_) {
      throw Error(ErrorKind::kOutOfMemory, msg::budget_exceeded(purpose, grow, limit_ - used_, limit_,
                                                                limit_key_, report_locked(), remedy));
    }
    used_ += grow;
    by_purpose_[purpose] += grow;
  } else {
    uint64_t shrink = old_bytes - new_bytes;
    used_ -= shrink;
    auto it = by_purpose_.find(purpose);
    if (it != by_purpose_.end()) {
      it->second -= std::min(it->second, shrink);
      if (it->second == 0) by_purpose_.erase(it);
    }
  }
  peak_ = std::max(peak_, used_);
}

uint64_t MemoryBudget::used() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return used_;
}
uint64_t MemoryBudget::peak() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_;
}
uint64_t MemoryBudget::available() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return limit_ - used_;
}

std::string MemoryBudget::usage_report() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return report_locked();
}

std::string MemoryBudget::report_locked() const {
  std::vector<std::pair<uint64_t, std::string>> uses;
  for (const auto& [name, b] : by_purpose_) uses.emplace_back(b, name);
  std::sort(uses.rbegin(), uses.rend());
  std::string report;
  for (const auto& [b, name] : uses) {
    if (!report.empty()) report += ", ";
    report += fmt::format("{} {}", name, format_bytes(b));
  }
  return report.empty() ? "nothing" : report;
}

uint64_t parse_byte_size(std::string_view text, std::string_view key) {
  std::string s;
  for (char ch : text)
    if (!std::isspace(static_cast<unsigned char>(ch))) s += ch;
  size_t pos = 0;
  while (pos < s.size() && (std::isdigit(static_cast<unsigned char>(s[pos])) || s[pos] == '.')) ++pos;
  std::string number = s.substr(0, pos);
  std::string unit = s.substr(pos);
  for (auto& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  double value = 0;
  bool ok = !number.empty();
  if (ok) {
    try {
      size_t used = 0;
      value = std::stod(number, &used);
      ok = used == number.size();
    } catch (...) {
      ok = false;
    }
  }
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB") scale = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TB" || unit == "TIB") scale = 1024.0 * 1024 * 1024 * 1024;
  if (!ok || scale == 0 || !std::isfinite(value) || value <= 0) {
    throw Error(ErrorKind::kConfig, msg::bad_byte_size(key, text));
  }
  // Sizes are held as int64 in the config; 2^63 itself is already too large.
  constexpr uint64_t kMaxBytes = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  // A whole number is counted exactly: a double would round 2^63 - 1 up to 2^63.
  if (number.find('.') == std::string::npos) {
    uint64_t count = 0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), count);
    uint64_t exact = 0;
    if (ec == std::errc::result_out_of_range || end != number.data() + number.size() ||
        __builtin_mul_overflow(count, static_cast<uint64_t>(scale), &exact) || exact > kMaxBytes)
      throw Error(ErrorKind::kConfig, msg::byte_size_too_large(key, text, kMaxBytes));
    return exact;
  }
  const double bytes = value * scale;
  if (!(bytes < 9223372036854775808.0))
    throw Error(ErrorKind::kConfig, msg::byte_size_too_large(key, text, kMaxBytes));
  // A byte count must be whole: "0.1B" or "1.5" name no size. With a larger
  // unit ("0.3MB") the product is rounded to the nearest byte.
  if (bytes < 1 || (scale == 1 && bytes != std::floor(bytes)))
    throw Error(ErrorKind::kConfig, msg::byte_size_not_whole(key, text));
  return std::min<uint64_t>(static_cast<uint64_t>(std::llround(bytes)), kMaxBytes);
}

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  if (u == 0) return fmt::format("{} B", bytes);
  return fmt::format("{:.1f} {}", v, units[u]);
}

static uint64_t read_status_kb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  size_t len = std::char_traits<char>::length(field);
  while (std::getline(in, line)) {
    if (line.compare(0, len, field) == 0) {
      return std::stoull(line.substr(len + 1)) * 1024;
    }
  }
  return 0;
}

uint64_t current_rss_bytes() { return read_status_kb("VmRSS"); }
uint64_t peak_rss_bytes() { return read_status_kb("VmHWM"); }

}  // namespace fgm
