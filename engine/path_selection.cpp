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

// The shuffle of one label's `count` rows replayed (assign_folds' Fisher–Yates
// from `state`); calls settle(j, r) for each tracked row j (label-rank
// offset + j, j < tracked) with its final position r. Dense (the whole
// permutation, 8 bytes a row of the label, as assign_folds) when this rank
// holds at least an eighth of the rows, else only the tracked rows' positions
// in a hash map (~64 bytes a tracked row: the same memory at an eighth).
template <class Settle>
void replay_shuffle(uint64_t count, uint64_t offset, uint64_t tracked, uint64_t& state, MemoryBudget& budget,
                    const Settle& settle) {
  if (tracked * 8 >= count) {
    BudgetedArray<uint64_t> rows(budget, count, "cross-validation fold shuffle", "use more ranks");
    for (uint64_t r = 0; r < count; ++r) rows[r] = r;
    for (uint64_t i = count; i > 1; --i) std::swap(rows[i - 1], rows[below(state, i)]);
    for (uint64_t r = 0; r < count; ++r)
      if (rows[r] - offset < tracked) settle(rows[r] - offset, r);
    return;
  }
  Reservation memory = budget.reserve(tracked * 64, "cross-validation fold shuffle (own rows)", "use more ranks");
  std::unordered_map<uint64_t, uint64_t> at;  // position → tracked row
  at.reserve(tracked + 1);
  for (uint64_t j = 0; j < tracked; ++j) at.emplace(offset + j, j);
  for (uint64_t i = count; i > 1; --i) {
    const uint64_t a = i - 1, b = below(state, i);  // swap positions a and b; a is final afterwards
    auto ia = at.find(a);
    auto ib = a == b ? ia : at.find(b);
    if (ib != at.end()) settle(ib->second, a);  // b's row lands on a
    if (a == b) {
      if (ia != at.end()) at.erase(ia);
      continue;
    }
    if (ia != at.end()) {  // a's row moves to b
      const uint64_t row = ia->second;
      at.erase(ia);
      if (ib != at.end()) ib->second = row;
      else at.emplace(b, row);
    } else if (ib != at.end()) {
      at.erase(ib);
    }
  }
  if (auto it = at.find(0); it != at.end()) settle(it->second, 0);
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
  struct OwnRow {
    uint32_t partition;
    uint64_t row;
  };
  Reservation mine_memory = budget.reserve(own * sizeof(OwnRow), "cross-validation rows of one label",
                                           "use more ranks (more, smaller partitions)");
  std::vector<OwnRow> mine;  // this rank's rows of one label, in row order
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
    mine.clear();
    for (size_t q = 0; q < labels.size(); ++q)  // their label-ranks: offset, offset + 1, ...
      for (uint64_t i = 0; i < rows[q]; ++i)
        if (labels[q][i] == label) mine.push_back({uint32_t(q), i});
    replay_shuffle(count, offset, mine.size(), state, budget, [&](uint64_t j, uint64_t position) {
      folds[mine[j].partition][mine[j].row] = static_cast<uint16_t>((dealt + position) % uint64_t(k));
    });
    dealt += count;
  }
  return folds;
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
    cache.column(k).for_each([&](uint32_t row, float value) { decision[row] += w * double(value); });
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
