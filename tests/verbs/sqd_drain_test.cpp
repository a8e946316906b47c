// The SQD state's drain (man ibv_modify_qp, ibv_query_qp; IBA 10.3.1): a QP
// moved to SQD finishes the send WRs it already started (an RC QP: until
// they are acknowledged, resent after an RNR NAK if need be), starts none
// posted meanwhile, and raises IBV_EVENT_SQ_DRAINED once when the last
// started one completes, only if en_sqd_async_notify was set in the modify
// to SQD. sq_draining reads 1 until then, 0 after. SQD -> RTS sends what
// waited. A send kept in flight: the peer has no receive WQE (RNR NAKs,
// rnr_retry 7 = forever) until the test posts one.
#include <fcntl.h>

#include <cstring>
#include <thread>

#include "datagram_fixture.h"

namespace softrdma::test {
namespace {

class SqdDrain : public LoopbackPair {
 public:
  void SetUp() override {
    QpParams p;
    p.min_rnr_timer = 12;  // 0.64 ms between the resends of the blocked SEND
    Build(p);
    ASSERT_NE(a, nullptr);
    const int flags = fcntl(ctx->async_fd, F_GETFL);
    ASSERT_EQ(fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
    memset(src, 0x5a, sizeof src);
    smr = Reg(src, sizeof src);
    dmr = Reg(dst, sizeof dst);
    ASSERT_TRUE(smr && dmr);
  }

  static int EnterSqd(ibv_qp* qp, bool notify) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_SQD;
    at.en_sqd_async_notify = notify ? 1 : 0;
    return ibv_modify_qp(qp, &at, IBV_QP_STATE | (notify ? IBV_QP_EN_SQD_ASYNC_NOTIFY : 0));
  }
  static int EnterRts(ibv_qp* qp) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_RTS;
    return ibv_modify_qp(qp, &at, IBV_QP_STATE);
  }
  // ibv_query_qp's sq_draining, or -1 if the query fails.
  static int Draining(ibv_qp* qp) {
    ibv_qp_attr at{};
    ibv_qp_init_attr init{};
    if (ibv_query_qp(qp, &at, IBV_QP_STATE, &init)) return -1;
    return at.sq_draining;
  }
  int Send(uint64_t id) {
    ibv_sge s = Sge(src, 64, smr);
    return PostSend(a, id, &s, 1);
  }
  int Recv(uint64_t id) { return PostRecvTo(b, id, Sge(dst, sizeof dst, dmr)); }
  // A SEND from A that B cannot take yet: started, not acknowledged.
  void SendInFlight() {
    ASSERT_EQ(Send(1), 0);
    // Let RNR NAKs rewind it at least once (the drain must survive that);
    // the test holds either way.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_TRUE(PollN(cq_a, 1, 0).empty()) << "the SEND completed without a receive WQE";
  }

  char src[64];
  char dst[64];
  ibv_mr* smr = nullptr;
  ibv_mr* dmr = nullptr;
};

TEST_F(SqdDrain, EventOnceAfterTheStartedSendCompletesAndSqdToRtsResumes) {
  SendInFlight();
  ASSERT_EQ(EnterSqd(a, /*notify=*/true), 0);
  EXPECT_EQ(Draining(a), 1) << "sq_draining with a SEND in flight";
  ibv_async_event ev{};
  EXPECT_FALSE(NextAsyncEvent(ctx, &ev, 50)) << "event " << ev.event_type << " before the drain";
  ASSERT_EQ(Send(2), 0) << "ibv_post_send in SQD: accepted, started at RTS";
  ASSERT_EQ(Recv(10), 0);
  auto wc = PollN(cq_a, 1);
  ASSERT_EQ(wc.size(), 1u) << "the SEND started before SQD never completed";
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  ASSERT_TRUE(NextAsyncEvent(ctx, &ev, 2000)) << "no IBV_EVENT_SQ_DRAINED";
  EXPECT_EQ(ev.event_type, IBV_EVENT_SQ_DRAINED);
  EXPECT_EQ(ev.element.qp, a);
  EXPECT_FALSE(NextAsyncEvent(ctx, &ev, 100)) << "a second event " << ev.event_type;
  EXPECT_EQ(Draining(a), 0) << "sq_draining after the drain";
  // The SEND posted in SQD did not start: a receive WQE stays unused.
  ASSERT_EQ(PollN(cq_b, 1).size(), 1u);
  ASSERT_EQ(Recv(11), 0);
  EXPECT_TRUE(PollN(cq_b, 1, 100).empty()) << "a SEND posted in SQD was sent";
  EXPECT_TRUE(PollN(cq_a, 1, 0).empty());
  // Back to RTS: it goes, and so does what follows.
  ASSERT_EQ(EnterRts(a), 0);
  wc = PollN(cq_a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 2u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  ASSERT_EQ(PollN(cq_b, 1).size(), 1u);
  ASSERT_EQ(Recv(12), 0);
  ASSERT_EQ(Send(3), 0);
  wc = PollN(cq_a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 3u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(Draining(a), 0);
  EXPECT_FALSE(NextAsyncEvent(ctx, &ev, 0)) << "event " << ev.event_type << " after RTS";
}

TEST_F(SqdDrain, NoEventWithoutEnSqdAsyncNotify) {
  SendInFlight();
  ASSERT_EQ(EnterSqd(a, /*notify=*/false), 0);
  EXPECT_EQ(Draining(a), 1);
  ASSERT_EQ(Recv(10), 0);
  auto wc = PollN(cq_a, 1);
  ASSERT_EQ(wc.size(), 1u) << "the SEND started before SQD never completed";
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(Draining(a), 0);
  ibv_async_event ev{};
  EXPECT_FALSE(NextAsyncEvent(ctx, &ev, 200)) << "event " << ev.event_type << " not asked for";
}

TEST_F(SqdDrain, AnIdleQpIsDrainedAtOnceAndNotifiesOnlyIfAsked) {
  ibv_async_event ev{};
  ASSERT_EQ(EnterSqd(a, /*notify=*/false), 0);
  EXPECT_EQ(Draining(a), 0);
  EXPECT_FALSE(NextAsyncEvent(ctx, &ev, 100)) << "event " << ev.event_type << " not asked for";
  ASSERT_EQ(EnterRts(a), 0);
  ASSERT_EQ(EnterSqd(a, /*notify=*/true), 0);
  EXPECT_EQ(Draining(a), 0);
  ASSERT_TRUE(NextAsyncEvent(ctx, &ev, 2000)) << "no IBV_EVENT_SQ_DRAINED";
  EXPECT_EQ(ev.event_type, IBV_EVENT_SQ_DRAINED);
  EXPECT_EQ(ev.element.qp, a);
  // SQD -> SQD is no new drain.
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_SQD;
  ASSERT_EQ(ibv_modify_qp(a, &at, IBV_QP_STATE), 0);
  EXPECT_FALSE(NextAsyncEvent(ctx, &ev, 100)) << "a second event " << ev.event_type;
}

// ibv_destroy_qp during the drain: no event of the QP is read after it.
TEST_F(SqdDrain, DestroyDuringTheDrainLeavesNoEvent) {
  SendInFlight();
  ASSERT_EQ(EnterSqd(a, /*notify=*/true), 0);
  ASSERT_EQ(Draining(a), 1);
  ASSERT_EQ(Recv(10), 0);  // the drain may end while the destroy runs
  ASSERT_EQ(ibv_destroy_qp(a), 0);
  a = nullptr;
  ibv_async_event ev{};
  while (NextAsyncEvent(ctx, &ev, 100)) {
    ADD_FAILURE() << "event " << ev.event_type << " read after the QP's destroy returned";
  }
}

// SQD -> ERR during the drain: the SEND is flushed, no drain event.
TEST_F(SqdDrain, ErrDuringTheDrainFlushesWithoutEvent) {
  SendInFlight();
  ASSERT_EQ(EnterSqd(a, /*notify=*/true), 0);
  ASSERT_EQ(Draining(a), 1);
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(a, &at, IBV_QP_STATE), 0);
  auto wc = PollN(cq_a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(Draining(a), 0);
  ibv_async_event ev{};
  EXPECT_FALSE(NextAsyncEvent(ctx, &ev, 100)) << "event " << ev.event_type << " in ERR";
}

}  // namespace
}  // namespace softrdma::test
