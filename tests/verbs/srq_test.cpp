// Shared receive queues through the public API: two QPs drawing from one
// SRQ in posting order, the limit event, LAST_WQE_REACHED on ERR, and the
// verbs' argument rules.
#include <cstring>
#include <utility>
#include <vector>

#include "datagram_fixture.h"

namespace softrdma::test {
namespace {

class SrqTest : public ::testing::Test {
 public:
  static constexpr uint32_t kSlot = 256;
  static constexpr int kSlots = 16;

  void SetUp() override {
    ctx = OpenSoftrdma();
    ASSERT_NE(ctx, nullptr);
    gid = LoopbackGidIndex(ctx);
    ASSERT_GE(gid, 0);
    pd = ibv_alloc_pd(ctx);
    scq = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
    rcq = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
    ASSERT_TRUE(pd && scq && rcq);
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = kSlots;
    sa.attr.max_sge = 2;
    srq = ibv_create_srq(pd, &sa);
    ASSERT_NE(srq, nullptr);
    EXPECT_GE(sa.attr.max_wr, static_cast<uint32_t>(kSlots));
    for (int i = 0; i < 2; ++i) {
      tx[i] = CreateRcQp(pd, scq, scq, QpParams{});
      ibv_qp_init_attr ra{};
      ra.send_cq = scq;
      ra.recv_cq = rcq;
      ra.srq = srq;
      ra.qp_type = IBV_QPT_RC;
      ra.cap.max_send_wr = 4;
      ra.cap.max_send_sge = 1;
      rx[i] = ibv_create_qp(pd, &ra);
      ASSERT_TRUE(tx[i] && rx[i]);
      ASSERT_EQ(ToInit(tx[i]), 0);
      ASSERT_EQ(ToInit(rx[i]), 0);
      ASSERT_EQ(Connect(ctx, tx[i], gid, rx[i]->qp_num, QpParams{}), 0);
      ASSERT_EQ(Connect(ctx, rx[i], gid, tx[i]->qp_num, QpParams{}), 0);
    }
    rbuf.assign(kSlot * kSlots, 0);
    sbuf.assign(kSlot, 0);
    rmr = ibv_reg_mr(pd, rbuf.data(), rbuf.size(), IBV_ACCESS_LOCAL_WRITE);
    smr = ibv_reg_mr(pd, sbuf.data(), sbuf.size(), 0);
    ASSERT_TRUE(rmr && smr);
  }
  void TearDown() override {
    for (ibv_qp* q : {tx[0], tx[1], rx[0], rx[1]})
      if (q) ibv_destroy_qp(q);
    if (srq) {
      EXPECT_EQ(ibv_destroy_srq(srq), 0);
    }
    if (rmr) ibv_dereg_mr(rmr);
    if (smr) ibv_dereg_mr(smr);
    if (scq) ibv_destroy_cq(scq);
    if (rcq) ibv_destroy_cq(rcq);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
  void PostSlots(int first, int n) {
    for (int i = first; i < first + n; ++i)
      ASSERT_EQ(PostSrqRecvTo(srq, 1000 + i, Sge(&rbuf[i * kSlot], kSlot, rmr)), 0);
  }
  // Sends `len` bytes of pattern `tag` on tx[which] and waits for both ends.
  ibv_wc SendOne(int which, uint8_t tag, uint32_t len = 100) {
    memset(sbuf.data(), tag, len);
    EXPECT_EQ(PostSendTo(tx[which], tag, Sge(sbuf.data(), len, smr)), 0);
    auto s = PollN(scq, 1);
    EXPECT_EQ(s.size(), 1u);
    if (!s.empty()) {
      EXPECT_EQ(s[0].status, IBV_WC_SUCCESS);
    }
    auto r = PollN(rcq, 1);
    EXPECT_EQ(r.size(), 1u);
    return r.empty() ? ibv_wc{} : r[0];
  }

  ibv_context* ctx = nullptr;
  int gid = -1;
  ibv_pd* pd = nullptr;
  ibv_cq *scq = nullptr, *rcq = nullptr;
  ibv_srq* srq = nullptr;
  ibv_qp* tx[2] = {};
  ibv_qp* rx[2] = {};
  std::vector<uint8_t> rbuf, sbuf;
  ibv_mr *rmr = nullptr, *smr = nullptr;
};

TEST_F(SrqTest, TwoQpsConsumeInPostingOrder) {
  PostSlots(0, 6);
  for (int i = 0; i < 6; ++i) {
    const int which = i % 3 == 0 ? 0 : 1;  // 0,1,1,0,1,1: order is the SRQ's, not the QP's
    ibv_wc wc = SendOne(which, static_cast<uint8_t>(0x40 + i), 100 + i);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.wr_id, 1000u + i);
    EXPECT_EQ(wc.qp_num, rx[which]->qp_num);
    EXPECT_EQ(wc.byte_len, 100u + i);
    for (uint32_t b = 0; b < kSlot; ++b)
      ASSERT_EQ(rbuf[i * kSlot + b], b < 100u + i ? 0x40 + i : 0) << "slot " << i << " byte " << b;
  }
}

// A small SEND into an SRQ takes the responder's short path (the data in
// the record, a one-SGE WQE that holds it). What that path does not
// complete it leaves, with the WQE it took, to the general path: these
// check that such a message still ends as it did there, and that no other
// WQE of the SRQ is used up on the way.

// Sends `len` bytes on tx[0] and returns (send completion, receive completion).
std::pair<ibv_wc, ibv_wc> SendAndPollBoth(SrqTest& t, uint32_t len) {
  memset(t.sbuf.data(), 0x5a, len);
  EXPECT_EQ(PostSendTo(t.tx[0], 1, Sge(t.sbuf.data(), len, t.smr)), 0);
  auto s = PollN(t.scq, 1);
  auto r = PollN(t.rcq, 1);
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(r.size(), 1u);
  return {s.empty() ? ibv_wc{} : s[0], r.empty() ? ibv_wc{} : r[0]};
}

// The other QP still receives into the WQE posted after the failed one.
void ExpectNextWqeUnused(SrqTest& t, uint64_t wr_id, int slot) {
  ibv_wc got = t.SendOne(1, 0x66);
  EXPECT_EQ(got.status, IBV_WC_SUCCESS);
  EXPECT_EQ(got.wr_id, wr_id);
  EXPECT_EQ(t.rbuf[slot * SrqTest::kSlot], 0x66);
}

// A 100-byte SEND into an SRQ WQE `wqe` (wr_id 7) that cannot take it fails
// both sides with these statuses, writes nothing, and the other QP's next
// message goes into the WQE posted after it.
void ExpectSmallSendFailsBothSides(SrqTest& t, const ibv_sge& wqe, ibv_wc_status sender,
                                   ibv_wc_status receiver) {
  ASSERT_EQ(PostSrqRecvTo(t.srq, 7, wqe), 0);
  t.PostSlots(1, 1);
  auto [s, r] = SendAndPollBoth(t, 100);
  EXPECT_EQ(s.status, sender);
  EXPECT_EQ(r.status, receiver);
  EXPECT_EQ(r.wr_id, 7u);
  EXPECT_EQ(t.rbuf[0], 0);
  ExpectNextWqeUnused(t, 1001, 1);
}

TEST_F(SrqTest, SmallSendIntoAShortSrqBufferFailsBothSides) {
  ExpectSmallSendFailsBothSides(*this, Sge(&rbuf[0], 50, rmr), IBV_WC_REM_INV_REQ_ERR,
                                IBV_WC_LOC_LEN_ERR);
}

TEST_F(SrqTest, SmallSendIntoAnSrqWqeWithABadLkeyFailsBothSides) {
  const ibv_sge bad_key{reinterpret_cast<uintptr_t>(&rbuf[0]), kSlot, rmr->lkey ^ 0x5a};
  ExpectSmallSendFailsBothSides(*this, bad_key, IBV_WC_REM_OP_ERR, IBV_WC_LOC_PROT_ERR);
}

TEST_F(SrqTest, SmallSendSpansTwoSgesOfAnSrqWqe) {
  ibv_sge sges[2] = {Sge(&rbuf[0], 30, rmr), Sge(&rbuf[kSlot], kSlot, rmr)};
  ibv_recv_wr wr{};
  wr.wr_id = 7;
  wr.sg_list = sges;
  wr.num_sge = 2;
  ibv_recv_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_srq_recv(srq, &wr, &bad), 0);
  PostSlots(2, 1);
  auto [s, r] = SendAndPollBoth(*this, 100);
  EXPECT_EQ(s.status, IBV_WC_SUCCESS);
  EXPECT_EQ(r.status, IBV_WC_SUCCESS);
  EXPECT_EQ(r.wr_id, 7u);
  EXPECT_EQ(r.byte_len, 100u);
  EXPECT_EQ(rbuf[0], 0x5a);
  EXPECT_EQ(rbuf[29], 0x5a);
  EXPECT_EQ(rbuf[30], 0);
  EXPECT_EQ(rbuf[kSlot], 0x5a);
  EXPECT_EQ(rbuf[kSlot + 69], 0x5a);
  EXPECT_EQ(rbuf[kSlot + 70], 0);
  ExpectNextWqeUnused(*this, 1002, 2);
}

// A WRITE_WITH_IMM to a QP on an SRQ consumes a WQE of the SRQ (it used to
// wait for one in the QP's own receive queue, which such a QP has not).
TEST_F(SrqTest, WriteWithImmConsumesAnSrqWqe) {
  std::vector<uint8_t> target(512, 0);
  ibv_mr* tmr = ibv_reg_mr(pd, target.data(), target.size(),
                           IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(tmr, nullptr);
  PostSlots(0, 1);
  memset(sbuf.data(), 0x77, 40);
  ibv_sge sge = Sge(sbuf.data(), 40, smr);
  ibv_send_wr wr{};
  wr.wr_id = 9;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = 0xfeed;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(&target[8]);
  wr.wr.rdma.rkey = tmr->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(tx[1], &wr, &bad), 0);
  auto r = PollN(rcq, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(r[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(r[0].wr_id, 1000u);
  EXPECT_EQ(r[0].imm_data, 0xfeedu);
  EXPECT_EQ(r[0].byte_len, 40u);
  EXPECT_EQ(r[0].qp_num, rx[1]->qp_num);
  auto s = PollN(scq, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(target[8], 0x77);
  EXPECT_EQ(target[47], 0x77);
  EXPECT_EQ(target[48], 0);
  EXPECT_EQ(rbuf[0], 0);  // the receive buffer is not written
  EXPECT_EQ(ibv_dereg_mr(tmr), 0);
}

TEST_F(SrqTest, PostRecvOnSrqQpIsRefusedAndDestroyIsBusy) {
  EXPECT_EQ(PostRecvTo(rx[0], 1, Sge(rbuf.data(), 16, rmr)), EINVAL);
  EXPECT_EQ(ibv_destroy_srq(srq), EBUSY);
  ibv_qp_attr qa;
  ibv_qp_init_attr qi;
  ASSERT_EQ(ibv_query_qp(rx[0], &qa, 0, &qi), 0);
  EXPECT_EQ(qi.srq, srq);
  uint32_t num = 0;
  EXPECT_EQ(ibv_get_srq_num(srq, &num), 0);
  EXPECT_NE(num, 0u);
}

TEST_F(SrqTest, LimitEventFiresOnceAndDisarms) {
  PostSlots(0, 5);
  ibv_srq_attr a{};
  a.srq_limit = 3;
  ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), 0);
  ibv_srq_attr q{};
  ASSERT_EQ(ibv_query_srq(srq, &q), 0);
  EXPECT_EQ(q.srq_limit, 3u);
  ibv_async_event ev;
  SendOne(0, 1);  // 4 left
  SendOne(1, 2);  // 3 left: not below the limit yet
  EXPECT_FALSE(NextAsyncEvent(ctx, &ev, 50));
  SendOne(0, 3);  // 2 left
  ASSERT_TRUE(NextAsyncEvent(ctx, &ev, 2000));
  EXPECT_EQ(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED);
  EXPECT_EQ(ev.element.srq, srq);
  ASSERT_EQ(ibv_query_srq(srq, &q), 0);
  EXPECT_EQ(q.srq_limit, 0u) << "disarmed after firing";
  SendOne(1, 4);  // 1 left: no second event
  EXPECT_FALSE(NextAsyncEvent(ctx, &ev, 100));
}

// As ibv_destroy_qp for its QP (async_events_test.cpp): the SRQ's event not
// read yet is gone with it, and async_fd no longer polls readable for it.
TEST_F(SrqTest, DestroySrqDropsItsUnreadLimitEvent) {
  PostSlots(0, 3);
  ibv_srq_attr a{};
  a.srq_limit = 2;
  ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), 0);
  SendOne(0, 1);  // 2 left: not below
  SendOne(0, 2);  // 1 left: IBV_EVENT_SRQ_LIMIT_REACHED
  pollfd p{ctx->async_fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 2000), 1) << "no IBV_EVENT_SRQ_LIMIT_REACHED";
  for (ibv_qp*& q : rx) {
    ASSERT_EQ(ibv_destroy_qp(q), 0);
    q = nullptr;
  }
  ASSERT_EQ(ibv_destroy_srq(srq), 0);
  srq = nullptr;
  EXPECT_EQ(poll(&p, 1, 0), 0) << "async_fd still readable for the destroyed SRQ's event";
}

TEST_F(SrqTest, ModifyRules) {
  PostSlots(0, 10);
  ibv_srq_attr a{};
  a.srq_limit = kSlots + 1;
  EXPECT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), EINVAL) << "limit above max_wr";
  a.max_wr = 5;
  EXPECT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR), EINVAL) << "smaller than what is queued";
  a.max_wr = 64;
  EXPECT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR), 0) << "resize keeps the WQEs";
  ibv_srq_attr q{};
  ASSERT_EQ(ibv_query_srq(srq, &q), 0);
  EXPECT_EQ(q.max_wr, 64u);
  EXPECT_EQ(q.max_sge, 2u);
  ibv_wc wc = SendOne(0, 9);
  EXPECT_EQ(wc.wr_id, 1000u);
  a.max_wr = 1u << 30;
  EXPECT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR), EINVAL);
}

TEST_F(SrqTest, ErrorRaisesLastWqeReachedAndKeepsSrqWqes) {
  PostSlots(0, 4);
  ibv_qp_attr e{};
  e.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(rx[0], &e, IBV_QP_STATE), 0);
  ibv_async_event ev;
  ASSERT_TRUE(NextAsyncEvent(ctx, &ev, 2000));
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
  EXPECT_EQ(ev.element.qp, rx[0]);
  ibv_wc wc[4];
  EXPECT_EQ(ibv_poll_cq(rcq, 4, wc), 0) << "the SRQ's WQEs are not flushed";
  // The other QP still receives into the first WQE the SRQ was given.
  ibv_wc got = SendOne(1, 0x77);
  EXPECT_EQ(got.status, IBV_WC_SUCCESS);
  EXPECT_EQ(got.wr_id, 1000u);
  EXPECT_EQ(rbuf[0], 0x77);
}

TEST(SrqArgs, ExtendedCreateBasicAndXrcNeedsADomain) {
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
  ibv_srq_init_attr_ex x{};
  x.attr.max_wr = 8;
  x.attr.max_sge = 1;
  x.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ;
  x.srq_type = IBV_SRQT_BASIC;
  x.pd = pd;
  x.cq = cq;
  ibv_srq* s = ibv_create_srq_ex(ctx, &x);  // through the context's create_srq_ex
  ASSERT_NE(s, nullptr);
  x.srq_type = IBV_SRQT_XRC;  // without IBV_SRQ_INIT_ATTR_XRCD (xrc_test.cpp has the rest)
  errno = 0;
  EXPECT_EQ(ibv_create_srq_ex(ctx, &x), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 0;
  errno = 0;
  EXPECT_EQ(ibv_create_srq(pd, &sa), nullptr);
  EXPECT_EQ(errno, EINVAL);
  sa.attr.max_wr = 4;
  sa.attr.max_sge = 1000;
  EXPECT_EQ(ibv_create_srq(pd, &sa), nullptr);
  EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY) << "the SRQ uses the PD";
  EXPECT_EQ(ibv_destroy_srq(s), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  ibv_close_device(ctx);
}

}  // namespace
}  // namespace softrdma::test
