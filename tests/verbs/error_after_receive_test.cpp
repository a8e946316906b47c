// A responder moved to ERR right after it received a SEND has acknowledged
// it, and an ACK that reached the requester completes its send before the
// requester's own move to ERR flushes the queue, as on an HCA, which
// acknowledges a message as it arrives. rdma_disconnect moves the QP to ERR
// just before its DREQ: libfabric's fi_pingpong -e rdm ended with "work
// request flushed error" when the last SEND's ACK, held back for a reply that
// never came, lost that race (1 run in 16).
#include <vector>

#include "verbs_fixture.h"

namespace softrdma::test {
namespace {

using ErrorAfterReceive = LoopbackPair;

int ToError(ibv_qp* qp) {
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_ERR;
  return ibv_modify_qp(qp, &at, IBV_QP_STATE);
}

// B polls the receive (its own drain, which may hold the ACK back for a
// reply), B goes to ERR, then A goes to ERR without having polled: A's SEND
// must complete successfully, not flush. Repeated, because the progress
// thread may deliver the ACK in between on its own.
TEST_F(ErrorAfterReceive, TheSendCompletesInsteadOfFlushing) {
  std::vector<uint8_t> buf(128);
  ibv_mr* mr = Reg(buf.data(), buf.size());
  ASSERT_NE(mr, nullptr);
  ibv_sge send_sge{reinterpret_cast<uintptr_t>(buf.data()), 8, mr->lkey};
  ibv_sge recv_sge{reinterpret_cast<uintptr_t>(buf.data() + 64), 64, mr->lkey};
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    if (round > 0) {
      // Fresh QPs: the previous ones are in ERR.
      ASSERT_EQ(ibv_destroy_qp(a), 0);
      ASSERT_EQ(ibv_destroy_qp(b), 0);
      a = CreateRcQp(pd, cq_a, cq_a, QpParams{});
      b = CreateRcQp(pd, cq_b, cq_b, QpParams{});
      ASSERT_TRUE(a && b);
      ASSERT_EQ(ToInit(a), 0);
      ASSERT_EQ(ToInit(b), 0);
      ASSERT_EQ(Connect(ctx, a, gid, b->qp_num, QpParams{}), 0);
      ASSERT_EQ(Connect(ctx, b, gid, a->qp_num, QpParams{}), 0);
    }
    ASSERT_EQ(PostRecv(b, 1, &recv_sge, 1), 0);
    ASSERT_EQ(PostSend(a, 2, &send_sge, 1), 0);
    auto got = PollN(cq_b, 1);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].status, IBV_WC_SUCCESS);
    ASSERT_EQ(ToError(b), 0);
    ASSERT_EQ(ToError(a), 0);
    auto sent = PollN(cq_a, 1);
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0].wr_id, 2u);
    EXPECT_EQ(sent[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(sent[0].status);
  }
}

}  // namespace
}  // namespace softrdma::test
