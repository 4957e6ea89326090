// Maps a validated Config onto the engine's settings (one place, reused by
// `fgm train` and `fgm path`).
#pragma once

#include "core/config.h"
#include "engine/fgm_trainer.h"
#include "engine/training_data.h"

namespace fgm {

enum class ConfigCommand { kTrain, kPath };

// A key the user set (file or command line) that this run would ignore: a
// configuration error naming it and `why`.
void reject_if_set(const Config& config, const std::string& key, const std::string& why);

// Keys the user set (file or command line, not defaults) that `command` would
// accept and then ignore are configuration errors naming the key and why:
// path.* and data.validation under `fgm train`, data.truth under `fgm path`,
// keys of another feature kind.
void reject_ignored_keys(const Config& config, ConfigCommand command);

// When data.train is a store, its index base and width were fixed by
// `fgm ingest`: data.index_base / data.features set to other values would be
// ignored, and are configuration errors (equal values are accepted, so one
// config serves the text file and its store).
void reject_store_mismatch(const Config& config, const StoreInfo& info);
// The same checks when data.train is a partitioned store, against its
// manifest (every rank reads it; called before any partitioned run).
void reject_partitioned_store_mismatch(const Config& config);

// Every path `command` will read or write is usable (exit 4 naming the path,
// its key and the reason otherwise), checked before any ingest or scoring
// pass. Creates engine.cache_dir when data.train is text (it will be needed).
void check_config_paths(const Config& config, ConfigCommand command);

TrainSettings train_settings_from_config(const Config& config);

// engine.threads, engine.blocks_in_flight and engine.progress, as every
// solver's streamed passes read them.
SchedulerOptions scheduler_options_from_config(const Config& config);
// apg.eps_inner, apg.eta, apg.max_iterations and engine.threads into `apg`
// (loss, C and bias are the caller's).
void read_apg_keys(const Config& config, ApgOptions& apg);
TrainingDataOptions training_data_options_from_config(const Config& config);

}  // namespace fgm
