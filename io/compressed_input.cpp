#include "io/compressed_input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/iostreams/filter/bzip2.hpp>
#include <boost/iostreams/filter/gzip.hpp>
#include <boost/iostreams/filter/lzma.hpp>
#include <boost/iostreams/filtering_streambuf.hpp>
#include <cerrno>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/messages.h"

namespace fgm {

namespace bio = boost::iostreams;

namespace {

constexpr std::streamsize kCodecBuffer = 1 << 16;

std::string errno_text(int err) { return std::strerror(err); }

std::string gzip_detail(const bio::gzip_error& e) {
  switch (e.error()) {
    case bio::gzip::zlib_error:
      if (e.zlib_error_code() == bio::zlib::buf_error) return "unexpected end of data";
      if (e.zlib_error_code() == bio::zlib::data_error) return "invalid compressed data";
      return "zlib error " + std::to_string(e.zlib_error_code());
    case bio::gzip::bad_crc: return "CRC mismatch";
    case bio::gzip::bad_length: return "length mismatch";
    // Boost also reports trailing garbage after the last member this way.
    case bio::gzip::bad_header: return "bad member header or trailing garbage";
    case bio::gzip::bad_footer: return "unexpected end of data before the gzip footer";
    case bio::gzip::bad_method: return "unsupported compression method";
  }
  return "gzip error " + std::to_string(e.error());
}

std::string bzip2_detail(const bio::bzip2_error& e) {
  if (e.error() == bio::bzip2::unexpected_eof) return "unexpected end of data";
  if (e.error() == bio::bzip2::data_error) return "invalid compressed data";
  if (e.error() == bio::bzip2::data_error_magic) return "bad stream header or trailing garbage";
  return "bzip2 error " + std::to_string(e.error());
}

std::string xz_detail(const bio::lzma_error& e) {
  // liblzma's lzma_ret values; Boost 1.74 names only some of them.
  switch (e.error()) {
    case 3: return "unsupported integrity check";
    case 6: return "needs more memory than the decoder limit";
    case 7: return "not an xz stream, or trailing garbage";
    case 8: return "unsupported options";
    case 9: return "invalid compressed data";
    case 10: return "unexpected end of data";
  }
  return "lzma error " + std::to_string(e.error());
}

}  // namespace

Compression compression_from_magic(const unsigned char* b, size_t n) {
  if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b) return Compression::kGzip;
  if (n >= 3 && b[0] == 'B' && b[1] == 'Z' && b[2] == 'h') return Compression::kBzip2;
  static const unsigned char xz[6] = {0xfd, '7', 'z', 'X', 'Z', 0x00};
  if (n >= 6 && std::memcmp(b, xz, 6) == 0) return Compression::kXz;
  return Compression::kNone;
}

const char* compression_name(Compression c) {
  switch (c) {
    case Compression::kNone: return "plain";
    case Compression::kGzip: return "gzip";
    case Compression::kBzip2: return "bzip2";
    case Compression::kXz: return "xz";
  }
  return "unknown";
}

namespace {

int open_input(const std::string& path, uint64_t* size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorKind::kIo, msg::cannot_open(path, errno_text(errno)));
  struct stat st {};
  if (::fstat(fd, &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      ::close(fd);
      throw Error(ErrorKind::kIo, msg::cannot_open(path, errno_text(EISDIR)));
    }
    if (size) *size = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
  }
  return fd;
}

// read(2) until `size` bytes or end of file; retries EINTR.
size_t read_fully(int fd, char* dst, size_t size, const std::string& path) {
  size_t done = 0;
  while (done < size) {
    ssize_t got = ::read(fd, dst + done, size - done);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorKind::kIo, msg::read_failed(path, errno_text(errno)));
    }
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

}  // namespace

Compression detect_compression(const std::string& path) {
  int fd = open_input(path, nullptr);
  unsigned char magic[6];
  size_t n = 0;
  try {
    n = read_fully(fd, reinterpret_cast<char*>(magic), sizeof magic, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return compression_from_magic(magic, n);
}

// Boost source device over the file; copies of it share the CompressedInput.
struct RawFileSource {
  typedef char char_type;
  typedef bio::source_tag category;
  CompressedInput* input;
  std::streamsize read(char* dst, std::streamsize n) {
    size_t got = input->read_raw(dst, static_cast<size_t>(n));
    return got == 0 ? -1 : static_cast<std::streamsize>(got);
  }
};

struct CompressedInput::Decoder {
  bio::filtering_istreambuf chain;
};

CompressedInput::CompressedInput(const std::string& path) : path_(path) {
  fd_ = open_input(path, &file_bytes_);
  try {
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
    magic_size_ = read_fully(fd_, reinterpret_cast<char*>(magic_), sizeof magic_, path_);
    compression_ = compression_from_magic(magic_, magic_size_);
    if (compression_ != Compression::kNone) {
      decoder_ = std::make_unique<Decoder>();
      switch (compression_) {
        case Compression::kGzip:
          decoder_->chain.push(bio::gzip_decompressor(bio::gzip::default_window_bits, kCodecBuffer),
                               kCodecBuffer);
          break;
        case Compression::kBzip2:
          decoder_->chain.push(bio::bzip2_decompressor(false, kCodecBuffer), kCodecBuffer);
          break;
        case Compression::kXz:
          decoder_->chain.push(bio::lzma_decompressor(kCodecBuffer), kCodecBuffer);
          break;
        case Compression::kNone: break;
      }
      decoder_->chain.push(RawFileSource{this}, kCodecBuffer);
    }
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

CompressedInput::~CompressedInput() {
  decoder_.reset();  // the chain's source points at this object
  if (fd_ >= 0) ::close(fd_);
}

size_t CompressedInput::read_raw(char* dst, size_t size) {
  size_t done = 0;
  if (magic_pos_ < magic_size_) {
    done = std::min(size, magic_size_ - magic_pos_);
    std::memcpy(dst, magic_ + magic_pos_, done);
    magic_pos_ += done;
  }
  if (done < size) done += read_fully(fd_, dst + done, size - done, path_);
  raw_bytes_read_.fetch_add(done, std::memory_order_relaxed);
  return done;
}

size_t CompressedInput::read(char* dst, size_t size) {
  if (!failure_.empty()) throw Error(ErrorKind::kInvalidInput, failure_);
  if (finished_ || size == 0) return 0;
  if (!decoder_) {
    size_t got = read_raw(dst, size);
    if (got == 0) finished_ = true;
    return got;
  }
  const char* codec = compression_name(compression_);
  std::string detail;
  // The decompressors throw on a stream that ends before its end marker (the
  // gzip footer, the bzip2 end-of-stream block, the xz stream footer); tests
  // check every codec so a Boost that silently stops would be noticed.
  try {
    std::streamsize got = decoder_->chain.sgetn(dst, static_cast<std::streamsize>(size));
    if (got <= 0) {
      finished_ = true;
      return 0;
    }
    return static_cast<size_t>(got);
  } catch (const bio::gzip_error& e) {
    detail = gzip_detail(e);
  } catch (const bio::bzip2_error& e) {
    detail = bzip2_detail(e);
  } catch (const bio::lzma_error& e) {
    detail = xz_detail(e);
  } catch (const bio::zlib_error& e) {
    detail = "zlib error " + std::to_string(e.error());
  } catch (const std::ios_base::failure& e) {
    detail = e.what();
  }
  failure_ = msg::truncated_stream(path_, codec, detail);
  throw Error(ErrorKind::kInvalidInput, failure_);
}

}  // namespace fgm
