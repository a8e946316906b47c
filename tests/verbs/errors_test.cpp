// Bad input and failures end in the documented errno or completion status.
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

#include "verbs_fixture.h"

namespace softrdma::test {
namespace {

using Errors = LoopbackPair;

ibv_qp_attr QueryState(ibv_qp* qp) {
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  EXPECT_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia), 0);
  return a;
}

TEST_F(Errors, UnknownLkeyGivesLocalProtectionError) {
  char buf[16] = {};
  char in[16];
  ibv_mr* mi = Reg(in, sizeof in);
  ibv_sge d{reinterpret_cast<uintptr_t>(in), sizeof in, mi->lkey};
  ASSERT_EQ(PostRecv(b, 1, &d, 1), 0);
  // Large enough not to go inline, with a key nobody registered.
  ibv_sge s{reinterpret_cast<uintptr_t>(buf), sizeof buf, 0x00abcd00};
  ASSERT_EQ(PostSend(a, 5, &s, 1, 0 /* unsignaled: errors complete anyway */), 0);
  auto sw = PollN(cq_a, 1);
  ASSERT_EQ(sw.size(), 1u);
  EXPECT_EQ(sw[0].status, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(sw[0].wr_id, 5u);
  EXPECT_EQ(QueryState(a).qp_state, IBV_QPS_ERR);
}

TEST_F(Errors, LengthBeyondMrGivesLocalProtectionError) {
  std::vector<char> buf(8192);
  char in[64];
  ibv_mr* mi = Reg(in, sizeof in);
  ibv_mr* m = Reg(buf.data(), 4096);
  ibv_sge d{reinterpret_cast<uintptr_t>(in), sizeof in, mi->lkey};
  ASSERT_EQ(PostRecv(b, 1, &d, 1), 0);
  ibv_sge s{reinterpret_cast<uintptr_t>(buf.data() + 4090), 16, m->lkey};
  ASSERT_EQ(PostSend(a, 6, &s, 1), 0);
  auto sw = PollN(cq_a, 1);
  ASSERT_EQ(sw.size(), 1u);
  EXPECT_EQ(sw[0].status, IBV_WC_LOC_PROT_ERR);
}

TEST_F(Errors, ReceiveBufferTooSmall) {
  std::vector<char> out(100), in(50);
  ibv_mr* mo = Reg(out.data(), out.size());
  ibv_mr* mi = Reg(in.data(), in.size());
  ibv_sge d{reinterpret_cast<uintptr_t>(in.data()), 50, mi->lkey};
  ASSERT_EQ(PostRecv(b, 1, &d, 1), 0);
  ibv_sge s{reinterpret_cast<uintptr_t>(out.data()), 100, mo->lkey};
  ASSERT_EQ(PostSend(a, 2, &s, 1), 0);
  auto rw = PollN(cq_b, 1);
  auto sw = PollN(cq_a, 1);
  ASSERT_EQ(rw.size(), 1u);
  ASSERT_EQ(sw.size(), 1u);
  EXPECT_EQ(rw[0].status, IBV_WC_LOC_LEN_ERR);
  EXPECT_EQ(sw[0].status, IBV_WC_REM_INV_REQ_ERR);
  EXPECT_EQ(QueryState(a).qp_state, IBV_QPS_ERR);
  EXPECT_EQ(QueryState(b).qp_state, IBV_QPS_ERR);
}

TEST_F(Errors, RnrWaitsForTheReceive) {
  uint32_t v = 7, got = 0;
  ibv_mr* m1 = Reg(&v, 4);
  ibv_mr* m2 = Reg(&got, 4);
  ibv_sge s{reinterpret_cast<uintptr_t>(&v), 4, m1->lkey};
  ASSERT_EQ(PostSend(a, 1, &s, 1), 0);  // no receive posted yet: RNR NAK, retry
  ibv_wc wc;
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(ibv_poll_cq(cq_a, 1, &wc), 0) << "completed without a receive";
    usleep(1000);
  }
  ibv_sge d{reinterpret_cast<uintptr_t>(&got), 4, m2->lkey};
  ASSERT_EQ(PostRecv(b, 2, &d, 1), 0);
  auto sw = PollN(cq_a, 1);
  ASSERT_EQ(sw.size(), 1u);
  EXPECT_EQ(sw[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(got, 7u);
}

class RnrExhausted : public LoopbackPair {
  void SetUp() override {
    QpParams p;
    p.rnr_retry = 0;
    Build(p);
  }
};

TEST_F(RnrExhausted, ReportsRnrRetryExceeded) {
  uint32_t v = 7;
  ibv_mr* m = Reg(&v, 4);
  ibv_sge s{reinterpret_cast<uintptr_t>(&v), 4, m->lkey};
  ASSERT_EQ(PostSend(a, 1, &s, 1), 0);
  auto sw = PollN(cq_a, 1);
  ASSERT_EQ(sw.size(), 1u);
  EXPECT_EQ(sw[0].status, IBV_WC_RNR_RETRY_EXC_ERR);
  EXPECT_EQ(QueryState(a).qp_state, IBV_QPS_ERR);
}

TEST_F(Errors, ErrorStateFlushesEverything) {
  char in[8];
  ibv_mr* m = Reg(in, sizeof in);
  ibv_sge d{reinterpret_cast<uintptr_t>(in), sizeof in, m->lkey};
  for (int i = 0; i < 3; ++i) ASSERT_EQ(PostRecv(b, 10 + i, &d, 1), 0);
  ibv_qp_attr e{};
  e.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(b, &e, IBV_QP_STATE), 0);
  auto rw = PollN(cq_b, 3);
  ASSERT_EQ(rw.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(rw[i].status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(rw[i].wr_id, 10u + i);
  }
  // Posting in ERR is accepted and flushed at once.
  ASSERT_EQ(PostRecv(b, 20, &d, 1), 0);
  ASSERT_EQ(PostSend(b, 21, &d, 1, 0), 0);
  auto more = PollN(cq_b, 2);
  ASSERT_EQ(more.size(), 2u);
  for (auto& wc : more) EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
}

TEST_F(Errors, PostingRules) {
  char buf[8];
  ibv_mr* m = Reg(buf, sizeof buf);
  ibv_sge s{reinterpret_cast<uintptr_t>(buf), sizeof buf, m->lkey};
  // Too many SGEs: EINVAL and bad_wr points at the offender.
  ibv_sge many[5] = {s, s, s, s, s};
  ibv_send_wr ok{}, over{};
  ok.sg_list = &s;
  ok.num_sge = 1;
  ok.opcode = IBV_WR_SEND;
  ok.next = &over;
  over.sg_list = many;
  over.num_sge = 5;
  over.opcode = IBV_WR_SEND;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(a, &ok, &bad), EINVAL);
  EXPECT_EQ(bad, &over);
  ibv_recv_wr rover{};
  rover.sg_list = many;
  rover.num_sge = 5;
  ibv_recv_wr* rbad = nullptr;
  EXPECT_EQ(ibv_post_recv(b, &rover, &rbad), EINVAL);
  EXPECT_EQ(rbad, &rover);
  // Inline longer than max_inline_data.
  std::vector<char> big(1000);
  ibv_sge bs{reinterpret_cast<uintptr_t>(big.data()), 1000, 0};
  EXPECT_EQ(PostSend(a, 1, &bs, 1, IBV_SEND_INLINE), EINVAL);
  // Opcodes the QP type has not got are EINVAL (TSO is UD/raw-packet only).
  ibv_send_wr w{};
  w.opcode = IBV_WR_TSO;
  w.sg_list = &s;
  w.num_sge = 1;
  EXPECT_EQ(ibv_post_send(a, &w, &bad), EINVAL);
}

TEST_F(Errors, SendQueueFullIsEnomem) {
  QpParams p;
  p.max_send_wr = 2;
  ibv_qp* q = CreateRcQp(pd, cq_a, cq_a, p);
  ASSERT_NE(q, nullptr);
  ASSERT_EQ(ToInit(q), 0);
  // Connected to a peer that never posts receives: nothing completes.
  ASSERT_EQ(Connect(ctx, q, gid, b->qp_num, p), 0);
  char buf[8];
  ibv_mr* m = Reg(buf, sizeof buf);
  ibv_sge s{reinterpret_cast<uintptr_t>(buf), sizeof buf, m->lkey};
  EXPECT_EQ(PostSend(q, 1, &s, 1), 0);
  EXPECT_EQ(PostSend(q, 2, &s, 1), 0);
  EXPECT_EQ(PostSend(q, 3, &s, 1), ENOMEM);
  EXPECT_EQ(ibv_destroy_qp(q), 0);
}

TEST(QpStates, PostingOutsideTheRightStateIsRefused) {
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 8, nullptr, nullptr, 0);
  ibv_qp* qp = CreateRcQp(pd, cq, cq, QpParams{});
  ASSERT_NE(qp, nullptr);
  EXPECT_EQ(qp->state, IBV_QPS_RESET);
  char buf[8];
  ibv_mr* m = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge s{reinterpret_cast<uintptr_t>(buf), sizeof buf, m->lkey};
  ibv_send_wr w{};
  w.sg_list = &s;
  w.num_sge = 1;
  w.opcode = IBV_WR_SEND;
  ibv_send_wr* bad = nullptr;
  ibv_recv_wr r{};
  r.sg_list = &s;
  r.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  EXPECT_EQ(ibv_post_send(qp, &w, &bad), EINVAL);   // RESET
  EXPECT_EQ(ibv_post_recv(qp, &r, &rbad), EINVAL);  // RESET
  ASSERT_EQ(ToInit(qp), 0);
  EXPECT_EQ(ibv_post_send(qp, &w, &bad), EINVAL);  // INIT
  EXPECT_EQ(ibv_post_recv(qp, &r, &rbad), 0);      // INIT accepts receives
  // RTR without a GRH: refused on RoCE, and nothing changes.
  ibv_qp_attr rtr = RtrAttr(ctx, LoopbackGidIndex(ctx), qp->qp_num);
  rtr.ah_attr.is_global = 0;
  rtr.ah_attr.dlid = 1;
  EXPECT_EQ(ibv_modify_qp(qp, &rtr, kRtrMask), EINVAL);
  EXPECT_EQ(qp->state, IBV_QPS_INIT);
  // Illegal transition INIT -> RTS.
  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  EXPECT_EQ(ibv_modify_qp(qp, &rts, kRtsMask), EINVAL);
  rtr.ah_attr.is_global = 1;
  EXPECT_EQ(ibv_modify_qp(qp, &rtr, kRtrMask), 0);
  EXPECT_EQ(qp->state, IBV_QPS_RTR);
  EXPECT_EQ(ibv_post_send(qp, &w, &bad), EINVAL);  // RTR
  ibv_qp_attr qa{};
  ibv_qp_init_attr qia{};
  ASSERT_EQ(ibv_query_qp(qp, &qa, IBV_QP_STATE | IBV_QP_DEST_QPN, &qia), 0);
  EXPECT_EQ(qa.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(qa.dest_qp_num, qp->qp_num);
  EXPECT_EQ(qia.cap.max_send_sge, 4u);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_dereg_mr(m), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(ibv_close_device(ctx), 0);
}

TEST_F(Errors, SendToDestroyedPeerFailsWithRetryExceeded) {
  char buf[8];
  ibv_mr* m = Reg(buf, sizeof buf);
  ibv_sge s{reinterpret_cast<uintptr_t>(buf), sizeof buf, m->lkey};
  ASSERT_EQ(ibv_destroy_qp(b), 0);
  b = nullptr;
  ASSERT_EQ(PostSend(a, 3, &s, 1), 0);
  auto sw = PollN(cq_a, 1);
  ASSERT_EQ(sw.size(), 1u);
  EXPECT_EQ(sw[0].status, IBV_WC_RETRY_EXC_ERR);
}

}  // namespace
}  // namespace softrdma::test
