#include "engine/evaluate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"
#include "core/messages.h"
#include "features/model_scorer.h"

namespace fgm {

double area_under_roc(const std::vector<double>& scores, const std::vector<int8_t>& labels) {
  const size_t n = scores.size();
  // A NaN has no rank: sorting with it is undefined and the tie walk below
  // would never pass it. ±inf rank as the extremes they are.
  for (double s : scores)
    if (std::isnan(s)) return std::numeric_limits<double>::quiet_NaN();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  double rank_sum = 0;  // sum of (1-based, tie-averaged) ranks of positives
  uint64_t pos = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && scores[order[j]] == scores[order[i]]) ++j;
    double avg_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    for (size_t k = i; k < j; ++k)
      if (labels[order[k]] > 0) {
        rank_sum += avg_rank;
        ++pos;
      }
    i = j;
  }
  uint64_t neg = n - pos;
  if (pos == 0 || neg == 0) return std::numeric_limits<double>::quiet_NaN();
  double p = static_cast<double>(pos);
  return (rank_sum - p * (p + 1) / 2.0) / (p * static_cast<double>(neg));
}

size_t argmax_class(const double* decisions, size_t classes) {
  size_t best = 0;
  for (size_t k = 1; k < classes; ++k)
    if (decisions[k] > decisions[best]) best = k;
  return best;
}

double macro_auc(const std::vector<double>& decisions, const std::vector<uint16_t>& truth,
                 size_t classes, std::vector<double>* per_class) {
  const size_t n = truth.size();
  FGM_ASSERT(decisions.size() == n * classes);
  std::vector<double> scores(n);
  std::vector<int8_t> labels(n);
  double sum = 0;
  size_t counted = 0;
  if (per_class) per_class->assign(classes, std::numeric_limits<double>::quiet_NaN());
  for (size_t k = 0; k < classes; ++k) {
    for (size_t i = 0; i < n; ++i) {
      scores[i] = decisions[i * classes + k];
      labels[i] = truth[i] == k ? 1 : -1;
    }
    double auc = area_under_roc(scores, labels);
    if (per_class) (*per_class)[k] = auc;
    if (std::isnan(auc)) continue;
    sum += auc;
    ++counted;
  }
  return counted ? sum / static_cast<double>(counted) : std::numeric_limits<double>::quiet_NaN();
}

namespace {

int8_t map_label(const std::string& path, const SparseRow& row, const Model& model) {
  if (row.label == model.positive_label) return 1;
  if (row.label == model.negative_label) return -1;
  throw Error(ErrorKind::kInvalidInput,
              msg::location(path, row.line, 1) +
                  fmt::format("label {} is neither of the model's labels ({} -> +1, {} -> -1)",
                              label_text(row.label), label_text(model.positive_label),
                              label_text(model.negative_label)));
}

ReaderOptions reader_options_for(const Model& model, const MemoryBudget& budget) {
  ReaderOptions opt;
  opt.max_line_bytes = max_line_bytes_for(budget.limit());
  opt.max_line_key = budget.limit_key();
  opt.index_base = model.index_base;
  opt.declared_features = model.n_features;
  opt.ignore_beyond_declared = true;
  return opt;
}

// scorer.decision of one row; a decision value that is not finite (a
// transform or the weighted sum overflowed) is an error naming the row and
// the features, never a score that would poison the AUC and accuracy.
double checked_decision(const ModelScorer& scorer, const std::string& path, uint64_t line, const uint64_t* indices,
                        const float* values, size_t nnz) {
  const double d = scorer.decision(indices, values, nnz);
  if (!std::isfinite(d))
    throw Error(ErrorKind::kInvalidInput,
                msg::non_finite_decision(path, line, d, scorer.non_finite_cause(indices, values, nnz)));
  return d;
}

BeyondWidth beyond_width(const LibsvmReader& reader) {
  return {reader.beyond_declared(), reader.first_beyond_line(), reader.first_beyond_index()};
}

constexpr const char* kEvalPurpose = "evaluation scores";
constexpr const char* kEvalRemedy = "evaluate a smaller test file";

EvalResult finish(std::vector<double>& scores, const std::vector<int8_t>& labels, bool keep_scores,
                  MemoryBudget& budget) {
  EvalResult r;
  // area_under_roc sorts an index vector of n entries.
  Reservation order_mem = budget.reserve(scores.size() * sizeof(size_t), "AUC rank order", kEvalRemedy);
  r.rows = scores.size();
  uint64_t correct = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    if ((scores[i] > 0 ? 1 : -1) == labels[i]) ++correct;
    if (labels[i] > 0) ++r.positives;
  }
  r.accuracy = r.rows ? static_cast<double>(correct) / static_cast<double>(r.rows) : r.accuracy;
  r.auc = area_under_roc(scores, labels);
  if (keep_scores) r.scores = std::move(scores);
  return r;
}

uint16_t map_class(const std::string& path, const SparseRow& row, const Model& model) {
  for (size_t k = 0; k < model.classes.size(); ++k)
    if (row.label == model.classes[k].label) return static_cast<uint16_t>(k);
  std::string known;
  for (const auto& c : model.classes) known += (known.empty() ? "" : ", ") + label_text(c.label);
  throw Error(ErrorKind::kInvalidInput,
              msg::location(path, row.line, 1) +
                  fmt::format("label {} is none of the model's classes ({})",
                              label_text(row.label), known));
}

// Every row of `path`, read with the model's label map and width:
// `on_row(row, decisions)` gets each row with its decision values (one per
// scorer; with `checked`, a value that is not finite is an error). The
// caller's per-row vectors grow by doubling in `grow(capacity)`, `memory`
// covering `row_bytes` per row of the old and the new buffers while they are
// copied. An empty file is an error.
template <class Grow, class OnRow>
BeyondWidth scan_rows(const std::string& path, const Model& model, MemoryBudget& budget, Reservation& memory,
                      uint64_t row_bytes, bool checked, Grow grow, OnRow on_row) {
  std::vector<Model> class_models;  // one-vs-rest: one scorer per class
  for (size_t k = 0; k < model.classes.size(); ++k) class_models.push_back(class_model(model, k));
  std::vector<ModelScorer> scorers;
  if (!model.multiclass()) scorers.emplace_back(model);
  for (const auto& m : class_models) scorers.emplace_back(m);
  LibsvmReader reader(path, reader_options_for(model, budget));
  std::vector<double> decisions(scorers.size());
  uint64_t rows = 0, capacity = 0;
  SparseRow row;
  while (reader.next(row)) {
    if (rows == capacity) {
      const uint64_t old_capacity = capacity;
      capacity = std::max<uint64_t>(4096, 2 * old_capacity);
      memory.resize((old_capacity + capacity) * row_bytes);
      grow(capacity);
      memory.resize(capacity * row_bytes);
    }
    for (size_t k = 0; k < decisions.size(); ++k)
      decisions[k] = checked ? checked_decision(scorers[k], path, row.line, row.indices.data(),
                                                row.values.data(), row.indices.size())
                             : scorers[k].decision(row.indices.data(), row.values.data(), row.indices.size());
    on_row(row, decisions);
    ++rows;
  }
  if (rows == 0) throw Error(ErrorKind::kInvalidInput, msg::empty_input(path));
  return beyond_width(reader);
}

// One-vs-rest: K decision values per row (n·K doubles and the class of each
// row reserved from the budget); the prediction is their argmax.
EvalResult evaluate_multiclass_file(const std::string& path, const Model& model, bool keep_scores,
                                    MemoryBudget& budget, Reservation* scores_memory) {
  const size_t K = model.classes.size();
  Reservation mem = budget.reserve(0, kEvalPurpose, kEvalRemedy);
  std::vector<double> decisions;
  std::vector<uint16_t> truth;
  EvalResult r;
  r.beyond = scan_rows(
      path, model, budget, mem, K * sizeof(double) + sizeof(uint16_t), true,
      [&](uint64_t capacity) {
        decisions.reserve(capacity * K);
        truth.reserve(capacity);
      },
      [&](const SparseRow& row, const std::vector<double>& d) {
        truth.push_back(map_class(path, row, model));
        decisions.insert(decisions.end(), d.begin(), d.end());
      });
  r.rows = truth.size();
  Reservation auc_mem = budget.reserve(r.rows * (sizeof(size_t) + sizeof(double) + 1),
                                       "AUC rank order", kEvalRemedy);
  uint64_t correct = 0;
  if (keep_scores) r.scores.reserve(r.rows);
  for (size_t i = 0; i < r.rows; ++i) {
    size_t predicted = argmax_class(decisions.data() + i * K, K);
    correct += predicted == truth[i];
    if (keep_scores) r.scores.push_back(model.classes[predicted].label);
  }
  r.accuracy = static_cast<double>(correct) / static_cast<double>(r.rows);
  r.auc = macro_auc(decisions, truth, K, &r.class_auc);
  if (keep_scores && scores_memory) *scores_memory = std::move(mem);
  return r;
}

}  // namespace

LabeledRows load_labeled_rows(const std::string& path, const Model& model, MemoryBudget& budget,
                              Reservation& reservation) {
  LibsvmReader reader(path, reader_options_for(model, budget));
  reservation = budget.reserve(0, "evaluation rows in memory", "evaluate a smaller test file");
  LabeledRows out;
  out.path = path;
  SparseRow row;
  while (reader.next(row)) {
    out.labels.push_back(map_label(path, row, model));
    out.lines.push_back(row.line);
    out.indices.insert(out.indices.end(), row.indices.begin(), row.indices.end());
    out.values.insert(out.values.end(), row.values.begin(), row.values.end());
    out.row_ptr.push_back(out.indices.size());
    uint64_t bytes = out.indices.capacity() * 8 + out.values.capacity() * 4 +
                     out.row_ptr.capacity() * 8 + out.labels.capacity() + out.lines.capacity() * 8;
    if (bytes > reservation.bytes()) reservation.resize(bytes + bytes / 4);
  }
  if (out.rows() == 0) throw Error(ErrorKind::kInvalidInput, msg::empty_input(path));
  out.beyond = beyond_width(reader);
  return out;
}

EvalResult evaluate_rows(const LabeledRows& rows, const Model& model, bool keep_scores,
                         MemoryBudget& budget) {
  const std::string path = rows.path.empty() ? "evaluation rows" : rows.path;
  ModelScorer scorer(model);
  Reservation scores_mem = budget.reserve(rows.rows() * sizeof(double), kEvalPurpose, kEvalRemedy);
  std::vector<double> scores(rows.rows());
  for (size_t i = 0; i < rows.rows(); ++i) {
    uint64_t b = rows.row_ptr[i], e = rows.row_ptr[i + 1];
    scores[i] = checked_decision(scorer, path, rows.lines.empty() ? 0 : rows.lines[i], rows.indices.data() + b,
                                 rows.values.data() + b, e - b);
  }
  EvalResult r = finish(scores, rows.labels, keep_scores, budget);
  r.beyond = rows.beyond;
  return r;
}

EvalResult evaluate_file(const std::string& path, const Model& model, bool keep_scores,
                         MemoryBudget& budget, Reservation* scores_memory) {
  if (model.multiclass())
    return evaluate_multiclass_file(path, model, keep_scores, budget, scores_memory);
  Reservation mem = budget.reserve(0, kEvalPurpose, kEvalRemedy);
  std::vector<double> scores;
  std::vector<int8_t> labels;
  const BeyondWidth beyond = scan_rows(
      path, model, budget, mem, sizeof(double) + sizeof(int8_t), true,
      [&](uint64_t capacity) {
        scores.reserve(capacity);
        labels.reserve(capacity);
      },
      [&](const SparseRow& row, const std::vector<double>& d) {
        labels.push_back(map_label(path, row, model));
        scores.push_back(d[0]);
      });
  EvalResult r = finish(scores, labels, keep_scores, budget);
  if (keep_scores && scores_memory) *scores_memory = std::move(mem);
  r.beyond = beyond;
  return r;
}

Predictions predict_file(const std::string& path, const Model& model, MemoryBudget& budget, Reservation& memory) {
  memory = budget.reserve(0, "predictions", "predict a smaller file");
  Predictions out;
  out.beyond = scan_rows(
      path, model, budget, memory, 2 * sizeof(double), false,
      [&](uint64_t capacity) {
        out.labels.reserve(capacity);
        out.decisions.reserve(capacity);
      },
      [&](const SparseRow&, const std::vector<double>& d) {
        if (model.multiclass()) {
          const size_t predicted = argmax_class(d.data(), d.size());
          out.labels.push_back(model.classes[predicted].label);
          out.decisions.push_back(d[predicted]);
        } else {
          out.labels.push_back(d[0] > 0 ? model.positive_label : model.negative_label);
          out.decisions.push_back(d[0]);
        }
      });
  return out;
}

}  // namespace fgm
