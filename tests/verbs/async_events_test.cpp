// Async events and object lifetime, as the verbs contract states them (man
// ibv_get_async_event, ibv_destroy_qp): ibv_destroy_qp waits until the QP's
// events already read are acknowledged, and no event of the QP is read after
// its destroy returned. UCX relies on both: its async thread reads
// element.qp->qp_num and looks the number up, so an event read after the
// destroy reads freed memory (a crash of ucx_perftest at teardown).
// IBV_EVENT_QP_LAST_WQE_REACHED comes once each time an SRQ-attached QP
// enters ERR, and never for a QP without an SRQ.
#include <fcntl.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "datagram_fixture.h"

namespace softrdma::test {
namespace {

class AsyncEvents : public ::testing::Test {
 public:
  void SetUp() override {
    ctx = OpenSoftrdma();
    ASSERT_NE(ctx, nullptr);
    pd = ibv_alloc_pd(ctx);
    cq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    ASSERT_TRUE(pd && cq);
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = 16;
    sa.attr.max_sge = 1;
    srq = ibv_create_srq(pd, &sa);
    ASSERT_NE(srq, nullptr);
    // Each test reads with a deadline of its own: never block in a read.
    const int flags = fcntl(ctx->async_fd, F_GETFL);
    ASSERT_EQ(fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
  }
  void TearDown() override {
    if (stuck_) return;  // a destroy still waits in a thread: leave its objects be
    for (ibv_qp* q : qps) {
      if (q) {
        EXPECT_EQ(ibv_destroy_qp(q), 0);
      }
    }
    if (srq) {
      EXPECT_EQ(ibv_destroy_srq(srq), 0);
    }
    if (cq) {
      EXPECT_EQ(ibv_destroy_cq(cq), 0);
    }
    if (pd) {
      EXPECT_EQ(ibv_dealloc_pd(pd), 0);
    }
    if (ctx) {
      EXPECT_EQ(ibv_close_device(ctx), 0);
    }
  }

  // An RC QP in INIT, drawing from the SRQ if `with_srq`; destroyed by
  // TearDown unless the test destroys it (and clears its slot).
  ibv_qp* NewQp(bool with_srq) {
    ibv_qp_init_attr a{};
    a.send_cq = cq;
    a.recv_cq = cq;
    a.srq = with_srq ? srq : nullptr;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = 4;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_wr = with_srq ? 0 : 4;
    a.cap.max_recv_sge = with_srq ? 0 : 1;
    ibv_qp* qp = ibv_create_qp(pd, &a);
    EXPECT_NE(qp, nullptr);
    if (qp) {
      EXPECT_EQ(ToInit(qp), 0);
    }
    qps.push_back(qp);
    return qp;
  }
  static int MoveTo(ibv_qp* qp, ibv_qp_state state) {
    ibv_qp_attr a{};
    a.qp_state = state;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE);
  }
  int DestroyOwnQp(ibv_qp* qp) {
    for (ibv_qp*& q : qps)
      if (q == qp) q = nullptr;
    return ibv_destroy_qp(qp);
  }
  // Whether async_fd polls readable within `timeout_ms`.
  bool Readable(int timeout_ms) {
    pollfd p{ctx->async_fd, POLLIN, 0};
    return poll(&p, 1, timeout_ms) == 1;
  }
  // Reads one event, not acknowledged; false if none within `timeout_ms`.
  // The next event is IBV_EVENT_QP_LAST_WQE_REACHED of `qp` (`missing`: why
  // none may be missing), and no other follows within `quiet_ms`.
  void ExpectOnlyLastWqeReachedOf(ibv_qp* qp, int quiet_ms, const char* missing) {
    ibv_async_event ev{};
    ASSERT_TRUE(NextAsyncEvent(ctx, &ev, 2000)) << missing;
    EXPECT_EQ(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
    EXPECT_EQ(ev.element.qp, qp) << "an event of another QP";
    EXPECT_FALSE(NextAsyncEvent(ctx, &ev, quiet_ms))
        << "a second event " << ev.event_type << " for QP " << ev.element.qp;
  }
  bool ReadUnacked(ibv_async_event* ev, int timeout_ms) {
    return Readable(timeout_ms) && ibv_get_async_event(ctx, ev) == 0;
  }

  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_srq* srq = nullptr;
  std::vector<ibv_qp*> qps;
  bool stuck_ = false;
};

TEST_F(AsyncEvents, NoEventOfAQpIsReadAfterItsDestroyReturned) {
  ibv_qp* qp = NewQp(/*with_srq=*/true);
  ASSERT_NE(qp, nullptr);
  ASSERT_EQ(MoveTo(qp, IBV_QPS_ERR), 0);  // raises LAST_WQE_REACHED
  ASSERT_TRUE(Readable(2000)) << "no IBV_EVENT_QP_LAST_WQE_REACHED";
  ASSERT_EQ(DestroyOwnQp(qp), 0);
  EXPECT_FALSE(Readable(0)) << "async_fd still readable for the destroyed QP's event";
  ibv_async_event ev{};
  errno = 0;
  EXPECT_EQ(ibv_get_async_event(ctx, &ev), -1)
      << "event " << ev.event_type << " of a destroyed QP (element.qp " << ev.element.qp << ")";
  EXPECT_EQ(errno, EAGAIN);
}

TEST_F(AsyncEvents, DestroyDropsOnlyThatQpsEvents) {
  ibv_qp* gone = NewQp(true);
  ibv_qp* kept = NewQp(true);
  ASSERT_TRUE(gone && kept);
  ASSERT_EQ(MoveTo(gone, IBV_QPS_ERR), 0);
  ASSERT_EQ(MoveTo(kept, IBV_QPS_ERR), 0);
  ASSERT_TRUE(Readable(2000));
  ASSERT_EQ(DestroyOwnQp(gone), 0);
  ExpectOnlyLastWqeReachedOf(kept, 0, "the other QP's event was lost");
}

TEST_F(AsyncEvents, DestroyQpWaitsUntilItsReadEventIsAcknowledged) {
  ibv_qp* qp = NewQp(true);
  ASSERT_NE(qp, nullptr);
  ASSERT_EQ(MoveTo(qp, IBV_QPS_ERR), 0);
  ibv_async_event ev{};
  ASSERT_TRUE(ReadUnacked(&ev, 2000));
  ASSERT_EQ(ev.element.qp, qp);
  for (ibv_qp*& q : qps)
    if (q == qp) q = nullptr;
  std::promise<int> destroyed;
  std::future<int> rc = destroyed.get_future();
  std::thread destroyer([qp, &destroyed] { destroyed.set_value(ibv_destroy_qp(qp)); });
  EXPECT_EQ(rc.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
      << "ibv_destroy_qp returned while its event was read but not acknowledged";
  ibv_ack_async_event(&ev);
  if (rc.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    stuck_ = true;
    destroyer.detach();
    FAIL() << "ibv_destroy_qp still waits 10 s after the acknowledgement";
  }
  destroyer.join();
  EXPECT_EQ(rc.get(), 0);
}

TEST_F(AsyncEvents, LastWqeReachedOncePerEntryToErrAndOnlyWithAnSrq) {
  ibv_qp* with = NewQp(true);
  ibv_qp* without = NewQp(false);
  ASSERT_TRUE(with && without);
  ASSERT_EQ(MoveTo(without, IBV_QPS_ERR), 0);
  ASSERT_EQ(MoveTo(with, IBV_QPS_ERR), 0);
  ASSERT_EQ(MoveTo(with, IBV_QPS_ERR), 0);  // already there: no new entry
  // Not the QP without an SRQ's, and only one.
  ASSERT_NO_FATAL_FAILURE(ExpectOnlyLastWqeReachedOf(with, 100, "none on entering ERR"));
  // A new life: RESET, INIT, ERR again raises it again, once.
  ASSERT_EQ(MoveTo(with, IBV_QPS_RESET), 0);
  ASSERT_EQ(ToInit(with), 0);
  ASSERT_EQ(MoveTo(with, IBV_QPS_ERR), 0);
  ExpectOnlyLastWqeReachedOf(with, 100, "none after RESET -> INIT -> ERR");
}

// A number handed out again: the new QP sees nothing of the old one's events.
TEST_F(AsyncEvents, AQpWithAReusedNumberGetsNoEventOfItsPredecessor) {
  ibv_qp* old_qp = NewQp(true);
  ASSERT_NE(old_qp, nullptr);
  ASSERT_EQ(MoveTo(old_qp, IBV_QPS_ERR), 0);
  ASSERT_TRUE(Readable(2000));
  ASSERT_EQ(DestroyOwnQp(old_qp), 0);
  ibv_qp* new_qp = NewQp(true);
  ASSERT_NE(new_qp, nullptr);
  ibv_async_event ev{};
  EXPECT_FALSE(NextAsyncEvent(ctx, &ev, 100))
      << "event " << ev.event_type << " for QP " << ev.element.qp << " (new QP " << new_qp
      << ", number " << new_qp->qp_num << ")";
}

}  // namespace
}  // namespace softrdma::test
