#include "host/atomic_locks.h"

#include "util/process.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include <sched.h>
#include <unistd.h>

namespace softrdma {

namespace {

// Spins before the first liveness check of the holder. Critical sections are
// two small copies, so a live holder is normally done long before this.
constexpr uint32_t kSpinsBeforeCheck = 1u << 14;

}  // namespace

uint32_t AtomicLocks::Stripe(uint32_t owner_slot, uint64_t addr) {
  uint64_t h = (addr >> 3) * 0x9e3779b97f4a7c15ull ^ (uint64_t{owner_slot} << 32);
  h ^= h >> 29;
  return static_cast<uint32_t>(h % kAtomicLockStripes);
}

void AtomicLocks::Lock(uint32_t stripe) {
  const uint32_t me = static_cast<uint32_t>(SelfPid());
  std::atomic<uint32_t>& w = words_[stripe];
  uint32_t spins = 0;
  for (;;) {
    uint32_t holder = 0;
    if (w.compare_exchange_weak(holder, me, std::memory_order_acquire)) return;
    if (++spins < kSpinsBeforeCheck) {
      if ((spins & 63) == 0) sched_yield();
      continue;
    }
    spins = 0;
    // A holder of our own pid is another thread of ours: alive by definition.
    if (holder != 0 && holder != me && ProcessGone(static_cast<pid_t>(holder)) &&
        w.compare_exchange_strong(holder, me, std::memory_order_acquire))
      return;  // took over the lock of a holder that died in its critical section
  }
}

void AtomicLocks::Unlock(uint32_t stripe) {
  words_[stripe].store(0, std::memory_order_release);
}

}  // namespace softrdma
