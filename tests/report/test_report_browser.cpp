// The report in a real browser: a small `fgm train` and `fgm path` into one
// directory, `fgm report`, and a small multi-class `fgm train` (its own
// report.html); headless Chromium renders each report.html to a
// PNG. Checked: the PNG is a non-blank image showing the charts' colours, and
// Chromium logged no console message (the report has no scripts, so any is a
// failure). A negative control (a blank page with a script error) shows that
// both checks can fail. Chromium is required: without it the test fails.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli/cli_test_util.h"
#include "tests/report/png_image.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using fgm::test::contains;
using fgm::test::RunResult;
using fgm::test::slurp;
using fgm::test::TempDir;

namespace {

// FGM_CHROMIUM, else `chromium` on PATH (the Debian package), else empty.
std::string find_chromium() {
  if (const char* env = std::getenv("FGM_CHROMIUM"); env && *env) return env;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    for (const char* name : {"chromium", "chromium-browser"}) {
      fs::path candidate = fs::path(dir) / name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    }
  }
  return "";
}

struct Rendering {
  int code = -1;
  std::string png;                        // the screenshot's bytes ("" if none)
  std::vector<std::string> console_lines;  // lines Chromium logged from the page's console
  std::string log;
};

// Renders `html_path` headless into <dir>/<name>.png with a fresh profile.
Rendering render(const std::string& chromium, const TempDir& dir, const std::string& html_path,
                 const std::string& name) {
  const std::string png = dir.file(name + ".png"), log = dir.file(name + ".log");
  const std::string profile = dir.file(name + "-profile");
  const std::string cmd = "timeout 90 '" + chromium +
                          "' --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
                          "--disable-background-networking --disable-component-update --disable-sync "
                          "--hide-scrollbars --enable-logging=stderr --v=0 --user-data-dir='" + profile +
                          "' --screenshot='" + png + "' --window-size=1200,2000 'file://" + html_path + "' >'" + log +
                          "' 2>&1 </dev/null";
  Rendering r;
  int status = std::system(cmd.c_str());
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.log = slurp(log);
  r.png = fs::exists(png) ? slurp(png) : "";
  std::stringstream lines(r.log);
  for (std::string line; std::getline(lines, line);)
    if (contains(line, ":CONSOLE") || contains(line, "Uncaught")) r.console_lines.push_back(line);
  return r;
}

struct PictureCheck {
  bool decoded = false;
  uint32_t width = 0, height = 0;
  size_t colours = 0;
  uint64_t chart_blue = 0;  // pixels of the first series' colour #1f77b4
  std::string error;
};

PictureCheck inspect_png(const std::string& bytes) {
  PictureCheck c;
  try {
    fgm::test::RgbImage img = fgm::test::decode_png(bytes);
    c.decoded = true;
    c.width = img.width;
    c.height = img.height;
    c.colours = fgm::test::distinct_colours(img);
    c.chart_blue = fgm::test::count_near(img, 0x1f77b4, 8);
  } catch (const std::exception& e) {
    c.error = e.what();
  }
  return c;
}

bool looks_rendered(const PictureCheck& c) {
  return c.decoded && c.width == 1200 && c.height == 2000 && c.colours > 16 && c.chart_blue > 300;
}

}  // namespace

TEST_CASE("report.html renders in headless Chromium with no console messages", "[report][browser]") {
  const std::string chromium = find_chromium();
  if (chromium.empty())
    FAIL("chromium not found: install the Debian package `chromium` (scripts/install_deps.sh does) or set "
         "FGM_CHROMIUM to a Chromium binary");

  TempDir dir("fgm-report-browser");
  REQUIRE(fgm::test::run(dir, "synth --out data --rows 400 --test-rows 200 --features 120 --relevant 8 --seed 5")
              .code == 0);
  const std::string common =
      " data.train=data/train.svm data.test=data/test.svm output.dir=run engine.cache_dir=cache engine.progress=off";
  RunResult train = fgm::test::run(dir, "train" + common + " fgm.B=3 fgm.max_iterations=4");
  CAPTURE(train.err);
  REQUIRE(train.code == 0);
  RunResult path = fgm::test::run(dir, "path" + common + " data.validation=data/test.svm 'path.features=[2,4,8,12]' "
                                                         "path.folds=3");
  CAPTURE(path.err);
  REQUIRE(path.code == 0);
  RunResult report = fgm::test::run(dir, "report run");
  CAPTURE(report.err);
  REQUIRE(report.code == 0);
  const std::string html_path = dir.file("run/report.html");
  REQUIRE(contains(report.out, "report=run/report.html"));
  const std::string html = slurp(html_path);
  // Both sections, and nothing that could reach the network or run code.
  REQUIRE(contains(html, "id=\"train\""));
  REQUIRE(contains(html, "id=\"path\""));
  for (const char* forbidden : {"http:", "https:", "<script", "src=", "<link", "url("}) {
    CAPTURE(forbidden);
    REQUIRE_FALSE(contains(html, forbidden));
  }
  REQUIRE(contains(html, "Content-Security-Policy"));
  REQUIRE(contains(html, "<polygon"));  // the CV band

  Rendering page = render(chromium, dir, html_path, "report");
  CAPTURE(page.log);
  REQUIRE(page.code == 0);
  REQUIRE_FALSE(page.png.empty());
  CHECK(page.png.size() > 20000);
  PictureCheck picture = inspect_png(page.png);
  CAPTURE(picture.error, picture.width, picture.height, picture.colours, picture.chart_blue);
  CHECK(looks_rendered(picture));
  CHECK(page.console_lines.empty());

  // A multi-class (one-vs-rest) run: its own page, rendered the same way.
  std::string classes;
  for (int i = 0; i < 150; ++i) {
    const int c = i % 3;  // labels 1, 2, 3; class c raises features 4c+1..4c+4
    classes += std::to_string(c + 1);
    for (int j = 0; j < 4; ++j) classes += " " + std::to_string(4 * c + j + 1) + ":" + std::to_string(1 + (i + j) % 4);
    classes += " " + std::to_string(13 + i % 5) + ":1\n";
  }
  dir.write("classes.svm", classes);
  RunResult multiclass = fgm::test::run(dir, "train data.train=classes.svm data.test=classes.svm output.dir=mc "
                                             "engine.cache_dir=cache engine.progress=off fgm.B=2 fgm.max_iterations=3");
  CAPTURE(multiclass.err);
  REQUIRE(multiclass.code == 0);
  const std::string mc_html = slurp(dir.file("mc/report.html"));
  REQUIRE(contains(mc_html, "one-vs-rest over 3 classes"));
  for (const char* forbidden : {"http:", "https:", "<script", "src=", "<link", "url("}) {
    CAPTURE(forbidden);
    REQUIRE_FALSE(contains(mc_html, forbidden));
  }
  Rendering mc_page = render(chromium, dir, dir.file("mc/report.html"), "multiclass");
  CAPTURE(mc_page.log);
  REQUIRE(mc_page.code == 0);
  PictureCheck mc_picture = inspect_png(mc_page.png);
  CAPTURE(mc_picture.error, mc_picture.width, mc_picture.height, mc_picture.colours, mc_picture.chart_blue);
  CHECK(looks_rendered(mc_picture));
  CHECK(mc_page.console_lines.empty());

  // Negative control: a blank page whose script throws. Both checks must fire.
  const std::string bad = dir.write("bad.html",
                                    "<!DOCTYPE html><html><body><script>no_such_function();</script></body></html>\n");
  Rendering control = render(chromium, dir, bad, "control");
  CAPTURE(control.log);
  REQUIRE(control.code == 0);
  REQUIRE_FALSE(control.png.empty());
  REQUIRE_FALSE(control.console_lines.empty());
  REQUIRE(contains(control.console_lines.front(), "no_such_function"));
  REQUIRE_FALSE(looks_rendered(inspect_png(control.png)));
}
