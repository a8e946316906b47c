// A test-and-test-and-set spinlock for the short critical sections of the
// data path (queue indices, CQ entries). Critical sections never block or
// call into the kernel, so spinning is cheaper than a futex-based mutex; it
// yields after a while so that two threads pinned to one core still progress.
#pragma once

#include <atomic>

#include <sched.h>

namespace softrdma {

class SpinLock {
 public:
  void lock() {
    for (int spins = 0;; ++spins) {
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins > 64) {
          sched_yield();
          spins = 0;
        } else {
          __builtin_ia32_pause();
        }
      }
    }
  }
  bool try_lock() {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace softrdma
