// The warnings of one run: each is logged on stderr when it is raised and
// kept (a short stable code and the text) for the `warnings` array of
// run.json / path.json, so a run that finished with exit 0 still shows what
// went wrong along the way. Passed down to whatever can warn; safe to add to
// from several threads.
#pragma once

#include <mutex>
#include <string>
#include <vector>

namespace fgm {

struct RunWarning {
  std::string code;     // e.g. "apg_max_iterations": stable, for scripts
  std::string message;  // the full text, from core/messages
};

class RunWarnings {
 public:
  void add(std::string code, std::string message);
  std::vector<RunWarning> list() const;
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::vector<RunWarning> items_;
};

// warnings->add, or only the log line when there is no list (null).
void add_warning(RunWarnings* warnings, std::string code, std::string message);

}  // namespace fgm
