// Exported sysfs helpers. softrdma itself never reads sysfs (its device is not
// a kernel device); these serve clients that call the helpers directly, e.g.
// ibv_devinfo reading "board_id" from a device's ibdev_path.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "abi/verbs/symver.h"
#include "util/sysfs_file.h"

// rdma-core's per-device sysfs record; only providers hold one.
struct verbs_sysfs_dev;

namespace {

// Computed once and deliberately leaked: callers keep the pointer for the
// life of the process, including from destructors that run after ours.
const char* compute_sysfs_path() noexcept {
  try {
    const std::string root = softrdma::sysfs_root_from_env(std::getenv("SYSFS_PATH"));
    if (char* copy = ::strdup(root.c_str())) return copy;
  } catch (...) {
    // Out of memory: fall through to the default rather than fail a getter.
  }
  return "/sys";
}

}  // namespace

extern "C" {

// "/sys", or $SYSFS_PATH without trailing slashes.
SOFTRDMA_EXPORT const char* ibv_get_sysfs_path(void) {
  static const char* const path = compute_sysfs_path();
  return path;
}

// Reads <dir>/<file> into buf: returns the length without the trailing
// newline, or -1 with errno set (details in util/sysfs_file.h).
SOFTRDMA_EXPORT int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  if (dir == nullptr || file == nullptr) {
    errno = EINVAL;
    return -1;
  }
  try {
    return softrdma::read_small_file(softrdma::join_path(dir, file).c_str(), buf, size);
  } catch (...) {
    errno = ENOMEM;  // only join_path allocates
    return -1;
  }
}

// IBVERBS_PRIVATE_34. Providers read attributes of *their* kernel device
// through the verbs_sysfs_dev record that rdma-core built while matching them
// to /sys/class/infiniband_verbs. softrdma never loads providers and so never
// creates such a record: no device directory exists to resolve fnfmt against.
// NULL or bad arguments give -1/EINVAL, anything else -1/ENODEV.
SOFTRDMA_EXPORT int ibv_read_ibdev_sysfs_file(char* buf, size_t size,
                                              struct verbs_sysfs_dev* sysfs_dev, const char* fnfmt,
                                              ...) {
  if (buf == nullptr || size == 0 || sysfs_dev == nullptr || fnfmt == nullptr) {
    errno = EINVAL;
    return -1;
  }
  buf[0] = '\0';
  errno = ENODEV;
  return -1;
}

}  // extern "C"
