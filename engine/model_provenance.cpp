#include "engine/model_provenance.h"

#include <ctime>
#include <string>

namespace fgm {

Model model_of_store(const StoreInfo& info, std::string_view solver) {
  Model m;
  m.engine_version = FGM_VERSION;
  m.solver = std::string(solver);
  m.n_features = info.n_features;
  m.index_base = info.index_base;
  m.positive_label = info.positive_value;
  m.negative_label = info.negative_value;
  m.store_checksum = info.store_checksum;
  m.input_checksum = info.input_checksum;
  m.input_path = info.input_path;
  m.created_unix = static_cast<int64_t>(std::time(nullptr));
  return m;
}

Model model_of_partitioned_store(const PartitionManifest& manifest, double negative_label, double positive_label,
                                 std::string_view solver) {
  Model m;
  m.engine_version = FGM_VERSION;
  m.solver = std::string(solver);
  m.n_features = manifest.n_features;
  m.index_base = manifest.index_base;
  m.positive_label = positive_label;
  m.negative_label = negative_label;
  m.input_checksum = manifest.input_checksum;
  m.input_path = manifest.input_path;
  return m;
}

}  // namespace fgm
