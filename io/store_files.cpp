#include "io/store_files.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <csignal>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <random>
#include <system_error>

#include "core/atomic_file.h"
#include "core/messages.h"
#include "io/store_format.h"

namespace fs = std::filesystem;

namespace fgm::store {

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

uint64_t file_size_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error(ErrorKind::kIo, msg::cannot_open(path, errno_text(errno)));
  return static_cast<uint64_t>(st.st_size);
}

uint64_t free_bytes_at(const std::string& path) {
  struct statvfs st {};
  if (::statvfs(path.c_str(), &st) != 0)
    throw Error(ErrorKind::kIo, msg::cannot_write(path, errno_text(errno)));
  unsigned __int128 bytes = static_cast<unsigned __int128>(st.f_bavail) * st.f_frsize;
  return bytes > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(bytes);
}

void fsync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorKind::kIo, msg::cannot_open(dir, errno_text(errno)));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some file systems refuse fsync on directories; that is not a write failure.
  if (rc != 0 && err != EINVAL && err != EROFS)
    throw Error(ErrorKind::kIo, msg::cannot_write(dir, errno_text(err)));
}

void fsync_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorKind::kIo, msg::cannot_open(path, errno_text(errno)));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) throw Error(ErrorKind::kIo, msg::cannot_write(path, errno_text(err)));
}

// ------------------------------------------------------------------ FileWriter

FileWriter::FileWriter(const std::string& path, MemoryBudget& budget, uint64_t buffer_bytes,
                       std::string_view purpose)
    : path_(path), buffer_(budget, std::max<uint64_t>(buffer_bytes, 4096), purpose) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(ErrorKind::kIo, msg::cannot_write(path, errno_text(errno)));
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void FileWriter::write_fd(const void* data, uint64_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (hasher_ != nullptr) hasher_->update(p, n);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, std::min<uint64_t>(n, 1u << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorKind::kIo, msg::cannot_write(path_, errno_text(errno)));
    }
    p += w;
    n -= static_cast<uint64_t>(w);
    flushed_ += static_cast<uint64_t>(w);
  }
}

void FileWriter::flush() {
  if (used_ > 0) {
    uint64_t n = used_;
    used_ = 0;
    write_fd(buffer_.data(), n);
  }
}

void FileWriter::write_slow(const void* data, uint64_t n) {
  flush();
  if (n >= buffer_.size()) {
    write_fd(data, n);
  } else {
    std::memcpy(buffer_.data(), data, n);
    used_ = n;
  }
}

void FileWriter::zeros(uint64_t n) {
  while (n > 0) {
    if (used_ == buffer_.size()) flush();
    uint64_t k = std::min(n, buffer_.size() - used_);
    std::memset(buffer_.data() + used_, 0, k);
    used_ += k;
    n -= k;
  }
}

void FileWriter::write_at(uint64_t offset, const void* data, uint64_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t w = ::pwrite(fd_, p, std::min<uint64_t>(n, 1u << 30), static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorKind::kIo, msg::cannot_write(path_, errno_text(errno)));
    }
    p += w;
    n -= static_cast<uint64_t>(w);
    offset += static_cast<uint64_t>(w);
  }
}

void FileWriter::start_writeback() {
  flush();
  ::sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WRITE);  // a hint: errors surface at fsync
}

void FileWriter::close(bool sync) {
  flush();
  if (sync && ::fsync(fd_) != 0)
    throw Error(ErrorKind::kIo, msg::cannot_write(path_, errno_text(errno)));
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) throw Error(ErrorKind::kIo, msg::cannot_write(path_, errno_text(errno)));
}

// ------------------------------------------------------------------ FileReader

FileReader::FileReader(const std::string& path, MemoryBudget& budget, uint64_t buffer_bytes,
                       std::string_view purpose, ErrorKind missing_kind)
    : path_(path), buffer_(budget, std::max<uint64_t>(buffer_bytes / 64 * 64, 4096), purpose) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw Error(missing_kind, msg::cannot_open(path, errno_text(errno)));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    int err = errno;
    ::close(fd_);
    throw Error(ErrorKind::kIo, msg::cannot_open(path, errno_text(err)));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
}

FileReader::~FileReader() {
  if (fd_ >= 0) ::close(fd_);
}

uint64_t FileReader::refill(uint64_t want) {
  want = std::min<uint64_t>(want, buffer_.size());
  if (available() >= want) return available();
  // Keep the unconsumed tail; callers consume whole 4-byte elements, so file
  // offsets and buffer offsets stay congruent mod 4.
  uint64_t tail = available();
  std::memmove(buffer_.data(), buffer_.data() + pos_, tail);
  consumed_ += pos_;
  pos_ = 0;
  fill_ = tail;
  while (fill_ < want) {
    ssize_t r = ::read(fd_, buffer_.data() + fill_, buffer_.size() - fill_);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorKind::kIo, msg::read_failed(path_, errno_text(errno)));
    }
    if (r == 0) break;
    fill_ += static_cast<uint64_t>(r);
  }
  return available();
}

uint64_t FileReader::read(void* dst, uint64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  uint64_t done = 0;
  while (done < n) {
    if (available() == 0 && refill(n - done) == 0) break;
    uint64_t k = std::min(available(), n - done);
    std::memcpy(out + done, data(), k);
    consume(k);
    done += k;
  }
  return done;
}

void FileReader::seek(uint64_t offset) {
  if (::lseek(fd_, static_cast<off_t>(offset), SEEK_SET) < 0)
    throw Error(ErrorKind::kIo, msg::read_failed(path_, errno_text(errno)));
  consumed_ = offset;
  pos_ = fill_ = 0;
}

// --------------------------------------------------------------------- TempDir

// ------------------------------------------------------------------- locks

FileLock::FileLock(const std::string& path, const std::string& target, bool wait) : path_(path) {
  for (;;) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);  // never a planted symlink
    if (fd_ < 0) throw Error(ErrorKind::kIo, msg::cannot_write(path, errno_text(errno)));
    int rc;
    do rc = ::flock(fd_, wait ? LOCK_EX : LOCK_EX | LOCK_NB);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      int err = errno;
      ::close(fd_);
      fd_ = -1;
      if (err == EWOULDBLOCK) throw Error(ErrorKind::kIo, msg::output_locked(target, path));
      throw Error(ErrorKind::kIo, msg::cannot_write(path, errno_text(err)));
    }
    // The previous holder may have removed the file after we opened it: then
    // our lock is on an orphan, and a third process could lock a new file.
    struct stat held {}, named {};
    if (::fstat(fd_, &held) == 0 && ::stat(path.c_str(), &named) == 0 &&
        held.st_ino == named.st_ino && held.st_dev == named.st_dev)
      return;
    ::close(fd_);
    fd_ = -1;
  }
}

FileLock::~FileLock() { release_and_remove(); }

void FileLock::release_and_remove() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());
  ::close(fd_);
  fd_ = -1;
}

bool lock_is_free(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  bool free_lock = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);  // drops the lock again
  return free_lock;
}

namespace {

// pid from "...{.tmp-,.old-}<pid>-<hex>" at `at` (the position of the dot).
bool pid_is_running(const std::string& name, size_t at) {
  size_t begin = at + 5, end = name.find('-', begin);
  if (end == std::string::npos || end == begin) return true;  // not ours: keep it
  pid_t pid = 0;
  for (size_t i = begin; i < end; ++i) {
    if (name[i] < '0' || name[i] > '9') return true;
    pid = pid * 10 + (name[i] - '0');
  }
  return pid <= 0 || !process_is_gone(pid);
}

}  // namespace

int remove_stale_temporaries(const std::string& dir, const std::string& prefix) {
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir.empty() ? "." : dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    size_t at = name.rfind(".tmp-");
    if (at == std::string::npos) at = name.rfind(".old-");
    // With a prefix (a target's name), only that target's temporaries.
    if (at == std::string::npos || (prefix.empty() ? at == 0 : at != prefix.size())) continue;
    std::error_code type_error;
    if (!it->is_directory(type_error)) continue;
    const std::string lock = (it->path() / kOwnerLockName).string();
    const bool stale = fs::exists(lock, type_error) ? lock_is_free(lock) : !pid_is_running(name, at);
    if (!stale) continue;
    std::error_code remove_error;
    fs::remove_all(it->path(), remove_error);
    removed += !remove_error;
  }
  return removed;
}

// ------------------------------------------------------------------ TempDir

TempDir::TempDir(const std::string& target) : target_(target) {
  std::random_device rd;
  for (int attempt = 0;; ++attempt) {
    path_ = fmt::format("{}.tmp-{}-{:08x}", target, ::getpid(), rd());
    if (::mkdir(path_.c_str(), 0755) == 0) break;
    if (errno != EEXIST || attempt > 16)
      throw Error(ErrorKind::kIo, msg::cannot_write(path_, errno_text(errno)));
  }
  const std::string lock = file(kOwnerLockName);
  owner_lock_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (owner_lock_ < 0 || ::flock(owner_lock_, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    if (owner_lock_ >= 0) ::close(owner_lock_);
    // unlink + rmdir need no descriptor (remove_all does: it failed here
    // when the error was EMFILE, leaving the directory behind).
    ::unlink(lock.c_str());
    ::rmdir(path_.c_str());
    throw Error(ErrorKind::kIo, msg::cannot_write(lock, errno_text(err)));
  }
}

TempDir::~TempDir() {
  // The owner lock is closed first: remove_all needs a descriptor of its own,
  // and a run failing on EMFILE (too many open files) has none to spare. Once
  // closed, another run may see the directory as stale and remove it too;
  // either removal suffices.
  if (owner_lock_ >= 0) ::close(owner_lock_);
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(path_, ec);  // best effort: we are already unwinding an error
  }
}

void check_output_dir(const std::string& out_dir) {
  std::error_code ec;
  auto st = fs::symlink_status(out_dir, ec);
  if (ec || !fs::exists(st)) return;
  if (fs::is_directory(st)) {
    if (fs::exists(fs::path(out_dir) / kManifestName, ec)) return;
    if (fs::is_empty(out_dir, ec) && !ec) return;
  }
  throw Error(ErrorKind::kIo,
              msg::cannot_write(out_dir,
                                "it exists and is not an fgm store (no manifest.fgm); "
                                "refusing to overwrite it: remove it or choose another "
                                "output directory"));
}

void TempDir::commit() {
  // The owner lock is not part of the store (we keep holding it: a cleaner
  // that finds no lock file checks our pid, which is alive).
  ::unlink(file(kOwnerLockName).c_str());
  fsync_directory(path_);
  check_output_dir(target_);  // it may have appeared while we were ingesting
  std::error_code ec;
  std::string old;
  bool target_is_store = fs::is_directory(target_, ec) && !fs::is_empty(target_, ec);
  if (target_is_store) {
    // Swap atomically where the kernel and file system can: readers never
    // see the store missing. The temp name then holds the old store.
    if (::renameat2(AT_FDCWD, path_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) == 0) {
      committed_ = true;
      fs::path parent = fs::path(target_).parent_path();
      fsync_directory(parent.empty() ? "." : parent.string());
      fs::remove_all(path_, ec);
      return;
    }
    std::random_device rd;
    old = fmt::format("{}.old-{}-{:08x}", target_, ::getpid(), rd());
    if (::rename(target_.c_str(), old.c_str()) != 0)
      throw Error(ErrorKind::kIo, msg::cannot_write(target_, errno_text(errno)));
  }
  // rename(2) replaces an empty directory atomically.
  if (::rename(path_.c_str(), target_.c_str()) != 0) {
    int err = errno;
    if (!old.empty()) ::rename(old.c_str(), target_.c_str());  // put the old store back
    throw Error(ErrorKind::kIo, msg::cannot_write(target_, errno_text(err)));
  }
  committed_ = true;
  fs::path parent = fs::path(target_).parent_path();
  fsync_directory(parent.empty() ? "." : parent.string());
  if (!old.empty()) fs::remove_all(old, ec);  // the new store is in place; a leftover is harmless
}

}  // namespace fgm::store
