// The fields every solver's model file takes from the store it was trained on
// (width, index base, label map, checksums, input path) plus the engine version,
// the solver's name and the creation time: one place, so `fgm predict` and
// `fgm inspect` see the same provenance whichever solver wrote the model.
#pragma once

#include <string_view>

#include "io/model_file.h"
#include "io/partitioned_store.h"
#include "io/shard_store.h"

namespace fgm {

Model model_of_store(const StoreInfo& info, std::string_view solver);

// The same for a model trained on a partitioned store: its manifest's width,
// index base, input checksum and path, and the label map of all partitions
// (no store checksum: each partition has its own). No creation time either, so
// the model files of a run on any rank count are the same bytes.
Model model_of_partitioned_store(const PartitionManifest& manifest, double negative_label, double positive_label,
                                 std::string_view solver);

}  // namespace fgm
