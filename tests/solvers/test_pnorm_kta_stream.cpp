// The streamed alignment pass (solvers/pnorm_kta/alignment_pass.h) on a store
// several times engine.memory_budget: every column's alignment equals the
// per-column computation on an independent in-memory parse of the text, and
// 1 and 2 threads give identical results (bit for bit).
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <sstream>

#include "core/error.h"
#include "features/block_stream.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "solvers/pnorm_kta/alignment_pass.h"
#include "tests/test_util.h"

using namespace fgm;
using namespace fgm::kta;

namespace {

// Integer, tied, continuous, constant and single-row columns; labels depend
// on features 0-3 so some alignments are large.
std::string kta_text(uint64_t rows, uint64_t features, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> normal(0, 1);
  std::ostringstream out;
  for (uint64_t r = 0; r < rows; ++r) {
    std::ostringstream row;
    double margin = 0;
    for (uint64_t j = 0; j < features; ++j) {
      double v = 0;
      if (j == features - 1) v = 5;                       // constant, stored in every row
      else if (j == features - 2) v = r == 17 ? 2.5 : 0;  // one nonzero
      else if (j % 3 == 0) v = u(rng) < 0.4 ? static_cast<int>(u(rng) * 4) + 1 : 0;  // integer
      else if (j % 3 == 1) v = u(rng) < 0.5 ? (u(rng) < 0.5 ? -1 : 1) : 0;          // tied ±1
      else v = u(rng) < 0.2 ? static_cast<float>(normal(rng)) : 0;                   // continuous
      if (v == 0) continue;
      row << ' ' << j + 1 << ':' << v;
      if (j < 4) margin += v;
    }
    out << (margin + 0.5 * normal(rng) > 1 ? "+1" : "-1") << row.str() << '\n';
  }
  return out.str();
}

}  // namespace

TEST_CASE("streamed KTA alignments: store several times the budget, 1 and 2 threads identical",
          "[kta][stream]") {
  test::TempDir dir("fgm-kta-stream");
  const uint64_t rows = 1500, features = 150;
  const std::string path = dir.write("train.svm", kta_text(rows, features, 42));
  const test::InMemoryData data = test::parse_libsvm_simple(path);
  {
    MemoryBudget ingest_budget(64ull << 20);
    IngestOptions o;
    o.reader.declared_features = features;
    o.shard_target_bytes = 32 << 10;
    o.block_bytes = 2048;
    o.tile_rows = 128;  // several tiles: the pass merges them per column
    ingest_libsvm(path, dir.file("store"), o, ingest_budget);
  }
  for (KernelKind kernel : {KernelKind::kLinear, KernelKind::kRbf}) {
    CAPTURE(kernel_name(kernel));
    std::vector<FeatureAlignment> first;
    for (int threads : {1, 2}) {
      MemoryBudget budget(128ull << 10);
      auto store = ShardStore::open(dir.file("store"), budget);
      const StoreInfo& info = store->info();
      REQUIRE(info.n_rows == rows);
      REQUIRE(info.shard_bytes > 4 * budget.limit());  // the store is several times the budget
      SchedulerOptions so;
      so.threads = threads;
      BlockStream stream(*store, so, budget);
      const auto blocks = store->plan_blocks(4096);
      REQUIRE(blocks.size() > 20);
      const AlignmentPass result = stream_alignments(stream, blocks, kernel, budget);
      REQUIRE(budget.peak() <= budget.limit());
      REQUIRE(result.features.size() == info.nonempty_columns);
      if (threads == 1) {
        first = result.features;
        continue;
      }
      REQUIRE(result.features.size() == first.size());
      for (size_t k = 0; k < first.size(); ++k) {
        REQUIRE(result.features[k].feature == first[k].feature);
        REQUIRE(std::memcmp(&result.features[k].alignment, &first[k].alignment, sizeof(double)) == 0);
        REQUIRE(std::memcmp(&result.features[k].trace, &first[k].trace, sizeof(double)) == 0);
      }
    }
    // Oracle: each column from the text parse, computed in memory.
    std::vector<int8_t> y;
    for (double l : data.labels) y.push_back(l > 0 ? 1 : -1);
    const std::vector<double> unit = centred_unit_labels(y.data(), rows);
    size_t k = 0;
    for (uint64_t j = 0; j < features; ++j) {
      std::vector<uint32_t> r;
      std::vector<float> v;
      float lo = 0, hi = 0;
      for (uint32_t i = 0; i < rows; ++i) {
        auto it = data.rows[i].find(j);
        if (it == data.rows[i].end()) continue;
        r.push_back(i);
        v.push_back(static_cast<float>(it->second));
      }
      if (r.empty()) continue;
      lo = *std::min_element(v.begin(), v.end());
      hi = *std::max_element(v.begin(), v.end());
      if (r.size() < rows) {
        lo = std::min(lo, 0.0f);
        hi = std::max(hi, 0.0f);
      }
      ColumnEntries c{r.data(), v.data(), r.size(), lo, hi};
      RbfScratch s;
      const FeatureAlignment want = kernel == KernelKind::kLinear ? linear_alignment(j, c, unit.data(), rows)
                                                                  : rbf_alignment(j, c, unit.data(), rows, s);
      REQUIRE(k < first.size());
      CAPTURE(j);
      REQUIRE(first[k].feature == j);
      REQUIRE(first[k].alignment == want.alignment);
      REQUIRE(first[k].trace == want.trace);
      REQUIRE(first[k].bandwidth == want.bandwidth);
      ++k;
    }
    REQUIRE(k == first.size());
    REQUIRE(first.back().alignment == 0);  // the constant column
    // The planted features lead.
    double best_planted = 0, best_other = 0;
    for (const auto& f : first) (f.feature < 4 ? best_planted : best_other) =
        std::max(f.feature < 4 ? best_planted : best_other, f.alignment);
    REQUIRE(best_planted > 2 * best_other);
  }
}

TEST_CASE("streamed KTA alignments refuse a one-label store", "[kta][stream]") {
  test::TempDir dir("fgm-kta-onelabel");
  const std::string path = dir.write("train.svm", "1 1:1\n1 2:3\n1 1:2 2:1\n");
  MemoryBudget budget(16ull << 20);
  IngestOptions o;
  // Ingest itself may refuse a single label; either refusal names the problem.
  try {
    ingest_libsvm(path, dir.file("store"), o, budget);
  } catch (const Error& e) {
    REQUIRE(std::string(e.what()).find("label") != std::string::npos);
    return;
  }
  auto store = ShardStore::open(dir.file("store"), budget);
  BlockStream stream(*store, SchedulerOptions{}, budget);
  REQUIRE_THROWS_WITH(stream_alignments(stream, store->plan_blocks(4096), KernelKind::kLinear, budget),
                      Catch::Contains("one label"));
}
