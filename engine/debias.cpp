#include "engine/debias.h"

#include <memory>

#include "core/error.h"

namespace fgm {

namespace {

// The columns `keep` names, in one batch: ½(‖ω‖)² = ½‖ω‖².
std::unique_ptr<SelectedFeatureCache> single_batch_copy(const SelectedFeatureCache& cache,
                                                        const std::vector<size_t>& keep, MemoryBudget& budget) {
  auto single = std::make_unique<SelectedFeatureCache>(budget, cache.n_rows());
  single->begin_batch();
  for (size_t k : keep) single->add_column_copy(cache, k);
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
  // Only the features the selection left a nonzero weight are refit: a
  // selected feature at 0 is not part of the model being de-biased (issue 23
  // item 17), and the refit must not bring it back.
  std::vector<size_t> keep;
  for (size_t k = 0; k < selected.features.size(); ++k)
    if (selected.features[k].weight != 0.0) keep.push_back(k);
  std::vector<std::unique_ptr<SelectedFeatureCache>> singles;
  std::vector<std::vector<double>> decisions(parts.size());
  std::vector<ApgRowPart> single_parts;
  for (size_t q = 0; q < parts.size(); ++q) {
    FGM_ASSERT(selected.features.size() == parts[q].cache->num_columns());
    singles.push_back(single_batch_copy(*parts[q].cache, keep, budget));
    single_parts.push_back({singles.back().get(), parts[q].labels, &decisions[q]});
  }
  ApgState state;
  state.b = selected.has_bias ? selected.bias : 0.0;
  for (size_t k : keep) state.w.push_back(selected.features[k].weight);  // warm start
  DebiasResult out;
  out.solve = solve_apg(single_parts, reduction, options, state, budget);
  out.model = selected;
  out.model.features.clear();
  for (size_t j = 0; j < keep.size(); ++j) {
    out.model.features.push_back(selected.features[keep[j]]);
    out.model.features.back().weight = state.w[j];
  }
  out.model.bias = options.bias ? state.b : 0.0;
  out.model.has_bias = options.bias;
  out.model.C = options.C;
  out.model.objective = out.solve.objective;
  out.model.config["debiased"] = "true";
  return out;
}

}  // namespace fgm
