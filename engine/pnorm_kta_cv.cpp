#include "engine/pnorm_kta_cv.h"

#include <chrono>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/messages.h"
#include "engine/fgm_path.h"
#include "engine/model_provenance.h"
#include "engine/path_selection.h"
#include "engine/pnorm_kta_rbf_svm.h"
#include "solvers/apg_reduction.h"
#include "solvers/pnorm_kta/alignment_pass.h"

namespace fgm {
namespace {

using Clock = std::chrono::steady_clock;

// One fold: its training rows as a subset (alignments and fits) and its
// held-out rows (store row -> held-out index, kNotInSubset outside).
struct Fold {
  kta::RowSubset training;
  std::vector<uint32_t> held_index;
  std::vector<int8_t> held_labels;
  uint64_t positives = 0;  // training rows labelled +1
};

std::vector<Fold> make_folds(const ShardStore& store, const KtaCvOptions& options, MemoryBudget& budget) {
  const uint64_t n = store.info().n_rows;
  const int8_t* labels = store.labels();
  validate_folds(options.folds, std::min(store.info().n_positive, store.info().n_negative));
  const BudgetedArray<uint16_t> assigned = assign_folds(labels, n, options.folds, options.seed, budget);
  std::vector<Fold> folds(static_cast<size_t>(options.folds));
  for (int f = 0; f < options.folds; ++f) {
    Fold& fold = folds[static_cast<size_t>(f)];
    fold.training.local.assign(n, kta::kNotInSubset);
    fold.held_index.assign(n, kta::kNotInSubset);
    for (uint64_t r = 0; r < n; ++r) {
      if (assigned[r] == f) {
        fold.held_index[r] = static_cast<uint32_t>(fold.held_labels.size());
        fold.held_labels.push_back(labels[r]);
      } else {
        fold.training.local[r] = static_cast<uint32_t>(fold.training.labels.size());
        fold.training.labels.push_back(labels[r]);
        fold.positives += labels[r] > 0;
      }
    }
  }
  return folds;
}

// The store's columns of a path's first point (the active set only shrinks
// along the path), read once per fold and (λ₁, λ₂), reserved from the budget.
class ColumnCache {
 public:
  ColumnCache(const ShardStore& store, MemoryBudget& budget) : store_(store), budget_(budget) {}

  void load(const std::vector<kta::FeatureAlignment>& alignments, const kta::PathPoint& first) {
    columns_.clear();
    memory_.release();
    uint64_t bytes = 0;
    for (uint32_t i : first.active) {
      Column& c = columns_[alignments[i].feature];
      store_.read_column(alignments[i].feature, c.rows, c.values);
      bytes += 8 * c.rows.size() + 64;
    }
    memory_ = budget_.reserve(bytes, "KTA cross-validation: the selected columns of a fold's path");
  }

  struct Column {
    std::vector<uint32_t> rows;  // store rows
    std::vector<float> values;
  };
  const Column& at(uint64_t feature) const {
    auto it = columns_.find(feature);
    FGM_ASSERT(it != columns_.end());
    return it->second;
  }

 private:
  const ShardStore& store_;
  MemoryBudget& budget_;
  std::unordered_map<uint64_t, Column> columns_;
  Reservation memory_;
};

// Held-out rows a linear model classifies correctly: decision Σ w x − b > 0 → +1.
uint64_t linear_held_out_correct(const Model& model, const ColumnCache& cache, const Fold& fold) {
  std::vector<double> decision(fold.held_labels.size(), 0.0);
  for (const ModelFeature& f : model.features) {
    const ColumnCache::Column& c = cache.at(f.key.ids[0]);
    for (size_t e = 0; e < c.rows.size(); ++e) {
      const uint32_t h = fold.held_index[c.rows[e]];
      if (h != kta::kNotInSubset) decision[h] += f.weight * static_cast<double>(c.values[e]);
    }
  }
  uint64_t correct = 0;
  for (size_t h = 0; h < decision.size(); ++h) correct += ((decision[h] - model.bias > 0) ? 1 : -1) == fold.held_labels[h];
  return correct;
}

// For each C: the fold's held-out rows classified correctly at `point`.
std::vector<uint64_t> point_held_out_correct(const ShardStore& store, const KtaSettings& settings,
                                             const std::vector<double>& Cs, const Fold& fold,
                                             const std::vector<kta::FeatureAlignment>& alignments,
                                             const kta::PathPoint& point, const ColumnCache& cache,
                                             MemoryBudget& budget) {
  const uint64_t n = fold.training.n(), h = fold.held_labels.size();
  std::vector<uint64_t> correct;
  if (settings.kernel == kta::KernelKind::kLinear) {
    LocalRowSums local;
    KtaRows rows{{&store}, {fold.training.labels.data()}, &local, n, fold.positives, n - fold.positives,
                 model_of_store(store.info(), "pnorm_kta")};
    KtaRowSubsetColumns subset;
    subset.part_rows = {n};
    subset.read_column = [&](size_t, uint64_t feature, std::vector<uint32_t>& r, std::vector<float>& v) {
      r.clear();
      v.clear();
      const ColumnCache::Column& c = cache.at(feature);
      for (size_t e = 0; e < c.rows.size(); ++e) {
        const uint32_t local_row = fold.training.local[c.rows[e]];
        if (local_row == kta::kNotInSubset) continue;
        r.push_back(local_row);
        v.push_back(c.values[e]);
      }
    };
    for (double C : Cs) {
      KtaSettings s = settings;
      s.C = C;
      const Model model = fit_kta_linear_model(rows, s, alignments, point, budget, &subset);
      correct.push_back(linear_held_out_correct(model, cache, fold));
    }
    return correct;
  }
  // RBF: the training and held-out rows over the selected features, dense, as
  // fit_kta_rbf_model lays them out, and its kernel weights.
  const size_t m = point.active.size();
  Reservation dense = budget.reserve((n + h) * m * sizeof(float), "KTA cross-validation: a fold's selected columns");
  std::vector<float> train(n * m, 0.0f), held(h * m, 0.0f);
  const std::vector<double> weight = kta_kernel_weights(alignments, point, n);
  std::vector<double> gamma;
  for (size_t k = 0; k < m; ++k) {
    const kta::FeatureAlignment& f = alignments[point.active[k]];
    gamma.push_back(1.0 / (2.0 * f.bandwidth * f.bandwidth));
    const ColumnCache::Column& c = cache.at(f.feature);
    for (size_t e = 0; e < c.rows.size(); ++e) {
      const uint32_t t = fold.training.local[c.rows[e]];
      if (t != kta::kNotInSubset)
        train[t * m + k] = c.values[e];
      else
        held[fold.held_index[c.rows[e]] * m + k] = c.values[e];
    }
  }
  return kta_rbf_held_out_correct(train, fold.training.labels, held, fold.held_labels, weight, gamma, Cs, budget);
}

}  // namespace

int choose_kta_candidate(const std::vector<KtaCvCandidate>& candidates) {
  // Larger is better, field by field: the correct rows, λ₂, λ₁, then the smaller C and p.
  auto rank = [](const KtaCvCandidate& c) { return std::make_tuple(c.correct, c.lambda2, c.lambda1, -c.C, -c.p); };
  int best = -1;
  for (int i = 0; i < static_cast<int>(candidates.size()); ++i)
    if (best < 0 || rank(candidates[i]) > rank(candidates[best])) best = i;
  return best;
}

KtaCvResult cross_validate_kta(const ShardStore& store, const KtaSettings& settings, const KtaCvOptions& options,
                               MemoryBudget& budget) {
  FGM_ASSERT(!options.lambda1s.empty() && !options.lambda2s.empty() && !options.Cs.empty());
  if (store.info().classes() > 2)
    throw Error(ErrorKind::kConfig, msg::kta_needs_two_labels(store.dir(), store.info().classes()));
  const auto start = Clock::now();
  KtaCvResult out;
  out.folds = options.folds;
  out.seed = options.seed;
  // Per fold and row: two uint32 maps and at most one label.
  const Reservation fold_memory = budget.reserve(static_cast<uint64_t>(options.folds) * store.info().n_rows * 9,
                                                 "KTA cross-validation: the folds' row maps");
  const std::vector<Fold> folds = make_folds(store, options, budget);
  std::vector<kta::RowSubset> subsets;
  for (const Fold& f : folds) {
    subsets.push_back(f.training);
    out.fold_rows.push_back(f.held_labels.size());
  }
  BlockStream stream(store, settings.scheduler, budget);
  const std::vector<std::vector<kta::FeatureAlignment>> alignments = kta::stream_subset_alignments(
      stream, store.plan_blocks(settings.block_bytes), settings.kernel, subsets, budget);
  subsets.clear();

  const std::vector<double> grid = kta::path_grid(settings.path);
  const size_t P = grid.size(), nC = options.Cs.size();
  for (double l1 : options.lambda1s)
    for (double l2 : options.lambda2s)
      for (size_t j = 0; j < P; ++j)
        for (double C : options.Cs) {
          KtaCvCandidate c;
          c.lambda1 = l1;
          c.lambda2 = l2;
          c.C = C;
          c.p = grid[j];
          c.point = static_cast<int>(j) + 1;
          c.fold_accuracy.assign(folds.size(), std::nan(""));
          out.candidates.push_back(c);
        }
  ColumnCache cache(store, budget);
  for (size_t i1 = 0; i1 < options.lambda1s.size(); ++i1)
    for (size_t i2 = 0; i2 < options.lambda2s.size(); ++i2) {
      kta::PathOptions path = settings.path;
      path.lambda1 = options.lambda1s[i1];
      path.lambda2 = options.lambda2s[i2];
      kta::check_path_options(path);
      for (size_t f = 0; f < folds.size(); ++f) {
        std::vector<double> a;
        a.reserve(alignments[f].size());
        for (const kta::FeatureAlignment& x : alignments[f]) a.push_back(x.alignment);
        size_t j = 0;
        kta::follow_path(a, path, [&](const kta::PathPoint& point) {
          FGM_ASSERT(j < P);
          if (j == 0) cache.load(alignments[f], point);
          const std::vector<uint64_t> correct =
              point_held_out_correct(store, settings, options.Cs, folds[f], alignments[f], point, cache, budget);
          for (size_t c = 0; c < nC; ++c) {
            KtaCvCandidate& cand = out.candidates[((i1 * options.lambda2s.size() + i2) * P + j) * nC + c];
            cand.correct += correct[c];
            cand.rows += folds[f].held_labels.size();
            cand.fold_accuracy[f] =
                static_cast<double>(correct[c]) / static_cast<double>(folds[f].held_labels.size());
            cand.mean_selected += static_cast<double>(point.active.size()) / static_cast<double>(folds.size());
          }
          ++j;
        });
        spdlog::info("KTA cross-validation: fold {}/{}, lambda1 {} lambda2 {}: {} points x {} C ({:.1f}s so far)",
                     f + 1, folds.size(), path.lambda1, path.lambda2, j, nC, seconds_since(start));
      }
    }
  out.chosen = choose_kta_candidate(out.candidates);
  out.seconds = seconds_since(start);
  return out;
}

void write_kta_cv_section(JsonWriter& j, const KtaCvOptions& options, const KtaCvResult& cv, const KtaRun& refit) {
  auto list = [&](const char* key, const std::vector<double>& v) {
    j.key(key).begin_array(true);
    for (double x : v) j.value(x);
    j.end_array();
  };
  j.key("cross_validation").begin_object();
  j.key("folds").value(static_cast<int64_t>(cv.folds));
  j.key("fold_seed").value(cv.seed);
  j.key("fold_rows").begin_array(true);
  for (uint64_t r : cv.fold_rows) j.value(r);
  j.end_array();
  list("lambda1_grid", options.lambda1s);
  list("lambda2_grid", options.lambda2s);
  list("C_grid", options.Cs);
  j.key("candidates").value(static_cast<uint64_t>(cv.candidates.size()));
  j.key("rule").value(
      "the most held-out rows classified correctly over all folds; ties: larger lambda2, larger lambda1, "
      "smaller C, then the later point (smaller p)");
  j.key("seconds").value(cv.seconds);
  j.key("chosen").begin_object();
  if (cv.chosen >= 0) {
    const KtaCvCandidate& c = cv.candidates[static_cast<size_t>(cv.chosen)];
    j.key("lambda1").value(c.lambda1);
    j.key("lambda2").value(c.lambda2);
    j.key("C").value(c.C);
    j.key("p").value(c.p);
    j.key("point").value(static_cast<int64_t>(c.point));
    j.key("cv_accuracy").value(c.accuracy());
    const MeanSe folds = mean_and_se(c.fold_accuracy);
    j.key("cv_accuracy_fold_se").value(folds.se);
    j.key("cv_mean_selected").value(c.mean_selected);
    // The refit on all training rows (its path was run with the chosen λ₁, λ₂, C).
    const size_t index = static_cast<size_t>(c.point - 1);
    if (index < refit.points.size()) {
      const KtaPoint& p = refit.points[index];
      j.key("selected").value(p.selected);
      j.key("test_accuracy").value(p.test.accuracy);
      j.key("validation_accuracy").value(p.validation.accuracy);
    }
  }
  j.key("note").value(
      "chosen by k-fold cross-validation on the training rows only; its test_accuracy (refit on all training "
      "rows) is an honest estimate, unlike oracle_best_test");
  j.end_object();
  j.end_object();
}

std::string kta_cv_csv(const KtaCvResult& cv) {
  std::string out = "lambda1,lambda2,C,point,p,cv_accuracy,cv_accuracy_fold_se,mean_selected,chosen\n";
  for (size_t i = 0; i < cv.candidates.size(); ++i) {
    const KtaCvCandidate& c = cv.candidates[i];
    const MeanSe folds = mean_and_se(c.fold_accuracy);
    out += fmt::format("{:.6g},{:.6g},{:.6g},{},{:.6g},{:.6f},{:.6f},{:.2f},{}\n", c.lambda1, c.lambda2, c.C,
                       c.point, c.p, c.accuracy(), folds.se, c.mean_selected,
                       static_cast<int>(i) == cv.chosen ? 1 : 0);
  }
  return out;
}

}  // namespace fgm
