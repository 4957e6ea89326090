// Write-to-temporary-then-rename, so a failed run never leaves a partial
// output file under the final name.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

namespace fgm {

// Writes `data` to `path` atomically (temp file ".<name>.tmp-<pid>-<random
// hex>" in the same directory, created with O_EXCL | O_NOFOLLOW so nothing
// planted at that name is followed; fsync, rename, fsync of the directory).
void write_file_atomic(const std::string& path, std::string_view data);

// Removes the temporaries write_file_atomic left in `dir` when its process was
// killed (".<name>.tmp-<pid>-<hex>", or the older ".<name>.tmp-<pid>", whose
// pid no longer runs); returns their paths.
// Temporaries of live processes are left alone.
std::vector<std::string> remove_stale_temporaries(const std::string& dir);

// True when no process `pid` runs: none exists, or it is a zombie (killed,
// not yet reaped by its parent). The owner test of every stale temporary.
bool process_is_gone(pid_t pid);

}  // namespace fgm
