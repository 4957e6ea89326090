#include "engine/train_settings.h"

#include "core/progress.h"

namespace fgm {

TrainSettings train_settings_from_config(const Config& c) {
  TrainSettings s;
  s.B = static_cast<uint64_t>(c.get_int("fgm.B"));
  s.max_iterations = static_cast<int>(c.get_int("fgm.max_iterations"));
  s.eps_outer = c.get_float("fgm.eps_outer");
  s.final_certificate = c.get_bool("fgm.final_certificate");
  s.apg.loss = c.get_string("fgm.loss") == "logistic" ? Loss::kLogistic : Loss::kSquaredHinge;
  s.apg.C = c.get_float("fgm.C");
  s.apg.bias = c.get_bool("fgm.bias");
  s.apg.eps_inner = c.get_float("apg.eps_inner");
  s.apg.eta = c.get_float("apg.eta");
  s.apg.max_iterations = static_cast<int>(c.get_int("apg.max_iterations"));
  s.apg.threads = static_cast<int>(c.get_int("engine.threads"));
  s.scheduler.threads = s.apg.threads;
  s.scheduler.blocks_in_flight = static_cast<int>(c.get_int("engine.blocks_in_flight"));
  s.scheduler.progress = progress_enabled(parse_progress_mode(c.get_string("engine.progress")));
  s.block_bytes = c.get_bytes("engine.block_bytes");
  s.space.kind = c.get_string("features.kind");
  s.space.groups_path = c.get_string("features.groups");
  s.space.group_structure = c.get_string("features.group_structure");
  s.space.gamma = c.get_float("features.gamma");
  s.space.coef0 = c.get_float("features.coef0");
  s.space.levels = static_cast<uint32_t>(c.get_int("features.levels"));
  s.space.order = static_cast<uint32_t>(c.get_int("features.order"));
  s.space.period = c.get_float("features.period");
  s.space.kernel = c.get_string("features.kernel");
  s.max_features = static_cast<uint64_t>(c.get_int("fgm.max_features"));
  return s;
}

TrainingDataOptions training_data_options_from_config(const Config& c) {
  TrainingDataOptions o;
  o.index_base = static_cast<int>(c.get_int("data.index_base"));
  o.declared_features = static_cast<uint64_t>(c.get_int("data.features"));
  o.cache_dir = c.get_string("engine.cache_dir");
  o.max_store_bytes = c.get_bytes("store.max_bytes");
  o.threads = static_cast<int>(c.get_int("engine.threads"));
  o.progress = progress_enabled(parse_progress_mode(c.get_string("engine.progress")));
  return o;
}

}  // namespace fgm
