#include "cli/userns_advice.h"

#include <cerrno>
#include <string>

#include <unistd.h>

#include "cli/proc_values.h"

namespace softrdma::cli {

UsernsFacts ReadUsernsFacts() {
  UsernsFacts facts;
  facts.max_user_namespaces = ReadIntFile("/proc/sys/user/max_user_namespaces");
  facts.unprivileged_userns_clone = ReadIntFile("/proc/sys/kernel/unprivileged_userns_clone");
  facts.apparmor_restrict = ReadIntFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
  const std::string seccomp = StatusField("Seccomp");
  facts.seccomp_mode = seccomp.empty() ? -1 : std::stoi(seccomp);
  facts.is_root = geteuid() == 0;
  return facts;
}

std::vector<std::string> UsernsAdvice(const UsernsFacts& facts, int unshare_errno) {
  std::vector<std::string> advice;
  if (facts.max_user_namespaces == 0) {
    advice.push_back(
        "user.max_user_namespaces is 0: as root, `sysctl -w user.max_user_namespaces=15000` "
        "(keep it in /etc/sysctl.d/ to survive a reboot)");
  } else if (unshare_errno == ENOSPC) {
    advice.push_back(
        "the limit of user namespaces (user.max_user_namespaces) is reached: raise it with "
        "`sysctl -w user.max_user_namespaces=<more>` or end processes holding namespaces");
  }
  if (facts.unprivileged_userns_clone == 0) {
    advice.push_back(
        "kernel.unprivileged_userns_clone is 0: as root, "
        "`sysctl -w kernel.unprivileged_userns_clone=1`");
  }
  if (facts.apparmor_restrict == 1) {
    advice.push_back(
        "kernel.apparmor_restrict_unprivileged_userns is 1: as root, `sysctl -w "
        "kernel.apparmor_restrict_unprivileged_userns=0`, or give the softrdma binary an "
        "AppArmor profile with the `userns` permission");
  }
  if (advice.empty() && facts.seccomp_mode == 2) {
    advice.push_back(
        "a seccomp filter is active (a container's default profile refuses unshare and mount): "
        "start the container with `--security-opt seccomp=unconfined`, or allow unshare(2), "
        "mount(2) and umount2(2) in its profile");
  }
  if (advice.empty()) {
    advice.push_back(
        "no setting that explains it was found; inside a container, the runtime must allow user "
        "namespaces (e.g. Docker: `--security-opt seccomp=unconfined --security-opt "
        "apparmor=unconfined`)");
  }
  if (facts.is_root) {
    advice.push_back(
        "or give this root process CAP_SYS_ADMIN (a container: `--cap-add SYS_ADMIN`): "
        "softrdma run then needs only a mount namespace");
  } else {
    advice.push_back("or run softrdma as root: it then needs only a mount namespace");
  }
  return advice;
}

}  // namespace softrdma::cli
