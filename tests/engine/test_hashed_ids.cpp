// Hashed id spaces: a store whose feature ids are spread over [1, 2^40) trains
// the same model as the store of the same data with dense ids, after mapping
// ids (the map is increasing, so ties still go to the same feature).
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>
#include <sstream>

#include "engine/fgm_trainer.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

// `text` with every index j replaced by ids[j] (1-based in, 1-based out).
std::string remap_ids(const std::string& text, const std::vector<uint64_t>& ids) {
  std::istringstream in(text);
  std::ostringstream out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string label, item;
    fields >> label;
    out << label;
    while (fields >> item) {
      const size_t colon = item.find(':');
      out << ' ' << ids[std::stoull(item.substr(0, colon))] << item.substr(colon);
    }
    out << '\n';
  }
  return out.str();
}

TrainOutcome train(const std::string& store_dir, MemoryBudget& budget, int threads) {
  auto store = ShardStore::open(store_dir, budget);
  TrainSettings s;
  s.B = 4;
  s.max_iterations = 3;
  s.eps_outer = 0;
  s.apg.C = 5;
  s.apg.bias = true;
  s.apg.threads = s.scheduler.threads = threads;
  s.block_bytes = 2 << 10;
  return train_fgm(*store, s, budget);
}

}  // namespace

TEST_CASE("a linear model trained on hashed ids equals the dense-id model after mapping ids", "[engine][hashed]") {
  test::TempDir dir("fgm-hashed");
  const uint64_t m = 80;
  const std::string dense = test::random_libsvm(600, m, 0.08, 21, {3, 17, 42, 64});
  std::mt19937_64 rng(4);
  std::set<uint64_t> drawn;
  while (drawn.size() < m) drawn.insert(1 + rng() % ((uint64_t{1} << 40) - 1));
  std::vector<uint64_t> ids = {0};  // ids[j] for 1-based j
  ids.insert(ids.end(), drawn.begin(), drawn.end());
  MemoryBudget budget(256ull << 20);
  for (uint32_t tile_rows : {7u, 64u}) {
    IngestOptions o;
    o.tile_rows = tile_rows;
    o.block_bytes = 1 << 10;
    o.reader.declared_features = m;
    const std::string dense_store = dir.file("dense-" + std::to_string(tile_rows));
    ingest_libsvm(dir.write("dense.svm", dense), dense_store, o, budget);
    o.reader.declared_features = 0;
    const std::string hashed_store = dir.file("hashed-" + std::to_string(tile_rows));
    ingest_libsvm(dir.write("hashed.svm", remap_ids(dense, ids)), hashed_store, o, budget);
    for (int threads : {1, 2}) {
      CAPTURE(tile_rows, threads);
      TrainOutcome a = train(dense_store, budget, threads);
      TrainOutcome b = train(hashed_store, budget, threads);
      REQUIRE(b.model.n_features > (uint64_t{1} << 39));
      REQUIRE(a.model.features.size() == 12);
      REQUIRE(a.model.features.size() == b.model.features.size());
      for (size_t k = 0; k < a.model.features.size(); ++k) {
        REQUIRE(ids[a.model.features[k].key.ids[0] + 1] == b.model.features[k].key.ids[0] + 1);
        REQUIRE(a.model.features[k].weight == b.model.features[k].weight);
      }
      REQUIRE(a.model.bias == b.model.bias);
    }
  }
}
