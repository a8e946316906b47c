// IBV_EVENT_COMM_EST: the first request that reaches an RC QP still in RTR
// raises it (the HCA's "communication established", which rdma_cm turns into
// ESTABLISHED when data overtakes the RTU); once per QP until it is reset,
// never for a QP already in RTS.
#include "datagram_fixture.h"

namespace softrdma::test {
namespace {

class CommEst : public LoopbackPair {
 public:
  // B back to RESET, then INIT and RTR only: it receives but cannot send.
  void BToRtrOnly() {
    ibv_qp_attr r{};
    r.qp_state = IBV_QPS_RESET;
    ASSERT_EQ(ibv_modify_qp(b, &r, IBV_QP_STATE), 0);
    ASSERT_EQ(ToInit(b), 0);
    ibv_qp_attr a = RtrAttr(ctx, gid, this->a->qp_num);
    ASSERT_EQ(ibv_modify_qp(b, &a, kRtrMask), 0);
  }
  // A SEND of 8 bytes from A into a receive posted on B, both completed.
  void SendOne(uint64_t id) {
    ibv_sge rs{reinterpret_cast<uintptr_t>(rx), 8, rmr->lkey};
    ASSERT_EQ(PostRecv(b, id, &rs, 1), 0);
    ibv_sge ss{reinterpret_cast<uintptr_t>(tx), 8, smr->lkey};
    ASSERT_EQ(PostSend(a, id, &ss, 1), 0);
    auto got = PollN(cq_b, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
    ASSERT_EQ(PollN(cq_a, 1).size(), 1u);
  }
  void SetUp() override {
    LoopbackPair::SetUp();
    smr = Reg(tx, sizeof tx);
    rmr = Reg(rx, sizeof rx);
    ASSERT_TRUE(smr && rmr);
  }
  uint8_t tx[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  uint8_t rx[8] = {};
  ibv_mr* smr = nullptr;
  ibv_mr* rmr = nullptr;
};

TEST_F(CommEst, FirstRequestInRtrRaisesItOnce) {
  BToRtrOnly();
  SendOne(1);
  ibv_async_event ev{};
  ASSERT_TRUE(NextAsyncEvent(ctx, &ev, 2000)) << "no IBV_EVENT_COMM_EST";
  EXPECT_EQ(ev.event_type, IBV_EVENT_COMM_EST);
  EXPECT_EQ(ev.element.qp, b);
  SendOne(2);
  EXPECT_FALSE(NextAsyncEvent(ctx, &ev, 200)) << "a second event: " << ev.event_type;
}

TEST_F(CommEst, QpInRtsRaisesNothing) {
  SendOne(1);
  ibv_async_event ev{};
  EXPECT_FALSE(NextAsyncEvent(ctx, &ev, 200)) << "unexpected event " << ev.event_type;
}

TEST_F(CommEst, RaisedAgainAfterAReset) {
  BToRtrOnly();
  SendOne(1);
  ibv_async_event ev{};
  ASSERT_TRUE(NextAsyncEvent(ctx, &ev, 2000));
  EXPECT_EQ(ev.event_type, IBV_EVENT_COMM_EST);
  // A's next PSN is 1 now; B starts again from RESET expecting PSN 0:
  // reset A as well and connect it again.
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(ibv_modify_qp(a, &r, IBV_QP_STATE), 0);
  ASSERT_EQ(ToInit(a), 0);
  ASSERT_EQ(Connect(ctx, a, gid, b->qp_num, QpParams{}), 0);
  BToRtrOnly();
  SendOne(2);
  ASSERT_TRUE(NextAsyncEvent(ctx, &ev, 2000)) << "no event after the reset";
  EXPECT_EQ(ev.event_type, IBV_EVENT_COMM_EST);
  EXPECT_EQ(ev.element.qp, b);
}

}  // namespace
}  // namespace softrdma::test
