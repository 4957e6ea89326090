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
