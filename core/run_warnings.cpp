#include "core/run_warnings.h"

#include <spdlog/spdlog.h>

namespace fgm {

void RunWarnings::add(std::string code, std::string message) {
  spdlog::warn("{}", message);
  std::lock_guard<std::mutex> lock(mutex_);
  items_.push_back({std::move(code), std::move(message)});
}

void add_warning(RunWarnings* warnings, std::string code, std::string message) {
  if (warnings) warnings->add(std::move(code), std::move(message));
  else spdlog::warn("{}", message);
}

std::vector<RunWarning> RunWarnings::list() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return items_;
}

size_t RunWarnings::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return items_.size();
}

}  // namespace fgm
