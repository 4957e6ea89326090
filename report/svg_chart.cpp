#include "report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "report/html_text.h"

namespace fgm::report {

double Scale::operator()(double v) const {
  double t;
  if (log) {
    const double a = std::log10(d0), b = std::log10(d1);
    t = b == a ? 0.5 : (std::log10(v) - a) / (b - a);
  } else {
    t = d1 == d0 ? 0.5 : (v - d0) / (d1 - d0);
  }
  return p0 + t * (p1 - p0);
}

Series make_series(std::string name, std::string colour, std::vector<double> x, std::vector<double> y,
                   bool dashed) {
  Series s;
  s.name = std::move(name);
  s.colour = std::move(colour);
  s.x = std::move(x);
  s.y = std::move(y);
  s.dashed = dashed;
  return s;
}

Ticks nice_ticks(double lo, double hi, int target, bool integer) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    double half = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    if (integer) half = std::max(1.0, std::round(half));
    lo -= half;
    hi += half;
  }
  target = std::max(target, 1);
  const double raw = (hi - lo) / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double normalised = raw / magnitude;
  double step = (normalised <= 1 ? 1 : normalised <= 2 ? 2 : normalised <= 5 ? 5 : 10) * magnitude;
  if (integer) step = std::max(step, 1.0);
  Ticks t;
  t.step = step;
  const double first = std::floor(lo / step + 1e-9);
  const double last = std::ceil(hi / step - 1e-9);
  for (double k = first; k <= last + 0.5; k += 1) {
    double v = k * step;
    if (std::fabs(v) < step * 1e-9) v = 0;  // no "-0" or 1e-17 from rounding
    t.values.push_back(v);
  }
  return t;
}

Ticks log_ticks(double lo, double hi) {
  if (hi < lo) std::swap(lo, hi);
  const int a = static_cast<int>(std::floor(std::log10(lo) + 1e-12));
  int b = static_cast<int>(std::ceil(std::log10(hi) - 1e-12));
  if (b <= a) b = a + 1;
  Ticks t;
  for (int k = a; k <= b; ++k) t.values.push_back(std::pow(10.0, k));
  t.step = 1;  // one decade
  return t;
}

std::string tick_label(double v, double step, bool log) {
  if (log) {
    const int e = static_cast<int>(std::lround(std::log10(v)));
    if (e >= -3 && e <= 5) return format_number(std::pow(10.0, e), 6);
    return fmt::format("1e{}", e);
  }
  const double a = std::fabs(v);
  if (a >= 1e6 || (a != 0 && a < 1e-4)) return fmt::format("{:.3g}", v);
  const int decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  return fmt::format("{:.{}f}", v, decimals);
}

namespace {

std::string point(double x, double y) { return fmt::format("{:.1f},{:.1f}", x, y); }
std::string px(double v) { return fmt::format("{:.1f}", v); }

}  // namespace

std::vector<std::string> polyline_runs(const std::vector<double>& x, const std::vector<double>& y,
                                       const Scale& sx, const Scale& sy) {
  std::vector<std::string> runs;
  std::string current;
  const size_t n = std::min(x.size(), y.size());
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) {
      if (!current.empty()) runs.push_back(std::move(current));
      current.clear();
      continue;
    }
    if (!current.empty()) current += ' ';
    current += point(sx(x[i]), sy(y[i]));
  }
  if (!current.empty()) runs.push_back(std::move(current));
  return runs;
}

std::string band_polygon_points(const std::vector<double>& x, const std::vector<double>& low,
                                const std::vector<double>& high, const Scale& sx, const Scale& sy) {
  std::vector<size_t> kept;
  const size_t n = std::min({x.size(), low.size(), high.size()});
  for (size_t i = 0; i < n; ++i)
    if (std::isfinite(x[i]) && std::isfinite(low[i]) && std::isfinite(high[i])) kept.push_back(i);
  if (kept.size() < 2) return "";
  std::string out;
  for (size_t i : kept) out += (out.empty() ? "" : " ") + point(sx(x[i]), sy(high[i]));
  for (auto it = kept.rbegin(); it != kept.rend(); ++it) out += " " + point(sx(x[*it]), sy(low[*it]));
  return out;
}

ChartScales line_chart_scales(const LineChart& chart) {
  ChartScales s;
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo;
  double y_lo = x_lo, y_hi = -x_lo;
  auto take_y = [&](double v) {
    y_lo = std::min(y_lo, v);
    y_hi = std::max(y_hi, v);
  };
  for (const auto& series : chart.series) {
    for (size_t i = 0; i < series.x.size(); ++i) {
      if (!std::isfinite(series.x[i])) continue;
      bool any = false;
      if (i < series.y.size() && std::isfinite(series.y[i])) take_y(series.y[i]), any = true;
      if (i < series.band_low.size() && i < series.band_high.size() && std::isfinite(series.band_low[i]) &&
          std::isfinite(series.band_high[i]))
        take_y(series.band_low[i]), take_y(series.band_high[i]), any = true;
      if (any) x_lo = std::min(x_lo, series.x[i]), x_hi = std::max(x_hi, series.x[i]);
    }
  }
  s.empty = !(x_lo <= x_hi);
  if (s.empty) x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  for (const auto& m : chart.markers)
    if (std::isfinite(m.x)) x_lo = std::min(x_lo, m.x), x_hi = std::max(x_hi, m.x);
  s.y_log = chart.y_log && !s.empty && y_lo > 0;
  s.x_ticks = nice_ticks(x_lo, x_hi, 6, chart.x_integer);
  s.y_ticks = s.y_log ? log_ticks(y_lo, y_hi) : nice_ticks(y_lo, y_hi, 5);
  const ChartFrame& f = chart.frame;
  s.x = Scale{s.x_ticks.values.front(), s.x_ticks.values.back(), f.plot_left(), f.plot_right(), false};
  s.y = Scale{s.y_ticks.values.front(), s.y_ticks.values.back(), f.plot_bottom(), f.plot_top(), s.y_log};
  return s;
}

namespace {

std::string svg_open(const ChartFrame& f, const std::string& title) {
  return fmt::format("<svg class=\"chart\" viewBox=\"0 0 {0} {1}\" width=\"{0}\" height=\"{1}\" role=\"img\" "
                     "aria-label=\"{2}\">\n<rect x=\"{3}\" y=\"{4}\" width=\"{5}\" height=\"{6}\" fill=\"#fff\" "
                     "stroke=\"#bbb\"/>\n",
                     px(f.width), px(f.height), html_escape(title), px(f.plot_left()), px(f.plot_top()),
                     px(f.plot_right() - f.plot_left()), px(f.plot_bottom() - f.plot_top()));
}

// Horizontal grid lines with their labels on the left (y ticks).
std::string y_axis(const ChartFrame& f, const Ticks& ticks, const Scale& sy, bool log) {
  std::string out;
  for (double v : ticks.values) {
    const double y = sy(v);
    out += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#e4e4e4\"/>", px(f.plot_left()),
                       px(f.plot_right()), px(y), px(y));
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"tick\">{}</text>\n",
                       px(f.plot_left() - 6), px(y + 4), html_escape(tick_label(v, ticks.step, log)));
  }
  return out;
}

std::string axis_titles(const ChartFrame& f, const std::string& x_label, const std::string& y_label) {
  const double cy = (f.plot_top() + f.plot_bottom()) / 2;
  return fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"axis-title\">{}</text>\n"
                     "<text transform=\"translate(16,{}) rotate(-90)\" text-anchor=\"middle\" "
                     "class=\"axis-title\">{}</text>\n",
                     px((f.plot_left() + f.plot_right()) / 2), px(f.height - 8), html_escape(x_label), px(cy),
                     html_escape(y_label));
}

std::string series_svg(const Series& series, const ChartScales& s) {
  std::string out;
  const std::string colour = html_escape(series.colour);
  if (!series.band_low.empty()) {
    std::string band = band_polygon_points(series.x, series.band_low, series.band_high, s.x, s.y);
    if (!band.empty())
      out += fmt::format("<polygon points=\"{}\" fill=\"{}\" fill-opacity=\"0.18\" stroke=\"none\"/>\n", band,
                         colour);
  }
  for (const auto& run : polyline_runs(series.x, series.y, s.x, s.y))
    out += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>\n", run, colour,
                       series.dashed ? " stroke-dasharray=\"6 4\"" : "");
  if (series.markers && series.x.size() <= 200) {
    for (size_t i = 0; i < series.x.size() && i < series.y.size(); ++i) {
      if (!std::isfinite(series.x[i]) || !std::isfinite(series.y[i])) continue;
      out += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{}\"><title>{}: {} at {}</title></circle>",
                         px(s.x(series.x[i])), px(s.y(series.y[i])), colour, html_escape(series.name),
                         format_number(series.y[i], 6), format_number(series.x[i], 6));
    }
    out += "\n";
  }
  return out;
}

std::string legend_html(const std::vector<std::pair<const Series*, const BarStack*>>& items) {
  std::string out = "<div class=\"legend\">";
  for (const auto& [series, stack] : items) {
    const std::string& name = series ? series->name : stack->name;
    const std::string colour = html_escape(series ? series->colour : stack->colour);
    std::string swatch = series && series->dashed
                             ? fmt::format("border-top:3px dashed {};height:0;background:none", colour)
                             : fmt::format("background:{}", colour);
    out += fmt::format("<span class=\"key\"><span class=\"swatch\" style=\"{}\"></span>{}{}</span>", swatch,
                       html_escape(name), series && !series->band_low.empty() ? " (band: ± 1 SE)" : "");
  }
  return out + "</div>";
}

}  // namespace

std::string line_chart_svg(const LineChart& chart) {
  const ChartFrame& f = chart.frame;
  const ChartScales s = line_chart_scales(chart);
  std::string out = svg_open(f, chart.title);
  out += y_axis(f, s.y_ticks, s.y, s.y_log);
  for (double v : s.x_ticks.values) {
    const double x = s.x(v);
    out += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#888\"/>"
                       "<text x=\"{0}\" y=\"{3}\" text-anchor=\"middle\" class=\"tick\">{4}</text>\n",
                       px(x), px(f.plot_bottom()), px(f.plot_bottom() + 5), px(f.plot_bottom() + 18),
                       html_escape(tick_label(v, s.x_ticks.step)));
  }
  out += axis_titles(f, chart.x_label, chart.y_label);
  if (s.empty) {
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"empty\">no data</text>\n",
                       px((f.plot_left() + f.plot_right()) / 2), px((f.plot_top() + f.plot_bottom()) / 2));
  }
  for (const auto& series : chart.series) out += series_svg(series, s);
  double label_y = f.plot_top() + 12;  // each marker's label one line below the previous one
  for (const auto& m : chart.markers) {
    if (!std::isfinite(m.x)) continue;
    const double x = s.x(m.x);
    // The label on the side with more room, so it stays inside the plot.
    const bool right_half = x > (f.plot_left() + f.plot_right()) / 2;
    out += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#444\" "
                       "stroke-dasharray=\"3 3\"/><text x=\"{3}\" y=\"{4}\" text-anchor=\"{5}\" "
                       "class=\"marker\">{6}</text>\n",
                       px(x), px(f.plot_top()), px(f.plot_bottom()), px(right_half ? x - 4 : x + 4), px(label_y),
                       right_half ? "end" : "start", html_escape(m.label));
    label_y += 14;
  }
  return out + "</svg>";
}

std::string line_chart_figure(const LineChart& chart) {
  std::vector<std::pair<const Series*, const BarStack*>> items;
  for (const auto& series : chart.series) items.emplace_back(&series, nullptr);
  std::string note = chart.note.empty() ? "" : "<div class=\"note\">" + html_escape(chart.note) + "</div>";
  return fmt::format("<figure><figcaption>{}</figcaption>\n{}\n{}{}</figure>\n", html_escape(chart.title),
                     line_chart_svg(chart), legend_html(items), note);
}

std::string bar_chart_svg(const BarChart& chart) {
  const ChartFrame& f = chart.frame;
  const size_t n = chart.categories.size();
  auto value = [&](const BarStack& stack, size_t i) {
    return i < stack.values.size() && std::isfinite(stack.values[i]) ? std::max(0.0, stack.values[i]) : 0.0;
  };
  double top = 0;
  for (size_t i = 0; i < n; ++i) {
    double total = 0;
    for (const auto& stack : chart.stacks) total += value(stack, i);
    top = std::max(top, total);
  }
  const Ticks y_ticks = nice_ticks(0, top > 0 ? top : 1, 5);
  const Scale sy{y_ticks.values.front(), y_ticks.values.back(), f.plot_bottom(), f.plot_top(), false};
  std::string out = svg_open(f, chart.title);
  out += y_axis(f, y_ticks, sy, false);
  out += axis_titles(f, chart.x_label, chart.y_label);
  if (n == 0) return out + "</svg>";
  const double slot = (f.plot_right() - f.plot_left()) / static_cast<double>(n);
  const double bar = slot * 0.7;
  const size_t label_every = (n + 19) / 20;  // at most about 20 labels
  for (size_t i = 0; i < n; ++i) {
    const double x = f.plot_left() + slot * static_cast<double>(i) + (slot - bar) / 2;
    double base = 0;
    for (const auto& stack : chart.stacks) {
      const double v = value(stack, i);
      if (v > 0) {
        const double y_top = sy(base + v), y_bottom = sy(base);
        out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{} {}: {}"
                           "</title></rect>",
                           px(x), px(y_top), px(bar), px(y_bottom - y_top), html_escape(stack.colour),
                           html_escape(chart.categories[i]), html_escape(stack.name), format_number(v, 4));
      }
      base += v;
    }
    if (i % label_every == 0)
      out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"tick\">{}</text>", px(x + bar / 2),
                         px(f.plot_bottom() + 18), html_escape(chart.categories[i]));
    out += "\n";
  }
  return out + "</svg>";
}

std::string bar_chart_figure(const BarChart& chart) {
  std::vector<std::pair<const Series*, const BarStack*>> items;
  for (const auto& stack : chart.stacks) items.emplace_back(nullptr, &stack);
  return fmt::format("<figure><figcaption>{}</figcaption>\n{}\n{}</figure>\n", html_escape(chart.title),
                     bar_chart_svg(chart), legend_html(items));
}

}  // namespace fgm::report
