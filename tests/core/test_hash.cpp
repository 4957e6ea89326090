// XXH64 (core/hash.*), the checksum of every fgm file.
#include <catch2/catch.hpp>

#include "core/hash.h"

TEST_CASE("xxh64 of nothing: a null pointer with length 0 is the empty input", "[hash]") {
  // Reference value of XXH64("", seed 0) from the xxHash specification. A
  // null pointer (an empty vector's data()) used to reach memcpy (UB, found
  // by the model-reader fuzzer under UBSan).
  REQUIRE(fgm::xxh64(nullptr, 0) == 0xEF46DB3751D8E999ull);
  fgm::Xxh64 h;
  h.update(nullptr, 0);
  REQUIRE(h.digest() == 0xEF46DB3751D8E999ull);
}
