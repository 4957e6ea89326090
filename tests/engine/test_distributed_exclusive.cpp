// PartitionedDesign (engine/distributed_exclusive.h) on one rank of a
// 4-partition store, against the dense matrix parsed from the text with the
// standard library: its columns, Xw, Xᵀr, the row ranges of sum_rows and the
// working set's restricted design. (Several ranks: tests/cli/test_mpi_exclusive_cli.cpp.)
#include <catch2/catch.hpp>

#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/memory_budget.h"
#include "engine/distributed_exclusive.h"
#include "engine/own_partitions.h"
#include "io/partitioned_store.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

// The store holds floats: the oracle uses the same values.
double stored(double v) { return static_cast<double>(static_cast<float>(v)); }

std::vector<double> random_vector(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0, 1);
  std::vector<double> v(size);
  for (auto& e : v) e = normal(rng);
  return v;
}

// `text` without the features ≡ 7 (mod 11): empty columns, so the design's
// compact indices differ from feature ids.
std::string without_some_features(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    std::istringstream tokens(line);
    std::string token;
    tokens >> token;
    out += token;
    while (tokens >> token)
      if (std::stoull(token.substr(0, token.find(':'))) % 11 != 7) out += " " + token;
    out += "\n";
  }
  return out;
}

// Xx and Xᵀr of the dense rows over the columns `ids` (x, g indexed like ids).
void dense_products(const test::InMemoryData& d, const std::vector<uint64_t>& ids, const std::vector<double>& x,
                    const std::vector<double>& r, std::vector<double>& z, std::vector<double>& g) {
  z.assign(d.rows.size(), 0.0);
  g.assign(ids.size(), 0.0);
  for (size_t i = 0; i < d.rows.size(); ++i)
    for (size_t k = 0; k < ids.size(); ++k) {
      const auto it = d.rows[i].find(ids[k]);
      if (it == d.rows[i].end()) continue;
      z[i] += stored(it->second) * x[k];
      g[k] += stored(it->second) * r[i];
    }
}

void require_close(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).epsilon(1e-12).margin(1e-12));
}

}  // namespace

TEST_CASE("PartitionedDesign: columns, products, row sums and restricted columns are the dense matrix's",
          "[exclusive][distributed]") {
  test::TempDir dir("fgm-partitioned-design");
  dir.write("in.txt", without_some_features(test::random_libsvm(300, 60, 0.08, 5)));
  MemoryBudget budget(256ull << 20);
  IngestOptions options;
  options.tile_rows = 32;
  options.block_bytes = 2 << 10;  // several blocks per partition
  ingest_partitioned(dir.file("in.txt"), dir.file("store"), 4, options, budget);
  const test::InMemoryData d = test::parse_libsvm_simple(dir.file("in.txt"));
  const size_t n = d.rows.size();

  SingleRankCommunicator comm;
  SchedulerOptions scheduler;
  scheduler.threads = 2;
  OwnPartitions own(comm, dir.file("store"), scheduler, 4 << 10, budget);
  PartitionedDesign X(own, budget);

  std::set<uint64_t> nonempty;
  for (const auto& row : d.rows)
    for (const auto& [feature, value] : row) nonempty.insert(feature);
  const std::vector<uint64_t> ids(nonempty.begin(), nonempty.end());
  REQUIRE(ids.size() + 5 == d.width);  // 7, 18, 29, 40, 51 (ids 6, 17, ...) are empty
  REQUIRE(X.column_ids() == ids);
  REQUIRE(X.rows() == n);

  const std::vector<double> x = random_vector(ids.size(), 1), r = random_vector(n, 2);
  std::vector<double> z(n), g(ids.size()), z_oracle, g_oracle;
  X.multiply(x.data(), z.data());
  X.multiply_transposed(r.data(), g.data());
  dense_products(d, ids, x, r, z_oracle, g_oracle);
  require_close(z, z_oracle);
  require_close(g, g_oracle);

  // sum_rows: one range per partition, in row order, tiling [0, n).
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  double sums[2];
  X.sum_rows(2, [&](uint64_t begin, uint64_t end, double* out) {
    ranges.emplace_back(begin, end);
    out[0] = out[1] = 0;
    for (uint64_t i = begin; i < end; ++i) out[0] += r[i], out[1] += 1;
  }, sums);
  const PartitionManifest manifest = read_partition_manifest(dir.file("store"));
  REQUIRE(ranges.size() == 4);
  for (size_t q = 0; q < 4; ++q) {
    CHECK(ranges[q].first == manifest.first_row[q]);
    CHECK(ranges[q].second == manifest.first_row[q + 1]);
  }
  double total = 0;
  for (double v : r) total += v;
  CHECK(sums[0] == Approx(total).epsilon(1e-12));
  CHECK(sums[1] == static_cast<double>(n));

  // The working set's restricted design: every third column, in memory.
  std::vector<uint64_t> W, W_ids;
  for (uint64_t k = 0; k < ids.size(); k += 3) W.push_back(k), W_ids.push_back(ids[k]);
  const std::unique_ptr<exclusive::Design> XW = X.restrict_columns(W);
  REQUIRE(XW->columns() == W.size());
  for (size_t k = 0; k < W.size(); ++k) CHECK(XW->column_id(k) == W_ids[k]);
  const std::vector<double> xw = random_vector(W.size(), 3);
  std::vector<double> zw(n), gw(W.size());
  XW->multiply(xw.data(), zw.data());
  XW->multiply_transposed(r.data(), gw.data());
  dense_products(d, W_ids, xw, r, z_oracle, g_oracle);
  require_close(zw, z_oracle);
  require_close(gw, g_oracle);
}
