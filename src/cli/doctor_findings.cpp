#include "cli/doctor_findings.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <infiniband/verbs.h>

#include "cli/exit_codes.h"

namespace softrdma::cli {

namespace {

std::string Size(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1ull << 30)) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  } else {
    std::snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(bytes) / (1ull << 20));
  }
  return buf;
}

std::string ErrnoName(int err) {
  return std::string(strerrorname_np(err) ? strerrorname_np(err) : "error") + " (" +
         std::strerror(err) + ")";
}

std::string DescribeDevice(const DeviceSnapshot& d) {
  std::string text = d.name;
  for (const PortSnapshot& p : d.ports) {
    int gids = 0;
    for (const GidSlot& g : p.gids) gids += g.valid;
    text += ", port " + std::to_string(p.port_num) +
            (p.state == IBV_PORT_ACTIVE ? " ACTIVE" : " not active") + " with " +
            std::to_string(gids) + " GIDs";
  }
  return text;
}

}  // namespace

Finding AssessLibrary(const LibraryFacts& facts) {
  Finding f;
  f.check = "library";
  if (!facts.queried || facts.devices.empty()) {
    f.level = Level::kFailure;
    f.summary = "libibverbs.so.1 from " + facts.dir + " lists no usable device: " + facts.error;
    f.advice.push_back(
        "rebuild softrdma (cmake --build build) or reinstall it; `SOFTRDMA_LOG=debug "
        "ibv_devices` with LD_LIBRARY_PATH set to that directory shows why");
    return f;
  }
  f.summary = "libibverbs.so.1 from " + facts.dir + ": ";
  for (size_t i = 0; i < facts.devices.size(); ++i) {
    f.summary += (i ? "; " : "") + DescribeDevice(facts.devices[i]);
  }
  return f;
}

Finding AssessShm(const ShmFacts& facts) {
  Finding f;
  f.check = "shared memory";
  if (!facts.exists) {
    f.level = Level::kFailure;
    f.summary = "/dev/shm does not exist: softrdma keeps its queues and registered memory there";
    f.advice.push_back(
        "as root: `mkdir -p /dev/shm && mount -t tmpfs -o mode=1777 tmpfs /dev/shm`");
    return f;
  }
  f.summary = std::string("/dev/shm: ") + (facts.is_tmpfs ? "tmpfs" : "not a tmpfs") + ", " +
              Size(facts.size_bytes) + ", " + Size(facts.free_bytes) + " free";
  if (!facts.writable) {
    f.level = Level::kFailure;
    f.summary += ", not writable by this user";
    f.advice.push_back("as root: `chmod 1777 /dev/shm`");
    return f;
  }
  if (!facts.is_tmpfs) {
    f.level = Level::kWarning;
    f.advice.push_back(
        "/dev/shm should be a tmpfs (memory); on a disk file system every ring and "
        "registered region is written back to disk");
  }
  if (facts.free_bytes < kShmLowFreeBytes) {
    f.level = Level::kWarning;
    f.advice.push_back(
        "registered memory is moved into /dev/shm (SOFTRDMA_MAP_MR=1, the default), "
        "so regions larger than the free space fail: enlarge it (as root: `mount -o "
        "remount,size=8G /dev/shm`; Docker: `--shm-size=8g`) or set "
        "SOFTRDMA_MAP_MR=0");
  }
  return f;
}

Finding AssessCma(const CmaFacts& facts) {
  Finding f;
  f.check = "cross-memory attach";
  if (facts.probe_errno == 0) {
    f.summary = "allowed: process_vm_readv works between processes of one user";
    if (facts.yama_ptrace_scope == 1)
      f.summary += " (Yama ptrace_scope 1: softrdma's processes opt in)";
    return f;
  }
  f.level = Level::kWarning;
  f.summary = "refused: process_vm_readv failed with " + ErrnoName(facts.probe_errno) +
              "; softrdma still works: one-sided operations use registered memory mapped from "
              "/dev/shm (the default) or, with SOFTRDMA_MAP_MR=0, two copies through the "
              "target's ring";
  if (facts.probe_errno == ENOSYS) {
    f.advice.push_back("the kernel is built without CONFIG_CROSS_MEMORY_ATTACH");
    return f;
  }
  if (facts.yama_ptrace_scope == 3) {
    f.advice.push_back(
        "Yama ptrace_scope is 3 (no attach at all), which cannot be lowered until "
        "reboot: boot with a lower kernel.yama.ptrace_scope");
  } else if (facts.yama_ptrace_scope == 2 && !facts.cap_sys_ptrace) {
    f.advice.push_back(
        "Yama ptrace_scope is 2 (only CAP_SYS_PTRACE may attach): as root, `sysctl "
        "-w kernel.yama.ptrace_scope=1` (softrdma's processes declare themselves "
        "attachable), or give the programs CAP_SYS_PTRACE");
  }
  if (facts.seccomp_mode == 2) {
    f.advice.push_back(
        "a seccomp filter is active (Docker's default profile refuses "
        "process_vm_readv without CAP_SYS_PTRACE): `--cap-add SYS_PTRACE` or a "
        "profile allowing process_vm_readv/process_vm_writev");
  }
  if (f.advice.empty()) {
    f.advice.push_back(
        "a security module (SELinux, AppArmor) or the container runtime refuses "
        "ptrace access between processes");
  }
  return f;
}

Finding AssessRun(const RunFacts& facts) {
  Finding f;
  f.check = "softrdma run";
  if (facts.probe.ok) {
    f.summary = "works here (" + facts.probe.isolation + ")";
    if (facts.probed_unprivileged) {
      f.summary += facts.unprivileged.ok
                       ? "; unprivileged users can use it too (user namespaces allowed)"
                       : "; unprivileged users cannot: " + facts.unprivileged.error;
      if (!facts.unprivileged.ok && facts.unprivileged.refused) {
        f.advice = UsernsAdvice(facts.userns, facts.unprivileged.err);
        f.advice.pop_back();  // the way out for root: this user already is root
      }
    }
    return f;
  }
  f.level = Level::kWarning;
  f.summary = "unavailable: " + facts.probe.error +
              "; programs that only use libibverbs still run with LD_LIBRARY_PATH, but UCX and "
              "tools reading /sys/class/infiniband do not find the device";
  if (facts.probe.refused) {
    f.advice = UsernsAdvice(facts.userns, facts.probe.err);
  } else {
    f.advice.push_back(
        "the kernel refused a mount softrdma run needs (an overlay on /sys/class "
        "from a user namespace needs Linux 5.11 or later)");
  }
  return f;
}

int DoctorExitStatus(const std::vector<Finding>& findings) {
  Level worst = Level::kOk;
  for (const Finding& f : findings) worst = std::max(worst, f.level);
  switch (worst) {
    case Level::kOk:
      return kExitOk;
    case Level::kWarning:
      return kExitDoctorWarnings;
    case Level::kFailure:
      return kExitDoctorFailures;
  }
  return kExitDoctorFailures;
}

}  // namespace softrdma::cli
