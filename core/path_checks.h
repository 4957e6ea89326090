// Checks of the paths a command reads and writes, run before any expensive
// work (ingest, scoring passes), so that an input that cannot be read or an
// output that cannot be written fails at once as an I/O error naming the path,
// the key or option it came from, and the reason — not after training, and
// not as an "internal error" from an escaped std::filesystem exception.
// Nothing is created except by create_output_directory.
#pragma once

#include <string>
#include <string_view>

namespace fgm {

// `path` can be opened for reading and is not a directory. Character devices
// and pipes are accepted (`fgm inspect /dev/stdin`).
void check_input_file(const std::string& path, std::string_view key);

// `path` is a readable regular file: an input fgm reads twice (ingest: its
// checksum names the store, then its rows), which a pipe, FIFO or device
// (`/dev/stdin`) cannot give (the second read would block or find it empty).
void check_regular_input_file(const std::string& path, std::string_view key);

// `path` is a readable file or a readable directory (a store).
void check_input_file_or_directory(const std::string& path, std::string_view key);

// `dir` is a writable directory, or does not exist yet and can be created:
// its nearest existing ancestor is a writable directory.
void check_output_directory(const std::string& dir, std::string_view key);

// The file `path` can be created or replaced: it is not a directory and its
// parent directory exists and is writable.
void check_output_file(const std::string& path, std::string_view key);

// Creates `dir` (and missing parents) as an I/O error naming `key` on failure.
void create_output_directory(const std::string& dir, std::string_view key);

}  // namespace fgm
