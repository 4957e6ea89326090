#include "report/run_logs.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_reader.h"
#include "core/memory_budget.h"
#include "core/messages.h"
#include "report/html_text.h"

namespace fgm::report {
namespace {

constexpr const char* kReportRemedy = "report on a run with a smaller run log";

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Field access that names the file and the field when the log is not what
// the writer writes.
class LogReader {
 public:
  explicit LogReader(std::string file) : file_(std::move(file)) {}

  const JsonValue& field(const JsonValue& object, const std::string& name, JsonValue::Type type,
                         const char* expected) const {
    const JsonValue* v = object.find(name);
    if (!v || v->type() != type) throw Error(ErrorKind::kCorruption, msg::bad_run_log(file_, name, expected));
    return *v;
  }
  // A number; null (how the writer writes NaN) reads as NaN.
  double number(const JsonValue& object, const std::string& name) const {
    const JsonValue* v = object.find(name);
    if (v && v->is_null()) return kNaN;
    return field(object, name, JsonValue::Type::kNumber, "a number").number();
  }
  std::string string(const JsonValue& object, const std::string& name) const {
    return field(object, name, JsonValue::Type::kString, "a string").string();
  }
  const JsonValue& array(const JsonValue& object, const std::string& name) const {
    return field(object, name, JsonValue::Type::kArray, "an array");
  }

  std::vector<std::pair<std::string, std::string>> string_map(const JsonValue& root, const std::string& name) const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [k, v] : field(root, name, JsonValue::Type::kObject, "an object").members()) {
      if (!v.is_string()) throw Error(ErrorKind::kCorruption, msg::bad_run_log(file_, name + "." + k, "a string"));
      out.emplace_back(k, v.string());
    }
    return out;
  }

  // Optional: logs written before warnings were recorded have none.
  std::vector<LogWarning> warnings(const JsonValue& root) const {
    std::vector<LogWarning> out;
    if (!root.find("warnings")) return out;
    for (const auto& w : array(root, "warnings").items()) {
      if (!w.is_object()) throw Error(ErrorKind::kCorruption, msg::bad_run_log(file_, "warnings", "a list of objects"));
      out.push_back({string(w, "code"), string(w, "message")});
    }
    return out;
  }

 private:
  std::string file_;
};

std::string scalar_text(const JsonValue& v) {
  switch (v.type()) {
    case JsonValue::Type::kNull: return "\xe2\x80\x93";
    case JsonValue::Type::kBool: return v.boolean() ? "true" : "false";
    case JsonValue::Type::kNumber: return format_number(v.number(), 6);
    case JsonValue::Type::kString: return v.string();
    default: return "";
  }
}

// Scalars at any depth of objects ("selection.cv.folds"), skipping arrays
// and the big parts the report shows on their own.
void add_summary_fields(const JsonValue& object, const std::string& prefix, SummaryFields& out) {
  for (const auto& [k, v] : object.members()) {
    if (prefix.empty() && (k == "config" || k == "warnings")) continue;
    if (v.is_object()) add_summary_fields(v, prefix + k + ".", out);
    else if (!v.is_array()) out.emplace_back(prefix + k, scalar_text(v));
  }
}

SummaryFields summary_fields(const JsonValue& root) {
  SummaryFields out;
  add_summary_fields(root, "", out);
  return out;
}

// With a budget, the file's text and the tree parsed from it are reserved
// from it (`tree` holds the tree's share for as long as the caller keeps it).
JsonValue parse_json_file(const std::string& path, MemoryBudget* budget, Reservation& tree) {
  if (!budget) tree = Reservation();
  JsonValue root;
  if (budget) {
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(path, ec);
    Reservation text_memory =
        budget->reserve(ec ? 0 : size, "report: the text of " + path, kReportRemedy);
    std::string text = read_text_file(path);
    tree = budget->reserve(0, "report: the parsed tree of " + path, kReportRemedy);
    root = parse_json(text, path, tree);
  } else {
    root = parse_json(read_text_file(path), path);
  }
  if (!root.is_object()) throw Error(ErrorKind::kCorruption, msg::bad_run_log(path, "(top level)", "an object"));
  return root;
}

}  // namespace

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIo, msg::cannot_open(path, std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(ErrorKind::kIo, msg::read_failed(path, std::strerror(errno)));
  return ss.str();
}

namespace {

std::vector<TrainIterationLog> read_iterations(const LogReader& r, const JsonValue& object, const std::string& file,
                                               const std::string& where) {
  std::vector<TrainIterationLog> out;
  for (const auto& it : r.array(object, "iterations").items()) {
    if (!it.is_object()) throw Error(ErrorKind::kCorruption, msg::bad_run_log(file, where, "a list of objects"));
    TrainIterationLog rec;
    rec.iter = static_cast<int64_t>(r.number(it, "iter"));
    rec.selected = r.number(it, "selected");
    rec.added = r.number(it, "added");
    rec.objective = r.number(it, "objective");
    rec.rel_decrease = r.number(it, "rel_decrease");
    rec.sip_violation = r.number(it, "sip_violation");
    rec.score_seconds = r.number(it, "score_seconds");
    rec.solve_seconds = r.number(it, "solve_seconds");
    rec.apg_iterations = r.number(it, "apg_iterations");
    rec.apg_stop = r.string(it, "apg_stop");
    out.push_back(std::move(rec));
  }
  return out;
}

// A multi-class run.json's "classes": one binary run per class.
std::vector<ClassRunLog> read_classes(const LogReader& r, const JsonValue& root, const std::string& file) {
  std::vector<ClassRunLog> out;
  for (const auto& c : r.array(root, "classes").items()) {
    if (!c.is_object()) throw Error(ErrorKind::kCorruption, msg::bad_run_log(file, "classes", "a list of objects"));
    ClassRunLog log;
    log.label = r.number(c, "label");
    log.rows = r.number(c, "rows");
    log.iterations = read_iterations(r, c, file, "classes[].iterations");
    log.stop_reason = r.string(c, "stop_reason");
    log.objective_no_features = r.number(c, "objective_no_features");
    log.final_sip_violation = r.number(c, "final_sip_violation");
    log.objective = r.number(c, "objective");
    log.train_seconds = r.number(c, "train_seconds");
    log.test_auc = c.find("test_auc") ? r.number(c, "test_auc") : kNaN;
    out.push_back(std::move(log));
  }
  if (out.empty()) throw Error(ErrorKind::kCorruption, msg::bad_run_log(file, "classes", "a non-empty list"));
  return out;
}

// path.json "runs": each run's iterations as columns of equal length.
std::vector<PathRunIterations> read_path_runs(const LogReader& r, const JsonValue& root, const std::string& file) {
  std::vector<PathRunIterations> out;
  for (const auto& run : r.array(root, "runs").items()) {
    if (!run.is_object()) throw Error(ErrorKind::kCorruption, msg::bad_run_log(file, "runs", "a list of objects"));
    PathRunIterations rec;
    rec.B = r.number(run, "B");
    rec.C = r.number(run, "C");
    rec.stop_reason = r.string(run, "stop_reason");
    const JsonValue& its = r.field(run, "iterations", JsonValue::Type::kObject, "an object");
    const size_t n = r.array(its, "iter").items().size();
    auto column = [&](const char* name) -> const std::vector<JsonValue>& {
      const auto& items = r.array(its, name).items();
      if (items.size() != n)
        throw Error(ErrorKind::kCorruption,
                    msg::bad_run_log(file, std::string("runs[].iterations.") + name,
                                     fmt::format("an array of {} values, as \"iter\" has", n)));
      return items;
    };
    auto number_at = [&](const char* name, size_t i) {
      const JsonValue& v = column(name)[i];
      if (v.is_null()) return kNaN;
      if (v.type() != JsonValue::Type::kNumber)
        throw Error(ErrorKind::kCorruption,
                    msg::bad_run_log(file, std::string("runs[].iterations.") + name, "an array of numbers"));
      return v.number();
    };
    for (size_t i = 0; i < n; ++i) {
      TrainIterationLog it;
      it.iter = static_cast<int64_t>(number_at("iter", i));
      it.selected = number_at("selected", i);
      it.added = number_at("added", i);
      it.objective = number_at("objective", i);
      it.rel_decrease = number_at("rel_decrease", i);
      it.sip_violation = number_at("sip_violation", i);
      it.score_seconds = number_at("score_seconds", i);
      it.solve_seconds = number_at("solve_seconds", i);
      it.apg_iterations = number_at("apg_iterations", i);
      const JsonValue& stop = column("apg_stop")[i];
      if (!stop.is_string())
        throw Error(ErrorKind::kCorruption, msg::bad_run_log(file, "runs[].iterations.apg_stop", "an array of strings"));
      it.apg_stop = stop.string();
      rec.iterations.push_back(std::move(it));
    }
    out.push_back(std::move(rec));
  }
  return out;
}

}  // namespace

TrainRunLog read_train_log(const std::string& run_json_path, MemoryBudget* budget) {
  Reservation tree;
  const JsonValue root = parse_json_file(run_json_path, budget, tree);
  LogReader r(run_json_path);
  TrainRunLog log;
  log.file = run_json_path;
  log.summary = summary_fields(root);
  log.config = r.string_map(root, "config");
  log.iterations = read_iterations(r, root, run_json_path, "iterations");
  if (root.find("classes")) {
    log.classes = read_classes(r, root, run_json_path);
    log.objective_no_features = log.final_sip_violation = kNaN;
  } else if (root.find("final_sip_violation")) {
    log.objective_no_features = r.number(root, "objective_no_features");
    log.final_sip_violation = r.number(root, "final_sip_violation");
  } else {  // solvers without the FGM cutting plane (run.json "solver" other than fgm)
    log.objective_no_features = log.final_sip_violation = kNaN;
  }
  if (const JsonValue* distributed = root.find("distributed")) {
    for (const auto& pass : r.array(*distributed, "passes").items()) {
      if (!pass.is_object())
        throw Error(ErrorKind::kCorruption, msg::bad_run_log(run_json_path, "distributed.passes", "a list of objects"));
      log.communication.push_back({static_cast<int64_t>(r.number(pass, "iter")), r.string(pass, "phase"),
                                   r.number(pass, "bytes"), r.number(pass, "collectives"), r.number(pass, "seconds")});
    }
    if (distributed->find("rank_resources"))
      for (const auto& rank : r.array(*distributed, "rank_resources").items()) {
        if (!rank.is_object())
          throw Error(ErrorKind::kCorruption,
                      msg::bad_run_log(run_json_path, "distributed.rank_resources", "a list of objects"));
        log.ranks.push_back({r.number(rank, "peak_rss_bytes"), r.number(rank, "memory_budget_peak_bytes")});
      }
  }
  log.test_accuracy = log.test_auc = kNaN;
  if (root.find("test")) {
    const JsonValue& test = r.field(root, "test", JsonValue::Type::kObject, "an object");
    log.test_accuracy = r.number(test, "accuracy");
    log.test_auc = r.number(test, "auc");
  }
  log.warnings = r.warnings(root);
  return log;
}

std::vector<double> NumericCsv::column(const std::string& name) const {
  for (size_t c = 0; c < header.size(); ++c) {
    if (header[c] != name) continue;
    std::vector<double> out;
    out.reserve(rows.size());
    for (const auto& row : rows) out.push_back(row[c]);
    return out;
  }
  return {};
}

bool NumericCsv::has_column(const std::string& name) const {
  for (const auto& h : header)
    if (h == name) return true;
  return false;
}

NumericCsv read_numeric_csv(const std::string& path) {
  const std::string text = read_text_file(path);
  NumericCsv csv;
  csv.file = path;
  uint64_t line_number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos = end + 1;
    ++line_number;
    if (line.empty()) continue;
    std::vector<std::string_view> cells;
    std::vector<size_t> columns;  // 1-based character column of each cell
    for (size_t from = 0;;) {
      size_t comma = line.find(',', from);
      cells.push_back(line.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from));
      columns.push_back(from + 1);
      if (comma == std::string_view::npos) break;
      from = comma + 1;
    }
    if (csv.header.empty()) {
      for (auto cell : cells) csv.header.emplace_back(cell);
      continue;
    }
    if (cells.size() != csv.header.size())
      throw Error(ErrorKind::kCorruption,
                  msg::bad_csv(path, line_number, 0,
                               fmt::format("{} cells where the header has {}", cells.size(), csv.header.size())));
    std::vector<double> row;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (cells[c].empty()) {
        row.push_back(kNaN);
        continue;
      }
      double v = 0;
      auto [p, ec] = std::from_chars(cells[c].data(), cells[c].data() + cells[c].size(), v);
      if (ec != std::errc() || p != cells[c].data() + cells[c].size() || !std::isfinite(v))
        throw Error(ErrorKind::kCorruption,
                    msg::bad_csv(path, line_number, columns[c],
                                 fmt::format("'{}' in column {} is not a number", cells[c], csv.header[c])));
      row.push_back(v);
    }
    csv.rows.push_back(std::move(row));
  }
  if (csv.header.empty()) throw Error(ErrorKind::kCorruption, msg::bad_csv(path, 0, 0, "no header line"));
  return csv;
}

PathRunLog read_path_log(const std::string& path_json_path, const std::string& path_csv_path, MemoryBudget* budget) {
  Reservation tree;
  const JsonValue root = parse_json_file(path_json_path, budget, tree);
  LogReader r(path_json_path);
  PathRunLog log;
  log.json_file = path_json_path;
  log.summary = summary_fields(root);
  log.config = r.string_map(root, "config");
  log.warnings = r.warnings(root);
  log.mode = r.string(root, "mode");
  log.best_point = static_cast<int64_t>(r.number(root, "best_point"));
  if (root.find("selection")) {
    const JsonValue& selection = r.field(root, "selection", JsonValue::Type::kObject, "an object");
    log.criterion = r.string(selection, "criterion");
    log.chosen_point = static_cast<int64_t>(r.number(selection, "chosen_point"));
  }
  if (root.find("runs")) log.runs = read_path_runs(r, root, path_json_path);  // older logs have none
  if (const JsonValue* v = root.find("point_models")) {
    if (!v->is_bool()) throw Error(ErrorKind::kCorruption, msg::bad_run_log(path_json_path, "point_models", "true or false"));
    log.point_models = v->boolean();
  }
  log.points = read_numeric_csv(path_csv_path);
  for (const char* needed : {"point", "selected"})
    if (!log.points.has_column(needed))
      throw Error(ErrorKind::kCorruption, msg::bad_csv(path_csv_path, 1, 0, fmt::format("no column '{}'", needed)));
  return log;
}

}  // namespace fgm::report
