// Deferred and piggybacked ACKs (transport/responder.cpp, "Deferred ACKs"),
// seen from inside: two RC QPs of this process talk through its own inbound
// ring, whose record count shows which ACK records really went out.
#include <arpa/inet.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../verbs/process_pipes.h"
#include "core/qp.h"
#include "core/verbs.h"
#include "engine_device_test.h"
#include "engine_test_support.h"
#include "host/registry.h"
#include "transport/engine.h"
#include "transport/messages.h"
#include "util/clock.h"
#include "util/verbs_strings.h"
#include "wire/shm/ring.h"
#include "wire/shm/shm_region.h"

namespace softrdma {
namespace {

using namespace softrdma::verbs;
using testing::LoopbackGid;

// INIT -> RTR -> RTS towards `dest` over the loopback GID.
int ToRtsOn(ibv_context* ctx, int gid, ibv_qp* qp, uint32_t dest, uint8_t rnr_retry,
            uint8_t min_rnr_timer, uint8_t timeout, uint8_t retry_cnt) {
  testing::RcConnectParams p;
  p.min_rnr_timer = min_rnr_timer;
  p.timeout = timeout;
  p.retry_cnt = retry_cnt;
  p.rnr_retry = rnr_retry;
  return testing::ConnectRcOverGid(ctx, gid, qp, dest, p);
}

// Exit codes of RequesterChild.
constexpr int kChildSendOk = 0;
constexpr int kChildSetupFailed = 10;
constexpr int kChildNoCompletion = 11;
constexpr int kChildSendFailed = 12;

// The requester of the two-process tests, in a forked child: an RC QP
// connected to the parent's QP (QPNs exchanged over the pipes) sends one
// message when the parent says so, then reports through its exit code what
// became of it. timeout 17 (~0.5 s), one retry: within the parent's test
// window the ACK alone can complete the send, not a retransmission.
[[noreturn]] void RequesterChild(int up, int down) {
  ibv_context* ctx = testing::OpenFirstDevice();
  if (!ctx) _exit(kChildSetupFailed);
  const int gid = LoopbackGid(ctx);
  ibv_pd* pd = ctx ? AllocPd(ctx) : nullptr;
  static char buf[64];
  ibv_mr* mr =
      pd ? RegMr(pd, buf, sizeof buf, reinterpret_cast<uintptr_t>(buf), IBV_ACCESS_LOCAL_WRITE)
         : nullptr;
  ibv_cq* cq = ctx ? CreateCq(ctx, 16, nullptr, nullptr, 0) : nullptr;
  if (gid < 0 || !mr || !cq) exit(kChildSetupFailed);
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  ibv_qp* qp = CreateQp(pd, &qa);
  uint32_t mine = qp ? qp->qp_num : 0, peer = 0;
  char go = 0;
  if (!qp || !test::WriteAll(up, &mine, 4) || !test::ReadAll(down, &peer, 4) ||
      ToRtsOn(ctx, gid, qp, peer, 7, 1, /*timeout=*/17, /*retry_cnt=*/1) != 0 ||
      !test::ReadAll(down, &go, 1))
    exit(kChildSetupFailed);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), 8, mr->lkey};
  if (testing::PostSignaledSend(qp, &sge) != 0 || !test::WriteAll(up, "s", 1))
    exit(kChildSetupFailed);
  const uint64_t give_up = NowNs() + 10'000'000'000ull;
  ibv_wc wc{};
  while (PollCq(cq, 1, &wc) == 0) {
    if (NowNs() > give_up) exit(kChildNoCompletion);
    usleep(100);
  }
  if (wc.status != IBV_WC_SUCCESS) {
    fprintf(stderr, "child: send completed with %s\n", wc_status_str(wc.status));
    exit(kChildSendFailed);
  }
  exit(kChildSendOk);  // exit, not _exit: the engine leaves no segment behind
}

// A forked child, killed and reaped if the test ends before it exits.
struct ChildGuard {
  test::Child c;
  ~ChildGuard() {
    if (c.pid > 0) {
      kill(c.pid, SIGKILL);
      waitpid(c.pid, nullptr, 0);
    }
    for (int fd : {c.from_child, c.to_child})
      if (fd >= 0) close(fd);
  }
  // Its exit code; -1 if it did not exit within `timeout_ms`.
  int WaitExit(int timeout_ms) {
    for (int waited = 0;; ++waited) {
      int st = 0;
      const pid_t r = waitpid(c.pid, &st, WNOHANG);
      if (r == c.pid) {
        c.pid = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      if (r < 0 || waited >= timeout_ms) return -1;
      usleep(1000);
    }
  }
};

// Records reserved in a peer's ring and not committed yet: its consumer
// stops at the first one, and while they fill the ring nothing else fits.
// Committed (as records the peer drops) when released or destroyed, so the
// peer's ring never stays blocked after a test.
struct HeldRecords {
  shm::Ring* ring = nullptr;
  std::vector<shm::Reservation> held;

  // Reserves until not even a header-only record (an ACK) fits.
  void Fill(shm::Ring* r) {
    ring = r;
    uint32_t bytes = ring->MaxPayload();
    for (;;) {
      shm::Reservation res;
      if (ring->TryReserve(bytes, &res)) {
        held.push_back(res);
      } else if (bytes == sizeof(wire::RecordHeader)) {
        break;
      } else {
        bytes = std::max<uint32_t>(bytes / 2, sizeof(wire::RecordHeader));
      }
    }
  }
  void Release() {
    // An ACK record to QPN 0, which no QP has: dropped by the consumer.
    wire::RecordHeader h{};
    h.type = wire::RecordType::kAck;
    for (const shm::Reservation& res : held) {
      res.Write(0, &h, sizeof h);
      ring->Commit(res);
    }
    held.clear();
  }
  ~HeldRecords() { Release(); }
};

class DeferredAckTest : public testing::EngineDeviceTest {
 protected:
  void SetUp() override {
    EngineDeviceTest::SetUp();
    if (HasFatalFailure()) return;
    buf_.assign(4096, 0);
    mr_ = RegMr(pd_, buf_.data(), buf_.size(), reinterpret_cast<uintptr_t>(buf_.data()),
                IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr_, nullptr);
    for (ibv_cq** cq : {&a_scq_, &a_rcq_, &b_scq_, &b_rcq_}) {
      *cq = CreateCq(ctx_, 64, nullptr, nullptr, 0);
      ASSERT_NE(*cq, nullptr);
    }
  }
  void TearDown() override {
    for (ibv_qp* qp : {a_, b_})
      if (qp) DestroyQp(qp);
    for (ibv_cq* cq : {a_scq_, a_rcq_, b_scq_, b_rcq_})
      if (cq) DestroyCq(cq);
    if (mr_) DeregMr(mr_);
    EngineDeviceTest::TearDown();
  }

  // A (requester) and B (responder) connected to each other.
  void Connect(uint8_t rnr_retry, uint8_t min_rnr_timer, uint8_t timeout = 20,
               uint8_t retry_cnt = 7) {
    a_ = MakeRcQp(a_scq_, a_rcq_);
    b_ = MakeRcQp(b_scq_, b_rcq_);
    ASSERT_TRUE(a_ && b_);
    ASSERT_EQ(ToRts(a_, b_->qp_num, rnr_retry, min_rnr_timer, timeout, retry_cnt), 0);
    ASSERT_EQ(ToRts(b_, a_->qp_num, rnr_retry, min_rnr_timer, timeout, retry_cnt), 0);
  }
  // timeout 20 (~4 s) by default: no retransmission can stand in for an ACK.
  int ToRts(ibv_qp* qp, uint32_t dest, uint8_t rnr_retry, uint8_t min_rnr_timer, uint8_t timeout,
            uint8_t retry_cnt) {
    return ToRtsOn(ctx_, gid_, qp, dest, rnr_retry, min_rnr_timer, timeout, retry_cnt);
  }
  void Recv(ibv_qp* qp) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf_.data() + 2048), 64, mr_->lkey};
    ibv_recv_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(PostRecv(qp, &wr, &bad), 0);
  }
  void Send(ibv_qp* qp, int count = 1) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf_.data()), 8, mr_->lkey};
    std::vector<ibv_send_wr> wrs(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
      wrs[i].wr_id = static_cast<uint64_t>(i);
      wrs[i].sg_list = &sge;
      wrs[i].num_sge = 1;
      wrs[i].opcode = IBV_WR_SEND;
      wrs[i].send_flags = IBV_SEND_SIGNALED;
      wrs[i].next = i + 1 < count ? &wrs[i + 1] : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(PostSend(qp, wrs.data(), &bad), 0);
  }
  // Polls until one completion arrives (or two seconds passed: by the
  // clock, as usleep(1) sleeps for tens of microseconds).
  ibv_wc Wait(ibv_cq* cq) {
    ibv_wc wc{};
    wc.status = IBV_WC_GENERAL_ERR;
    const uint64_t give_up = NowNs() + 2'000'000'000ull;
    for (int i = 0; NowNs() < give_up; ++i) {
      if (PollCq(cq, 1, &wc) == 1) return wc;
      if (i > 1000) usleep(1);
    }
    ADD_FAILURE() << "no completion";
    return wc;
  }
  // Every record these tests receive is small (a SEND of 8 bytes, an ACK):
  // TryProduce gives each the same number of slots.
  uint64_t RecordsReceived() const {
    return engine_->inbound_ring().ReservedSlots() / shm::Ring::SlotsFor(8);
  }
  // Our inbound ring's consumer lock, taken as a drain takes it: while the
  // test holds it, no record in the ring is executed.
  shm::Ring& OwnRing() { return const_cast<shm::Ring&>(engine_->inbound_ring()); }
  void LockOwnRing() {
    const uint64_t give_up = NowNs() + 5'000'000'000ull;
    while (!OwnRing().TryLockConsumer()) {
      ASSERT_LT(NowNs(), give_up) << "the ring's consumer lock stays taken";
      sched_yield();
    }
  }

  // B (here) executes a SEND from a requester in a child process while the
  // child's ring is full (*held), so B owes it an ACK that cannot go out.
  void OweAckToChild(ChildGuard* child, HeldRecords* held) {
#if defined(__SANITIZE_THREAD__)
    // The child opens the device, which starts the progress thread, and
    // ThreadSanitizer stops any process that starts threads after a fork of
    // a multi-threaded one (README, "Sanitizers").
    GTEST_SKIP() << "needs a forked child that starts threads: not under ThreadSanitizer";
#endif
    child->c = test::ForkChild([](int up, int down) { RequesterChild(up, down); });
    ASSERT_GT(child->c.pid, 0);
    b_ = MakeRcQp(b_scq_, b_rcq_);
    ASSERT_NE(b_, nullptr);
    uint32_t child_qpn = 0;
    ASSERT_TRUE(test::ReadAll(child->c.from_child, &child_qpn, 4));
    ASSERT_TRUE(test::WriteAll(child->c.to_child, &b_->qp_num, 4));
    ASSERT_EQ(ToRts(b_, child_qpn, 7, 1, 17, 1), 0);
    Recv(b_);
    // The SEND must wait in our ring until the child's ring is full, or its
    // ACK would go out at once.
    ASSERT_NO_FATAL_FAILURE(LockOwnRing());
    char sent = 0;
    bool ok =
        test::WriteAll(child->c.to_child, "g", 1) && test::ReadAll(child->c.from_child, &sent, 1);
    std::shared_ptr<PeerLink> link = ok ? engine_->ResolveQpn(child_qpn) : nullptr;
    if (link) held->Fill(link->ring);
    OwnRing().UnlockConsumer();
    ASSERT_TRUE(ok) << "the child did not send";
    ASSERT_NE(link, nullptr);
    ASSERT_FALSE(held->held.empty());
    ASSERT_EQ(Wait(b_rcq_).status, IBV_WC_SUCCESS);  // executed: B owes the ACK
  }

  std::vector<uint8_t> buf_;
  ibv_mr* mr_ = nullptr;
  ibv_cq *a_scq_ = nullptr, *a_rcq_ = nullptr, *b_scq_ = nullptr, *b_rcq_ = nullptr;
  ibv_qp *a_ = nullptr, *b_ = nullptr;
};

// ib_send_lat's pattern: each side waits for its send's completion, which
// the other side's next message carries. Every message here is one record,
// and so is an ACK: without piggybacking a round trip costs 4.
TEST_F(DeferredAckTest, ReplyCarriesTheAck) {
  Connect(7, 1);
  Recv(a_);
  Recv(b_);
  constexpr int kRounds = 1000;
  // kRounds round trips; *records = the records our ring took meanwhile.
  auto batch = [&](uint64_t* records) {
    const uint64_t before = RecordsReceived();
    for (int i = 0; i < kRounds; ++i) {
      Send(a_);
      if (i > 0) {
        ASSERT_EQ(Wait(b_scq_).status, IBV_WC_SUCCESS);
      }
      ASSERT_EQ(Wait(b_rcq_).status, IBV_WC_SUCCESS);
      Recv(b_);
      Send(b_);
      ASSERT_EQ(Wait(a_scq_).status, IBV_WC_SUCCESS);
      ASSERT_EQ(Wait(a_rcq_).status, IBV_WC_SUCCESS);
      Recv(a_);
    }
    ASSERT_EQ(Wait(b_scq_).status, IBV_WC_SUCCESS);
    *records = RecordsReceived() - before;
  };
  // 2 messages per round; the progress thread may flush an ACK now and then
  // (e.g. while it has not yet noticed that we poll). It also drains, and
  // then ACKs at once, whenever this thread is preempted between a send and
  // its poll: on a loaded machine (ctest -j2 beside busy-polling tests) a
  // batch can see hundreds of those, several batches in a row. And a drain
  // defers only while the thread runs or watches: asleep when a batch
  // starts, the thread must get a CPU to start watching, and at nice 19
  // under load 8 it got none during ten batches (each a few ms): 4000
  // records in every one. So batches go on for up to 10 s (at least ten),
  // and one under the bound passes; without piggybacking every batch takes
  // 4 records per round, so no number of attempts lets that pass.
  uint64_t records = 0;
  int attempts = 0;
  const uint64_t give_up = NowNs() + 10'000'000'000ull;
  for (; attempts < 10 || NowNs() < give_up; ++attempts) {
    ASSERT_NO_FATAL_FAILURE(batch(&records));
    ASSERT_GE(records, 2u * kRounds);
    if (records <= 2u * kRounds + kRounds / 4) break;
  }
  EXPECT_LE(records, 2u * kRounds + kRounds / 4)
      << "ACKs were not carried by the replies (" << attempts << " batches)";
}

// The responder never answers: the ACK it held back still goes out (here at
// the requester's next empty poll) and completes the send long before a
// retransmission could.
TEST_F(DeferredAckTest, AckGoesOutWithoutReply) {
  Connect(7, 1);
  Recv(b_);
  const uint64_t before = RecordsReceived();
  Send(a_);
  ASSERT_EQ(Wait(b_rcq_).status, IBV_WC_SUCCESS);
  const uint64_t t0 = NowNs();
  ASSERT_EQ(Wait(a_scq_).status, IBV_WC_SUCCESS);
  EXPECT_LT(NowNs() - t0, 1000000000u);
  EXPECT_EQ(RecordsReceived() - before, 2u);  // the SEND and one ACK
  EXPECT_FALSE(Qp::From(b_)->ack_pending);
}

// An RNR NAK must not overtake the ACK of the message before it: the
// requester's RNR budget is renewed by ACKs, so an ACK arriving after the
// NAK would buy it one more retry. rnr_retry = 1: SEND 1 lands, SEND 2 finds
// no receive WQE, is NAKed, retried once, NAKed again and fails.
TEST_F(DeferredAckTest, RnrNakFollowsTheAckOfEarlierMessages) {
  Connect(1, 1);  // one RNR retry, 10 us RNR timer
  Recv(b_);
  const uint64_t before = RecordsReceived();
  Send(a_, 2);
  ibv_wc first = Wait(a_scq_);
  ibv_wc second = Wait(a_scq_);
  EXPECT_EQ(first.wr_id, 0u);
  EXPECT_EQ(first.status, IBV_WC_SUCCESS) << wc_status_str(first.status);
  EXPECT_EQ(second.wr_id, 1u);
  EXPECT_EQ(second.status, IBV_WC_RNR_RETRY_EXC_ERR) << wc_status_str(second.status);
  ASSERT_EQ(Wait(b_rcq_).status, IBV_WC_SUCCESS);
  // SEND 1, SEND 2, ACK 1, RNR NAK 2, SEND 2 again, RNR NAK 2.
  EXPECT_EQ(RecordsReceived() - before, 6u);
}

// ACKs and first transmissions restart the retransmit timer without a
// clock read on the data path (Qp::progress_seen): the timer must still
// count from the send. timeout 14 (67 ms) and one retry against a responder
// that does not answer (ERR): RETRY_EXC_ERR after two timeouts, not at the
// timer's first look. Both for a QP's very first send and for a send after
// a long idle time (the last ACK long past).
TEST_F(DeferredAckTest, RetransmitTimerCountsFromTheSend) {
  Connect(7, 1, /*timeout=*/14, /*retry_cnt=*/1);
  ibv_qp_attr err{};
  err.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ModifyQp(b_, &err, IBV_QP_STATE), 0);
  uint64_t t0 = NowNs();
  Send(a_);
  ibv_wc wc = Wait(a_scq_);
  uint64_t elapsed_ms = (NowNs() - t0) / 1000000;
  EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR) << wc_status_str(wc.status);
  EXPECT_GE(elapsed_ms, 130u) << "first send: the timer did not start with it";
  EXPECT_LT(elapsed_ms, 1500u);
}

TEST_F(DeferredAckTest, RetransmitTimerCountsFromTheSendAfterIdling) {
  Connect(7, 1, /*timeout=*/14, /*retry_cnt=*/1);
  Recv(b_);
  Send(a_);
  ASSERT_EQ(Wait(a_scq_).status, IBV_WC_SUCCESS);
  ASSERT_EQ(Wait(b_rcq_).status, IBV_WC_SUCCESS);
  usleep(300000);  // idle: the last ACK is long past
  ibv_qp_attr err{};
  err.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ModifyQp(b_, &err, IBV_QP_STATE), 0);
  const uint64_t t0 = NowNs();
  Send(a_);
  const ibv_wc wc = Wait(a_scq_);
  const uint64_t elapsed_ms = (NowNs() - t0) / 1000000;
  EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR) << wc_status_str(wc.status);
  EXPECT_GE(elapsed_ms, 130u) << "the timer counted from before the send";
  EXPECT_LT(elapsed_ms, 1500u);
}

// A message that reached the responder's ring before its QP was destroyed
// is executed and acknowledged, as a NIC executes what it received before
// the destroy command, not answered "no such QP": an application may stop
// polling with messages in its ring and then destroy its QPs
// (ibv_srq_pingpong's client does, and its server saw RETRY_EXC_ERR). Our
// holding the ring's consumer lock keeps every drain away until the destroy
// is under way; before, the destroy unmapped the QP first and then waited
// for that lock, and the drain after it NAKed the SEND.
TEST_F(DeferredAckTest, DestroyExecutesWhatReachedTheRing) {
  Connect(7, 1);
  Recv(b_);
  ASSERT_NO_FATAL_FAILURE(LockOwnRing());
  Send(a_);  // committed to our ring, which nobody drains now
  const uint32_t b_qpn = b_->qp_num;
  int destroyed = -1;
  std::thread destroyer([&] { destroyed = DestroyQp(b_); });
  // As far as the destroy gets without the lock (the QP stays mapped until
  // it has drained the ring).
  for (const uint64_t until = NowNs() + 100'000'000; NowNs() < until && engine_->LocalQp(b_qpn);)
    usleep(1000);
  OwnRing().UnlockConsumer();
  destroyer.join();
  b_ = nullptr;
  EXPECT_EQ(destroyed, 0);
  const ibv_wc recv = Wait(b_rcq_);
  EXPECT_EQ(recv.status, IBV_WC_SUCCESS) << wc_status_str(recv.status);
  const ibv_wc send = Wait(a_scq_);
  EXPECT_EQ(send.status, IBV_WC_SUCCESS) << wc_status_str(send.status);
}

// A QP destroyed while it owes an ACK that the requester's full ring cannot
// take yet: the destroy waits for room (a NIC would have sent the ACK), and
// the requester's send completes successfully. Before, the ACK was dropped
// with the QP, and the requester's retransmission found no QP and failed.
TEST_F(DeferredAckTest, DestroyWaitsForRoomForTheAckItOwes) {
  ChildGuard child;
  HeldRecords held;
  ASSERT_NO_FATAL_FAILURE(OweAckToChild(&child, &held));
  if (IsSkipped()) return;
  int destroyed = -1;
  std::thread destroyer([&] { destroyed = DestroyQp(b_); });
  usleep(10000);   // the destroy waits for room meanwhile (up to 100 ms)
  held.Release();  // the child drains: room for the ACK
  destroyer.join();
  b_ = nullptr;
  EXPECT_EQ(destroyed, 0);
  EXPECT_EQ(child.WaitExit(20000), kChildSendOk)
      << "the requester's send did not complete successfully";
}

// ... but not forever: a requester that never makes room (stopped, stuck)
// costs the destroy a bounded wait, and its send then fails as a NIC's
// would once the ACK is lost (its retransmission finds no QP).
TEST_F(DeferredAckTest, DestroyGivesUpOnARequesterThatMakesNoRoom) {
  ChildGuard child;
  HeldRecords held;
  ASSERT_NO_FATAL_FAILURE(OweAckToChild(&child, &held));
  if (IsSkipped()) return;
  const uint64_t t0 = NowNs();
  EXPECT_EQ(DestroyQp(b_), 0);
  b_ = nullptr;
  const uint64_t waited_ms = (NowNs() - t0) / 1000000;
  EXPECT_GE(waited_ms, 90u) << "the destroy did not wait for room for its ACK";
  EXPECT_LT(waited_ms, 2000u) << "the destroy waited too long";
  held.Release();
  EXPECT_EQ(child.WaitExit(20000), kChildSendFailed);
}

// A request to a QP that no longer exists: the responder's process answers
// "no such QP" at once, but the requester reports RETRY_EXC_ERR only when its
// retransmit timer expires, as a NIC would (without its retries, which could
// not help). At once, the error could overtake completions that hardware
// delivers first (ibv_srq_pingpong's server stopped at it). timeout 14 (67
// ms), retry_cnt 7: one timeout, not eight (537 ms).
TEST_F(DeferredAckTest, NoSuchQpFailsWhenTheTimerExpires) {
  Connect(7, 1, /*timeout=*/14, /*retry_cnt=*/7);
  Recv(b_);
  Send(a_);  // the requester knows its peer now
  ASSERT_EQ(Wait(a_scq_).status, IBV_WC_SUCCESS);
  ASSERT_EQ(Wait(b_rcq_).status, IBV_WC_SUCCESS);
  ASSERT_EQ(DestroyQp(b_), 0);
  b_ = nullptr;
  const uint64_t t0 = NowNs();
  Send(a_);
  const ibv_wc wc = Wait(a_scq_);
  const uint64_t elapsed_ms = (NowNs() - t0) / 1000000;
  EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR) << wc_status_str(wc.status);
  EXPECT_GE(elapsed_ms, 60u) << "reported before the retransmit timer expired";
  EXPECT_LT(elapsed_ms, 450u) << "retried a QP that is known to be gone";
}

}  // namespace
}  // namespace softrdma
