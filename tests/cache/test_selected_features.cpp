// The selected-feature cache's compact column forms (cache/selected_features.h)
// against the plain sparse form: every form returns exactly the entries it
// was given (rows, value bits, order), the form chosen is the one with the
// fewest bytes (computed independently here), and the reservation equals
// bytes() — which counts each form's arrays.
#include <catch2/catch.hpp>

#include <bit>
#include <cstring>
#include <random>
#include <vector>

#include "cache/selected_features.h"

using namespace fgm;

namespace {

struct Entries {
  std::vector<uint32_t> rows;
  std::vector<float> values;
};

// `share` of the n rows, values: uniform `value`, or random (never +0.0f
// unless `with_zero`: then every 9th entry is an explicit +0.0f).
Entries make_column(uint64_t seed, uint32_t n, double share, bool uniform, float value, bool with_zero) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  Entries e;
  for (uint32_t i = 0; i < n; ++i) {
    if (unif(rng) >= share) continue;
    e.rows.push_back(i);
    float v = uniform ? value : float(unif(rng) * 4 - 2);
    if (!uniform && v == 0) v = 0.5f;
    if (with_zero && e.rows.size() % 9 == 0) v = 0.0f;
    e.values.push_back(v);
  }
  return e;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Independent byte counts of the five forms (−1: the form cannot hold the column).
int64_t form_bytes(ColumnForm form, const Entries& e, uint64_t n) {
  const int64_t nnz = int64_t(e.rows.size()), words = int64_t((n + 63) / 64);
  bool uniform = nnz > 0, no_zero = true;
  for (float v : e.values) {
    uniform = uniform && std::bit_cast<uint32_t>(v) == std::bit_cast<uint32_t>(e.values[0]);
    no_zero = no_zero && std::bit_cast<uint32_t>(v) != 0;
  }
  switch (form) {
    case ColumnForm::kSparse: return 8 * nnz;
    case ColumnForm::kSparseUniform: return uniform ? 4 * nnz : -1;
    case ColumnForm::kBitmap: return 8 * words + 4 * nnz;
    case ColumnForm::kBitmapUniform: return uniform ? 8 * words : -1;
    case ColumnForm::kDense: return no_zero ? int64_t(4 * n) : -1;
  }
  return -1;
}

constexpr ColumnForm kForms[] = {ColumnForm::kSparse, ColumnForm::kSparseUniform, ColumnForm::kBitmap,
                                 ColumnForm::kBitmapUniform, ColumnForm::kDense};

}  // namespace

TEST_CASE("Selected-feature cache: every compact form returns the plain form's entries",
          "[cache][compact]") {
  // n not a multiple of 64 (a partial last bitmap word); shares from one
  // entry to every row; binary, uniform non-binary (−0.0f too), valued,
  // valued with explicit zeros.
  const uint32_t n = 1000 + 37;
  struct Case {
    double share;
    bool uniform;
    float value;
    bool with_zero;
  };
  const Case cases[] = {{0.001, true, 1.0f, false}, {0.01, false, 0, false}, {0.05, true, 1.0f, false},
                        {0.3, true, 2.5f, false},   {0.3, false, 0, false},   {0.3, false, 0, true},
                        {0.98, false, 0, false},    {1.0, false, 0, false},   {1.0, true, 1.0f, false},
                        {0.5, true, -0.0f, false},  {0.99, false, 0, true},   {0.0, false, 0, false}};
  uint64_t seed = 1;
  for (const Case& c : cases) {
    const Entries e = make_column(++seed, n, c.share, c.uniform, c.value, c.with_zero);
    CAPTURE(c.share, c.uniform, c.value, c.with_zero, e.rows.size());
    // The smallest form by the independent count (ties: the earlier form).
    ColumnForm smallest = ColumnForm::kSparse;
    for (ColumnForm f : kForms) {
      const int64_t b = form_bytes(f, e, n);
      if (b >= 0 && b < form_bytes(smallest, e, n)) smallest = f;
    }
    for (int forced = -1; forced < 5; ++forced) {
      CAPTURE(forced);
      if (forced >= 0) force_column_form(kForms[forced]);
      MemoryBudget budget(uint64_t(1) << 30);
      SelectedFeatureCache cache(budget, n);
      force_column_form(std::nullopt);
      cache.begin_batch();
      FeatureKey key;
      key.ids[0] = 7;
      cache.add_column(key, e.rows, e.values);
      const ColumnView col = cache.column(0);
      if (forced < 0) {
        REQUIRE(col.form == smallest);
      } else {
        const bool holds = form_bytes(kForms[forced], e, n) >= 0 && !e.rows.empty();
        REQUIRE(col.form == (holds ? kForms[forced] : ColumnForm::kSparse));
      }
      REQUIRE(col.nnz == e.rows.size());
      Entries got;
      col.entries(got.rows, got.values);
      REQUIRE(got.rows == e.rows);
      REQUIRE(same_bits(got.values, e.values));
      // bytes(): the form's arrays plus the index; the reservation is bytes().
      REQUIRE(budget.used() == cache.bytes());
      REQUIRE(uint64_t(form_bytes(col.form, e, n)) == column_form_bytes(col.form, col.nnz, n));
      REQUIRE(cache.bytes() >= column_form_bytes(col.form, col.nnz, n));
      // A copy keeps the form and the entries.
      SelectedFeatureCache copy(budget, n);
      copy.begin_batch();
      copy.add_column_copy(cache, 0);
      REQUIRE(copy.column(0).form == col.form);
      REQUIRE(copy.key(0).ids[0] == 7);
      Entries copied;
      copy.column(0).entries(copied.rows, copied.values);
      REQUIRE(copied.rows == e.rows);
      REQUIRE(same_bits(copied.values, e.values));
    }
  }
}

TEST_CASE("Selected-feature cache: compact forms take their bytes from the budget", "[cache][compact]") {
  // 64 binary columns covering half of 2^20 rows: 2 MiB each as row lists
  // with values (the plain form), 128 KiB each as bitmaps. A budget of 10 MiB
  // holds them all compact and fails for the plain form, naming the cache.
  const uint32_t n = 1u << 20;
  std::vector<Entries> columns;
  for (int k = 0; k < 64; ++k) columns.push_back(make_column(100 + k, n, 0.5, true, 1.0f, false));
  auto fill = [&](MemoryBudget& budget) {
    SelectedFeatureCache cache(budget, n);
    cache.begin_batch();
    for (const Entries& e : columns) cache.add_column(FeatureKey{}, e.rows, e.values);
    REQUIRE(budget.used() == cache.bytes());
    for (size_t k = 0; k < columns.size(); ++k) REQUIRE(cache.column(k).form == ColumnForm::kBitmapUniform);
    REQUIRE(cache.bytes() < 64 * (n / 8) + 16384);
  };
  MemoryBudget budget(10u << 20);
  fill(budget);
  REQUIRE(budget.used() == 0);
  force_column_form(ColumnForm::kSparse);
  MemoryBudget plain(10u << 20);
  SelectedFeatureCache cache(plain, n);
  force_column_form(std::nullopt);
  cache.begin_batch();
  try {
    for (const Entries& e : columns) cache.add_column(FeatureKey{}, e.rows, e.values);
    FAIL("the plain form fit in 10 MiB");
  } catch (const std::exception& ex) {
    REQUIRE(std::string(ex.what()).find("selected-feature cache") != std::string::npos);
  }
}
