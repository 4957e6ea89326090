// The 24-byte preamble that model and checkpoint files put before their
// FlatBuffer: 8-byte magic, uint64 length, uint64 XXH64 of the FlatBuffer
// (little-endian, like every target of the engine). Readers check the magic
// first, then the length against the file size, then the checksum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/hash.h"

namespace fgm {

inline constexpr size_t kFramePreambleBytes = 8 + 8 + 8;

// magic + length + checksum + the FlatBuffer bytes, ready to write.
inline std::string frame_flatbuffer(const char (&magic)[8], const uint8_t* data, size_t size) {
  std::string out;
  out.reserve(kFramePreambleBytes + size);
  out.append(magic, 8);
  const uint64_t len = size;
  const uint64_t sum = xxh64(data, size);
  out.append(reinterpret_cast<const char*>(&len), 8);
  out.append(reinterpret_cast<const char*>(&sum), 8);
  out.append(reinterpret_cast<const char*>(data), size);
  return out;
}

}  // namespace fgm
