// ibv_rereg_mr through the public API: return codes per ibv_rereg_mr(3),
// and the re-registered MR checked by moving data through it.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "verbs_fixture.h"

namespace softrdma::test {
namespace {

class ReregMr : public LoopbackPair {
 public:
  // What pyverbs' restate_qps does after a failed exchange: both QPs to
  // RESET, then connected again.
  void Reconnect() {
    ibv_qp_attr reset{};
    reset.qp_state = IBV_QPS_RESET;
    for (ibv_qp* qp : {a, b}) {
      ASSERT_EQ(ibv_modify_qp(qp, &reset, IBV_QP_STATE), 0);
      ASSERT_EQ(ToInit(qp), 0);
    }
    ASSERT_EQ(Connect(ctx, a, gid, b->qp_num, QpParams{}), 0);
    ASSERT_EQ(Connect(ctx, b, gid, a->qp_num, QpParams{}), 0);
  }
};

// Sends `len` bytes from (addr, lkey) on a to b: the send's status, and on
// success the bytes that arrived.
struct Result {
  ibv_wc_status status;
  std::vector<uint8_t> data;
};
Result SendFrom(ReregMr& t, void* addr, uint32_t len, uint32_t lkey) {
  std::vector<uint8_t> dst(1 << 16);
  ibv_mr* dmr = t.Reg(dst.data(), dst.size());
  ibv_sge r{reinterpret_cast<uintptr_t>(dst.data()), static_cast<uint32_t>(dst.size()), dmr->lkey};
  EXPECT_EQ(t.PostRecv(t.b, 1, &r, 1), 0);
  ibv_sge s{reinterpret_cast<uintptr_t>(addr), len, lkey};
  EXPECT_EQ(t.PostSend(t.a, 2, &s, 1), 0);
  auto sw = PollN(t.cq_a, 1);
  if (sw.size() != 1) return {IBV_WC_GENERAL_ERR, {}};
  if (sw[0].status != IBV_WC_SUCCESS) return {sw[0].status, {}};
  auto rw = PollN(t.cq_b, 1);
  if (rw.size() != 1) return {IBV_WC_GENERAL_ERR, {}};
  return {rw[0].status, std::vector<uint8_t>(dst.begin(), dst.begin() + rw[0].byte_len)};
}

TEST_F(ReregMr, InputErrorsLeaveTheMrUnchanged) {
  std::vector<uint8_t> buf(4096, 1);
  ibv_mr* mr = Reg(buf.data(), buf.size());
  ASSERT_NE(mr, nullptr);
  const uint32_t lkey = mr->lkey, rkey = mr->rkey;
  errno = 0;
  EXPECT_EQ(ibv_rereg_mr(mr, 1 << 3, nullptr, nullptr, 0, 0), IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, nullptr, 10, 0),
            IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd, nullptr, 0, IBV_ACCESS_LOCAL_WRITE),
            IBV_REREG_MR_ERR_INPUT);  // access without CHANGE_ACCESS
  errno = 0;
  EXPECT_EQ(ibv_rereg_mr(mr, 0, nullptr, nullptr, 0, 0), IBV_REREG_MR_ERR_CMD);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;  // remote write needs local write
  EXPECT_EQ(
      ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_REMOTE_WRITE),
      IBV_REREG_MR_ERR_CMD);
  EXPECT_EQ(errno, EINVAL);
  // An unmapped range.
  void* hole = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(hole, MAP_FAILED);
  munmap(hole, 8192);
  errno = 0;
  EXPECT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, hole, 8192, 0),
            IBV_REREG_MR_ERR_CMD);
  EXPECT_EQ(errno, EFAULT);
  EXPECT_EQ(mr->lkey, lkey);
  EXPECT_EQ(mr->rkey, rkey);
  EXPECT_EQ(mr->addr, buf.data());
  EXPECT_EQ(SendFrom(*this, buf.data(), 100, mr->lkey).data, std::vector<uint8_t>(100, 1));
}

TEST_F(ReregMr, ChangeTranslationMovesTheRegionUnderTheSameKeys) {
  std::vector<uint8_t> one(4096, 0x11), two(8192, 0x22);
  ibv_mr* mr = Reg(one.data(), one.size());
  ASSERT_NE(mr, nullptr);
  const uint32_t lkey = mr->lkey, rkey = mr->rkey;
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, two.data(), two.size(), 0),
            0);
  EXPECT_EQ(mr->addr, two.data());
  EXPECT_EQ(mr->length, two.size());
  EXPECT_EQ(mr->lkey, lkey);
  EXPECT_EQ(mr->rkey, rkey);
  EXPECT_EQ(SendFrom(*this, two.data() + 4096, 4096, mr->lkey).data,
            std::vector<uint8_t>(4096, 0x22));
  // The old memory is no longer registered: the send fails locally.
  EXPECT_EQ(SendFrom(*this, one.data(), 16, lkey).status, IBV_WC_LOC_PROT_ERR);
}

// One RDMA WRITE from a (16 bytes of `src`) to b's `raddr` under `rkey`.
ibv_wc_status WriteTo(ReregMr& t, uint64_t raddr, uint32_t rkey) {
  std::vector<uint8_t> src(16, 0x5a);
  ibv_mr* smr = t.Reg(src.data(), src.size());
  ibv_sge s{reinterpret_cast<uintptr_t>(src.data()), 16, smr->lkey};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma = {raddr, rkey};
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(t.a, &wr, &bad), 0);
  auto wc = PollN(t.cq_a, 1);
  return wc.size() == 1 ? wc[0].status : IBV_WC_GENERAL_ERR;
}

// pyverbs' test_mr_rereg_access: the rkey handed to the peer before
// ibv_rereg_mr(CHANGE_ACCESS) works with the new access afterwards.
TEST_F(ReregMr, ChangeAccessKeepsTheKeysAPeerHolds) {
  std::vector<uint8_t> buf(4096, 0);
  ibv_mr* mr = Reg(buf.data(), buf.size());
  ASSERT_NE(mr, nullptr);
  const uint32_t lkey = mr->lkey, rkey = mr->rkey;
  const uint64_t addr = reinterpret_cast<uintptr_t>(buf.data());
  EXPECT_EQ(WriteTo(*this, addr, rkey), IBV_WC_REM_ACCESS_ERR);  // no remote access yet
  Reconnect();
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
            0);
  EXPECT_EQ(mr->lkey, lkey);
  EXPECT_EQ(mr->rkey, rkey);
  ASSERT_EQ(WriteTo(*this, addr, rkey), IBV_WC_SUCCESS);
  EXPECT_EQ(buf[15], 0x5a);
  // And taken away again (pyverbs' test_mr_rereg_access_bad_flow).
  ASSERT_EQ(
      ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_LOCAL_WRITE), 0);
  EXPECT_EQ(WriteTo(*this, addr, rkey), IBV_WC_REM_ACCESS_ERR);
}

TEST_F(ReregMr, ChangePdAndAccess) {
  std::vector<uint8_t> buf(4096, 0x33);
  ibv_mr* mr = Reg(buf.data(), buf.size());
  ASSERT_NE(mr, nullptr);
  ibv_pd* other = ibv_alloc_pd(ctx);
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, other, nullptr, 0, 0), 0);
  EXPECT_EQ(mr->pd, other);
  EXPECT_EQ(ibv_dealloc_pd(other), EBUSY);  // the MR now uses it
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS, pd, nullptr, 0,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ),
            0);
  EXPECT_EQ(mr->pd, pd);
  EXPECT_EQ(ibv_dealloc_pd(other), 0);
  EXPECT_EQ(SendFrom(*this, buf.data(), 64, mr->lkey).data, std::vector<uint8_t>(64, 0x33));
}

TEST_F(ReregMr, MrInAnotherPdIsRefusedByTheQp) {
  std::vector<uint8_t> buf(4096, 0x44);
  ibv_mr* mr = Reg(buf.data(), buf.size());
  ibv_pd* other = ibv_alloc_pd(ctx);
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, other, nullptr, 0, 0), 0);
  EXPECT_EQ(SendFrom(*this, buf.data(), 64, mr->lkey).status, IBV_WC_LOC_PROT_ERR);
  ibv_dereg_mr(mr);
  mrs.erase(std::find(mrs.begin(), mrs.end(), mr));
  EXPECT_EQ(ibv_dealloc_pd(other), 0);
}

// pyverbs' test_mr_rereg_pd: b receives into its MR; moved to another PD the
// MR fails b's receive (a's SEND ends in REM_OP_ERR); b and a are reset and
// connected again, the MR moved back, and the same exchange works, with no
// completion of the failed round left in the CQs.
TEST_F(ReregMr, ChangePdFailsTheReceiveThenBackAfterReset) {
  std::vector<uint8_t> in(4096, 0), out(64, 0x66);
  ibv_mr* rmr = Reg(in.data(), in.size());
  ibv_mr* smr = Reg(out.data(), out.size());
  ibv_sge r{reinterpret_cast<uintptr_t>(in.data()), 64, rmr->lkey};
  ibv_sge s{reinterpret_cast<uintptr_t>(out.data()), 64, smr->lkey};
  ASSERT_EQ(PostRecv(b, 1, &r, 1), 0);
  ASSERT_EQ(PostRecv(a, 7, &r, 1), 0);  // a's own receive: flushed when a fails
  ASSERT_EQ(PostSend(a, 2, &s, 1), 0);
  ASSERT_EQ(PollN(cq_a, 1).at(0).status, IBV_WC_SUCCESS);
  ASSERT_EQ(PollN(cq_b, 1).at(0).status, IBV_WC_SUCCESS);

  ibv_pd* other = ibv_alloc_pd(ctx);
  ASSERT_EQ(ibv_rereg_mr(rmr, IBV_REREG_MR_CHANGE_PD, other, nullptr, 0, 0), 0);
  ASSERT_EQ(PostRecv(b, 3, &r, 1), 0);
  ASSERT_EQ(PostSend(a, 4, &s, 1), 0);
  auto wc = PollN(cq_a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_OP_ERR);
  wc = PollN(cq_b, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_LOC_PROT_ERR);
  // Left unpolled: a's flushed receive (wr_id 7) in cq_a.

  Reconnect();
  ibv_wc stale{};
  EXPECT_EQ(ibv_poll_cq(cq_a, 1, &stale), 0) << "wr_id " << stale.wr_id;
  EXPECT_EQ(ibv_poll_cq(cq_b, 1, &stale), 0) << "wr_id " << stale.wr_id;
  ASSERT_EQ(ibv_rereg_mr(rmr, IBV_REREG_MR_CHANGE_PD, pd, nullptr, 0, 0), 0);
  ASSERT_EQ(PostRecv(b, 5, &r, 1), 0);
  ASSERT_EQ(PostSend(a, 6, &s, 1), 0);
  wc = PollN(cq_a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 6u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  wc = PollN(cq_b, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 5u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(in[63], 0x66);
  EXPECT_EQ(ibv_dealloc_pd(other), 0);
}

// pyverbs' test_mr_rereg_addr: a receive posted before the MR moved names
// memory the MR no longer covers; it fails, and after a reset the new
// memory receives.
TEST_F(ReregMr, ReceivePostedBeforeTheMoveFails) {
  std::vector<uint8_t> one(4096, 0), two(4096, 0), out(64, 0x77);
  ibv_mr* rmr = Reg(one.data(), one.size());
  ibv_mr* smr = Reg(out.data(), out.size());
  ibv_sge old_r{reinterpret_cast<uintptr_t>(one.data()), 64, rmr->lkey};
  ASSERT_EQ(PostRecv(b, 1, &old_r, 1), 0);
  ASSERT_EQ(ibv_rereg_mr(rmr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, two.data(), two.size(), 0),
            0);
  ibv_sge s{reinterpret_cast<uintptr_t>(out.data()), 64, smr->lkey};
  ASSERT_EQ(PostSend(a, 2, &s, 1), 0);
  auto wc = PollN(cq_a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_OP_ERR);
  EXPECT_EQ(one[0], 0);
  Reconnect();
  ibv_sge new_r{reinterpret_cast<uintptr_t>(two.data()), 64, rmr->lkey};
  ASSERT_EQ(PostRecv(b, 3, &new_r, 1), 0);
  ASSERT_EQ(PostSend(a, 4, &s, 1), 0);
  wc = PollN(cq_a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  wc = PollN(cq_b, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 3u);
  EXPECT_EQ(two[0], 0x77);
}

}  // namespace
}  // namespace softrdma::test
