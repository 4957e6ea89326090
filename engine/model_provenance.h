// The fields every solver's model file takes from the store it was trained on
// (width, index base, label map, checksums, input path) plus the engine version,
// the solver's name and the creation time: one place, so `fgm predict` and
// `fgm inspect` see the same provenance whichever solver wrote the model.
#pragma once

#include <string_view>

#include "io/model_file.h"
#include "io/shard_store.h"

namespace fgm {

Model model_of_store(const StoreInfo& info, std::string_view solver);

}  // namespace fgm
