// Inline SVG charts for the HTML report: line charts (with optional shaded
// bands and vertical markers) and stacked bar charts. No scripts and no
// external resources; each piece is a small function tested on its own
// (tests/report/test_svg_chart.cpp).
#pragma once

#include <string>
#include <vector>

namespace fgm::report {

// Pixel layout of one chart: the SVG size and the margins around the plot
// area (axes, tick labels and axis titles live in the margins).
struct ChartFrame {
  double width = 560, height = 300;
  double left = 72, right = 18, top = 14, bottom = 48;
  double plot_left() const { return left; }
  double plot_right() const { return width - right; }
  double plot_top() const { return top; }
  double plot_bottom() const { return height - bottom; }
};

// Maps data values in [d0, d1] onto pixels [p0, p1], linearly or (log) by
// log10; p1 < p0 for a y axis, whose pixels grow downwards.
struct Scale {
  double d0 = 0, d1 = 1, p0 = 0, p1 = 1;
  bool log = false;
  double operator()(double v) const;
};

// Tick values at "nice" steps (1, 2 or 5 × 10^k, at least 1 when `integer`)
// with about `target` intervals; the first tick is <= lo and the last >= hi.
// A single value (lo == hi) gets an interval around it.
struct Ticks {
  std::vector<double> values;
  double step = 1;
};
Ticks nice_ticks(double lo, double hi, int target = 5, bool integer = false);
// Powers of ten from the one at or below lo to the one at or above hi
// (lo > 0); at least two.
Ticks log_ticks(double lo, double hi);
// A tick's text: as many decimals as the step needs; exponent form for
// magnitudes of 10^6 and more or below 10^-4; log ticks as powers of ten.
std::string tick_label(double v, double step, bool log = false);

struct Series {
  std::string name;
  std::string colour;                       // CSS colour, e.g. "#1f77b4"
  std::vector<double> x, y;                 // a non-finite y is a gap
  std::vector<double> band_low, band_high;  // empty, or one per x: a shaded band
  bool dashed = false;
  bool markers = true;  // a dot (with a tooltip) at each point
};

Series make_series(std::string name, std::string colour, std::vector<double> x, std::vector<double> y,
                   bool dashed = false);

struct VerticalMarker {
  double x = 0;
  std::string label;
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  std::vector<VerticalMarker> markers;
  bool y_log = false;      // used only when every plotted y (and band) value is > 0
  bool x_integer = false;  // ticks at whole numbers only
  std::string note;        // shown under the legend
  ChartFrame frame;
};

// The pixel coordinates "x,y x,y ..." (one decimal) of each run of
// consecutive points with finite x and y: a gap starts a new run.
std::vector<std::string> polyline_runs(const std::vector<double>& x, const std::vector<double>& y,
                                       const Scale& sx, const Scale& sy);
// The closed polygon of a band: the upper edge left to right, then the lower
// edge right to left; points where either bound is not finite are left out.
std::string band_polygon_points(const std::vector<double>& x, const std::vector<double>& low,
                                const std::vector<double>& high, const Scale& sx, const Scale& sy);

// The scales a chart uses for its data (domains from the ticks).
struct ChartScales {
  Scale x, y;
  Ticks x_ticks, y_ticks;
  bool y_log = false;
  bool empty = true;  // no finite point at all
};
ChartScales line_chart_scales(const LineChart& chart);

// <svg> of the chart (axes, grid, ticks, bands, lines, dots, markers).
std::string line_chart_svg(const LineChart& chart);
// A <figure> with the title, the SVG and a legend of the series.
std::string line_chart_figure(const LineChart& chart);

struct BarStack {
  std::string name, colour;
  std::vector<double> values;  // one per category; non-finite counts as 0
};
struct BarChart {
  std::string title, x_label, y_label;
  std::vector<std::string> categories;
  std::vector<BarStack> stacks;  // drawn bottom to top
  ChartFrame frame;
};
std::string bar_chart_svg(const BarChart& chart);
std::string bar_chart_figure(const BarChart& chart);

}  // namespace fgm::report
