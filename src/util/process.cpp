#include "util/process.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

namespace softrdma {

ProcStat ReadProcStat(pid_t pid) {
  ProcStat out;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  // open/read rather than stdio: callers include the consumer of a ring,
  // which must not allocate.
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[1024];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return out;
  buf[n] = 0;
  // The command name (field 2) may contain spaces and parentheses: skip to
  // the last ')'.
  char* p = strrchr(buf, ')');
  if (!p || p[1] != ' ') return out;
  p += 2;  // field 3: the state
  out.zombie = *p == 'Z' || *p == 'X';
  for (int field = 3; field < 22 && *p; ++field) {
    p = strchr(p, ' ');
    if (!p) return out;
    ++p;
  }
  out.start_time = strtoull(p, nullptr, 10);
  return out;
}

bool ProcessGone(pid_t pid) {
  // No process has a pid <= 0 (and kill() would read it as a group).
  if (pid <= 0) return true;
  if (kill(pid, 0) != 0) return errno == ESRCH;
  ProcStat st = ReadProcStat(pid);
  return st.start_time != 0 && st.zombie;
}

namespace {

std::atomic<pid_t> g_self_pid{0};

void ForgetSelfPidAfterFork() {
  g_self_pid.store(0, std::memory_order_relaxed);
}

}  // namespace

pid_t SelfPid() {
  pid_t cached = g_self_pid.load(std::memory_order_relaxed);
  if (cached != 0) return cached;
  static const bool registered = pthread_atfork(nullptr, nullptr, ForgetSelfPidAfterFork) == 0;
  (void)registered;
  cached = getpid();
  g_self_pid.store(cached, std::memory_order_relaxed);
  return cached;
}

}  // namespace softrdma
