#include "cli/doctor_probes.h"

#include <cerrno>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <grp.h>
#include <linux/magic.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/device_query.h"
#include "cli/mount_stage.h"
#include "cli/namespace_entry.h"
#include "cli/proc_values.h"

namespace softrdma::cli {

namespace {

constexpr uid_t kNobody = 65534;
constexpr int kCapSysPtrace = 19;

bool WriteAll(int fd, const void* data, size_t size) {
  return write(fd, data, size) == static_cast<ssize_t>(size);
}

int WaitChild(pid_t child) {
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// What a child probe sends back: its verdict, then its message.
struct ProbeReport {
  int ok = 0;
  int refused = 0;
  int err = 0;
  int isolation = 0;
};

[[noreturn]] void ReportAndExit(int fd, const ProbeReport& report, const std::string& text) {
  WriteAll(fd, &report, sizeof report);
  WriteAll(fd, text.data(), text.size());
  _exit(0);
}

[[noreturn]] void RunProbeChild(int fd, bool as_unprivileged_user) {
  ProbeReport report;
  if (as_unprivileged_user &&
      (setgroups(0, nullptr) != 0 || setresgid(kNobody, kNobody, kNobody) != 0 ||
       setresuid(kNobody, kNobody, kNobody) != 0)) {
    report.err = errno;
    ReportAndExit(fd, report, std::string("becoming nobody: ") + std::strerror(errno));
  }
  // Changing uid made this process non-dumpable, which makes its /proc files
  // root's; a process started by that user would own them.
  if (as_unprivileged_user) prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  const NamespaceEntry entry = EnterPrivateMountNamespace();
  if (!entry.ok) {
    report.refused = entry.refused;
    report.err = entry.err;
    ReportAndExit(fd, report, entry.step + ": " + std::strerror(entry.err));
  }
  report.isolation = static_cast<int>(entry.isolation);
  // The same mounts as `softrdma run`, with an empty device list.
  std::string stage, error;
  const bool mounted = MountStage(&stage, &error) &&
                       mkdir((stage + "/sysclass").c_str(), 0755) == 0 &&
                       mkdir((stage + "/sysclass/infiniband").c_str(), 0755) == 0 &&
                       BuildDevTree(stage + "/dev", {"probe"}, &error) &&
                       OverlaySysClass(stage + "/sysclass", &error) &&
                       ReplaceDev(stage + "/dev", &error) && UnmountStage(stage, &error);
  struct stat node {
  }, dir{};
  if (mounted && (stat("/dev/infiniband/probe", &node) != 0 || !S_ISCHR(node.st_mode) ||
                  stat("/sys/class/infiniband", &dir) != 0 || !S_ISDIR(dir.st_mode))) {
    error = "the mounts were made but their files are not visible";
  }
  report.ok = mounted && error.empty();
  report.err = errno;
  ReportAndExit(fd, report, error.empty() && !mounted ? std::strerror(errno) : error);
}

}  // namespace

LibraryFacts ProbeLibrary() {
  LibraryFacts facts;
  facts.dir = LoadedVerbsLibraryDir();
  facts.queried = QueryDevices(&facts.devices, &facts.error);
  return facts;
}

ShmFacts ProbeShm() {
  ShmFacts facts;
  struct stat st {};
  facts.exists = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode);
  if (!facts.exists) return facts;
  facts.writable = access("/dev/shm", W_OK | X_OK) == 0;
  struct statfs fs {};
  facts.is_tmpfs = statfs("/dev/shm", &fs) == 0 && fs.f_type == TMPFS_MAGIC;
  struct statvfs vfs {};
  if (statvfs("/dev/shm", &vfs) == 0) {
    facts.size_bytes = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
    facts.free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  }
  return facts;
}

CmaFacts ProbeCma() {
  CmaFacts facts;
  facts.yama_ptrace_scope = ReadIntFile("/proc/sys/kernel/yama/ptrace_scope");
  const std::string cap_eff = StatusField("CapEff");
  facts.cap_sys_ptrace =
      !cap_eff.empty() && (std::stoull(cap_eff, nullptr, 16) >> kCapSysPtrace) & 1;
  const std::string seccomp = StatusField("Seccomp");
  facts.seccomp_mode = seccomp.empty() ? -1 : std::stoi(seccomp);

  // A child reads this process's memory, the direction Yama scope 1 refuses
  // unless the target opts in, as every softrdma process does
  // (PR_SET_PTRACER_ANY); like two unrelated processes of one user.
  static volatile uint64_t marker = 0x50f7'4d4a'0000'0001ull;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    facts.probe_errno = errno;
    return facts;
  }
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child == 0) {
    uint64_t value = 0;
    iovec local{&value, sizeof value};
    iovec remote{const_cast<uint64_t*>(&marker), sizeof marker};
    int err = 0;
    if (process_vm_readv(parent, &local, 1, &remote, 1, 0) != sizeof value) {
      err = errno;
    } else if (value != marker) {
      err = EFAULT;
    }
    WriteAll(pipe_fds[1], &err, sizeof err);
    _exit(0);
  }
  close(pipe_fds[1]);
  int err = child < 0 ? errno : EIO;
  if (child > 0) {
    if (read(pipe_fds[0], &err, sizeof err) != sizeof err) err = EIO;
    WaitChild(child);
  }
  close(pipe_fds[0]);
  prctl(PR_SET_PTRACER, 0, 0, 0, 0);
  facts.probe_errno = err;
  return facts;
}

RunProbe ProbeRun(bool as_unprivileged_user) {
  RunProbe probe;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    probe.error = std::string("pipe: ") + std::strerror(errno);
    return probe;
  }
  const pid_t child = fork();
  if (child == 0) {
    close(pipe_fds[0]);
    RunProbeChild(pipe_fds[1], as_unprivileged_user);
  }
  close(pipe_fds[1]);
  if (child < 0) {
    probe.error = std::string("fork: ") + std::strerror(errno);
    close(pipe_fds[0]);
    return probe;
  }
  ProbeReport report;
  std::string text;
  if (read(pipe_fds[0], &report, sizeof report) == sizeof report) {
    char buf[512];
    ssize_t n;
    while ((n = read(pipe_fds[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  } else {
    text = "the probe process ended without a report";
  }
  close(pipe_fds[0]);
  WaitChild(child);
  probe.ok = report.ok != 0;
  probe.refused = report.refused != 0;
  probe.err = report.err;
  probe.isolation = IsolationName(static_cast<Isolation>(report.isolation));
  probe.error = text;
  return probe;
}

}  // namespace softrdma::cli
