// Private to the shard store: plain POSIX file access with budgeted buffers,
// the temporary output directory that ingest renames into place, and the
// locks and stale-temporary cleanup it shares with the ingest cache
// (engine/training_data.cpp).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/hash.h"
#include "core/memory_budget.h"

namespace fgm::store {

std::string errno_text(int err);
uint64_t file_size_of(const std::string& path);  // throws kIo
void fsync_directory(const std::string& dir);
// Bytes an unprivileged process may still write on the file system holding
// `path` (statvfs f_bavail · f_frsize); throws kIo if it cannot be queried.
uint64_t free_bytes_at(const std::string& path);
void fsync_file(const std::string& path);

// Buffered sequential writer. Sequential bytes can be hashed on the way out.
class FileWriter {
 public:
  FileWriter(const std::string& path, MemoryBudget& budget, uint64_t buffer_bytes,
             std::string_view purpose);
  ~FileWriter();
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  void write(const void* data, uint64_t n) {
    if (n <= buffer_.size() - used_) {
      std::memcpy(buffer_.data() + used_, data, n);
      used_ += n;
    } else {
      write_slow(data, n);
    }
  }
  template <class T>
  void put(const T& value) {
    if (sizeof(T) > buffer_.size() - used_) flush();
    std::memcpy(buffer_.data() + used_, &value, sizeof(T));
    used_ += sizeof(T);
  }
  void zeros(uint64_t n);
  void pad_to(uint64_t offset) { zeros(offset - position()); }
  uint64_t position() const { return flushed_ + used_; }
  // Every sequential byte written from now on also goes into `hasher`.
  void hash_into(Xxh64* hasher) {
    flush();
    hasher_ = hasher;
  }
  // Unbuffered write at an absolute offset; leaves the sequential position alone.
  void write_at(uint64_t offset, const void* data, uint64_t n);
  void flush();
  // Flushes, optionally fsyncs, closes; errors throw kIo.
  void close(bool sync);
  // Flushes and starts writeback without waiting (sync_file_range), so a
  // later fsync_file() finds little left to do.
  void start_writeback();
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  void write_slow(const void* data, uint64_t n);
  void write_fd(const void* data, uint64_t n);
  std::string path_;
  int fd_ = -1;
  BudgetedArray<uint8_t> buffer_;
  uint64_t used_ = 0;
  uint64_t flushed_ = 0;
  Xxh64* hasher_ = nullptr;
};

// Buffered sequential reader with direct access to the buffered bytes.
class FileReader {
 public:
  // `missing_kind`: the error kind when the file cannot be opened.
  FileReader(const std::string& path, MemoryBudget& budget, uint64_t buffer_bytes,
             std::string_view purpose, ErrorKind missing_kind = ErrorKind::kIo);
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  uint64_t size() const { return size_; }
  uint64_t position() const { return consumed_ + pos_; }
  // Bytes buffered and not yet consumed.
  uint64_t available() const { return fill_ - pos_; }
  const uint8_t* data() const { return buffer_.data() + pos_; }
  void consume(uint64_t n) { pos_ += n; }
  // Makes at least min(want, buffer size) bytes available unless the file ends
  // first; returns available().
  uint64_t refill(uint64_t want);
  // Copies n bytes; returns the count copied (less only at end of file).
  uint64_t read(void* dst, uint64_t n);
  void seek(uint64_t offset);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  BudgetedArray<uint8_t> buffer_;
  uint64_t pos_ = 0, fill_ = 0;
  uint64_t consumed_ = 0;  // file offset of buffer_[0]
};

// An exclusive flock(2) on `path` (created if missing), held until
// destruction, which removes the file (while still holding the lock).
// Acquisition re-checks that the path still names the locked file, so
// removing a lock file never lets two holders in. After kill -9 the file
// stays, unlocked, and the next holder removes it.
class FileLock {
 public:
  // wait: block until free; otherwise throw kIo msg::output_locked(target, path).
  FileLock(const std::string& path, const std::string& target, bool wait);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  // Removes the lock file (still holding the lock) and unlocks.
  void release_and_remove();

 private:
  std::string path_;
  int fd_ = -1;
};

// True if `path` (a lock file) exists and nobody holds a lock on it.
bool lock_is_free(const std::string& path);

// Removes temporaries left by dead fgm processes in `dir`: directories named
// `<prefix>.tmp-<pid>-<hex>` (TempDir) or `<prefix>.old-<pid>-<hex>` whose
// owner lock is free or, without one, whose pid is not running. An empty
// prefix means every such entry (engine.cache_dir belongs to fgm). Returns
// how many were removed.
int remove_stale_temporaries(const std::string& dir, const std::string& prefix);

// A temporary directory beside `target` (same file system, so the final
// rename is atomic). Removed with its contents unless commit() succeeded.
// While it exists it holds a lock on <path>/.owner.lock, which is how a later
// run tells a live ingest from a killed one (remove_stale_temporaries).
class TempDir {
 public:
  explicit TempDir(const std::string& target);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }
  // fsyncs the directory and renames it to `target`, replacing an existing
  // store (the old one is renamed away first, then deleted).
  void commit();

 private:
  std::string target_;
  std::string path_;
  int owner_lock_ = -1;
  bool committed_ = false;
};

inline constexpr const char* kOwnerLockName = ".owner.lock";

// Throws Error(kIo) if `out_dir` exists and is not an fgm store (a file, or a
// non-empty directory without manifest.fgm): ingest never overwrites it.
void check_output_dir(const std::string& out_dir);

}  // namespace fgm::store
