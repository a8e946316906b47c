// SEND with Invalidate and type 2 window binds on UC QPs (both are UC
// opcodes in ibv_post_send(3)).
#include <algorithm>
#include <vector>

#include "datagram_fixture.h"

namespace softrdma::test {
namespace {

TEST(MwUc, SendWithInvalidateAndRebind) {
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  int gid = LoopbackGidIndex(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq_a = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_cq* cq_b = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ASSERT_TRUE(pd && cq_a && cq_b);
  ibv_qp* a = CreateQpOfType(pd, cq_a, IBV_QPT_UC);
  ibv_qp* b = CreateQpOfType(pd, cq_b, IBV_QPT_UC);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(UcConnect(ctx, a, gid, b->qp_num), 0);
  ASSERT_EQ(UcConnect(ctx, b, gid, a->qp_num), 0);
  std::vector<uint8_t> buf(4096, 0), src(100);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i + 3);
  ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  ibv_mr* smr = ibv_reg_mr(pd, src.data(), src.size(), 0);
  ibv_mw* mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
  ASSERT_TRUE(mr && smr && mw);

  auto bind = [&](uint32_t key) {
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind_mw = {
        mw, key, {mr, reinterpret_cast<uintptr_t>(buf.data()), 1024, IBV_ACCESS_REMOTE_WRITE}};
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(b, &wr, &bad), 0);
    auto wc = PollN(cq_b, 1);
    return wc.size() == 1 ? static_cast<int>(wc[0].status) : -1;
  };
  const uint32_t key = ibv_inc_rkey(mw->rkey);
  ASSERT_EQ(bind(key), IBV_WC_SUCCESS);

  ibv_sge rs{reinterpret_cast<uintptr_t>(&buf[2048]), 256, mr->lkey};
  ibv_recv_wr rwr{};
  rwr.wr_id = 4;
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  ASSERT_EQ(ibv_post_recv(b, &rwr, &rbad), 0);
  ibv_sge ss{reinterpret_cast<uintptr_t>(src.data()), 100, smr->lkey};
  ibv_send_wr swr{};
  swr.opcode = IBV_WR_SEND_WITH_INV;
  swr.sg_list = &ss;
  swr.num_sge = 1;
  swr.send_flags = IBV_SEND_SIGNALED;
  swr.invalidate_rkey = key;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a, &swr, &bad), 0);
  auto sw = PollN(cq_a, 1);
  ASSERT_EQ(sw.size(), 1u);
  EXPECT_EQ(sw[0].status, IBV_WC_SUCCESS);
  auto rw = PollN(cq_b, 1);
  ASSERT_EQ(rw.size(), 1u);
  EXPECT_EQ(rw[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(rw[0].wc_flags & IBV_WC_WITH_INV);
  EXPECT_EQ(rw[0].invalidated_rkey, key);
  EXPECT_TRUE(std::equal(src.begin(), src.end(), buf.begin() + 2048));
  // Invalidated means free again: a type 2 window binds only when free.
  EXPECT_EQ(bind(ibv_inc_rkey(key)), IBV_WC_SUCCESS);

  EXPECT_EQ(ibv_destroy_qp(a), 0);
  EXPECT_EQ(ibv_destroy_qp(b), 0);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dereg_mr(smr), 0);
  ibv_destroy_cq(cq_a);
  ibv_destroy_cq(cq_b);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  ibv_close_device(ctx);
}

}  // namespace
}  // namespace softrdma::test
