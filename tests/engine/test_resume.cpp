// Resume from a checkpoint: a run restored after outer iteration k (through a
// checkpoint file written and read back) must produce what the uninterrupted
// run produced, bit for bit: features, weights, bias, objective, iteration
// log apart from timings, path points and their de-biased refits.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "core/communicator.h"
#include "core/error.h"
#include "engine/fgm_path.h"
#include "engine/fgm_trainer.h"
#include "engine/resume_checkpoint.h"
#include "io/ingest.h"
#include "io/partitioned_store.h"
#include "io/shard_store.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Restored path points went through the model file encoding, which (like
// model.fgm) does not keep the sign of a zero weight.
bool same_model_value(double a, double b, bool encoded) {
  return same_bits(a, b) || (encoded && a == 0 && b == 0);
}

void require_same_model(const Model& a, const Model& b, bool encoded = false) {
  REQUIRE(a.features.size() == b.features.size());
  for (size_t j = 0; j < a.features.size(); ++j) {
    CAPTURE(j);
    REQUIRE(a.features[j].key == b.features[j].key);
    REQUIRE(a.features[j].batch == b.features[j].batch);
    REQUIRE(same_model_value(a.features[j].weight, b.features[j].weight, encoded));
  }
  REQUIRE(same_model_value(a.bias, b.bias, encoded));
  REQUIRE(same_model_value(a.objective, b.objective, encoded));
  REQUIRE(a.iterations == b.iterations);
  REQUIRE(a.feature_kind == b.feature_kind);
  REQUIRE(a.scale_ids == b.scale_ids);
  REQUIRE(a.scale_min == b.scale_min);
  REQUIRE(a.scale_max == b.scale_max);
}

// Every field of the iteration log except wall-clock times and RSS.
void require_same_iterations(const std::vector<IterationRecord>& a, const std::vector<IterationRecord>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t t = 0; t < a.size(); ++t) {
    CAPTURE(t);
    REQUIRE(a[t].iter == b[t].iter);
    REQUIRE(a[t].selected == b[t].selected);
    REQUIRE(a[t].added == b[t].added);
    REQUIRE(same_bits(a[t].objective, b[t].objective));
    REQUIRE(same_bits(a[t].rel_decrease, b[t].rel_decrease));
    REQUIRE(same_bits(a[t].sip_violation, b[t].sip_violation));
    REQUIRE(a[t].bytes_streamed == b[t].bytes_streamed);
    REQUIRE(a[t].candidates_scored == b[t].candidates_scored);
    REQUIRE(a[t].pair_updates == b[t].pair_updates);
    REQUIRE(a[t].apg_iterations == b[t].apg_iterations);
    REQUIRE(a[t].apg_line_search_steps == b[t].apg_line_search_steps);
    REQUIRE(a[t].apg_gradient_evaluations == b[t].apg_gradient_evaluations);
  }
}

RunIdentity identity_for(const std::string& command, const ShardStore& store) {
  RunIdentity id;
  id.command = command;
  id.config = {{"fgm.B", "3"}};
  id.store_checksum = store.info().store_checksum;
  return id;
}

struct Fixture {
  test::TempDir dir{"fgm-resume"};
  MemoryBudget budget{512ull << 20};
  std::unique_ptr<ShardStore> store;
  explicit Fixture(const std::string& text) {
    std::string path = dir.write("train.svm", text);
    IngestOptions o;
    o.shard_target_bytes = 16 << 10;  // several shards and blocks
    ingest_libsvm(path, dir.file("store"), o, budget);
    store = ShardStore::open(dir.file("store"), budget);
  }
};

TrainSettings settings_for(const std::string& kind, Loss loss, const std::string& groups = "") {
  TrainSettings s;
  s.B = 3;
  s.max_iterations = 5;
  s.eps_outer = 0;
  s.apg.loss = loss;
  s.apg.C = 2.0;
  s.apg.bias = true;
  s.block_bytes = 8 << 10;
  s.space.kind = kind;
  s.space.groups_path = groups;
  s.space.levels = 8;
  return s;
}

// Every iteration's state of an uninterrupted run, then a resume from each
// one (after a round trip through a checkpoint file) compared with the run.
void check_resume_equals_uninterrupted(Fixture& fx, const TrainSettings& s) {
  std::vector<TrainProgress> saved;
  TrainHooks record;
  record.on_progress = [&](const TrainProgress& p) { saved.push_back(p); };
  TrainOutcome whole = train_fgm(*fx.store, s, fx.budget, record);
  REQUIRE(whole.iterations.size() >= 3);
  REQUIRE(saved.size() == whole.iterations.size());
  const std::string file = fx.dir.file("checkpoint.fgm");
  for (size_t k = 1; k < saved.size(); ++k) {
    CAPTURE(s.space.kind, loss_name(s.apg.loss), k);
    write_checkpoint(file, identity_for("train", *fx.store), &saved[k - 1], nullptr, fx.budget);
    ResumeCheckpoint cp = read_checkpoint(file, fx.budget);
    REQUIRE(cp.train.has_value());
    REQUIRE(cp.train->iterations.size() == k);
    TrainHooks hooks;
    hooks.resume = &*cp.train;
    TrainOutcome resumed = train_fgm(*fx.store, s, fx.budget, hooks);
    require_same_model(resumed.model, whole.model);
    require_same_iterations(resumed.iterations, whole.iterations);
    REQUIRE(resumed.stop_reason == whole.stop_reason);
    REQUIRE(same_bits(resumed.final_sip_violation, whole.final_sip_violation));
    REQUIRE(resumed.total_apg_iterations == whole.total_apg_iterations);
    REQUIRE(resumed.total_bytes_streamed == whole.total_bytes_streamed);
  }
}

}  // namespace

TEST_CASE("resume after iteration k equals the uninterrupted run: linear, group, hik, both losses",
          "[engine][resume]") {
  Fixture fx(test::random_libsvm(500, 60, 0.15, 31, {2, 9, 17, 40}));
  std::string groups = fx.dir.write("groups.txt", "1 2 3\n4 5\n10 11 12\n18 19 20 21\n30 31\n41 42 43\n50 51\n");
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    check_resume_equals_uninterrupted(fx, settings_for("linear", loss));
    check_resume_equals_uninterrupted(fx, settings_for("linear", loss, groups));
    check_resume_equals_uninterrupted(fx, settings_for("hik", loss));
  }
}

TEST_CASE("resume after iteration k equals the uninterrupted run: poly2 and small-integer data",
          "[engine][resume]") {
  // Small-integer counts with many ties between candidate scores.
  std::mt19937_64 rng(5);
  std::string text;
  for (int i = 0; i < 400; ++i) {
    int x[12];
    for (int& v : x) v = static_cast<int>(rng() % 3);
    text += (x[1] * x[4] + x[7] >= 3 ? "+1" : "-1");
    for (int j = 0; j < 12; ++j)
      if (x[j] != 0) text += " " + std::to_string(j + 1) + ":" + std::to_string(x[j]);
    text += "\n";
  }
  Fixture fx(text);
  for (Loss loss : {Loss::kSquaredHinge, Loss::kLogistic}) {
    check_resume_equals_uninterrupted(fx, settings_for("poly2", loss));
    check_resume_equals_uninterrupted(fx, settings_for("linear", loss));
  }
}

TEST_CASE("a stopped run resumed from its last checkpoint finishes without more iterations",
          "[engine][resume]") {
  Fixture fx(test::random_libsvm(300, 40, 0.2, 8, {1, 2}));
  TrainSettings s = settings_for("linear", Loss::kSquaredHinge);
  s.max_iterations = 3;
  std::vector<TrainProgress> saved;
  TrainHooks record;
  record.on_progress = [&](const TrainProgress& p) { saved.push_back(p); };
  TrainOutcome whole = train_fgm(*fx.store, s, fx.budget, record);
  REQUIRE(saved.back().stop_reason == "max_iterations");
  int iterations_run = 0;
  TrainHooks hooks;
  hooks.resume = &saved.back();
  hooks.on_iteration = [&](const IterationRecord&) { ++iterations_run; };
  TrainOutcome resumed = train_fgm(*fx.store, s, fx.budget, hooks);
  REQUIRE(iterations_run == 0);
  require_same_model(resumed.model, whole.model);
  REQUIRE(same_bits(resumed.final_sip_violation, whole.final_sip_violation));
}

namespace {

// The path on the fixture's rows: the single store, or the same rows as a
// partitioned store of `partitions` (all on this one rank).
PathOutcome path_on(Fixture& fx, int partitions, const PathSettings& ps, const PathHooks& hooks = {}) {
  if (partitions == 0) return run_fgm_path(*fx.store, ps, fx.budget, hooks);
  const std::string dir = fx.dir.file("parts-" + std::to_string(partitions));
  if (!std::filesystem::exists(dir)) {
    IngestOptions o;
    o.shard_target_bytes = 16 << 10;
    ingest_partitioned(fx.dir.file("train.svm"), dir, static_cast<uint32_t>(partitions), o, fx.budget);
  }
  SingleRankCommunicator comm;
  return run_fgm_path(comm, nullptr, dir, ps, fx.budget, hooks).path;
}

}  // namespace

TEST_CASE("a path resumed after any outer iteration equals the uninterrupted path, on either backend",
          "[engine][resume][path]") {
  // 0: the single store, whose α a checkpoint no longer holds (formed again
  // from ω, as on partitions); 1 and 2: partitioned stores on one rank.
  const int partitions = GENERATE(0, 1, 2);
  CAPTURE(partitions);
  Fixture fx(test::random_libsvm(500, 80, 0.15, 12, {3, 7, 11, 19, 23, 50}));
  for (int mode = 0; mode < 2; ++mode) {
    PathSettings ps;
    ps.base = settings_for("linear", mode == 0 ? Loss::kSquaredHinge : Loss::kLogistic);
    ps.base.max_iterations = 4;
    if (mode == 0) ps.feature_counts = {2, 5, 9};
    else ps.B_values = {2, 3};
    ps.debias = true;
    struct Saved {
      PathProgress path;
      std::optional<TrainProgress> train;
    };
    std::vector<Saved> saved;
    PathHooks record;
    record.on_progress = [&](const PathProgress& p, const TrainProgress* t) {
      saved.push_back({p, t ? std::optional<TrainProgress>(*t) : std::nullopt});
    };
    PathOutcome whole = path_on(fx, partitions, ps, record);
    REQUIRE(whole.points.size() == (mode == 0 ? 3u : 2u));
    if (partitions == 1) {
      INFO("a one-partition store's path is the single store's, bit for bit");
      const PathOutcome single = path_on(fx, 0, ps);
      REQUIRE(single.points.size() == whole.points.size());
      for (size_t p = 0; p < whole.points.size(); ++p) {
        require_same_model(whole.points[p].model, single.points[p].model);
        require_same_model(whole.points[p].debiased, single.points[p].debiased);
      }
    }
    REQUIRE(saved.size() >= 4);
    const std::string file = fx.dir.file("checkpoint.fgm");
    for (size_t k = 0; k < saved.size(); ++k) {
      CAPTURE(mode, k);
      write_checkpoint(file, identity_for("path", *fx.store), saved[k].train ? &*saved[k].train : nullptr,
                       &saved[k].path, fx.budget);
      ResumeCheckpoint cp = read_checkpoint(file, fx.budget);
      PathHooks hooks;
      hooks.resume = &cp.path;
      hooks.resume_train = cp.train ? &*cp.train : nullptr;
      PathOutcome resumed = path_on(fx, partitions, ps, hooks);
      REQUIRE(resumed.points.size() == whole.points.size());
      for (size_t p = 0; p < whole.points.size(); ++p) {
        CAPTURE(p);
        {
          INFO("the selection model");
          require_same_model(resumed.points[p].model, whole.points[p].model, true);
        }
        INFO("the de-biased model");
        REQUIRE(resumed.points[p].has_debiased == whole.points[p].has_debiased);
        require_same_model(resumed.points[p].debiased, whole.points[p].debiased, true);
        REQUIRE(same_bits(resumed.points[p].train_objective, whole.points[p].train_objective));
        REQUIRE(resumed.points[p].apg_iterations == whole.points[p].apg_iterations);
      }
      REQUIRE(resumed.total_apg_iterations == whole.total_apg_iterations);
      // The runs' iteration logs (path.json "runs"), timings aside: one run
      // for the feature counts, one per B value, each whole.
      REQUIRE(resumed.runs.size() == (mode == 0 ? 1u : 2u));
      REQUIRE(resumed.runs.size() == whole.runs.size());
      for (size_t r = 0; r < whole.runs.size(); ++r) {
        CAPTURE(r);
        REQUIRE(resumed.runs[r].B == whole.runs[r].B);
        REQUIRE(resumed.runs[r].stop_reason == whole.runs[r].stop_reason);
        REQUIRE(resumed.runs[r].iterations.size() == whole.runs[r].iterations.size());
        for (size_t i = 0; i < whole.runs[r].iterations.size(); ++i) {
          const IterationRecord &a = resumed.runs[r].iterations[i], &b = whole.runs[r].iterations[i];
          REQUIRE(a.iter == b.iter);
          REQUIRE(a.selected == b.selected);
          REQUIRE(same_bits(a.objective, b.objective));
          REQUIRE(same_bits(a.sip_violation, b.sip_violation));
          REQUIRE(a.apg_iterations == b.apg_iterations);
          REQUIRE(a.apg_stop == b.apg_stop);
        }
      }
    }
  }
  if (partitions > 0) return;
  // A B list: one run per value, in order, each ending at its point's model.
  PathSettings ps;
  ps.base = settings_for("linear", Loss::kSquaredHinge);
  ps.base.max_iterations = 2;
  ps.B_values = {3, 2};
  PathOutcome two = run_fgm_path(*fx.store, ps, fx.budget);
  REQUIRE(two.runs.size() == 2);
  for (size_t r = 0; r < 2; ++r) {
    CAPTURE(r);
    CHECK(two.runs[r].B == ps.B_values[r]);
    REQUIRE_FALSE(two.runs[r].iterations.empty());
    CHECK(two.runs[r].iterations.size() <= 2);
    CHECK(two.runs[r].iterations.back().selected == two.points[r].selected);
    CHECK(same_bits(two.runs[r].iterations.back().objective, two.points[r].train_objective));
  }
}

TEST_CASE("checkpoint identity: differences are named; neutral keys are not compared", "[engine][resume]") {
  RunIdentity a, b;
  a.command = b.command = "train";
  a.store_checksum = b.store_checksum = 7;
  a.config = result_config({{"fgm.B", "10"}, {"engine.threads", "1"}, {"fgm.C", "1"}, {"output.dir", "x"}});
  b.config = result_config({{"fgm.B", "5"}, {"engine.threads", "8"}, {"fgm.C", "1"}, {"output.dir", "y"},
                            {"engine.memory_budget", "1000"}});
  std::vector<std::string> d = identity_differences(a, b);
  REQUIRE(d.size() == 1);
  REQUIRE(d[0] == "fgm.B: checkpoint 10, now 5");
  b.config["fgm.B"] = "10";
  REQUIRE(identity_differences(a, b).empty());
  b.store_checksum = 8;
  b.command = "path";
  d = identity_differences(a, b);
  REQUIRE(d.size() == 2);
  REQUIRE(d[0].find("fgm path") != std::string::npos);
  REQUIRE(d[1].find("store checksum") != std::string::npos);
  REQUIRE_FALSE(key_affects_result("engine.threads"));
  REQUIRE(key_affects_result("features.kind"));
  REQUIRE(key_affects_result("engine.block_bytes"));
}

TEST_CASE("a damaged checkpoint is a corruption error naming the file", "[engine][resume]") {
  Fixture fx(test::random_libsvm(200, 20, 0.3, 3, {1}));
  TrainProgress p;
  p.batches = {{1, 2}};
  p.apg.w = {0.5, -0.25};
  const std::string file = fx.dir.file("checkpoint.fgm");
  write_checkpoint(file, identity_for("train", *fx.store), &p, nullptr, fx.budget);
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  REQUIRE(read_checkpoint(file, fx.budget).train->apg.w == p.apg.w);
  auto expect_corrupt = [&](const std::string& damaged, const std::string& why) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << damaged;
    try {
      read_checkpoint(file, fx.budget);
      FAIL("a damaged checkpoint was accepted");
    } catch (const Error& e) {
      CAPTURE(e.what());
      REQUIRE(e.kind() == ErrorKind::kCorruption);
      REQUIRE(std::string(e.what()).find(file) != std::string::npos);
      REQUIRE(std::string(e.what()).find(why) != std::string::npos);
      REQUIRE(std::string(e.what()).find("--restart") != std::string::npos);
    }
  };
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x10;
  expect_corrupt(flipped, "checksum mismatch");
  expect_corrupt(bytes.substr(0, bytes.size() - 9), "the header says");
  expect_corrupt("not a checkpoint at all, just text", "no fgm checkpoint header");
  expect_corrupt("", "no fgm checkpoint header");
}
