#include "engine/evaluate.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"
#include "core/messages.h"

namespace fgm {

double area_under_roc(const std::vector<double>& scores, const std::vector<int8_t>& labels) {
  const size_t n = scores.size();
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

EvalResult evaluate_file(const std::string& path, const Model& model, bool keep_scores) {
  ReaderOptions opt;
  opt.index_base = model.index_base;
  opt.declared_features = model.n_features;
  opt.ignore_beyond_declared = true;
  LibsvmReader reader(path, opt);
  LinearScorer scorer(model);
  EvalResult r;
  std::vector<double> scores;
  std::vector<int8_t> labels;
  SparseRow row;
  uint64_t correct = 0;
  while (reader.next(row)) {
    int8_t y;
    if (row.label == model.positive_label) y = 1;
    else if (row.label == model.negative_label) y = -1;
    else
      throw Error(ErrorKind::kInvalidInput,
                  msg::location(path, row.line, 1) +
                      fmt::format("label {} is neither of the model's labels ({} -> +1, {} -> -1)",
                                  label_text(row.label), label_text(model.positive_label),
                                  label_text(model.negative_label)));
    double d = scorer.decision(row.indices.data(), row.values.data(), row.indices.size());
    int8_t predicted = d > 0 ? 1 : -1;
    if (predicted == y) ++correct;
    scores.push_back(d);
    labels.push_back(y);
    if (y > 0) ++r.positives;
  }
  r.rows = scores.size();
  if (r.rows == 0) throw Error(ErrorKind::kInvalidInput, msg::empty_input(path));
  r.accuracy = static_cast<double>(correct) / static_cast<double>(r.rows);
  r.auc = area_under_roc(scores, labels);
  r.ignored_features = reader.beyond_declared();
  r.first_ignored_line = reader.first_beyond_line();
  r.first_ignored_index = reader.first_beyond_index();
  if (keep_scores) r.scores = std::move(scores);
  return r;
}

}  // namespace fgm
