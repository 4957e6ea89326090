#include "engine/fgm_path.h"

#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"
#include "core/messages.h"
#include "engine/debias.h"

namespace fgm {

void validate_path_settings(const PathSettings& s) {
  int lists = !s.feature_counts.empty() + !s.B_values.empty() + !s.C_values.empty();
  if (lists != 1)
    throw Error(ErrorKind::kConfig,
                msg::missing_required("path.features | path.B | path.C",
                                      fmt::format("give exactly one list of operating points ({} given)", lists)));
  for (size_t i = 1; i < s.feature_counts.size(); ++i)
    if (s.feature_counts[i] <= s.feature_counts[i - 1])
      throw Error(ErrorKind::kConfig, msg::out_of_range("", "path.features",
                                                        std::to_string(s.feature_counts[i]),
                                                        "strictly increasing feature counts"));
  if (!s.feature_counts.empty() && !s.base.space.groups_path.empty())
    throw Error(ErrorKind::kConfig, msg::out_of_range("", "path.features", "a list",
                                                      "not with features.groups (use path.B)"));
}

PathOutcome run_fgm_path(const ShardStore& store, const PathSettings& settings, MemoryBudget& budget,
                         const std::function<void(const PathPoint&)>& on_point) {
  validate_path_settings(settings);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  PathOutcome out;
  Reservation test_mem, validation_mem;
  std::unique_ptr<LabeledRows> test, validation;
  // Label map and width come from the store; the rows are loaded once.
  Model shape;
  shape.index_base = store.info().index_base;
  shape.n_features = store.info().n_features;
  shape.positive_label = store.info().positive_value;
  shape.negative_label = store.info().negative_value;
  if (!settings.test_path.empty())
    test = std::make_unique<LabeledRows>(load_labeled_rows(settings.test_path, shape, budget, test_mem));
  if (!settings.validation_path.empty())
    validation = std::make_unique<LabeledRows>(
        load_labeled_rows(settings.validation_path, shape, budget, validation_mem));

  auto add_point = [&](const Model& model, uint64_t B, double C, double objective, uint64_t apg_its,
                       uint64_t grads, const SelectedFeatureCache* cache, const int8_t* labels) {
    PathPoint p;
    p.point = static_cast<int>(out.points.size()) + 1;
    p.B = B;
    p.C = C;
    p.selected = model.features.size();
    for (const auto& f : model.features) p.nonzero += f.weight != 0.0;
    p.train_objective = objective;
    p.apg_iterations = apg_its;
    p.gradient_evaluations = grads;
    p.model = model;
    if (settings.debias && cache != nullptr) {
      ApgOptions o = settings.base.apg;
      if (settings.debias_C > 0) o.C = settings.debias_C;
      o.eps_inner = std::min(o.eps_inner, 1e-10);
      o.max_iterations = std::max(o.max_iterations, 3000);
      DebiasResult d = debias_refit(*cache, labels, model, o, budget);
      p.debiased = std::move(d.model);
      p.has_debiased = true;
    }
    if (test) {
      p.test = evaluate_rows(*test, p.model, false, budget);
      if (p.has_debiased) p.test_debiased = evaluate_rows(*test, p.debiased, false, budget);
    }
    if (validation) {
      p.validation = evaluate_rows(*validation, p.model, false, budget);
      if (p.has_debiased) p.validation_debiased = evaluate_rows(*validation, p.debiased, false, budget);
    }
    p.seconds = elapsed();
    out.points.push_back(std::move(p));
    if (on_point) on_point(out.points.back());
  };

  auto account = [&](const TrainOutcome& t) {
    out.total_apg_iterations += t.total_apg_iterations;
    out.total_gradient_evaluations += t.total_gradient_evaluations;
  };

  if (!settings.feature_counts.empty()) {
    out.mode = "features";
    TrainSettings s = settings.base;
    s.checkpoints = settings.feature_counts;
    s.max_features = 0;
    s.eps_outer = 0;  // the counts decide where the path ends
    s.max_iterations = std::numeric_limits<int>::max();
    s.final_certificate = false;
    TrainOutcome t = train_fgm(store, s, budget, {}, [&](const Checkpoint& cp) {
      add_point(cp.model, s.B, s.apg.C, cp.last->objective, cp.apg_iterations, cp.gradient_evaluations,
                cp.cache, cp.labels);
    });
    account(t);
  } else {
    const bool by_B = !settings.B_values.empty();
    out.mode = by_B ? "B" : "C";
    size_t count = by_B ? settings.B_values.size() : settings.C_values.size();
    for (size_t i = 0; i < count; ++i) {
      TrainSettings s = settings.base;
      if (by_B) s.B = settings.B_values[i];
      else s.apg.C = settings.C_values[i];
      TrainOutcome t = train_fgm(store, s, budget);
      account(t);
      // The refit needs the selected columns: read them back from the store.
      SelectedFeatureCache cache(budget, store.info().n_rows);
      if (settings.debias) {
        cache.begin_batch();
        std::vector<uint32_t> rows;
        std::vector<float> values;
        for (const auto& f : t.model.features) {
          store.read_column(f.key.ids[0], rows, values);
          cache.add_column(f.key, rows, values);
        }
      }
      add_point(t.model, s.B, s.apg.C, t.model.objective, t.total_apg_iterations,
                t.total_gradient_evaluations, settings.debias ? &cache : nullptr, store.labels());
    }
  }

  if (validation) {
    for (size_t i = 0; i < out.points.size(); ++i) {
      const auto& p = out.points[i];
      if (out.best < 0) {
        out.best = static_cast<int>(i);
        continue;
      }
      const auto& b = out.points[static_cast<size_t>(out.best)];
      if (p.validation.accuracy > b.validation.accuracy ||
          (p.validation.accuracy == b.validation.accuracy && p.selected < b.selected))
        out.best = static_cast<int>(i);
    }
  }
  out.seconds = elapsed();
  return out;
}

}  // namespace fgm
