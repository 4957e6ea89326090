#include "report/report_page.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/feature_key.h"
#include "core/memory_budget.h"
#include "core/messages.h"
#include "report/html_text.h"
#include "report/svg_chart.h"

namespace fgm::report {
namespace {

namespace fs = std::filesystem;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Colours of the series (colour-blind-safe enough, distinct in greyscale order).
constexpr const char* kBlue = "#1f77b4";
constexpr const char* kOrange = "#ff7f0e";
constexpr const char* kGreen = "#2ca02c";
constexpr const char* kRed = "#d62728";
constexpr const char* kPurple = "#9467bd";
// One colour per class of a multi-class run (tab20; repeats after 20).
constexpr const char* kClassColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                                         "#7f7f7f", "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896",
                                         "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5"};

constexpr const char* kStyle = R"(
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0 auto;max-width:1180px;padding:16px 20px 40px;color:#222;background:#fafafa}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.25em;border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:1.6em}
h3{font-size:1.05em;margin:1.2em 0 .4em}
.source{color:#666;font-size:.9em;margin:.2em 0 .8em;word-break:break-all}
nav a{margin-right:1em}
.warnings{background:#fff4e5;border:1px solid #f0b35a;border-radius:4px;padding:6px 12px;margin:.6em 0}
.warnings h3{margin:.3em 0;color:#8a4b00}.warnings li{margin:.3em 0}
.ok{color:#2a7a2a}
.headline{font-size:1.15em;margin:.4em 0 .8em}.headline b{font-variant-numeric:tabular-nums}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:12px}
figure{margin:0;background:#fff;border:1px solid #ddd;border-radius:4px;padding:8px}
figcaption{font-weight:600;margin-bottom:4px}
svg.chart{display:block;width:100%;height:auto;font-size:11px}
svg .tick{fill:#444}svg .axis-title{fill:#222;font-size:12px}svg .empty{fill:#999;font-size:14px}svg .marker{fill:#333;paint-order:stroke;stroke:#fff;stroke-width:3px}
.legend{font-size:12px;margin-top:4px}.note{font-size:12px;color:#555;margin-top:3px}.key{margin-right:14px;white-space:nowrap;display:inline-block}
.swatch{display:inline-block;width:18px;height:10px;margin-right:5px;vertical-align:middle}
table{border-collapse:collapse;background:#fff;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums}
.summary{columns:3 340px;column-gap:18px;margin-bottom:12px}.summary div{break-inside:avoid;padding:1px 0;font-size:13px}
.summary .k{color:#555}.summary .v{font-family:ui-monospace,"DejaVu Sans Mono",monospace;word-break:break-all}
.wbar{display:inline-block;height:9px;vertical-align:middle}.wbar.pos{background:#1f77b4}.wbar.neg{background:#d62728}
.scroll{max-height:640px;max-width:100%;overflow:auto;display:inline-block;border:1px solid #ddd}
details{margin:.8em 0}summary{cursor:pointer;font-weight:600}
)";

std::string warnings_html(const std::vector<LogWarning>& warnings, const std::string& file) {
  if (warnings.empty())
    return fmt::format("<p class=\"ok\">No warnings in {}.</p>\n", html_escape(fs::path(file).filename().string()));
  std::string out = fmt::format("<div class=\"warnings\"><h3>{} warning{} in {}</h3><ul>\n", warnings.size(),
                                warnings.size() == 1 ? "" : "s", html_escape(fs::path(file).filename().string()));
  for (const auto& w : warnings)
    out += fmt::format("<li><code>{}</code> {}</li>\n", html_escape(w.code), html_escape(w.message));
  return out + "</ul></div>\n";
}

std::string summary_html(const SummaryFields& fields) {
  std::string out = "<div class=\"summary\">\n";
  for (const auto& [k, v] : fields)
    out += fmt::format("<div><span class=\"k\">{}</span> = <span class=\"v\">{}</span></div>\n", html_escape(k),
                       html_escape(v));
  return out + "</div>\n";
}

std::string config_html(const std::vector<std::pair<std::string, std::string>>& config) {
  std::string out = fmt::format("<details><summary>Configuration ({} keys)</summary>\n<table>\n"
                                "<tr><th>key</th><th>value</th></tr>\n",
                                config.size());
  for (const auto& [k, v] : config)
    out += fmt::format("<tr><td>{}</td><td>{}</td></tr>\n", html_escape(k), html_escape(v));
  return out + "</table></details>\n";
}

// log y when the values span two decades or more and are all positive.
bool wants_log(const std::vector<double>& values) {
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    if (v <= 0) return false;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  return hi > 0 && hi / lo >= 100;
}

std::string feature_label(const FeatureKey& key, uint64_t base) {
  const uint64_t j = key.ids[0] + base;
  switch (key.kind) {
    case FeatureKind::kCross: return fmt::format("({}, {})", j, key.ids[1] + base);
    case FeatureKind::kHik:
    case FeatureKind::kAdditive: return fmt::format("{} \xc2\xb7 level {}", j, key.level);
    default: return fmt::format("{}", j);
  }
}

// Rows for one list of features; a multi-class model calls it once per class.
std::string feature_rows_html(const std::vector<ModelFeature>& features, int index_base, size_t max_rows) {
  double max_abs = 0;
  for (const auto& f : features) max_abs = std::max(max_abs, std::fabs(f.weight));
  const uint64_t base = static_cast<uint64_t>(index_base);
  std::string out;
  const size_t shown = std::min(features.size(), max_rows);
  for (size_t i = 0; i < shown; ++i) {
    const ModelFeature& f = features[i];
    const double share = max_abs > 0 ? 100.0 * std::fabs(f.weight) / max_abs : 0;
    out += fmt::format(
        "<tr><td class=\"num\">{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
        "<td><span class=\"wbar {}\" style=\"width:{:.0f}px\"></span></td><td class=\"num\">{}</td></tr>\n",
        i + 1, html_escape(feature_label(f.key, base)), html_escape(feature_kind_name(f.key.kind)),
        f.key.group == UINT64_MAX ? std::string() : fmt::format("{}", f.key.group), format_number(f.weight, 6),
        f.weight < 0 ? "neg" : "pos", share * 1.2, f.batch);
  }
  if (features.size() > shown)
    out += fmt::format("<tr><td colspan=\"7\">… {} more features: <code>fgm inspect</code> lists them all</td></tr>\n",
                       features.size() - shown);
  return out;
}

std::vector<double> iteration_field(const TrainRunLog& log, double TrainIterationLog::*field) {
  std::vector<double> out;
  for (const auto& it : log.iterations) out.push_back(it.*field);
  return out;
}

// SIP violations span many decades and turn negative (no violated
// constraint) once the cutting planes cover the data: a log scale for the
// positive ones, the others named in a note.
LineChart sip_chart(const TrainRunLog& log, const std::vector<double>& iters) {
  LineChart sip;
  sip.title = "SIP violation per outer iteration";
  sip.x_label = "outer iteration";
  sip.y_label = "SIP violation (37)";
  sip.x_integer = true;
  Series before = make_series("before the iteration's solve", kRed, iters,
                              iteration_field(log, &TrainIterationLog::sip_violation));
  Series after = make_series("after the last solve", kPurple, {iters.empty() ? 1.0 : iters.back() + 1},
                             {log.final_sip_violation});
  std::vector<double> positive;
  for (const Series* s : {&before, &after})
    for (double v : s->y)
      if (v > 0) positive.push_back(v);
  if (wants_log(positive)) {
    sip.y_log = true;
    std::string hidden;
    for (Series* s : {&before, &after})
      for (size_t i = 0; i < s->y.size(); ++i)
        if (std::isfinite(s->y[i]) && s->y[i] <= 0) {
          hidden += fmt::format("{}{} at iteration {}", hidden.empty() ? "" : ", ", format_number(s->y[i], 6),
                                format_number(s->x[i]));
          s->y[i] = kNaN;
        }
    if (!hidden.empty())
      sip.note = "Not drawn on the log scale (\xe2\x89\xa4 0: no violated constraint): " + hidden + ".";
  }
  sip.series = {std::move(before), std::move(after)};
  return sip;
}

std::string train_charts_html(const TrainRunLog& log) {
  std::vector<double> iters;
  for (const auto& it : log.iterations) iters.push_back(static_cast<double>(it.iter));

  LineChart objective;
  objective.title = "Objective per outer iteration";
  objective.x_label = "outer iteration (0: no features)";
  objective.y_label = "objective F(w, b)";
  objective.x_integer = true;
  Series obj = make_series("objective", kBlue, {0.0}, {log.objective_no_features});
  for (size_t i = 0; i < iters.size(); ++i) {
    obj.x.push_back(iters[i]);
    obj.y.push_back(log.iterations[i].objective);
  }
  objective.y_log = wants_log(obj.y);
  objective.series.push_back(std::move(obj));

  LineChart sip = sip_chart(log, iters);

  BarChart time;
  time.title = "Time per outer iteration";
  time.x_label = "outer iteration";
  time.y_label = "seconds";
  for (double it : iters) time.categories.push_back(format_number(it));
  time.stacks = {{"scoring pass", kBlue, iteration_field(log, &TrainIterationLog::score_seconds)},
                 {"APG solve", kOrange, iteration_field(log, &TrainIterationLog::solve_seconds)}};

  LineChart selected;
  selected.title = "Selected features per outer iteration";
  selected.x_label = "outer iteration";
  selected.y_label = "features in the model";
  selected.x_integer = true;
  selected.series.push_back(make_series("selected", kGreen, iters, iteration_field(log, &TrainIterationLog::selected)));

  return "<div class=\"charts\">\n" + line_chart_figure(objective) + line_chart_figure(sip) + bar_chart_figure(time) +
         line_chart_figure(selected) + "</div>\n";
}

// SIP violations of several series: a log scale when the positive ones span
// two decades; the values <= 0 (no violated constraint) are then counted in
// the note instead of drawn.
void log_scale_for_violations(LineChart& chart, const std::vector<double>& positive) {
  if (!wants_log(positive)) return;
  chart.y_log = true;
  size_t hidden = 0;
  for (auto& series : chart.series)
    for (double& v : series.y)
      if (std::isfinite(v) && v <= 0) {
        v = kNaN;
        ++hidden;
      }
  if (hidden > 0)
    chart.note = fmt::format("{} value{} \xe2\x89\xa4 0 (no violated constraint) not drawn on the log scale.", hidden,
                             hidden == 1 ? "" : "s");
}

std::string class_name(double label) { return "class " + format_number(label, 15); }

const char* class_colour(size_t c) { return kClassColours[c % std::size(kClassColours)]; }

// One class's binary run in the shape train_charts_html draws.
TrainRunLog class_train_log(const ClassRunLog& c) {
  TrainRunLog log;
  log.iterations = c.iterations;
  log.objective_no_features = c.objective_no_features;
  log.final_sip_violation = c.final_sip_violation;
  return log;
}

// Objectives differ by orders of magnitude between classes: each class's
// objective relative to its F_0 (1 at iteration 0), so all share one axis.
LineChart relative_objective_chart(const TrainRunLog& log) {
  LineChart chart;
  chart.title = "Objective relative to no features, per class";
  chart.x_label = "outer iteration (0: no features)";
  chart.y_label = "F(w, b) / F\xe2\x82\x80";
  chart.x_integer = true;
  for (size_t c = 0; c < log.classes.size(); ++c) {
    const ClassRunLog& run = log.classes[c];
    Series s = make_series(class_name(run.label), class_colour(c), {0.0}, {1.0});
    for (const auto& it : run.iterations) {
      s.x.push_back(static_cast<double>(it.iter));
      s.y.push_back(it.objective / run.objective_no_features);
    }
    chart.series.push_back(std::move(s));
  }
  std::vector<double> all;
  for (const auto& s : chart.series) all.insert(all.end(), s.y.begin(), s.y.end());
  chart.y_log = wants_log(all);
  return chart;
}

// SIP violation before each solve, a series per class; on a log scale the
// values <= 0 (no violated constraint) are counted in a note instead.
LineChart class_sip_chart(const TrainRunLog& log) {
  LineChart chart;
  chart.title = "SIP violation per outer iteration, per class";
  chart.x_label = "outer iteration";
  chart.y_label = "SIP violation (37)";
  chart.x_integer = true;
  std::vector<double> positive;
  for (size_t c = 0; c < log.classes.size(); ++c) {
    std::vector<double> x, y;
    for (const auto& it : log.classes[c].iterations) {
      x.push_back(static_cast<double>(it.iter));
      y.push_back(it.sip_violation);
      if (it.sip_violation > 0) positive.push_back(it.sip_violation);
    }
    chart.series.push_back(make_series(class_name(log.classes[c].label), class_colour(c), x, y));
  }
  log_scale_for_violations(chart, positive);
  return chart;
}

// Scoring and solving seconds of all classes at each outer iteration.
BarChart class_time_per_iteration_chart(const TrainRunLog& log) {
  size_t longest = 0;
  for (const auto& c : log.classes) longest = std::max(longest, c.iterations.size());
  BarChart chart;
  chart.title = "Time per outer iteration, all classes";
  chart.x_label = "outer iteration";
  chart.y_label = "seconds";
  std::vector<double> score(longest, 0.0), solve(longest, 0.0);
  for (const auto& c : log.classes)
    for (size_t i = 0; i < c.iterations.size(); ++i) {
      score[i] += c.iterations[i].score_seconds;
      solve[i] += c.iterations[i].solve_seconds;
    }
  for (size_t i = 0; i < longest; ++i) chart.categories.push_back(fmt::format("{}", i + 1));
  chart.stacks = {{"scoring passes", kBlue, score}, {"APG solves", kOrange, solve}};
  return chart;
}

BarChart class_time_chart(const TrainRunLog& log) {
  BarChart chart;
  chart.title = "Time per class";
  chart.x_label = "class";
  chart.y_label = "seconds";
  std::vector<double> score, solve;
  for (const auto& c : log.classes) {
    chart.categories.push_back(format_number(c.label, 15));
    double a = 0, b = 0;
    for (const auto& it : c.iterations) {
      a += it.score_seconds;
      b += it.solve_seconds;
    }
    score.push_back(a);
    solve.push_back(b);
  }
  chart.stacks = {{"scoring passes", kBlue, score}, {"APG solves", kOrange, solve}};
  return chart;
}

std::string classes_table_html(const TrainRunLog& log, const Model& model) {
  std::string out =
      "<div class=\"scroll\"><table class=\"classes\">\n<tr><th>class</th><th>rows</th><th>outer iterations</th>"
      "<th>stop</th><th>features</th><th>bias</th><th>objective</th><th>F\xe2\x82\x80</th>"
      "<th>final SIP violation</th><th>test AUC</th><th>seconds</th></tr>\n";
  for (size_t c = 0; c < log.classes.size(); ++c) {
    const ClassRunLog& run = log.classes[c];
    out += fmt::format(
        "<tr><td><a href=\"#class-{}\">{}</a></td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td>"
        "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
        c, html_escape(format_number(run.label, 15)), format_number(run.rows, 15), run.iterations.size(),
        html_escape(run.stop_reason), model.classes[c].features.size(), format_number(model.classes[c].bias, 6),
        format_number(run.objective, 6), format_number(run.objective_no_features, 6),
        format_number(run.final_sip_violation, 4), format_fixed(run.test_auc, 4), format_number(run.train_seconds, 4));
  }
  return out + "</table></div>\n";
}

// Each class's own charts and feature table, folded (the first one open).
std::string class_details_html(const TrainRunLog& log, const Model& model) {
  std::string out;
  for (size_t c = 0; c < log.classes.size(); ++c) {
    const ClassModel& cm = model.classes[c];
    out += fmt::format("<details class=\"class\" id=\"class-{}\"{}><summary>{}: {} feature{}, bias {}</summary>\n", c,
                       c == 0 ? " open" : "", html_escape(class_name(cm.label)), cm.features.size(),
                       cm.features.size() == 1 ? "" : "s", format_number(cm.bias, 6));
    out += train_charts_html(class_train_log(log.classes[c]));
    out += feature_table_html(cm.features, model.index_base);
    out += "</details>\n";
  }
  return out;
}

std::string multiclass_train_section_html(const TrainRunLog& log, const Model& model) {
  if (model.classes.size() != log.classes.size())
    throw Error(ErrorKind::kCorruption,
                msg::bad_run_log(log.file, "classes",
                                 fmt::format("one entry per class of the model ({})", model.classes.size())));
  size_t total = 0;
  for (const auto& c : model.classes) total += c.features.size();
  std::string out = "<section id=\"train\">\n<h2>Training run: one-vs-rest over " +
                    fmt::format("{} classes</h2>\n", log.classes.size());
  out += fmt::format("<p class=\"source\">{}</p>\n", html_escape(log.file));
  const std::string test = std::isnan(log.test_accuracy)
                               ? std::string("No test data (data.test)")
                               : fmt::format("Test accuracy <b>{}</b> \xc2\xb7 macro AUC <b>{}</b> (mean one-vs-rest AUC)",
                                             format_fixed(log.test_accuracy, 4), format_fixed(log.test_auc, 4));
  out += fmt::format("<p class=\"headline\">{} \xc2\xb7 {} features over {} classes</p>\n", test, total,
                     log.classes.size());
  out += warnings_html(log.warnings, log.file);
  out += summary_html(log.summary);
  out += "<div class=\"charts\">\n" + line_chart_figure(relative_objective_chart(log)) +
         line_chart_figure(class_sip_chart(log)) + bar_chart_figure(class_time_per_iteration_chart(log)) +
         bar_chart_figure(class_time_chart(log)) + "</div>\n";
  out += "<h3>Classes</h3>\n" + classes_table_html(log, model);
  out += "<h3>Each class: its run and selected features</h3>\n" + class_details_html(log, model);
  out += config_html(log.config);
  return out + "</section>\n";
}

// Points sorted by selected features (then point), so lines run left to right.
std::vector<size_t> points_by_selected(const NumericCsv& csv) {
  const std::vector<double> selected = csv.column("selected"), point = csv.column("point");
  std::vector<size_t> order(csv.rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::make_pair(selected[a], point[a]) < std::make_pair(selected[b], point[b]);
  });
  return order;
}

std::vector<double> column_in_order(const NumericCsv& csv, const std::string& name, const std::vector<size_t>& order) {
  const std::vector<double> column = csv.column(name);
  std::vector<double> out;
  for (size_t i : order) out.push_back(column.empty() ? kNaN : column[i]);
  return out;
}

bool any_finite(const std::vector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

// Test / validation / de-biased / CV curves of one metric ("accuracy" or "auc").
LineChart metric_chart(const PathRunLog& log, const std::string& metric, const std::string& title,
                       const std::vector<size_t>& order, const std::vector<VerticalMarker>& markers) {
  const NumericCsv& csv = log.points;
  LineChart chart;
  chart.title = title;
  chart.x_label = "selected features";
  chart.y_label = metric == "auc" ? "AUC" : "accuracy";
  chart.x_integer = true;
  const std::vector<double> x = column_in_order(csv, "selected", order);
  struct Curve {
    std::string column, name, colour;
    bool dashed;
  };
  const Curve curves[] = {{"test_" + metric, "test", kBlue, false},
                          {"validation_" + metric, "validation", kRed, false},
                          {"debiased_test_" + metric, "test, de-biased", kBlue, true},
                          {"debiased_validation_" + metric, "validation, de-biased", kRed, true}};
  for (const auto& c : curves) {
    std::vector<double> y = column_in_order(csv, c.column, order);
    if (any_finite(y)) chart.series.push_back(make_series(c.name, c.colour, x, std::move(y), c.dashed));
  }
  std::vector<double> cv = column_in_order(csv, "cv_" + metric, order);
  if (any_finite(cv)) {
    Series s = make_series("cross-validation mean", kGreen, x, cv);
    const std::vector<double> se = column_in_order(csv, "cv_" + metric + "_se", order);
    if (any_finite(se)) {
      for (size_t i = 0; i < cv.size(); ++i) {
        s.band_low.push_back(cv[i] - se[i]);
        s.band_high.push_back(cv[i] + se[i]);
      }
    }
    chart.series.push_back(std::move(s));
  }
  chart.markers = markers;
  return chart;
}

std::string run_name(const PathRunLog& log, const PathRunIterations& run) {
  if (log.mode == "B") return "B=" + format_number(run.B, 15);
  if (log.mode == "C") return "C=" + format_number(run.C, 15);
  return "path";
}

// Objective, SIP violation and time per outer iteration of each path run
// (path.json "runs"): a series per B/C value.
std::string path_iteration_charts_html(const PathRunLog& log) {
  LineChart objective;
  objective.title = "Objective per outer iteration";
  objective.x_label = "outer iteration";
  objective.y_label = "objective F(w, b)";
  objective.x_integer = true;
  LineChart sip;
  sip.title = "SIP violation per outer iteration";
  sip.x_label = "outer iteration";
  sip.y_label = "SIP violation (37)";
  sip.x_integer = true;
  BarChart time;
  time.title = "Time per outer iteration";
  time.x_label = log.runs.size() > 1 ? "run : outer iteration" : "outer iteration";
  time.y_label = "seconds";
  std::vector<double> score, solve, all_objectives, positive_sip;
  for (size_t r = 0; r < log.runs.size(); ++r) {
    const PathRunIterations& run = log.runs[r];
    const std::string name = run_name(log, run);
    std::vector<double> x, obj, viol;
    for (const auto& it : run.iterations) {
      x.push_back(static_cast<double>(it.iter));
      obj.push_back(it.objective);
      viol.push_back(it.sip_violation);
      all_objectives.push_back(it.objective);
      if (it.sip_violation > 0) positive_sip.push_back(it.sip_violation);
      time.categories.push_back(log.runs.size() > 1 ? name + " : " + format_number(static_cast<double>(it.iter))
                                                    : format_number(static_cast<double>(it.iter)));
      score.push_back(it.score_seconds);
      solve.push_back(it.solve_seconds);
    }
    const char* colour = kClassColours[r % std::size(kClassColours)];
    objective.series.push_back(make_series(name, colour, x, obj));
    sip.series.push_back(make_series(name, colour, x, viol));
  }
  objective.y_log = wants_log(all_objectives);
  log_scale_for_violations(sip, positive_sip);
  time.stacks = {{"scoring pass", kBlue, score}, {"APG solve", kOrange, solve}};
  return line_chart_figure(objective) + line_chart_figure(sip) + bar_chart_figure(time);
}

std::string path_charts_html(const PathRunLog& log) {
  const NumericCsv& csv = log.points;
  const std::vector<size_t> order = points_by_selected(csv);
  const std::vector<double> points = csv.column("point"), selected = csv.column("selected");
  auto selected_at = [&](int64_t point) {
    for (size_t i = 0; i < points.size(); ++i)
      if (points[i] == static_cast<double>(point)) return selected[i];
    return kNaN;
  };
  std::vector<VerticalMarker> markers;
  if (log.chosen_point >= 0) markers.push_back({selected_at(log.chosen_point), "chosen (" + log.criterion + ", one-SE)"});
  if (log.best_point >= 0 && log.best_point != log.chosen_point)
    markers.push_back({selected_at(log.best_point), "best on validation"});

  LineChart objective;
  objective.title = "Training objective against selected features";
  objective.x_label = "selected features";
  objective.y_label = "objective F(w, b)";
  objective.x_integer = true;
  objective.series.push_back(make_series("objective", kBlue, column_in_order(csv, "selected", order),
                                         column_in_order(csv, "train_objective", order)));
  objective.y_log = wants_log(objective.series.back().y);

  // path.csv's seconds count from the start of the path: per point, the difference.
  BarChart time;
  time.title = "Time per point";
  time.x_label = "point (selected features)";
  time.y_label = "seconds";
  const std::vector<double> seconds = csv.column("seconds");
  std::vector<double> per_point;
  for (size_t i = 0; i < csv.rows.size(); ++i) {
    time.categories.push_back(fmt::format("{} ({})", format_number(points[i]), format_number(selected[i])));
    per_point.push_back(seconds.empty() ? kNaN : seconds[i] - (i == 0 ? 0.0 : seconds[i - 1]));
  }
  time.stacks = {{"seconds (scoring and solving)", kOrange, per_point}};

  return "<div class=\"charts\">\n" + line_chart_figure(metric_chart(log, "accuracy", "Accuracy against selected features", order, markers)) +
         line_chart_figure(metric_chart(log, "auc", "AUC against selected features", order, markers)) +
         line_chart_figure(objective) + bar_chart_figure(time) +
         (log.runs.empty() ? std::string() : path_iteration_charts_html(log)) + "</div>\n";
}

std::string points_table_html(const NumericCsv& csv) {
  std::string out = "<div class=\"scroll\"><table>\n<tr>";
  for (const auto& h : csv.header) out += "<th>" + html_escape(h) + "</th>";
  out += "</tr>\n";
  for (const auto& row : csv.rows) {
    out += "<tr>";
    for (double v : row) out += "<td class=\"num\">" + format_number(v, 6) + "</td>";
    out += "</tr>\n";
  }
  return out + "</table></div>\n";
}

std::string model_heading(const std::string& what, const Model& model) {
  if (model.has_kernel_svm()) {  // weights below are the kernel weights d_j
    const KernelSvm& k = model.kernel_svm;
    return fmt::format("<h3>Kernel SVM of {}: {} feature{} ({} kernels, weight = kernel weight), {} support "
                       "vectors of {} training rows, bias {}</h3>\n",
                       html_escape(what), k.feature_ids.size(), k.feature_ids.size() == 1 ? "" : "s",
                       html_escape(k.kernel), k.n_support(), k.training_rows, format_number(model.bias, 6));
  }
  return fmt::format("<h3>Selected features of {}: {} feature{}, kind {}, bias {}</h3>\n", html_escape(what),
                     model.features.size(), model.features.size() == 1 ? "" : "s", html_escape(model.feature_kind),
                     format_number(model.bias, 6));
}

}  // namespace

std::string feature_table_html(const std::vector<ModelFeature>& features, int index_base, size_t max_rows) {
  return "<div class=\"scroll\"><table class=\"features\">\n<tr><th>#</th><th>feature</th><th>kind</th><th>group</th>"
         "<th>weight</th><th>|weight|</th><th>iteration</th></tr>\n" +
         feature_rows_html(features, index_base, max_rows) + "</table></div>\n";
}

std::string feature_table_html(const Model& model, size_t max_rows) {
  if (model.has_kernel_svm()) {
    std::vector<ModelFeature> kernels;
    for (size_t j = 0; j < model.kernel_svm.feature_ids.size(); ++j) {
      ModelFeature f;
      f.key.ids[0] = model.kernel_svm.feature_ids[j];
      f.weight = model.kernel_svm.kernel_weights[j];
      f.batch = 1;
      kernels.push_back(f);
    }
    return feature_table_html(kernels, model.index_base, max_rows);
  }
  return feature_table_html(model.features, model.index_base, max_rows);
}

// A distributed run: each outer iteration's communication (rank 0: payload
// bytes sent plus received, collective calls, seconds inside them) by phase,
// and every rank's peak RSS and budget peak.
std::string communication_html(const TrainRunLog& log) {
  if (log.communication.empty() && log.ranks.empty()) return {};
  std::string out = "<h3>Communication (distributed run, rank 0)</h3>\n<div class=\"scroll\"><table>\n"
                    "<tr><th>iteration</th><th>phase</th><th>bytes</th><th>collectives</th><th>seconds</th></tr>\n";
  for (const auto& c : log.communication)
    out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", c.iter,
                       html_escape(c.phase), format_bytes(static_cast<uint64_t>(c.bytes)),
                       format_number(c.collectives, 6), format_number(c.seconds, 4));
  out += "</table></div>\n";
  if (log.ranks.empty()) return out;
  out += "<h3>Memory per rank</h3>\n<table>\n<tr><th>rank</th><th>peak RSS</th><th>memory budget peak</th></tr>\n";
  for (size_t r = 0; r < log.ranks.size(); ++r)
    out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n", r,
                       format_bytes(static_cast<uint64_t>(log.ranks[r].peak_rss_bytes)),
                       format_bytes(static_cast<uint64_t>(log.ranks[r].memory_budget_peak_bytes)));
  return out + "</table>\n";
}

std::string train_section_html(const TrainRunLog& log, const Model& model) {
  if (log.multiclass()) return multiclass_train_section_html(log, model);
  std::string out = "<section id=\"train\">\n<h2>Training run</h2>\n";
  out += fmt::format("<p class=\"source\">{}</p>\n", html_escape(log.file));
  out += warnings_html(log.warnings, log.file);
  out += summary_html(log.summary);
  out += train_charts_html(log);
  out += communication_html(log);
  out += model_heading("model.fgm", model);
  out += feature_table_html(model);
  out += config_html(log.config);
  return out + "</section>\n";
}

int64_t featured_point(const PathRunLog& log) {
  if (log.chosen_point >= 0) return log.chosen_point;
  if (log.best_point >= 0) return log.best_point;
  const std::vector<double> points = log.points.column("point");
  if (points.empty()) throw Error(ErrorKind::kCorruption, msg::bad_csv(log.points.file, 0, 0, "no points"));
  return static_cast<int64_t>(points.back());
}

std::string path_section_html(const PathRunLog& log, const Model* model) {
  const int64_t model_point = featured_point(log);
  const std::string why = model_point == log.chosen_point
                              ? "chosen by the one-SE rule on " + log.criterion
                              : model_point == log.best_point ? "the best on validation" : "the last point";
  std::string out = "<section id=\"path\">\n<h2>Path</h2>\n";
  out += fmt::format("<p class=\"source\">{} and {}</p>\n", html_escape(log.json_file), html_escape(log.points.file));
  out += warnings_html(log.warnings, log.json_file);
  out += summary_html(log.summary);
  out += path_charts_html(log);
  out += "<h3>Points (path.csv)</h3>\n" + points_table_html(log.points);
  if (model) {
    out += model_heading(fmt::format("point {} ({})", model_point, why), *model);
    out += feature_table_html(*model);
  } else {
    out += fmt::format("<p>Point {} ({}) has no model file: this solver's path keeps none.</p>\n", model_point, why);
  }
  out += config_html(log.config);
  return out + "</section>\n";
}

ReportSections detect_sections(const std::string& dir) {
  std::error_code ec;
  auto has = [&](const char* name) { return fs::exists(fs::path(dir) / name, ec); };
  ReportSections s;
  s.train = has("run.json") || has("model.fgm");
  s.path = has("path.json") || has("path.csv");
  if (!s.train && !s.path) throw Error(ErrorKind::kIo, msg::no_run_logs(dir));
  return s;
}

std::string build_report_html(const std::string& dir, ReportSections sections, MemoryBudget* budget) {
  const fs::path base(dir);
  std::string body, nav;
  if (sections.train) {
    TrainRunLog log = read_train_log((base / "run.json").string(), budget);
    Model model = read_model((base / "model.fgm").string());
    body += train_section_html(log, model);
    nav += "<a href=\"#train\">Training run</a>";
  }
  if (sections.path) {
    PathRunLog log = read_path_log((base / "path.json").string(), (base / "path.csv").string(), budget);
    // A path whose points have no model files (solver = "pnorm_kta" with an
    // RBF kernel: path.json "point_models": false) shows no feature table.
    const std::string model_file = (base / fmt::format("point-{}.fgm", featured_point(log))).string();
    const Model model = log.point_models ? read_model(model_file) : Model{};
    body += path_section_html(log, log.point_models ? &model : nullptr);
    nav += "<a href=\"#path\">Path</a>";
  }
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<title>fgm report: {0}</title>\n<style>{1}</style>\n</head>\n<body>\n"
      "<header><h1>fgm report</h1><p class=\"source\">{0} · fgm {2}</p><nav>{3}</nav></header>\n{4}"
      "</body>\n</html>\n",
      html_escape(dir), kStyle, FGM_VERSION, nav, body);
}

std::string write_report(const std::string& dir, ReportSections sections, MemoryBudget* budget) {
  const std::string html = build_report_html(dir, sections, budget);
  const std::string path = (fs::path(dir) / kReportFileName).string();
  write_file_atomic(path, html);
  return path;
}

}  // namespace fgm::report
