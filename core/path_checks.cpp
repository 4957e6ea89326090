#include "core/path_checks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "core/error.h"
#include "core/messages.h"

namespace fgm {
namespace fs = std::filesystem;

namespace {

[[noreturn]] void input_error(const std::string& path, std::string_view key, const std::string& reason) {
  throw Error(ErrorKind::kIo, msg::unusable_input(path, key, reason));
}
[[noreturn]] void output_error(const std::string& path, std::string_view key, const std::string& reason) {
  throw Error(ErrorKind::kIo, msg::unusable_output(path, key, reason));
}

// The parent of `p` as a directory to probe ("." for a bare name).
fs::path parent_of(const fs::path& p) {
  fs::path parent = p.lexically_normal().parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// Empty if a file can be created in the existing directory `dir`, else the
// reason. A real create-and-remove, because access(2) says yes to root on a
// read-only file system or a directory root may not write (e.g. NFS squash).
std::string probe_writable(const fs::path& dir) {
  std::random_device rd;
  fs::path probe = dir / fmt::format(".fgm-write-probe-{}-{:08x}", ::getpid(), rd());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return {};
}

// Nearest existing ancestor of `p` (which itself does not exist); it may be a
// file, which is why walking up stops at ENOTDIR too.
fs::path nearest_existing_ancestor(const fs::path& p) {
  fs::path cur = p.lexically_normal();
  while (true) {
    fs::path parent = cur.parent_path();
    if (parent.empty()) return ".";
    struct stat st;
    if (::stat(parent.c_str(), &st) == 0 || (errno != ENOENT && errno != ENOTDIR)) return parent;
    if (parent == cur) return parent;
    cur = parent;
  }
}

}  // namespace

void check_input_file(const std::string& path, std::string_view key) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) input_error(path, key, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) input_error(path, key, "it is a directory, not a file");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) input_error(path, key, std::strerror(errno));
  ::close(fd);
}

void check_regular_input_file(const std::string& path, std::string_view key) {
  check_input_file(path, key);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) input_error(path, key, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) input_error(path, key, msg::not_regular_input());
}

void check_input_file_or_directory(const std::string& path, std::string_view key) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) input_error(path, key, std::strerror(errno));
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK |
                                    (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
  if (fd < 0) input_error(path, key, std::strerror(errno));
  ::close(fd);
}

void check_output_directory(const std::string& dir, std::string_view key) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) output_error(dir, key, "it exists and is not a directory");
    std::string reason = probe_writable(dir);
    if (!reason.empty()) output_error(dir, key, "the directory is not writable: " + reason);
    return;
  }
  if (errno != ENOENT && errno != ENOTDIR) output_error(dir, key, std::strerror(errno));
  const fs::path ancestor = nearest_existing_ancestor(dir);
  if (::stat(ancestor.c_str(), &st) != 0)
    output_error(dir, key, fmt::format("{}: {}", ancestor.string(), std::strerror(errno)));
  if (!S_ISDIR(st.st_mode))
    output_error(dir, key, fmt::format("cannot create it: {} is a file, not a directory", ancestor.string()));
  std::string reason = probe_writable(ancestor);
  if (!reason.empty())
    output_error(dir, key, fmt::format("cannot create it in {}: {}", ancestor.string(), reason));
}

void check_output_file(const std::string& path, std::string_view key) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    output_error(path, key, "it is a directory, not a file");
  const fs::path parent = parent_of(path);
  if (::stat(parent.c_str(), &st) != 0)
    output_error(path, key, fmt::format("{}: {}", parent.string(), std::strerror(errno)));
  if (!S_ISDIR(st.st_mode)) output_error(path, key, fmt::format("{} is not a directory", parent.string()));
  std::string reason = probe_writable(parent);
  if (!reason.empty())
    output_error(path, key, fmt::format("its directory {} is not writable: {}", parent.string(), reason));
}

void create_output_directory(const std::string& dir, std::string_view key) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) output_error(dir, key, "cannot create it: " + ec.message());
}

}  // namespace fgm
