#include "core/hash.h"

#include <cstring>

#include <fmt/format.h>

namespace fgm {
namespace {

constexpr uint64_t kP1 = 11400714785074694791ULL;
constexpr uint64_t kP2 = 14029467366897019727ULL;
constexpr uint64_t kP3 = 1609587929392839161ULL;
constexpr uint64_t kP4 = 9650029242287828579ULL;
constexpr uint64_t kP5 = 2870177450012600261ULL;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t read64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint32_t read32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t round(uint64_t acc, uint64_t input) {
  acc += input * kP2;
  acc = rotl(acc, 31);
  return acc * kP1;
}
inline uint64_t merge_round(uint64_t acc, uint64_t val) {
  acc ^= round(0, val);
  return acc * kP1 + kP4;
}

}  // namespace

Xxh64::Xxh64(uint64_t seed) : seed_(seed) {
  v_[0] = seed + kP1 + kP2;
  v_[1] = seed + kP2;
  v_[2] = seed;
  v_[3] = seed - kP1;
}

void Xxh64::update(const void* data, size_t length) {
  if (length == 0) return;  // data may be null (an empty vector's data()): memcpy must not see it
  const auto* p = static_cast<const unsigned char*>(data);
  const unsigned char* end = p + length;
  total_ += length;
  if (buffered_ + length < 32) {
    std::memcpy(buffer_ + buffered_, p, length);
    buffered_ += length;
    return;
  }
  if (buffered_ > 0) {
    size_t fill = 32 - buffered_;
    std::memcpy(buffer_ + buffered_, p, fill);
    p += fill;
    for (int i = 0; i < 4; ++i) v_[i] = round(v_[i], read64(buffer_ + 8 * i));
    buffered_ = 0;
  }
  while (p + 32 <= end) {
    v_[0] = round(v_[0], read64(p));
    v_[1] = round(v_[1], read64(p + 8));
    v_[2] = round(v_[2], read64(p + 16));
    v_[3] = round(v_[3], read64(p + 24));
    p += 32;
  }
  if (p < end) {
    buffered_ = static_cast<size_t>(end - p);
    std::memcpy(buffer_, p, buffered_);
  }
}

uint64_t Xxh64::digest() const {
  uint64_t h;
  if (total_ >= 32) {
    h = rotl(v_[0], 1) + rotl(v_[1], 7) + rotl(v_[2], 12) + rotl(v_[3], 18);
    for (int i = 0; i < 4; ++i) h = merge_round(h, v_[i]);
  } else {
    h = seed_ + kP5;
  }
  h += total_;
  const unsigned char* p = buffer_;
  const unsigned char* end = buffer_ + buffered_;
  while (p + 8 <= end) {
    h ^= round(0, read64(p));
    h = rotl(h, 27) * kP1 + kP4;
    p += 8;
  }
  if (p + 4 <= end) {
    h ^= static_cast<uint64_t>(read32(p)) * kP1;
    h = rotl(h, 23) * kP2 + kP3;
    p += 4;
  }
  while (p < end) {
    h ^= (*p) * kP5;
    h = rotl(h, 11) * kP1;
    ++p;
  }
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

uint64_t xxh64(const void* data, size_t length, uint64_t seed) {
  Xxh64 state(seed);
  state.update(data, length);
  return state.digest();
}

std::string hex64(uint64_t value) { return fmt::format("{:016x}", value); }

}  // namespace fgm
