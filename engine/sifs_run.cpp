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
      : store_(store), config_(config), budget_(budget), layout_(sifs_layout_of(store)) {}
  std::unique_ptr<SifsSolver> solver(const SifsSettings& settings) override {
    // With screening, the rule passes run over the nonzeros held column-major
    // (SifsData::hold_columns) when they fit; the store pages are then read
    // once. Without screening the baseline holds its whole problem row-major
    // after one extraction, and the pages stay resident for its other passes.
    const bool screening = settings.screening != SifsScreening::kNone;
    open(!screening);
    // Too large to hold decoded: keep at least the pages, as FGM does.
    if (screening && !data_->hold_columns() && keeps_store_resident(store_.info(), budget_)) open(true);
    return std::make_unique<SifsSolver>(*data_, settings);
  }
  SifsPasses& passes() override { return *data_; }
  SifsPassCounters counters() const override { return std::as_const(*data_).counters(); }
  bool holds_columns() const override { return data_->holds_columns(); }
  Model model(const SifsReference& solution, double objective) const override {
    const SifsData& data = *data_;
    Model m = model_of_store(store_.info(), "sifs");
    set_sifs_weights(m, data.layout(), store_.info().class_values, data.columns(),
                     [&](uint64_t j) { return data.column_id(j); }, solution, objective);
    record_feature_transforms(store_, m);
    return m;
  }

 private:
  // The data over a new stream (the previous one's closed first), whose pages stay when `resident`.
  void open(bool resident) {
    data_.reset();
    stream_.reset();
    resident_.release();
    SchedulerOptions so = scheduler_options_from_config(config_);
    if (resident) resident_ = reserve_resident_store(store_.info(), budget_, so);
    stream_ = std::make_unique<BlockStream>(store_, so, budget_);
    data_ = std::make_unique<SifsData>(*stream_, store_.plan_blocks(config_.get_bytes("engine.block_bytes")), layout_,
                                       budget_);
  }

  const ShardStore& store_;
  const Config& config_;
  MemoryBudget& budget_;
  const SifsLayout layout_;
  Reservation resident_;  // before stream_: the stream releases its blocks first
  std::unique_ptr<BlockStream> stream_;
  std::unique_ptr<SifsData> data_;
};

}  // namespace

std::unique_ptr<SifsBackend> open_sifs_store(const ShardStore& store, const Config& config, MemoryBudget& budget) {
  return std::make_unique<StoreSifs>(store, config, budget);
}

}  // namespace fgm
