// ibv_create_qp_ex and the ibv_wr_* work-request API, through the public
// API (header inlines included); data verified byte for byte.
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "verbs_fixture.h"

namespace softrdma::test {
namespace {

constexpr uint64_t kAllOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                             IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                             IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                             IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV |
                             IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV;

ibv_qp* CreateExQp(ibv_context* ctx, ibv_pd* pd, ibv_cq* cq, uint64_t ops, int* err = nullptr,
                   uint32_t extra_mask = 0) {
  ibv_qp_init_attr_ex a{};
  a.send_cq = cq;
  a.recv_cq = cq;
  a.qp_type = IBV_QPT_RC;
  a.cap = {64, 64, 4, 4, 64};
  a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | extra_mask;
  a.pd = pd;
  a.send_ops_flags = ops;
  errno = 0;
  ibv_qp* qp = ibv_create_qp_ex(ctx, &a);
  if (err) *err = qp ? 0 : errno;
  return qp;
}

class QpEx : public LoopbackPair {
 public:
  void SetUp() override {
    ctx = OpenSoftrdma();
    ASSERT_NE(ctx, nullptr);
    gid = LoopbackGidIndex(ctx);
    ASSERT_GE(gid, 0);
    pd = ibv_alloc_pd(ctx);
    cq_a = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
    cq_b = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
    ASSERT_TRUE(pd && cq_a && cq_b);
    a = CreateExQp(ctx, pd, cq_a, kAllOps);
    b = CreateExQp(ctx, pd, cq_b, kAllOps);
    ASSERT_TRUE(a && b);
    QpParams p;
    ASSERT_EQ(ToInit(a), 0);
    ASSERT_EQ(ToInit(b), 0);
    ASSERT_EQ(Connect(ctx, a, gid, b->qp_num, p), 0);
    ASSERT_EQ(Connect(ctx, b, gid, a->qp_num, p), 0);
    qx = ibv_qp_to_qp_ex(a);
    ASSERT_NE(qx, nullptr);
  }
  ibv_qp_ex* qx = nullptr;
};

std::vector<uint8_t> Pattern(size_t n, int seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7 + seed * 13 + 1);
  return v;
}

// Expects nothing to complete on either CQ for a while.
void ExpectIdle(ibv_cq* x, ibv_cq* y) {
  auto wx = PollN(x, 1, 150);
  auto wy = PollN(y, 1, 50);
  EXPECT_TRUE(wx.empty() && wy.empty()) << "unexpected completion";
}

TEST_F(QpEx, QpToQpExOnlyForExQps) {
  EXPECT_EQ(reinterpret_cast<ibv_qp*>(qx), a);  // ibv_qp is its first member
  ibv_qp* plain = CreateRcQp(pd, cq_a, cq_a, QpParams{});
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(ibv_qp_to_qp_ex(plain), nullptr);  // as rdma-core: no SEND_OPS_FLAGS, no qp_ex
  ibv_destroy_qp(plain);
}

TEST_F(QpEx, MultiWrBatchWithSgeListsInlineAndImm) {
  auto s1 = Pattern(3000, 1), s2 = Pattern(5000, 2), s3 = Pattern(48, 3);
  std::vector<uint8_t> r1(8192, 0), r2(8192, 0), r3(8192, 0);
  ibv_mr* smr1 = Reg(s1.data(), s1.size());
  ibv_mr* smr2 = Reg(s2.data(), s2.size());
  ibv_mr* rmr = Reg(r1.data(), r1.size());
  ibv_mr* rmr2 = Reg(r2.data(), r2.size());
  ibv_mr* rmr3 = Reg(r3.data(), r3.size());
  ASSERT_TRUE(smr1 && smr2 && rmr && rmr2 && rmr3);
  ibv_sge rs[3] = {{reinterpret_cast<uintptr_t>(r1.data()), 8192, rmr->lkey},
                   {reinterpret_cast<uintptr_t>(r2.data()), 8192, rmr2->lkey},
                   {reinterpret_cast<uintptr_t>(r3.data()), 8192, rmr3->lkey}};
  for (int i = 0; i < 3; ++i) ASSERT_EQ(PostRecv(b, 100 + i, &rs[i], 1), 0);

  ibv_wr_start(qx);
  qx->wr_id = 1;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qx);
  ibv_wr_set_sge(qx, smr1->lkey, reinterpret_cast<uintptr_t>(s1.data()), 3000);
  qx->wr_id = 2;
  qx->wr_flags = 0;  // unsignaled: no send completion
  ibv_wr_send_imm(qx, htonl(0xabcdef01));
  ibv_sge list[3] = {{reinterpret_cast<uintptr_t>(&s2[0]), 1000, smr2->lkey},
                     {reinterpret_cast<uintptr_t>(&s2[1500]), 7, smr2->lkey},
                     {reinterpret_cast<uintptr_t>(&s2[4000]), 1000, smr2->lkey}};
  ibv_wr_set_sge_list(qx, 3, list);
  qx->wr_id = 3;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qx);
  std::vector<uint8_t> inl = s3;  // not registered: inline needs no lkey
  ibv_wr_set_inline_data(qx, inl.data(), inl.size());
  inl.assign(inl.size(), 0);  // the data was taken when the setter returned
  ASSERT_EQ(ibv_wr_complete(qx), 0);

  auto rw = PollN(cq_b, 3);
  auto sw = PollN(cq_a, 2);
  ASSERT_EQ(rw.size(), 3u);
  ASSERT_EQ(sw.size(), 2u);
  EXPECT_EQ(sw[0].wr_id, 1u);
  EXPECT_EQ(sw[1].wr_id, 3u);
  for (auto& w : sw) EXPECT_EQ(w.status, IBV_WC_SUCCESS);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(rw[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(rw[i].wr_id, 100u + i);
  }
  EXPECT_EQ(rw[0].byte_len, 3000u);
  EXPECT_TRUE(std::equal(s1.begin(), s1.end(), r1.begin()));
  EXPECT_EQ(rw[1].byte_len, 2007u);
  EXPECT_TRUE(rw[1].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(rw[1].imm_data), 0xabcdef01u);
  std::vector<uint8_t> expect(&s2[0], &s2[1000]);
  expect.insert(expect.end(), &s2[1500], &s2[1507]);
  expect.insert(expect.end(), &s2[4000], &s2[5000]);
  EXPECT_TRUE(std::equal(expect.begin(), expect.end(), r2.begin()));
  EXPECT_EQ(rw[2].byte_len, 48u);
  EXPECT_TRUE(std::equal(s3.begin(), s3.end(), r3.begin()));
}

TEST_F(QpEx, InlineDataList) {
  std::vector<uint8_t> r(256, 0);
  ibv_mr* rmr = Reg(r.data(), r.size());
  ibv_sge rs{reinterpret_cast<uintptr_t>(r.data()), 256, rmr->lkey};
  ASSERT_EQ(PostRecv(b, 9, &rs, 1), 0);
  char x[] = "hello ", y[] = "inline ", z[] = "list";
  ibv_data_buf bufs[3] = {{x, 6}, {y, 7}, {z, 4}};
  ibv_wr_start(qx);
  qx->wr_id = 5;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qx);
  ibv_wr_set_inline_data_list(qx, 3, bufs);
  ASSERT_EQ(ibv_wr_complete(qx), 0);
  auto rw = PollN(cq_b, 1);
  ASSERT_EQ(rw.size(), 1u);
  EXPECT_EQ(rw[0].byte_len, 17u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(r.data()), 17), "hello inline list");
  EXPECT_EQ(PollN(cq_a, 1).size(), 1u);
}

TEST_F(QpEx, AbortLeavesNothingPosted) {
  std::vector<uint8_t> s = Pattern(64, 4), r(64, 0);
  ibv_mr* smr = Reg(s.data(), s.size());
  ibv_mr* rmr = Reg(r.data(), r.size());
  ibv_sge rs{reinterpret_cast<uintptr_t>(r.data()), 64, rmr->lkey};
  ASSERT_EQ(PostRecv(b, 1, &rs, 1), 0);
  ibv_wr_start(qx);
  qx->wr_id = 11;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qx);
  ibv_wr_set_sge(qx, smr->lkey, reinterpret_cast<uintptr_t>(s.data()), 64);
  ibv_wr_abort(qx);
  ExpectIdle(cq_a, cq_b);
  // The QP is still usable and the aborted WR does not reappear.
  ibv_wr_start(qx);
  qx->wr_id = 12;
  ibv_wr_send(qx);
  ibv_wr_set_sge(qx, smr->lkey, reinterpret_cast<uintptr_t>(s.data()), 64);
  ASSERT_EQ(ibv_wr_complete(qx), 0);
  auto sw = PollN(cq_a, 2, 300);
  ASSERT_EQ(sw.size(), 1u);
  EXPECT_EQ(sw[0].wr_id, 12u);
  ASSERT_EQ(PollN(cq_b, 1).size(), 1u);
  EXPECT_TRUE(s == r);
}

// Builds [good SEND, bad WR] and expects wr_complete to fail with nothing
// of the batch executed.
void ExpectBatchRejected(QpEx& t, void (*add_bad)(ibv_qp_ex*, ibv_mr*, uint8_t*), int want) {
  std::vector<uint8_t> s(2048, 1);
  ibv_mr* smr = t.Reg(s.data(), s.size());
  ibv_wr_start(t.qx);
  t.qx->wr_id = 21;
  t.qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(t.qx);
  ibv_wr_set_sge(t.qx, smr->lkey, reinterpret_cast<uintptr_t>(s.data()), 16);
  t.qx->wr_id = 22;
  add_bad(t.qx, smr, s.data());
  int rc = ibv_wr_complete(t.qx);
  if (want) {
    EXPECT_EQ(rc, want);
  } else {
    EXPECT_NE(rc, 0);
  }
  ExpectIdle(t.cq_a, t.cq_b);
}

TEST_F(QpEx, InvalidWrFailsWholeBatch) {
  std::vector<uint8_t> r(64, 0);
  ibv_mr* rmr = Reg(r.data(), r.size());
  ibv_sge rs{reinterpret_cast<uintptr_t>(r.data()), 64, rmr->lkey};
  ASSERT_EQ(PostRecv(b, 1, &rs, 1), 0);  // the good SEND would land here
  // More SGEs than max_send_sge (4).
  ExpectBatchRejected(
      *this,
      [](ibv_qp_ex* q, ibv_mr* m, uint8_t* p) {
        ibv_sge l[5];
        for (auto& e : l) e = {reinterpret_cast<uintptr_t>(p), 1, m->lkey};
        ibv_wr_send(q);
        ibv_wr_set_sge_list(q, 5, l);
      },
      EINVAL);
  // Inline data above max_inline_data (64).
  ExpectBatchRejected(
      *this,
      [](ibv_qp_ex* q, ibv_mr*, uint8_t* p) {
        ibv_wr_send(q);
        ibv_wr_set_inline_data(q, p, 65);
      },
      EINVAL);
  // Refused only by the transport's rules (TSO on RC), at wr_complete.
  ExpectBatchRejected(
      *this,
      [](ibv_qp_ex* q, ibv_mr* m, uint8_t* p) {
        ibv_wr_send_tso(q, p, 14, 1000);
        ibv_wr_set_sge(q, m->lkey, reinterpret_cast<uintptr_t>(p), 16);
      },
      0);
  // ATOMIC_WRITE has no ibv_send_wr encoding: refused at wr_complete.
  ExpectBatchRejected(
      *this,
      [](ibv_qp_ex* q, ibv_mr*, uint8_t* p) {
        uint64_t v = 1;
        ibv_wr_atomic_write(q, 0, reinterpret_cast<uintptr_t>(p), &v);
      },
      EOPNOTSUPP);
  // Nothing of the rejected batches consumed the receive WQE or changed the
  // QP: a good batch goes through.
  std::vector<uint8_t> s = Pattern(32, 5);
  ibv_mr* smr = Reg(s.data(), s.size());
  ibv_wr_start(qx);
  qx->wr_id = 30;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qx);
  ibv_wr_set_sge(qx, smr->lkey, reinterpret_cast<uintptr_t>(s.data()), 32);
  ASSERT_EQ(ibv_wr_complete(qx), 0);
  auto rw = PollN(cq_b, 1);
  ASSERT_EQ(rw.size(), 1u);
  EXPECT_EQ(rw[0].byte_len, 32u);
  EXPECT_TRUE(std::equal(s.begin(), s.end(), r.begin()));
}

TEST_F(QpEx, BatchLargerThanSendQueueFailsWithEnomem) {
  std::vector<uint8_t> s(16, 1);
  ibv_mr* smr = Reg(s.data(), s.size());
  ibv_wr_start(qx);
  for (int i = 0; i < 65; ++i) {  // max_send_wr is 64
    qx->wr_id = static_cast<uint64_t>(i);
    qx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(qx);
    ibv_wr_set_sge(qx, smr->lkey, reinterpret_cast<uintptr_t>(s.data()), 16);
  }
  EXPECT_EQ(ibv_wr_complete(qx), ENOMEM);
  ExpectIdle(cq_a, cq_b);
}

// Each one-sided or memory-window opcode reaches the transport as the same
// ibv_send_wr opcode ibv_post_send would carry: both paths give the same
// answer. (Today the transport implements SEND only and both say
// EOPNOTSUPP; once WRITE/READ/atomics land, both succeed and the completion
// opcode is checked.)
TEST_F(QpEx, OtherOpcodesMatchPostSend) {
  std::vector<uint64_t> local(64, 0), remote(64, 5);
  ibv_mr* lmr = Reg(local.data(), local.size() * 8, IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* rmr = Reg(remote.data(), remote.size() * 8,
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                        IBV_ACCESS_REMOTE_ATOMIC);
  ASSERT_TRUE(lmr && rmr);
  const uint64_t raddr = reinterpret_cast<uintptr_t>(remote.data());
  struct Case {
    ibv_wr_opcode op;
    ibv_wc_opcode wc;
  };
  for (Case c :
       {Case{IBV_WR_RDMA_WRITE, IBV_WC_RDMA_WRITE},
        Case{IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WC_RDMA_WRITE},
        Case{IBV_WR_RDMA_READ, IBV_WC_RDMA_READ}, Case{IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WC_COMP_SWAP},
        Case{IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WC_FETCH_ADD},
        Case{IBV_WR_LOCAL_INV, IBV_WC_LOCAL_INV}}) {
    SCOPED_TRACE(c.op);
    ibv_sge sge{reinterpret_cast<uintptr_t>(local.data()), 8, lmr->lkey};
    if (c.op == IBV_WR_RDMA_WRITE_WITH_IMM) {
      // One receive for the legacy post, one for the ibv_wr_* post.
      ASSERT_EQ(PostRecv(b, 1, nullptr, 0), 0);
      ASSERT_EQ(PostRecv(b, 1, nullptr, 0), 0);
    }
    ibv_send_wr wr{};
    wr.wr_id = 1;
    wr.opcode = c.op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = c.op == IBV_WR_LOCAL_INV ? 0 : 1;
    wr.wr.rdma = {raddr, rmr->rkey};
    if (c.op == IBV_WR_ATOMIC_CMP_AND_SWP || c.op == IBV_WR_ATOMIC_FETCH_AND_ADD)
      wr.wr.atomic = {raddr, 5, 9, rmr->rkey};
    if (c.op == IBV_WR_LOCAL_INV) wr.invalidate_rkey = rmr->rkey;
    ibv_send_wr* bad = nullptr;
    int legacy = ibv_post_send(a, &wr, &bad);
    size_t legacy_wcs = legacy ? 0 : PollN(cq_a, 1).size();

    ibv_wr_start(qx);
    qx->wr_id = 2;
    qx->wr_flags = IBV_SEND_SIGNALED;
    switch (c.op) {
      case IBV_WR_RDMA_WRITE:
        ibv_wr_rdma_write(qx, rmr->rkey, raddr);
        break;
      case IBV_WR_RDMA_WRITE_WITH_IMM:
        ibv_wr_rdma_write_imm(qx, rmr->rkey, raddr, 7);
        break;
      case IBV_WR_RDMA_READ:
        ibv_wr_rdma_read(qx, rmr->rkey, raddr);
        break;
      case IBV_WR_ATOMIC_CMP_AND_SWP:
        ibv_wr_atomic_cmp_swp(qx, rmr->rkey, raddr, 5, 9);
        break;
      case IBV_WR_ATOMIC_FETCH_AND_ADD:
        ibv_wr_atomic_fetch_add(qx, rmr->rkey, raddr, 5);
        break;
      default:
        ibv_wr_local_inv(qx, rmr->rkey);
        break;
    }
    if (c.op != IBV_WR_LOCAL_INV) ibv_wr_set_sge(qx, lmr->lkey, sge.addr, 8);
    int ex = ibv_wr_complete(qx);
    EXPECT_EQ(ex, legacy);
    if (ex == 0) {
      auto w = PollN(cq_a, 1);
      ASSERT_EQ(w.size(), 1u);
      EXPECT_EQ(w[0].wr_id, 2u);
      if (w[0].status == IBV_WC_SUCCESS) {
        EXPECT_EQ(w[0].opcode, c.wc);
      }
      EXPECT_EQ(legacy_wcs, 1u);
    }
    if (c.op == IBV_WR_RDMA_WRITE_WITH_IMM) PollN(cq_b, 2, 100);
  }
}

TEST(QpExCreate, ValidatesCompMaskAndSendOps) {
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  int err = 0;
  EXPECT_EQ(CreateExQp(ctx, pd, cq, IBV_QP_EX_WITH_SEND | (1ull << 40), &err), nullptr);
  EXPECT_EQ(err, EOPNOTSUPP);  // unknown send op: pyverbs skips on this
  EXPECT_EQ(CreateExQp(ctx, pd, cq, IBV_QP_EX_WITH_TSO, &err), nullptr);
  EXPECT_EQ(err, EOPNOTSUPP);
  EXPECT_EQ(CreateExQp(ctx, pd, cq, IBV_QP_EX_WITH_ATOMIC_WRITE, &err), nullptr);
  EXPECT_EQ(err, EOPNOTSUPP);
  // The XRC domain concerns XRC target QPs only; an RC QP ignores it, as
  // the kernel does.
  ibv_qp* rc = CreateExQp(ctx, pd, cq, IBV_QP_EX_WITH_SEND, &err, IBV_QP_INIT_ATTR_XRCD);
  ASSERT_NE(rc, nullptr) << strerror(err);
  EXPECT_EQ(ibv_destroy_qp(rc), 0);
  // perftest's exact form: PD | SEND_OPS_FLAGS with one opcode.
  ibv_qp* qp = CreateExQp(ctx, pd, cq, IBV_QP_EX_WITH_SEND, &err);
  ASSERT_NE(qp, nullptr) << strerror(err);
  EXPECT_NE(ibv_qp_to_qp_ex(qp), nullptr);
  EXPECT_EQ(qp->qp_type, IBV_QPT_RC);
  EXPECT_EQ(qp->state, IBV_QPS_RESET);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  // Zero-valued optional features ask for nothing.
  qp = CreateExQp(ctx, pd, cq, IBV_QP_EX_WITH_SEND, &err, IBV_QP_INIT_ATTR_CREATE_FLAGS);
  ASSERT_NE(qp, nullptr) << strerror(err);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  // No PD.
  ibv_qp_init_attr_ex a{};
  a.send_cq = a.recv_cq = cq;
  a.qp_type = IBV_QPT_RC;
  a.cap = {4, 4, 1, 1, 0};
  a.comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  a.send_ops_flags = IBV_QP_EX_WITH_SEND;
  errno = 0;
  EXPECT_EQ(ibv_create_qp_ex(ctx, &a), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

}  // namespace
}  // namespace softrdma::test
