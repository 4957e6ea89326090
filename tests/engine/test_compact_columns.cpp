// Compact selected columns (cache/selected_features.h) and the APG's compact
// row index (solvers/apg_layout.h) in a whole FGM run: on a store whose
// selected columns are dense (binary and valued), the run in the compact forms
// gives the same model, bit for bit, as the plain forms (row lists with
// values; listed R_h with per-entry positions), and completes under a budget
// the plain forms exceed.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <sstream>

#include "cache/selected_features.h"
#include "core/error.h"
#include "engine/fgm_trainer.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "solvers/apg.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

// n rows, `features` columns each present on ~`share` of the rows; even
// columns binary, odd ones valued; labels from a planted rule on columns 0–3.
std::string dense_libsvm(uint64_t n, uint64_t features, double share, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  std::ostringstream out;
  for (uint64_t i = 0; i < n; ++i) {
    std::ostringstream row;
    double margin = -0.4;
    for (uint64_t j = 0; j < features; ++j) {
      if (unif(rng) >= share) continue;
      const double x = j % 2 == 0 ? 1.0 : double(1 + rng() % 5) / 4;
      if (j < 4) margin += (j % 2 == 0 ? 0.8 : -0.6) * x;
      row << ' ' << (j + 1) << ':' << x;
    }
    const int label = (margin + 0.5 * (unif(rng) - 0.5) > 0) ? 1 : -1;
    out << label << row.str() << '\n';
  }
  return out.str();
}

struct Forms {
  bool plain;
  explicit Forms(bool p) : plain(p) {
    force_column_form(plain ? std::optional<ColumnForm>(ColumnForm::kSparse) : std::nullopt);
    force_apg_row_index(plain ? ApgRowIndex::kListed : ApgRowIndex::kSmallest);
  }
  ~Forms() {
    force_column_form(std::nullopt);
    force_apg_row_index(ApgRowIndex::kSmallest);
  }
};

void require_same_model(const Model& a, const Model& b) {
  REQUIRE(a.features.size() == b.features.size());
  for (size_t k = 0; k < a.features.size(); ++k) {
    REQUIRE(a.features[k].key == b.features[k].key);
    REQUIRE(std::memcmp(&a.features[k].weight, &b.features[k].weight, sizeof(double)) == 0);
  }
  REQUIRE(std::memcmp(&a.bias, &b.bias, sizeof(double)) == 0);
  REQUIRE(std::memcmp(&a.objective, &b.objective, sizeof(double)) == 0);
}

}  // namespace

TEST_CASE("Dense selected columns: the compact forms give the plain forms' model and fit a smaller budget",
          "[engine][fgm][budget][compact]") {
  test::TempDir dir("fgm-compact");
  const uint64_t n = 30000;
  const std::string path = dir.write("train.svm", dense_libsvm(n, 40, 0.7, 5));
  {
    MemoryBudget budget(512ull << 20);
    IngestOptions o;
    o.tile_rows = 1024;
    ingest_libsvm(path, dir.file("store"), o, budget);
  }
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    CAPTURE(loss_name(loss));
    TrainSettings s;
    s.B = 4;
    s.max_iterations = 4;
    s.eps_outer = 0;
    s.apg.C = 1;
    s.apg.loss = loss;
    s.apg.bias = true;
    s.apg.threads = 2;
    s.scheduler.threads = 2;
    s.block_bytes = 64 << 10;
    auto train = [&](bool plain, uint64_t limit) {
      Forms forms(plain);
      MemoryBudget budget(limit);
      auto store = ShardStore::open(dir.file("store"), budget);
      TrainOutcome out = train_fgm(*store, s, budget);
      REQUIRE(budget.peak() <= limit);
      return out;
    };
    const TrainOutcome plain = train(true, 512ull << 20);
    const TrainOutcome compact = train(false, 512ull << 20);
    REQUIRE(plain.iterations.size() == 4);
    REQUIRE(plain.model.features.size() == 16);
    require_same_model(compact.model, plain.model);
    for (size_t t = 0; t < plain.iterations.size(); ++t)
      REQUIRE(compact.iterations[t].apg_iterations == plain.iterations[t].apg_iterations);
    // 16 columns of ~21,000 entries: ~2.7 MB as row lists with values, 60 KB
    // as bitmaps; the APG's positions and R_h lists another ~1.6 MB. The
    // smallest budget (in steps of 5%) the compact run completes in is one
    // the plain forms exceed.
    uint64_t limit = compact.budget_peak;
    while (true) {
      try {
        Forms forms(false);
        MemoryBudget budget(limit * 95 / 100);
        auto store = ShardStore::open(dir.file("store"), budget);
        train_fgm(*store, s, budget);
      } catch (const Error& e) {
        REQUIRE(e.kind() == ErrorKind::kOutOfMemory);
        break;
      }
      limit = limit * 95 / 100;
    }
    CAPTURE(plain.budget_peak, compact.budget_peak, limit);
    try {
      train(true, limit);
      FAIL("the plain forms fit the compact run's smallest budget");
    } catch (const Error& e) {
      REQUIRE(e.kind() == ErrorKind::kOutOfMemory);
    }
    require_same_model(train(false, limit).model, plain.model);
  }
}
