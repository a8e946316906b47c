// Unit tests of the shm ring's handling of a producer that dies between
// reserve and commit (and of a slow one that must not be mistaken for dead).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "shm_ring_test_util.h"

namespace softrdma::shm {
namespace {

using namespace softrdma::shm::ringtest;
using namespace std::chrono_literals;

// once the process is gone (reaped, or a zombie) and delivers what follows.
// `parent_produced_first`: the parent has produced before it forks, so its
// pid is cached for claims (ring.cpp): the child must claim with its own.
void DeadProducerCase(bool reap_before_consuming, bool parent_produced_first = false) {
  ShmNameGuard name{UniqueShmName("dead")};
  ShmRegion region;
  ASSERT_TRUE(ShmRegion::Create(name.name, Ring::RegionBytes(64), &region).ok());
  Ring* ring = Ring::Format(region.data(), region.size(), 64);
  ASSERT_NE(ring, nullptr);
  if (parent_produced_first) {
    uint64_t x = 5;
    ASSERT_TRUE(ring->TryProduce(&x, 8, nullptr, 0));
    RecordView v;
    ASSERT_TRUE(ring->Peek(&v));
    ring->Release(v);
  }
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  ChildGuard child;
  child.pid = fork();
  ASSERT_GE(child.pid, 0);
  if (child.pid == 0) {
    Reservation r;
    char ok = ring->TryReserve(500, &r) ? 1 : 0;
    if (write(pipefd[1], &ok, 1) != 1) _exit(1);
    raise(SIGKILL);
    _exit(2);
  }
  close(pipefd[1]);
  char ok = 0;
  ASSERT_EQ(read(pipefd[0], &ok, 1), 1);
  close(pipefd[0]);
  ASSERT_EQ(ok, 1);
  EXPECT_EQ(ring->UsedSlots(), Ring::SlotsFor(500));
  if (reap_before_consuming) {
    EXPECT_EQ(child.Wait(), 128 + SIGKILL);
  } else {
    // Wait for the death without reaping: the child stays a zombie.
    siginfo_t si;
    ASSERT_EQ(waitid(P_PID, child.pid, &si, WEXITED | WNOWAIT), 0);
  }
  uint64_t x = 77;
  ASSERT_TRUE(ring->TryProduce(&x, 8, nullptr, 0));
  RecordView v;
  const auto t0 = Clock::now();
  EXPECT_FALSE(ring->Peek(&v));  // never skipped before the grace period
  ASSERT_TRUE(PeekWithin(ring, &v, 5000ms));
  EXPECT_GE(Clock::now() - t0, 90ms);
  uint64_t got = 0;
  v.CopyOut(0, &got, 8);
  EXPECT_EQ(got, 77u);
  ring->Release(v);
  EXPECT_EQ(ring->dead_records_skipped(), 1u);
  EXPECT_EQ(ring->UsedSlots(), 0u);
  // The ring keeps working across the skipped slots.
  for (uint64_t i = 0; i < 200; ++i) {
    ASSERT_TRUE(ring->TryProduce(&i, 8, nullptr, 0));
    ASSERT_TRUE(ring->Peek(&v));
    v.CopyOut(0, &got, 8);
    ASSERT_EQ(got, i);
    ring->Release(v);
  }
}

TEST(ShmRingDeadProducerTest, DeadProducerReapedIsSkipped) {
  DeadProducerCase(true);
}
TEST(ShmRingDeadProducerTest, DeadProducerZombieIsSkipped) {
  DeadProducerCase(false);
}
TEST(ShmRingDeadProducerTest, DeadForkedChildOfAProducerIsSkipped) {
  DeadProducerCase(true, /*parent_produced_first=*/true);
}

// A producer killed between reserve and commit with nobody reserving after
// it: its claim is only in the reserve word, so the record is invisible
// until a consumer calls PublishStalledClaim (the progress thread does,
// before it sleeps and once per timer tick). Then it is skipped as any dead
// producer's, and the ring goes on.
TEST(ShmRingDeadProducerTest, DeadLastProducerIsSkippedOncePublished) {
  ShmNameGuard name{UniqueShmName("deadlast")};
  ShmRegion region;
  ASSERT_TRUE(ShmRegion::Create(name.name, Ring::RegionBytes(64), &region).ok());
  Ring* ring = Ring::Format(region.data(), region.size(), 64);
  ASSERT_NE(ring, nullptr);
  ChildGuard child;
  child.pid = fork();
  ASSERT_GE(child.pid, 0);
  if (child.pid == 0) {
    Reservation r;
    if (!ring->TryReserve(200, &r)) _exit(1);
    raise(SIGKILL);
    _exit(2);
  }
  ASSERT_EQ(child.Wait(), 128 + SIGKILL);
  EXPECT_EQ(ring->UsedSlots(), Ring::SlotsFor(200));
  EXPECT_EQ(ring->Head(), Ring::HeadState::kEmpty);
  RecordView v;
  const auto until = Clock::now() + 2 * std::chrono::nanoseconds(Ring::kDeadProducerCheckNs);
  while (Clock::now() < until) {  // never skipped while unpublished
    ASSERT_FALSE(ring->Peek(&v));
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(ring->dead_records_skipped(), 0u);
  EXPECT_TRUE(ring->PublishStalledClaim());
  EXPECT_EQ(ring->Head(), Ring::HeadState::kPending);
  const auto deadline = Clock::now() + 5000ms;
  while (ring->dead_records_skipped() == 0 && Clock::now() < deadline) {
    EXPECT_FALSE(ring->Peek(&v));
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(ring->dead_records_skipped(), 1u);
  EXPECT_EQ(ring->UsedSlots(), 0u);
  EXPECT_EQ(ring->Head(), Ring::HeadState::kEmpty);
  for (uint64_t i = 0; i < 200; ++i) {
    ASSERT_TRUE(ring->TryProduce(&i, 8, nullptr, 0));
    ASSERT_TRUE(ring->Peek(&v));
    uint64_t got = ~0ull;
    v.CopyOut(0, &got, 8);
    ASSERT_EQ(got, i);
    ring->Release(v);
  }
}

TEST(ShmRingDeadProducerTest, SlowLiveProducerIsNeverSkipped) {
  LocalRing lr(64);
  Ring* ring = lr.ring;
  Reservation slow;
  ASSERT_TRUE(ring->TryReserve(8, &slow));
  uint64_t b = 2;
  ASSERT_TRUE(ring->TryProduce(&b, 8, nullptr, 0));
  RecordView v;
  const auto until = Clock::now() + 3 * std::chrono::nanoseconds(Ring::kDeadProducerCheckNs);
  while (Clock::now() < until) {
    ASSERT_FALSE(ring->Peek(&v));
    std::this_thread::sleep_for(1ms);
  }
  uint64_t a = 1;
  slow.Write(0, &a, 8);
  ring->Commit(slow);
  uint64_t got = 0;
  ASSERT_TRUE(ring->Peek(&v));
  v.CopyOut(0, &got, 8);
  EXPECT_EQ(got, 1u);
  ring->Release(v);
  ASSERT_TRUE(ring->Peek(&v));
  v.CopyOut(0, &got, 8);
  EXPECT_EQ(got, 2u);
  ring->Release(v);
  EXPECT_EQ(ring->dead_records_skipped(), 0u);
}

}  // namespace
}  // namespace softrdma::shm
