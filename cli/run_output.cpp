#include "cli/run_output.h"

#include <cmath>

#include <fmt/format.h>

#include "core/messages.h"

namespace fgm::cli {

std::vector<ModelFeature> all_features(const Model& model) {
  std::vector<ModelFeature> all = model.features;
  for (const auto& c : model.classes) all.insert(all.end(), c.features.begin(), c.features.end());
  return all;
}

void write_selected_features(JsonWriter& j, const std::vector<ModelFeature>& features, int index_base) {
  j.key("selected_features").begin_array();
  for (const auto& f : features) {
    j.begin_object();
    j.key("id").value(f.key.ids[0] + static_cast<uint64_t>(index_base));
    j.key("kind").value(feature_kind_name(f.key.kind));
    if (f.key.group != UINT64_MAX) j.key("group").value(f.key.group);
    j.key("weight").value(f.weight);
    j.key("batch").value(static_cast<uint64_t>(f.batch));
    j.end_object();
  }
  j.end_array();
}

std::string csv_cell(double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : std::string(); }

void write_iteration(JsonWriter& j, const IterationRecord& r) {
  j.begin_object();
  j.key("iter").value(r.iter);
  j.key("selected").value(r.selected);
  j.key("added").value(r.added);
  j.key("objective").value(r.objective);
  j.key("rel_decrease").value(r.rel_decrease);
  j.key("sip_violation").value(r.sip_violation);
  j.key("score_seconds").value(r.score_seconds);
  j.key("solve_seconds").value(r.solve_seconds);
  j.key("bytes_streamed").value(r.bytes_streamed);
  j.key("peak_rss_bytes").value(r.peak_rss_bytes);
  j.key("candidates_scored").value(r.candidates_scored);
  j.key("pair_updates").value(r.pair_updates);
  j.key("apg_iterations").value(r.apg_iterations);
  j.key("apg_line_search_steps").value(r.apg_line_search_steps);
  j.key("apg_gradient_evaluations").value(r.apg_gradient_evaluations);
  j.key("apg_converged").value(r.apg_converged);
  j.key("apg_stop").value(r.apg_stop);
  j.key("apg_relative_gap").value(r.apg_relative_gap);
  j.key("apg_certified").value(r.apg_certified);
  j.end_object();
}

EvalResult evaluate_test_file(const Config& config, const Model& model, MemoryBudget& budget, RunWarnings& warnings) {
  EvalResult test = evaluate_file(config.get_string("data.test"), model, false, budget);
  if (test.beyond.features > 0)
    warnings.add("test_features_beyond_model",
                 msg::wider_than_model(config.get_string("data.test"), test.beyond.first_line,
                                       test.beyond.first_index + model.index_base, model.n_features));
  return test;
}

void write_config_section(JsonWriter& j, const std::map<std::string, std::string>& config) {
  j.key("config").begin_object();
  for (const auto& [k, v] : config) j.key(k).value(v);
  j.end_object();
}

void write_communication_records(JsonWriter& j, const std::vector<CommunicationRecord>& records,
                                 const std::vector<double>& class_labels) {
  j.begin_array();
  for (const auto& c : records) {
    j.begin_object();
    // A class without a label in `class_labels` is named by its index (never read past the labels).
    auto class_value = [&](int k) {
      if (k >= 0 && static_cast<size_t>(k) < class_labels.size()) j.value(class_labels[static_cast<size_t>(k)]);
      else j.value(static_cast<int64_t>(k));
    };
    if (c.class_index >= 0) {
      j.key("class");
      class_value(c.class_index);
    }
    if (!c.shared_by.empty()) {  // a scoring pass shared by these classes (lockstep)
      j.key("classes").begin_array();
      for (int k : c.shared_by) class_value(k);
      j.end_array();
    }
    j.key("iter").value(c.iteration);
    j.key("phase").value(c.phase);
    j.key("bytes").value(c.comm.bytes);
    j.key("collectives").value(c.comm.calls);
    j.key("seconds").value(c.comm.seconds);
    j.end_object();
  }
  j.end_array();
}

}  // namespace fgm::cli
