// Modify to RESET removes the QP's queued completions from its CQs (as mlx4,
// mlx5 and hns do) and leaves those of other QPs on the same CQ, in order.
#include <vector>

#include "verbs_fixture.h"

namespace softrdma::test {
namespace {

class QpReset : public LoopbackPair {
 public:
  // a and b share one CQ (cq_a).
  void SetUp() override {
    ctx = OpenSoftrdma();
    ASSERT_NE(ctx, nullptr);
    gid = LoopbackGidIndex(ctx);
    ASSERT_GE(gid, 0);
    pd = ibv_alloc_pd(ctx);
    cq_a = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    ASSERT_TRUE(pd && cq_a);
    a = CreateRcQp(pd, cq_a, cq_a, QpParams{});
    b = CreateRcQp(pd, cq_a, cq_a, QpParams{});
    ASSERT_TRUE(a && b);
    ASSERT_EQ(ToInit(a), 0);
    ASSERT_EQ(ToInit(b), 0);
    ASSERT_EQ(Connect(ctx, a, gid, b->qp_num, QpParams{}), 0);
    ASSERT_EQ(Connect(ctx, b, gid, a->qp_num, QpParams{}), 0);
  }
  int ModifyState(ibv_qp* qp, ibv_qp_state state) {
    ibv_qp_attr at{};
    at.qp_state = state;
    return ibv_modify_qp(qp, &at, IBV_QP_STATE);
  }
};

TEST_F(QpReset, RemovesOnlyTheResetQpsCompletions) {
  std::vector<uint8_t> buf(64);
  ibv_mr* mr = Reg(buf.data(), buf.size());
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data()), 64, mr->lkey};
  // Flushes queue at once and deterministically: the CQ holds b, a, b, a.
  ASSERT_EQ(PostRecv(b, 10, &sge, 1), 0);
  ASSERT_EQ(ModifyState(b, IBV_QPS_ERR), 0);
  ASSERT_EQ(PostRecv(a, 20, &sge, 1), 0);
  ASSERT_EQ(ModifyState(a, IBV_QPS_ERR), 0);
  ASSERT_EQ(PostRecv(b, 11, &sge, 1), 0);  // in ERR: flushed when posted
  ASSERT_EQ(PostRecv(a, 21, &sge, 1), 0);
  ASSERT_EQ(ModifyState(a, IBV_QPS_RESET), 0);
  auto wc = PollN(cq_a, 8, 200);
  std::vector<uint64_t> ids;
  for (const ibv_wc& w : wc) {
    EXPECT_EQ(w.qp_num, b->qp_num) << "wr_id " << w.wr_id;
    EXPECT_EQ(w.status, IBV_WC_WR_FLUSH_ERR);
    ids.push_back(w.wr_id);
  }
  EXPECT_EQ(ids, (std::vector<uint64_t>{10, 11}));
}

}  // namespace
}  // namespace softrdma::test
