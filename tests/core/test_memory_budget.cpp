#include <catch2/catch.hpp>

#include "core/error.h"
#include "core/hash.h"
#include "core/memory_budget.h"

using namespace fgm;

TEST_CASE("memory budget accounts reservations and names users when exceeded", "[core][budget]") {
  MemoryBudget budget(1000);
  auto a = budget.reserve(600, "sort buffer");
  REQUIRE(budget.used() == 600);
  try {
    auto b = budget.reserve(500, "feature cache", "lower fgm.B");
    FAIL("expected out-of-memory");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::kOutOfMemory);
    std::string m = e.what();
    REQUIRE(m.find("feature cache") != std::string::npos);
    REQUIRE(m.find("sort buffer") != std::string::npos);
    REQUIRE(m.find("engine.memory_budget") != std::string::npos);
    REQUIRE(m.find("lower fgm.B") != std::string::npos);
  }
  REQUIRE(budget.used() == 600);
  a.resize(100);
  REQUIRE(budget.used() == 100);
  { auto c = budget.reserve(900, "x"); REQUIRE(budget.available() == 0); }
  REQUIRE(budget.used() == 100);
  a.release();
  REQUIRE(budget.used() == 0);
  REQUIRE(budget.peak() == 1000);
}

TEST_CASE("byte sizes parse with binary units and reject junk", "[core][budget]") {
  REQUIRE(parse_byte_size("256MB", "k") == 256ull << 20);
  REQUIRE(parse_byte_size("1GiB", "k") == 1ull << 30);
  REQUIRE(parse_byte_size("64k", "k") == 64ull << 10);
  REQUIRE(parse_byte_size("1.5G", "k") == 3ull << 29);
  REQUIRE(parse_byte_size("4096", "k") == 4096);
  REQUIRE_THROWS_AS(parse_byte_size("lots", "engine.memory_budget"), Error);
  REQUIRE_THROWS_AS(parse_byte_size("12XB", "k"), Error);
  REQUIRE_THROWS_AS(parse_byte_size("-5MB", "k"), Error);
}

TEST_CASE("byte sizes that overflow or name no whole byte are errors naming the key",
          "[core][budget]") {
  auto message = [](const char* text) {
    try {
      parse_byte_size(text, "engine.memory_budget");
    } catch (const Error& e) {
      REQUIRE(e.kind() == ErrorKind::kConfig);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // 99999999999 TiB ≈ 1.1e26 bytes: far beyond 2^63 (it used to wrap around).
  REQUIRE(message("99999999999TB").find("engine.memory_budget: '99999999999TB' is larger") == 0);
  // 2^23 TiB = 2^63 bytes is the first size that does not fit; one TiB less does.
  REQUIRE(message("8388608TB").find("is larger than the largest supported size") != std::string::npos);
  REQUIRE(parse_byte_size("8388607TB", "k") == (8388607ull << 40));
  // Issue 23 item 15: the largest size the message names is accepted (a double
  // rounded 2^63 - 1 up to 2^63 and refused it); one byte more is refused.
  REQUIRE(parse_byte_size("9223372036854775807B", "k") == 9223372036854775807ull);
  REQUIRE(parse_byte_size("9223372036854775807", "k") == 9223372036854775807ull);
  REQUIRE(message("9223372036854775808B").find("larger than the largest supported size (9223372036854775807 bytes)") !=
          std::string::npos);
  REQUIRE(message("99999999999999999999999B").find("is larger") != std::string::npos);
  REQUIRE(parse_byte_size("9007199254740991KB", "k") == 9007199254740991ull * 1024);
  REQUIRE(message("9007199254740992KB").find("is larger") != std::string::npos);
  // Sizes that round to 0 bytes, and fractional byte counts.
  for (const char* text : {"0.1B", "0.4", "1.5B", "2.25", "0.0000001KB"}) {
    CAPTURE(text);
    REQUIRE(message(text).find("is not a whole number of bytes") != std::string::npos);
    REQUIRE(message(text).find("engine.memory_budget") == 0);
  }
  // With a larger unit the product is rounded to the nearest byte.
  REQUIRE(parse_byte_size("0.5KB", "k") == 512);
  REQUIRE(parse_byte_size("1B", "k") == 1);
  REQUIRE(parse_byte_size("0.001KB", "k") == 1);  // 1.024 bytes -> 1
}

TEST_CASE("xxh64 matches the reference test vectors", "[core][hash]") {
  // Reference values of XXH64 with seed 0.
  REQUIRE(xxh64("", 0) == 0xef46db3751d8e999ULL);
  REQUIRE(xxh64("a", 1) == 0xd24ec4f1a98c6e5bULL);
  REQUIRE(xxh64("abc", 3) == 0x44bc2cf5ad770999ULL);
  std::string long_text = "Nobody inspects the spammish repetition";
  REQUIRE(xxh64(long_text.data(), long_text.size()) == 0xfbcea83c8a378bf1ULL);
  // Streaming in pieces equals one shot.
  std::string big(1000, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 31 + 7);
  Xxh64 s;
  s.update(big.data(), 13);
  s.update(big.data() + 13, 400);
  s.update(big.data() + 413, big.size() - 413);
  REQUIRE(s.digest() == xxh64(big.data(), big.size()));
}
