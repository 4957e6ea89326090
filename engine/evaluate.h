// Scores LIBSVM text row by row with a model (compressed input too) and
// computes accuracy and AUC. Test labels are mapped with the model's label map.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "io/libsvm_reader.h"
#include "core/memory_budget.h"
#include "io/model_file.h"

namespace fgm {

// Features of a file beyond the model's width, ignored: how many, and the
// first one's line and 0-based index (the caller warns once).
struct BeyondWidth {
  uint64_t features = 0, first_line = 0, first_index = 0;
};

struct EvalResult {
  uint64_t rows = 0;
  uint64_t positives = 0;
  double accuracy = std::numeric_limits<double>::quiet_NaN();
  double auc = std::numeric_limits<double>::quiet_NaN();  // NaN when one class is absent
  BeyondWidth beyond;
  std::vector<double> scores;     // decision values, when keep_scores
  // One-vs-rest models: `auc` is the macro AUC (mean over classes of the AUC
  // of class k's decision values, class k against the rest; classes absent
  // from the file, or the only one present, are left out), `positives` 0,
  // and with keep_scores `scores` holds the predicted original labels.
  std::vector<double> class_auc;  // per class; NaN when left out of the mean
};

// The class with the largest decision value; a tie goes to the smaller class
// index. `decisions` has `classes` entries.
size_t argmax_class(const double* decisions, size_t classes);

// Macro AUC of one-vs-rest decision values: `decisions` row-major n × K,
// `truth` the class index of each row. Fills per_class (if given) with each
// class's AUC (NaN when the class is absent or the only one present).
double macro_auc(const std::vector<double>& decisions, const std::vector<uint16_t>& truth,
                 size_t classes, std::vector<double>* per_class = nullptr);

// AUC with ties counted as one half (Mann–Whitney), labels ±1. NaN when a
// score is NaN or one label is absent.
double area_under_roc(const std::vector<double>& scores, const std::vector<int8_t>& labels);

// Labelled rows held in memory (for evaluating many models on one file).
struct LabeledRows {
  std::string path;                // the file read (for messages)
  std::vector<int8_t> labels;      // ±1 under the model's label map
  std::vector<uint64_t> lines;     // 1-based line of each row
  std::vector<uint64_t> row_ptr{0};
  std::vector<uint64_t> indices;   // 0-based, increasing within a row
  std::vector<float> values;
  BeyondWidth beyond;
  size_t rows() const { return labels.size(); }
};

// Reads `path` with the label map and width of `model` (bytes reserved from budget).
LabeledRows load_labeled_rows(const std::string& path, const Model& model, MemoryBudget& budget,
                              Reservation& reservation);
// Scores and the AUC's rank order (16 bytes per row) are reserved from `budget`.
EvalResult evaluate_rows(const LabeledRows& rows, const Model& model, bool keep_scores,
                         MemoryBudget& budget);

// Evaluates `path` (binary or one-vs-rest model); features beyond
// model.n_features are ignored (r.beyond). A label that is neither of the model's labels is an error.
// Labels, scores and the AUC's rank order are reserved from `budget`; with
// keep_scores, `scores_memory` (if given) keeps the reservation of r.scores.
EvalResult evaluate_file(const std::string& path, const Model& model, bool keep_scores,
                         MemoryBudget& budget, Reservation* scores_memory = nullptr);

// Unlabelled rows (fgm predict --unlabelled): each row's label token is read
// and ignored (a placeholder such as 0). Per row, the predicted original
// label and, for a binary model, the decision value (one-vs-rest: the
// winning class's decision value). 16 bytes per row reserved in `memory`.
struct Predictions {
  std::vector<double> labels;     // predicted original labels
  std::vector<double> decisions;  // decision value behind each prediction
  BeyondWidth beyond;
};
Predictions predict_file(const std::string& path, const Model& model, MemoryBudget& budget, Reservation& memory);

}  // namespace fgm
