// The 24-byte preamble that model and checkpoint files put before their
// FlatBuffer: 8-byte magic, uint64 length, uint64 XXH64 of the FlatBuffer
// (little-endian, like every target of the engine). Readers check the magic
// first, then the length against the file size, then the checksum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <flatbuffers/flatbuffers.h>

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

// Copies a FlatBuffer vector of scalars. The verifier checks the alignment of
// a vector's length field (4 bytes) but not of its elements, so in a crafted
// file 8-byte elements may sit at any 4-byte boundary: copy bytes, never
// dereference (Vector::Get and its iterators would). Little-endian, as above.
template <class T>
std::vector<T> copy_scalars(const flatbuffers::Vector<T>* v) {
  static_assert(std::is_arithmetic_v<T>);
  std::vector<T> out(v ? v->size() : 0);
  if (!out.empty()) std::memcpy(out.data(), v->Data(), out.size() * sizeof(T));
  return out;
}

}  // namespace fgm
