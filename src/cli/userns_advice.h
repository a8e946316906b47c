// Why the kernel refuses user namespaces here, and what to change. The facts
// are read from /proc by ReadUsernsFacts; the advice is a pure function of
// them, shared by `softrdma run` (when it cannot start) and `softrdma doctor`.
#pragma once

#include <string>
#include <vector>

namespace softrdma::cli {

struct UsernsFacts {
  int max_user_namespaces = -1;        // user.max_user_namespaces, -1 if unreadable
  int unprivileged_userns_clone = -1;  // kernel.unprivileged_userns_clone (Debian), -1 if absent
  int apparmor_restrict = -1;          // kernel.apparmor_restrict_unprivileged_userns, -1 if absent
  int seccomp_mode = -1;               // "Seccomp:" of /proc/self/status (2 = filter), -1 if absent
  bool is_root = false;                // euid 0 (then refused for lack of CAP_SYS_ADMIN)
};

UsernsFacts ReadUsernsFacts();

// One line per thing to change, most likely cause first; never empty.
// `unshare_errno` is the error of unshare(CLONE_NEWUSER), 0 if unknown.
std::vector<std::string> UsernsAdvice(const UsernsFacts& facts, int unshare_errno);

}  // namespace softrdma::cli
