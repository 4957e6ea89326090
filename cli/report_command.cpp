// fgm report: the HTML report of an output directory (report/report_page.h).
#include <filesystem>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "core/error.h"
#include "core/memory_budget.h"
#include "core/messages.h"
#include "report/report_page.h"

namespace fgm::cli {

Command add_report(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "report", "write OUTPUT_DIR/report.html: charts and tables of the run logs there (run.json, path.csv), "
                "self-contained, for a browser");
  auto dir = std::make_shared<std::string>();
  auto memory_budget = std::make_shared<std::string>("1GB");
  sub->add_option("OUTPUT_DIR", *dir, "output.dir of an `fgm train` or `fgm path` run")->required();
  sub->add_option("--memory-budget", *memory_budget,
                  "peak memory for reading the run logs (their text and parsed form), e.g. 256MB")
      ->capture_default_str();
  return {sub, [dir, memory_budget]() {
            MemoryBudget budget(parse_byte_size(*memory_budget, "--memory-budget"), "--memory-budget");
            std::error_code ec;
            if (!std::filesystem::is_directory(*dir, ec))
              throw Error(ErrorKind::kIo, msg::unusable_input(*dir, "OUTPUT_DIR", ec ? ec.message() : "not a directory"));
            const std::string path = report::write_report(*dir, report::detect_sections(*dir), &budget);
            fmt::print("report={}\n", path);
            return 0;
          }};
}

}  // namespace fgm::cli
