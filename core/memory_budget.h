// The memory budget (DuckDB's buffer manager idea): every large allocation in
// fgm takes a Reservation from one MemoryBudget first. Exceeding the limit is
// an OutOfMemory error that lists what holds memory and what to change.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>

namespace fgm {

class MemoryBudget;

// RAII handle for reserved bytes. Move-only; releases on destruction.
class Reservation {
 public:
  Reservation() = default;
  Reservation(Reservation&& other) noexcept;
  Reservation& operator=(Reservation&& other) noexcept;
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  ~Reservation();

  uint64_t bytes() const { return bytes_; }
  // Grows or shrinks the reservation; growing may throw OutOfMemory.
  void resize(uint64_t new_bytes);
  void release();

 private:
  friend class MemoryBudget;
  Reservation(MemoryBudget* budget, uint64_t bytes, std::string purpose, std::string remedy = {})
      : budget_(budget), bytes_(bytes), purpose_(std::move(purpose)), remedy_(std::move(remedy)) {}
  MemoryBudget* budget_ = nullptr;
  uint64_t bytes_ = 0;
  std::string purpose_;
  std::string remedy_;  // repeated when growing the reservation fails
};

class MemoryBudget {
 public:
  // `hint` is appended to out-of-memory messages (which key to raise).
  explicit MemoryBudget(uint64_t limit_bytes, std::string limit_key = "engine.memory_budget");
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Reserves `bytes` for `purpose` (a short noun phrase, e.g. "ingest sort buffer").
  // `remedy` says what besides the budget itself would shrink this use.
  Reservation reserve(uint64_t bytes, std::string_view purpose, std::string_view remedy = {});
  // For caches, which shrink instead of failing: reserves the largest multiple
  // of `unit` bytes that is at most `max_bytes` and fits now (possibly 0).
  Reservation reserve_up_to(uint64_t max_bytes, uint64_t unit, std::string_view purpose);

  uint64_t limit() const { return limit_; }
  // The key or option that sets the limit (named by out-of-memory messages).
  const std::string& limit_key() const { return limit_key_; }
  uint64_t used() const;
  uint64_t peak() const;
  uint64_t available() const;
  // "purpose: bytes, ..." sorted by size, for messages and logs.
  std::string usage_report() const;

 private:
  friend class Reservation;
  void adjust(const std::string& purpose, uint64_t old_bytes, uint64_t new_bytes,
              std::string_view remedy);
  std::string report_locked() const;  // caller holds mutex_

  uint64_t limit_;
  std::string limit_key_;
  mutable std::mutex mutex_;
  uint64_t used_ = 0;
  uint64_t peak_ = 0;
  std::map<std::string, uint64_t> by_purpose_;
};

// A fixed-size array of trivially copyable T whose bytes are reserved from a budget.
template <class T>
class BudgetedArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  BudgetedArray() = default;
  BudgetedArray(MemoryBudget& budget, uint64_t count, std::string_view purpose,
                std::string_view remedy = {})
      : reservation_(budget.reserve(count * sizeof(T), purpose, remedy)),
        data_(count ? new T[count] : nullptr),
        size_(count) {}
  BudgetedArray(BudgetedArray&&) noexcept = default;
  BudgetedArray& operator=(BudgetedArray&&) noexcept = default;

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  uint64_t size() const { return size_; }
  T& operator[](uint64_t i) { return data_[i]; }
  const T& operator[](uint64_t i) const { return data_[i]; }
  T* begin() { return data_.get(); }
  T* end() { return data_.get() + size_; }
  const T* begin() const { return data_.get(); }
  const T* end() const { return data_.get() + size_; }
  void fill(const T& value) {
    for (uint64_t i = 0; i < size_; ++i) data_[i] = value;
  }

 private:
  Reservation reservation_;
  std::unique_ptr<T[]> data_;
  uint64_t size_ = 0;
};

// "256MB", "1.5GiB", "64k", "1048576" -> bytes. K/M/G/T are powers of 1024,
// with or without "B"/"iB". Throws a config error naming `key` otherwise.
uint64_t parse_byte_size(std::string_view text, std::string_view key);
std::string format_bytes(uint64_t bytes);

// Resident set size of this process now, and its peak (VmHWM), from /proc.
uint64_t current_rss_bytes();
uint64_t peak_rss_bytes();

}  // namespace fgm
