// Executing an RDMA atomic on 8 bytes of some process's memory, under the
// host-wide stripe lock of that target (host/atomic_locks.h), so that every
// softrdma atomic on the host is atomic with respect to the others.
#pragma once

#include <cstdint>

#include <sys/types.h>

#include "host/atomic_locks.h"

namespace softrdma::transport {

struct AtomicOp {
  bool cmp_swap;         // else fetch-and-add
  uint64_t compare_add;  // CMP_AND_SWP: compare value; FETCH_AND_ADD: addend
  uint64_t swap;
};

enum class AtomicResult { kOk, kRefused, kFault, kGone };

// Runs `op` on the 8 bytes at `addr` in process `pid` (registry slot
// `owner_slot`; pid == getpid() means our own memory) and returns the
// original value in *original. kRefused = cross-memory attach refused.
AtomicResult ExecuteAtomic(AtomicLocks& locks, pid_t pid, uint32_t owner_slot, uint64_t addr,
                           const AtomicOp& op, uint64_t* original);

// The same on the target's memory mapped here at `mapped` (its address in
// the owner is still `addr`: the lock stripe is chosen by it, so that this
// path and the cross-memory-attach one exclude each other).
void ExecuteAtomicMapped(AtomicLocks& locks, uint32_t owner_slot, uint64_t addr, uint8_t* mapped,
                         const AtomicOp& op, uint64_t* original);

}  // namespace softrdma::transport
