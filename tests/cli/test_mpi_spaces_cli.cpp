// The generated feature spaces (features.kind = poly2, hik, additive) on a
// partitioned store (docs/distributed.md, "poly-2 and kernel spaces"): the
// same model bit for bit on 1 process, 2 and 4 ranks and 1/2 threads; the
// distributed poly-2 top-B against a brute-force enumeration of every pair;
// hik/additive on ids near 2^40 in a small budget against a brute force;
// the communication recorded per pass; the settings still refused. Tagged
// [.mpi] (run by the `mpi` ctest entry, oversubscribed).
#include <catch2/catch.hpp>

#include <set>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <tuple>

#include "core/json_reader.h"
#include "features/kernel_maps.h"
#include "io/model_file.h"
#include "tests/cli/cli_test_util.h"

namespace fgm::test {
namespace {

using Row = std::map<uint32_t, int>;  // 1-based feature -> value

// Rows with binary features (1..binary), small integers (binary+1..features,
// some negative), many ties; labels from a product of two features plus a
// linear term, so a cross pair carries signal.
std::vector<std::pair<int, Row>> planted_rows(uint64_t n, uint32_t features, uint32_t binary, uint32_t per_row,
                                              uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> feature(1, features);
  std::uniform_int_distribution<int> small(-2, 3);
  std::vector<std::pair<int, Row>> rows;
  for (uint64_t i = 0; i < n; ++i) {
    Row row;
    for (uint32_t k = 0; k < per_row; ++k) {
      const uint32_t f = feature(rng);
      const int v = f <= binary ? 1 : small(rng);
      if (v != 0) row[f] = v;
    }
    if (rng() % 2) row[1] = 1, row[2] = 1;  // the planted pairs (1, 2) and (3, 4)
    if (rng() % 3 == 0) row[3] = 1, row[4] = 1;
    auto x = [&](uint32_t f) { return row.count(f) ? row[f] : 0; };
    const int score = 2 * x(1) * x(2) + 2 * x(3) * x(4) - 1 + x(binary + 1) - (rng() % 3 == 0 ? 1 : 0);
    rows.push_back({score > 0 ? 1 : -1, row});
  }
  return rows;
}

std::string libsvm(const std::vector<std::pair<int, Row>>& rows) {
  std::string text;
  for (const auto& [y, row] : rows) {
    text += y > 0 ? "+1" : "-1";
    for (const auto& [f, v] : row) text += " " + std::to_string(f) + ":" + std::to_string(v);
    text += "\n";
  }
  return text;
}

// Keys, batches, weights and objective of two models, bit for bit.
void require_same_model(const std::string& a, const std::string& b) {
  const Model ma = read_model(a), mb = read_model(b);
  REQUIRE(ma.features.size() == mb.features.size());
  REQUIRE(!ma.features.empty());
  CHECK(ma.feature_kind == mb.feature_kind);
  for (size_t k = 0; k < ma.features.size(); ++k) {
    INFO("feature " << k);
    CHECK(ma.features[k].key == mb.features[k].key);
    CHECK(ma.features[k].key.group == mb.features[k].key.group);
    CHECK(ma.features[k].batch == mb.features[k].batch);
    CHECK(std::memcmp(&ma.features[k].weight, &mb.features[k].weight, sizeof(double)) == 0);
  }
  CHECK(std::memcmp(&ma.objective, &mb.objective, sizeof(double)) == 0);
  CHECK(ma.scale_ids == mb.scale_ids);
  CHECK(ma.scale_min == mb.scale_min);
  CHECK(ma.scale_max == mb.scale_max);
}

std::vector<JsonValue> scoring_passes(const TempDir& dir, const std::string& out) {
  const JsonValue run_json = parse_json(slurp(dir.file(out + "/run.json")), "run.json");
  std::vector<JsonValue> passes;
  for (const auto& pass : run_json.find("distributed")->find("passes")->items())
    if (pass.find("phase")->string() == "scoring") passes.push_back(pass);
  return passes;
}

}  // namespace

TEST_CASE("poly2, hik and additive models on 2 and 4 ranks are the 1-process model bit for bit", "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-spaces");
  const auto rows = planted_rows(480, 24, 8, 5, 21);
  dir.write("in.txt", libsvm(rows));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4 --tile-rows 32").code == 0);
  REQUIRE(run(dir, "ingest in.txt --out plain --tile-rows 32").code == 0);
  dir.write("c.toml", "[data]\ntrain = \"store\"\n[fgm]\nB = 3\nmax_iterations = 3\neps_outer = 0\n");
  const std::vector<std::pair<std::string, std::string>> kinds = {
      {"poly2", "features.kind=poly2"},
      {"hik", "features.kind=hik features.levels=7"},
      {"additive", "features.kind=additive features.order=2"},
      {"poly2-logistic", "features.kind=poly2 features.gamma=0.5 features.coef0=2 fgm.loss=logistic"}};
  for (const auto& [name, settings] : kinds) {
    INFO(name);
    const std::string one = name + "-1";
    RunResult r = run(dir, "train --config c.toml " + settings + " output.dir=" + one);
    INFO(r.err);
    REQUIRE(r.code == 0);
    // Without mpirun nothing is communicated.
    for (const auto& pass : scoring_passes(dir, one)) CHECK(pass.find("bytes")->number() == 0);
    for (int np : {2, 4}) {
      INFO("np = " << np);
      const std::string out = name + "-" + std::to_string(np);
      r = run_mpi(dir, np, "train --config c.toml " + settings + " output.dir=" + out +
                               " engine.threads=" + std::to_string(np == 2 ? 2 : 1));
      INFO(r.err);
      REQUIRE(r.code == 0);
      CHECK(contains(r.out, "ranks=" + std::to_string(np)));
      require_same_model(dir.file(one + "/model.fgm"), dir.file(out + "/model.fgm"));
      const auto passes = scoring_passes(dir, out);
      REQUIRE(passes.size() == 4);  // 3 iterations and the pass that ends the loop
      const double m = 24;
      for (const auto& pass : passes) {
        if (name.rfind("poly2", 0) == 0) {
          // moments by column ranges (reduce-scatter), the ranges' top singles
          // and seed candidates, seed pairs, the active set, candidate pairs,
          // selected columns' dots. Every column is non-empty in every
          // partition, so rank 0 sends each other rank d its node's 3 moments
          // of d's range dense (24-byte header + 8 bytes a key) and receives
          // as much for its own range: at least that, plus the lists.
          CHECK(pass.find("collectives")->number() == 6);
          double scatter = 4.0 * np;
          for (int d = 1; d < np; ++d) {
            const double width_d = std::floor((d + 1) * m / np) - std::floor(d * m / np);
            scatter += 24 + 8 * 3 * width_d + 24 + 8 * 3 * std::floor(m / np);
          }
          CHECK(pass.find("bytes")->number() > scatter);
        } else {
          // component sums by column ranges (reduce-scatter), the ranges' top
          // lists with their candidates' ranges, selected columns' dots
          CHECK(pass.find("collectives")->number() == 3);
        }
      }
      if (name == "hik") {
        // By column ranges: less than the allgather of every rank's m·7
        // component sums that the first version made (and that the empty dot
        // vector of the first pass adds to).
        CHECK(passes[0].find("bytes")->number() < np * (2 + m * 7) * 8 + 4 * np);
      }
    }
    const Model model = read_model(dir.file(one + "/model.fgm"));
    CHECK(model.feature_kind == name.substr(0, name.find('-')));
    // The single-store trainer (another summation order, another APG) picks
    // the same first batch at α⁰ = C·1.
    REQUIRE(run(dir, "train --config c.toml " + settings + " fgm.max_iterations=1 output.dir=" + name + "-d").code == 0);
    REQUIRE(run(dir, "train --config c.toml " + settings + " data.train=plain fgm.max_iterations=1 output.dir=" + name +
                         "-s").code == 0);
    const Model d = read_model(dir.file(name + "-d/model.fgm")), s = read_model(dir.file(name + "-s/model.fgm"));
    REQUIRE(d.features.size() == s.features.size());
    for (size_t k = 0; k < d.features.size(); ++k) CHECK(d.features[k].key == s.features[k].key);
  }
  // The planted pair is found, and prediction reads the model (hik scaling included).
  const Model poly2 = read_model(dir.file("poly2-1/model.fgm"));
  bool planted = false;
  for (const auto& f : poly2.features)
    planted = planted || (f.key.kind == FeatureKind::kCross && f.key.ids[0] == 0 && f.key.ids[1] == 1);
  CHECK(planted);
  for (const std::string name : {"poly2", "hik", "additive"}) {
    INFO(name);
    RunResult p = run(dir, "predict in.txt --model " + name + "-1/model.fgm");
    INFO(p.err);
    REQUIRE(p.code == 0);
    const size_t at = p.out.find("accuracy=");
    REQUIRE(at != std::string::npos);
    CHECK(std::stod(p.out.substr(at + 9)) > 0.7);
  }
  CHECK_FALSE(read_model(dir.file("hik-1/model.fgm")).scale_ids.empty());
}

TEST_CASE("the distributed poly-2 top-B is a brute-force enumeration's, ties to the smaller id", "[.mpi][mpi]") {
  // 300 base features, more than the 256 of the seed: features 1..290 are
  // frequent noise (binary, 281..290 small integers; random labels), the pair
  // (299, 300) is rare (7 rows, so its bounds are below the seed's) but always
  // positive, so it enters the top-B only through the candidate stage. C = 1:
  // at α⁰ = C·1 every score is an exact integer, so the brute force below (all
  // m(m−1)/2 pairs, summed row by row) gives the same scores and order.
  TempDir dir("fgm-mpi-spaces");
  const uint32_t m = 300;
  std::vector<std::pair<int, Row>> rows;
  {
    std::mt19937 rng(22);
    std::uniform_int_distribution<uint32_t> noise(1, 290);
    for (int i = 0; i < 400; ++i) {
      Row row;
      for (int k = 0; k < 10; ++k) {
        const uint32_t f = noise(rng);
        row[f] = f > 280 ? 2 + static_cast<int>(rng() % 2) : 1;
      }
      int y = rng() % 2 ? 1 : -1;
      if (i % 57 == 7) row[299] = 1, row[300] = 1, y = 1;
      rows.push_back({y, row});
    }
  }
  dir.write("in.txt", libsvm(rows));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4 --tile-rows 64 --features " + std::to_string(m)).code ==
          0);
  // Brute force: a_i = C·y_i; scores 2γr·c_j², γ²·q_j², 2γ²·p_jk² (γ = r = 1).
  std::vector<double> c(m + 1, 0), q(m + 1, 0);
  std::map<std::pair<uint32_t, uint32_t>, double> p;
  for (const auto& [y, row] : rows)
    for (auto it = row.begin(); it != row.end(); ++it) {
      c[it->first] += y * it->second;
      q[it->first] += y * it->second * it->second;
      for (auto jt = std::next(it); jt != row.end(); ++jt) p[{it->first, jt->first}] += y * it->second * jt->second;
    }
  using Candidate = std::tuple<double, uint64_t, FeatureKey>;  // score, id (tie rule), key
  std::vector<Candidate> all;
  auto id_of = [](uint64_t kind, uint64_t j, uint64_t k) { return (kind << 62) | (j << 31) | k; };
  for (uint32_t j = 1; j <= m; ++j) {
    FeatureKey lin, sq;
    lin.kind = FeatureKind::kLinear;
    lin.ids[0] = j - 1;
    sq.kind = FeatureKind::kSquare;
    sq.ids[0] = j - 1;
    all.emplace_back(2 * c[j] * c[j], id_of(0, j - 1, 0), lin);
    all.emplace_back(q[j] * q[j], id_of(1, j - 1, 0), sq);
  }
  for (const auto& [jk, v] : p) {
    FeatureKey cross;
    cross.kind = FeatureKind::kCross;
    cross.ids[0] = jk.first - 1;
    cross.ids[1] = jk.second - 1;
    all.emplace_back(2 * v * v, id_of(2, jk.first - 1, jk.second - 1), cross);
  }
  std::sort(all.begin(), all.end(), [](const Candidate& x, const Candidate& y) {
    return std::get<0>(x) != std::get<0>(y) ? std::get<0>(x) > std::get<0>(y) : std::get<1>(x) < std::get<1>(y);
  });
  // The data must make the test bite: the rare pair is in the top-B, B is
  // the first size from there with a tie at the cut (tied candidates inside
  // and outside the top-B), and the pair's features are outside the seed.
  uint32_t B = 1;
  while (B < all.size() && std::get<1>(all[B - 1]) != id_of(2, 298, 299)) ++B;
  REQUIRE(B < 60);
  while (B < 80 && std::get<0>(all[B - 1]) != std::get<0>(all[B])) ++B;
  REQUIRE(B < 80);
  {
    std::vector<double> u2(m + 1, 0);  // u_j² = Σ|a_i| x_ij²
    for (const auto& [y, row] : rows)
      for (const auto& [f, v] : row) u2[f] += v * v;
    uint32_t heavier = 0;
    for (uint32_t j = 1; j <= m; ++j) heavier += u2[j] > u2[299];
    REQUIRE(heavier >= 256);
  }
  dir.write("c.toml", "[data]\ntrain = \"store\"\n[features]\nkind = \"poly2\"\n[fgm]\nC = 1\nB = " +
                          std::to_string(B) + "\nmax_iterations = 1\n");
  for (int np : {1, 4}) {
    INFO("np = " << np);
    const std::string out = "o" + std::to_string(np);
    RunResult r = np == 1 ? run(dir, "train --config c.toml output.dir=" + out)
                          : run_mpi(dir, np, "train --config c.toml output.dir=" + out);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const Model model = read_model(dir.file(out + "/model.fgm"));
    REQUIRE(model.features.size() == B);
    for (uint32_t k = 0; k < B; ++k) {
      INFO("rank " << k << " of the top-B");
      INFO("got " << int(model.features[k].key.kind) << " " << model.features[k].key.ids[0] << "," << model.features[k].key.ids[1] << " want " << int(std::get<2>(all[k]).kind) << " " << std::get<2>(all[k]).ids[0] << "," << std::get<2>(all[k]).ids[1] << " score " << std::get<0>(all[k]));
      CHECK(model.features[k].key == std::get<2>(all[k]));
      CHECK(model.features[k].batch == 1);
    }
    // The threshold pruned: far fewer pairs than all co-occurring ones were summed.
    const JsonValue run_json = parse_json(slurp(dir.file(out + "/run.json")), "run.json");
    const double scored = run_json.find("iterations")->items().front().find("candidates_scored")->number();
    CHECK(scored < 2.0 * m + static_cast<double>(p.size()));
  }
}

TEST_CASE("a bad transform on a partitioned store is refused naming the key; max_features counts groups", "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-spaces");
  dir.write("in.txt", libsvm(planted_rows(80, 10, 4, 3, 23)));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 2").code == 0);
  dir.write("c.toml", "[data]\ntrain = \"store\"\n[fgm]\nB = 2\nmax_iterations = 2\n");
  // An unknown transform is a config error naming the key, as on one store.
  RunResult r = run(dir, "train --config c.toml features.kind=hik features.transform=[\"standardize\"] output.dir=t");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "features.transform"));
  CHECK_FALSE(std::filesystem::exists(dir.file("t/model.fgm")));
  // fgm.max_features is distributed (tests/cli/test_mpi_settings_cli.cpp): it
  // counts groups here, as on one store.
  r = run_mpi(dir, 2, "train --config c.toml features.kind=additive fgm.max_features=3 output.dir=f");
  REQUIRE(r.code == 0);
  std::set<uint64_t> groups;
  for (const auto& f : read_model(dir.file("f/model.fgm")).features) groups.insert(f.key.group);
  CHECK(groups.size() == 3);
}

TEST_CASE("poly-2 with a bias: one process and two ranks give the same model", "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-spaces");
  dir.write("in.txt", libsvm(planted_rows(80, 10, 4, 3, 23)));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 2").code == 0);
  dir.write("c.toml", "[data]\ntrain = \"store\"\n[fgm]\nB = 2\nmax_iterations = 2\nbias = true\n");
  REQUIRE(run(dir, "train --config c.toml features.kind=poly2 output.dir=one").code == 0);
  const RunResult r = run_mpi(dir, 2, "train --config c.toml features.kind=poly2 output.dir=two");
  INFO(r.err);
  REQUIRE(r.code == 0);
  require_same_model(dir.file("one/model.fgm"), dir.file("two/model.fgm"));
  const Model one = read_model(dir.file("one/model.fgm")), two = read_model(dir.file("two/model.fgm"));
  CHECK(one.bias != 0.0);
  CHECK(std::memcmp(&one.bias, &two.bias, sizeof(double)) == 0);
}

TEST_CASE("the distributed poly-2 and hik passes are sparse: a budget a dense pass would exceed suffices",
          "[.mpi][mpi]") {
  // 400,000 base features, 10 of them non-empty: a dense hik pass would hold
  // m·levels doubles per partition (32 MB), more than the 24 MB budget per
  // rank; the sparse component sums (by column ranges) and the sparse poly-2
  // moments fit, and the models do not depend on the budget.
  TempDir dir("fgm-mpi-spaces");
  dir.write("in.txt", libsvm(planted_rows(80, 10, 4, 3, 24)));
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 2 --features 400000").code == 0);
  dir.write("c.toml", "[data]\ntrain = \"store\"\n[fgm]\nB = 2\nmax_iterations = 2\n");
  for (const std::string kind : {"poly2", "hik features.levels=10"}) {
    INFO(kind);
    const std::string tag = kind.substr(0, 3);
    RunResult r = run_mpi(dir, 2, "train --config c.toml features.kind=" + kind +
                                      " engine.memory_budget=24MB output.dir=" + tag + "24");
    INFO(r.err);
    REQUIRE(r.code == 0);
    REQUIRE(run_mpi(dir, 2, "train --config c.toml features.kind=" + kind +
                                " engine.memory_budget=200MB output.dir=" + tag + "200").code == 0);
    require_same_model(dir.file(tag + "24/model.fgm"), dir.file(tag + "200/model.fgm"));
  }
}

namespace {

// φ_l(x') of HIK with 4 levels, x' = (x − lo)/(hi − lo): 0.5·clamp(4x' − l, 0, 1).
// With the values below every quantity is a multiple of 0.25 and exact.
double hik4(double x, double lo, double hi, int l) {
  const double q = 4 * (x - lo) / (hi - lo);
  return 0.5 * std::clamp(q - l, 0.0, 1.0);
}

}  // namespace

TEST_CASE("distributed hik and additive: ids near 2^40 in a small budget, top-B by brute force with ties",
          "[.mpi][mpi]") {
  // 24 columns with ids around 2^40 and 2^41 (a dense vector of m·dim()
  // component sums would be 64 TiB; the budget is 24 MB per rank). Column k
  // and k + 12 are equal in every row (twins in different ranks' ranges, so
  // their scores tie exactly); columns 8..11 take negative values, so their
  // zero scales above 0 and every row without an entry adds φ(x'_0): column 11
  // only in rows of partition 0, empty on the others, which still sum it.
  // Column 7 fills every row of partition 0 and no other: its range starts at
  // the other partitions' implicit zeros.
  TempDir dir("fgm-mpi-spaces");
  std::vector<uint64_t> ids;
  for (uint64_t k = 0; k < 12; ++k) ids.push_back((uint64_t{1} << 40) + 977 * k + 3);
  for (uint64_t k = 0; k < 12; ++k) ids.push_back((uint64_t{1} << 41) + 131 * k + 5);
  const uint64_t n = 200;
  std::vector<std::map<uint64_t, int>> rows(n);
  std::vector<int> y(n);
  {
    std::mt19937 rng(5);
    std::bernoulli_distribution present(0.3);
    std::uniform_int_distribution<int> value(1, 2), signed_value(-2, 1);
    for (uint64_t i = 0; i < n; ++i) {
      y[i] = (i < 50 ? i % 25 != 1 : i % 3 != 0) ? 1 : -1;  // Σ y over a partition is not 0: the rows without an entry count
      for (size_t k = 0; k < 12; ++k) {
        if (k == 7 ? i >= 50 : k == 11 ? !(i < 40 && i % 3 == 0) : !present(rng)) continue;
        int v = k >= 8 ? signed_value(rng) : value(rng);
        if (v == 0 || (k == 11 && i == 3)) v = 2;
        if (k == 11 && i == 0) v = -2;
        rows[i][ids[k]] = rows[i][ids[k + 12]] = v;
      }
    }
  }
  std::string text;
  for (uint64_t i = 0; i < n; ++i) {
    text += y[i] > 0 ? "+1" : "-1";
    for (const auto& [id, v] : rows[i]) text += " " + std::to_string(id) + ":" + std::to_string(v);
    text += "\n";
  }
  dir.write("in.txt", text);
  const RunResult ingest = run(dir, "ingest in.txt --out store --partitions 4 --tile-rows 16");
  INFO(ingest.err);
  REQUIRE(ingest.code == 0);
  dir.write("c.toml", "[data]\ntrain = \"store\"\n[fgm]\nC = 1\nbias = false\nmax_iterations = 2\n"
                      "eps_outer = 0\n[engine]\nmemory_budget = \"24MB\"\n");
  // Brute force at α⁰ = C·1 (a = y): each column's range over all rows
  // (implicit zeros included), then s_j = Σ_l (Σ_i y_i φ_l(x'_ij))² in level
  // order, row by row; ranked by score, ties to the smaller id (0-based). HIK
  // with 4 levels is exact here (multiples of 0.25, by the formula above); the
  // additive map's float32 components are summed in another order than the
  // partition tree's, so its ranking must have no near-ties but the twins'.
  struct Ranked {
    double score;
    uint64_t id;
  };
  const ExpansionMap additive = ExpansionMap::additive(AdditiveKernel::kChi2, 2,
                                                       additive_default_period(AdditiveKernel::kChi2, 2));
  auto ranking_of = [&](bool hik) {
    std::vector<Ranked> ranking;
    for (uint64_t id : ids) {
      double lo = 0, hi = 0;  // every column has rows without an entry
      for (const auto& row : rows)
        if (row.count(id)) lo = std::min<double>(lo, row.at(id)), hi = std::max<double>(hi, row.at(id));
      REQUIRE((hi - lo == 2 || hi - lo == 4));  // x' = (x − lo)/(hi − lo) and 4x' exact
      double s = 0;
      for (uint32_t l = 0; l < (hik ? 4 : additive.dim()); ++l) {
        double c = 0;
        for (uint64_t i = 0; i < n; ++i) {
          const double x = rows[i].count(id) ? rows[i].at(id) : 0;
          c += y[i] * (hik ? hik4(x, lo, hi, static_cast<int>(l))
                           : double(float(additive.component(scale_to_unit(x, lo, hi), l))));
        }
        s += c * c;
      }
      if (s > 0) ranking.push_back({s, id - 1});
    }
    std::sort(ranking.begin(), ranking.end(), [](const Ranked& a, const Ranked& b) {
      return a.score > b.score || (a.score == b.score && a.id < b.id);
    });
    return ranking;
  };
  for (const std::string kind : {"hik features.levels=4", "additive features.order=2"}) {
    INFO(kind);
    const std::string tag = kind.substr(0, 3);
    const std::vector<Ranked> ranking = ranking_of(tag == "hik");
    size_t B = 3;  // the first B whose last place is decided by a tie
    while (B < ranking.size() && ranking[B - 1].score != ranking[B].score) ++B;
    REQUIRE(B < ranking.size());
    for (size_t k = 0; k < B; ++k)  // no near-ties: the order does not hang on the last bits
      CHECK((ranking[k].score == ranking[k + 1].score || ranking[k].score > ranking[k + 1].score * (1 + 1e-9)));
    const std::string args = "train --config c.toml features.kind=" + kind + " fgm.B=" + std::to_string(B) +
                             " output.dir=" + tag;
    RunResult r = run(dir, args + "1");
    INFO(r.err);
    REQUIRE(r.code == 0);
    for (int np : {2, 4}) {
      INFO("np = " << np);
      r = run_mpi(dir, np, args + std::to_string(np) + " engine.threads=" + std::to_string(np == 2 ? 2 : 1));
      INFO(r.err);
      REQUIRE(r.code == 0);
      require_same_model(dir.file(tag + "1/model.fgm"), dir.file(tag + std::to_string(np) + "/model.fgm"));
      // What a pass sends depends on the non-empty columns, not on m.
      for (const auto& pass : scoring_passes(dir, tag + std::to_string(np))) {
        CHECK(pass.find("bytes")->number() > 0);
        CHECK(pass.find("bytes")->number() < 16384);
      }
    }
    const Model model = read_model(dir.file(tag + "1/model.fgm"));
    CHECK(model.n_features > (uint64_t{1} << 41));
    std::vector<uint64_t> batch;  // the first batch's base features, in selection order
    for (const auto& f : model.features)
      if (f.batch == 1 && (batch.empty() || batch.back() != f.key.ids[0])) batch.push_back(f.key.ids[0]);
    REQUIRE(batch.size() == B);
    for (size_t k = 0; k < B; ++k) CHECK(batch[k] == ranking[k].id);
    // Every selected feature's scaling is its global range (the rare column's lo = −2 or −1 included).
    for (size_t k = 0; k < model.scale_ids.size(); ++k) {
      double lo = 0, hi = 0;
      for (const auto& row : rows)
        if (row.count(model.scale_ids[k] + 1))
          lo = std::min<double>(lo, row.at(model.scale_ids[k] + 1)), hi = std::max<double>(hi, row.at(model.scale_ids[k] + 1));
      CHECK(model.scale_min[k] == lo);
      CHECK(model.scale_max[k] == hi);
    }
  }
}

}  // namespace fgm::test
