// Sequential reader of a file's decompressed bytes. The codec is chosen by the
// file's magic bytes (gzip, bzip2, xz) through Boost.Iostreams; plain files are
// read with plain read(2). Works on non-seekable inputs (pipes) too: the magic
// bytes are read once and replayed.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "io/libsvm_reader.h"

namespace fgm {

// Codec of a stream given its first bytes (fewer than 6 bytes is fine).
Compression compression_from_magic(const unsigned char* bytes, size_t size);

class CompressedInput {
 public:
  // Throws Error(kIo, msg::cannot_open) if the file cannot be opened.
  explicit CompressedInput(const std::string& path);
  ~CompressedInput();
  CompressedInput(const CompressedInput&) = delete;
  CompressedInput& operator=(const CompressedInput&) = delete;

  // Reads up to `size` decompressed bytes into `dst`; returns 0 only at the
  // end of the input. Throws Error(kInvalidInput, msg::truncated_stream) on a
  // truncated or corrupt compressed stream, Error(kIo) on a read failure.
  size_t read(char* dst, size_t size);

  const std::string& path() const { return path_; }
  Compression compression() const { return compression_; }
  uint64_t file_bytes() const { return file_bytes_; }  // 0 for pipes
  // On-disk bytes consumed so far (safe to poll from another thread).
  uint64_t compressed_bytes_read() const { return raw_bytes_read_.load(std::memory_order_relaxed); }

 private:
  friend struct RawFileSource;
  size_t read_raw(char* dst, size_t size);  // magic prefix first, then the fd

  struct Decoder;
  std::string path_;
  int fd_ = -1;
  Compression compression_ = Compression::kNone;
  uint64_t file_bytes_ = 0;
  std::atomic<uint64_t> raw_bytes_read_{0};
  unsigned char magic_[6] = {};
  size_t magic_size_ = 0, magic_pos_ = 0;
  bool finished_ = false;
  std::string failure_;  // sticky: a failed stream keeps failing
  std::unique_ptr<Decoder> decoder_;
};

}  // namespace fgm
