// pnorm_kta on a partitioned store (engine/distributed_kta.h), one rank of a
// 4-partition store: the alignments against a direct computation over the
// parsed text (the squared correlation with the centred unit labels, all n
// rows dense) and against the single-store pass on the unpartitioned data,
// and every point's active set against the closed form
// {i : a_i > 2λ₁ε + λ₂pε^(p−1)} of the oracle alignments. Binary, integer
// (tied) and constant columns, an empty column id. (Several
// ranks: tests/cli/test_mpi_kta_cli.cpp.)
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "core/communicator.h"
#include "engine/distributed_kta.h"
#include "io/ingest.h"
#include "io/partitioned_store.h"
#include "tests/engine/kta_oracle.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

// Features 1–3 carry the label (1 binary, 2 and 3 integers in 1..3, many
// ties); 4 is the constant 2 on every row; 5 is binary noise; 6–9 integer
// noise; 11 is empty (a gap in the ids).
std::string kta_text(uint64_t rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> small(0, 3);
  std::uniform_real_distribution<double> u(0, 1);
  std::ostringstream out;
  for (uint64_t r = 0; r < rows; ++r) {
    const bool positive = u(rng) < 0.4;
    out << (positive ? "+1" : "-1");
    if (positive != (u(rng) < 0.2)) out << " 1:1";
    if (int v = small(rng) + positive) out << " 2:" << std::min(v, 3);
    if (int v = small(rng)) out << " 3:" << (positive ? v : std::max(1, v - 1));
    out << " 4:2";
    if (u(rng) < 0.3) out << " 5:1";
    for (int j = 6; j <= 9; ++j)
      if (int v = small(rng)) out << ' ' << j << ':' << v;
    out << " 12:" << (u(rng) < 0.5 ? 1 : 2) << '\n';
  }
  return out.str();
}

KtaSettings linear_settings(int threads) {
  KtaSettings s;
  s.kernel = kta::KernelKind::kLinear;
  s.path.lambda1 = 0.02;
  s.path.lambda2 = 0.01;
  s.path.p_step = 0.05;
  s.apg.eps_inner = 1e-7;
  s.scheduler.threads = threads;
  s.block_bytes = 512;
  return s;
}

}  // namespace

TEST_CASE("distributed KTA alignments: the dense oracle and the single store; active sets: the closed form",
          "[kta][distributed]") {
  test::TempDir dir("fgm-distributed-kta");
  const std::string text = dir.write("in.txt", kta_text(400, 3));
  MemoryBudget budget(256ull << 20);
  IngestOptions options;
  options.tile_rows = 32;
  options.block_bytes = 512;  // several blocks per partition
  ingest_partitioned(text, dir.file("store"), 4, options, budget);
  ingest_libsvm(text, dir.file("plain"), options, budget);
  const test::InMemoryData d = test::parse_libsvm_simple(text);
  const std::map<uint64_t, double> oracle = test::oracle_kta_alignments(d);
  REQUIRE(oracle.at(3) == 0.0);  // feature 4 (id 3) is constant

  SingleRankCommunicator comm;
  const KtaSettings s = linear_settings(2);
  std::vector<kta::PathPoint> points;
  PartitionedRun partitioned;
  const std::unique_ptr<KtaData> data = open_kta_partitions(comm, dir.file("store"), s, budget, partitioned);
  KtaRun run = data->align(s);
  run_kta_path(*data, s, budget, run, [&](const KtaPoint& p, const kta::PathPoint& point) {
    points.push_back(point);
    CHECK(p.has_model);
    CHECK(p.model.features.size() == p.selected);
  });
  REQUIRE(points.size() == 21);
  const std::vector<kta::FeatureAlignment>& a = run.alignments;

  // The dense oracle, and the single store's pass over the same rows.
  REQUIRE(a.size() == oracle.size());
  const std::unique_ptr<ShardStore> plain = ShardStore::open(dir.file("plain"), budget);
  const KtaRun single = open_kta_store(*plain, budget)->align(s);
  REQUIRE(single.alignments.size() == a.size());
  for (size_t k = 0; k < a.size(); ++k) {
    INFO("feature " << a[k].feature);
    REQUIRE(oracle.count(a[k].feature) == 1);
    CHECK(a[k].alignment == Approx(oracle.at(a[k].feature)).epsilon(1e-12).margin(1e-15));
    CHECK(single.alignments[k].feature == a[k].feature);
    CHECK(a[k].alignment == Approx(single.alignments[k].alignment).epsilon(1e-13).margin(1e-16));
    CHECK(a[k].trace == Approx(single.alignments[k].trace).epsilon(1e-13).margin(1e-16));
  }
  CHECK(a[3].alignment == 0.0);  // the constant column, exactly

  // Every point's active features are the closed form's (away from rounding at its threshold).
  for (const kta::PathPoint& point : points) {
    INFO("p = " << point.p);
    const double t = kta::active_threshold(point.p, s.path);
    std::set<uint64_t> active, closed_form;
    for (uint32_t i : point.active) active.insert(a[i].feature);
    for (const auto& [f, value] : oracle) {
      REQUIRE(std::fabs(value - t) > 1e-9);
      if (value > t) closed_form.insert(f);
    }
    CHECK(active == closed_form);
  }
  CHECK(!points.front().active.empty());
  CHECK(points.front().active.size() < oracle.size());
}
