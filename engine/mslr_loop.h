// The one MSLR cutting-plane loop (engine/mslr_trainer.h) over a data
// backend: the single store (engine/mslr_trainer.cpp) or this rank's
// partitions (engine/distributed_mslr.cpp). The loop owns the constraint
// choice, the stop rules, resume, path points and the model; the backend
// owns the rows: α and C − α, the selected columns, the scoring pass and the
// subproblem's solve with its row-sum reduction.
#pragma once

#include <cstdint>
#include <vector>

#include "cache/selected_features.h"
#include "engine/mslr_trainer.h"
#include "features/feature_space.h"

namespace fgm {

class MslrRows {
 public:
  virtual ~MslrRows() = default;
  // c = Σ_i α_i y_i x_i: the selected columns' c_j (`selected_c`, column
  // order) and the top-`batch` unselected features by c_j².
  virtual std::vector<ScoredCandidate> score(uint64_t batch, std::vector<double>& selected_c,
                                             uint64_t& bytes_streamed) = 0;
  // The features' columns as a new batch (one column each).
  virtual void add_batch(const std::vector<uint64_t>& ids) = 0;
  // The subproblem (9) over the constraints (selected-column positions),
  // Newton warm-started at `warm_mu`; updates α and C − α.
  virtual mslr::MinimaxResult solve(const std::vector<std::vector<uint32_t>>& constraints,
                                    const std::vector<double>& warm_mu) = 0;
  virtual const SelectedFeatureCache& columns() const = 0;
  // α and C − α of a resume state (this process's rows), checked, and back.
  virtual void restore_duals(const MslrState& state) = 0;
  virtual void save_duals(MslrState& state) const = 0;
  // The data's part of the model: store provenance and the space's description.
  virtual Model model_frame() const = 0;
  virtual void record_transforms(Model&) const {}
  // The rows with a label (each adds C·ln 2 to P at w = 0).
  virtual uint64_t fit_rows() const = 0;
  // The final model's decision values to the caller's hook (one store only).
  virtual void hand_out_decisions(const std::vector<double>& weights, const MslrHooks& hooks) const {}
  // The communication log of a partitioned run (FgmRows's).
  virtual void begin_phase() {}
  virtual void end_phase(int iteration, const char* phase) {}
};

MslrOutcome run_mslr(MslrRows& rows, const MslrSettings& settings, MemoryBudget& budget, const MslrHooks& hooks);

}  // namespace fgm
