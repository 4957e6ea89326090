// The run logs `fgm report` reads back: run.json (fgm train), path.json and
// path.csv (fgm path), as written by cli/train_command.cpp and
// cli/path_command.cpp. A missing file is Error(kIo) naming it; a damaged one
// (bad JSON, a needed field missing or of the wrong type, a CSV cell that is
// not a number) is Error(kCorruption) naming the file and the field or
// line:column.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/memory_budget.h"

namespace fgm::report {

struct LogWarning {
  std::string code, message;
};

// A flat "key = value" list of a log's scalar fields (nested objects as
// "data.rows"), in file order, for the report's summary tables.
using SummaryFields = std::vector<std::pair<std::string, std::string>>;

struct TrainIterationLog {
  int64_t iter = 0;
  double selected = 0, added = 0;
  double objective = 0, rel_decrease = 0, sip_violation = 0;  // NaN when the log has null
  double score_seconds = 0, solve_seconds = 0;
  double apg_iterations = 0;
  std::string apg_stop;
};

// One class of a multi-class (one-vs-rest) run.json: that class's binary run.
struct ClassRunLog {
  double label = 0;
  double rows = 0;
  std::vector<TrainIterationLog> iterations;
  std::string stop_reason;
  double objective_no_features = 0, final_sip_violation = 0;  // NaN when null
  double objective = 0, train_seconds = 0;
  double test_auc = 0;  // NaN when the run had no test data
};

// A distributed run's communication in one phase of one outer iteration
// (run.json "distributed"."passes", rank 0's view).
struct CommunicationLog {
  int64_t iter = 0;
  std::string phase;  // "labels", "scoring", "solve"
  double bytes = 0, collectives = 0, seconds = 0;
};

// One rank of a distributed run (run.json "distributed"."rank_resources").
struct RankResourceLog {
  double peak_rss_bytes = 0, memory_budget_peak_bytes = 0;
};

struct TrainRunLog {
  std::string file;
  SummaryFields summary;
  std::vector<std::pair<std::string, std::string>> config;
  // Binary runs: the outer iterations, F_0 and the last SIP violation.
  // Multi-class runs leave them empty / NaN and fill `classes` instead.
  std::vector<TrainIterationLog> iterations;
  double objective_no_features = 0;  // F_0, NaN when null
  double final_sip_violation = 0;
  std::vector<ClassRunLog> classes;  // non-empty: a one-vs-rest run
  bool multiclass() const { return !classes.empty(); }
  // run.json "test" (NaN when the run had no test data); macro AUC for multi-class.
  double test_accuracy = 0, test_auc = 0;
  std::vector<LogWarning> warnings;
  // Distributed runs only (empty otherwise).
  std::vector<CommunicationLog> communication;
  std::vector<RankResourceLog> ranks;
};
// With `budget`, the text and parsed tree of the JSON file are reserved from
// it while read (Error kOutOfMemory naming the file when they do not fit).
TrainRunLog read_train_log(const std::string& run_json_path, MemoryBudget* budget = nullptr);

// A CSV of numbers with a header line; an empty cell is NaN.
struct NumericCsv {
  std::string file;
  std::vector<std::string> header;
  std::vector<std::vector<double>> rows;
  // The column named `name`, or an empty vector when there is none.
  std::vector<double> column(const std::string& name) const;
  bool has_column(const std::string& name) const;
};
NumericCsv read_numeric_csv(const std::string& path);

// One FGM run of a path (path.json "runs"): the single run of path.features,
// or one per B/C value.
struct PathRunIterations {
  double B = 0, C = 0;
  std::string stop_reason;
  std::vector<TrainIterationLog> iterations;
};

struct PathRunLog {
  std::string json_file;
  SummaryFields summary;
  std::vector<std::pair<std::string, std::string>> config;
  std::vector<LogWarning> warnings;
  std::string mode;        // "features", "B" or "C"
  int64_t best_point = -1;  // highest validation accuracy; -1: no validation data
  // path.json "selection" (when present): the point chosen by the one-SE
  // rule and the criterion that chose it ("cv", "validation" or "none").
  int64_t chosen_point = -1;
  std::string criterion;
  NumericCsv points;       // path.csv
  std::vector<PathRunIterations> runs;  // empty for a path.json written without them
  // path.json "point_models" (absent: true): whether point-<n>.fgm files exist
  // (false for solver = "pnorm_kta" with an RBF kernel, which keeps no model).
  bool point_models = true;
};
PathRunLog read_path_log(const std::string& path_json_path, const std::string& path_csv_path,
                         MemoryBudget* budget = nullptr);

// The whole file; Error(kIo) naming it when it cannot be read.
std::string read_text_file(const std::string& path);

}  // namespace fgm::report
