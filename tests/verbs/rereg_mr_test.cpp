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

using ReregMr = LoopbackPair;

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

TEST_F(ReregMr, ChangeTranslationMovesTheRegionUnderNewKeys) {
  std::vector<uint8_t> one(4096, 0x11), two(8192, 0x22);
  ibv_mr* mr = Reg(one.data(), one.size());
  ASSERT_NE(mr, nullptr);
  const uint32_t old_lkey = mr->lkey, old_rkey = mr->rkey;
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, two.data(), two.size(), 0),
            0);
  EXPECT_EQ(mr->addr, two.data());
  EXPECT_EQ(mr->length, two.size());
  EXPECT_NE(mr->lkey, old_lkey);
  EXPECT_NE(mr->rkey, old_rkey);
  EXPECT_EQ(SendFrom(*this, two.data() + 4096, 4096, mr->lkey).data,
            std::vector<uint8_t>(4096, 0x22));
  // The old key is stale: the send fails locally and the QP goes to error.
  EXPECT_EQ(SendFrom(*this, one.data(), 16, old_lkey).status, IBV_WC_LOC_PROT_ERR);
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

}  // namespace
}  // namespace softrdma::test
