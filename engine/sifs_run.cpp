#include "engine/sifs_run.h"
#include "engine/model_provenance.h"
#include "engine/train_settings.h"

#include <functional>
#include <utility>

#include "core/error.h"
#include "core/messages.h"
#include "features/transformed_store.h"

namespace fgm {

SifsSettings sifs_settings_from_config(const Config& c) {
  SifsSettings s;
  s.beta_max_ratio = c.get_float("sifs.beta_max_ratio");
  s.beta_min_ratio = c.get_float("sifs.beta_min_ratio");
  s.beta_points = static_cast<int>(c.get_int("sifs.beta_points"));
  s.alpha_min_ratio = c.get_float("sifs.alpha_min_ratio");
  s.alpha_points = static_cast<int>(c.get_int("sifs.alpha_points"));
  s.gamma = c.get_float("sifs.gamma");
  s.tol = c.get_float("sifs.tol");
  s.max_epochs = static_cast<int>(c.get_int("sifs.max_epochs"));
  const std::string mode = c.get_string("sifs.screening");
  s.screening = mode == "ifs" ? SifsScreening::kIfs
                : mode == "iss" ? SifsScreening::kIss
                : mode == "none" ? SifsScreening::kNone
                                 : SifsScreening::kSifs;
  return s;
}

void reject_sifs_ignored_keys(const Config& c, bool train) {
  if (train) {
    for (const char* key : {"sifs.beta_max_ratio", "sifs.beta_min_ratio", "sifs.beta_points", "sifs.alpha_min_ratio",
                            "sifs.compare"})
      reject_if_set(c, key, "it sets the grid of `fgm path`; fgm train solves one point (sifs.beta_ratio, sifs.alpha_ratio)");
  } else {
    for (const char* key : {"sifs.beta_ratio", "sifs.alpha_ratio"})
      reject_if_set(c, key, "it sets the one model of `fgm train`; fgm path solves the grid of sifs.beta_* x sifs.alpha_*");
    reject_if_set(c, "data.validation", "solver = sifs reports every grid point (with data.test accuracy); it picks no point");
    // The grid is beta_points × alpha_points points; capped like the KTA path's (kta.p_step).
    const uint64_t beta = static_cast<uint64_t>(c.get_int("sifs.beta_points"));
    const uint64_t alpha = static_cast<uint64_t>(c.get_int("sifs.alpha_points"));
    if (beta * alpha > kMaxSifsGridPoints)
      throw Error(ErrorKind::kConfig, msg::sifs_grid_too_large(beta, alpha, kMaxSifsGridPoints));
  }
}

SifsLayout sifs_layout_of(const ShardStore& store) {
  const StoreInfo& info = store.info();
  if (info.classes() <= 2)
    return SifsLayout::binary(std::vector<int8_t>(store.labels(), store.labels() + info.n_rows));
  return SifsLayout::multiclass(std::vector<uint16_t>(store.classes(), store.classes() + info.n_rows),
                                static_cast<uint32_t>(info.classes()));
}

std::unique_ptr<SifsRun> open_sifs_run(const ShardStore& store, const Config& c, MemoryBudget& budget,
                                       SifsScreening mode) {
  auto run = std::make_unique<SifsRun>(SifsRun{sifs_layout_of(store), Reservation(), nullptr, nullptr});
  SchedulerOptions so = scheduler_options_from_config(c);
  // With screening, the rule passes run over the nonzeros held column-major
  // (SifsData::hold_columns) when they fit; the store pages are then read
  // once. Without screening the baseline holds its whole problem row-major
  // after one extraction, and the pages stay resident for its other passes.
  auto open = [&](bool resident) {
    run->data.reset();
    run->stream.reset();
    if (resident) run->resident = reserve_resident_store(store.info(), budget, so);
    run->stream = std::make_unique<BlockStream>(store, so, budget);
    run->data = std::make_unique<SifsData>(*run->stream, store.plan_blocks(c.get_bytes("engine.block_bytes")),
                                           run->layout, budget);
  };
  const bool screening = mode != SifsScreening::kNone;
  open(!screening);
  // Too large to hold decoded: keep at least the pages, as FGM does.
  if (screening && !run->data->hold_columns() && keeps_store_resident(store.info(), budget)) open(true);
  return run;
}

void set_sifs_weights(Model& m, const SifsLayout& layout, const std::vector<double>& class_values, uint64_t columns,
                      const std::function<uint64_t(uint64_t)>& column_id, const SifsReference& solution,
                      double objective) {
  m.loss = "smoothed_hinge";
  m.C = 0;
  m.has_bias = false;
  m.objective = objective;
  auto block_features = [&](uint32_t k) {
    std::vector<ModelFeature> out;
    for (uint64_t j = 0; j < columns; ++j) {
      const double w = solution.w[k * columns + j];
      if (w == 0) continue;
      ModelFeature f;
      f.key.kind = FeatureKind::kLinear;
      f.key.ids[0] = column_id(j);
      f.weight = w;
      f.batch = 1;
      out.push_back(f);
    }
    return out;
  };
  if (!layout.is_multiclass()) {
    m.features = block_features(0);
    return;
  }
  for (uint32_t k = 0; k < layout.blocks(); ++k) {
    ClassModel cm;
    cm.label = class_values[k];
    cm.features = block_features(k);
    m.classes.push_back(std::move(cm));
  }
  m.positive_label = class_values.back();
  m.negative_label = class_values.front();
}

namespace {

class StoreSifs final : public SifsBackend {
 public:
  StoreSifs(const ShardStore& store, const Config& config, MemoryBudget& budget)
      : store_(store), config_(config), budget_(budget) {}
  std::unique_ptr<SifsSolver> solver(const SifsSettings& settings) override {
    run_.reset();
    run_ = open_sifs_run(store_, config_, budget_, settings.screening);
    return std::make_unique<SifsSolver>(*run_->data, settings);
  }
  SifsPasses& passes() override { return *run_->data; }
  SifsPassCounters counters() const override { return std::as_const(*run_->data).counters(); }
  bool holds_columns() const override { return run_->data->holds_columns(); }
  Model model(const SifsReference& solution, double objective) const override {
    const SifsData& data = *run_->data;
    Model m = model_of_store(store_.info(), "sifs");
    set_sifs_weights(m, data.layout(), store_.info().class_values, data.columns(),
                     [&](uint64_t j) { return data.column_id(j); }, solution, objective);
    record_feature_transforms(store_, m);
    return m;
  }

 private:
  const ShardStore& store_;
  const Config& config_;
  MemoryBudget& budget_;
  std::unique_ptr<SifsRun> run_;
};

}  // namespace

std::unique_ptr<SifsBackend> open_sifs_store(const ShardStore& store, const Config& config, MemoryBudget& budget) {
  return std::make_unique<StoreSifs>(store, config, budget);
}

}  // namespace fgm
