// One-vs-rest training and multi-class evaluation against independent checks:
// K binary runs on files relabelled by hand, argmax and tie rule by hand,
// macro AUC by pair counting.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "core/error.h"
#include "engine/evaluate.h"
#include "core/communicator.h"
#include "engine/distributed_fgm.h"
#include "engine/one_vs_rest.h"
#include "io/ingest.h"
#include "io/partitioned_store.h"
#include "io/shard_store.h"
#include "tests/test_util.h"

using namespace fgm;

namespace {

// Three classes spelled "1", "2.0", "3" (and "+1", "3.000"), mixed Gaussian,
// binary and small-integer columns; class k raises features 3k+1..3k+3.
std::string three_class_text(uint64_t n, uint64_t m, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> unif(0, 1);
  const char* spellings[3][2] = {{"1", "+1"}, {"2.0", "2"}, {"3", "3.000"}};
  std::ostringstream out;
  for (uint64_t i = 0; i < n; ++i) {
    int c = static_cast<int>(unif(rng) * 3);
    out << spellings[c][i % 2];
    for (uint64_t j = 0; j < m; ++j) {
      double v = 0;
      if (j % 3 == 0) v = static_cast<float>(normal(rng));
      else if (j % 3 == 1) v = unif(rng) < 0.3 ? 1 : 0;
      else v = std::floor(4 * unif(rng) * unif(rng));
      if (j / 3 == static_cast<uint64_t>(c) + 1) v += 1 + std::floor(2 * unif(rng));
      if (v != 0) out << ' ' << j + 1 << ':' << static_cast<float>(v);
    }
    out << '\n';
  }
  return out.str();
}

// The same text with class `value` -> +1 and every other label -> -1.
std::string relabel(const std::string& text, double value) {
  std::istringstream in(text);
  std::ostringstream out;
  std::string line;
  while (std::getline(in, line)) {
    auto space = line.find(' ');
    double label = std::stod(line.substr(0, space));
    out << (label == value ? "+1" : "-1") << (space == std::string::npos ? "" : line.substr(space))
        << '\n';
  }
  return out.str();
}

std::unique_ptr<ShardStore> ingest(const test::TempDir& dir, const std::string& name,
                                   const std::string& text, MemoryBudget& budget) {
  std::string path = dir.write(name + ".svm", text);
  IngestOptions o;
  o.shard_target_bytes = 8 << 10;  // several shards
  ingest_libsvm(path, dir.file(name), o, budget);
  return ShardStore::open(dir.file(name), budget);
}

TrainSettings settings_for(const std::string& kind, int threads) {
  TrainSettings s;
  s.B = 3;
  s.max_iterations = 3;
  s.eps_outer = 0;
  s.apg.C = 5;
  s.apg.bias = true;
  s.apg.threads = threads;
  s.scheduler.threads = threads;
  s.block_bytes = 4 << 10;
  s.space.kind = kind;
  s.final_certificate = false;
  return s;
}

void require_same_features(const std::vector<ModelFeature>& a, const std::vector<ModelFeature>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    CAPTURE(k);
    REQUIRE(a[k].key == b[k].key);
    REQUIRE(a[k].weight == b[k].weight);
    REQUIRE(a[k].batch == b[k].batch);
  }
}

// Solver "fgm" on the single store (a multi-class one: one-vs-rest).
FgmOutcome train_one_vs_rest(const ShardStore& store, const TrainSettings& s, MemoryBudget& budget,
                             OneVsRestSchedule schedule = OneVsRestSchedule::kLockstepWherePossible) {
  SingleRankCommunicator comm;
  return train_fgm_on({comm, &store}, s, budget, {}, schedule);
}

}  // namespace

TEST_CASE("one-vs-rest equals K binary runs on files relabelled by hand",
          "[engine][multiclass]") {
  const std::string kind =
      GENERATE(std::string("linear"), std::string("poly2"), std::string("hik"));
  CAPTURE(kind);
  test::TempDir dir("fgm-ovr");
  MemoryBudget budget(256ull << 20);
  const std::string text = three_class_text(240, 15, 11);
  auto store = ingest(dir, "multi", text, budget);
  const StoreInfo& info = store->info();
  REQUIRE(info.class_values == std::vector<double>{1, 2, 3});

  FgmOutcome one = train_one_vs_rest(*store, settings_for(kind, 1), budget);
  FgmOutcome two = train_one_vs_rest(*store, settings_for(kind, 2), budget);
  REQUIRE(one.model.classes.size() == 3);
  // linear shares its scoring passes across the classes; poly2/hik do not.
  REQUIRE(one.lockstep == (kind == "linear"));
  REQUIRE(two.lockstep == one.lockstep);
  for (size_t c = 0; c < 3; ++c) {
    CAPTURE(c);
    const double value = info.class_values[c];
    auto binary = ingest(dir, "class" + std::to_string(c), relabel(text, value), budget);
    TrainOutcome ref = train_fgm(*binary, settings_for(kind, 1), budget);
    REQUIRE(!ref.model.features.empty());
    const ClassModel& got = one.model.classes[c];
    REQUIRE(got.label == value);
    require_same_features(got.features, ref.model.features);
    REQUIRE(got.bias == ref.model.bias);
    REQUIRE(got.objective == ref.model.objective);
    // The multi-class model scores class c as the binary model does (the
    // hik scalings of every class are merged into one table).
    std::string relabelled = dir.write("class" + std::to_string(c) + "-test.svm", relabel(text, value));
    EvalResult want = evaluate_file(relabelled, ref.model, true, budget);
    EvalResult have = evaluate_file(relabelled, class_model(one.model, c), true, budget);
    REQUIRE(have.scores == want.scores);
    // Any thread count: the same model.
    require_same_features(two.model.classes[c].features, got.features);
    REQUIRE(two.model.classes[c].bias == got.bias);
  }
}

TEST_CASE("one-vs-rest labels keep rows a mask leaves out", "[engine][multiclass]") {
  test::TempDir dir("fgm-ovr-mask");
  MemoryBudget budget(64ull << 20);
  auto store = ingest(dir, "multi", "1 1:1\n2 2:1\n3 3:1\n2 1:1\n1 2:1\n", budget);
  const int8_t mask[5] = {1, 0, 1, 1, 0};
  REQUIRE(one_vs_rest_labels(*store, 1) == std::vector<int8_t>{-1, 1, -1, 1, -1});
  REQUIRE(one_vs_rest_labels(*store, 0, mask) == std::vector<int8_t>{1, 0, -1, -1, 0});
}

TEST_CASE("argmax picks the largest decision value; ties go to the smaller class",
          "[engine][multiclass][evaluate]") {
  const double a[] = {0.5, 2.0, -1.0};
  REQUIRE(argmax_class(a, 3) == 1);
  const double tie[] = {1.0, 3.0, 3.0};
  REQUIRE(argmax_class(tie, 3) == 1);
  const double zeros[] = {0.0, -0.0, 0.0};
  REQUIRE(argmax_class(zeros, 3) == 0);
  const double last[] = {-3.0, -2.0, -1.0};
  REQUIRE(argmax_class(last, 3) == 2);
}

TEST_CASE("multi-class predict: argmax accuracy and predicted labels by hand",
          "[engine][multiclass][evaluate]") {
  test::TempDir dir("fgm-ovr-predict");
  MemoryBudget budget(64ull << 20);
  // Class k's model: weight 1 on feature k (1-based k+1), biases 0, 0.5, 0.
  Model m;
  m.n_features = 3;
  m.has_bias = true;
  const double biases[3] = {0, 0.5, 0};
  for (int k = 0; k < 3; ++k) {
    ClassModel c;
    c.label = 10.0 * (k + 1);
    ModelFeature f;
    f.key.kind = FeatureKind::kLinear;
    f.key.ids[0] = static_cast<uint64_t>(k);
    f.weight = 1;
    c.features.push_back(f);
    c.bias = biases[k];
    m.classes.push_back(c);
  }
  // Decisions (x_k - b_k), by hand:
  //  row 1 (label 10): 2, -0.5, 0        -> class 0 (10)  correct
  //  row 2 (label 20): 0, 1.5, 1         -> class 1 (20)  correct
  //  row 3 (label 30): 0, -0.5, 0        -> tie 0/2: class 0 (10) wrong
  //  row 4 (label 30): 1, 0.5, 1         -> tie 0/2: class 0 (10) wrong
  //  row 5 (label 30): 0, -0.5, 0.25     -> class 2 (30)  correct
  std::string path = dir.write("test.svm",
                               "10 1:2\n20 2:2 3:1\n30\n30 1:1 2:1 3:1\n3e1 3:0.25\n");
  EvalResult r = evaluate_file(path, m, true, budget);
  REQUIRE(r.rows == 5);
  REQUIRE(r.accuracy == Approx(3.0 / 5.0));
  REQUIRE(r.scores == std::vector<double>{10, 20, 10, 10, 30});
  // A label outside the model's classes is an error naming the line.
  std::string bad = dir.write("bad.svm", "10 1:1\n40 1:1\n");
  REQUIRE_THROWS_WITH(evaluate_file(bad, m, false, budget), Catch::Contains("bad.svm:2:1"));
}

TEST_CASE("macro AUC equals the mean of pair-counted one-vs-rest AUCs",
          "[engine][multiclass][evaluate]") {
  std::mt19937_64 rng(5);
  const size_t n = 60, K = 4;
  std::vector<double> decisions(n * K);
  std::vector<uint16_t> truth(n);
  for (size_t i = 0; i < n; ++i) {
    truth[i] = static_cast<uint16_t>(rng() % 3);  // class 3 never occurs: left out
    for (size_t k = 0; k < K; ++k)
      decisions[i * K + k] = static_cast<double>(rng() % 5) + (truth[i] == k ? 1.0 : 0.0);  // ties
  }
  double sum = 0;
  for (size_t k = 0; k < 3; ++k) {
    double wins = 0, pairs = 0;
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j) {
        if (truth[i] != k || truth[j] == k) continue;
        double a = decisions[i * K + k], b = decisions[j * K + k];
        wins += a > b ? 1.0 : a == b ? 0.5 : 0.0;
        pairs += 1;
      }
    sum += wins / pairs;
  }
  std::vector<double> per_class;
  REQUIRE(macro_auc(decisions, truth, K, &per_class) == Approx(sum / 3).epsilon(1e-12));
  REQUIRE(std::isnan(per_class[3]));
}

namespace {

// The passes a binary run streams: one per outer iteration, one more when the
// last found no new feature, and the final certificate.
uint64_t passes_by_hand(const TrainOutcome& o, bool certificate) {
  uint64_t passes = o.iterations.size();
  // The pass that found nothing new, or whose violation met eps_outer, ended the loop.
  if (o.stop_reason == "no_new_features" || o.stop_reason == "eps_outer") return passes + 1;
  return passes + (certificate && !o.iterations.empty() ? 1 : 0);
}

void require_same_run(const TrainOutcome& got, const TrainOutcome& want) {
  require_same_features(got.model.features, want.model.features);
  REQUIRE(got.model.bias == want.model.bias);
  REQUIRE(got.model.objective == want.model.objective);
  REQUIRE(got.stop_reason == want.stop_reason);
  REQUIRE(got.objective_no_features == want.objective_no_features);
  // NaN (no certificate) compares unequal to itself.
  REQUIRE((std::isnan(got.final_sip_violation) ? std::isnan(want.final_sip_violation)
                                                : got.final_sip_violation == want.final_sip_violation));
  REQUIRE(got.iterations.size() == want.iterations.size());
  for (size_t t = 0; t < got.iterations.size(); ++t) {
    CAPTURE(t);
    const IterationRecord& g = got.iterations[t];
    const IterationRecord& w = want.iterations[t];
    REQUIRE(g.selected == w.selected);
    REQUIRE(g.added == w.added);
    REQUIRE(g.objective == w.objective);
    REQUIRE(g.sip_violation == w.sip_violation);
    REQUIRE(g.candidates_scored == w.candidates_scored);
    REQUIRE(g.apg_iterations == w.apg_iterations);
    REQUIRE(g.bytes_streamed == w.bytes_streamed);  // the one pass it took part in
  }
  REQUIRE(got.total_apg_iterations == want.total_apg_iterations);
  REQUIRE(got.total_bytes_streamed == want.total_bytes_streamed);
}

}  // namespace

TEST_CASE("lockstep one-vs-rest equals the sequential runs and streams max, not sum, of their passes",
          "[engine][multiclass][lockstep]") {
  const std::string space = GENERATE(std::string("linear"), std::string("group"));
  const bool certificate = GENERATE(false, true);
  const int threads = GENERATE(1, 2);
  CAPTURE(space, certificate, threads);
  test::TempDir dir("fgm-ovr-lockstep");
  MemoryBudget budget(256ull << 20);
  auto store = ingest(dir, "multi", three_class_text(240, 15, 5), budget);
  TrainSettings s = settings_for("linear", threads);
  if (space == "group") s.space.groups_path = dir.write("groups.txt", "1 2 3\n4 5 6\n7 8 9 10\n13 14\n");
  s.final_certificate = certificate;
  // Classes stop at different iterations: their own eps_outer (or the cap,
  // or a feature cap that lands inside a batch).
  s.max_iterations = 8;
  s.eps_outer = 3.5e-2;
  s.max_features = 20;

  FgmOutcome lock = train_one_vs_rest(*store, s, budget);
  FgmOutcome seq = train_one_vs_rest(*store, s, budget, OneVsRestSchedule::kSequential);
  REQUIRE(lock.lockstep);
  REQUIRE(!seq.lockstep);
  REQUIRE(lock.classes.size() == 3);
  uint64_t max_passes = 0, sum_passes = 0;
  std::set<size_t> lengths;
  for (size_t c = 0; c < 3; ++c) {
    CAPTURE(c);
    require_same_run(lock.classes[c], seq.classes[c]);
    REQUIRE(lock.model.classes[c].features.size() == seq.model.classes[c].features.size());
    // Every class's model comes from a solve certified to apg.gap_tolerance,
    // whichever rule stopped it (eps_outer: a polish solve after the loop).
    for (const FgmOutcome* o : {&lock, &seq}) {
      const IterationRecord& last = o->classes[c].iterations.back();
      REQUIRE(last.apg_certified);
      REQUIRE(last.apg_stop == "converged");
      REQUIRE(last.apg_relative_gap <= s.apg.gap_tolerance);
    }
    const uint64_t p = passes_by_hand(seq.classes[c], certificate);
    max_passes = std::max(max_passes, p);
    sum_passes += p;
    lengths.insert(seq.classes[c].iterations.size());
  }
  REQUIRE(lengths.size() >= 2);  // the classes did stop at different iterations
  REQUIRE(seq.scoring_passes == sum_passes);
  REQUIRE(lock.scoring_passes == max_passes);
  REQUIRE(lock.scoring_passes < seq.scoring_passes);
  // Every pass reads the whole store: bytes = passes × one pass.
  const uint64_t one_pass = seq.classes[0].iterations.front().bytes_streamed;
  REQUIRE(one_pass > 0);
  REQUIRE(seq.total_bytes_streamed == sum_passes * one_pass);
  REQUIRE(lock.total_bytes_streamed == max_passes * one_pass);
}

TEST_CASE("one-vs-rest falls back to one class after another when lockstep does not fit the budget",
          "[engine][multiclass][lockstep]") {
  test::TempDir dir("fgm-ovr-fallback");
  MemoryBudget store_budget(256ull << 20);
  auto store = ingest(dir, "multi", three_class_text(3000, 15, 5), store_budget);
  TrainSettings s = settings_for("linear", 1);
  MemoryBudget roomy(256ull << 20);
  FgmOutcome want = train_one_vs_rest(*store, s, roomy, OneVsRestSchedule::kSequential);
  REQUIRE(train_one_vs_rest(*store, s, roomy).lockstep);
  // The smallest budget (in steps of 1/8) that holds the classes' runs one at
  // a time: the three at once need more.
  bool found = false;
  for (uint64_t limit = 128 << 10; limit < (4 << 20) && !found; limit = limit * 9 / 8) {
    CAPTURE(limit);
    try {
      MemoryBudget probe(limit);
      train_one_vs_rest(*store, s, probe, OneVsRestSchedule::kSequential);
    } catch (const Error& e) {
      REQUIRE(e.kind() == ErrorKind::kOutOfMemory);
      continue;
    }
    found = true;
    MemoryBudget tight(limit);
    RunWarnings warnings;
    s.warnings = &warnings;
    FgmOutcome got = train_one_vs_rest(*store, s, tight);
    REQUIRE(!got.lockstep);
    REQUIRE(got.scoring_passes == want.scoring_passes);
    const auto list = warnings.list();
    REQUIRE(std::count_if(list.begin(), list.end(), [](const RunWarning& w) {
              return w.code == "ovr_lockstep_fell_back";
            }) == 1);
    for (size_t c = 0; c < 3; ++c) {
      CAPTURE(c);
      require_same_run(got.classes[c], want.classes[c]);
    }
  }
  REQUIRE(found);
}

// The chance-level check of a one-vs-rest run looks at the multi-class model
// (argmax over the classes on the training rows), not at each class against
// the rest: a small class's binary model may never say "yes" and still rank
// its rows first. Checked against the accuracy computed here from the model.
TEST_CASE("one-vs-rest checks the multi-class model for chance level, once", "[engine][multiclass][warnings]") {
  test::TempDir dir("fgm-ovr-chance");
  MemoryBudget budget(256ull << 20);
  // Informative features: well above the largest class's share, no warning.
  auto good = ingest(dir, "good", three_class_text(300, 15, 7), budget);
  RunWarnings warnings;
  TrainSettings s = settings_for("linear", 1);
  s.warnings = &warnings;
  FgmOutcome out = train_one_vs_rest(*good, s, budget);
  const uint16_t* truth = good->classes();
  const uint64_t n = good->info().n_rows;
  // Decision values from the model itself: store columns, class weights, bias.
  std::vector<std::vector<double>> d(3, std::vector<double>(n));
  std::vector<uint32_t> rows;
  std::vector<float> values;
  for (size_t c = 0; c < 3; ++c) {
    std::fill(d[c].begin(), d[c].end(), -out.model.classes[c].bias);
    for (const auto& f : out.model.classes[c].features) {
      good->read_column(f.key.ids[0], rows, values);
      for (size_t k = 0; k < rows.size(); ++k) d[c][rows[k]] += f.weight * values[k];
    }
  }
  std::vector<uint64_t> count(3, 0);
  uint64_t correct = 0;
  for (uint64_t i = 0; i < n; ++i) {
    ++count[truth[i]];
    double di[3] = {d[0][i], d[1][i], d[2][i]};
    correct += argmax_class(di, 3) == truth[i];
  }
  const double accuracy = double(correct) / double(n);
  CHECK(out.train_accuracy == Approx(accuracy).margin(1e-12));
  CHECK(out.majority_rate == Approx(double(*std::max_element(count.begin(), count.end())) /
                                    double(n)));
  CHECK(out.train_accuracy > out.majority_rate);
  auto count_code = [](const RunWarnings& w, const std::string& code) {
    size_t k = 0;
    for (const auto& x : w.list()) k += x.code == code;
    return k;
  };
  CHECK(count_code(warnings, "chance_level_model") == 0);

  // Labels independent of the features (one constant feature): at most the
  // largest class's share — one warning for the model, none per class.
  std::string text;
  for (int i = 0; i < 90; ++i) text += std::to_string(1 + i % 3) + " 1:1\n";
  auto noise = ingest(dir, "noise", text, budget);
  RunWarnings noise_warnings;
  s.warnings = &noise_warnings;
  FgmOutcome bad = train_one_vs_rest(*noise, s, budget);
  CHECK(bad.train_accuracy <= bad.majority_rate);
  CHECK(count_code(noise_warnings, "chance_level_model") == 1);
}

// One-vs-rest runs its classes on one row source (engine/one_vs_rest.h
// run_one_vs_rest), which measures the value span on its first pass: one
// warning per store, whether the classes share passes or go one after another
// and on either backend (one class after another on one store once measured
// and warned in every class).
TEST_CASE("one-vs-rest warns about the value span once, in any schedule on either backend",
          "[engine][multiclass][warnings][distributed]") {
  test::TempDir dir("fgm-ovr-span");
  MemoryBudget budget(256ull << 20);
  // Column 16 spans 10^6 against values of about 1 elsewhere.
  std::string text = three_class_text(240, 15, 3);
  std::string scaled;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) scaled += line + " 16:1000000\n";
  auto store = ingest(dir, "span", scaled, budget);
  IngestOptions options;
  options.shard_target_bytes = 8 << 10;
  ingest_partitioned(dir.file("span.svm"), dir.file("span-parts"), 2, options, budget);
  SingleRankCommunicator comm;
  const auto schedule = GENERATE(OneVsRestSchedule::kLockstepWherePossible, OneVsRestSchedule::kSequential);
  const bool partitioned = GENERATE(false, true);
  CAPTURE(schedule == OneVsRestSchedule::kSequential, partitioned);
  RunWarnings warnings;
  TrainSettings s = settings_for("linear", 1);
  s.warnings = &warnings;
  const FgmOutcome out =
      train_fgm_on({comm, partitioned ? nullptr : store.get(), dir.file("span-parts")}, s, budget, {}, schedule);
  CHECK(out.lockstep == (schedule == OneVsRestSchedule::kLockstepWherePossible));
  CHECK(out.value_span > kValueSpanLimit);
  size_t span_warnings = 0;
  for (const auto& w : warnings.list()) span_warnings += w.code == "feature_value_span";
  CHECK(span_warnings == 1);
}
