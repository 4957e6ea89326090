#include "core/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "core/messages.h"

namespace fgm {

void write_file_atomic(const std::string& path, std::string_view data) {
  std::filesystem::path target(path);
  std::string tmp = (target.parent_path() / ("." + target.filename().string() + ".tmp-" +
                                             std::to_string(getpid())))
                        .string();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(ErrorKind::kIo, msg::cannot_write(path, std::strerror(errno)));
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t w = ::write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(ErrorKind::kIo, msg::cannot_write(path, std::strerror(err)));
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error(ErrorKind::kIo, msg::cannot_write(path, std::strerror(err)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error(ErrorKind::kIo, msg::cannot_write(path, std::strerror(err)));
  }
  // The rename is durable only once the directory entry is: without this a
  // crash right after returning can leave the old file (or none) in place.
  std::string dir = target.parent_path().empty() ? "." : target.parent_path().string();
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0 || ::fsync(dir_fd) != 0) {
    int err = errno;
    if (dir_fd >= 0) ::close(dir_fd);
    throw Error(ErrorKind::kIo, msg::cannot_write(path, std::strerror(err)));
  }
  ::close(dir_fd);
}

namespace {

// The pid of a write_file_atomic temporary (".<name>.tmp-<pid>"), or 0.
pid_t temporary_owner(const std::string& name) {
  const std::string marker = ".tmp-";
  size_t at = name.rfind(marker);
  if (name.empty() || name[0] != '.' || at == std::string::npos || at + marker.size() == name.size())
    return 0;
  uint64_t pid = 0;
  for (size_t i = at + marker.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || pid > (1u << 30)) return 0;
    pid = pid * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  return static_cast<pid_t>(pid);
}

}  // namespace

// No such process, or a zombie (killed, not yet reaped by its parent).
bool process_is_gone(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');  // the command name may itself hold ')'
  return paren != std::string::npos && paren + 2 < text.size() &&
         (text[paren + 2] == 'Z' || text[paren + 2] == 'X');
}

std::vector<std::string> remove_stale_temporaries(const std::string& dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    pid_t owner = temporary_owner(entry.path().filename().string());
    if (owner <= 0 || owner == ::getpid() || !entry.is_regular_file(ec) || !process_is_gone(owner)) continue;
    if (std::filesystem::remove(entry.path(), ec)) removed.push_back(entry.path().string());
  }
  return removed;
}

}  // namespace fgm
