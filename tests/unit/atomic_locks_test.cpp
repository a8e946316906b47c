// Host atomic locks: mutual exclusion between threads and processes, and a
// holder that died inside its critical section does not block anyone.
#include "host/atomic_locks.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "transport/atomics.h"

namespace softrdma {
namespace {

struct Shared {
  std::atomic<uint32_t> words[kAtomicLockStripes];
  uint64_t counter;
};

Shared* MapShared() {
  void* p =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<Shared*>(p);
}

TEST(AtomicLocks, StripesDependOnOwnerAndAddress) {
  EXPECT_LT(AtomicLocks::Stripe(3, 0x1000), kAtomicLockStripes);
  EXPECT_EQ(AtomicLocks::Stripe(3, 0x1000), AtomicLocks::Stripe(3, 0x1000));
  int differ = 0;
  for (uint64_t a = 0; a < 64 * 8; a += 8)
    differ += AtomicLocks::Stripe(1, a) != AtomicLocks::Stripe(1, a + 8);
  EXPECT_GT(differ, 56);  // neighbouring words rarely share a stripe
}

TEST(AtomicLocks, ProcessesAndThreadsAddExactly) {
  Shared* s = MapShared();
  ASSERT_NE(s, nullptr);
  constexpr int kIters = 20000;
  auto work = [s] {
    AtomicLocks locks(s->words);
    for (int i = 0; i < kIters; ++i) {
      AtomicLockGuard g(locks, AtomicLocks::Stripe(0, 64));
      uint64_t v = s->counter;  // deliberately non-atomic read-modify-write
      s->counter = v + 1;
    }
  };
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::thread t(work);
    work();
    t.join();
    _exit(0);
  }
  std::thread t(work);
  work();
  t.join();
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  EXPECT_EQ(s->counter, 4u * kIters);
  munmap(s, sizeof(Shared));
}

TEST(AtomicLocks, DeadHolderIsBroken) {
  Shared* s = MapShared();
  ASSERT_NE(s, nullptr);
  const uint32_t stripe = AtomicLocks::Stripe(1, 0x40);
  // A child takes the lock and dies holding it (SIGKILL-like: _exit
  // without unlocking); first as a zombie, then reaped.
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    AtomicLocks locks(s->words);
    locks.Lock(stripe);
    _exit(0);
  }
  while (s->words[stripe].load() == 0) usleep(100);
  usleep(20000);  // the child is a zombie now (not reaped yet)
  AtomicLocks locks(s->words);
  locks.Lock(stripe);  // must not hang
  EXPECT_EQ(s->words[stripe].load(), static_cast<uint32_t>(getpid()));
  locks.Unlock(stripe);
  int st = 0;
  waitpid(child, &st, 0);
  munmap(s, sizeof(Shared));
}

TEST(Atomics, CompareSwapAndFetchAddOnOwnMemory) {
  Shared* s = MapShared();
  ASSERT_NE(s, nullptr);
  AtomicLocks locks(s->words);
  alignas(8) uint64_t target = 5, original = 0;
  auto addr = reinterpret_cast<uint64_t>(&target);
  using transport::AtomicOp;
  EXPECT_EQ(ExecuteAtomic(locks, getpid(), 0, addr, AtomicOp{true, 4, 9}, &original),
            transport::AtomicResult::kOk);
  EXPECT_EQ(original, 5u);
  EXPECT_EQ(target, 5u);
  ExecuteAtomic(locks, getpid(), 0, addr, AtomicOp{true, 5, 9}, &original);
  EXPECT_EQ(target, 9u);
  ExecuteAtomic(locks, getpid(), 0, addr, AtomicOp{false, 3, 0}, &original);
  EXPECT_EQ(original, 9u);
  EXPECT_EQ(target, 12u);
  munmap(s, sizeof(Shared));
}

}  // namespace
}  // namespace softrdma
