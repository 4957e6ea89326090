// The MSLR cutting-plane driver (engine/mslr_trainer.h): the first constraint
// against an in-memory computation of (8), planted features recovered from
// sparse synthetic data, the same bits for 1 and 2 threads and for a store
// several times the memory budget, and the stopping rules.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "engine/evaluate.h"
#include "engine/mslr_trainer.h"
#include "engine/resume_checkpoint.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "synth/synthetic_sparse.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

std::unique_ptr<ShardStore> ingest_store(const test::TempDir& dir, const std::string& text, MemoryBudget& budget) {
  IngestOptions o;
  o.block_bytes = 4 << 10;  // many stored blocks
  o.tile_rows = 256;        // many tiles
  ingest_libsvm(text, dir.file("store"), o, budget);
  return ShardStore::open(dir.file("store"), budget);
}

MslrSettings small_settings(uint64_t r, int T, int threads) {
  MslrSettings s;
  s.r = r;
  s.max_iterations = T;
  s.eps_outer = 0;
  s.minimax.C = 10;
  s.scheduler.threads = threads;
  s.block_bytes = 16 << 10;
  return s;
}

SparseSynthResult sparse_set(const test::TempDir& dir, uint64_t rows, uint64_t features, double nnz = 20) {
  SparseSynthOptions so;
  so.rows = rows;
  so.test_rows = 2000;
  so.features = features;
  so.nnz_per_row = nnz;
  so.planted_linear = 10;
  so.planted_cross = 0;
  so.min_term_frequency = 0.02;
  so.seed = 5;
  MemoryBudget budget(256ull << 20);
  return write_sparse_synthetic(dir.path.string(), so, budget);
}

bool same_model(const Model& a, const Model& b) {
  if (a.features.size() != b.features.size()) return false;
  for (size_t k = 0; k < a.features.size(); ++k)
    if (!(a.features[k].key == b.features[k].key) || a.features[k].weight != b.features[k].weight) return false;
  return true;
}

}  // namespace

TEST_CASE("MSLR's first constraint is the top r of (Σ_i α_i y_i x_ij)² at α = min(1, C/2)",
          "[engine][mslr]") {
  test::TempDir dir("mslr-first");
  SparseSynthResult data = sparse_set(dir, 1500, 400);
  const test::InMemoryData mem = test::parse_libsvm_simple(data.train_path);
  for (double C : {10.0, 0.5}) {
    MemoryBudget budget(128ull << 20);
    auto store = ingest_store(dir, data.train_path, budget);
    MslrSettings s = small_settings(7, 1, 1);
    s.minimax.C = C;
    MslrOutcome out = train_mslr(*store, s, budget);
    // Independent (8): c_j over the parsed text, α_i = min(1, C/2); labels: larger value → +1.
    const double alpha = std::min(1.0, C / 2);
    const double top_label = *std::max_element(mem.labels.begin(), mem.labels.end());
    std::map<uint64_t, double> c;
    for (size_t i = 0; i < mem.rows.size(); ++i)
      for (auto [j, v] : mem.rows[i]) c[j] += alpha * (mem.labels[i] == top_label ? 1.0 : -1.0) * double(float(v));
    std::vector<std::pair<double, uint64_t>> ranked;
    for (auto [j, cj] : c) ranked.push_back({-cj * cj, j});
    std::sort(ranked.begin(), ranked.end());
    std::set<uint64_t> expected, got;
    for (size_t k = 0; k < 7; ++k) expected.insert(ranked[k].second);
    for (const auto& f : out.model.features) got.insert(f.key.ids[0]);
    INFO("C " << C);
    CHECK(got == expected);
    REQUIRE(out.iterations.size() == 1);
    CHECK(out.iterations[0].added == 7);
    CHECK(out.iterations[0].converged);
  }
}

TEST_CASE("MSLR recovers planted features of `fgm synth --kind sparse` data", "[engine][mslr]") {
  test::TempDir dir("mslr-planted");
  SparseSynthResult data = sparse_set(dir, 4000, 1500);
  MemoryBudget budget(256ull << 20);
  auto store = ingest_store(dir, data.train_path, budget);
  MslrSettings s = small_settings(5, 4, 2);
  MslrOutcome out = train_mslr(*store, s, budget);
  std::set<uint64_t> planted(data.truth.ids.begin(), data.truth.ids.end());
  uint64_t recovered = 0;
  for (const auto& f : out.model.features) recovered += planted.count(f.key.ids[0]);
  EvalResult test = evaluate_file(data.test_path, out.model, false, budget);
  INFO("features " << out.model.features.size() << " recovered " << recovered << " accuracy " << test.accuracy);
  CHECK(out.model.features.size() <= 20);
  CHECK(recovered >= 8);
  CHECK(test.accuracy > 0.8);
  CHECK_FALSE(out.model.has_bias);
  CHECK(out.model.loss == "logistic");
  for (const auto& rec : out.iterations) {
    CHECK(rec.dual <= rec.objective);
    CHECK(rec.converged);
  }
}

TEST_CASE("MSLR gives the same bits for 1 and 2 threads and for a store several times the budget",
          "[engine][mslr][determinism][budget]") {
  test::TempDir dir("mslr-ooc");
  SparseSynthResult data = sparse_set(dir, 2000, 20000, 80);
  {
    MemoryBudget big(256ull << 20);
    IngestOptions o;
    o.block_bytes = 8 << 10;
    o.tile_rows = 1024;
    ingest_libsvm(data.train_path, dir.file("store"), o, big);
  }
  auto run = [&](uint64_t limit, int threads) {
    MemoryBudget budget(limit);
    auto store = ShardStore::open(dir.file("store"), budget);
    MslrOutcome out = train_mslr(*store, small_settings(4, 3, threads), budget);
    REQUIRE(budget.peak() <= limit);
    return std::pair{std::move(out), store->info().shard_bytes};
  };
  auto [ample, store_bytes] = run(256ull << 20, 1);
  auto [two_threads, unused] = run(256ull << 20, 2);
  CHECK(same_model(ample.model, two_threads.model));
  // A budget a third of the store (binary values: 4 bytes a nonzero):
  // streamed, not resident.
  const uint64_t tight = std::max<uint64_t>(store_bytes / 3, 1);
  INFO("store " << store_bytes << " budget " << tight);
  auto [small, unused2] = run(tight, 2);
  CHECK(store_bytes >= 3 * tight);
  CHECK(same_model(ample.model, small.model));
  REQUIRE(ample.iterations.size() == small.iterations.size());
  for (size_t t = 0; t < ample.iterations.size(); ++t) CHECK(ample.iterations[t].objective == small.iterations[t].objective);
}

TEST_CASE("MSLR stopping rules: max_features exact, no new constraint", "[engine][mslr]") {
  test::TempDir dir("mslr-stop");
  SparseSynthResult data = sparse_set(dir, 1500, 400);
  MemoryBudget budget(128ull << 20);
  auto store = ingest_store(dir, data.train_path, budget);
  {
    MslrSettings s = small_settings(4, 10, 1);
    s.max_features = 10;
    MslrOutcome out = train_mslr(*store, s, budget);
    CHECK(out.model.features.size() == 10);
    CHECK(out.stop_reason == "max_features");
  }
  {
    // Path checkpoints land exactly.
    MslrSettings s = small_settings(4, 10, 1);
    s.checkpoints = {3, 6, 9};
    std::vector<uint64_t> counts;
    MslrHooks hooks;
    hooks.on_checkpoint = [&](const MslrCheckpoint& cp) { counts.push_back(cp.model.features.size()); };
    MslrOutcome out = train_mslr(*store, s, budget, hooks);
    CHECK(counts == std::vector<uint64_t>{3, 6, 9});
    CHECK(out.stop_reason == "last_checkpoint");
  }
  {
    // A data set with 3 features: once all are selected the next constraint is one already held.
    const std::string text = dir.write("tiny.svm",
                                       "1 1:1 2:0.5\n-1 2:1 3:1\n1 1:2 3:0.2\n-1 3:1.5\n1 1:0.7 2:0.1\n-1 2:2\n");
    test::TempDir d2("mslr-tiny");
    auto tiny = ingest_store(d2, text, budget);
    MslrSettings s = small_settings(3, 10, 1);
    s.eps_outer = 0;
    MslrOutcome out = train_mslr(*tiny, s, budget);
    CHECK(out.model.features.size() == 3);
    CHECK(out.stop_reason == "no_new_constraint");
  }
}

TEST_CASE("MSLR resumed from the state after any iteration, through a checkpoint file, ends with the same model",
          "[engine][mslr][resume]") {
  test::TempDir dir("mslr-resume");
  SparseSynthResult data = sparse_set(dir, 600, 3000, 40);
  MemoryBudget budget(256ull << 20);
  {
    IngestOptions o;
    o.block_bytes = 8 << 10;
    o.tile_rows = 256;
    ingest_libsvm(data.train_path, dir.file("store"), o, budget);
  }
  auto store = ShardStore::open(dir.file("store"), budget);
  const MslrSettings settings = small_settings(3, 4, 1);
  std::vector<std::string> states;
  MslrHooks hooks;
  hooks.on_state = [&](const MslrState& s) { states.push_back(encode_mslr_state(s)); };
  const MslrOutcome whole = train_mslr(*store, settings, budget, hooks);
  REQUIRE(states.size() == whole.iterations.size());
  REQUIRE(states.size() >= 3);
  const std::string file = dir.file("checkpoint.fgm");
  RunIdentity identity;
  identity.command = "train";
  identity.store_checksum = store->info().store_checksum;
  for (size_t k = 0; k < states.size(); ++k) {
    INFO("resumed after iteration " << k + 1);
    // Through the checkpoint file's generic solver-state field.
    const SolverState written{"mslr", states[k]};
    write_checkpoint(file, identity, nullptr, nullptr, budget, &written);
    const ResumeCheckpoint read = read_checkpoint(file, budget);
    REQUIRE(read.solver);
    CHECK(read.solver->solver == "mslr");
    REQUIRE(read.solver->bytes == states[k]);
    CHECK_FALSE(read.train);
    const MslrState state = decode_mslr_state(read.solver->bytes, file);
    CHECK(state.iterations.size() == k + 1);
    CHECK(encode_mslr_state(state) == states[k]);  // every field read back as written
    MslrSettings resumed_settings = settings;
    resumed_settings.resume = &state;
    const MslrOutcome resumed = train_mslr(*store, resumed_settings, budget);
    CHECK(same_model(whole.model, resumed.model));
    CHECK(resumed.stop_reason == whole.stop_reason);
    REQUIRE(resumed.iterations.size() == whole.iterations.size());
    for (size_t t = 0; t < whole.iterations.size(); ++t) {
      CHECK(resumed.iterations[t].objective == whole.iterations[t].objective);
      CHECK(resumed.iterations[t].mu == whole.iterations[t].mu);
    }
  }
  // A damaged state is an error naming the file, not a different run.
  std::string cut = states[0].substr(0, states[0].size() / 2);
  CHECK_THROWS_WITH(decode_mslr_state(cut, file), Catch::Contains(file) && Catch::Contains("MSLR state"));
  std::string foreign = states[0];
  foreign[4] = 'X';  // the file identifier "FGMS"
  CHECK_THROWS_WITH(decode_mslr_state(foreign, file), Catch::Contains(file) && Catch::Contains("unknown format"));
  // fgm path's points travel in the same FlatBuffer, read back as written.
  const std::vector<MslrSavedPoint> points{{1, 0.25, "model one"}, {3, 1.5, std::string("m\0two", 5)}};
  std::vector<MslrSavedPoint> read_points;
  const MslrState with_points = decode_mslr_state(encode_mslr_state(decode_mslr_state(states.back(), file), points), file,
                                                  &read_points);
  REQUIRE(read_points.size() == 2);
  for (size_t k = 0; k < 2; ++k) {
    CHECK(read_points[k].iteration == points[k].iteration);
    CHECK(read_points[k].seconds == points[k].seconds);
    CHECK(read_points[k].model == points[k].model);
  }
  CHECK(with_points.iterations.size() == states.size());
  // A point of an iteration the state has not reached is damage.
  CHECK_THROWS_WITH(decode_mslr_state(encode_mslr_state(with_points, {{states.size() + 1, 0, "m"}}), file,
                                      &read_points),
                    Catch::Contains("MSLR path points: damaged"));
  // A partitioned run's split, rank 0's part without the duals and a rank
  // file's duals alone, joins to the whole state.
  const MslrState last = decode_mslr_state(states.back(), file);
  REQUIRE_FALSE(last.alpha.empty());
  MslrState shared = decode_mslr_state(encode_mslr_state(last, {}, MslrStatePart::kShared), file);
  const MslrState duals = decode_mslr_state(encode_mslr_state(last, {}, MslrStatePart::kDuals), file);
  CHECK(shared.alpha.empty());
  CHECK(shared.beta.empty());
  CHECK(duals.iterations.empty());
  CHECK(duals.batches.empty());
  CHECK(duals.weights.empty());
  shared.alpha = duals.alpha;
  shared.beta = duals.beta;
  CHECK(encode_mslr_state(shared) == states.back());
}

// The two subproblem solvers (primal proximal Newton, the default; the
// paper's smoothing coordinate descent) are independent algorithms for the
// same certified problem: at a tight tolerance every iteration's certificate
// brackets the other solver's objective, and the runs select the same
// features with the same models to the certified precision.
TEST_CASE("MSLR with the Newton subproblem matches the smoothing subproblem run to high precision",
          "[engine][mslr][latent_newton]") {
  test::TempDir dir("mslr-newton-vs-smoothing");
  SparseSynthResult data = sparse_set(dir, 800, 300);
  MemoryBudget budget(128ull << 20);
  auto store = ingest_store(dir, data.train_path, budget);
  MslrSettings newton = small_settings(4, 4, 1);
  newton.minimax.tolerance = 1e-6;
  MslrSettings smoothing = newton;
  smoothing.smoothing = true;
  smoothing.minimax.gradient_tolerance = 1e-5;
  smoothing.minimax.q_max = 1e8;
  smoothing.minimax.max_sweeps = 1000;
  const MslrOutcome a = train_mslr(*store, newton, budget);
  const MslrOutcome b = train_mslr(*store, smoothing, budget);
  REQUIRE(a.iterations.size() == b.iterations.size());
  for (size_t t = 0; t < a.iterations.size(); ++t) {
    const MslrIteration &x = a.iterations[t], &y = b.iterations[t];
    INFO("iteration " << t + 1 << " newton " << x.objective << " gap " << x.relative_gap << " smoothing "
                      << y.objective << " gap " << y.relative_gap);
    CHECK(x.converged);
    CHECK(y.converged);
    CHECK(x.dual <= y.objective * (1 + 1e-12));
    CHECK(y.dual <= x.objective * (1 + 1e-12));
    CHECK(x.objective == Approx(y.objective).epsilon(3e-6));
    CHECK(x.selected == y.selected);
  }
  REQUIRE(a.model.features.size() == b.model.features.size());
  double largest = 0;
  for (const auto& f : b.model.features) largest = std::max(largest, std::fabs(f.weight));
  for (size_t k = 0; k < a.model.features.size(); ++k) {
    CHECK(a.model.features[k].key == b.model.features[k].key);
    CHECK(a.model.features[k].weight == Approx(b.model.features[k].weight).margin(1e-2 * largest));
  }
}
