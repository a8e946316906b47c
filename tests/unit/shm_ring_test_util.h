// Helpers shared by the shm ring and ShmRegion unit tests.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "wire/shm/ring.h"
#include "wire/shm/shm_region.h"

namespace softrdma::shm::ringtest {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Deterministic payload bytes, different for every (stream, seq, offset).
inline uint8_t PatternByte(uint64_t stream, uint64_t seq, uint32_t i) {
  uint64_t x = stream * 0x9e3779b97f4a7c15ull ^ (seq * 0xbf58476d1ce4e5b9ull) ^ (i * 0x94d049bbull);
  x ^= x >> 29;
  return static_cast<uint8_t>(x ^ (x >> 8));
}

inline std::vector<uint8_t> Pattern(uint64_t stream, uint64_t seq, uint32_t len) {
  std::vector<uint8_t> v(len);
  for (uint32_t i = 0; i < len; ++i) v[i] = PatternByte(stream, seq, i);
  return v;
}

inline uint64_t Fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

inline std::vector<uint8_t> ReadAll(const RecordView& v) {
  std::vector<uint8_t> out(v.size());
  EXPECT_TRUE(v.CopyOut(0, out.data(), v.size()));
  return out;
}

// A ring in ordinary process memory, for single-process tests.
struct LocalRing {
  explicit LocalRing(uint32_t slots) {
    bytes = Ring::RegionBytes(slots);
    mem.reset(static_cast<std::byte*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
    std::memset(mem.get(), 0xa5, bytes);  // Format must not rely on zeroed memory
    ring = Ring::Format(mem.get(), bytes, slots);
  }
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> mem;
  size_t bytes = 0;
  Ring* ring = nullptr;
};

inline std::string UniqueShmName(const char* tag) {
  static std::atomic<int> counter{0};
  return "/softrdma-test-" + std::to_string(getpid()) + "-" + tag + "-" +
         std::to_string(counter.fetch_add(1));
}

// Unlinks the name at scope exit, so a failing test leaves /dev/shm clean.
struct ShmNameGuard {
  std::string name;
  ~ShmNameGuard() { (void)ShmRegion::Unlink(name); }
};

// SIGKILLs and reaps a child the test did not reap itself (a failed ASSERT
// returns early); children never outlive the test.
struct ChildGuard {
  pid_t pid = -1;
  ~ChildGuard() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  int Wait() {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1;
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
};

// The wait of a thread that retries until another thread of the test lets it
// go on (space in a full ring, a record in an empty one): a few hundred
// pauses, then a yield. A yield at every retry handed the CPU to whatever
// else was runnable for a whole time slice (~0.75 ms) when other processes
// were busy: at nice 19 beside two busy loops one run of
// SmallRecordsFromManyThreadsOnASmallRing took 193,626 such switches and
// 80 s of wall time for 0.37 s of CPU (0.12 s on an idle machine), and at
// load 19 it passed its 100 s deadline. The partner usually runs on the
// other CPU and lets us go within microseconds; the yield remains for the
// partner preempted on ours.
class RetryPause {
 public:
  void operator()() {
    if (++retries_ % kPausesPerYield != 0) {
      __builtin_ia32_pause();
    } else {
      std::this_thread::yield();
    }
  }

 private:
  static constexpr uint32_t kPausesPerYield = 256;
  uint32_t retries_ = 0;
};

inline bool PeekWithin(Ring* ring, RecordView* v, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!ring->Peek(v)) {
    if (Clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace softrdma::shm::ringtest
