// The mounts `softrdma run` makes inside its own mount namespace
// (namespace_entry.h): a private tmpfs "stage" where the new /dev and the
// sysfs additions are assembled, then laid over /dev and /sys/class. Each
// function returns false with "<what>: <reason>" in `error`.
#pragma once

#include <string>
#include <vector>

namespace softrdma::cli {

// Mounts a small private tmpfs on the first existing directory of /tmp,
// /mnt, /run, /var/tmp, which it hides only until UnmountStage (before the
// command starts). Sets `path` to that directory.
bool MountStage(std::string* path, std::string* error);
bool UnmountStage(const std::string& path, std::string* error);

// Fills the (new, empty) directory `dev_dir` with every entry of /dev, each
// bound to the original (directories recursively, so /dev/shm, /dev/pts and
// /dev/mqueue stay the very same mounts), except infiniband/, which instead
// holds one node per name of `rdma_nodes` plus rdma_cm: files onto which
// /dev/null is bound, so they are character devices anyone may open for
// reading and writing, as a real uverbs node would be.
bool BuildDevTree(const std::string& dev_dir, const std::vector<std::string>& rdma_nodes,
                  std::string* error);

// Binds `dev_dir` (with everything mounted under it) onto /dev.
bool ReplaceDev(const std::string& dev_dir, std::string* error);

// Mounts a read-only overlay on /sys/class whose upper layer is `class_dir`
// and lower layer the real /sys/class: the real classes stay as they are,
// the entries of `class_dir` are added (or take precedence).
bool OverlaySysClass(const std::string& class_dir, std::string* error);

}  // namespace softrdma::cli
