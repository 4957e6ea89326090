// XXH64 (Yann Collet's xxHash, 64-bit variant), used for file checksums and
// input fingerprints. Streaming form so large files hash without buffering.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace fgm {

class Xxh64 {
 public:
  explicit Xxh64(uint64_t seed = 0);
  void update(const void* data, size_t length);
  uint64_t digest() const;

 private:
  uint64_t v_[4];
  uint64_t seed_;
  uint64_t total_ = 0;
  unsigned char buffer_[32];
  size_t buffered_ = 0;
};

uint64_t xxh64(const void* data, size_t length, uint64_t seed = 0);
std::string hex64(uint64_t value);

}  // namespace fgm
