#include "engine/fgm_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <memory>

#include "cache/selected_features.h"

namespace fgm {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

TrainOutcome train_fgm(const ShardStore& store, const TrainSettings& settings,
                       MemoryBudget& budget, const IterationCallback& on_iteration,
                       const CheckpointCallback& on_checkpoint) {
  const auto start = std::chrono::steady_clock::now();
  const StoreInfo& info = store.info();
  const uint64_t n = info.n_rows;
  const int8_t* y = store.labels();
  const ApgOptions& apg = settings.apg;

  FeatureSpaceSettings space_settings = settings.space;
  space_settings.index_base = info.index_base;
  std::unique_ptr<FeatureSpace> space = make_feature_space(space_settings, store, budget);
  const bool single_columns = space->kind() != "group" && space->kind() != "hik" && space->kind() != "additive";
  // A store that fits comfortably in the budget stays mapped between passes
  // (reserved as such); a larger one is streamed and its pages released.
  SchedulerOptions scheduler = settings.scheduler;
  Reservation resident;
  if (info.shard_bytes <= budget.available() / 2) {
    resident = budget.reserve(info.shard_bytes, "store pages kept resident between passes");
    scheduler.keep_resident = true;
  }
  BlockStreamer streamer = make_block_streamer(store, scheduler, budget);

  // Dual variables, decision values and a = α∘y: O(n) each.
  Reservation dual_mem = budget.reserve(3 * n * sizeof(double), "dual variables",
                                        "use fewer training rows");
  std::vector<double> alpha(n, apg.C);  // α⁰ = C·1 (no feature selected ⇒ ξ = 1)
  std::vector<double> a(n), decision(n, 0.0);

  SelectedFeatureCache cache(budget, n);
  // A small budget gets smaller blocks, so that several stay in flight
  // (scores do not depend on how the columns are cut into blocks).
  const uint64_t block_bytes = std::max<uint64_t>(64 << 10, std::min(settings.block_bytes, budget.limit() / 16));
  std::vector<BlockRef> blocks = store.plan_blocks(block_bytes);
  ApgState state;
  TrainOutcome out;
  // F_0: objective with no features (ω = 0, b = 0).
  const double f0 = loss_value(apg.loss, apg.C, y, decision);
  out.objective_no_features = f0;
  double f_prev = f0;

  auto batch_violation_terms = [&](const SpaceScores& wc) {
    // ½ Σ_{j∈d_h} c_j² for each existing batch h, with the current α: the
    // cached columns give c_j exactly (same summation as the scoring pass).
    double best = 0;
    for (size_t h = 0; h < cache.num_batches(); ++h) {
      double s = 0;
      for (size_t k = cache.batch_begin(h); k < cache.batch_end(h); ++k) {
        SparseColumnView col = cache.column(k);
        double c = column_dot(col.rows, col.values, col.nnz, a.data());
        s += c * c;
      }
      best = std::max(best, 0.5 * s);
    }
    double fresh = 0;
    for (const auto& c : wc.top) fresh += c.score;
    return 0.5 * fresh - best;
  };

  // The model of the current state (also used for checkpoints).
  auto make_model = [&]() {
    Model m;
    m.engine_version = FGM_VERSION;
    m.loss = loss_name(apg.loss);
    m.C = apg.C;
    m.B = settings.B;
    m.iterations = static_cast<uint32_t>(out.iterations.size());
    m.has_bias = apg.bias;
    m.bias = apg.bias ? state.b : 0.0;
    m.n_features = info.n_features;
    m.index_base = info.index_base;
    m.positive_label = info.positive_value;
    m.negative_label = info.negative_value;
    m.store_checksum = info.store_checksum;
    m.input_checksum = info.input_checksum;
    m.input_path = info.input_path;
    space->describe(m);
    m.objective = out.iterations.empty() ? f0 : out.iterations.back().objective;
    m.created_unix = static_cast<int64_t>(std::time(nullptr));
    for (size_t h = 0; h < cache.num_batches(); ++h) {
      for (size_t k = cache.batch_begin(h); k < cache.batch_end(h); ++k) {
        ModelFeature f;
        f.key = cache.key(k);
        f.weight = k < state.w.size() ? state.w[k] : 0.0;
        f.batch = static_cast<uint32_t>(h + 1);
        m.features.push_back(f);
      }
    }
    return m;
  };

  auto emit_checkpoint = [&](uint64_t features) {
    Checkpoint cp;
    cp.features = features;
    cp.model = make_model();
    cp.last = &out.iterations.back();
    cp.seconds = seconds_since(start);
    cp.apg_iterations = out.total_apg_iterations;
    cp.line_search_steps = out.total_line_search_steps;
    cp.gradient_evaluations = out.total_gradient_evaluations;
    cp.cache = &cache;
    cp.labels = y;
    on_checkpoint(cp);
  };

  size_t next_checkpoint = 0;
  uint64_t last_checkpoint_features = 0;
  for (int t = 1; t <= settings.max_iterations; ++t) {
    IterationRecord rec;
    rec.iter = t;
    for (uint64_t i = 0; i < n; ++i) a[i] = alpha[i] * y[i];

    auto t_score = std::chrono::steady_clock::now();
    uint64_t batch = settings.B;
    {
      // Land exactly on the next checkpoint and never pass max_features.
      const uint64_t have = cache.num_columns();
      while (next_checkpoint < settings.checkpoints.size() && settings.checkpoints[next_checkpoint] <= have)
        ++next_checkpoint;
      uint64_t limit = UINT64_MAX;
      if (next_checkpoint < settings.checkpoints.size()) limit = settings.checkpoints[next_checkpoint];
      if (settings.max_features > 0) limit = std::min(limit, settings.max_features);
      if (single_columns && limit != UINT64_MAX) batch = std::min<uint64_t>(settings.B, limit - have);
    }
    SpaceScores wc = run_worst_case_analysis(*space, store, blocks, streamer, a.data(), batch,
                                             settings.scheduler.threads, budget);
    rec.score_seconds = seconds_since(t_score);
    rec.bytes_streamed = wc.pass.bytes_streamed;
    rec.candidates_scored = wc.candidates_scored;
    rec.pair_updates = wc.pair_updates;
    rec.sip_violation = batch_violation_terms(wc);
    out.total_bytes_streamed += wc.pass.bytes_streamed;

    if (wc.top.empty()) {
      out.stop_reason = "no_new_features";
      out.final_sip_violation = rec.sip_violation;
      break;
    }

    // Add the new batch to the selected-feature cache.
    cache.begin_batch();
    for (const auto& c : wc.top) {
      space->mark_selected(c.id);
      space->materialize(store, c.id, cache);
    }
    rec.added = cache.batch_end(cache.num_batches() - 1) - cache.batch_begin(cache.num_batches() - 1);

    auto t_solve = std::chrono::steady_clock::now();
    ApgResult r = solve_apg(cache, y, apg, state, decision, budget);
    rec.solve_seconds = seconds_since(t_solve);
    dual_from_decision(apg.loss, apg.C, y, decision, alpha);

    rec.selected = cache.num_columns();
    rec.objective = r.objective;
    rec.rel_decrease = f0 > 0 ? (f_prev - r.objective) / f0 : 0.0;
    rec.apg_iterations = r.iterations;
    rec.apg_line_search_steps = r.line_search_steps;
    rec.apg_gradient_evaluations = r.gradient_evaluations;
    rec.apg_recomputed_products = r.recomputed_products;
    rec.peak_rss_bytes = peak_rss_bytes();
    out.total_apg_iterations += r.iterations;
    out.total_line_search_steps += r.line_search_steps;
    out.total_gradient_evaluations += r.gradient_evaluations;
    f_prev = r.objective;
    out.iterations.push_back(rec);
    if (on_iteration) on_iteration(rec);

    if (on_checkpoint && next_checkpoint < settings.checkpoints.size() &&
        rec.selected >= settings.checkpoints[next_checkpoint]) {
      emit_checkpoint(settings.checkpoints[next_checkpoint]);
      last_checkpoint_features = rec.selected;
    }
    if (settings.max_features > 0 && rec.selected >= settings.max_features) {
      out.stop_reason = "max_features";
      break;
    }
    if (!settings.checkpoints.empty() && rec.selected >= settings.checkpoints.back()) {
      out.stop_reason = "last_checkpoint";
      break;
    }
    if (rec.rel_decrease <= settings.eps_outer) {
      out.stop_reason = "eps_outer";
      break;
    }
    if (t == settings.max_iterations) out.stop_reason = "max_iterations";
  }

  // A path that ran out of new features before its next checkpoint still
  // reports the model it reached.
  if (on_checkpoint && next_checkpoint < settings.checkpoints.size() && !out.iterations.empty() &&
      cache.num_columns() > last_checkpoint_features) {
    emit_checkpoint(cache.num_columns());
  }

  if (settings.final_certificate && out.stop_reason != "no_new_features" && !out.iterations.empty()) {
    // One more pass for the SIP violation (37) of the final α: the certificate.
    for (uint64_t i = 0; i < n; ++i) a[i] = alpha[i] * y[i];
    SpaceScores wc = run_worst_case_analysis(*space, store, blocks, streamer, a.data(), settings.B,
                                             settings.scheduler.threads, budget);
    out.total_bytes_streamed += wc.pass.bytes_streamed;
    out.final_sip_violation = batch_violation_terms(wc);
  }

  out.model = make_model();
  // Hand the resident store pages back with their reservation.
  if (scheduler.keep_resident)
    for (const auto& b : blocks) store.release_block(b);
  out.seconds = seconds_since(start);
  out.budget_peak = budget.peak();
  return out;
}

}  // namespace fgm
