#include "core/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include <fmt/format.h>

#include "core/error.h"
#include "core/messages.h"

namespace fgm {

void write_file_atomic(const std::string& path, std::string_view data) {
  std::filesystem::path target(path);
  // An unpredictable name, created only if nothing (not even a dangling
  // symlink) is there: whatever someone planted at a name is never followed
  // or truncated.
  std::random_device random;
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    tmp = (target.parent_path() / fmt::format(".{}.tmp-{}-{:08x}", target.filename().string(), ::getpid(),
                                              static_cast<uint32_t>(random())))
              .string();
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && (errno != EEXIST || attempt >= 16))
      throw Error(ErrorKind::kIo, msg::cannot_write(path, std::strerror(errno)));
  }
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

// The pid of a write_file_atomic temporary (".<name>.tmp-<pid>-<hex>", or
// ".<name>.tmp-<pid>" as written before the random part), or 0.
pid_t temporary_owner(const std::string& name) {
  const std::string marker = ".tmp-";
  size_t at = name.rfind(marker);
  if (name.empty() || name[0] != '.' || at == std::string::npos || at + marker.size() == name.size())
    return 0;
  size_t end = name.find('-', at + marker.size());
  if (end == std::string::npos) {
    end = name.size();
  } else {
    if (end + 1 == name.size()) return 0;
    for (size_t i = end + 1; i < name.size(); ++i)
      if (!std::isxdigit(static_cast<unsigned char>(name[i]))) return 0;
  }
  if (end == at + marker.size()) return 0;
  uint64_t pid = 0;
  for (size_t i = at + marker.size(); i < end; ++i) {
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
