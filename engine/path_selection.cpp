#include "engine/path_selection.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "engine/evaluate.h"

namespace fgm {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) (Lemire's multiply-shift; the bias is below 2^-40 for
// any row count that fits in memory, and the result is the same everywhere).
uint64_t below(uint64_t& state, uint64_t bound) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(splitmix64(state)) * bound) >> 64);
}

}  // namespace

BudgetedArray<uint16_t> assign_folds(const int8_t* labels, uint64_t n, int k, uint64_t seed, MemoryBudget& budget) {
  FGM_ASSERT(k >= 2 && k < kNoFold);
  BudgetedArray<uint16_t> folds(budget, n, "cross-validation folds", "use fewer training rows");
  folds.fill(kNoFold);
  BudgetedArray<uint64_t> rows(budget, n, "cross-validation fold shuffle", "use fewer training rows");
  bool present[256] = {};
  for (uint64_t i = 0; i < n; ++i) present[static_cast<uint8_t>(labels[i])] = true;
  uint64_t state = seed;
  uint64_t dealt = 0;
  for (int label = -128; label <= 127; ++label) {  // one pass per label present (2 for binary data)
    if (label == 0 || !present[static_cast<uint8_t>(label)]) continue;
    uint64_t count = 0;
    for (uint64_t i = 0; i < n; ++i)
      if (labels[i] == label) rows[count++] = i;
    for (uint64_t i = count; i > 1; --i) std::swap(rows[i - 1], rows[below(state, i)]);  // Fisher–Yates
    for (uint64_t r = 0; r < count; ++r) folds[rows[r]] = static_cast<uint16_t>((dealt + r) % uint64_t(k));
    dealt += count;
  }
  return folds;
}

std::vector<BudgetedArray<uint16_t>> assign_partition_folds(const std::vector<std::array<uint64_t, 2>>& label_rows,
                                                            uint32_t first, const std::vector<const int8_t*>& labels,
                                                            const std::vector<uint64_t>& rows, int k, uint64_t seed,
                                                            MemoryBudget& budget) {
  FGM_ASSERT(k >= 2 && k < kNoFold && labels.size() == rows.size() && first + labels.size() <= label_rows.size());
  std::vector<BudgetedArray<uint16_t>> folds;
  uint64_t own = 0;
  for (uint64_t r : rows) {
    folds.emplace_back(budget, r, "cross-validation folds", "use more ranks (more, smaller partitions)");
    folds.back().fill(kNoFold);
    own += r;
  }
  // Position in the shuffle → own row (partition, row); ~64 bytes per hash entry.
  Reservation tracked_mem = budget.reserve(own * 64, "cross-validation fold shuffle (own rows)",
                                           "use more ranks (more, smaller partitions)");
  std::unordered_map<uint64_t, std::pair<uint32_t, uint64_t>> at;
  at.reserve(own);
  uint64_t state = seed;
  uint64_t dealt = 0;
  for (int c = 0; c < 2; ++c) {  // label −1, then +1: assign_folds' order
    const int8_t label = c == 0 ? -1 : 1;
    uint64_t count = 0, offset = 0;  // rows of `label`: all partitions, partitions before `first`
    for (size_t p = 0; p < label_rows.size(); ++p) {
      if (p == first) offset = count;
      count += label_rows[p][c];
    }
    if (count == 0) continue;  // a label absent from every partition takes no generator call
    at.clear();
    for (size_t q = 0; q < labels.size(); ++q)  // rows of `label` in row order: positions offset, offset + 1, ...
      for (uint64_t i = 0; i < rows[q]; ++i)
        if (labels[q][i] == label) at.emplace(offset++, std::make_pair(uint32_t(q), i));
    auto settle = [&](uint64_t position) {  // the row at `position` keeps it: deal its fold
      auto it = at.find(position);
      if (it == at.end()) return;
      folds[it->second.first][it->second.second] = static_cast<uint16_t>((dealt + position) % uint64_t(k));
      at.erase(it);
    };
    for (uint64_t i = count; i > 1; --i) {  // assign_folds' Fisher–Yates, on the tracked positions only
      const uint64_t a = i - 1, b = below(state, i);
      if (a != b) {
        auto ia = at.find(a), ib = at.find(b);
        if (ia != at.end() && ib != at.end()) std::swap(ia->second, ib->second);
        else if (ia != at.end()) {
          at.emplace(b, ia->second);
          at.erase(a);
        } else if (ib != at.end()) {
          at.emplace(a, ib->second);
          at.erase(b);
        }
      }
      settle(a);  // no later swap reaches position a
    }
    settle(0);
    dealt += count;
  }
  return folds;
}

void fold_training_labels(const int8_t* labels, const BudgetedArray<uint16_t>& folds, int fold,
                          BudgetedArray<int8_t>& out) {
  FGM_ASSERT(out.size() == folds.size());
  for (uint64_t i = 0; i < folds.size(); ++i)
    out[i] = (folds[i] == kNoFold || folds[i] == fold) ? int8_t{0} : labels[i];
}

void append_held_out_scores(const SelectedFeatureCache& cache, const Model& model, const int8_t* labels,
                            const uint16_t* folds, int fold, MemoryBudget& budget, std::vector<double>& scores,
                            std::vector<int8_t>& y) {
  FGM_ASSERT(model.features.size() == cache.num_columns());
  const uint64_t n = cache.n_rows();
  BudgetedArray<double> decision(budget, n, "held-out decision values", "use fewer training rows");
  decision.fill(model.has_bias ? -model.bias : 0.0);
  for (size_t k = 0; k < cache.num_columns(); ++k) {
    const double w = model.features[k].weight;
    if (w == 0) continue;
    SparseColumnView c = cache.column(k);
    for (uint64_t e = 0; e < c.nnz; ++e) decision[c.rows[e]] += w * double(c.values[e]);
  }
  for (uint64_t i = 0; i < n; ++i) {
    if (folds[i] != fold) continue;
    scores.push_back(decision[i]);
    y.push_back(labels[i]);
  }
}

HeldOutEval held_out_eval(const std::vector<double>& scores, const std::vector<int8_t>& y) {
  FGM_ASSERT(scores.size() == y.size());
  HeldOutEval r;
  r.rows = scores.size();
  if (r.rows == 0) return r;
  uint64_t correct = 0;
  for (size_t i = 0; i < scores.size(); ++i) correct += (scores[i] > 0 ? 1 : -1) == y[i];
  r.accuracy = double(correct) / double(r.rows);
  r.auc = area_under_roc(scores, y);
  return r;
}

HeldOutEval evaluate_held_out(const SelectedFeatureCache& cache, const Model& model, const int8_t* labels,
                              const BudgetedArray<uint16_t>& folds, int fold, MemoryBudget& budget) {
  FGM_ASSERT(folds.size() == cache.n_rows());
  uint64_t held = 0;
  for (uint64_t i = 0; i < folds.size(); ++i) held += folds[i] == fold;
  // Scores, labels and the AUC's rank order.
  Reservation held_mem = budget.reserve(held * (2 * sizeof(double) + 1), "held-out scores",
                                        "use fewer training rows");
  std::vector<double> scores;
  std::vector<int8_t> y;
  scores.reserve(held);
  y.reserve(held);
  append_held_out_scores(cache, model, labels, folds.data(), fold, budget, scores, y);
  return held_out_eval(scores, y);
}

MeanSe mean_and_se(const std::vector<double>& values) {
  MeanSe r;
  double sum = 0;
  for (double v : values)
    if (std::isfinite(v)) {
      sum += v;
      ++r.count;
    }
  if (r.count == 0) return r;
  r.mean = sum / r.count;
  if (r.count < 2) return r;
  double ss = 0;
  for (double v : values)
    if (std::isfinite(v)) ss += (v - r.mean) * (v - r.mean);
  r.se = std::sqrt(ss / (r.count - 1)) / std::sqrt(double(r.count));
  return r;
}

double binomial_se(double accuracy, uint64_t rows) {
  if (rows == 0 || !std::isfinite(accuracy)) return std::numeric_limits<double>::quiet_NaN();
  return std::sqrt(accuracy * (1 - accuracy) / double(rows));
}

PointChoice choose_point(const std::vector<double>& means, const std::vector<double>& ses,
                         const std::vector<int>& simplest_first) {
  FGM_ASSERT(means.size() == ses.size() && simplest_first.size() == means.size());
  PointChoice c;
  for (int i : simplest_first)  // strict >: an equal mean later in the order is not simpler
    if (std::isfinite(means[i]) && (c.best < 0 || means[i] > c.best_mean)) {
      c.best = i;
      c.best_mean = means[i];
    }
  if (c.best < 0) return c;
  c.best_se = ses[c.best];
  c.threshold = c.best_mean - (std::isfinite(c.best_se) ? c.best_se : 0.0);
  for (int i : simplest_first)
    if (std::isfinite(means[i]) && means[i] >= c.threshold) {
      c.one_se = i;
      break;
    }
  return c;
}

std::vector<int> simplicity_order(const std::vector<uint64_t>& selected, const std::vector<uint64_t>& B,
                                  const std::vector<double>& C) {
  std::vector<int> order(selected.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (selected[a] != selected[b]) return selected[a] < selected[b];
    if (B[a] != B[b]) return B[a] < B[b];
    return C[a] < C[b];
  });
  return order;
}

}  // namespace fgm
