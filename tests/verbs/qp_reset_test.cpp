// Modify to RESET removes the QP's queued completions from its CQs (as mlx4,
// mlx5 and hns do) and leaves those of other QPs on the same CQ, in order.
#include <vector>

#include "verbs_fixture.h"

namespace softrdma::test {
namespace {

using QpReset = LoopbackPair;

int ModifyState(ibv_qp* qp, ibv_qp_state state) {
  ibv_qp_attr at{};
  at.qp_state = state;
  return ibv_modify_qp(qp, &at, IBV_QP_STATE);
}

TEST_F(QpReset, RemovesOnlyTheResetQpsCompletions) {
  // c shares a's CQ; receives can be posted from INIT on.
  ibv_qp* c = CreateRcQp(pd, cq_a, cq_a, QpParams{});
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(ToInit(c), 0);
  std::vector<uint8_t> buf(64);
  ibv_mr* mr = Reg(buf.data(), buf.size());
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data()), 64, mr->lkey};
  // Flushes queue at once and deterministically: the CQ holds c, a, c, a.
  EXPECT_EQ(PostRecv(c, 10, &sge, 1), 0);
  EXPECT_EQ(ModifyState(c, IBV_QPS_ERR), 0);
  EXPECT_EQ(PostRecv(a, 20, &sge, 1), 0);
  EXPECT_EQ(ModifyState(a, IBV_QPS_ERR), 0);
  EXPECT_EQ(PostRecv(c, 11, &sge, 1), 0);  // in ERR: flushed when posted
  EXPECT_EQ(PostRecv(a, 21, &sge, 1), 0);
  EXPECT_EQ(ModifyState(a, IBV_QPS_RESET), 0);
  auto wc = PollN(cq_a, 8, 200);
  std::vector<uint64_t> ids;
  for (const ibv_wc& w : wc) {
    EXPECT_EQ(w.qp_num, c->qp_num) << "wr_id " << w.wr_id;
    EXPECT_EQ(w.status, IBV_WC_WR_FLUSH_ERR);
    ids.push_back(w.wr_id);
  }
  EXPECT_EQ(ids, (std::vector<uint64_t>{10, 11}));
  EXPECT_EQ(ibv_destroy_qp(c), 0);
}

}  // namespace
}  // namespace softrdma::test
