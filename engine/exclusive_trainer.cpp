#include "engine/exclusive_trainer.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"
#include "engine/debias.h"
#include "engine/fgm_trainer.h"
#include "engine/model_provenance.h"
#include "engine/one_vs_rest.h"
#include "engine/train_settings.h"
#include "features/block_stream.h"
#include "features/feature_groups.h"
#include "features/transformed_store.h"
#include "solvers/exclusive/design.h"
#include "solvers/exclusive/exclusive_groups.h"

namespace fgm {
namespace {

using exclusive::Algorithm;
using exclusive::ExclusiveLoss;

Algorithm algorithm_from(const std::string& name) {
  return name == "locp" ? Algorithm::kLocp : name == "licp" ? Algorithm::kLicp : Algorithm::kPcp;
}

ExclusiveLoss loss_from(const std::string& name) {
  if (name == "squared_hinge") return ExclusiveLoss::kSquaredHinge;
  return name == "squared" ? ExclusiveLoss::kSquared : name == "hinge" ? ExclusiveLoss::kHinge : ExclusiveLoss::kLogistic;
}

}  // namespace

ExclusiveSettings exclusive_settings_from_config(const Config& c, ConfigCommand command) {
  ExclusiveSettings s;
  s.fista.algorithm = algorithm_from(c.get_string("exclusive.algorithm"));
  // licp solves only the svm losses: its default loss, the squared hinge (the
  // same on every backend; docs/solvers/exclusive.md, "Default loss"),
  // follows the algorithm.
  s.fista.loss = loss_from(c.get_string("exclusive.loss"));
  if (s.fista.algorithm == Algorithm::kLicp && !c.set_by_user("exclusive.loss")) s.fista.loss = ExclusiveLoss::kSquaredHinge;
  const bool svm = exclusive::is_svm_loss(s.fista.loss), licp = s.fista.algorithm == Algorithm::kLicp;
  if (svm != licp)
    throw Error(ErrorKind::kConfig,
                fmt::format("{}exclusive.loss = \"{}\" does not go with exclusive.algorithm = \"{}\": licp solves "
                            "the hinge and squared-hinge losses (E-SVM), pcp and locp the squared and logistic losses",
                            c.where_set(c.set_by_user("exclusive.loss") ? "exclusive.loss" : "exclusive.algorithm"),
                            exclusive::loss_name(s.fista.loss), exclusive::algorithm_name(s.fista.algorithm)));
  s.fista.lambda = c.get_float("exclusive.lambda");
  s.fista.ridge = c.get_float("exclusive.ridge");
  if (!licp) reject_if_set(c, "exclusive.ridge", "it is the α of E-SVM, read by exclusive.algorithm = \"licp\" only");
  s.fista.bias = c.get_bool("exclusive.bias");
  s.fista.tolerance = c.get_float("exclusive.tolerance");
  s.fista.max_iterations = static_cast<int>(c.get_int("exclusive.max_iterations"));
  s.working_set.enabled = c.get_bool("exclusive.working_set");
  s.working_set.growth = static_cast<uint64_t>(c.get_int("exclusive.working_set_growth"));
  s.working_set.kkt_tolerance = c.get_float("exclusive.kkt_tolerance");
  if (!s.working_set.enabled) {
    reject_if_set(c, "exclusive.working_set_growth", "exclusive.working_set is false");
    reject_if_set(c, "exclusive.kkt_tolerance", "exclusive.working_set is false");
  }
  s.groups_path = c.get_string("features.groups");
  s.group_structure = c.get_string("features.group_structure");
  s.random_groups = static_cast<uint64_t>(c.get_int("exclusive.random_groups"));
  s.expected_relevant = static_cast<uint64_t>(c.get_int("exclusive.expected_relevant"));
  s.group_seed = static_cast<uint64_t>(c.get_int("exclusive.group_seed"));
  for (double m : c.get_list("exclusive.path_random_groups")) s.path_random_groups.push_back(static_cast<uint64_t>(m));
  if (!s.path_random_groups.empty()) {
    if (command == ConfigCommand::kTrain)
      reject_if_set(c, "exclusive.path_random_groups", "it is read by `fgm path` only (fgm train makes one model)");
    reject_if_set(c, "features.groups", "exclusive.path_random_groups draws random groups for each of its counts");
    reject_if_set(c, "exclusive.random_groups", "exclusive.path_random_groups gives the group counts");
    reject_if_set(c, "exclusive.expected_relevant", "exclusive.path_random_groups gives the group counts");
    s.random_groups = s.path_random_groups.front();  // the groups the data opens with
  }
  if (!s.groups_path.empty()) {
    reject_if_set(c, "exclusive.random_groups", "features.groups gives the groups");
    reject_if_set(c, "exclusive.expected_relevant", "features.groups gives the groups");
    reject_if_set(c, "exclusive.group_seed", "features.groups gives the groups (nothing is random)");
  } else if (s.random_groups > 0) {
    if (s.path_random_groups.empty())
      reject_if_set(c, "exclusive.expected_relevant", "exclusive.random_groups sets the number of groups");
  } else if (s.expected_relevant > 0) {
    s.random_groups = exclusive::default_group_count(s.expected_relevant);
  } else {
    throw Error(ErrorKind::kConfig,
                "solver = \"exclusive\" needs groups: set features.groups (a group file), exclusive.random_groups "
                "(m random groups) or exclusive.expected_relevant (s: m = s / ln s random groups)");
  }
  s.path_lambda = c.get_list("exclusive.path_lambda");
  s.path_warm_start = c.get_bool("exclusive.path_warm_start");
  s.debias = c.get_bool("exclusive.debias");
  s.debias_C = c.get_float("exclusive.debias_C");
  if (!s.debias) reject_if_set(c, "exclusive.debias_C", "exclusive.debias is false (no refit)");
  if (command == ConfigCommand::kTrain) {
    reject_if_set(c, "exclusive.debias", "it is read by `fgm path` only (fgm train writes the fit's own model)");
    reject_if_set(c, "exclusive.path_lambda", "exclusive.path_lambda is read by `fgm path` only (fgm train makes one model)");
    reject_if_set(c, "exclusive.path_warm_start", "it is read by `fgm path` only (fgm train makes one model)");
  }
  else if (s.path_lambda.empty())
    throw Error(ErrorKind::kConfig, "fgm path with solver = \"exclusive\" needs exclusive.path_lambda (a list of λ)");
  if (command == ConfigCommand::kPath) {
    reject_if_set(c, "exclusive.lambda", "fgm path takes its values from exclusive.path_lambda");
  }
  s.threads = static_cast<int>(c.get_int("engine.threads"));
  s.block_bytes = c.get_bytes("engine.block_bytes");
  return s;
}

namespace {

// What both commands share: the stream, the design, the labels, the groups.
// A resident store is cut into the same blocks as FGM's scoring passes.
struct ExclusiveProblem final : ExclusiveData {
  ExclusiveProblem(const ShardStore& store, const ExclusiveSettings& s, MemoryBudget& budget)
      : store(store),
        scheduling([&] {
          SchedulerOptions o;
          o.threads = s.threads;
          return o;
        }()),
        resident(reserve_resident_store(store.info(), budget, scheduling)),
        stream(store, scheduling, budget),
        design(stream,
               store.plan_blocks(
                   scoring_block_bytes(s.block_bytes, budget, store.info().n_rows, scheduling.keep_resident)),
               budget) {
    const StoreInfo& info = store.info();
    labels_memory = budget.reserve(info.n_rows * sizeof(double), "exclusive: labels");
    y.resize(info.n_rows);
    groups = exclusive_groups_for(s, design.column_ids(), info.n_features, info.index_base, budget, &source);
    base = model_of_store(info, "exclusive");
    record_feature_transforms(store, base);
  }
  const std::vector<double>& class_values() const override { return store.info().class_values; }
  const std::vector<uint64_t>& class_counts() const override { return store.info().class_counts; }
  const std::string& where() const override { return store.dir(); }
  void use_random_groups(uint64_t m, uint64_t seed, MemoryBudget& budget) override {
    groups = exclusive::ExclusiveGroups();  // the old groups' reservation first
    groups = exclusive::random_groups(design.columns(), m, seed, budget);
    source = "random";
  }
  ExclusiveProblemView problem_of_class(size_t c) override {
    const bool binary = store.info().classes() <= 2;
    const std::vector<int8_t> one_vs_rest = binary ? std::vector<int8_t>() : one_vs_rest_labels(store, c);
    const int8_t* labels = binary ? store.labels() : one_vs_rest.data();
    for (uint64_t i = 0; i < y.size(); ++i) y[i] = labels[i];
    return {design, y, groups, source, base};
  }
  const ShardStore& store;
  SchedulerOptions scheduling;  // engine.threads; keep_resident set by `resident`
  Reservation resident;  // released after the stream that holds the blocks
  BlockStream stream;
  exclusive::StreamedDesign design;
  Reservation labels_memory;
  std::vector<double> y;
  exclusive::ExclusiveGroups groups;
  std::string source;
  Model base;
};

}  // namespace

exclusive::ExclusiveGroups exclusive_groups_for(const ExclusiveSettings& s, const std::vector<uint64_t>& column_ids,
                                                uint64_t n_features, int index_base, MemoryBudget& budget,
                                                std::string* source) {
  if (!s.groups_path.empty()) {
    const FeatureGroups file =
        read_feature_groups(s.groups_path, n_features, index_base, budget, parse_group_structure(s.group_structure));
    *source = "file";
    return exclusive::groups_from_file(file, column_ids, budget);
  }
  *source = "random";
  return exclusive::random_groups(column_ids.size(), s.random_groups, s.group_seed, budget);
}

namespace {

// One working-set fit at `lambda` and its linear model (no bias).
ExclusiveOutcome fit_exclusive_at(const ExclusiveProblemView& problem, const ExclusiveSettings& s, double lambda,
                                  MemoryBudget& budget, const exclusive::ExclusiveWarmStart* warm = nullptr) {
  const auto start = std::chrono::steady_clock::now();
  exclusive::FistaOptions fista = s.fista;
  fista.lambda = lambda;
  fista.threads = s.threads;
  ExclusiveOutcome out;
  out.fit = exclusive::fit_exclusive(problem.design, problem.y, problem.groups, fista, s.working_set, budget, warm);
  out.warm_started = warm != nullptr;
  out.group_source = problem.group_source;
  out.group_count = problem.groups.count();
  out.groups_disjoint = problem.groups.disjoint;
  out.columns = problem.design.columns();
  out.model = problem.base;
  Model& m = out.model;
  m.loss = exclusive::loss_name(fista.loss);
  m.C = lambda;  // the model's regularisation parameter (λ); the full config is in m.config
  m.iterations = static_cast<uint32_t>(out.fit.fista_iterations);
  m.has_bias = fista.bias;
  m.bias = -out.fit.bias;  // the model's decision value is w'x − bias
  m.feature_kind = "linear";
  m.objective = out.fit.last_solve.objective;
  for (uint64_t k = 0; k < out.fit.w.size(); ++k) {
    if (out.fit.w[k] == 0) continue;
    ModelFeature f;
    f.key.kind = FeatureKind::kLinear;
    f.key.ids[0] = problem.design.column_id(k);
    f.weight = out.fit.w[k];
    f.batch = 1;
    m.features.push_back(f);
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.budget_peak = budget.peak();
  return out;
}

// The de-biasing refit of a fit (engine/debias.h): its nonzero weights'
// columns gathered into memory in one pass, then ½‖w‖² + (C/2)Σ ξ_i² (squared
// hinge; the bias as the fit's) by the certified APG, warm-started at the
// fit's weights. One thread: the refit's bits do not depend on engine.threads.
void debias_exclusive(const ExclusiveProblemView& problem, const ExclusiveSettings& s, ExclusiveOutcome& o,
                      MemoryBudget& budget) {
  std::vector<uint64_t> support;
  for (uint64_t k = 0; k < o.fit.w.size(); ++k)
    if (o.fit.w[k] != 0) support.push_back(k);
  const std::unique_ptr<exclusive::Design> restricted = problem.design.restrict_columns(support);
  const auto* columns = dynamic_cast<const exclusive::InMemoryDesign*>(restricted.get());
  FGM_ASSERT(columns != nullptr && o.model.features.size() == support.size());
  SelectedFeatureCache cache(budget, problem.design.rows());
  cache.begin_batch();
  const auto& ptr = columns->column_ptr();
  for (size_t j = 0; j < support.size(); ++j) {
    const std::vector<uint32_t> rows(columns->row_ids().begin() + ptr[j], columns->row_ids().begin() + ptr[j + 1]);
    const std::vector<float> values(columns->values().begin() + ptr[j], columns->values().begin() + ptr[j + 1]);
    cache.add_column(o.model.features[j].key, rows, values);
  }
  const Reservation labels_memory = budget.reserve(problem.y.size(), "exclusive: labels of the de-biasing refit");
  std::vector<int8_t> labels(problem.y.size());
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = problem.y[i] > 0 ? 1 : -1;
  ApgOptions options;
  options.loss = Loss::kSquaredHinge;
  options.C = s.debias_C;
  options.bias = s.fista.bias;
  options.certify = true;
  options.gap_tolerance = s.fista.tolerance;
  options.max_iterations = s.fista.max_iterations;
  options.threads = 1;
  DebiasResult refit = debias_refit(cache, labels.data(), o.model, options, budget);
  o.debiased = std::move(refit.model);
  o.debias_solve = refit.solve;
  o.has_debiased = true;
}

// One λ path on `problem`, appended to `out`; `first`, `total`: the index of
// its first point and the points of the whole run (for `done`).
void fit_exclusive_path(const ExclusiveProblemView& problem, const ExclusiveSettings& settings, MemoryBudget& budget,
                        std::vector<ExclusiveOutcome>& all, size_t total, const ExclusivePointDone& done) {
  std::vector<ExclusiveOutcome> out;
  exclusive::ExclusiveWarmStart warm;  // p weights, n margins, n duals (licp) kept between two λ
  Reservation warm_memory;
  if (settings.path_warm_start && settings.path_lambda.size() > 1)
    warm_memory = budget.reserve((problem.design.columns() + 2 * problem.design.rows()) * sizeof(double) +
                                     problem.design.columns() * sizeof(uint64_t),
                                 "exclusive: warm start of the next λ", "set exclusive.path_warm_start = false");
  for (double lambda : settings.path_lambda) {
    const bool use_warm = settings.path_warm_start && !out.empty();
    out.push_back(fit_exclusive_at(problem, settings, lambda, budget, use_warm ? &warm : nullptr));
    if (settings.debias) debias_exclusive(problem, settings, out.back(), budget);
    if (settings.path_warm_start) warm = out.back().fit.warm_start();
    if (done) done(all.size() + out.size() - 1, total, out.back());
  }
  for (ExclusiveOutcome& o : out) all.push_back(std::move(o));
}

}  // namespace

std::unique_ptr<ExclusiveData> open_exclusive_store(const ShardStore& store, const ExclusiveSettings& settings,
                                                    MemoryBudget& budget) {
  return std::make_unique<ExclusiveProblem>(store, settings, budget);
}

void train_exclusive(ExclusiveData& data, const ExclusiveSettings& settings, MemoryBudget& budget,
                     ExclusiveRunOutcome& out) {
  out.class_values = data.class_values();
  out.class_counts = data.class_counts();
  const size_t K = out.class_values.size();
  std::vector<Model> models;
  for (size_t c = K > 2 ? 0 : 1; c < std::max<size_t>(K, 2); ++c) {
    data.begin_fit();
    out.classes.push_back(fit_exclusive_at(data.problem_of_class(c), settings, settings.fista.lambda, budget));
    data.end_fit(static_cast<int>(out.classes.size()), "fit");
    models.push_back(out.classes.back().model);
  }
  out.model = K > 2 ? combine_class_models(models, out.class_values) : models.front();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - data.opened).count();
  out.budget_peak = budget.peak();
}

void path_exclusive(ExclusiveData& data, const ExclusiveSettings& settings, MemoryBudget& budget,
                    ExclusiveRunOutcome& out, const ExclusivePointDone& done) {
  out.class_values = data.class_values();
  if (out.class_values.size() > 2)
    throw Error(ErrorKind::kConfig,
                fmt::format("fgm path with solver = \"exclusive\" fits binary stores; the store {} has {} classes "
                            "(fgm train fits them one-vs-rest)",
                            data.where(), out.class_values.size()));
  const std::vector<uint64_t> counts =
      settings.path_random_groups.empty() ? std::vector<uint64_t>{0} : settings.path_random_groups;
  const size_t total = counts.size() * settings.path_lambda.size();
  for (size_t q = 0; q < counts.size(); ++q) {
    data.begin_fit();
    if (counts[q] > 0 && q > 0) data.use_random_groups(counts[q], settings.group_seed, budget);
    fit_exclusive_path(data.problem_of_class(1), settings, budget, out.classes, total, done);
    data.end_fit(static_cast<int>(q + 1), "path");
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - data.opened).count();
  out.budget_peak = budget.peak();
}

}  // namespace fgm
