// Small-file reading in the style of libibverbs' sysfs helpers
// (ibv_get_sysfs_path, ibv_read_sysfs_file). softrdma has no kernel device and
// never reads sysfs itself; these exist because clients call the exported
// helpers on arbitrary directories (ibv_devinfo reads "board_id" this way).
#pragma once

#include <cstddef>
#include <string>

namespace softrdma {

// The sysfs root to report for the value of $SYSFS_PATH (nullptr when unset):
// unset or empty gives "/sys"; otherwise the value without trailing slashes,
// keeping a lone "/" so the result is never empty.
std::string sysfs_root_from_env(const char* env_value);

// "<dir>/<file>", without doubling a slash that `dir` already ends with.
std::string join_path(const char* dir, const char* file);

// Reads the whole file at `path` into `buf` (capacity `size`), drops one
// trailing '\n' and NUL-terminates. Returns the length of the text stored
// (0 for an empty file), or -1 with errno set: EINVAL for bad arguments,
// the open/read error, or EOVERFLOW when the text and its terminator do not
// fit (a truncated attribute would silently be a different value).
int read_small_file(const char* path, char* buf, std::size_t size) noexcept;

}  // namespace softrdma
