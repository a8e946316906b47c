// Moves the calling process into a mount namespace of its own, so that what
// `softrdma run` mounts is seen by the launched command and its children
// only. Mounts of the host keep propagating in; none of ours propagate out.
#pragma once

#include <string>

namespace softrdma::cli {

enum class Isolation {
  kMountNamespace,         // root with CAP_SYS_ADMIN: a mount namespace alone
  kUserAndMountNamespace,  // anyone else: a user namespace mapping the caller's uid and gid
                           // to themselves (ids unchanged), and a mount namespace owned by it
};

struct NamespaceEntry {
  bool ok = false;
  Isolation isolation = Isolation::kMountNamespace;
  bool refused = false;  // the kernel refused the namespaces themselves (not a later step)
  std::string step;      // what failed, e.g. "unshare(CLONE_NEWUSER|CLONE_NEWNS)"
  int err = 0;           // its errno
};

// Must be called while the process has a single thread (unshare(2) refuses
// a new user or mount namespace to a multithreaded process).
NamespaceEntry EnterPrivateMountNamespace();

const char* IsolationName(Isolation isolation);

}  // namespace softrdma::cli
