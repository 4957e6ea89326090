#include "engine/debias.h"

#include "core/error.h"

namespace fgm {

DebiasResult debias_refit(const SelectedFeatureCache& cache, const int8_t* labels,
                          const Model& selected, ApgOptions options, MemoryBudget& budget) {
  FGM_ASSERT(selected.features.size() == cache.num_columns());
  // Same columns, one batch: ½(‖ω‖)² = ½‖ω‖².
  SelectedFeatureCache single(budget, cache.n_rows());
  single.begin_batch();
  std::vector<uint32_t> rows;
  std::vector<float> values;
  for (size_t k = 0; k < cache.num_columns(); ++k) {
    SparseColumnView col = cache.column(k);
    rows.assign(col.rows, col.rows + col.nnz);
    values.assign(col.values, col.values + col.nnz);
    single.add_column(cache.key(k), rows, values);
  }
  ApgState state;
  state.b = selected.has_bias ? selected.bias : 0.0;
  for (const auto& f : selected.features) state.w.push_back(f.weight);  // warm start
  std::vector<double> decision;
  DebiasResult out;
  out.solve = solve_apg(single, labels, options, state, decision, budget);
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
