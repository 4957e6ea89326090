#include "engine/debias.h"

#include <memory>

#include "core/error.h"

namespace fgm {

namespace {

// The same columns in one batch: ½(‖ω‖)² = ½‖ω‖².
std::unique_ptr<SelectedFeatureCache> single_batch_copy(const SelectedFeatureCache& cache, MemoryBudget& budget) {
  auto single = std::make_unique<SelectedFeatureCache>(budget, cache.n_rows());
  single->begin_batch();
  for (size_t k = 0; k < cache.num_columns(); ++k) single->add_column_copy(cache, k);
  return single;
}

}  // namespace

DebiasResult debias_refit(const SelectedFeatureCache& cache, const int8_t* labels,
                          const Model& selected, ApgOptions options, MemoryBudget& budget) {
  LocalRowSums local;
  return debias_refit({ApgRowPart{&cache, labels, nullptr}}, local, selected, options, budget);
}

DebiasResult debias_refit(const std::vector<ApgRowPart>& parts, RowSumReduction& reduction, const Model& selected,
                          ApgOptions options, MemoryBudget& budget) {
  std::vector<std::unique_ptr<SelectedFeatureCache>> singles;
  std::vector<std::vector<double>> decisions(parts.size());
  std::vector<ApgRowPart> single_parts;
  for (size_t q = 0; q < parts.size(); ++q) {
    FGM_ASSERT(selected.features.size() == parts[q].cache->num_columns());
    singles.push_back(single_batch_copy(*parts[q].cache, budget));
    single_parts.push_back({singles.back().get(), parts[q].labels, &decisions[q]});
  }
  ApgState state;
  state.b = selected.has_bias ? selected.bias : 0.0;
  for (const auto& f : selected.features) state.w.push_back(f.weight);  // warm start
  DebiasResult out;
  out.solve = solve_apg(single_parts, reduction, options, state, budget);
  out.model = selected;
  for (size_t k = 0; k < out.model.features.size(); ++k) out.model.features[k].weight = state.w[k];
  out.model.bias = options.bias ? state.b : 0.0;
  out.model.has_bias = options.bias;
  out.model.C = options.C;
  out.model.objective = out.solve.objective;
  out.model.config["debiased"] = "true";
  return out;
}

}  // namespace fgm
