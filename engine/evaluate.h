// Scores LIBSVM text row by row with a model (compressed input too) and
// computes accuracy and AUC. Test labels are mapped with the model's label map.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "io/libsvm_reader.h"
#include "core/memory_budget.h"
#include "io/model_file.h"

namespace fgm {

struct EvalResult {
  uint64_t rows = 0;
  uint64_t positives = 0;
  double accuracy = std::numeric_limits<double>::quiet_NaN();
  double auc = std::numeric_limits<double>::quiet_NaN();  // NaN when one class is absent
  uint64_t ignored_features = 0;  // features beyond the model's width
  uint64_t first_ignored_line = 0, first_ignored_index = 0;
  std::vector<double> scores;     // decision values, when keep_scores
};

// AUC with ties counted as one half (Mann–Whitney), labels ±1.
double area_under_roc(const std::vector<double>& scores, const std::vector<int8_t>& labels);

// Labelled rows held in memory (for evaluating many models on one file).
struct LabeledRows {
  std::vector<int8_t> labels;      // ±1 under the model's label map
  std::vector<uint64_t> row_ptr{0};
  std::vector<uint64_t> indices;   // 0-based, increasing within a row
  std::vector<float> values;
  uint64_t ignored_features = 0, first_ignored_line = 0, first_ignored_index = 0;
  size_t rows() const { return labels.size(); }
};

// Reads `path` with the label map and width of `model` (bytes reserved from budget).
LabeledRows load_labeled_rows(const std::string& path, const Model& model, MemoryBudget& budget,
                              Reservation& reservation);
// Scores and the AUC's rank order (16 bytes per row) are reserved from `budget`.
EvalResult evaluate_rows(const LabeledRows& rows, const Model& model, bool keep_scores,
                         MemoryBudget& budget);

// Evaluates `path`. Features beyond model.n_features are ignored (counted; the
// caller warns once). A label that is neither of the model's labels is an error.
// Labels, scores and the AUC's rank order are reserved from `budget`; with
// keep_scores, `scores_memory` (if given) keeps the reservation of r.scores.
EvalResult evaluate_file(const std::string& path, const Model& model, bool keep_scores,
                         MemoryBudget& budget, Reservation* scores_memory = nullptr);

}  // namespace fgm
