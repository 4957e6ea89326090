// fgm predict, fgm inspect
#include <map>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/run_output.h"
#include "core/atomic_file.h"
#include "core/hash.h"
#include "core/json_writer.h"
#include "core/messages.h"
#include "core/path_checks.h"
#include "engine/evaluate.h"
#include "io/libsvm_reader.h"
#include "io/model_file.h"

namespace fgm::cli {
namespace {

void write_features(JsonWriter& j, const std::vector<ModelFeature>& features, uint64_t base) {
  j.key("features").begin_array();
  for (const auto& f : features) {
    j.begin_object();
    j.key("id").value(f.key.ids[0] + base);
    j.key("kind").value(feature_kind_name(f.key.kind));
    j.key("ids").begin_array();
    j.value(f.key.ids[0] + base);
    if (f.key.kind == FeatureKind::kCross) j.value(f.key.ids[1] + base);
    j.end_array();
    if (f.key.kind == FeatureKind::kHik || f.key.kind == FeatureKind::kAdditive)
      j.key("level").value(static_cast<uint64_t>(f.key.level));
    if (f.key.group != UINT64_MAX) j.key("group").value(f.key.group);
    j.key("weight").value(f.weight);
    j.key("batch").value(static_cast<uint64_t>(f.batch));
    j.end_object();
  }
  j.end_array();
}

// A kernel SVM: its selected features with kernel weights and bandwidths,
// the support vectors' dual coefficients (the vectors themselves: their count).
void write_kernel_svm(JsonWriter& j, const KernelSvm& k, uint64_t base) {
  j.key("kernel_svm").begin_object();
  j.key("kernel").value(k.kernel);
  j.key("decision").value("sum_s dual_coefs[s] * sum_j kernel_weight_j * exp(-(x_j - sv_sj)^2 / (2 bandwidth_j^2)) - bias");
  j.key("training_rows").value(k.training_rows);
  j.key("support_vectors").value(static_cast<uint64_t>(k.n_support()));
  j.key("features").begin_array();
  for (size_t i = 0; i < k.feature_ids.size(); ++i) {
    j.begin_object();
    j.key("id").value(k.feature_ids[i] + base);
    j.key("kernel_weight").value(k.kernel_weights[i]);
    j.key("bandwidth").value(k.bandwidths[i]);
    j.end_object();
  }
  j.end_array();
  j.key("dual_coefs").begin_array();
  for (double c : k.dual_coefs) j.value(c);
  j.end_array();
  j.end_object();
}

// `rows` lines of at most `line_bytes` each (`line(i)`), their text reserved
// from the budget, written atomically to `path`.
template <class Line>
void write_score_file(const std::string& path, size_t rows, uint64_t line_bytes, MemoryBudget& budget,
                      const char* remedy, const Line& line) {
  Reservation text_mem = budget.reserve(rows * line_bytes, "score file text", remedy);
  std::string text;
  text.reserve(rows * line_bytes);
  for (size_t i = 0; i < rows; ++i) text += line(i);
  write_file_atomic(path, text);
}

// fgm predict --unlabelled: predicted labels and decision values, no metrics.
int predict_unlabelled(const std::string& input, const std::string& out, const Model& model, MemoryBudget& budget) {
  Reservation predictions_mem;
  const Predictions p = predict_file(input, model, budget, predictions_mem);
  if (p.beyond.features > 0)
    spdlog::warn("{}", msg::wider_than_model(input, p.beyond.first_line, p.beyond.first_index + model.index_base,
                                             model.n_features));
  std::map<double, uint64_t> counts;
  for (double label : p.labels) ++counts[label];
  // A label (at most 24 characters) and "{:.9g}" (at most 16), a space and a newline.
  if (!out.empty())
    write_score_file(out, p.labels.size(), 42, budget, "write scores for a smaller file",
                     [&](size_t i) { return label_text(p.labels[i]) + fmt::format(" {:.9g}\n", p.decisions[i]); });
  fmt::print("rows={}", p.labels.size());
  for (const auto& [label, count] : counts) fmt::print(" predicted[{}]={}", label_text(label), count);
  fmt::print("\n");
  return 0;
}

}  // namespace

Command add_predict(CLI::App& app) {
  auto* sub = app.add_subcommand("predict", "score LIBSVM text with a model; prints accuracy= and auc=");
  struct Args {
    std::string model, input, out;
    std::string memory_budget = "1GB";
    bool unlabelled = false;
  };
  auto args = std::make_shared<Args>();
  sub->add_option("--model", args->model, "model.fgm written by fgm train")->required();
  sub->add_option("input", args->input, "LIBSVM/svmlight file (plain/gz/bz2/xz)")->required();
  sub->add_option("--out", args->out,
                  "write one decision value per line here (a one-vs-rest model: the predicted label)");
  sub->add_option("--memory-budget", args->memory_budget, "peak memory for scores, e.g. 256MB")
      ->capture_default_str();
  sub->add_flag("--unlabelled", args->unlabelled,
                "the rows have no labels: each row's first token is a placeholder (e.g. 0) and is ignored; "
                "--out gets 'predicted_label decision_value' per line; no accuracy or AUC");
  return {sub, [args]() {
            MemoryBudget budget(parse_byte_size(args->memory_budget, "--memory-budget"), "--memory-budget");
            check_input_file(args->model, "--model");
            check_input_file(args->input, "input");
            if (!args->out.empty()) check_output_file(args->out, "--out");
            // A kernel SVM's support vectors are held within the budget.
            Reservation kernel_mem;
            Model model = read_model(args->model, budget, kernel_mem);
            if (args->unlabelled) return predict_unlabelled(args->input, args->out, model, budget);
            Reservation scores_mem;
            EvalResult r = evaluate_file(args->input, model, !args->out.empty(), budget, &scores_mem);
            if (r.beyond.features > 0)
              spdlog::warn("{}", msg::wider_than_model(args->input, r.beyond.first_line,
                                                       r.beyond.first_index + model.index_base,
                                                       model.n_features));
            // "{:.9g}\n" is at most 17 characters ("-1.23456789e-100\n"); a one-vs-rest
            // model writes the predicted original label.
            if (!args->out.empty())
              write_score_file(args->out, r.scores.size(), 17, budget, "write scores for a smaller test file",
                               [&](size_t i) {
                                 return model.multiclass() ? label_text(r.scores[i]) + "\n"
                                                           : fmt::format("{:.9g}\n", r.scores[i]);
                               });
            fmt::print("accuracy={:.6f} auc={:.6f} rows={}\n", r.accuracy, r.auc, r.rows);
            return 0;
          }};
}

Command add_inspect(CLI::App& app) {
  auto* sub = app.add_subcommand("inspect", "print a model as JSON: selected features, weights (or kernel SVM), provenance");
  auto path = std::make_shared<std::string>();
  sub->add_option("model", *path, "model.fgm")->required();
  return {sub, [path]() {
            check_input_file(*path, "model");
            Model m = read_model(*path);
            JsonWriter j;
            j.begin_object();
            j.key("engine_version").value(m.engine_version);
            j.key("solver").value(m.solver);
            j.key("feature_kind").value(m.feature_kind);
            j.key("loss").value(m.loss);
            j.key("C").value(m.C);
            j.key("B").value(m.B);
            j.key("iterations").value(static_cast<uint64_t>(m.iterations));
            j.key("bias").value(m.bias);
            j.key("has_bias").value(m.has_bias);
            j.key("objective").value(m.objective);
            j.key("n_features").value(m.n_features);
            j.key("index_base").value(m.index_base);
            j.key("labels").begin_object();
            j.key("positive").value(m.positive_label);
            j.key("negative").value(m.negative_label);
            j.end_object();
            j.key("provenance").begin_object();
            j.key("input_path").value(m.input_path);
            j.key("input_checksum").value(hex64(m.input_checksum));
            j.key("store_checksum").value(hex64(m.store_checksum));
            j.key("created_unix").value(m.created_unix);
            j.end_object();
            if (!m.transforms.empty()) {  // features.transform, in the order applied
              j.key("transforms").begin_array();
              for (const auto& t : m.transforms) {
                j.begin_object();
                j.key("name").value(t.name);
                if (!t.ids.empty() || t.absent_factor != 1.0) {
                  j.key("recorded_factors").value(static_cast<uint64_t>(t.ids.size()));
                  j.key("absent_factor").value(t.absent_factor);
                }
                j.end_object();
              }
              j.end_array();
            }
            const uint64_t base = static_cast<uint64_t>(m.index_base);
            write_features(j, m.features, base);
            if (m.has_kernel_svm()) write_kernel_svm(j, m.kernel_svm, base);
            if (m.multiclass()) {
              j.key("classes").begin_array();
              for (const auto& c : m.classes) {
                j.begin_object();
                j.key("label").value(c.label);
                j.key("bias").value(c.bias);
                j.key("objective").value(c.objective);
                j.key("iterations").value(static_cast<uint64_t>(c.iterations));
                write_features(j, c.features, base);
                j.end_object();
              }
              j.end_array();
            }
            write_config_section(j, m.config);
            j.end_object();
            fmt::print("{}\n", j.str());
            return 0;
          }};
}

}  // namespace fgm::cli
