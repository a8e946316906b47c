// `softrdma doctor`'s verdicts: for each thing softrdma depends on, the facts
// measured on this system (doctor_probes.h) turned into what works and what
// to change. Pure functions of the facts, so each verdict can be tested.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/device_snapshot.h"
#include "cli/userns_advice.h"

namespace softrdma::cli {

enum class Level { kOk, kWarning, kFailure };

struct Finding {
  Level level = Level::kOk;
  std::string check;                // "shared memory", ...
  std::string summary;              // what was found, one line
  std::vector<std::string> advice;  // what to change, one line each (empty when ok)
};

struct LibraryFacts {
  std::string dir;  // where libibverbs.so.1 was loaded from
  bool queried = false;
  std::string error;  // why the query failed
  std::vector<DeviceSnapshot> devices;
};

struct ShmFacts {
  bool exists = false;
  bool writable = false;
  bool is_tmpfs = false;
  uint64_t size_bytes = 0;
  uint64_t free_bytes = 0;
};

struct CmaFacts {
  int probe_errno = 0;         // 0: process_vm_readv worked between two processes
  int yama_ptrace_scope = -1;  // -1: no Yama
  bool cap_sys_ptrace = false;
  int seccomp_mode = -1;
};

struct RunProbe {
  bool ok = false;
  bool refused = false;   // the namespaces themselves were refused
  std::string isolation;  // how `run` isolates when ok
  std::string error;      // the failing step and reason otherwise
  int err = 0;
};

struct RunFacts {
  bool is_root = false;
  RunProbe probe;  // as the calling user
  bool probed_unprivileged = false;
  RunProbe unprivileged;  // as an unprivileged user (probed when root)
  UsernsFacts userns;
};

// Free space under which /dev/shm is reported as a limitation: registered
// memory is moved into it (SOFTRDMA_MAP_MR=1, the default).
inline constexpr uint64_t kShmLowFreeBytes = 512ull << 20;

Finding AssessLibrary(const LibraryFacts& facts);
Finding AssessShm(const ShmFacts& facts);
Finding AssessCma(const CmaFacts& facts);
Finding AssessRun(const RunFacts& facts);

// 0, 1 or 3: the worst level among `findings` (exit_codes.h).
int DoctorExitStatus(const std::vector<Finding>& findings);

}  // namespace softrdma::cli
