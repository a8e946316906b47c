// Threads blocked in ibv_get_cq_event on a blocking channel wait on the
// inbound ring themselves (Engine::WaitForChannelEvent): every message must
// still wake them, whoever writes the event token (their own drain, the
// progress thread, another thread's verbs call), and a second blocked thread
// (which waits in the pipe's read()) must get its events too.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "verbs_fixture.h"

namespace softrdma::test {
namespace {

using BlockingWait = LoopbackPair;

// A connected pair whose receiving QP completes into `cq`.
struct EventedPair {
  ibv_qp* rx = nullptr;  // completes into the evented CQ
  ibv_qp* tx = nullptr;
};

EventedPair MakePair(BlockingWait& t, ibv_cq* cq) {
  QpParams p;
  EventedPair e;
  e.rx = CreateRcQp(t.pd, cq, cq, p);
  e.tx = CreateRcQp(t.pd, t.cq_b, t.cq_b, p);
  if (!e.rx || !e.tx || ToInit(e.rx) || ToInit(e.tx) ||
      Connect(t.ctx, e.rx, t.gid, e.tx->qp_num, p) || Connect(t.ctx, e.tx, t.gid, e.rx->qp_num, p))
    return {};
  return e;
}

// Fails the whole process if `done` is not set within `seconds`: a thread
// blocked in ibv_get_cq_event that is never woken cannot be joined.
class Watchdog {
 public:
  Watchdog(const std::atomic<bool>& done, int seconds, const char* what)
      : thread_([&done, seconds, what] {
          for (int i = 0; i < seconds * 100 && !done.load(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          if (!done.load()) {
            fprintf(stderr, "FAILED: %s: a thread blocked in ibv_get_cq_event was not woken\n",
                    what);
            _exit(1);
          }
        }) {}
  ~Watchdog() { thread_.join(); }

 private:
  std::thread thread_;
};

// Waits for one completion of `cq` as an evented application does: arm,
// poll (arming is for the next completion), block for the event on `ch` if
// there was none, acknowledge it, poll again. An event may come with no
// completion left (its completion was polled after an earlier arm): then
// again. The completion's status, or -1 on a failed call.
int WaitOne(ibv_comp_channel* ch, ibv_cq* cq) {
  for (;;) {
    ibv_wc wc{};
    if (ibv_req_notify_cq(cq, 0) != 0) return -1;
    if (int n = ibv_poll_cq(cq, 1, &wc); n != 0) return n == 1 ? wc.status : -1;
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx) != 0 || ev_cq != cq) return -1;
    ibv_ack_cq_events(cq, 1);
    if (int n = ibv_poll_cq(cq, 1, &wc); n != 0) return n == 1 ? wc.status : -1;
  }
}

// 300 messages, each sent only once the blocked receiver got the previous
// one's event: each time the receiver is asleep in ibv_get_cq_event when the
// message lands, and the commit must wake it.
TEST_F(BlockingWait, EveryMessageWakesTheBlockedThread) {
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  ASSERT_NE(ch, nullptr);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, ch, 0);
  ASSERT_NE(cq, nullptr);
  EventedPair e = MakePair(*this, cq);
  ASSERT_TRUE(e.rx && e.tx);
  uint32_t v = 7, got = 0;
  ibv_mr* ms = Reg(&v, 4);
  ibv_mr* mr = Reg(&got, 4);
  ASSERT_TRUE(ms && mr);
  constexpr int kMessages = 300;
  std::atomic<int> received{0};
  std::atomic<bool> done{false}, failed{false};
  Watchdog dog(done, 30, "EveryMessageWakesTheBlockedThread");
  std::thread receiver([&] {
    for (int i = 0; i < kMessages; ++i) {
      if (WaitOne(ch, cq) != IBV_WC_SUCCESS) {
        failed = true;
        break;
      }
      received.fetch_add(1);
    }
    done = true;
  });
  ibv_sge s{reinterpret_cast<uintptr_t>(&v), 4, ms->lkey};
  ibv_sge d{reinterpret_cast<uintptr_t>(&got), 4, mr->lkey};
  for (int i = 0; i < kMessages && !failed; ++i) {
    ASSERT_EQ(PostRecv(e.rx, i, &d, 1), 0);
    // Let the receiver arm and block (or not: both orders must work).
    if (i % 2) std::this_thread::sleep_for(std::chrono::microseconds(200));
    ASSERT_EQ(PostSend(e.tx, i, &s, 1), 0);
    ASSERT_EQ(PollN(cq_b, 1).size(), 1u);
    while (received.load() <= i && !failed) std::this_thread::yield();
  }
  receiver.join();
  EXPECT_FALSE(failed);
  EXPECT_EQ(received.load(), kMessages);
  ibv_destroy_qp(e.rx);
  ibv_destroy_qp(e.tx);
  ibv_destroy_cq(cq);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

// Two threads block on two channels at once: one waits on the ring, the
// other in the pipe's read(); messages for either wake the right one.
TEST_F(BlockingWait, TwoThreadsOnTwoChannelsBothGetTheirEvents) {
  ibv_comp_channel* ch[2] = {ibv_create_comp_channel(ctx), ibv_create_comp_channel(ctx)};
  ASSERT_TRUE(ch[0] && ch[1]);
  ibv_cq* cq[2] = {ibv_create_cq(ctx, 16, nullptr, ch[0], 0),
                   ibv_create_cq(ctx, 16, nullptr, ch[1], 0)};
  ASSERT_TRUE(cq[0] && cq[1]);
  EventedPair e[2] = {MakePair(*this, cq[0]), MakePair(*this, cq[1])};
  ASSERT_TRUE(e[0].rx && e[1].rx);
  uint32_t v = 9, got[2] = {0, 0};
  ibv_mr* ms = Reg(&v, 4);
  ibv_mr* mr = Reg(got, sizeof got);
  ASSERT_TRUE(ms && mr);
  constexpr int kRounds = 100;
  std::atomic<int> received[2] = {0, 0};
  std::atomic<bool> failed{false}, done{false};
  std::atomic<int> finished{0};
  Watchdog dog(done, 30, "TwoThreadsOnTwoChannelsBothGetTheirEvents");
  std::thread waiters[2];
  for (int w = 0; w < 2; ++w) {
    waiters[w] = std::thread([&, w] {
      for (int i = 0; i < kRounds; ++i) {
        if (WaitOne(ch[w], cq[w]) != IBV_WC_SUCCESS) {
          failed = true;
          break;
        }
        received[w].fetch_add(1);
      }
      if (finished.fetch_add(1) == 1) done = true;
    });
  }
  ibv_sge s{reinterpret_cast<uintptr_t>(&v), 4, ms->lkey};
  for (int i = 0; i < kRounds && !failed; ++i) {
    // Alternate which channel's message goes first.
    for (int k = 0; k < 2; ++k) {
      const int w = (i + k) % 2;
      ibv_sge d{reinterpret_cast<uintptr_t>(&got[w]), 4, mr->lkey};
      ASSERT_EQ(PostRecv(e[w].rx, i, &d, 1), 0);
      ASSERT_EQ(PostSend(e[w].tx, i, &s, 1), 0);
      ASSERT_EQ(PollN(cq_b, 1).size(), 1u);
      while (received[w].load() <= i && !failed) std::this_thread::yield();
    }
  }
  for (auto& t : waiters) t.join();
  EXPECT_FALSE(failed);
  EXPECT_EQ(received[0].load(), kRounds);
  EXPECT_EQ(received[1].load(), kRounds);
  for (int w = 0; w < 2; ++w) {
    ibv_destroy_qp(e[w].rx);
    ibv_destroy_qp(e[w].tx);
    ibv_destroy_cq(cq[w]);
    EXPECT_EQ(ibv_destroy_comp_channel(ch[w]), 0);
  }
}

// A completion that no drain produces (a receive flushed by another
// thread's ibv_modify_qp to ERR) writes the token from that thread: it must
// wake the thread blocked on the ring.
TEST_F(BlockingWait, TokenWrittenByAnotherThreadWakesTheWaiter) {
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  ASSERT_NE(ch, nullptr);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, ch, 0);
  ASSERT_NE(cq, nullptr);
  EventedPair e = MakePair(*this, cq);
  ASSERT_TRUE(e.rx && e.tx);
  uint32_t got = 0;
  ibv_mr* mr = Reg(&got, 4);
  ASSERT_NE(mr, nullptr);
  ibv_sge d{reinterpret_cast<uintptr_t>(&got), 4, mr->lkey};
  ASSERT_EQ(PostRecv(e.rx, 1, &d, 1), 0);
  std::atomic<bool> done{false};
  std::atomic<int> status{-2};
  Watchdog dog(done, 30, "TokenWrittenByAnotherThreadWakesTheWaiter");
  std::thread waiter([&] {
    status = WaitOne(ch, cq);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let it block
  ibv_qp_attr err{};
  err.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(e.rx, &err, IBV_QP_STATE), 0);
  waiter.join();
  EXPECT_EQ(status.load(), IBV_WC_WR_FLUSH_ERR);
  ibv_destroy_qp(e.rx);
  ibv_destroy_qp(e.tx);
  ibv_destroy_cq(cq);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

// The application's non-blocking channel keeps answering EAGAIN at once,
// whether or not a thread of the process waits on the ring meanwhile.
TEST_F(BlockingWait, NonBlockingChannelStillSaysEagain) {
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  ASSERT_NE(ch, nullptr);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, ch, 0);
  ASSERT_NE(cq, nullptr);
  EventedPair e = MakePair(*this, cq);  // starts the engine
  ASSERT_TRUE(e.rx && e.tx);
  ASSERT_EQ(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK), 0);
  ASSERT_EQ(ibv_req_notify_cq(cq, 0), 0);
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  errno = 0;
  EXPECT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), -1);
  EXPECT_EQ(errno, EAGAIN);
  ibv_destroy_qp(e.rx);
  ibv_destroy_qp(e.tx);
  ibv_destroy_cq(cq);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

}  // namespace
}  // namespace softrdma::test
