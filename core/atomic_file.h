// Write-to-temporary-then-rename, so a failed run never leaves a partial
// output file under the final name.
#pragma once

#include <string>
#include <string_view>

namespace fgm {

// Writes `data` to `path` atomically (temp file in the same directory, fsync,
// rename, fsync of the directory).
void write_file_atomic(const std::string& path, std::string_view data);

}  // namespace fgm
