#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include "report/svg_chart.h"

using namespace fgm::report;

namespace {
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// The `points` attribute of every <polyline> / <polygon> in an SVG text.
std::vector<std::string> shape_points(const std::string& svg, const std::string& element) {
  std::vector<std::string> out;
  std::regex re("<" + element + " points=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}
}  // namespace

TEST_CASE("nice ticks cover the data at 1-2-5 steps", "[report][chart]") {
  Ticks t = nice_ticks(0, 10, 6);
  CHECK(t.step == 2);
  CHECK(t.values == std::vector<double>{0, 2, 4, 6, 8, 10});
  t = nice_ticks(0.8123, 0.9871, 5);
  CHECK(t.step == Approx(0.05));
  CHECK(t.values.front() == Approx(0.8));
  CHECK(t.values.back() == Approx(1.0));
  CHECK(t.values.size() == 5);
  t = nice_ticks(-37, 112, 5);
  CHECK(t.step == 50);
  CHECK(t.values == std::vector<double>{-50, 0, 50, 100, 150});
  t = nice_ticks(1, 4, 6, true);  // integer axis: no 0.5 steps
  CHECK(t.step == 1);
  CHECK(t.values == std::vector<double>{1, 2, 3, 4});
  t = nice_ticks(5, 5, 5, true);  // one value: an interval around it
  CHECK(t.values.front() < 5);
  CHECK(t.values.back() > 5);
  t = nice_ticks(0, 0, 5);
  CHECK(t.values.front() <= -1);
  CHECK(t.values.back() >= 1);
  for (double v : nice_ticks(-0.3, 0.3, 5).values) CHECK_FALSE((std::signbit(v) && v == 0));  // no "-0"
}

TEST_CASE("log ticks are whole decades around the data", "[report][chart]") {
  CHECK(log_ticks(3.2, 4100).values == std::vector<double>{1, 10, 100, 1000, 10000});
  CHECK(log_ticks(100, 100).values == std::vector<double>{100, 1000});
  CHECK(tick_label(1e7, 1, true) == "1e7");
  CHECK(tick_label(1000, 1, true) == "1000");
  CHECK(tick_label(1e-5, 1, true) == "1e-5");
}

TEST_CASE("tick labels carry the decimals the step needs", "[report][chart]") {
  CHECK(tick_label(4, 2) == "4");
  CHECK(tick_label(0.85, 0.05) == "0.85");
  CHECK(tick_label(0.9, 0.05) == "0.90");
  CHECK(tick_label(0.0005, 0.0005) == "0.0005");
  CHECK(tick_label(2e6, 1e6) == "2e+06");
}

TEST_CASE("scales map the domain onto pixels, y inverted, log by decades", "[report][chart]") {
  Scale x{0, 10, 50, 550};
  CHECK(x(0) == 50);
  CHECK(x(5) == 300);
  CHECK(x(10) == 550);
  Scale y{0, 1, 250, 50};
  CHECK(y(0) == 250);
  CHECK(y(0.25) == 200);
  Scale ylog{1, 1000, 300, 0, true};
  CHECK(ylog(10) == Approx(200));
  CHECK(ylog(100) == Approx(100));
}

TEST_CASE("polyline coordinates of a known series; a gap splits the line", "[report][chart]") {
  Scale x{0, 10, 50, 550}, y{0, 1, 250, 50};
  CHECK(polyline_runs({0, 5, 10}, {0, 0.5, 1}, x, y) ==
        std::vector<std::string>{"50.0,250.0 300.0,150.0 550.0,50.0"});
  CHECK(polyline_runs({0, 2, 4, 6, 8}, {0, 0.1, kNaN, 0.3, 0.4}, x, y) ==
        std::vector<std::string>{"50.0,250.0 150.0,230.0", "350.0,190.0 450.0,170.0"});
  CHECK(polyline_runs({}, {}, x, y).empty());
  // Band: upper edge left to right, lower edge back; a point without both bounds is left out.
  CHECK(band_polygon_points({0, 5, 10}, {0.1, kNaN, 0.5}, {0.3, 0.6, 0.7}, x, y) ==
        "50.0,190.0 550.0,110.0 550.0,150.0 50.0,230.0");
  CHECK(band_polygon_points({0}, {0.1}, {0.2}, x, y).empty());
}

TEST_CASE("a line chart draws its series at the frame's coordinates", "[report][chart]") {
  LineChart chart;
  chart.title = "t";
  chart.x_label = "features";
  chart.y_label = "accuracy";
  Series s = make_series("test", "#1f77b4", {0, 5, 10}, {0, 0.5, 1});
  s.band_low = {0, 0.4, 0.9};
  s.band_high = {0.2, 0.6, 1};
  chart.series.push_back(s);
  chart.series.push_back(make_series("validation", "#d62728", {0, 10}, {kNaN, kNaN}, true));
  chart.markers.push_back({5, "best <5>"});
  // Default frame 560 x 300, plot area x 72..542, y 14..252; ticks 0..10 and 0..1.
  const std::string svg = line_chart_svg(chart);
  CHECK(shape_points(svg, "polyline") == std::vector<std::string>{"72.0,252.0 307.0,133.0 542.0,14.0"});
  CHECK(shape_points(svg, "polygon") ==
        std::vector<std::string>{"72.0,204.4 307.0,109.2 542.0,14.0 542.0,37.8 307.0,156.8 72.0,252.0"});
  CHECK(svg.find("best &lt;5&gt;") != std::string::npos);
  CHECK(svg.find("<circle cx=\"307.0\" cy=\"133.0\"") != std::string::npos);
  const std::string figure = line_chart_figure(chart);
  CHECK(figure.find("validation") != std::string::npos);  // listed in the legend though it has no data
  CHECK(figure.find("(band: ± 1 SE)") != std::string::npos);
}

TEST_CASE("a chart without finite points says so", "[report][chart]") {
  LineChart chart;
  chart.series.push_back(make_series("x", "#000", {1, 2}, {kNaN, kNaN}));
  CHECK(line_chart_scales(chart).empty);
  const std::string svg = line_chart_svg(chart);
  CHECK(svg.find("no data") != std::string::npos);
  CHECK(svg.find("<polyline") == std::string::npos);
}

TEST_CASE("log y only when every value is positive", "[report][chart]") {
  LineChart chart;
  chart.y_log = true;
  chart.series.push_back(make_series("v", "#000", {1, 2, 3}, {5e6, 3e4, 20}));
  ChartScales s = line_chart_scales(chart);
  CHECK(s.y_log);
  CHECK(s.y.d0 == 10);
  CHECK(s.y.d1 == 1e7);
  chart.series[0].y[2] = -1;
  CHECK_FALSE(line_chart_scales(chart).y_log);
}

TEST_CASE("stacked bars: heights add up per category", "[report][chart]") {
  BarChart chart;
  chart.categories = {"1", "2"};
  chart.stacks = {{"scoring", "#1f77b4", {1, 3}}, {"solving", "#ff7f0e", {1, kNaN}}};
  // y ticks 0..3 (step 0.5), plot y 14..252: one second is 238/3 pixels.
  const std::string svg = bar_chart_svg(chart);
  std::regex rect("<rect x=\"([0-9.]+)\" y=\"([0-9.]+)\" width=\"([0-9.]+)\" height=\"([0-9.]+)\" fill=\"(#[0-9a-f]+)\"");
  std::vector<std::vector<std::string>> bars;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), rect); it != std::sregex_iterator(); ++it)
    if ((*it)[5] != "#fff") bars.push_back({(*it)[1], (*it)[2], (*it)[4], (*it)[5]});  // not the plot background
  REQUIRE(bars.size() == 3);  // the NaN stack draws nothing
  const double unit = 238.0 / 3;
  CHECK(std::stod(bars[0][2]) == Approx(unit).margin(0.06));
  CHECK(std::stod(bars[1][1]) == Approx(252 - 2 * unit).margin(0.06));  // solving sits on scoring
  CHECK(bars[1][3] == "#ff7f0e");
  CHECK(std::stod(bars[2][2]) == Approx(3 * unit).margin(0.06));
  CHECK(std::stod(bars[2][1]) == Approx(14).margin(0.06));
}
