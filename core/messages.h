// All user-facing error and warning texts live here (XGBoost's rule), so their
// wording, location format ("file:line:column: ...") and remedies stay uniform.
// Each function returns the full message; callers pick the ErrorKind.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fgm::msg {

// "path:line:column: " (line/column omitted when 0).
std::string location(std::string_view path, uint64_t line = 0, uint64_t column = 0);

// --- memory budget
// std::bad_alloc: the system refused memory that fgm's budget had allowed.
// `address_space_limit`: RLIMIT_AS (ulimit -v) in bytes, 0 when unlimited.
std::string system_refused_allocation(uint64_t address_space_limit);
std::string budget_exceeded(std::string_view purpose, uint64_t wanted, uint64_t free_bytes,
                            uint64_t limit, std::string_view limit_key, std::string_view in_use,
                            std::string_view remedy);
std::string bad_byte_size(std::string_view key, std::string_view text);
std::string byte_size_too_large(std::string_view key, std::string_view text, uint64_t max_bytes);
std::string byte_size_not_whole(std::string_view key, std::string_view text);

// --- SIMD dispatch (FGM_SIMD environment variable)
// A target the CPU cannot run; `supported` lists the ones it can.
std::string simd_target_unsupported(std::string_view target, std::string_view supported);

// --- generic file access
std::string cannot_open(std::string_view path, std::string_view reason);
std::string cannot_write(std::string_view path, std::string_view reason);
std::string read_failed(std::string_view path, std::string_view reason);
// A path given by `key` (config key or option) that cannot be used, found
// before any work is done.
std::string unusable_input(std::string_view path, std::string_view key, std::string_view reason);
// A std::filesystem operation failed on `path` (what: the library's text).
std::string filesystem_failed(std::string_view path, std::string_view reason, std::string_view what);
std::string unusable_output(std::string_view path, std::string_view key, std::string_view reason);
// Why a pipe, FIFO or device cannot be an input that is read twice (a reason
// for unusable_input / cannot_open).
std::string not_regular_input();

// --- LIBSVM text input (line and column are 1-based)
std::string empty_input(std::string_view path);
std::string bad_label(std::string_view path, uint64_t line, uint64_t column, std::string_view token);
std::string non_numeric_token(std::string_view path, uint64_t line, uint64_t column,
                              std::string_view token);
std::string missing_colon(std::string_view path, uint64_t line, uint64_t column,
                          std::string_view token);
std::string index_below_base(std::string_view path, uint64_t line, uint64_t column,
                             std::string_view token, int index_base);
std::string index_too_large(std::string_view path, uint64_t line, uint64_t column,
                            std::string_view token, uint64_t largest);
std::string index_not_increasing(std::string_view path, uint64_t line, uint64_t column,
                                 uint64_t index, uint64_t previous);
std::string duplicate_index(std::string_view path, uint64_t line, uint64_t column, uint64_t index);
std::string non_finite_value(std::string_view path, uint64_t line, uint64_t column,
                             std::string_view token);
std::string value_beyond_float_range(std::string_view path, uint64_t line, uint64_t column,
                                     std::string_view token);
std::string value_below_float_range(std::string_view path, uint64_t line, uint64_t column,
                                    std::string_view token);
std::string partition_not_of_store(std::string_view part_dir, std::string_view manifest_name, uint64_t found,
                                   uint64_t recorded);
std::string evaluation_failed_model_kept(std::string_view error, std::string_view model_path);
std::string path_point_zero_weights(int point, uint64_t selected, uint64_t nonzero);
std::string chance_level_point(int point, uint64_t selected, std::string_view set, bool debiased, double accuracy,
                               double majority_rate);
std::string path_points_missing(std::string_view key, std::string_view missing_counts,
                                std::string_view delivered_counts);
// An MSLR path that reached mslr.max_iterations before its last count (some
// iterations added fewer than mslr.r new features).
std::string mslr_path_points_missing_iterations(std::string_view missing_counts, std::string_view delivered_counts,
                                                int max_iterations);
// An MSLR path whose last count needs more cutting-plane iterations (each adds
// at most mslr.r features) than `key` allows.
std::string mslr_path_needs_iterations(std::string_view key, uint64_t last_count, uint64_t r, uint64_t needed,
                                       uint64_t allowed, std::string_view remedy);
std::string path_counts_beyond_features(std::string_view key, uint64_t largest, uint64_t available,
                                        std::string_view what);
std::string index_beyond_declared(std::string_view path, uint64_t line, uint64_t column,
                                  uint64_t index, uint64_t declared);
std::string too_many_labels(std::string_view path, uint64_t line, uint64_t column,
                            int max_classes, std::string_view label);
std::string single_label(std::string_view path, std::string_view label);
std::string multiclass_path_unsupported(std::string_view store, size_t classes);
std::string truncated_stream(std::string_view path, std::string_view codec, std::string_view detail);
std::string too_many_rows(std::string_view path, uint64_t line);
// A line longer than the memory budget admits (io/libsvm_reader.h max_line_bytes_for).
std::string line_too_long(std::string_view path, uint64_t line, uint64_t limit, std::string_view budget_key);

// --- shard store and other fgm-written files
std::string not_an_fgm_file(std::string_view path, std::string_view expected_kind);
std::string checksum_mismatch(std::string_view path, std::string_view what, uint64_t expected,
                              uint64_t actual);
std::string truncated_file(std::string_view path, uint64_t expected_bytes, uint64_t actual_bytes);
std::string version_mismatch(std::string_view path, uint32_t found, uint32_t supported);
std::string version_mismatch(std::string_view path, uint32_t found, uint32_t oldest, uint32_t newest);
std::string manifest_mismatch(std::string_view manifest_path, std::string_view shard_path,
                              std::string_view field, std::string_view expected,
                              std::string_view actual);
std::string store_inconsistent(std::string_view path, std::string_view detail);
// A shard read after open no longer matches what open verified.
std::string store_changed(std::string_view path, std::string_view detail);
std::string no_manifest(std::string_view dir);
// Ingest output size checks (store.max_bytes, free space).
std::string store_too_big(std::string_view out_dir, uint64_t estimate, uint64_t n_features,
                          uint64_t nnz, std::string_view limit_what, uint64_t limit,
                          std::string_view remedy);
// Another process holds the output (or cache entry) lock.
std::string output_locked(std::string_view target, std::string_view lock_path);

// --- configuration
std::string unknown_key(std::string_view where, std::string_view key, std::string_view suggestion);
std::string wrong_type(std::string_view where, std::string_view key, std::string_view expected,
                       std::string_view got);
std::string out_of_range(std::string_view where, std::string_view key, std::string_view value,
                         std::string_view range);
// Element `index` (0-based; printed 1-based) of a list of choices.
std::string bad_list_element(std::string_view where, std::string_view key, size_t index,
                             std::string_view value, std::string_view allowed);
std::string bad_enum(std::string_view where, std::string_view key, std::string_view value,
                     std::string_view allowed);
std::string config_syntax(std::string_view where, std::string_view detail);
std::string bad_override(std::string_view argument);
std::string override_not_one_value(std::string_view argument, std::string_view why);
std::string missing_required(std::string_view key, std::string_view why);
// A key the user set that this command would silently ignore.
std::string ignored_key(std::string_view where, std::string_view key, std::string_view why);
std::string store_key_mismatch(std::string_view where, std::string_view key, std::string_view value,
                               std::string_view store, std::string_view store_value,
                               std::string_view ingest_option);

// --- groups file
std::string bad_group_line(std::string_view path, uint64_t line, uint64_t column,
                           std::string_view detail);

// --- solver warnings (outer iteration t, APG iterations spent)
std::string apg_iteration_cap(int outer_iteration, int apg_iterations);
std::string apg_stalled(int outer_iteration, int apg_iterations);
// A certified solve (apg.gap_tolerance) ended above its tolerance; `stop`: "stopped at apg.max_iterations", "stalled".
std::string apg_gap_above_tolerance(int outer_iteration, int apg_iterations, double relative_gap, const char* stop);
std::string debias_gap_above_tolerance(int point, int apg_iterations, double relative_gap);
// The same for solver = exclusive (exclusive.debias), whose refit stops on exclusive.tolerance.
std::string exclusive_debias_gap_above_tolerance(int point, int apg_iterations, double relative_gap);
std::string kta_svm_gap_above_tolerance(double p, int apg_iterations, double relative_gap);
// Badly scaled data (engine/fgm_trainer.cpp): each suggests features.transform.
std::string feature_value_span(double span, double largest, double typical, int degree,
                               std::string_view space, double limit);
std::string first_solve_no_progress(double relative_decrease, double limit);
std::string chance_level_model(double train_accuracy, double majority_rate);
std::string ovr_lockstep_fell_back(size_t classes, const std::string& budget_error);

// --- model and prediction
std::string not_a_model(std::string_view path, std::string_view detail);
std::string wider_than_model(std::string_view path, uint64_t line, uint64_t index, uint64_t width);
// A row whose decision value is ±inf or NaN (cause: ModelScorer::non_finite_cause).
std::string non_finite_decision(std::string_view path, uint64_t line, double decision, std::string_view cause);
// A training value that features.transform takes out of the float range
// (feature numbered with the store's index base, row 1-based).
std::string transform_overflow(std::string_view store, uint64_t feature, uint64_t row, float raw, double transformed,
                               std::string_view stages);

// --- resume checkpoints of `fgm train` / `fgm path`
std::string not_a_checkpoint(std::string_view path, std::string_view detail);
std::string checkpoint_mismatch(std::string_view path, std::string_view command,
                                std::string_view differences);
std::string checkpoint_inconsistent(uint64_t weights, uint64_t columns);
std::string resuming_from(std::string_view path, uint64_t iteration, std::string_view of_what,
                          uint64_t selected);
std::string checkpoint_discarded(std::string_view path);
std::string finished_run_redone(std::string_view dir, std::string_view output);
std::string stale_temporary_removed(std::string_view path);

// --- run logs read back by `fgm report` (run.json, path.json, path.csv)
std::string bad_json(std::string_view path, uint64_t line, uint64_t column, std::string_view expected,
                     std::string_view found);
// A field the report needs is missing or has the wrong type.
std::string bad_run_log(std::string_view path, std::string_view field, std::string_view expected);
std::string bad_csv(std::string_view path, uint64_t line, uint64_t column, std::string_view detail);
std::string no_run_logs(std::string_view dir);

// --- p-norm KTA path (solver = "pnorm_kta")
// A kta.* option outside its range (cross-key rules the config table cannot state).
std::string kta_option_out_of_range(std::string_view key, double value, std::string_view rule);
// The store has more classes than the binary KTA alignment supports.
std::string kta_needs_two_labels(std::string_view store, size_t classes);
// fgm path with solver = sifs: sifs.beta_points × sifs.alpha_points above the cap.
std::string sifs_grid_too_large(uint64_t beta_points, uint64_t alpha_points, uint64_t cap);
// The RBF evaluation needs an n × n kernel that the budget cannot hold.
std::string kta_kernel_too_large(uint64_t rows, uint64_t bytes, uint64_t budget);

}  // namespace fgm::msg
