// Materializes a description of files (sysfs_tree.h) under a directory.
#pragma once

#include <string>
#include <vector>

#include "cli/sysfs_tree.h"

namespace softrdma::cli {

// Creates every entry under `root` (which must exist): directories 0755,
// files 0444 (sysfs attributes are read-only), symlinks as given. Returns
// false with the failing path and reason in `error`.
bool WriteTree(const std::string& root, const std::vector<TreeEntry>& entries, std::string* error);

}  // namespace softrdma::cli
