// Host-wide striped locks for RDMA atomics. Every softrdma atomic on the
// host (whichever process executes it: the initiator on the one-copy path,
// the target on the two-copy path) takes the stripe of its target, so
// atomics are atomic with respect to each other (IBV_ATOMIC_HCA). The table
// lives in the host registry.
//
// A lock word holds the holder's pid (0 = free). A waiter that has spun for a
// while checks whether the holder still exists and, if it died mid-operation
// (SIGKILL), takes the lock over: a killed holder never deadlocks the host.
// The 8-byte target it was updating is left as the holder left it (the
// update is a single 8-byte write, so it is either done or not).
#pragma once

#include <atomic>
#include <cstdint>

namespace softrdma {

inline constexpr uint32_t kAtomicLockStripes = 4096;

class AtomicLocks {
 public:
  explicit AtomicLocks(std::atomic<uint32_t>* words) : words_(words) {}

  // The stripe of an 8-byte target: (registry slot of the process owning
  // the memory, its address there).
  static uint32_t Stripe(uint32_t owner_slot, uint64_t addr);

  void Lock(uint32_t stripe);
  void Unlock(uint32_t stripe);

 private:
  std::atomic<uint32_t>* words_;
};

// RAII holder.
class AtomicLockGuard {
 public:
  AtomicLockGuard(AtomicLocks& locks, uint32_t stripe) : locks_(locks), stripe_(stripe) {
    locks_.Lock(stripe_);
  }
  ~AtomicLockGuard() { locks_.Unlock(stripe_); }
  AtomicLockGuard(const AtomicLockGuard&) = delete;
  AtomicLockGuard& operator=(const AtomicLockGuard&) = delete;

 private:
  AtomicLocks& locks_;
  uint32_t stripe_;
};

}  // namespace softrdma
