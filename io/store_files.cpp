#include "io/store_files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <random>
#include <system_error>

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

TempDir::TempDir(const std::string& target) : target_(target) {
  std::random_device rd;
  for (int attempt = 0;; ++attempt) {
    path_ = fmt::format("{}.tmp-{}-{:08x}", target, ::getpid(), rd());
    if (::mkdir(path_.c_str(), 0755) == 0) break;
    if (errno != EEXIST || attempt > 16)
      throw Error(ErrorKind::kIo, msg::cannot_write(path_, errno_text(errno)));
  }
}

TempDir::~TempDir() {
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
