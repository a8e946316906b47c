// What /proc says about another process: the one place that decides whether
// a process holding a shared resource (a registry slot, a ring record, an
// atomic lock) is still alive.
#pragma once

#include <cstdint>

#include <sys/types.h>

namespace softrdma {

struct ProcStat {
  // Start time in clock ticks since boot (/proc/<pid>/stat field 22): with
  // the pid it identifies a process even after pid reuse. 0 = no such process.
  uint64_t start_time = 0;
  // A SIGKILLed process nobody has reaped yet holds its pid but is dead.
  bool zombie = false;
};

ProcStat ReadProcStat(pid_t pid);

// True if `pid` certainly no longer runs: gone, or a zombie. A process we
// may not inspect counts as alive.
bool ProcessGone(pid_t pid);

// getpid() without the system call (glibc does not cache it): cached, and
// forgotten in the child of a fork (pthread_atfork). A child made without
// fork handlers (raw clone, _Fork) that then uses the library is not
// supported.
pid_t SelfPid();

}  // namespace softrdma
