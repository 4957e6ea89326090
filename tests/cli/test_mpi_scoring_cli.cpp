// The distributed scoring pass by column ranges (docs/distributed.md,
// "Scoring by column ranges"): each rank scores its own range from a
// reduce-scatter of the tree sums and the ranks' top lists are merged. Its
// first batch is checked against a brute-force top-B computed here from the
// text (integer values, so c_j = C·Σ y_i x_ij is exact in any order), with
// exact ties across the ranks' ranges, for features, disjoint and
// overlapping groups, and a hashed id space near 2^40 that a dense score
// vector could not hold.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "core/json_reader.h"
#include "io/model_file.h"
#include "tests/cli/cli_test_util.h"

namespace fgm::test {
namespace {

struct LabelledRows {
  std::string text;
  std::map<uint64_t, int64_t> c;  // file index → Σ_i y_i x_ij
};

// Integer rows over the file indices `ids`; the columns of ids[k] and
// ids[k + twin_offset] are equal in every row, so their scores tie exactly.
LabelledRows twinned_rows(uint64_t rows, const std::vector<uint64_t>& ids, size_t twin_offset, uint32_t seed) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution present(0.3);
  std::uniform_int_distribution<int> value(1, 2);
  LabelledRows out;
  for (uint64_t i = 0; i < rows; ++i) {
    const int y = i % 2 == 0 ? 1 : -1;
    std::map<uint64_t, int> row;
    for (size_t k = 0; k < twin_offset; ++k)
      if (present(rng)) {
        const int v = value(rng);
        row[ids[k]] = v;
        if (k + twin_offset < ids.size()) row[ids[k + twin_offset]] = v;
      }
    out.text += y > 0 ? "+1" : "-1";
    for (const auto& [id, v] : row) {
      out.text += " " + std::to_string(id) + ":" + std::to_string(v);
      out.c[id] += y * v;
    }
    out.text += "\n";
  }
  return out;
}

struct Ranked {
  double score;
  uint64_t id;
};

// `scored` ranked by score, ties to the smaller id, positive scores only.
std::vector<Ranked> brute_force_ranking(std::vector<Ranked> scored) {
  std::erase_if(scored, [](const Ranked& r) { return r.score <= 0; });
  std::sort(scored.begin(), scored.end(),
            [](const Ranked& a, const Ranked& b) { return a.score > b.score || (a.score == b.score && a.id < b.id); });
  return scored;
}

// The smallest B ≥ 3 whose B-th and next candidates tie: there the tie rule
// decides the last place of the top-B.
size_t batch_size_at_a_tie(const std::vector<Ranked>& ranking) {
  for (size_t B = 3; B < ranking.size(); ++B)
    if (ranking[B - 1].score == ranking[B].score) return B;
  FAIL("the data have no tie to test");
  return 0;
}

// The candidates of batch 1 in the model's order: feature ids, or the groups of the columns.
std::vector<uint64_t> first_batch(const Model& model, bool groups) {
  std::vector<uint64_t> out;
  for (const auto& f : model.features) {
    if (f.batch != 1) continue;
    const uint64_t id = groups ? f.key.group : f.key.ids[0];
    if (out.empty() || out.back() != id) out.push_back(id);
  }
  return out;
}

// Trains `config_args` on 1, 2 and 4 ranks; the models must agree bit for
// bit; returns the 1-process model.
Model train_on_1_2_4(const TempDir& dir, const std::string& config_args, const std::string& tag) {
  REQUIRE(run(dir, "train --config c.toml " + config_args + " output.dir=" + tag + "1").code == 0);
  const Model one = read_model(dir.file(tag + "1/model.fgm"));
  for (int np : {2, 4}) {
    INFO("np = " << np);
    const std::string out = tag + std::to_string(np);
    const RunResult r = run_mpi(dir, np, "train --config c.toml " + config_args + " output.dir=" + out);
    REQUIRE(r.code == 0);
    const Model many = read_model(dir.file(out + "/model.fgm"));
    REQUIRE(many.features.size() == one.features.size());
    for (size_t k = 0; k < one.features.size(); ++k) {
      CHECK(many.features[k].key.ids[0] == one.features[k].key.ids[0]);
      CHECK(many.features[k].key.group == one.features[k].key.group);
      CHECK(many.features[k].batch == one.features[k].batch);
      CHECK(many.features[k].weight == one.features[k].weight);  // bit for bit
    }
    CHECK(many.objective == one.objective);
  }
  return one;
}

const char* kConfig = "[data]\ntrain = \"store\"\n[fgm]\nC = 1\nbias = false\n";

}  // namespace

TEST_CASE("the distributed top-B by column ranges is the brute-force top-B, ties to the smaller id", "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-scoring");
  std::vector<uint64_t> ids;
  for (uint64_t j = 1; j <= 50; ++j) ids.push_back(j);
  const LabelledRows data = twinned_rows(240, ids, 25, 11);  // j and j + 25 tie, in different ranks' ranges
  dir.write("in.txt", data.text);
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4 --tile-rows 16").code == 0);
  dir.write("c.toml", kConfig);

  SECTION("features") {
    std::vector<Ranked> scored;
    for (const auto& [id, c] : data.c) scored.push_back({double(c) * double(c), id - 1});  // index base 1
    const std::vector<Ranked> ranking = brute_force_ranking(scored);
    const size_t B = batch_size_at_a_tie(ranking);
    const Model model = train_on_1_2_4(dir, "fgm.B=" + std::to_string(B) + " fgm.max_iterations=2", "f");
    const std::vector<uint64_t> batch = first_batch(model, false);
    REQUIRE(batch.size() == B);
    for (size_t k = 0; k < B; ++k) CHECK(batch[k] == ranking[k].id);
  }
  for (const std::string structure : {"disjoint", "overlapping"}) {
    SECTION("groups, " + structure) {
      // Listed groups span the ranks' ranges; {1,2} and {26,27} tie, as do
      // the twins among the singletons; overlapping groups share members.
      const std::vector<std::vector<uint64_t>> listed =
          structure == "disjoint"
              ? std::vector<std::vector<uint64_t>>{{1, 2}, {26, 27}, {3, 40, 49}, {5, 30}, {10, 11, 12}, {35, 36, 37}}
              : std::vector<std::vector<uint64_t>>{{1, 2}, {26, 27}, {2, 3, 40}, {27, 28, 15}, {10, 11, 12}, {35, 36, 37}};
      std::string file;
      std::set<uint64_t> listed_ids;
      std::vector<Ranked> scored;
      for (size_t g = 0; g < listed.size(); ++g) {
        double s = 0;
        for (size_t k = 0; k < listed[g].size(); ++k) {
          file += (k ? " " : "") + std::to_string(listed[g][k]);
          listed_ids.insert(listed[g][k]);
          s += double(data.c.count(listed[g][k]) ? data.c.at(listed[g][k]) : 0) *
               double(data.c.count(listed[g][k]) ? data.c.at(listed[g][k]) : 0);
        }
        file += "\n";
        scored.push_back({s, g});
      }
      uint64_t singleton = listed.size();  // unlisted features in increasing order
      for (uint64_t j = 1; j <= 50; ++j)
        if (!listed_ids.count(j)) {
          const double c = data.c.count(j) ? double(data.c.at(j)) : 0;
          scored.push_back({c * c, singleton++});
        }
      dir.write("groups.txt", file);
      const std::vector<Ranked> ranking = brute_force_ranking(scored);
      const size_t B = batch_size_at_a_tie(ranking);
      const Model model = train_on_1_2_4(dir,
                                         "features.groups=groups.txt features.group_structure=" + structure +
                                             " fgm.B=" + std::to_string(B) + " fgm.max_iterations=2",
                                         "g" + structure);
      const std::vector<uint64_t> batch = first_batch(model, true);
      REQUIRE(batch.size() == B);
      for (size_t k = 0; k < B; ++k) CHECK(batch[k] == ranking[k].id);
    }
  }
}

TEST_CASE("a hashed id space near 2^40 trains within a budget a dense score vector would exceed", "[.mpi][mpi]") {
  TempDir dir("fgm-mpi-scoring");
  // 24 columns with ids around 2^40 and 2^41 (a dense vector of m doubles
  // would be 16 TiB); twins tie as above.
  std::vector<uint64_t> ids;
  for (uint64_t k = 0; k < 12; ++k) ids.push_back((uint64_t{1} << 40) + 977 * k + 3);
  for (uint64_t k = 0; k < 12; ++k) ids.push_back((uint64_t{1} << 41) + 131 * k + 5);
  const LabelledRows data = twinned_rows(200, ids, 12, 5);
  dir.write("in.txt", data.text);
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4").code == 0);
  dir.write("c.toml", kConfig);
  std::vector<Ranked> scored;
  for (const auto& [id, c] : data.c) scored.push_back({double(c) * double(c), id - 1});
  const std::vector<Ranked> ranking = brute_force_ranking(scored);
  const size_t B = batch_size_at_a_tie(ranking);
  const Model model =
      train_on_1_2_4(dir, "fgm.B=" + std::to_string(B) + " fgm.max_iterations=3 engine.memory_budget=24MB", "h");
  CHECK(model.n_features > (uint64_t{1} << 41));
  const std::vector<uint64_t> batch = first_batch(model, false);
  REQUIRE(batch.size() == B);
  for (size_t k = 0; k < B; ++k) CHECK(batch[k] == ranking[k].id);
  // What a scoring pass sends depends on the non-empty columns, not on m:
  // a few kilobytes on 4 ranks.
  const JsonValue run_json = parse_json(slurp(dir.file("h4/run.json")), "run.json");
  for (const auto& pass : run_json.find("distributed")->find("passes")->items())
    if (pass.find("phase")->string() == "scoring") {
      CHECK(pass.find("bytes")->number() > 0);
      CHECK(pass.find("bytes")->number() < 8192);
    }
}

TEST_CASE("the distributed poly-2 pair stage gives the same model and pair counts for any engine.threads",
          "[.mpi][mpi]") {
  // 320 base features (more than the 256 of the seed, so candidate pairs are
  // summed outside it by the pair stage's workers).
  TempDir dir("fgm-mpi-scoring");
  std::vector<uint64_t> ids;
  for (uint64_t j = 1; j <= 320; ++j) ids.push_back(j);
  dir.write("in.txt", twinned_rows(160, ids, 160, 3).text);
  REQUIRE(run(dir, "ingest in.txt --out store --partitions 4").code == 0);
  dir.write("c.toml", kConfig);
  const std::string settings = "features.kind=poly2 fgm.B=4 fgm.max_iterations=2 fgm.eps_outer=0";
  auto pair_updates = [&](const std::string& out) {
    std::vector<double> updates;
    for (const auto& it : parse_json(slurp(dir.file(out + "/run.json")), "run.json").find("iterations")->items())
      updates.push_back(it.find("pair_updates")->number());
    return updates;
  };
  REQUIRE(run(dir, "train --config c.toml " + settings + " engine.threads=1 output.dir=t1").code == 0);
  REQUIRE(run(dir, "train --config c.toml " + settings + " engine.threads=3 output.dir=t3").code == 0);
  REQUIRE(run_mpi(dir, 2, "train --config c.toml " + settings + " engine.threads=3 output.dir=m3").code == 0);
  const std::vector<double> one = pair_updates("t1");
  REQUIRE(!one.empty());
  CHECK(one.front() > 0);
  CHECK(pair_updates("t3") == one);
  const Model a = read_model(dir.file("t1/model.fgm"));
  for (const std::string out : {"t3", "m3"}) {
    INFO(out);
    const Model b = read_model(dir.file(out + "/model.fgm"));
    REQUIRE(b.features.size() == a.features.size());
    for (size_t k = 0; k < a.features.size(); ++k) {
      CHECK(b.features[k].key == a.features[k].key);
      CHECK(b.features[k].weight == a.features[k].weight);
    }
    CHECK(b.objective == a.objective);
  }
}

}  // namespace fgm::test
