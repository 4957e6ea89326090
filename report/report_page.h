// `fgm report`: one self-contained HTML page (inline CSS and SVG, no scripts,
// no network) about the run logs in an output directory — the training run
// (run.json + model.fgm) and/or the path (path.json + path.csv + the chosen
// point's model).
#pragma once

#include <string>

#include "io/model_file.h"
#include "report/run_logs.h"

namespace fgm::report {

inline constexpr const char* kReportFileName = "report.html";

struct ReportSections {
  bool train = false;  // run.json, model.fgm
  bool path = false;   // path.json, path.csv, point-<n>.fgm
};

// The sections whose files `dir` holds (any one of a section's files
// selects it; the others are then required). Neither: Error(kIo).
ReportSections detect_sections(const std::string& dir);

// The page for `dir`; reads every file first, so a missing or damaged one
// throws (naming it) before anything is written.
std::string build_report_html(const std::string& dir, ReportSections sections, MemoryBudget* budget = nullptr);

// build_report_html, written atomically to <dir>/report.html; returns its path.
// With `budget` (fgm report --memory-budget) the run logs are read within it.
std::string write_report(const std::string& dir, ReportSections sections, MemoryBudget* budget = nullptr);

// Parts of the page, exposed for the tests.
// The selected features of a model: one row per feature, in model order
// (#, feature, kind, group, weight, iteration). At most `max_rows` rows, then
// a note saying how many more the model has.
std::string feature_table_html(const Model& model, size_t max_rows = 5000);
// The same for one list of features (a class of a one-vs-rest model).
std::string feature_table_html(const std::vector<ModelFeature>& features, int index_base, size_t max_rows = 5000);
// A multi-class run (log.classes non-empty) gets one part per class: its
// charts and its features from model.classes, in the same order.
std::string train_section_html(const TrainRunLog& log, const Model& model);
// The point whose features the path report lists: the chosen one (one-SE
// rule), else the best on validation, else the last.
int64_t featured_point(const PathRunLog& log);
// `model` is featured_point(log)'s model.
// `model`: the featured point's model; null when the path keeps no model files.
std::string path_section_html(const PathRunLog& log, const Model* model);
inline std::string path_section_html(const PathRunLog& log, const Model& model) {
  return path_section_html(log, &model);
}

}  // namespace fgm::report
