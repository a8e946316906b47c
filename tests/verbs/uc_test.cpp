// Unreliable Connection through the public API: data verified at several
// sizes (inline, one record, fragments), immediate data, and a message with
// no receive WQE dropped at the responder while the sender sees success.
#include <vector>

#include "datagram_fixture.h"

namespace softrdma::test {
namespace {

class UcTest : public ::testing::Test {
 public:
  void SetUp() override {
    ctx = OpenSoftrdma();
    ASSERT_NE(ctx, nullptr);
    gid = LoopbackGidIndex(ctx);
    pd = ibv_alloc_pd(ctx);
    cq_a = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    cq_b = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    ASSERT_TRUE(pd && cq_a && cq_b);
    a = CreateQpOfType(pd, cq_a, IBV_QPT_UC);
    b = CreateQpOfType(pd, cq_b, IBV_QPT_UC);
    ASSERT_TRUE(a && b);
    ASSERT_EQ(UcConnect(ctx, a, gid, b->qp_num), 0);
    ASSERT_EQ(UcConnect(ctx, b, gid, a->qp_num), 0);
    src.resize(kMax);
    dst.resize(kMax);
    smr = ibv_reg_mr(pd, src.data(), src.size(), 0);
    dmr = ibv_reg_mr(pd, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_TRUE(smr && dmr);
  }
  void TearDown() override {
    if (a) ibv_destroy_qp(a);
    if (b) ibv_destroy_qp(b);
    if (smr) ibv_dereg_mr(smr);
    if (dmr) ibv_dereg_mr(dmr);
    if (cq_a) ibv_destroy_cq(cq_a);
    if (cq_b) ibv_destroy_cq(cq_b);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
  static constexpr size_t kMax = (1 << 20) + 5;
  ibv_context* ctx = nullptr;
  int gid = -1;
  ibv_pd* pd = nullptr;
  ibv_cq *cq_a = nullptr, *cq_b = nullptr;
  ibv_qp *a = nullptr, *b = nullptr;
  std::vector<uint8_t> src, dst;
  ibv_mr *smr = nullptr, *dmr = nullptr;
};

TEST_F(UcTest, SendRecvAcrossSizes) {
  uint32_t n = 0;
  for (uint32_t len : {0u, 1u, 100u, 2049u, 70000u, static_cast<uint32_t>(kMax)}) {
    SCOPED_TRACE(len);
    for (uint32_t i = 0; i < len; ++i) src[i] = static_cast<uint8_t>(i * 7 + len);
    memset(dst.data(), 0, dst.size());
    ++n;
    ASSERT_EQ(PostRecvTo(b, n, Sge(dst.data(), kMax, dmr)), 0);
    ASSERT_EQ(PostSendTo(a, n, Sge(src.data(), len, smr), IBV_WR_SEND_WITH_IMM, n), 0);
    auto s = PollN(cq_a, 1);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(s[0].opcode, IBV_WC_SEND);
    auto r = PollN(cq_b, 1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(r[0].wr_id, n);
    EXPECT_EQ(r[0].byte_len, len);
    EXPECT_EQ(r[0].src_qp, a->qp_num);
    EXPECT_TRUE(r[0].wc_flags & IBV_WC_WITH_IMM);
    EXPECT_EQ(ntohl(r[0].imm_data), n);
    EXPECT_EQ(memcmp(src.data(), dst.data(), len), 0);
  }
}

TEST_F(UcTest, NoReceiveWqeDropsTheMessageSenderSucceeds) {
  memset(src.data(), 0x11, 64);
  ASSERT_EQ(PostSendTo(a, 1, Sge(src.data(), 64, smr)), 0);
  auto s = PollN(cq_a, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << "UC has no RNR: the sender never knows";
  EXPECT_TRUE(PollN(cq_b, 1, 200).empty()) << "nothing to complete at the responder";
  // The QP keeps working: the next message lands in the next posted WQE.
  ASSERT_EQ(PostRecvTo(b, 2, Sge(dst.data(), 64, dmr)), 0);
  memset(src.data(), 0x22, 64);
  ASSERT_EQ(PostSendTo(a, 3, Sge(src.data(), 64, smr)), 0);
  auto r = PollN(cq_b, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(r[0].wr_id, 2u);
  EXPECT_EQ(dst[0], 0x22);
  EXPECT_EQ(dst[63], 0x22);
  EXPECT_EQ(PollN(cq_a, 1).size(), 1u);
}

TEST_F(UcTest, TooLongMessageIsDroppedQpStaysUsable) {
  ASSERT_EQ(PostRecvTo(b, 1, Sge(dst.data(), 10, dmr)), 0);
  ASSERT_EQ(PostSendTo(a, 1, Sge(src.data(), 100, smr)), 0);
  ASSERT_EQ(PollN(cq_a, 1).size(), 1u);
  EXPECT_TRUE(PollN(cq_b, 1, 200).empty());
  ASSERT_EQ(PostSendTo(a, 2, Sge(src.data(), 10, smr)), 0);
  auto r = PollN(cq_b, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(r[0].byte_len, 10u);
  ibv_qp_attr qa;
  ibv_qp_init_attr qi;
  ASSERT_EQ(ibv_query_qp(b, &qa, IBV_QP_STATE, &qi), 0);
  EXPECT_EQ(qa.qp_state, IBV_QPS_RTS);
}

TEST_F(UcTest, OpcodesOfOtherTypesAreRefused) {
  ibv_sge sg = Sge(src.data(), 8, smr);
  EXPECT_EQ(PostSendTo(a, 1, sg, IBV_WR_RDMA_READ), EINVAL) << "UC has no RDMA READ";
  EXPECT_EQ(PostSendTo(a, 1, sg, IBV_WR_ATOMIC_FETCH_AND_ADD), EINVAL);
}

TEST_F(UcTest, SendErrorGoesToSqeAndRecovers) {
  ibv_sge bad{reinterpret_cast<uintptr_t>(src.data()), 8, smr->lkey ^ 0x55};
  ASSERT_EQ(PostSendTo(a, 1, bad), 0);
  auto s = PollN(cq_a, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_LOC_PROT_ERR);
  ibv_qp_attr qa;
  ibv_qp_init_attr qi;
  ASSERT_EQ(ibv_query_qp(a, &qa, IBV_QP_STATE, &qi), 0);
  EXPECT_EQ(qa.qp_state, IBV_QPS_SQE);
  // Sends posted in SQE are flushed; receives still work.
  ASSERT_EQ(PostSendTo(a, 2, Sge(src.data(), 8, smr)), 0);
  s = PollN(cq_a, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_WR_FLUSH_ERR);
  ASSERT_EQ(PostRecvTo(a, 3, Sge(dst.data(), 8, dmr)), 0);
  ASSERT_EQ(PostSendTo(b, 4, Sge(src.data(), 8, smr)), 0);
  auto r = PollN(cq_a, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 3u);
  EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
  PollN(cq_b, 1);
  // SQE -> RTS resumes sending.
  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  ASSERT_EQ(ibv_modify_qp(a, &rts, IBV_QP_STATE), 0);
  ASSERT_EQ(PostRecvTo(b, 5, Sge(dst.data(), 8, dmr)), 0);
  ASSERT_EQ(PostSendTo(a, 6, Sge(src.data(), 8, smr)), 0);
  s = PollN(cq_a, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS);
  r = PollN(cq_b, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 5u);
}

}  // namespace
}  // namespace softrdma::test
