// Shared memory left behind by test processes that died without cleaning
// up: a fuzz run stopped by a crash or a signal, a test binary killed at its
// ctest timeout. Each test process works in a namespace of its own,
// <tag><pid> (unit tests "ut", verbs tests "vt"), whose segments are
// /dev/shm/softrdma-<tag><pid>-<uid>-*; at exit it removes them, but a
// SIGKILL leaves them (a registry and a process segment: ~15 MB of tmpfs
// each run). The next test process removes them instead.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace softrdma::testing {

// Removes this user's segments of namespaces <tag><pid> whose process no
// longer exists. A pid in use again keeps its segments until it is gone
// too; another user's are never touched.
inline void RemoveSegmentsOfDeadTestProcesses(const char* tag) {
  const std::string prefix = std::string("softrdma-") + tag;
  const std::string uid_part = "-" + std::to_string(getuid()) + "-";
  DIR* dir = opendir("/dev/shm");
  if (!dir) return;
  while (const dirent* e = readdir(dir)) {
    if (strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0) continue;
    const char* digits = e->d_name + prefix.size();
    char* end = nullptr;
    const long pid = strtol(digits, &end, 10);
    if (end == digits || pid <= 0 || strncmp(end, uid_part.c_str(), uid_part.size()) != 0) continue;
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    unlinkat(dirfd(dir), e->d_name, 0);
  }
  closedir(dir);
}

// Both kinds of test process (unit and fuzz: "ut"; verbs: "vt").
inline void RemoveSegmentsOfDeadTestProcesses() {
  RemoveSegmentsOfDeadTestProcesses("ut");
  RemoveSegmentsOfDeadTestProcesses("vt");
}

}  // namespace softrdma::testing
