#include <catch2/catch.hpp>

#include <cstdint>
#include <algorithm>
#include <new>
#include <numeric>

#include "core/huge_pages.h"

using namespace fgm;

TEST_CASE("huge-page vectors hold their values across growth, at sizes around the mapping threshold",
          "[core][huge_pages]") {
  // Below, at and above kHugePageMin bytes, and not a multiple of 2 MiB.
  for (size_t count : {size_t{1}, kHugePageMin / 8 - 1, kHugePageMin / 8, kHugePageMin / 8 + 12345}) {
    INFO("count " << count);
    HugeVector<uint64_t> v(count);
    REQUIRE(std::all_of(v.begin(), v.end(), [](uint64_t x) { return x == 0; }));  // value-initialised
    std::iota(v.begin(), v.end(), uint64_t{7});
    if (count * sizeof(uint64_t) >= kHugePageMin)  // mapped 2 MiB-aligned
      REQUIRE(reinterpret_cast<uintptr_t>(v.data()) % kHugePageBytes == 0);
    v.resize(2 * count + 3, 1);  // reallocates: old contents move over
    size_t wrong = 0;
    for (size_t i = 0; i < v.size(); ++i) wrong += v[i] != (i < count ? 7 + i : 1);
    REQUIRE(wrong == 0);
    HugeVector<uint64_t> w = v;  // copy, then both released
    REQUIRE(w == v);
  }
}

TEST_CASE("a huge-page allocation too large for the address space throws bad_alloc", "[core][huge_pages]") {
  HugePageAllocator<double> alloc;
  REQUIRE_THROWS_AS(alloc.allocate(size_t(-1) / sizeof(double)), std::bad_alloc);
  REQUIRE_THROWS_AS(alloc.allocate(size_t{1} << 60), std::bad_alloc);
}
