// Memory windows (type 1 through ibv_bind_mw, type 2 through IBV_WR_BIND_MW
// and ibv_wr_bind_mw), LOCAL_INV and SEND_WITH_INV, through the public API.
// The window owner is QP b; a accesses it. Data verified byte for byte.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <vector>

#include "verbs_fixture.h"

namespace softrdma::test {
namespace {

constexpr int kWinRw = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
// The MR itself grants no remote access: only the windows do.
constexpr int kBindable = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;

class Mw : public LoopbackPair {
 public:
  void SetUp() override {
    LoopbackPair::SetUp();
    target.assign(4096, 0);
    local.assign(4096, 0);
    tmr = Reg(target.data(), target.size(), kBindable);
    lmr = Reg(local.data(), local.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_TRUE(tmr && lmr);
  }
  void TearDown() override {
    for (ibv_mw* w : mws) ibv_dealloc_mw(w);
    for (ibv_qp* q : extra_qps) ibv_destroy_qp(q);
    LoopbackPair::TearDown();
  }
  ibv_mw* Alloc(ibv_mw_type type) {
    ibv_mw* w = ibv_alloc_mw(pd, type);
    if (w) mws.push_back(w);
    return w;
  }
  uint64_t Addr(size_t off) { return reinterpret_cast<uintptr_t>(target.data()) + off; }
  // Type 1 bind on b; returns the completion status.
  int Bind1(ibv_mw* w, ibv_mr* mr, size_t off, size_t len, unsigned access, int* wc_status) {
    ibv_mw_bind mb{};
    mb.wr_id = 77;
    mb.send_flags = IBV_SEND_SIGNALED;
    mb.bind_info = {mr, mr ? Addr(off) : 0, len, access};
    int rc = ibv_bind_mw(b, w, &mb);
    if (rc) return rc;
    auto wc = PollN(cq_b, 1);
    *wc_status = wc.size() == 1 ? wc[0].status : -1;
    if (wc.size() == 1 && wc[0].status == IBV_WC_SUCCESS) {
      EXPECT_EQ(wc[0].opcode, IBV_WC_BIND_MW);
    }
    return 0;
  }
  // Type 2 bind through ibv_post_send on qp; returns the completion status.
  int Bind2(ibv_qp* qp, ibv_cq* cq, ibv_mw* w, uint32_t rkey, ibv_mr* mr, size_t off, size_t len,
            unsigned access) {
    ibv_send_wr wr{};
    wr.wr_id = 88;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind_mw.mw = w;
    wr.bind_mw.rkey = rkey;
    wr.bind_mw.bind_info = {mr, Addr(off), len, access};
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(qp, &wr, &bad)) return -rc;
    auto wc = PollN(cq, 1);
    if (wc.size() != 1) return -1000;
    if (wc[0].status == IBV_WC_SUCCESS) {
      EXPECT_EQ(wc[0].opcode, IBV_WC_BIND_MW);
    }
    return wc[0].status;
  }
  // One RDMA op from `from` (local buffer at loff), returns the status.
  int Rdma(ibv_qp* from, ibv_cq* cq, ibv_wr_opcode op, size_t loff, uint64_t raddr, uint32_t len,
           uint32_t rkey) {
    ibv_sge s{reinterpret_cast<uintptr_t>(local.data()) + loff, len, lmr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 5;
    wr.opcode = op;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma = {raddr, rkey};
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(from, &wr, &bad)) return -rc;
    auto wc = PollN(cq, 1);
    return wc.size() == 1 ? wc[0].status : -1000;
  }
  int Local(ibv_qp* qp, ibv_cq* cq, uint32_t rkey, ibv_wc* out = nullptr) {
    ibv_send_wr wr{};
    wr.wr_id = 9;
    wr.opcode = IBV_WR_LOCAL_INV;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.invalidate_rkey = rkey;
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(qp, &wr, &bad)) return -rc;
    auto wc = PollN(cq, 1);
    if (wc.size() != 1) return -1000;
    if (out) *out = wc[0];
    return wc[0].status;
  }
  ibv_qp_state State(ibv_qp* qp) {
    ibv_qp_attr at{};
    ibv_qp_init_attr ia{};
    ibv_query_qp(qp, &at, IBV_QP_STATE, &ia);
    return at.qp_state;
  }
  void Pattern(size_t off, size_t len, uint8_t seed) {
    for (size_t i = 0; i < len; ++i) local[off + i] = static_cast<uint8_t>(seed + i * 7);
  }

  std::vector<uint8_t> target, local;
  ibv_mr *tmr = nullptr, *lmr = nullptr;
  std::vector<ibv_mw*> mws;
  std::vector<ibv_qp*> extra_qps;
};

TEST_F(Mw, DeviceAdvertisesWindows) {
  ibv_device_attr at{};
  ASSERT_EQ(ibv_query_device(ctx, &at), 0);
  EXPECT_GT(at.max_mw, 0);
  EXPECT_TRUE(at.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
  EXPECT_TRUE(at.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
  errno = 0;
  EXPECT_EQ(ibv_alloc_mw(pd, static_cast<ibv_mw_type>(3)), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(Mw, Type1WriteReadThroughWindow) {
  ibv_mw* w = Alloc(IBV_MW_TYPE_1);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->type, IBV_MW_TYPE_1);
  const uint32_t before = w->rkey;
  int st = -1;
  ASSERT_EQ(Bind1(w, tmr, 512, 1024, kWinRw, &st), 0);
  ASSERT_EQ(st, IBV_WC_SUCCESS);
  EXPECT_EQ(w->rkey, ibv_inc_rkey(before));  // same index, next key byte
  // The MR's own rkey grants nothing remote; the window does.
  Pattern(0, 1024, 3);
  ASSERT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_WRITE, 0, Addr(512), 1024, w->rkey), IBV_WC_SUCCESS);
  EXPECT_TRUE(std::equal(local.begin(), local.begin() + 1024, target.begin() + 512));
  EXPECT_EQ(target[511], 0);
  EXPECT_EQ(target[1536], 0);
  ASSERT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_READ, 2048, Addr(600), 100, w->rkey), IBV_WC_SUCCESS);
  EXPECT_TRUE(std::equal(local.begin() + 2048, local.begin() + 2148, target.begin() + 600));
}

// LOCAL_WRITE in a bind's access is accepted and grants nothing (a window
// has no lkey): pyverbs' MWTest binds with LOCAL_WRITE | REMOTE_WRITE, and
// test_qp_ex_rc_bind_mw with LOCAL_WRITE alone and expects a remote access
// error on a write through the window.
TEST_F(Mw, Type1BindWithLocalWriteInItsAccess) {
  ibv_mw* w = Alloc(IBV_MW_TYPE_1);
  int st = -1;
  ASSERT_EQ(Bind1(w, tmr, 0, 1024, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &st), 0);
  ASSERT_EQ(st, IBV_WC_SUCCESS);
  Pattern(0, 256, 41);
  ASSERT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_WRITE, 0, Addr(0), 256, w->rkey), IBV_WC_SUCCESS);
  EXPECT_TRUE(std::equal(local.begin(), local.begin() + 256, target.begin()));
  // What the window grants is REMOTE_WRITE only.
  EXPECT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_READ, 0, Addr(0), 64, w->rkey), IBV_WC_REM_ACCESS_ERR);
}

TEST_F(Mw, Type2BindWithLocalWriteOnlyGrantsNoRemoteAccess) {
  ibv_mw* w = Alloc(IBV_MW_TYPE_2);
  const uint32_t key = ibv_inc_rkey(w->rkey);
  ASSERT_EQ(Bind2(b, cq_b, w, key, tmr, 0, 4096, IBV_ACCESS_LOCAL_WRITE), IBV_WC_SUCCESS);
  EXPECT_EQ(State(b), IBV_QPS_RTS);
  EXPECT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_WRITE, 0, Addr(0), 64, key), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(target[0], 0);
}

TEST_F(Mw, Type1OutsideWindowFails) {
  ibv_mw* w = Alloc(IBV_MW_TYPE_1);
  int st = -1;
  ASSERT_EQ(Bind1(w, tmr, 512, 1024, kWinRw, &st), 0);
  ASSERT_EQ(st, IBV_WC_SUCCESS);
  EXPECT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_WRITE, 0, Addr(1500), 64, w->rkey), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(target[1535], 0);
}

TEST_F(Mw, Type1WrongAccessFails) {
  ibv_mw* w = Alloc(IBV_MW_TYPE_1);
  int st = -1;
  ASSERT_EQ(Bind1(w, tmr, 0, 1024, IBV_ACCESS_REMOTE_READ, &st), 0);
  ASSERT_EQ(st, IBV_WC_SUCCESS);
  ASSERT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_READ, 0, Addr(0), 64, w->rkey), IBV_WC_SUCCESS);
  EXPECT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_WRITE, 0, Addr(0), 64, w->rkey), IBV_WC_REM_ACCESS_ERR);
}

TEST_F(Mw, Type1RebindChangesKeyAndOldFails) {
  ibv_mw* w = Alloc(IBV_MW_TYPE_1);
  int st = -1;
  ASSERT_EQ(Bind1(w, tmr, 0, 1024, kWinRw, &st), 0);
  ASSERT_EQ(st, IBV_WC_SUCCESS);
  const uint32_t old_key = w->rkey;
  ASSERT_EQ(Bind1(w, tmr, 2048, 1024, kWinRw, &st), 0);
  ASSERT_EQ(st, IBV_WC_SUCCESS);
  EXPECT_NE(w->rkey, old_key);
  EXPECT_EQ(w->rkey >> 8, old_key >> 8);
  Pattern(0, 64, 9);
  ASSERT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_WRITE, 0, Addr(2048), 64, w->rkey), IBV_WC_SUCCESS);
  EXPECT_TRUE(std::equal(local.begin(), local.begin() + 64, target.begin() + 2048));
  EXPECT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_WRITE, 0, Addr(0), 64, old_key), IBV_WC_REM_ACCESS_ERR);
}

TEST_F(Mw, Type1ZeroLengthBindUnbinds) {
  ibv_mw* w = Alloc(IBV_MW_TYPE_1);
  int st = -1;
  ASSERT_EQ(Bind1(w, tmr, 0, 1024, kWinRw, &st), 0);
  ASSERT_EQ(st, IBV_WC_SUCCESS);
  const uint32_t bound = w->rkey;
  ASSERT_EQ(Bind1(w, nullptr, 0, 0, 0, &st), 0);
  ASSERT_EQ(st, IBV_WC_SUCCESS);
  EXPECT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_WRITE, 0, Addr(0), 64, bound), IBV_WC_REM_ACCESS_ERR);
  // No window points into the MR any more: it can be deregistered.
  EXPECT_EQ(ibv_dereg_mr(tmr), 0);
  mrs.erase(std::remove(mrs.begin(), mrs.end(), tmr), mrs.end());
}

TEST_F(Mw, Type2BindThroughPostSend) {
  ibv_mw* w = Alloc(IBV_MW_TYPE_2);
  ASSERT_NE(w, nullptr);
  const uint32_t key = ibv_inc_rkey(w->rkey);
  ASSERT_EQ(Bind2(b, cq_b, w, key, tmr, 100, 1000, kWinRw), IBV_WC_SUCCESS);
  Pattern(0, 1000, 21);
  ASSERT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_WRITE, 0, Addr(100), 1000, key), IBV_WC_SUCCESS);
  EXPECT_TRUE(std::equal(local.begin(), local.begin() + 1000, target.begin() + 100));
  ASSERT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_READ, 3000, Addr(100), 1000, key), IBV_WC_SUCCESS);
  EXPECT_TRUE(std::equal(local.begin() + 3000, local.begin() + 4000, target.begin() + 100));
  // Bound already: a type 2 window must be invalidated before it is rebound.
  EXPECT_EQ(Bind2(b, cq_b, w, ibv_inc_rkey(key), tmr, 0, 64, kWinRw), IBV_WC_MW_BIND_ERR);
}

// IBV_ACCESS_ZERO_BASED: the window is addressed from 0 (offsets into it),
// as rxe binds type 2 windows; its MR's own addresses are outside it.
TEST_F(Mw, Type2ZeroBasedWindowIsAddressedFromZero) {
  ibv_mw* w = Alloc(IBV_MW_TYPE_2);
  ASSERT_NE(w, nullptr);
  const uint32_t key = ibv_inc_rkey(w->rkey);
  ASSERT_EQ(Bind2(b, cq_b, w, key, tmr, 1000, 512, kWinRw | IBV_ACCESS_ZERO_BASED), IBV_WC_SUCCESS);
  Pattern(0, 100, 33);
  ASSERT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_WRITE, 0, 12, 100, key), IBV_WC_SUCCESS);
  EXPECT_TRUE(std::equal(local.begin(), local.begin() + 100, target.begin() + 1012));
  ASSERT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_READ, 2000, 0, 512, key), IBV_WC_SUCCESS);
  EXPECT_TRUE(std::equal(local.begin() + 2000, local.begin() + 2512, target.begin() + 1000));
  // The last byte is 511; the MR's address of the window's first byte is
  // not an address of the window.
  EXPECT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_READ, 0, 500, 13, key), IBV_WC_REM_ACCESS_ERR);
}

TEST_F(Mw, Type2ZeroBasedWindowRefusesTheMrAddresses) {
  ibv_mw* w = Alloc(IBV_MW_TYPE_2);
  const uint32_t key = ibv_inc_rkey(w->rkey);
  ASSERT_EQ(Bind2(b, cq_b, w, key, tmr, 1000, 512, kWinRw | IBV_ACCESS_ZERO_BASED), IBV_WC_SUCCESS);
  EXPECT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_READ, 0, Addr(1000), 8, key), IBV_WC_REM_ACCESS_ERR);
}

TEST_F(Mw, Type1ZeroBasedBindIsRefused) {
  ibv_mw* w = Alloc(IBV_MW_TYPE_1);
  ASSERT_NE(w, nullptr);
  int st = -1;
  EXPECT_EQ(Bind1(w, tmr, 0, 64, kWinRw | IBV_ACCESS_ZERO_BASED, &st), EINVAL);
  EXPECT_EQ(State(b), IBV_QPS_RTS);  // refused before posting: the QP is untouched
}

TEST_F(Mw, Type2KeyMustNameTheWindow) {
  ibv_mw* w = Alloc(IBV_MW_TYPE_2);
  const uint32_t other_index = ((w->rkey >> 8) ^ 1) << 8 | 0x42;
  EXPECT_EQ(Bind2(b, cq_b, w, other_index, tmr, 0, 64, kWinRw), IBV_WC_MW_BIND_ERR);
  EXPECT_EQ(State(b), IBV_QPS_ERR);
}

TEST_F(Mw, Type2OnlyThroughItsQp) {
  ibv_mw* w = Alloc(IBV_MW_TYPE_2);
  const uint32_t key = ibv_inc_rkey(w->rkey);
  ASSERT_EQ(Bind2(b, cq_b, w, key, tmr, 0, 1024, kWinRw), IBV_WC_SUCCESS);
  // Another connected pair in the same PD: c -> d.
  QpParams p;
  ibv_qp* c = CreateRcQp(pd, cq_a, cq_a, p);
  ibv_qp* d = CreateRcQp(pd, cq_b, cq_b, p);
  ASSERT_TRUE(c && d);
  extra_qps = {c, d};
  ASSERT_EQ(ToInit(c), 0);
  ASSERT_EQ(ToInit(d), 0);
  ASSERT_EQ(Connect(ctx, c, gid, d->qp_num, p), 0);
  ASSERT_EQ(Connect(ctx, d, gid, c->qp_num, p), 0);
  EXPECT_EQ(Rdma(c, cq_a, IBV_WR_RDMA_WRITE, 0, Addr(0), 64, key), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_WRITE, 0, Addr(0), 64, key), IBV_WC_SUCCESS);
}

TEST_F(Mw, Type2WindowDiesWithItsQp) {
  // Bound through a QP that is then destroyed: its number will be handed out
  // again, so the window must be unbound (free to bind anew), not left open.
  QpParams p;
  ibv_qp* c = CreateRcQp(pd, cq_a, cq_a, p);
  ibv_qp* d = CreateRcQp(pd, cq_b, cq_b, p);
  ASSERT_TRUE(c && d);
  ASSERT_EQ(ToInit(c), 0);
  ASSERT_EQ(ToInit(d), 0);
  ASSERT_EQ(Connect(ctx, c, gid, d->qp_num, p), 0);
  ASSERT_EQ(Connect(ctx, d, gid, c->qp_num, p), 0);
  ibv_mw* w = Alloc(IBV_MW_TYPE_2);
  const uint32_t key = ibv_inc_rkey(w->rkey);
  ASSERT_EQ(Bind2(d, cq_b, w, key, tmr, 0, 1024, kWinRw), IBV_WC_SUCCESS);
  ASSERT_EQ(Rdma(c, cq_a, IBV_WR_RDMA_WRITE, 0, Addr(0), 64, key), IBV_WC_SUCCESS);
  const uint32_t key2 = ibv_inc_rkey(key);
  ASSERT_EQ(ibv_destroy_qp(c), 0);
  ASSERT_EQ(ibv_destroy_qp(d), 0);
  // Unbound with its QP: it binds again (through b) and the old key is dead.
  ASSERT_EQ(Bind2(b, cq_b, w, key2, tmr, 0, 64, kWinRw), IBV_WC_SUCCESS);
  EXPECT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_READ, 0, Addr(0), 64, key2), IBV_WC_SUCCESS);
  // (An access violation moves the QP to ERR, so this comes last.)
  EXPECT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_READ, 0, Addr(0), 64, key), IBV_WC_REM_ACCESS_ERR);
}

TEST_F(Mw, LocalInvalidateKillsType2Key) {
  ibv_mw* w = Alloc(IBV_MW_TYPE_2);
  const uint32_t key = ibv_inc_rkey(w->rkey);
  ASSERT_EQ(Bind2(b, cq_b, w, key, tmr, 0, 1024, kWinRw), IBV_WC_SUCCESS);
  ASSERT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_READ, 0, Addr(0), 64, key), IBV_WC_SUCCESS);
  ibv_wc wc{};
  ASSERT_EQ(Local(b, cq_b, key, &wc), IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_LOCAL_INV);
  // Free again: it can be rebound with a new key.
  const uint32_t key2 = ibv_inc_rkey(key);
  ASSERT_EQ(Bind2(b, cq_b, w, key2, tmr, 0, 64, kWinRw), IBV_WC_SUCCESS);
  ASSERT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_READ, 0, Addr(0), 64, key2), IBV_WC_SUCCESS);
  EXPECT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_READ, 0, Addr(0), 64, key), IBV_WC_REM_ACCESS_ERR);
}

TEST_F(Mw, LocalInvalidateOfRegisteredMrFails) {
  // As in rxe: ibv_reg_mr regions are not fast-registration MRs.
  EXPECT_EQ(Local(b, cq_b, tmr->rkey), IBV_WC_LOC_QP_OP_ERR);
  EXPECT_EQ(State(b), IBV_QPS_ERR);
}

TEST_F(Mw, SendWithInvalidate) {
  ibv_mw* w = Alloc(IBV_MW_TYPE_2);
  const uint32_t key = ibv_inc_rkey(w->rkey);
  ASSERT_EQ(Bind2(b, cq_b, w, key, tmr, 0, 1024, kWinRw), IBV_WC_SUCCESS);
  ibv_sge rs{reinterpret_cast<uintptr_t>(target.data()) + 2048, 256, tmr->lkey};
  ASSERT_EQ(PostRecv(b, 31, &rs, 1), 0);
  Pattern(0, 200, 44);
  ibv_sge ss{reinterpret_cast<uintptr_t>(local.data()), 200, lmr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 32;
  wr.opcode = IBV_WR_SEND_WITH_INV;
  wr.sg_list = &ss;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.invalidate_rkey = key;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a, &wr, &bad), 0);
  auto sw = PollN(cq_a, 1);
  ASSERT_EQ(sw.size(), 1u);
  EXPECT_EQ(sw[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(sw[0].opcode, IBV_WC_SEND);
  auto rw = PollN(cq_b, 1);
  ASSERT_EQ(rw.size(), 1u);
  EXPECT_EQ(rw[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(rw[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(rw[0].byte_len, 200u);
  EXPECT_TRUE(rw[0].wc_flags & IBV_WC_WITH_INV);
  EXPECT_EQ(rw[0].invalidated_rkey, key);
  EXPECT_TRUE(std::equal(local.begin(), local.begin() + 200, target.begin() + 2048));
  EXPECT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_WRITE, 0, Addr(0), 64, key), IBV_WC_REM_ACCESS_ERR);
}

TEST_F(Mw, SendWithInvalidateOfBadKey) {
  ibv_sge rs{reinterpret_cast<uintptr_t>(target.data()), 256, tmr->lkey};
  ASSERT_EQ(PostRecv(b, 31, &rs, 1), 0);
  ibv_sge ss{reinterpret_cast<uintptr_t>(local.data()), 16, lmr->lkey};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND_WITH_INV;
  wr.sg_list = &ss;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.invalidate_rkey = tmr->rkey;  // an MR: cannot be invalidated
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a, &wr, &bad), 0);
  auto rw = PollN(cq_b, 1);
  ASSERT_EQ(rw.size(), 1u);
  EXPECT_EQ(rw[0].status, IBV_WC_REM_INV_REQ_ERR);
  EXPECT_EQ(State(b), IBV_QPS_ERR);
  PollN(cq_a, 1, 200);  // the SEND itself was acknowledged (rc-transport.md §4.6)
}

TEST_F(Mw, BindErrors) {
  std::vector<uint8_t> plain(1024);
  ibv_mr* no_bind = Reg(plain.data(), plain.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mw* w = Alloc(IBV_MW_TYPE_1);
  int st = -1;
  ASSERT_EQ(Bind1(w, no_bind, 0, 0, kWinRw, &st), 0);  // len 0 = unbind: fine
  ASSERT_EQ(st, IBV_WC_SUCCESS);
  ibv_mw_bind mb{};
  mb.send_flags = IBV_SEND_SIGNALED;
  mb.bind_info = {no_bind, reinterpret_cast<uintptr_t>(plain.data()), 64, kWinRw};
  ASSERT_EQ(ibv_bind_mw(b, w, &mb), 0);
  auto wc = PollN(cq_b, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_MW_BIND_ERR);
  EXPECT_EQ(State(b), IBV_QPS_ERR);
}

TEST_F(Mw, BindBeyondTheMrFails) {
  ibv_mw* w = Alloc(IBV_MW_TYPE_2);
  EXPECT_EQ(Bind2(b, cq_b, w, ibv_inc_rkey(w->rkey), tmr, 4000, 200, kWinRw), IBV_WC_MW_BIND_ERR);
  EXPECT_EQ(State(b), IBV_QPS_ERR);
}

TEST_F(Mw, TypeMismatchIsRefusedByTheInline) {
  ibv_mw* w = Alloc(IBV_MW_TYPE_2);
  ibv_mw_bind mb{};
  mb.bind_info = {tmr, Addr(0), 64, kWinRw};
  EXPECT_EQ(ibv_bind_mw(b, w, &mb), EINVAL);  // type 2 binds through a WR
}

TEST_F(Mw, DeallocOfBoundWindow) {
  ibv_mw* w = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
  ASSERT_NE(w, nullptr);
  int st = -1;
  ASSERT_EQ(Bind1(w, tmr, 0, 1024, kWinRw, &st), 0);
  ASSERT_EQ(st, IBV_WC_SUCCESS);
  // The MR cannot go while a window points into it, nor the PD.
  EXPECT_EQ(ibv_dereg_mr(tmr), EBUSY);
  const uint32_t key = w->rkey;
  EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);
  ASSERT_EQ(ibv_dealloc_mw(w), 0);
  EXPECT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_WRITE, 0, Addr(0), 64, key), IBV_WC_REM_ACCESS_ERR);
}

// A bind behind a SEND runs only once the SEND completed: completions in
// posting order, and the window works afterwards.
TEST_F(Mw, BindWaitsForEarlierWork) {
  std::vector<uint8_t> in(64);
  ibv_mr* imr = Reg(in.data(), in.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_sge rs{reinterpret_cast<uintptr_t>(in.data()), 64, imr->lkey};
  ASSERT_EQ(PostRecv(a, 1, &rs, 1), 0);
  ibv_mw* w = Alloc(IBV_MW_TYPE_2);
  const uint32_t key = ibv_inc_rkey(w->rkey);
  ibv_sge ss{reinterpret_cast<uintptr_t>(target.data()), 64, tmr->lkey};
  ibv_send_wr send{}, bind{};
  send.wr_id = 1;
  send.opcode = IBV_WR_SEND;
  send.sg_list = &ss;
  send.num_sge = 1;
  send.send_flags = IBV_SEND_SIGNALED;
  send.next = &bind;
  bind.wr_id = 2;
  bind.opcode = IBV_WR_BIND_MW;
  bind.send_flags = IBV_SEND_SIGNALED;
  bind.bind_mw = {w, key, {tmr, Addr(0), 128, kWinRw}};
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(b, &send, &bad), 0);
  auto wc = PollN(cq_b, 2);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[0].opcode, IBV_WC_SEND);
  EXPECT_EQ(wc[1].wr_id, 2u);
  EXPECT_EQ(wc[1].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[1].opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(PollN(cq_a, 1).size(), 1u);
  EXPECT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_READ, 0, Addr(64), 64, key), IBV_WC_SUCCESS);
}

// ibv_wr_bind_mw on a QP created with create_qp_ex.
TEST_F(Mw, Type2BindThroughWrApi) {
  ibv_qp_init_attr_ex ia{};
  ia.send_cq = cq_b;
  ia.recv_cq = cq_b;
  ia.qp_type = IBV_QPT_RC;
  ia.cap = {16, 16, 1, 1, 0};
  ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  ia.pd = pd;
  ia.send_ops_flags = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND;
  ibv_qp* x = ibv_create_qp_ex(ctx, &ia);
  ASSERT_NE(x, nullptr);
  QpParams p;
  ibv_qp* c = CreateRcQp(pd, cq_a, cq_a, p);
  ASSERT_NE(c, nullptr);
  extra_qps = {c, x};
  ASSERT_EQ(ToInit(c), 0);
  ASSERT_EQ(ToInit(x), 0);
  ASSERT_EQ(Connect(ctx, c, gid, x->qp_num, p), 0);
  ASSERT_EQ(Connect(ctx, x, gid, c->qp_num, p), 0);
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(x);
  ASSERT_NE(qx, nullptr);
  ibv_mw* w = Alloc(IBV_MW_TYPE_2);
  const uint32_t key = ibv_inc_rkey(w->rkey);
  ibv_mw_bind_info info{tmr, Addr(256), 512, kWinRw};
  ibv_wr_start(qx);
  qx->wr_id = 61;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_bind_mw(qx, w, key, &info);
  ASSERT_EQ(ibv_wr_complete(qx), 0);
  auto wc = PollN(cq_b, 1);
  ASSERT_EQ(wc.size(), 1u);
  ASSERT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(wc[0].wr_id, 61u);
  Pattern(0, 512, 77);
  ASSERT_EQ(Rdma(c, cq_a, IBV_WR_RDMA_WRITE, 0, Addr(256), 512, key), IBV_WC_SUCCESS);
  EXPECT_TRUE(std::equal(local.begin(), local.begin() + 512, target.begin() + 256));
  // Bound to x: the pair a -> b cannot use it.
  EXPECT_EQ(Rdma(a, cq_a, IBV_WR_RDMA_WRITE, 0, Addr(256), 64, key), IBV_WC_REM_ACCESS_ERR);
  // ibv_wr_local_inv kills it.
  ibv_wr_start(qx);
  qx->wr_id = 62;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_local_inv(qx, key);
  ASSERT_EQ(ibv_wr_complete(qx), 0);
  wc = PollN(cq_b, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_LOCAL_INV);
  EXPECT_EQ(Rdma(c, cq_a, IBV_WR_RDMA_WRITE, 0, Addr(256), 64, key), IBV_WC_REM_ACCESS_ERR);
}

}  // namespace
}  // namespace softrdma::test
