#include "transport/atomics.h"

#include <cerrno>
#include <cstring>

#include <sys/uio.h>
#include <unistd.h>

#include "util/process.h"

namespace softrdma::transport {

namespace {

// One 8-byte transfer to or from another process; returns 0 or an errno.
int Transfer8(pid_t pid, uint64_t addr, uint64_t* value, bool write) {
  iovec local{value, 8};
  iovec remote{reinterpret_cast<void*>(addr), 8};
  ssize_t n = write ? process_vm_writev(pid, &local, 1, &remote, 1, 0)
                    : process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (n == 8) return 0;
  return n < 0 ? errno : EFAULT;
}

}  // namespace

AtomicResult ExecuteAtomic(AtomicLocks& locks, pid_t pid, uint32_t owner_slot, uint64_t addr,
                           const AtomicOp& op, uint64_t* original) {
  AtomicLockGuard guard(locks, AtomicLocks::Stripe(owner_slot, addr));
  const bool local = pid == SelfPid();
  uint64_t cur = 0;
  if (local) {
    memcpy(&cur, reinterpret_cast<const void*>(addr), 8);
  } else if (int e = Transfer8(pid, addr, &cur, false)) {
    if (e == EPERM || e == EACCES || e == ENOSYS) return AtomicResult::kRefused;
    return e == ESRCH ? AtomicResult::kGone : AtomicResult::kFault;
  }
  *original = cur;
  uint64_t next = op.cmp_swap ? (cur == op.compare_add ? op.swap : cur) : cur + op.compare_add;
  if (next == cur && op.cmp_swap) return AtomicResult::kOk;  // compare failed: nothing to write
  if (local) {
    memcpy(reinterpret_cast<void*>(addr), &next, 8);
  } else if (int e = Transfer8(pid, addr, &next, true)) {
    return e == ESRCH ? AtomicResult::kGone : AtomicResult::kFault;
  }
  return AtomicResult::kOk;
}

void ExecuteAtomicMapped(AtomicLocks& locks, uint32_t owner_slot, uint64_t addr, uint8_t* mapped,
                         const AtomicOp& op, uint64_t* original) {
  AtomicLockGuard guard(locks, AtomicLocks::Stripe(owner_slot, addr));
  uint64_t cur = 0;
  memcpy(&cur, mapped, 8);
  *original = cur;
  if (op.cmp_swap && cur != op.compare_add) return;  // compare failed: nothing to write
  uint64_t next = op.cmp_swap ? op.swap : cur + op.compare_add;
  memcpy(mapped, &next, 8);
}

}  // namespace softrdma::transport
