#include "cli/resume.h"

#include <exception>
#include <filesystem>
#include <system_error>

#include <spdlog/spdlog.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/messages.h"

namespace fgm::cli {

namespace fs = std::filesystem;

ResumeSession::ResumeSession(const std::string& out_dir, RunIdentity identity, bool restart,
                             const std::string& final_output, MemoryBudget& budget)
    : file_((fs::path(out_dir) / kCheckpointFileName).string()), identity_(std::move(identity)), budget_(budget) {
  std::error_code ec;
  exceptions_at_start_ = std::uncaught_exceptions();
  if (!fs::exists(out_dir, ec)) created_dir_ = out_dir;
  fs::create_directories(out_dir, ec);
  if (ec || !fs::is_directory(out_dir))
    throw Error(ErrorKind::kIo, msg::cannot_write(out_dir, ec ? ec.message() : "not a directory"));
  lock_ = std::make_unique<store::FileLock>((fs::path(out_dir) / ".fgm-run.lock").string(), out_dir, false);
  for (const auto& path : remove_stale_temporaries(out_dir)) spdlog::info("{}", msg::stale_temporary_removed(path));

  const bool exists = fs::exists(file_, ec);
  if (restart) {
    remove_rank_files();
    if (exists) {
      if (!fs::remove(file_, ec) && ec) throw Error(ErrorKind::kIo, msg::cannot_write(file_, ec.message()));
      spdlog::info("{}", msg::checkpoint_discarded(file_));
    }
    return;
  }
  if (!exists) {
    if (fs::exists(fs::path(out_dir) / final_output, ec))
      spdlog::warn("{}", msg::finished_run_redone(out_dir, final_output));
    return;
  }
  ResumeCheckpoint saved = read_checkpoint(file_, budget);
  std::vector<std::string> diffs = identity_differences(saved.identity, identity_);
  if (!diffs.empty()) {
    std::string joined;
    for (const auto& d : diffs) joined += (joined.empty() ? "" : "; ") + d;
    throw Error(ErrorKind::kConfig, msg::checkpoint_mismatch(file_, identity_.command, joined));
  }
  if (identity_.command == "train" && !saved.train && !saved.solver)
    throw Error(ErrorKind::kCorruption, msg::not_a_checkpoint(file_, "no training state"));
  saved_ = std::move(saved);
}

void ResumeSession::save(const TrainProgress* train, const PathProgress* path) {
  write_checkpoint(file_, identity_, train, path, budget_);
}

void ResumeSession::save_solver_state(const SolverState& state) {
  write_checkpoint(file_, identity_, nullptr, nullptr, budget_, &state);
}

ResumeSession::~ResumeSession() {
  if (created_dir_.empty() || std::uncaught_exceptions() <= exceptions_at_start_) return;
  try {
    if (lock_) lock_->release_and_remove();
    lock_.reset();
    std::error_code ec;
    fs::remove(created_dir_, ec);  // removes the directory only if it is empty
  } catch (...) {
    // unwinding already: the original error is what the user must see
  }
}

void ResumeSession::finish() {
  std::error_code ec;
  fs::remove(file_, ec);
  if (ec) throw Error(ErrorKind::kIo, msg::cannot_write(file_, ec.message()));
  remove_rank_files();
}

// A partitioned run's rank files (engine/resume_checkpoint.h), and those an
// earlier fgm's partitioned MSLR run kept its duals in.
void ResumeSession::remove_rank_files() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(file_).parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kRankCheckpointPrefix, 0) == 0 || name.rfind("mslr-duals.rank-", 0) == 0) fs::remove(entry, ec);
  }
}

}  // namespace fgm::cli
