#include "cli/namespace_entry.h"

#include <cerrno>
#include <cstdio>
#include <string>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

namespace softrdma::cli {

namespace {

bool WriteProcFile(const char* path, const std::string& text) {
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = write(fd, text.data(), text.size());
  const int err = errno;
  close(fd);
  errno = err;
  return n == static_cast<ssize_t>(text.size());
}

NamespaceEntry Fail(NamespaceEntry entry, const char* step, bool refused) {
  entry.ok = false;
  entry.step = step;
  entry.err = errno;
  entry.refused = refused;
  return entry;
}

// A user namespace in which the caller keeps its own uid and gid: files it
// creates, signals it sends and the shared memory it opens are exactly those
// of the same user outside. setgroups must be denied before an unprivileged
// process may write gid_map.
NamespaceEntry EnterUserNamespace() {
  NamespaceEntry entry;
  entry.isolation = Isolation::kUserAndMountNamespace;
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
    return Fail(entry, "unshare(CLONE_NEWUSER|CLONE_NEWNS)", true);
  }
  // Kernels before 3.19 have no setgroups file and need no denial.
  if (!WriteProcFile("/proc/self/setgroups", "deny") && errno != ENOENT) {
    return Fail(entry, "writing /proc/self/setgroups", true);
  }
  if (!WriteProcFile("/proc/self/uid_map",
                     std::to_string(uid) + " " + std::to_string(uid) + " 1")) {
    return Fail(entry, "writing /proc/self/uid_map", true);
  }
  if (!WriteProcFile("/proc/self/gid_map",
                     std::to_string(gid) + " " + std::to_string(gid) + " 1")) {
    return Fail(entry, "writing /proc/self/gid_map", true);
  }
  entry.ok = true;
  return entry;
}

}  // namespace

const char* IsolationName(Isolation isolation) {
  return isolation == Isolation::kMountNamespace ? "mount namespace"
                                                 : "user namespace + mount namespace";
}

NamespaceEntry EnterPrivateMountNamespace() {
  NamespaceEntry entry;
  // Root keeps its real privileges (a user namespace would cut it off from
  // capabilities over processes outside, e.g. cross-memory attach), so it
  // needs a mount namespace alone. Root without CAP_SYS_ADMIN (a container)
  // falls back to a user namespace like anyone else.
  bool entered = geteuid() == 0 && unshare(CLONE_NEWNS) == 0;
  if (entered) {
    entry.isolation = Isolation::kMountNamespace;
  } else {
    entry = EnterUserNamespace();
    if (!entry.ok) return entry;
  }
  // Keep receiving the host's mount events but never send ours back.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) {
    return Fail(entry, "making / a slave mount (MS_REC|MS_SLAVE)", false);
  }
  entry.ok = true;
  return entry;
}

}  // namespace softrdma::cli
