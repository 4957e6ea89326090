// Maps a validated Config onto the engine's settings (one place, reused by
// `fgm train` and `fgm path`).
#pragma once

#include "core/config.h"
#include "engine/fgm_trainer.h"
#include "engine/training_data.h"

namespace fgm {

TrainSettings train_settings_from_config(const Config& config);
TrainingDataOptions training_data_options_from_config(const Config& config);

}  // namespace fgm
