// The shm wire's retransmit timer and our own inbound ring: an ACK that
// waits unread there (its reader descheduled, or holding the ring) answered
// the timer, so its expiry is not a retry (Engine::CheckTimers). A child
// process is the responder, so that its ring is not ours.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "core/verbs.h"
#include "engine_test_support.h"
#include "transport/engine.h"
#include "util/clock.h"
#include "wire/shm/ring.h"

namespace softrdma::testing {
namespace {

using namespace softrdma::verbs;

struct Side {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  char buf[64] = {};
  bool Open() {
    ctx = OpenFirstDevice();
    if (!ctx) return false;
    pd = AllocPd(ctx);
    cq = pd ? CreateCq(ctx, 8, nullptr, nullptr, 0) : nullptr;
    if (!cq) return false;
    ibv_qp_init_attr attr{};
    attr.send_cq = cq;
    attr.recv_cq = cq;
    attr.qp_type = IBV_QPT_RC;
    attr.cap = {4, 4, 1, 1, 0};
    qp = CreateQp(pd, &attr);
    mr = qp ? RegMr(pd, buf, sizeof buf, reinterpret_cast<uintptr_t>(buf), IBV_ACCESS_LOCAL_WRITE)
            : nullptr;
    return mr != nullptr;
  }
  // One completion within `ms`; its status, or -1.
  int PollOne(int ms) {
    const uint64_t give_up = NowNs() + uint64_t(ms) * 1'000'000;
    ibv_wc wc{};
    while (NowNs() < give_up) {
      if (PollCq(cq, 1, &wc) == 1) return wc.status;
      usleep(100);
    }
    return -1;
  }
  void Close() {
    if (qp) DestroyQp(qp);
    if (mr) DeregMr(mr);
    if (cq) DestroyCq(cq);
    if (pd) DeallocPd(pd);
    if (ctx) CloseDevice(ctx);
  }
};

// The responder: receives one SEND while its application sleeps in read()
// (its progress thread answers), then exits 0 when that receive completed.
[[noreturn]] void Responder(int to_parent, int from_parent) {
  Side s;
  int code = 0;
  uint32_t peer = 0;
  ibv_sge sge{reinterpret_cast<uintptr_t>(s.buf), sizeof s.buf, 0};
  ibv_recv_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  char c = 'r';
  if (!s.Open()) exit(10);
  sge.lkey = s.mr->lkey;
  if (write(to_parent, &s.qp->qp_num, 4) != 4 || read(from_parent, &peer, 4) != 4) exit(11);
  if (ConnectRcOverGid(s.ctx, LoopbackGid(s.ctx), s.qp, peer, RcConnectParams{}) != 0) exit(12);
  if (PostRecv(s.qp, &wr, &bad) != 0) exit(15);
  if (write(to_parent, &c, 1) != 1 || read(from_parent, &c, 1) != 1) exit(13);
  if (s.PollOne(2000) != IBV_WC_SUCCESS) code = 14;
  s.Close();
  exit(code);  // exit(), not exit(): the library removes its segment at exit
}

// The requester: its SEND's ACK waits unread in its own ring (it holds the
// ring, as an application preempted in its drain would) while its timers are
// looked at as by a progress thread that woke 10 s late. Exit codes: 0 the
// SEND completed successfully; 30 + status when it completed otherwise.
[[noreturn]] void Requester(int from_responder, int to_responder) {
  Side s;
  uint32_t peer = 0;
  char c = 0;
  if (!s.Open()) exit(20);
  if (read(from_responder, &peer, 4) != 4 || write(to_responder, &s.qp->qp_num, 4) != 4) exit(21);
  // timeout 1 (its 8 us rounded up to 1 ms) and no retry: the first expiry
  // counted fails the SEND with RETRY_EXC_ERR.
  RcConnectParams p;
  p.timeout = 1;
  p.retry_cnt = 0;
  if (ConnectRcOverGid(s.ctx, LoopbackGid(s.ctx), s.qp, peer, p) != 0) exit(22);
  if (read(from_responder, &c, 1) != 1) exit(23);
  shm::Ring& ring = const_cast<shm::Ring&>(Engine::Current()->inbound_ring());
  const uint64_t give_up = NowNs() + 5'000'000'000ull;
  while (!ring.TryLockConsumer()) {
    if (NowNs() > give_up) exit(24);
    usleep(100);
  }
  ibv_sge sge{reinterpret_cast<uintptr_t>(s.buf), 8, s.mr->lkey};
  if (PostSignaledSend(s.qp, &sge, 7) != 0) exit(25);
  const uint64_t ack_by = NowNs() + 2'000'000'000ull;
  while (ring.Head() != shm::Ring::HeadState::kReady && NowNs() < ack_by) usleep(100);
  if (ring.Head() != shm::Ring::HeadState::kReady) exit(26);  // no ACK came
  // The timers looked at now (the first look after a send from an idle
  // queue starts its clock), then 10 s later, the ACK still unread.
  const uint64_t now = NowNs();
  Engine::Current()->CheckTimersForTesting(now);
  Engine::Current()->CheckTimersForTesting(now + 10'000'000'000ull);
  ring.UnlockConsumer();
  const int status = s.PollOne(2000);
  if (write(to_responder, "d", 1) != 1) exit(27);
  s.Close();
  exit(status == IBV_WC_SUCCESS ? 0 : 30 + status);
}

std::string StatusText(int status) {
  return WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                           : "signal " + std::to_string(WTERMSIG(status));
}

// Both sides are children (this process keeps no engine: the data path is
// set for them only), on the two-copy path, where a SEND is answered by an
// ACK record in the requester's ring.
// They end with exit(), not _exit(), so that the library removes each one's
// process segment.
TEST(OwnRingAckTimer, AnAckUnreadInOurOwnRingUsesNoRetry) {
  if (Engine::Current() != nullptr)
    GTEST_SKIP() << "needs a process without an engine yet (ctest runs each test alone)";
  UseOwnNamespace();
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  pid_t pids[2];
  for (int role = 0; role < 2; ++role) {
    pids[role] = fork();
    ASSERT_GE(pids[role], 0);
    if (pids[role] == 0) {
      setenv("SOFTRDMA_CMA", "0", 1);
      setenv("SOFTRDMA_MAP_MR", "0", 1);
      if (role == 0) {
        close(up[0]);
        close(down[1]);
        Responder(up[1], down[0]);
      }
      close(up[1]);
      close(down[0]);
      Requester(up[0], down[1]);
    }
  }
  for (int fd : {up[0], up[1], down[0], down[1]}) close(fd);
  int status[2] = {0, 0};
  for (int role = 0; role < 2; ++role) ASSERT_EQ(waitpid(pids[role], &status[role], 0), pids[role]);
  EXPECT_EQ(StatusText(status[1]), "exit 0")
      << "requester (42 = 30 + IBV_WC_RETRY_EXC_ERR: the unread ACK counted as a retry)";
  EXPECT_EQ(StatusText(status[0]), "exit 0") << "responder";
  RemoveOwnRegistry();
}

}  // namespace
}  // namespace softrdma::testing
