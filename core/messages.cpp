#include "core/messages.h"

#include <fmt/format.h>

#include "core/memory_budget.h"

namespace fgm::msg {

std::string location(std::string_view path, uint64_t line, uint64_t column) {
  if (line == 0) return fmt::format("{}: ", path);
  if (column == 0) return fmt::format("{}:{}: ", path, line);
  return fmt::format("{}:{}:{}: ", path, line, column);
}

std::string system_refused_allocation(uint64_t address_space_limit) {
  const std::string limit =
      address_space_limit
          ? fmt::format("the process's address-space limit (ulimit -v, {})", format_bytes(address_space_limit))
          : std::string("the machine's free memory");
  return fmt::format("out of memory: the system refused an allocation that fgm's memory budget allowed: {} is "
                     "smaller than what this run maps (the budget's reservations plus thread stacks, libraries and "
                     "allocator arenas); raise that limit or free memory",
                     limit);
}

std::string budget_exceeded(std::string_view purpose, uint64_t wanted, uint64_t free_bytes,
                            uint64_t limit, std::string_view limit_key, std::string_view in_use,
                            std::string_view remedy) {
  std::string s = fmt::format(
      "memory budget exceeded: {} needs {} but only {} of {}={} is free (in use: {}). "
      "Raise {}",
      purpose, format_bytes(wanted), format_bytes(free_bytes), limit_key, format_bytes(limit),
      in_use, limit_key);
  if (!remedy.empty()) s += fmt::format(", or {}", remedy);
  s += ".";
  return s;
}

std::string bad_byte_size(std::string_view key, std::string_view text) {
  return fmt::format("{}: '{}' is not a size; write a positive number with an optional unit "
                     "B, KB, MB, GB or TB (powers of 1024), e.g. 256MB",
                     key, text);
}

std::string byte_size_too_large(std::string_view key, std::string_view text, uint64_t max_bytes) {
  return fmt::format("{}: '{}' is larger than the largest supported size ({} bytes); "
                     "write a smaller size",
                     key, text, max_bytes);
}
std::string byte_size_not_whole(std::string_view key, std::string_view text) {
  return fmt::format("{}: '{}' is not a whole number of bytes (at least 1); write an integer "
                     "byte count or use a larger unit, e.g. 256MB",
                     key, text);
}

std::string cannot_open(std::string_view path, std::string_view reason) {
  return fmt::format("{}cannot open: {}", location(path), reason);
}
std::string cannot_write(std::string_view path, std::string_view reason) {
  return fmt::format("{}cannot write: {}", location(path), reason);
}
std::string read_failed(std::string_view path, std::string_view reason) {
  return fmt::format("{}read failed: {}", location(path), reason);
}

std::string unusable_input(std::string_view path, std::string_view key, std::string_view reason) {
  return fmt::format("{}cannot read ({}): {}", location(path), key, reason);
}
std::string not_regular_input() {
  return "it is a pipe, FIFO or device, not a regular file: fgm reads this input twice (its checksum names "
         "the store, then its rows); save it to a file first";
}
std::string unusable_output(std::string_view path, std::string_view key, std::string_view reason) {
  return fmt::format("{}cannot write ({}): {}", location(path), key, reason);
}

std::string filesystem_failed(std::string_view path, std::string_view reason, std::string_view what) {
  if (path.empty()) return std::string(what);
  return fmt::format("{}{} ({})", location(path), reason, what);
}

std::string empty_input(std::string_view path) {
  return fmt::format("{}the file holds no data rows (it is empty or only blank lines)",
                     location(path));
}
std::string bad_label(std::string_view path, uint64_t line, uint64_t column,
                      std::string_view token) {
  return fmt::format("{}label '{}' is not a number; each row must start with a numeric label",
                     location(path, line, column), token);
}
std::string non_numeric_token(std::string_view path, uint64_t line, uint64_t column,
                              std::string_view token) {
  return fmt::format("{}'{}' is not a number; expected index:value with an integer index and a "
                     "numeric value",
                     location(path, line, column), token);
}
std::string missing_colon(std::string_view path, uint64_t line, uint64_t column,
                          std::string_view token) {
  return fmt::format("{}'{}' is not an index:value pair", location(path, line, column), token);
}
std::string index_below_base(std::string_view path, uint64_t line, uint64_t column,
                             std::string_view token, int index_base) {
  return fmt::format("{}feature index in '{}' is below {}; indices are {}-based here (use "
                     "--index-base 0 / data.index_base = 0 for 0-based files)",
                     location(path, line, column), token, index_base, index_base);
}
std::string index_too_large(std::string_view path, uint64_t line, uint64_t column,
                            std::string_view token, uint64_t largest) {
  return fmt::format("{}feature index in '{}' is too large: indices go up to {} (feature ids "
                     "are below 2^63); check the file or its --index-base",
                     location(path, line, column), token, largest);
}
std::string index_not_increasing(std::string_view path, uint64_t line, uint64_t column,
                                 uint64_t index, uint64_t previous) {
  return fmt::format("{}feature index {} follows {}; indices in a row must be strictly "
                     "increasing",
                     location(path, line, column), index, previous);
}
std::string duplicate_index(std::string_view path, uint64_t line, uint64_t column,
                            uint64_t index) {
  return fmt::format("{}feature index {} appears twice in this row", location(path, line, column),
                     index);
}
std::string non_finite_value(std::string_view path, uint64_t line, uint64_t column,
                             std::string_view token) {
  return fmt::format("{}value in '{}' is not finite (NaN or Inf); remove or impute it",
                     location(path, line, column), token);
}
std::string value_beyond_float_range(std::string_view path, uint64_t line, uint64_t column,
                                     std::string_view token) {
  return fmt::format("{}value in '{}' exceeds float32's range (magnitude at most 3.4028235e38; "
                     "values are stored as float32); rescale the feature",
                     location(path, line, column), token);
}
std::string value_below_float_range(std::string_view path, uint64_t line, uint64_t column,
                                    std::string_view token) {
  return fmt::format("{}value in '{}' is nonzero but below float32's range (smallest magnitude "
                     "1.4e-45; values are stored as float32) and would be stored as 0; rescale "
                     "the feature or write 0",
                     location(path, line, column), token);
}
std::string partition_not_of_store(std::string_view part_dir, std::string_view manifest_name, uint64_t found,
                                   uint64_t recorded) {
  return fmt::format("{}: this partition is not the one the store was ingested with (its checksum {:016x}, "
                     "{} records {:016x}): it was replaced or copied from another store; ingest the input "
                     "again (fgm ingest INPUT --out STORE --partitions P)",
                     part_dir, found, manifest_name, recorded);
}
std::string evaluation_failed_model_kept(std::string_view error, std::string_view model_path) {
  return fmt::format("{} (data.test could not be evaluated; the trained model is kept in {}, without run.json: "
                     "score the test file with fgm predict, or fix it and run again)",
                     error, model_path);
}
std::string path_point_zero_weights(int point, uint64_t selected, uint64_t nonzero) {
  return fmt::format("path point {}: {} features were selected but only {} have a nonzero weight (the "
                     "`nonzero` column of path.csv); the de-biased refit uses those {}",
                     point, selected, nonzero, nonzero);
}
std::string chance_level_point(int point, uint64_t selected, std::string_view set, bool debiased, double accuracy,
                               double majority_rate) {
  return fmt::format("path point {} ({} features{}): accuracy {:.4f} on {} is no better than always "
                     "predicting its majority class ({:.4f})",
                     point, selected, debiased ? ", de-biased" : "", accuracy, set, majority_rate);
}
std::string path_points_missing(std::string_view key, std::string_view missing_counts,
                                std::string_view delivered_counts) {
  return fmt::format("{}: no point at {} features: the run ran out of new features first (the path's "
                     "points have {} selected features)",
                     key, missing_counts, delivered_counts);
}
std::string mslr_path_points_missing_iterations(std::string_view missing_counts, std::string_view delivered_counts,
                                                int max_iterations) {
  return fmt::format("mslr.features: no point at {} features: the run reached mslr.max_iterations = {} first "
                     "(iterations whose constraint repeats selected features add fewer than mslr.r new ones; the "
                     "path's points have {} selected features); raise mslr.r, or mslr.max_iterations up to 64",
                     missing_counts, max_iterations, delivered_counts);
}
std::string mslr_path_needs_iterations(std::string_view key, uint64_t last_count, uint64_t r, uint64_t needed,
                                       uint64_t allowed, std::string_view remedy) {
  return fmt::format("{}: mslr.features asks for {} features, which needs at least {} cutting-plane iterations "
                     "(each adds at most mslr.r = {} features), but {} allows {}; the path would deliver fewer "
                     "points than asked: {}",
                     key, last_count, needed, r, key, allowed, remedy);
}
std::string path_counts_beyond_features(std::string_view key, uint64_t largest, uint64_t available,
                                        std::string_view what) {
  return fmt::format("{}: {} features asked for, but the training data has only {} {}; the path would "
                     "deliver fewer points than asked: give counts up to {}",
                     key, largest, available, what, available);
}
std::string index_beyond_declared(std::string_view path, uint64_t line, uint64_t column,
                                  uint64_t index, uint64_t declared) {
  return fmt::format("{}feature index {} exceeds the declared width {} (--features / "
                     "data.features); raise it or leave it unset",
                     location(path, line, column), index, declared);
}
std::string too_many_labels(std::string_view path, uint64_t line, uint64_t column,
                            int max_classes, std::string_view label) {
  return fmt::format("{}label '{}' is beyond {} distinct labels; fgm trains classifiers (binary "
                     "or one-vs-rest), not regression: map the targets to classes first",
                     location(path, line, column), label, max_classes);
}
std::string multiclass_path_unsupported(std::string_view store, size_t classes) {
  return fmt::format("{}the store holds {} classes; fgm path supports two-label stores only (a "
                     "one-vs-rest path would need a feature count per class): use fgm train with "
                     "fgm.max_features for each count",
                     location(store), classes);
}
std::string single_label(std::string_view path, std::string_view label) {
  return fmt::format("{}every row has label '{}'; a classifier needs at least two classes",
                     location(path), label);
}
std::string truncated_stream(std::string_view path, std::string_view codec,
                             std::string_view detail) {
  return fmt::format("{}the {} stream is truncated or corrupt ({}); re-download or recompress "
                     "the file",
                     location(path), codec, detail);
}
std::string line_too_long(std::string_view path, uint64_t line, uint64_t limit, std::string_view budget_key) {
  return fmt::format("{}the line is longer than {}, the longest the memory budget admits (an eighth of it: the "
                     "line's text and its parsed row are held at once); raise {} or split the line",
                     location(path, line), format_bytes(limit), budget_key);
}
std::string too_many_rows(std::string_view path, uint64_t line) {
  return fmt::format("{}more than 4294967295 rows; fgm stores row ids as 32-bit integers, "
                     "split the input",
                     location(path, line));
}

std::string not_an_fgm_file(std::string_view path, std::string_view expected_kind) {
  return fmt::format("{}not a valid fgm {} (wrong identifier or a damaged header)",
                     location(path), expected_kind);
}
std::string checksum_mismatch(std::string_view path, std::string_view what, uint64_t expected,
                              uint64_t actual) {
  return fmt::format("{}checksum mismatch in {} (expected {:016x}, found {:016x}); the file is "
                     "corrupted: delete the store and ingest again",
                     location(path), what, expected, actual);
}
std::string truncated_file(std::string_view path, uint64_t expected_bytes, uint64_t actual_bytes) {
  return fmt::format("{}file is {} bytes but its header says {}; it is truncated or corrupted: "
                     "delete it and ingest again",
                     location(path), actual_bytes, expected_bytes);
}
std::string version_mismatch(std::string_view path, uint32_t found, uint32_t supported) {
  return fmt::format("{}format version {} is not supported by this fgm (supports {}); ingest the "
                     "data again with this version",
                     location(path), found, supported);
}
std::string version_mismatch(std::string_view path, uint32_t found, uint32_t oldest, uint32_t newest) {
  return fmt::format("{}format version {} is not supported by this fgm (supports {} to {}); ingest "
                     "the data again with this version",
                     location(path), found, oldest, newest);
}
std::string manifest_mismatch(std::string_view manifest_path, std::string_view shard_path,
                              std::string_view field, std::string_view expected,
                              std::string_view actual) {
  return fmt::format("{}shard {} does not match the manifest: {} is {} in the manifest but {} "
                     "in the shard; the store is inconsistent: delete it and ingest again",
                     location(manifest_path), shard_path, field, expected, actual);
}
std::string store_inconsistent(std::string_view path, std::string_view detail) {
  return fmt::format("{}inconsistent store file ({}); delete the store and ingest again",
                     location(path), detail);
}
std::string store_changed(std::string_view path, std::string_view detail) {
  return fmt::format("{}the store changed while fgm was reading it ({}); it was verified when "
                     "opened. Do not modify, truncate or copy over a store while fgm uses it; "
                     "rerun on an unchanged store, or ingest the data again",
                     location(path), detail);
}
std::string no_manifest(std::string_view dir) {
  return fmt::format("{}not an fgm store: the directory has no manifest.fgm (make a store with "
                     "fgm ingest)",
                     location(dir));
}
std::string store_too_big(std::string_view out_dir, uint64_t estimate, uint64_t n_features,
                          uint64_t nnz, std::string_view limit_what, uint64_t limit,
                          std::string_view remedy) {
  return fmt::format("{}the store would take about {} ({} features, {} nonzeros; every feature id "
                     "up to the largest costs 16 bytes even when empty), more than {} ({}). {}",
                     location(out_dir), format_bytes(estimate), n_features, nnz, limit_what,
                     format_bytes(limit), remedy);
}
std::string output_locked(std::string_view target, std::string_view lock_path) {
  return fmt::format("{}another fgm process is writing this output (lock {} is held); wait for "
                     "it to finish or choose another output",
                     location(target), lock_path);
}

std::string unknown_key(std::string_view where, std::string_view key,
                        std::string_view suggestion) {
  std::string s = fmt::format("{}unknown key '{}'", where, key);
  if (!suggestion.empty()) s += fmt::format(" (did you mean '{}'?)", suggestion);
  s += "; `fgm train --help-config` lists every key";
  return s;
}
std::string wrong_type(std::string_view where, std::string_view key, std::string_view expected,
                       std::string_view got) {
  return fmt::format("{}key '{}' must be {}, got {}", where, key, expected, got);
}
std::string simd_target_unsupported(std::string_view target, std::string_view supported) {
  return fmt::format("FGM_SIMD={}: this CPU does not support that instruction set; supported here: {} "
                     "(unset FGM_SIMD to use the best one)",
                     target, supported);
}
std::string out_of_range(std::string_view where, std::string_view key, std::string_view value,
                         std::string_view range) {
  return fmt::format("{}key '{}' = {} is out of range; allowed: {}", where, key, value, range);
}
std::string bad_enum(std::string_view where, std::string_view key, std::string_view value,
                     std::string_view allowed) {
  return fmt::format("{}key '{}' = '{}' is not one of: {}", where, key, value, allowed);
}
std::string bad_list_element(std::string_view where, std::string_view key, size_t index,
                             std::string_view value, std::string_view allowed) {
  return fmt::format("{}key '{}': element {} = '{}' is not one of: {}", where, key, index + 1, value,
                     allowed);
}
std::string config_syntax(std::string_view where, std::string_view detail) {
  return fmt::format("{}TOML syntax error: {}", where, detail);
}
std::string bad_override(std::string_view argument) {
  return fmt::format("command-line override '{}' is not of the form key=value", argument);
}
std::string override_not_one_value(std::string_view argument, std::string_view why) {
  std::string shown;  // the override on one line: a line break shown as \n
  for (char ch : argument) {
    if (ch == '\n') shown += "\\n";
    else if (ch == '\r') shown += "\\r";
    else if (ch == '\t') shown += "\\t";
    else shown += ch;
  }
  argument = shown;
  return fmt::format("command-line override '{}' is not one key=value: {}; give each key its own "
                     "override (a value with spaces or '#' goes in quotes: key='\"a # b\"')",
                     argument, why);
}
std::string missing_required(std::string_view key, std::string_view why) {
  return fmt::format("key '{}' must be set: {}", key, why);
}

std::string ignored_key(std::string_view where, std::string_view key, std::string_view why) {
  return fmt::format("{}key '{}' would be ignored: {}; remove it", where, key, why);
}

std::string store_key_mismatch(std::string_view where, std::string_view key, std::string_view value,
                               std::string_view store, std::string_view store_value,
                               std::string_view ingest_option) {
  return fmt::format("{}key '{}' = {} would be ignored: data.train is the store {}, which `fgm "
                     "ingest` built with {} {}; remove the key or ingest again with {} {}",
                     where, key, value, store, ingest_option, store_value, ingest_option, value);
}

std::string bad_group_line(std::string_view path, uint64_t line, uint64_t column,
                           std::string_view detail) {
  return fmt::format("{}{}", location(path, line, column), detail);
}

std::string apg_iteration_cap(int outer_iteration, int apg_iterations) {
  return fmt::format("outer iteration {}: APG stopped at apg.max_iterations = {} before its "
                     "stopping rule (prox-gradient mapping down to apg.eps_inner of its first "
                     "value; proximal Newton: certified relative gap down to apg.intermediate_gap) "
                     "held; this iteration's weights are not converged: raise "
                     "apg.max_iterations (run.json's apg_relative_gap bounds the error)",
                     outer_iteration, apg_iterations);
}
std::string ovr_lockstep_fell_back(size_t classes, const std::string& budget_error) {
  return fmt::format("one-vs-rest: the {} classes' runs do not fit in engine.memory_budget together "
                     "({}); trained one class after another instead (same models, {}x the "
                     "scoring passes): raise engine.memory_budget to share the passes",
                     classes, budget_error, classes);
}
std::string apg_gap_above_tolerance(int outer_iteration, int apg_iterations, double relative_gap,
                                    const char* stop) {
  return fmt::format("outer iteration {}: the certified solve {} after {} iterations with relative duality "
                     "gap {:.3g}, above apg.gap_tolerance: this solve's weights are not converged (F − min F ≤ "
                     "gap·F still holds); raise apg.max_iterations or apg.gap_tolerance",
                     outer_iteration, stop, apg_iterations, relative_gap);
}
std::string debias_gap_above_tolerance(int point, int apg_iterations, double relative_gap) {
  return fmt::format("path point {}: the de-biased refit stopped after {} APG iterations with relative duality "
                     "gap {:.3g}, above apg.gap_tolerance: its weights are not converged; raise "
                     "apg.max_iterations or apg.gap_tolerance",
                     point, apg_iterations, relative_gap);
}
std::string exclusive_debias_gap_above_tolerance(int point, int apg_iterations, double relative_gap) {
  return fmt::format("path point {}: the de-biased refit (exclusive.debias) stopped after {} APG iterations with "
                     "relative duality gap {:.3g}, above exclusive.tolerance: its weights are not converged; raise "
                     "exclusive.max_iterations or exclusive.tolerance",
                     point, apg_iterations, relative_gap);
}
std::string kta_svm_gap_above_tolerance(double p, int apg_iterations, double relative_gap) {
  return fmt::format("pnorm_kta point p = {:g}: the linear SVM's APG solve stopped after {} iterations with "
                     "relative duality gap {:.3g}, above apg.gap_tolerance: its weights are not converged; raise "
                     "apg.max_iterations or apg.gap_tolerance",
                     p, apg_iterations, relative_gap);
}
std::string apg_stalled(int outer_iteration, int apg_iterations) {
  return fmt::format("outer iteration {}: APG stalled after {} iterations (the line search found "
                     "no step that decreases the objective: rounding floor reached) before its "
                     "stopping rule held; the last iterate is used: a larger apg.eps_inner "
                     "(proximal Newton: apg.intermediate_gap) stops earlier",
                     outer_iteration, apg_iterations);
}

namespace {
constexpr const char* kTransformHint =
    "rescale the features, e.g. features.transform = [\"log1p\", \"row_l2\"] for counts or "
    "[\"maxabs\"] for measurements in different units";
}  // namespace

std::string feature_value_span(double span, double largest, double typical, int degree,
                               std::string_view space, double limit) {
  return fmt::format("badly scaled features: the largest column's max |value| is {:.3g}, the "
                     "typical (median) column's {:.3g}; in the {} space (values of degree {}) "
                     "that is a span of {:.3g}, above {:.0e}. A few huge features dominate the "
                     "scores and the solver's step size; {}",
                     largest, typical, space, degree, span, limit, kTransformHint);
}
std::string first_solve_no_progress(double relative_decrease, double limit) {
  return fmt::format("the first APG solve lowered the objective by only {:.3g} of its starting "
                     "value (below {:.0e}): the selected features barely help, which usually "
                     "means badly scaled data; {}",
                     relative_decrease, limit, kTransformHint);
}
std::string chance_level_model(double train_accuracy, double majority_rate) {
  return fmt::format("the final model is at chance level: training accuracy {:.4f} is no better "
                     "than always predicting the majority class ({:.4f}). Check the labels and "
                     "the scaling of the data; {}",
                     train_accuracy, majority_rate, kTransformHint);
}

std::string not_a_model(std::string_view path, std::string_view detail) {
  return fmt::format("{}not an fgm model file ({}); pass a model.fgm written by `fgm train`",
                     location(path), detail);
}
std::string wider_than_model(std::string_view path, uint64_t line, uint64_t index,
                             uint64_t width) {
  return fmt::format("{}feature index {} is beyond the {} features the model was trained on; "
                     "such features are ignored (reported once)",
                     location(path, line), index, width);
}
std::string non_finite_decision(std::string_view path, uint64_t line, double decision, std::string_view cause) {
  return fmt::format("{}the decision value of this row is {}: {}; the row's values lie far outside the training "
                     "data's (check the row, or train with a transform that bounds them, e.g. "
                     "features.transform=[\"log1p\"])",
                     location(path, line, 1), decision, cause);
}
std::string transform_overflow(std::string_view store, uint64_t feature, uint64_t row, float raw, double transformed,
                               std::string_view stages) {
  return fmt::format("{}: feature {} of row {} (value {}) becomes {} under features.transform [{}], beyond the "
                     "float range the engine stores values in; rescale the data or choose other transforms",
                     store, feature, row, raw, transformed, stages);
}

std::string not_a_checkpoint(std::string_view path, std::string_view detail) {
  return fmt::format("{}not a valid fgm resume checkpoint ({}); rerun with --restart to discard "
                     "it and start from scratch",
                     location(path), detail);
}
std::string checkpoint_mismatch(std::string_view path, std::string_view command,
                                std::string_view differences) {
  return fmt::format("{}refusing to resume: the checkpoint was written by a different run ({}). "
                     "Rerun the original `fgm {}` command to resume it, or add --restart to "
                     "discard it and start from scratch",
                     location(path), differences, command);
}
std::string checkpoint_inconsistent(uint64_t weights, uint64_t columns) {
  return fmt::format("resume checkpoint does not fit the run: {} weights for {} selected columns; rerun with "
                     "--restart",
                     weights, columns);
}
std::string resuming_from(std::string_view path, uint64_t iteration, std::string_view of_what,
                          uint64_t selected) {
  return fmt::format("resuming from iteration {} of {} ({} features selected) using {}; "
                     "--restart starts from scratch",
                     iteration, of_what, selected, path);
}
std::string checkpoint_discarded(std::string_view path) {
  return fmt::format("--restart: removed the resume checkpoint {}; starting from scratch", path);
}
std::string finished_run_redone(std::string_view dir, std::string_view output) {
  return fmt::format("{} already holds {} of a finished run and no resume checkpoint (it is "
                     "removed when a run succeeds); running again from the start and replacing it",
                     dir, output);
}
std::string stale_temporary_removed(std::string_view path) {
  return fmt::format("removed {}, a temporary file left by an interrupted run", path);
}

std::string bad_json(std::string_view path, uint64_t line, uint64_t column, std::string_view expected,
                     std::string_view found) {
  return fmt::format("{}not valid JSON: expected {}, found {}; the file is damaged or was not "
                     "written by fgm: rerun the command that writes it",
                     location(path, line, column), expected, found);
}
std::string bad_run_log(std::string_view path, std::string_view field, std::string_view expected) {
  return fmt::format("{}field \"{}\" is missing or is not {}; the file is damaged or was written "
                     "by another fgm version: rerun the command that writes it",
                     location(path), field, expected);
}
std::string bad_csv(std::string_view path, uint64_t line, uint64_t column, std::string_view detail) {
  return fmt::format("{}{}; the file is damaged or was not written by `fgm path`: rerun it",
                     location(path, line, column), detail);
}
std::string no_run_logs(std::string_view dir) {
  return fmt::format("{}no run.json or path.json here: give the output.dir of an `fgm train` or "
                     "`fgm path` run",
                     location(dir));
}

// --- p-norm KTA path
std::string sifs_grid_too_large(uint64_t beta_points, uint64_t alpha_points, uint64_t cap) {
  return fmt::format("sifs.beta_points x sifs.alpha_points = {} x {} = {} grid points, more than the {} a path may "
                     "have (as for kta.p_step); lower sifs.beta_points or sifs.alpha_points",
                     beta_points, alpha_points, beta_points * alpha_points, cap);
}

std::string kta_option_out_of_range(std::string_view key, double value, std::string_view rule) {
  return fmt::format("{} = {} is out of range: {}", key, value, rule);
}
std::string kta_needs_two_labels(std::string_view store, size_t classes) {
  return fmt::format("{}the store holds {} classes; solver = \"pnorm_kta\" aligns kernels with "
                     "a two-label target only (relabel the data to two classes)",
                     location(store), classes);
}
std::string kta_kernel_too_large(uint64_t rows, uint64_t bytes, uint64_t budget) {
  return fmt::format("kta.kernel = \"rbf\": the SVM that measures accuracy along the path needs "
                     "the {} x {} training kernel ({}), more than engine.memory_budget ({}) holds "
                     "with the rest of the run; raise engine.memory_budget or use kta.kernel = "
                     "\"linear\"",
                     rows, rows, format_bytes(bytes), format_bytes(budget));
}

}  // namespace fgm::msg
