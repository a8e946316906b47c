// The progress thread's announced sleep and an application that polls
// again: producers must not pay a futex call per commit until the thread,
// woken on a CPU the application keeps busy, has run again (ring layout 5:
// one wake-up per announcement, docs/design.md "Progress").
#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine_device_test.h"
#include "engine_test_support.h"
#include "transport/engine.h"

namespace softrdma {
namespace {

using namespace verbs;

// The tid of the thread named `name` in this process, or 0.
pid_t ThreadNamed(const std::string& name) {
  pid_t found = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
      std::string n;
      if (std::getline(comm, n) && n == name) found = static_cast<pid_t>(atoi(e->d_name));
    }
    closedir(d);
  }
  return found;
}

bool PollOne(ibv_cq* cq) {
  ibv_wc wc{};
  for (int spins = 0; spins < 100'000'000; ++spins) {
    if (int n = PollCq(cq, 1, &wc); n != 0) return n == 1 && wc.status == IBV_WC_SUCCESS;
  }
  return false;
}

class ProgressThreadSleep : public testing::EngineDeviceTest {};

TEST_F(ProgressThreadSleep, AnApplicationThatPollsAgainStopsTheWakeCallsAtOnce) {
  std::vector<char> buf(4096);
  ibv_mr* mr = RegMr(pd_, buf.data(), buf.size(), reinterpret_cast<uintptr_t>(buf.data()),
                     IBV_ACCESS_LOCAL_WRITE);
  ibv_cq* scq = CreateCq(ctx_, 256, nullptr, nullptr, 0);
  ibv_cq* rcq = CreateCq(ctx_, 256, nullptr, nullptr, 0);
  ASSERT_TRUE(mr && scq && rcq);
  ibv_qp* a = MakeRcQp(scq, rcq, 256);
  ibv_qp* b = MakeRcQp(scq, rcq, 256);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(testing::ConnectRcOverGid(ctx_, gid_, a, b->qp_num, {}), 0);
  ASSERT_EQ(testing::ConnectRcOverGid(ctx_, gid_, b, a->qp_num, {}), 0);
  constexpr int kSends = 200;
  ibv_sge rsge{reinterpret_cast<uintptr_t>(buf.data() + 2048), 64, mr->lkey};
  for (int i = 0; i < kSends; ++i) {
    ibv_recv_wr rwr{};
    rwr.sg_list = &rsge;
    rwr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(PostRecv(b, &rwr, &bad), 0);
  }

  // The thread and this one on one CPU: a wake-up of the thread then waits
  // for this thread's time slice (milliseconds), as on a host whose CPUs all
  // run polling applications.
  pid_t prog = 0;  // the thread names itself when it starts
  for (int tries = 0; tries < 200 && !prog; ++tries) {
    prog = ThreadNamed("softrdma-prog");
    if (!prog) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_NE(prog, 0) << "no progress thread named softrdma-prog";
  cpu_set_t all, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  ASSERT_EQ(sched_setaffinity(prog, sizeof one, &one), 0);
  // Nothing polled, nothing outstanding: the thread sleeps announced.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));

  // Each SEND (and its ACK) is a commit into this process's ring. The first
  // one wakes the thread; the others find no announcement left.
  const uint32_t wakes_before = engine_->inbound_ring().PrepareToWait();
  ibv_sge ssge{reinterpret_cast<uintptr_t>(buf.data()), 8, mr->lkey};
  bool ok = true;
  for (int i = 0; i < kSends && ok; ++i)
    ok = testing::PostSignaledSend(a, &ssge) == 0 && PollOne(rcq) && PollOne(scq);
  const uint32_t wakes = engine_->inbound_ring().PrepareToWait() - wakes_before;
  sched_setaffinity(prog, sizeof all, &all);
  sched_setaffinity(0, sizeof all, &all);
  EXPECT_TRUE(ok);
  // One per announced sleep of the thread (it may sleep announced again
  // before it sees the polls). Under ring layout 4 every commit until the
  // thread had run called futex: 401 here (200 SENDs and 200 ACKs).
  EXPECT_LE(wakes, 8u) << "Ring::Wake calls during " << kSends << " SENDs";

  DestroyQp(a);
  DestroyQp(b);
  DestroyCq(scq);
  DestroyCq(rcq);
  DeregMr(mr);
}

// Voluntary context switches of thread `tid` of this process so far.
long VoluntarySwitches(pid_t tid) {
  std::ifstream status("/proc/self/task/" + std::to_string(tid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0) return atol(line.c_str() + 24);
  return -1;
}

// A producer stopped between its reservation and its commit (a peer
// SIGSTOPped or in a debugger at that moment): the record stays pending at
// the head, and the idle progress thread looks again now and then, so that
// Peek notices if that producer died. It must not wake every
// kUncoveredSleepNs while the record waits.
TEST_F(ProgressThreadSleep, AStalledProducerDoesNotKeepTheThreadAwake) {
  pid_t prog = 0;
  for (int tries = 0; tries < 200 && !prog; ++tries) {
    prog = ThreadNamed("softrdma-prog");
    if (!prog) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_NE(prog, 0);
  std::shared_ptr<PeerLink> self = engine_->Peer(engine_->me());
  ASSERT_TRUE(self && self->ring);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the thread asleep
  shm::Reservation r;
  ASSERT_TRUE(self->ring->TryReserve(64, &r));
  self->ring->Wake(shm::Ring::kWakeThread);  // it goes to sleep again, the record pending
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const long before = VoluntarySwitches(prog);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const long wakes = VoluntarySwitches(prog) - before;
  self->ring->Cancel(r);
  EXPECT_LE(wakes, 30) << "progress thread wake-ups in 300 ms with a record pending";
}

}  // namespace
}  // namespace softrdma
