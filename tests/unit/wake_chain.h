// A reference for tests that time how long the progress thread takes to act
// on something while the machine may be loaded: the same chain of wake-ups,
// made by two threads of the test's own, so that a test can bound the
// engine's time by a multiple of this one measured at the same moments
// (wall time alone is stretched by load whatever the engine does).
//
// The chain mirrors a datagram left for the watching progress thread
// (Engine::WatchRocePort): a thread blocked in poll() on an fd is woken by
// a write to it (the port's watcher), wakes a second thread (the progress
// thread), which sleeps a grace and then stores to memory that the caller
// spins on (the WRITE landing).
#pragma once

#include <poll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "util/clock.h"

namespace softrdma::testing {

class WakeChain {
 public:
  explicit WakeChain(uint64_t grace_ns)
      : grace_ns_(grace_ns),
        to_watcher_(eventfd(0, 0)),
        to_worker_(eventfd(0, 0)),
        watcher_([this] { Watch(); }),
        worker_([this] { Work(); }) {}
  ~WakeChain() {
    quit_.store(true, std::memory_order_relaxed);
    Signal(to_watcher_);
    Signal(to_worker_);
    watcher_.join();
    worker_.join();
    close(to_watcher_);
    close(to_worker_);
  }
  WakeChain(const WakeChain&) = delete;
  WakeChain& operator=(const WakeChain&) = delete;

  bool ok() const { return to_watcher_ >= 0 && to_worker_ >= 0; }

  // Starts the chain; returns the round that Done() then waits for.
  uint64_t Start() {
    const uint64_t round = landed_.load(std::memory_order_relaxed) + 1;
    Signal(to_watcher_);
    return round;
  }
  // The chain started for `round` reached its end (the store).
  bool Done(uint64_t round) const { return landed_.load(std::memory_order_acquire) >= round; }

 private:
  static void Signal(int fd) {
    const uint64_t one = 1;
    if (write(fd, &one, sizeof one) < 0) {
      // Only on overflow, which one wake-up at a time cannot reach.
    }
  }
  static void Consume(int fd) {
    uint64_t count = 0;
    if (read(fd, &count, sizeof count) < 0) {
      // EINTR: the next poll() finds it readable again.
    }
  }
  void Watch() {
    if (!ok()) return;
    while (!quit_.load(std::memory_order_relaxed)) {
      pollfd fd{to_watcher_, POLLIN, 0};
      if (poll(&fd, 1, -1) <= 0) continue;
      Consume(to_watcher_);
      Signal(to_worker_);
    }
  }
  void Work() {
    if (!ok()) return;
    while (!quit_.load(std::memory_order_relaxed)) {
      Consume(to_worker_);
      if (quit_.load(std::memory_order_relaxed)) break;
      const timespec grace{0, static_cast<long>(grace_ns_)};
      nanosleep(&grace, nullptr);
      landed_.fetch_add(1, std::memory_order_release);
    }
  }

  const uint64_t grace_ns_;
  const int to_watcher_;
  const int to_worker_;
  std::atomic<bool> quit_{false};
  std::atomic<uint64_t> landed_{0};
  std::thread watcher_;
  std::thread worker_;
};

}  // namespace softrdma::testing
