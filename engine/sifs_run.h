// The SIFS driver (solver = "sifs", solvers/sifs/): config -> settings, the
// store -> the problem's layout and streamed data, solutions -> linear models
// that `fgm predict` / `fgm inspect` read like FGM's (binary: w'x, decision
// > 0 is the positive label; multi-class: one class model per weight block,
// the largest w_k'x wins; no bias — problem (P) has none).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/config.h"
#include "features/block_stream.h"
#include "io/model_file.h"
#include "io/shard_store.h"
#include "solvers/sifs/sifs_path.h"

namespace fgm {

// The most points (sifs.beta_points × sifs.alpha_points) a SIFS path may have,
// as a KTA path (kta.p_step): reject_sifs_ignored_keys refuses more.
inline constexpr uint64_t kMaxSifsGridPoints = 1000000;

SifsSettings sifs_settings_from_config(const Config& config);

// sifs.* keys the command would ignore (the grid keys in fgm train, the one
// point's keys in fgm path; data.validation in fgm path) are errors naming the key;
// so is a path grid of more than kMaxSifsGridPoints.
void reject_sifs_ignored_keys(const Config& config, bool train);

// Binary on a store with two classes, multi-class (Section 5) with more.
SifsLayout sifs_layout_of(const ShardStore& store);

// A solution's weights (w: K·m over `columns` columns, their ids by
// column_id) as m's features (binary) or class models (multi-class, labelled
// by class_values), with the loss and objective.
void set_sifs_weights(Model& m, const SifsLayout& layout, const std::vector<double>& class_values, uint64_t columns,
                      const std::function<uint64_t(uint64_t)>& column_id, const SifsReference& solution,
                      double objective);

// The data a SIFS run solves on, wherever its rows live: one store
// (open_sifs_store) or this rank's partitions (engine/distributed_sifs.h
// open_sifs_partitions).
class SifsBackend {
 public:
  virtual ~SifsBackend() = default;
  // A solver of `settings` over the data (one store: its data opened for
  // settings.screening, the previous solver's closed first).
  virtual std::unique_ptr<SifsSolver> solver(const SifsSettings& settings) = 0;
  virtual SifsPasses& passes() = 0;                  // the last solver's: layout, weights, coordinates
  virtual SifsPassCounters counters() const = 0;     // the passes since the last solver() began
  virtual bool holds_columns() const { return false; }  // the nonzeros held column-major
  virtual Model model(const SifsReference& solution, double objective) const = 0;
  // A partitioned run records its communication since the last record as phase `phase` of step `step`.
  virtual void record(int /*step*/, const char* /*phase*/) {}
};

// One store's data: stream and block plan from engine.* keys. With
// screening (mode != none), nonzeros that fit in half the free budget are
// held column-major in memory for every pass (SifsData::hold_columns);
// otherwise, and for the baseline (mode = none, which holds its whole
// problem row-major after one extraction), a store that fits in half the
// free budget keeps its pages resident between the passes (as FGM's does,
// reserving what the resident stream may hold); a larger one is streamed
// block by block each pass.
std::unique_ptr<SifsBackend> open_sifs_store(const ShardStore& store, const Config& config, MemoryBudget& budget);

}  // namespace fgm
