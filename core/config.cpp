#include "core/config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "core/error.h"
#include "core/memory_budget.h"
#include "core/messages.h"
#include "core/path_checks.h"

namespace fgm {
namespace {

ParamSpec spec(std::string key, ParamType type, std::string def, std::string description) {
  ParamSpec s;
  s.key = std::move(key);
  s.type = type;
  s.default_value = std::move(def);
  s.description = std::move(description);
  return s;
}
ParamSpec ranged(ParamSpec s, double lo, double hi, bool lo_exclusive = false) {
  s.has_range = true;
  s.min = lo;
  s.max = hi;
  s.min_exclusive = lo_exclusive;
  return s;
}
ParamSpec choices(ParamSpec s, std::vector<std::string> c) {
  s.choices = std::move(c);
  return s;
}

std::vector<ParamSpec> build_specs() {
  using T = ParamType;
  return {
      choices(spec("solver", T::kEnum, "\"fgm\"",
                   "the method (engine/solver_choice.h): fgm = Feature Generating Machine; each other "
                   "solver reads its own section, and keys of another solver's section are errors"),
              {"fgm", "pnorm_kta", "sifs", "exclusive", "mslr"}),
      spec("data.train", T::kPath, "",
           "training data: a LIBSVM/svmlight file (plain, gzip, bzip2 or xz) or a store "
           "directory written by `fgm ingest`"),
      spec("data.test", T::kPath, "", "test data (LIBSVM text); accuracy and AUC are reported"),
      spec("data.validation", T::kPath, "",
           "validation data (LIBSVM text) used by `fgm path` to pick the best point"),
      ranged(spec("data.index_base", T::kInt, "1", "feature indices in the text start at 0 or 1"),
             0, 1),
      ranged(spec("data.features", T::kInt, "0",
                  "declared number of features (0: the largest index seen); indices beyond it "
                  "are an error in training data"),
             0, 1e18),
      spec("data.truth", T::kPath, "",
           "planted ground truth written by `fgm synth`; the run reports how many planted "
           "features were recovered"),
      spec("output.dir", T::kPath, "\"out\"", "directory for model.fgm and run.json"),
      spec("output.report", T::kBool, "true",
           "write output.dir/report.html at the end of fgm train / fgm path: charts and tables of the run, "
           "self-contained (`fgm report` rewrites it)"),
      ranged(spec("fgm.B", T::kInt, "10",
                  "features (or groups) added per outer iteration"),
             1, 1e9),
      ranged(spec("fgm.C", T::kFloat, "10.0", "loss weight C of problem (31)"), 0, 1e12, true),
      choices(spec("fgm.loss", T::kEnum, "\"squared_hinge\"", "loss function"),
              {"squared_hinge", "logistic"}),
      spec("fgm.bias", T::kBool, "false",
           "learn an unregularised bias b (FGM-SHIFT); decision value w'x - b"),
      ranged(spec("fgm.max_iterations", T::kInt, "10", "outer iterations T (at most T·B features)"),
             1, 1e6),
      ranged(spec("fgm.max_features", T::kInt, "0",
                  "stop once this many selection units are selected (0: no cap): features "
                  "for linear and poly2, groups for features.groups, hik and additive (a "
                  "group brings all its generated columns); the last batch is shortened to "
                  "land on it exactly"),
             0, 1e18),
      ranged(spec("fgm.eps_outer", T::kFloat, "0.001",
                  "stop when the SIP violation (37) of the last solve is at most this fraction of "
                  "the objective (a relative gap of the cutting-plane relaxation; 0: never)"),
             0, 1),
      choices(spec("fgm.multiclass", T::kEnum, "\"ovr\"",
                   "a store with more than two labels: one-vs-rest, one binary FGM run per class "
                   "(that class +1, the rest -1; no effect on a two-label store)"),
              {"ovr"}),
      spec("fgm.final_certificate", T::kBool, "true",
           "after the last solve, run one more scoring pass to report the final SIP violation (37)"),
      ranged(spec("mslr.C", T::kFloat, "10.0",
                  "MSLR (solver = \"mslr\"): loss weight C of the minimax sparse logistic regression (4); "
                  "the dual variables live in (0, C)"),
             0, 1e12, true),
      ranged(spec("mslr.r", T::kInt, "10",
                  "MSLR: features per constraint d^t (the paper's r): each cutting-plane iteration adds the "
                  "r features with the largest c_j² (selected ones included), so at most r new features"),
             1, 1e9),
      ranged(spec("mslr.max_iterations", T::kInt, "10", "MSLR: cutting-plane iterations T_m (at most r·T_m features); fgm path raises the default to what "
                  "mslr.features needs and refuses a smaller value set by the user"),
             1, 64),
      ranged(spec("mslr.max_features", T::kInt, "0",
                  "MSLR: stop once this many features are selected (0: no cap); the last constraint admits "
                  "only as many new features as fit"),
             0, 1e18),
      ranged(spec("mslr.eps_outer", T::kFloat, "0.001",
                  "MSLR: stop when the SIP violation of the last α is at most this fraction of the "
                  "subproblem's objective (0: never)"),
             0, 1),
      ranged(spec("mslr.q0", T::kFloat, "0.01", "MSLR (mslr.subproblem = smoothing): first smoothing parameter q of each subproblem"), 0, 1e12,
             true),
      ranged(spec("mslr.q_factor", T::kFloat, "1.6666666666666667",
                  "MSLR (smoothing): q grows by this factor after each smoothing stage (the paper's β = 5/3)"),
             1, 1e6, true),
      ranged(spec("mslr.q_max", T::kFloat, "10000",
                  "MSLR (smoothing): largest q; a subproblem that reaches it without mslr.tolerance warns "
                  "(mslr_not_converged)"),
             0, 1e15, true),
      ranged(spec("mslr.tolerance", T::kFloat, "0.001",
                  "MSLR: a subproblem ends when its certified relative gap (P − D)/P is at most this, by either "
                  "mslr.subproblem (solvers/mslr/latent_newton.h, smoothed_minimax.h)"),
             0, 1),
      ranged(spec("mslr.gradient_tolerance", T::kFloat, "0.001",
                  "MSLR (smoothing): a smoothing stage ends when no coordinate's |∂f(α,q)/∂α_i| exceeds this in a sweep"),
             0, 1e6, true),
      ranged(spec("mslr.max_sweeps", T::kInt, "100", "MSLR (smoothing): coordinate-descent sweeps per smoothing stage at most"), 1,
             1e9),
      choices(spec("mslr.order", T::kEnum, "\"shuffled\"",
                   "MSLR (smoothing): row order of the coordinate sweeps: shuffled (a new seeded permutation per sweep, "
                   "as LIBLINEAR; the same on every run) or cyclic (the paper's; stalls on data with many "
                   "identical rows)"),
              {"shuffled", "cyclic"}),
      choices(spec("mslr.subproblem", T::kEnum, "\"newton\"",
                   "MSLR: how each subproblem is solved: newton (proximal Newton on its primal, the latent "
                   "squared group norm with one group per constraint; solvers/mslr/latent_newton.h) or "
                   "smoothing (the paper's smoothing coordinate descent, mslr.q0 .. mslr.order); both stop on "
                   "the same certified gap mslr.tolerance"),
              {"newton", "smoothing"}),
      ranged(spec("mslr.newton_max_iterations", T::kInt, "500",
                  "MSLR with mslr.subproblem = \"newton\": Newton steps per subproblem at most (a subproblem "
                  "that stops there above mslr.tolerance warns, mslr_not_converged)"),
             1, 1e9),
      ranged(spec("mslr.features", T::kIntList, "[]",
                  "fgm path with solver = \"mslr\": feature counts to produce models at, in one run "
                  "(increasing; the constraint that reaches a count admits only the new features that fit; the "
                  "counts decide where the run ends, so mslr.eps_outer does not stop a path)"),
             1, 1e18),
      choices(spec("apg.method", T::kEnum, "\"auto\"",
                   "how the subproblem (31) is solved: apg (accelerated proximal gradient, Algorithm 4), "
                   "newton (proximal Newton over the selected columns' rows, stops on its certified duality "
                   "gap; at most 2048 selected columns) or auto (newton up to 2048 columns, apg beyond)"),
              {"apg", "newton", "auto"}),
      ranged(spec("apg.eps_inner", T::kFloat, "0.15",
                  "APG stop: the prox-gradient mapping norm falls to this fraction of its value "
                  "at the solve's first iteration (scale-free; run.json reports each solve's "
                  "certified relative duality gap)"),
             0, 1, true),
      ranged(spec("apg.gap_tolerance", T::kFloat, "1e-3",
                  "certified APG solves (the final solve of every run, path point, de-biased refit, fold "
                  "and class) stop when the relative duality gap (F − D)/F is at most this; such a solve "
                  "is reported converged only then (intermediate solves stop on apg.eps_inner)"),
             0, 1, true),
      ranged(spec("apg.intermediate_gap", T::kFloat, "1e-2",
                  "intermediate solves of the proximal Newton solver (apg.method newton, or auto up to 2048 "
                  "columns; the paper's Inexact FGM) stop when their certified relative duality gap is at most "
                  "this (never tighter than apg.gap_tolerance; set it there to solve every solve to that) and "
                  "are recorded inexact with their gap (the APG's intermediate solves stop on apg.eps_inner)"),
             0, 1, true),
      ranged(spec("apg.eta", T::kFloat, "0.5", "APG line-search factor η"), 0, 0.999, true),
      ranged(spec("apg.max_iterations", T::kInt, "2000",
                  "APG iteration cap per solve, inexact and certified alike (a certified solve that reaches "
                  "it above apg.gap_tolerance is a run warning)"),
             1, 1e9),
      ranged(spec("engine.threads", T::kInt, "1",
                  "worker threads (results are identical for any value)"),
             1, 1024),
      spec("engine.memory_budget", T::kBytes, "\"1GB\"",
           "memory budget for every large allocation (ingest buffers, labels, dual "
           "variables, caches, blocks in flight)"),
      spec("engine.block_bytes", T::kBytes, "\"4MB\"",
           "target size of the unit the scoring pass streams: consecutive stored blocks of a "
           "shard are grouped up to it (a stored block bigger than it is read whole; its "
           "size was chosen at ingest, store.block_bytes); a store kept resident in memory is "
           "scored in units of up to 16 bytes per row (at most engine.memory_budget / 16), so "
           "each tile's slice of the dual vector serves more columns"),
      ranged(spec("engine.blocks_in_flight", T::kInt, "0",
                  "column blocks in flight in the scoring pipeline (0: 2·threads + 2)"),
             0, 1024),
      spec("store.max_bytes", T::kBytes, "\"1TB\"",
           "ingest (of data.train text into engine.cache_dir) refuses a store estimated larger "
           "than this; the free space of the target file system is always checked too"),
      ranged(spec("store.tile_rows", T::kInt, "65536",
                  "ingest (of data.train text into engine.cache_dir): rows per tile of the "
                  "stored column blocks; the scoring pass keeps 8 bytes per tile row in L2"),
             1, 2147483647),
      spec("store.block_bytes", T::kBytes, "\"16MB\"",
           "ingest (of data.train text into engine.cache_dir): target size of a stored column "
           "block (a column bigger than it is a block of its own)"),
      spec("engine.cache_dir", T::kPath, "\".fgm-cache\"",
           "where `fgm train` keeps stores ingested from raw text, keyed by the input's hash"),
      choices(spec("engine.progress", T::kEnum, "\"auto\"",
                   "progress bars on stderr: auto (only on a terminal), on, off"),
              {"auto", "on", "off"}),
      spec("features.groups", T::kPath, "",
           "group file: one line per group, whitespace-separated feature ids (as in the "
           "data, index_base applies); selection is by group. Groups may be disjoint, "
           "overlap or nest (features.group_structure); only with features.kind = linear"),
      choices(spec("features.group_structure", T::kEnum, "\"disjoint\"",
                   "structure of the groups in features.groups: disjoint, overlapping "
                   "(augmented copies) or tree (nested groups, searched with Remark 2 pruning)"),
              {"disjoint", "overlapping", "tree"}),
      spec("features.tree_pruning", T::kBool, "true",
           "group_structure = tree: skip a subtree whose root scores below the current B-th best "
           "(Remark 2; exact, the selection is the same); false scores every group each pass, "
           "to measure what the pruning saves. Single-store FGM runs only"),
      choices(spec("features.kind", T::kEnum, "\"linear\"",
                   "feature space to select from: base features, or generated on the fly "
                   "(poly2: degree-2 polynomial map of Section 6.2; hik, additive: kernel "
                   "expansions of Section 6.1, one group per base feature)"),
              {"linear", "poly2", "hik", "additive"}),
      ranged(spec("features.gamma", T::kFloat, "1.0", "poly2: γ of the kernel (γ x'z + r)²"), 0, 1e12, true),
      ranged(spec("features.coef0", T::kFloat, "1.0",
                  "poly2: r of the kernel (γ x'z + r)²; 0 drops the linear features"),
             0, 1e12),
      ranged(spec("features.levels", T::kInt, "100",
                  "hik: generated features per base feature (r of Wu's expansion; "
                  "|φ(x)'φ(z) − min(x,z)| ≤ 1/(4r) on the scaled values)"),
             1, 1e6),
      ranged(spec("features.order", T::kInt, "5",
                  "additive: order n of the Vedaldi-Zisserman map, 2n+1 generated features "
                  "per base feature"),
             1, 50),
      ranged(spec("features.period", T::kFloat, "0",
                  "additive: sampling period L of the map; 0 picks the L with the smallest "
                  "worst-case kernel error on [0,1]² for the kernel and order (0.377 for chi2, "
                  "0.748 for intersection at order 5)"),
             0, 100),
      choices(spec("features.kernel", T::kEnum, "\"chi2\"",
                   "additive: kernel approximated per feature, chi2 (2xz/(x+z)) or "
                   "intersection (min(x,z))"),
              {"chi2", "intersection"}),
      choices(spec("features.transform", T::kStringList, "[]",
                   "transforms of the base feature values, applied in order while streaming "
                   "(nothing is materialised) and recorded in the model so predict applies them "
                   "to raw rows: log1p (sign(x)·log(1+|x|)), binary (x≠0 → 1), maxabs (x_ij / "
                   "max_i |x_ij|, to [-1,1]), scale (x_ij / sqrt(Σ_i x_ij²/n), unit uncentred "
                   "standard deviation, sparsity kept), tfidf (x_ij · (log((1+n)/(1+df_j)) + 1), "
                   "df_j = rows where feature j is nonzero), row_l2 / row_l1 (each row divided by "
                   "its ℓ2 / ℓ1 norm over all its features). Statistics are taken from the "
                   "training store after the preceding stages and cached in the store directory"),
              {"log1p", "binary", "maxabs", "scale", "tfidf", "row_l2", "row_l1"}),
      ranged(spec("path.features", T::kIntList, "[]",
                  "fgm path: counts to produce models at, in one run (increasing); counted "
                  "as fgm.max_features counts (features, or groups for grouped spaces)"),
             1, 1e18),
      ranged(spec("path.B", T::kIntList, "[]", "fgm path: values of fgm.B, one run each"), 1, 1e9),
      ranged(spec("path.C", T::kFloatList, "[]", "fgm path: values of fgm.C, one run each"), 0,
             1e12, true),
      spec("path.debias", T::kBool, "true",
           "fgm path: also refit an l2-regularised model on each point's selected features "
           "(Section 5.3 de-biasing) and report both"),
      ranged(spec("path.debias_C", T::kFloat, "0",
                  "C of the de-biasing refit (0: use fgm.C)"),
             0, 1e12),
      ranged(spec("path.folds", T::kInt, "0",
                  "fgm path: k-fold cross-validation over the path's points (0 or 1: off); "
                  "stratified folds of the training rows, the chosen point by the "
                  "one-standard-error rule on the mean held-out accuracy; solver = pnorm_kta: chooses "
                  "the path point, kta.lambda1, kta.lambda2 and kta.C (their _grid keys) by the "
                  "held-out accuracy over all folds"),
             0, 100),
      ranged(spec("path.fold_seed", T::kInt, "1",
                  "fgm path (fgm and pnorm_kta): seed of the cross-validation folds (the same seed "
                  "gives the same folds)"),
             0, 1e18),
      // solver = "pnorm_kta" (engine/pnorm_kta_path.h, seed 004).
      choices(spec("kta.kernel", T::kEnum, "\"linear\"",
                   "pnorm_kta: base kernel of each feature, centred and trace-normalised on the training "
                   "rows: linear (x_i z_i) or rbf (exp(-(x_i - z_i)^2 / (2 h_i^2)), h_i the median "
                   "distance between the feature's distinct values; O(n^2) time per feature at most)"),
              {"linear", "rbf"}),
      ranged(spec("kta.lambda1", T::kFloat, "0.01",
                  "pnorm_kta: lambda1 of lambda1*eta^2 + lambda2*eta^p - a_i*eta (the alignments a_i "
                  "are squared correlations in [0, 1])"),
             0, 1e12, true),
      ranged(spec("kta.lambda2", T::kFloat, "0.01",
                  "pnorm_kta: lambda2 of the l_p term; feature i is selected at p when a_i > "
                  "2*lambda1*epsilon + lambda2*p*epsilon^(p-1)"),
             0, 1e12),
      ranged(spec("kta.epsilon", T::kFloat, "0.05",
                  "pnorm_kta: kernel weights below epsilon are set to 0 for the rest of the path "
                  "(must be below 1/e)"),
             0, 0.36787944117144233, true),
      ranged(spec("kta.p_start", T::kFloat, "2.0", "pnorm_kta: first p of the path"), 1, 2),
      ranged(spec("kta.p_end", T::kFloat, "1.0", "pnorm_kta, fgm path: last p of the path (<= kta.p_start)"),
             1, 2),
      ranged(spec("kta.p_step", T::kFloat, "0.01", "pnorm_kta: step of p along the path"), 0, 1, true),
      ranged(spec("kta.p", T::kFloat, "1.5",
                  "pnorm_kta, fgm train: the p whose selection the model holds (the path runs from "
                  "kta.p_start down to it; rbf: the model is a kernel SVM)"),
             1, 2),
      ranged(spec("kta.C", T::kFloat, "1.0",
                  "pnorm_kta: loss weight C of the SVM on the selected features (linear: squared "
                  "hinge by APG; rbf: LIBSVM C-SVC); the combined kernel has mean diagonal 1"),
             0, 1e12, true),
      ranged(spec("kta.lambda1_grid", T::kFloatList, "[]",
                  "pnorm_kta, fgm path with path.folds >= 2: values of kta.lambda1 the cross-validation "
                  "chooses from ([]: kta.lambda1 only)"),
             0, 1e12, true),
      ranged(spec("kta.lambda2_grid", T::kFloatList, "[]",
                  "pnorm_kta, fgm path with path.folds >= 2: values of kta.lambda2 the cross-validation "
                  "chooses from ([]: kta.lambda2 only)"),
             0, 1e12),
      ranged(spec("kta.C_grid", T::kFloatList, "[]",
                  "pnorm_kta, fgm path with path.folds >= 2: values of kta.C the cross-validation "
                  "chooses from ([]: kta.C only)"),
             0, 1e12, true),
      // SIFS (solvers/sifs/, seed 003): grid of fgm path, point of fgm train.
      ranged(spec("sifs.beta_max_ratio", T::kFloat, "1",
                  "fgm path, solver = sifs: largest beta / beta_max of the grid"),
             0, 1, true),
      ranged(spec("sifs.beta_min_ratio", T::kFloat, "0.05",
                  "fgm path, solver = sifs: smallest beta / beta_max of the grid"),
             0, 1, true),
      ranged(spec("sifs.beta_points", T::kInt, "10",
                  "fgm path, solver = sifs: log-spaced beta values from beta_max_ratio to beta_min_ratio"),
             1, 1e6),
      ranged(spec("sifs.alpha_min_ratio", T::kFloat, "0.01",
                  "fgm path, solver = sifs: smallest alpha / alpha_max(beta) of each beta's path"),
             0, 1, true),
      ranged(spec("sifs.alpha_points", T::kInt, "100",
                  "fgm path, solver = sifs: log-spaced alpha values per beta, from alpha_max(beta) "
                  "(the closed form) down to alpha_min_ratio"),
             1, 1e6),
      ranged(spec("sifs.beta_ratio", T::kFloat, "0.5",
                  "fgm train, solver = sifs: beta / beta_max of the one model"),
             0, 1, true),
      ranged(spec("sifs.alpha_ratio", T::kFloat, "0.1",
                  "fgm train, solver = sifs: alpha / alpha_max(beta) of the one model (solved from the "
                  "closed form at alpha_max(beta) in sifs.alpha_points log-spaced steps)"),
             0, 1, true),
      ranged(spec("sifs.gamma", T::kFloat, "0.05", "solver = sifs: smoothing gamma of the smoothed hinge"),
             0, 1, true),
      ranged(spec("sifs.tol", T::kFloat, "1e-9",
                  "solver = sifs: duality gap every solve reaches (absolute, on the objective of (P))"),
             0, 1, true),
      ranged(spec("sifs.max_epochs", T::kInt, "20000",
                  "solver = sifs: SDCA epochs per grid point before the point is reported as not "
                  "converged (with its gap)"),
             1, 1e9),
      spec("sifs.compare", T::kBool, "false",
           "fgm path, solver = sifs: also solve the grid with sifs.screening = none and record the "
           "speedup in path.json"),
      choices(spec("sifs.screening", T::kEnum, "\"sifs\"",
                   "solver = sifs: screening rules: sifs = IFS and ISS alternated, ifs = features only, "
                   "iss = samples only, none = the same solver on the whole problem"),
              {"sifs", "ifs", "iss", "none"}),
      // solver = "exclusive" (seed 002, solvers/exclusive/): (λ/2)‖w‖_e² with groups.
      choices(spec("exclusive.algorithm", T::kEnum, "\"pcp\"",
                   "exclusive: Fista-pcp (any groups, squared or logistic loss), Fista-locp (disjoint "
                   "groups, squared or logistic), Fista-licp (E-SVM: squared hinge, or the paper's "
                   "hinge, + (ridge/2)|w|^2, any groups)"),
              {"pcp", "locp", "licp"}),
      choices(spec("exclusive.loss", T::kEnum, "\"logistic\"",
                   "exclusive: loss summed over the rows: squared ½(w'x − y)², logistic "
                   "log(1 + exp(−y w'x)) (the default of pcp and locp), hinge max(0, 1 − y w'x) (licp only; the "
                   "paper's E-SVM), squared_hinge max(0, 1 − y w'x)² (licp only, and licp's default; the L2-SVM "
                   "loss of LIBLINEAR -s 5); w'x + b with exclusive.bias"),
              {"squared", "logistic", "hinge", "squared_hinge"}),
      spec("exclusive.bias", T::kBool, "false",
           "exclusive: learn an unregularised bias b, margins w'x + b; the model's decision value w'x + b"),
      ranged(spec("exclusive.lambda", T::kFloat, "1.0",
                  "exclusive: λ of (λ/2)‖w‖_e², ‖w‖_e² = Σ_g ‖w_g‖₁² (β of E-SVM (10))"),
             0, 1e15, true),
      ranged(spec("exclusive.ridge", T::kFloat, "1.0", "exclusive: α of E-SVM (10), (α/2)‖w‖² (licp only)"),
             0, 1e15, true),
      ranged(spec("exclusive.random_groups", T::kInt, "0",
                  "exclusive: split the features uniformly at random into this many groups of equal "
                  "size (±1) (0: features.groups or exclusive.expected_relevant decide)"),
             0, 1e15),
      ranged(spec("exclusive.expected_relevant", T::kInt, "0",
                  "exclusive: s, the expected number of relevant features: random groups, "
                  "m = round(s / ln s) of them (Theorem 5)"),
             0, 1e15),
      ranged(spec("exclusive.group_seed", T::kInt, "1", "exclusive: seed of the random groups"), 0, 1e18),
      ranged(spec("exclusive.path_random_groups", T::kIntList, "[]",
                  "exclusive, fgm path: group counts m to try: the λ path of exclusive.path_lambda once per m, "
                  "each with its own m random groups (seed exclusive.group_seed); with data.validation the "
                  "one-SE rule chooses among all (m, λ) points (Theorem 5's m is a guess: m = s / ln s)"),
             1, 1e15),
      ranged(spec("exclusive.tolerance", T::kFloat, "1e-6",
                  "exclusive: stop FISTA when ‖x_k − x_(k−1)‖ ≤ tolerance·‖x_k‖ (pcp, locp) or the "
                  "duality gap of (10) ≤ tolerance·max(1, P) (licp)"),
             0, 1, true),
      ranged(spec("exclusive.max_iterations", T::kInt, "10000", "exclusive: FISTA iterations per solve"), 1,
             1e9),
      spec("exclusive.working_set", T::kBool, "true",
           "exclusive: iterate on the features that can be nonzero, verify with a full streamed pass "
           "and add violators (false: every FISTA iteration streams the store)"),
      ranged(spec("exclusive.working_set_growth", T::kInt, "100",
                  "exclusive: features added per working-set round (at most max(this, |W|))"),
             1, 1e12),
      ranged(spec("exclusive.kkt_tolerance", T::kFloat, "1e-4",
                  "exclusive: a zero weight violates optimality when |gradient| exceeds its "
                  "threshold by more than this times the largest |gradient| at w = 0"),
             0, 1, true),
      ranged(spec("exclusive.path_lambda", T::kFloatList, "[]",
                  "exclusive, fgm path: values of exclusive.lambda, one model each, in the order given"),
             0, 1e15, true),
      spec("exclusive.debias", T::kBool, "false",
           "exclusive, fgm path: also refit an l2-regularised squared-hinge SVM, ½‖w‖² + (C/2)Σ max(0, 1 − "
           "y(w'x + b))², on each λ's nonzero weights (FGM's de-biasing, engine/debias.h; "
           "C = exclusive.debias_C, b with exclusive.bias) and report both (point-<k>-debiased.fgm)"),
      ranged(spec("exclusive.debias_C", T::kFloat, "1.0", "exclusive, fgm path: C of the de-biasing refit"), 0,
             1e12, true),
      spec("exclusive.path_warm_start", T::kBool, "true",
           "exclusive, fgm path: start each λ from the previous λ's weights, working set and ‖X‖² "
           "estimate (false: every λ starts from zero)"),
  };
}

std::string type_name(ParamType t) {
  switch (t) {
    case ParamType::kInt: return "an integer";
    case ParamType::kFloat: return "a number";
    case ParamType::kBool: return "a boolean (true/false)";
    case ParamType::kString: return "a string";
    case ParamType::kPath: return "a path (string)";
    case ParamType::kBytes: return "a size such as \"256MB\"";
    case ParamType::kEnum: return "a string";
    case ParamType::kIntList: return "an array of integers";
    case ParamType::kFloatList: return "an array of numbers";
    case ParamType::kStringList: return "an array of strings";
  }
  return "a value";
}

std::string node_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::string: return "a string";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date/time";
  }
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (std::tolower(a[i - 1]) == std::tolower(b[j - 1]) ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string suggest(const std::string& key) {
  std::string best;
  size_t best_d = 4;
  for (const auto& s : param_specs()) {
    size_t d = edit_distance(key, s.key);
    if (d < best_d) {
      best_d = d;
      best = s.key;
    }
  }
  return best;
}

std::string number_text(double v) {
  if (std::floor(v) == v && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

// A bound as the check uses it: a power of ten from 1e6 up is written 1e<k>
// (1e12, not "∞": the check refuses what lies above it).
std::string bound_text(double v) {
  if (std::isinf(v)) return "∞";
  if (v >= 1e6) {
    const int exponent = static_cast<int>(std::lround(std::log10(v)));
    if (std::pow(10.0, exponent) == v) return fmt::format("1e{}", exponent);
  }
  return number_text(v);
}

std::string range_text(const ParamSpec& s) {
  if (!s.has_range) return "";
  return fmt::format("{}{}, {}]", s.min_exclusive ? "(" : "[", bound_text(s.min), bound_text(s.max));
}

// Validates and converts one TOML node for spec `s`. `where` is the location prefix.
ParamValue convert(const ParamSpec& s, const toml::node& node, const std::string& where,
                   const std::string& source, const std::filesystem::path& base_dir) {
  ParamValue v;
  v.type = s.type;
  v.source = source;
  v.set = true;
  auto fail_type = [&]() {
    throw Error(ErrorKind::kConfig, msg::wrong_type(where, s.key, type_name(s.type), node_type_name(node)));
  };
  auto check_range = [&](double x, const std::string& text) {
    if (!s.has_range) return;
    bool low = s.min_exclusive ? !(x > s.min) : !(x >= s.min);
    if (low || x > s.max || std::isnan(x))
      throw Error(ErrorKind::kConfig, msg::out_of_range(where, s.key, text, range_text(s)));
  };
  // Above 2^53 a double cannot tell max + 1 from max: integers are also
  // compared as integers.
  auto check_int_range = [&](int64_t x) {
    check_range(static_cast<double>(x), std::to_string(x));
    if (s.has_range && s.max < 9.2e18 && x > static_cast<int64_t>(s.max))
      throw Error(ErrorKind::kConfig, msg::out_of_range(where, s.key, std::to_string(x), range_text(s)));
  };
  switch (s.type) {
    case ParamType::kInt: {
      auto x = node.value_exact<int64_t>();
      if (!x) fail_type();
      v.i = *x;
      check_int_range(v.i);
      break;
    }
    case ParamType::kFloat: {
      auto x = node.value<double>();
      if (!x || !(node.is_floating_point() || node.is_integer())) fail_type();
      v.f = *x;
      if (!std::isfinite(v.f))
        throw Error(ErrorKind::kConfig, msg::out_of_range(where, s.key, number_text(v.f), range_text(s)));
      check_range(v.f, fmt::format("{}", v.f));
      break;
    }
    case ParamType::kBool: {
      auto x = node.value_exact<bool>();
      if (!x) fail_type();
      v.b = *x;
      break;
    }
    case ParamType::kString:
    case ParamType::kPath:
    case ParamType::kEnum: {
      auto x = node.value_exact<std::string>();
      if (!x) fail_type();
      v.s = *x;
      if (s.type == ParamType::kEnum &&
          std::find(s.choices.begin(), s.choices.end(), v.s) == s.choices.end()) {
        std::string allowed;
        for (const auto& c : s.choices) allowed += (allowed.empty() ? "" : ", ") + c;
        throw Error(ErrorKind::kConfig, msg::bad_enum(where, s.key, v.s, allowed));
      }
      if (s.type == ParamType::kPath && !v.s.empty()) {
        std::filesystem::path p(v.s);
        if (p.is_relative() && !base_dir.empty()) v.s = (base_dir / p).lexically_normal().string();
      }
      break;
    }
    case ParamType::kBytes: {
      if (auto x = node.value_exact<std::string>()) {
        v.i = static_cast<int64_t>(parse_byte_size(*x, where + s.key));
        v.s = *x;
      } else if (auto y = node.value_exact<int64_t>()) {
        if (*y <= 0) throw Error(ErrorKind::kConfig, msg::out_of_range(where, s.key, std::to_string(*y), "> 0"));
        v.i = *y;
        v.s = std::to_string(*y);
      } else {
        fail_type();
      }
      break;
    }
    case ParamType::kIntList:
    case ParamType::kFloatList: {
      const toml::array* arr = node.as_array();
      if (!arr) fail_type();
      for (const auto& el : *arr) {
        if (s.type == ParamType::kIntList) {
          auto x = el.value_exact<int64_t>();
          if (!x) fail_type();
          check_int_range(*x);
          v.list.push_back(static_cast<double>(*x));
        } else {
          auto x = el.value<double>();
          if (!x || !(el.is_integer() || el.is_floating_point())) fail_type();
          check_range(*x, fmt::format("{}", *x));
          v.list.push_back(*x);
        }
      }
      break;
    }
    case ParamType::kStringList: {
      const toml::array* arr = node.as_array();
      if (!arr) fail_type();
      std::string allowed;
      for (const auto& c : s.choices) allowed += (allowed.empty() ? "" : ", ") + c;
      for (size_t k = 0; k < arr->size(); ++k) {
        auto x = (*arr)[k].value_exact<std::string>();
        if (!x) fail_type();
        if (std::find(s.choices.begin(), s.choices.end(), *x) == s.choices.end())
          throw Error(ErrorKind::kConfig, msg::bad_list_element(where, s.key, k, *x, allowed));
        v.strings.push_back(*x);
      }
      break;
    }
  }
  return v;
}

std::string where_of(const std::string& path, const toml::source_region& region) {
  return msg::location(path, region.begin.line, region.begin.column);
}

// The most parts a dotted key may have. Every declared key has one or two; a
// deeper one cannot name a key, and toml++ builds (and destroys) one nested
// table per part, recursively: 20,000 parts overflow the stack.
constexpr size_t kMaxKeyParts = 16;

// Finds a chain of dot-separated key parts (bare words or quoted strings,
// `a . "b".c`) longer than kMaxKeyParts anywhere outside strings and comments
// (a table header, a key, an inline table's key), before toml++ sees it;
// throws kConfig naming its line and column. Values pass: a number has one
// dot, and anything that is not part of a key chain (=, comma, brackets,
// newline, #) ends the chain.
void reject_deep_keys(const std::string& text, const std::string& path) {
  uint64_t line = 1, column = 1, chain_line = 0, chain_column = 0;
  size_t dots = 0;
  bool in_chain = false;  // a key part or dot seen since the last separator
  auto bare = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '+'; };
  auto advance = [&](size_t& i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
    ++i;
  };
  auto chain_part = [&] {
    if (in_chain) return;
    in_chain = true;
    chain_line = line;
    chain_column = column;
  };
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '"' || c == '\'') {  // a string: skip it whole (it may be a key part)
      chain_part();
      const bool multi = text.compare(i, 3, std::string(3, c)) == 0;
      const std::string close = multi ? std::string(3, c) : std::string(1, c);
      for (size_t n = 0; n < close.size(); ++n) advance(i);
      while (i < text.size() && text.compare(i, close.size(), close) != 0) {
        if (!multi && text[i] == '\n') break;  // unterminated: toml++ reports it
        if (c == '"' && text[i] == '\\' && i + 1 < text.size()) advance(i);
        advance(i);
      }
      for (size_t n = 0; n < close.size() && i < text.size(); ++n) advance(i);
      continue;
    }
    if (c == '#') {  // a comment runs to the end of the line
      while (i < text.size() && text[i] != '\n') advance(i);
      continue;
    }
    if (c == '.') {
      chain_part();
      if (++dots >= kMaxKeyParts)
        throw Error(ErrorKind::kConfig,
                    msg::config_syntax(msg::location(path, chain_line, chain_column),
                                       fmt::format("a dotted key of more than {} parts; every key of fgm has one or "
                                                   "two (see fgm --help-config)",
                                                   kMaxKeyParts)));
    } else if (bare(c)) {
      chain_part();
    } else if (c != ' ' && c != '\t') {
      dots = 0;
      in_chain = false;
    }
    advance(i);
  }
}

void walk(const toml::table& table, const std::string& prefix, const std::string& path,
          const std::filesystem::path& base_dir, std::map<std::string, ParamValue>& out, size_t depth = 1) {
  for (auto&& [k, node] : table) {
    std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const toml::table* sub = node.as_table()) {
      if (depth >= kMaxKeyParts)  // reject_deep_keys stops these first; never recurse without bound
        throw Error(ErrorKind::kConfig, msg::unknown_key(where_of(path, k.source()), key.substr(0, 200), ""));
      walk(*sub, key, path, base_dir, out, depth + 1);
      continue;
    }
    std::string where = where_of(path, node.source());
    const ParamSpec* s = find_param(key);
    if (!s)  // point at the key itself
      throw Error(ErrorKind::kConfig, msg::unknown_key(where_of(path, k.source()), key, suggest(key)));
    std::string source = fmt::format("{}:{}:{}", path, node.source().begin.line,
                                     node.source().begin.column);
    out[key] = convert(*s, node, where, source, base_dir);
  }
}

}  // namespace

const std::vector<ParamSpec>& param_specs() {
  static const std::vector<ParamSpec> specs = build_specs();
  return specs;
}

const ParamSpec* find_param(const std::string& key) {
  for (const auto& s : param_specs())
    if (s.key == key) return &s;
  return nullptr;
}

std::string describe_params() {
  std::ostringstream out;
  for (const auto& s : param_specs()) {
    out << s.key << "  (" << type_name(s.type);
    if (!s.default_value.empty()) out << ", default " << s.default_value;
    if (s.has_range) out << ", range " << range_text(s);
    if (!s.choices.empty()) {
      out << ", one of";
      for (const auto& c : s.choices) out << " " << c;
    }
    out << ")\n    " << s.description << "\n";
  }
  return out.str();
}

Config::Config() {
  for (const auto& s : param_specs()) {
    if (s.default_value.empty()) {
      ParamValue v;
      v.type = s.type;
      v.source = "default";
      values_[s.key] = v;
      continue;
    }
    auto parsed = toml::parse("v = " + s.default_value);
    ParamValue v = convert(s, *parsed.get("v"), "default ", "default", {});
    v.source = "default";
    values_[s.key] = v;
  }
}

Config Config::load(const std::string& path, const std::vector<std::string>& overrides) {
  Config config;
  if (!path.empty()) {
    check_input_file(path, "--config");  // a directory would parse as an empty table
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(ErrorKind::kIo, msg::cannot_open(path, std::strerror(errno)));
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw Error(ErrorKind::kIo, msg::read_failed(path, std::strerror(errno)));
    reject_deep_keys(text, path);
    toml::table table;
    try {
      table = toml::parse(text, path);
    } catch (const toml::parse_error& e) {
      throw Error(ErrorKind::kConfig,
                  msg::config_syntax(where_of(path, e.source()), std::string(e.description())));
    }
    std::filesystem::path base = std::filesystem::absolute(path).parent_path();
    std::map<std::string, ParamValue> found;
    walk(table, "", path, base, found);
    for (auto& [k, v] : found) config.values_[k] = v;
  }
  for (const auto& o : overrides) config.apply_override(o);
  return config;
}

void Config::apply_override(const std::string& argument) {
  auto eq = argument.find('=');
  if (eq == std::string::npos || eq == 0) throw Error(ErrorKind::kConfig, msg::bad_override(argument));
  std::string key = argument.substr(0, eq);
  std::string text = argument.substr(eq + 1);
  std::string where = "command line: ";
  const ParamSpec* s = find_param(key);
  if (!s) throw Error(ErrorKind::kConfig, msg::unknown_key(where, key, suggest(key)));
  if (text.empty()) {
    // `key=`: back to the default, as if neither the file nor an earlier
    // override had set it (so a file's value can be cleared without editing it).
    values_[key] = Config().values_.at(key);
    return;
  }
  toml::table parsed;
  bool ok = true;
  // One override is one key and one value: a line break would let TOML read a
  // second key (or a comment) that the user believes is part of the value.
  for (char ch : argument)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f)
      throw Error(ErrorKind::kConfig, msg::override_not_one_value(argument, "it holds a control character (line break, tab, ...)"));
  try {
    parsed = toml::parse("v = " + text);
  } catch (const toml::parse_error&) {
    ok = false;
  }
  if (ok) {
    // Whatever TOML read after the value (a comment, another key) is refused.
    const toml::node* node = parsed.get("v");
    const auto end = node ? node->source().end : toml::source_position{};
    std::string rest;
    if (parsed.size() == 1 && node && end.line == 1 && end.column >= 5) {
      // toml++ counts columns in code points: skip that many UTF-8 sequences.
      size_t code_points = static_cast<size_t>(end.column - 1) - 4;  // "v = " is 4 characters
      size_t byte = 0;
      while (byte < text.size() && code_points > 0) {
        ++byte;
        while (byte < text.size() && (static_cast<unsigned char>(text[byte]) & 0xC0) == 0x80) ++byte;
        --code_points;
      }
      rest = text.substr(byte);
    } else {
      rest = text;
    }
    if (rest.find_first_not_of(" ") != std::string::npos)
      throw Error(ErrorKind::kConfig, msg::override_not_one_value(argument, fmt::format("'{}' follows the value", rest.substr(rest.find_first_not_of(" ")))));
  }
  if (!ok) {
    // A bare word (logistic, out/run1) is read as a string.
    parsed = toml::table{};
    parsed.insert("v", text);
  }
  values_[key] = convert(*s, *parsed.get("v"), where, "command line", {});
}

const ParamValue& Config::value(const std::string& key, ParamType expected) const {
  auto it = values_.find(key);
  FGM_ASSERT(it != values_.end());
  (void)expected;
  return it->second;
}

bool Config::is_set(const std::string& key) const {
  auto it = values_.find(key);
  return it != values_.end() && it->second.set;
}
bool Config::set_by_user(const std::string& key) const {
  auto it = values_.find(key);
  FGM_ASSERT(it != values_.end());
  const ParamValue& v = it->second;
  if (!v.set || v.source == "default") return false;
  switch (v.type) {
    case ParamType::kString:
    case ParamType::kPath: return !v.s.empty();
    case ParamType::kIntList:
    case ParamType::kFloatList: return !v.list.empty();
    case ParamType::kStringList: return !v.strings.empty();
    default: return true;
  }
}
std::string Config::where_set(const std::string& key) const { return source(key) + ": "; }
int64_t Config::get_int(const std::string& key) const { return value(key, ParamType::kInt).i; }
double Config::get_float(const std::string& key) const { return value(key, ParamType::kFloat).f; }
bool Config::get_bool(const std::string& key) const { return value(key, ParamType::kBool).b; }
std::string Config::get_string(const std::string& key) const { return value(key, ParamType::kString).s; }
uint64_t Config::get_bytes(const std::string& key) const {
  return static_cast<uint64_t>(value(key, ParamType::kBytes).i);
}
std::vector<double> Config::get_list(const std::string& key) const { return value(key, ParamType::kIntList).list; }
std::vector<std::string> Config::get_string_list(const std::string& key) const {
  return value(key, ParamType::kStringList).strings;
}
const std::string& Config::source(const std::string& key) const { return value(key, ParamType::kString).source; }

std::map<std::string, std::string> Config::dump() const {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : values_) {
    if (!v.set) continue;
    switch (v.type) {
      case ParamType::kInt: out[k] = std::to_string(v.i); break;
      case ParamType::kFloat: out[k] = fmt::format("{}", v.f); break;
      case ParamType::kBool: out[k] = v.b ? "true" : "false"; break;
      case ParamType::kBytes: out[k] = std::to_string(v.i); break;
      case ParamType::kIntList:
      case ParamType::kFloatList: {
        std::string s = "[";
        for (size_t i = 0; i < v.list.size(); ++i) s += (i ? ", " : "") + fmt::format("{}", v.list[i]);
        out[k] = s + "]";
        break;
      }
      case ParamType::kStringList: {
        std::string s = "[";
        for (size_t i = 0; i < v.strings.size(); ++i) s += (i ? ", \"" : "\"") + v.strings[i] + "\"";
        out[k] = s + "]";
        break;
      }
      default: out[k] = v.s;
    }
  }
  return out;
}

}  // namespace fgm
