// RDMA WRITE / WRITE_WITH_IMM / READ and atomics between two QPs of one
// process (the same-process direct path, or the ring under SOFTRDMA_CMA=0):
// data checked byte for byte, completions, and access violations.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "verbs_fixture.h"

namespace softrdma::test {
namespace {

constexpr int kAllRemote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

void Fill(std::vector<uint8_t>& v, uint32_t seed) {
  std::minstd_rand rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng() >> 5);
}

class OneSided : public LoopbackPair {
 public:
  void SetUp() override {
    LoopbackPair::SetUp();
    // The fixture enables REMOTE_WRITE|READ; atomics need their flag too.
    ibv_qp_attr at{};
    at.qp_access_flags =
        IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    ASSERT_EQ(ibv_modify_qp(b, &at, IBV_QP_ACCESS_FLAGS), 0);
    ASSERT_EQ(ibv_modify_qp(a, &at, IBV_QP_ACCESS_FLAGS), 0);
  }

  int PostRdma(ibv_qp* qp, ibv_wr_opcode op, ibv_sge* sg, int n, uint64_t raddr, uint32_t rkey,
               unsigned flags = IBV_SEND_SIGNALED, uint64_t wr_id = 1, uint32_t imm = 0) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.sg_list = sg;
    wr.num_sge = n;
    wr.send_flags = flags;
    wr.imm_data = htonl(imm);
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
  }
  int PostAtomic(ibv_qp* qp, ibv_wr_opcode op, ibv_sge* sg, uint64_t raddr, uint32_t rkey,
                 uint64_t compare_add, uint64_t swap, uint64_t wr_id = 1) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.sg_list = sg;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.atomic.remote_addr = raddr;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = compare_add;
    wr.wr.atomic.swap = swap;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
  }
  ibv_qp_state State(ibv_qp* qp) {
    ibv_qp_attr at{};
    ibv_qp_init_attr ia{};
    ibv_query_qp(qp, &at, IBV_QP_STATE, &ia);
    return at.qp_state;
  }
  // Polls b's CQ (drives its progress) until b reaches ERR or time runs out.
  bool WaitErr(ibv_qp* qp, ibv_cq* cq) {
    uint64_t deadline = NowMs() + 3000;
    while (NowMs() < deadline) {
      ibv_wc wc;
      ibv_poll_cq(cq, 1, &wc);
      if (State(qp) == IBV_QPS_ERR) return true;
    }
    return false;
  }
};

// Splits `len` bytes at `base` into three SGEs of uneven size.
std::vector<ibv_sge> ThreeSges(uint8_t* base, uint32_t len, uint32_t lkey) {
  uint32_t l1 = len / 3, l2 = len / 5;
  std::vector<ibv_sge> s;
  s.push_back({reinterpret_cast<uintptr_t>(base), l1, lkey});
  s.push_back({reinterpret_cast<uintptr_t>(base + l1), l2, lkey});
  s.push_back({reinterpret_cast<uintptr_t>(base + l1 + l2), len - l1 - l2, lkey});
  return s;
}

TEST_F(OneSided, WriteScatterGatherOddSizes) {
  for (uint32_t len : {1u, 7u, 4095u, 65537u, (1u << 20) + 13}) {
    SCOPED_TRACE(len);
    std::vector<uint8_t> src(len + 64), dst(len + 64, 0xee);
    Fill(src, len);
    ibv_mr* ms = Reg(src.data(), src.size());
    ibv_mr* md = Reg(dst.data(), dst.size(), kAllRemote);
    ASSERT_TRUE(ms && md);
    auto sg = ThreeSges(&src[3], len, ms->lkey);
    ASSERT_EQ(PostRdma(a, IBV_WR_RDMA_WRITE, sg.data(), 3, reinterpret_cast<uintptr_t>(&dst[5]),
                       md->rkey),
              0);
    auto wc = PollN(cq_a, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_WRITE);
    EXPECT_EQ(wc[0].byte_len, len);
    EXPECT_TRUE(std::equal(&src[3], &src[3] + len, &dst[5]));
    EXPECT_EQ(dst[4], 0xee);
    EXPECT_EQ(dst[5 + len], 0xee);
    // Nothing reaches the responder's CQ for a plain WRITE.
    ibv_wc none;
    EXPECT_EQ(ibv_poll_cq(cq_b, 1, &none), 0);
  }
}

TEST_F(OneSided, ReadScatterGatherOddSizes) {
  for (uint32_t len : {1u, 9u, 8193u, 300001u, (1u << 20) + 5}) {
    SCOPED_TRACE(len);
    std::vector<uint8_t> remote(len + 64), local(len + 64, 0xcc);
    Fill(remote, len * 7);
    ibv_mr* mr = Reg(remote.data(), remote.size(), kAllRemote);
    ibv_mr* ml = Reg(local.data(), local.size());
    ASSERT_TRUE(mr && ml);
    auto sg = ThreeSges(&local[1], len, ml->lkey);
    ASSERT_EQ(PostRdma(a, IBV_WR_RDMA_READ, sg.data(), 3, reinterpret_cast<uintptr_t>(&remote[11]),
                       mr->rkey),
              0);
    auto wc = PollN(cq_a, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_READ);
    EXPECT_EQ(wc[0].byte_len, len);
    EXPECT_TRUE(std::equal(&remote[11], &remote[11] + len, &local[1]));
    EXPECT_EQ(local[0], 0xcc);
    EXPECT_EQ(local[1 + len], 0xcc);
  }
}

TEST_F(OneSided, WriteWithImmConsumesReceive) {
  uint32_t n = 0;
  for (uint32_t len : {1u, 4097u, (1u << 20) + 3}) {
    SCOPED_TRACE(len);
    std::vector<uint8_t> src(len + 8), dst(len + 8, 0), rbuf(16);
    Fill(src, len + 1);
    ibv_mr* ms = Reg(src.data(), src.size());
    ibv_mr* md = Reg(dst.data(), dst.size(), kAllRemote);
    ibv_mr* mrb = Reg(rbuf.data(), rbuf.size());
    ibv_sge rs{reinterpret_cast<uintptr_t>(rbuf.data()), 16, mrb->lkey};
    ASSERT_EQ(PostRecv(b, 77 + n, &rs, 1), 0);
    auto sg = ThreeSges(&src[1], len, ms->lkey);
    ASSERT_EQ(
        PostRdma(a, IBV_WR_RDMA_WRITE_WITH_IMM, sg.data(), 3, reinterpret_cast<uintptr_t>(&dst[3]),
                 md->rkey, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED, 5, 0xabcdef + n),
        0);
    auto rwc = PollN(cq_b, 1);
    ASSERT_EQ(rwc.size(), 1u);
    EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(rwc[0].wr_id, 77u + n);
    EXPECT_EQ(rwc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_TRUE(rwc[0].wc_flags & IBV_WC_WITH_IMM);
    EXPECT_EQ(ntohl(rwc[0].imm_data), 0xabcdefu + n);
    EXPECT_EQ(rwc[0].byte_len, len);
    // The data is placed before the receive completion.
    EXPECT_TRUE(std::equal(&src[1], &src[1] + len, &dst[3]));
    EXPECT_EQ(dst[2], 0);
    EXPECT_EQ(dst[3 + len], 0);
    EXPECT_EQ(rbuf[0], 0);  // the receive buffer itself is not written
    auto swc = PollN(cq_a, 1);
    ASSERT_EQ(swc.size(), 1u);
    EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(swc[0].opcode, IBV_WC_RDMA_WRITE);
    EXPECT_EQ(swc[0].byte_len, len);
    EXPECT_TRUE(swc[0].wc_flags & IBV_WC_WITH_IMM);
    ++n;
  }
}

TEST_F(OneSided, WriteWithImmWaitsForReceiveUnderRnr) {
  std::vector<uint8_t> src(5000), dst(5000, 0), rbuf(8);
  Fill(src, 9);
  ibv_mr* ms = Reg(src.data(), src.size());
  ibv_mr* md = Reg(dst.data(), dst.size(), kAllRemote);
  ibv_mr* mrb = Reg(rbuf.data(), rbuf.size());
  ibv_sge s{reinterpret_cast<uintptr_t>(src.data()), 5000, ms->lkey};
  ASSERT_EQ(PostRdma(a, IBV_WR_RDMA_WRITE_WITH_IMM, &s, 1, reinterpret_cast<uintptr_t>(dst.data()),
                     md->rkey, IBV_SEND_SIGNALED, 5, 42),
            0);
  // No receive posted yet: RNR; nothing completes meanwhile.
  EXPECT_TRUE(PollN(cq_a, 1, 50).empty());
  ibv_sge rs{reinterpret_cast<uintptr_t>(rbuf.data()), 8, mrb->lkey};
  ASSERT_EQ(PostRecv(b, 78, &rs, 1), 0);
  auto rwc = PollN(cq_b, 1);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(ntohl(rwc[0].imm_data), 42u);
  auto swc = PollN(cq_a, 1);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(src, dst);
}

TEST_F(OneSided, InlineWriteTakesDataAtPostTime) {
  std::vector<uint8_t> src(60), dst(64, 0);
  Fill(src, 11);
  std::vector<uint8_t> expect = src;
  ibv_mr* md = Reg(dst.data(), dst.size(), kAllRemote);
  ibv_sge s{reinterpret_cast<uintptr_t>(src.data()), 60, 0};  // no lkey needed
  ASSERT_EQ(PostRdma(a, IBV_WR_RDMA_WRITE, &s, 1, reinterpret_cast<uintptr_t>(&dst[2]), md->rkey,
                     IBV_SEND_SIGNALED | IBV_SEND_INLINE),
            0);
  std::fill(src.begin(), src.end(), 0);  // the buffer is ours again at once
  auto wc = PollN(cq_a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(std::equal(expect.begin(), expect.end(), &dst[2]));
}

TEST_F(OneSided, AtomicsReturnOriginalValues) {
  alignas(8) uint64_t target[2] = {100, 0};
  alignas(8) uint64_t result = 0;
  ibv_mr* mt = Reg(target, sizeof target, kAllRemote);
  ibv_mr* mres = Reg(&result, 8);
  ibv_sge s{reinterpret_cast<uintptr_t>(&result), 8, mres->lkey};
  const uintptr_t t = reinterpret_cast<uintptr_t>(&target[0]);
  // Failing compare: value unchanged, original returned.
  ASSERT_EQ(PostAtomic(a, IBV_WR_ATOMIC_CMP_AND_SWP, &s, t, mt->rkey, 5, 7), 0);
  auto wc = PollN(cq_a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_COMP_SWAP);
  EXPECT_EQ(wc[0].byte_len, 8u);
  EXPECT_EQ(result, 100u);
  EXPECT_EQ(target[0], 100u);
  // Matching compare: swapped.
  ASSERT_EQ(PostAtomic(a, IBV_WR_ATOMIC_CMP_AND_SWP, &s, t, mt->rkey, 100, 7), 0);
  ASSERT_EQ(PollN(cq_a, 1).size(), 1u);
  EXPECT_EQ(result, 100u);
  EXPECT_EQ(target[0], 7u);
  // Fetch-and-add returns the value before the addition, and wraps.
  ASSERT_EQ(PostAtomic(a, IBV_WR_ATOMIC_FETCH_AND_ADD, &s, t, mt->rkey, 10, 0), 0);
  wc = PollN(cq_a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].opcode, IBV_WC_FETCH_ADD);
  EXPECT_EQ(result, 7u);
  EXPECT_EQ(target[0], 17u);
  ASSERT_EQ(PostAtomic(a, IBV_WR_ATOMIC_FETCH_AND_ADD, &s, t, mt->rkey, ~uint64_t{0}, 0), 0);
  ASSERT_EQ(PollN(cq_a, 1).size(), 1u);
  EXPECT_EQ(result, 17u);
  EXPECT_EQ(target[0], 16u);
  EXPECT_EQ(target[1], 0u);
}

TEST_F(OneSided, AtomicShapeIsCheckedAtPostTime) {
  alignas(8) uint64_t target[2] = {};
  alignas(8) uint64_t result[2] = {};
  ibv_mr* mt = Reg(target, sizeof target, kAllRemote);
  ibv_mr* mres = Reg(result, sizeof result);
  ibv_sge s{reinterpret_cast<uintptr_t>(result), 8, mres->lkey};
  const uintptr_t t = reinterpret_cast<uintptr_t>(target);
  EXPECT_EQ(PostAtomic(a, IBV_WR_ATOMIC_FETCH_AND_ADD, &s, t + 4, mt->rkey, 1, 0), EINVAL);
  ibv_sge s16{reinterpret_cast<uintptr_t>(result), 16, mres->lkey};
  EXPECT_EQ(PostAtomic(a, IBV_WR_ATOMIC_FETCH_AND_ADD, &s16, t, mt->rkey, 1, 0), EINVAL);
  ibv_sge s4{reinterpret_cast<uintptr_t>(result), 4, mres->lkey};
  EXPECT_EQ(PostAtomic(a, IBV_WR_ATOMIC_CMP_AND_SWP, &s4, t, mt->rkey, 1, 0), EINVAL);
  EXPECT_EQ(State(a), IBV_QPS_RTS);  // post-time refusals leave the QP alone
}

TEST_F(OneSided, CompletionsInOrderAndReadSeesEarlierWrite) {
  std::vector<uint8_t> src(3000), dst(3000, 0), back(3000, 0), msg(32), rbuf(32);
  Fill(src, 21);
  ibv_mr* ms = Reg(src.data(), src.size());
  ibv_mr* md = Reg(dst.data(), dst.size(), kAllRemote);
  ibv_mr* mb = Reg(back.data(), back.size());
  ibv_mr* mm = Reg(msg.data(), msg.size());
  ibv_mr* mr = Reg(rbuf.data(), rbuf.size());
  ibv_sge rs{reinterpret_cast<uintptr_t>(rbuf.data()), 32, mr->lkey};
  ASSERT_EQ(PostRecv(b, 9, &rs, 1), 0);
  ibv_sge m{reinterpret_cast<uintptr_t>(msg.data()), 32, mm->lkey};
  ibv_sge s{reinterpret_cast<uintptr_t>(src.data()), 3000, ms->lkey};
  ibv_sge r{reinterpret_cast<uintptr_t>(back.data()), 3000, mb->lkey};
  const uintptr_t d = reinterpret_cast<uintptr_t>(dst.data());
  // SEND (ring), unsignaled WRITE, fenced READ of the same bytes.
  ASSERT_EQ(PostSend(a, 1, &m, 1), 0);
  ASSERT_EQ(PostRdma(a, IBV_WR_RDMA_WRITE, &s, 1, d, md->rkey, 0, 2), 0);
  ASSERT_EQ(
      PostRdma(a, IBV_WR_RDMA_READ, &r, 1, d, md->rkey, IBV_SEND_SIGNALED | IBV_SEND_FENCE, 3), 0);
  ASSERT_EQ(
      PostRdma(a, IBV_WR_RDMA_WRITE, &s, 1, d, md->rkey, IBV_SEND_SIGNALED | IBV_SEND_FENCE, 4), 0);
  auto wc = PollN(cq_a, 3);
  ASSERT_EQ(wc.size(), 3u);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[1].wr_id, 3u);  // the unsignaled WRITE is retired silently
  EXPECT_EQ(wc[2].wr_id, 4u);
  for (auto& w : wc) EXPECT_EQ(w.status, IBV_WC_SUCCESS);
  EXPECT_EQ(back, src);
  ASSERT_EQ(PollN(cq_b, 1).size(), 1u);
}

// A one-sided WR posted to an idle send queue is executed by ibv_post_send
// itself; one posted behind a waiting WQE must wait its turn.
TEST_F(OneSided, WriteBehindRnrBlockedSendDoesNotOvertakeIt) {
  std::vector<uint8_t> src(256), dst(256, 0), msg(16), rbuf(16);
  Fill(src, 31);
  ibv_mr* ms = Reg(src.data(), src.size());
  ibv_mr* md = Reg(dst.data(), dst.size(), kAllRemote);
  ibv_mr* mm = Reg(msg.data(), msg.size());
  ibv_mr* mr = Reg(rbuf.data(), rbuf.size());
  ibv_sge m{reinterpret_cast<uintptr_t>(msg.data()), 16, mm->lkey};
  ibv_sge s{reinterpret_cast<uintptr_t>(src.data()), 256, ms->lkey};
  // No receive at b: the SEND meets RNR NAKs and stays at the head.
  ASSERT_EQ(PostSend(a, 1, &m, 1), 0);
  ASSERT_EQ(PostRdma(a, IBV_WR_RDMA_WRITE, &s, 1, reinterpret_cast<uintptr_t>(dst.data()), md->rkey,
                     IBV_SEND_SIGNALED, 2),
            0);
  EXPECT_TRUE(PollN(cq_a, 1, 50).empty());
  EXPECT_EQ(dst, std::vector<uint8_t>(256, 0));  // not written ahead of the SEND
  ibv_sge rs{reinterpret_cast<uintptr_t>(rbuf.data()), 16, mr->lkey};
  ASSERT_EQ(PostRecv(b, 9, &rs, 1), 0);
  auto wc = PollN(cq_a, 2);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[1].wr_id, 2u);
  EXPECT_EQ(wc[1].opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(wc[1].byte_len, 256u);
  for (auto& w : wc) EXPECT_EQ(w.status, IBV_WC_SUCCESS);
  EXPECT_EQ(dst, src);
}

// A chain: the first WRITE runs at post time, the second fails its rkey
// check (error completion, QP in ERR), the third is flushed and writes nothing.
TEST_F(OneSided, ChainWithBadRkeyInTheMiddle) {
  std::vector<uint8_t> src(64), dst(192, 0);
  Fill(src, 41);
  ibv_mr* ms = Reg(src.data(), src.size());
  ibv_mr* md = Reg(dst.data(), dst.size(), kAllRemote);
  ibv_sge s{reinterpret_cast<uintptr_t>(src.data()), 64, ms->lkey};
  const uintptr_t d = reinterpret_cast<uintptr_t>(dst.data());
  ibv_send_wr wr[3]{};
  for (int i = 0; i < 3; ++i) {
    wr[i].wr_id = 10 + i;
    wr[i].opcode = IBV_WR_RDMA_WRITE;
    wr[i].sg_list = &s;
    wr[i].num_sge = 1;
    wr[i].send_flags = i == 0 ? 0u : static_cast<unsigned>(IBV_SEND_SIGNALED);  // first: unsignaled
    wr[i].wr.rdma.remote_addr = d + 64 * i;
    wr[i].wr.rdma.rkey = i == 1 ? md->rkey ^ 0x55 : md->rkey;
    wr[i].next = i < 2 ? &wr[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a, wr, &bad), 0);
  auto wc = PollN(cq_a, 2);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].wr_id, 11u);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(wc[1].wr_id, 12u);
  EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_TRUE(PollN(cq_a, 1, 50).empty());  // the unsignaled success stays silent
  EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()));
  EXPECT_EQ(std::vector<uint8_t>(dst.begin() + 64, dst.end()), std::vector<uint8_t>(128, 0));
  EXPECT_EQ(State(a), IBV_QPS_ERR);
}

// Posted to an idle SQ with sq_sig_all = 0, unsignaled WRITEs leave no
// completion; a signaled READ after them reports its own and sees their data.
TEST_F(OneSided, UnsignaledWritesThenSignaledRead) {
  std::vector<uint8_t> src(32), dst(32 * 50, 0), back(32 * 50, 1);
  ibv_mr* ms = Reg(src.data(), src.size());
  ibv_mr* md = Reg(dst.data(), dst.size(), kAllRemote);
  ibv_mr* mb = Reg(back.data(), back.size());
  const uintptr_t d = reinterpret_cast<uintptr_t>(dst.data());
  for (int i = 0; i < 50; ++i) {
    std::fill(src.begin(), src.end(), static_cast<uint8_t>(i + 1));
    ibv_sge s{reinterpret_cast<uintptr_t>(src.data()), 32, ms->lkey};
    ASSERT_EQ(PostRdma(a, IBV_WR_RDMA_WRITE, &s, 1, d + 32 * i, md->rkey, 0, 100 + i), 0) << i;
  }
  ibv_sge r{reinterpret_cast<uintptr_t>(back.data()), 32 * 50, mb->lkey};
  ASSERT_EQ(PostRdma(a, IBV_WR_RDMA_READ, &r, 1, d, md->rkey, IBV_SEND_SIGNALED, 7), 0);
  auto wc = PollN(cq_a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 7u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_TRUE(PollN(cq_a, 1, 50).empty());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(back[32 * i], i + 1) << i;
  EXPECT_EQ(back, dst);
}

TEST_F(OneSided, ManyOutstandingReadsAndAtomicsCompleteInOrder) {
  // More READ/atomic WRs than max_rd_atomic (1 here): the rest wait in order.
  constexpr int kN = 24;
  std::vector<uint8_t> remote(kN * 1000), local(kN * 1000, 0);
  Fill(remote, 5);
  alignas(8) static uint64_t counter, results[kN];
  counter = 0;
  ibv_mr* mr = Reg(remote.data(), remote.size(), kAllRemote);
  ibv_mr* ml = Reg(local.data(), local.size());
  ibv_mr* mc = Reg(&counter, 8, kAllRemote);
  ibv_mr* mres = Reg(results, sizeof results);
  for (int i = 0; i < kN; ++i) {
    if (i % 3 == 2) {
      ibv_sge s{reinterpret_cast<uintptr_t>(&results[i]), 8, mres->lkey};
      ASSERT_EQ(PostAtomic(a, IBV_WR_ATOMIC_FETCH_AND_ADD, &s,
                           reinterpret_cast<uintptr_t>(&counter), mc->rkey, 1, 0, i),
                0);
    } else {
      ibv_sge s{reinterpret_cast<uintptr_t>(&local[i * 1000]), 1000, ml->lkey};
      ASSERT_EQ(PostRdma(a, IBV_WR_RDMA_READ, &s, 1, reinterpret_cast<uintptr_t>(&remote[i * 1000]),
                         mr->rkey, IBV_SEND_SIGNALED, i),
                0);
    }
  }
  auto wc = PollN(cq_a, kN);
  ASSERT_EQ(wc.size(), static_cast<size_t>(kN));
  uint64_t expect_faa = 0;
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(wc[i].wr_id, static_cast<uint64_t>(i));
    EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS);
    if (i % 3 == 2) {
      EXPECT_EQ(results[i], expect_faa++);
    } else {
      EXPECT_TRUE(std::equal(&remote[i * 1000], &remote[i * 1000] + 1000, &local[i * 1000]));
    }
  }
  EXPECT_EQ(counter, expect_faa);
}

// --- violations: REM_ACCESS_ERR at the requester, both QPs end in ERR.

class OneSidedErrors : public OneSided {
 public:
  void Expect(ibv_wr_opcode op, bool bad_rkey, bool out_of_bounds, int mr_access) {
    alignas(8) static uint64_t remote[64];
    alignas(8) static uint64_t local[64];
    ibv_mr* mr = Reg(remote, sizeof remote, mr_access);
    ibv_mr* ml = Reg(local, sizeof local);
    ASSERT_TRUE(mr && ml);
    uint32_t rkey = bad_rkey ? mr->rkey ^ 0x80 : mr->rkey;
    uintptr_t addr = reinterpret_cast<uintptr_t>(remote) + (out_of_bounds ? 480 : 0);
    ibv_sge s{reinterpret_cast<uintptr_t>(local),
              op == IBV_WR_RDMA_READ || op == IBV_WR_RDMA_WRITE ? 64u : 8u, ml->lkey};
    if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      if (out_of_bounds) addr = reinterpret_cast<uintptr_t>(remote) + 512;
      ASSERT_EQ(PostAtomic(a, op, &s, addr, rkey, 1, 0, 11), 0);
    } else {
      ASSERT_EQ(PostRdma(a, op, &s, 1, addr, rkey, IBV_SEND_SIGNALED, 11), 0);
    }
    // A WR behind the failing one is flushed.
    ASSERT_EQ(
        PostRdma(a, IBV_WR_RDMA_WRITE, &s, 1, reinterpret_cast<uintptr_t>(remote), mr->rkey, 0, 12),
        0);
    auto wc = PollN(cq_a, 2);
    ASSERT_EQ(wc.size(), 2u);
    EXPECT_EQ(wc[0].wr_id, 11u);
    EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
    EXPECT_EQ(wc[1].wr_id, 12u);
    EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(State(a), IBV_QPS_ERR);
    EXPECT_TRUE(WaitErr(b, cq_b)) << "the responder QP must move to ERR too";
  }
};

constexpr int kNoWrite = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
constexpr int kNoRead = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

TEST_F(OneSidedErrors, WriteOutOfBounds) {
  Expect(IBV_WR_RDMA_WRITE, false, true, kAllRemote);
}
TEST_F(OneSidedErrors, WriteWrongRkey) {
  Expect(IBV_WR_RDMA_WRITE, true, false, kAllRemote);
}
TEST_F(OneSidedErrors, WriteWithoutAccess) {
  Expect(IBV_WR_RDMA_WRITE, false, false, kNoWrite);
}
TEST_F(OneSidedErrors, ReadOutOfBounds) {
  Expect(IBV_WR_RDMA_READ, false, true, kAllRemote);
}
TEST_F(OneSidedErrors, ReadWrongRkey) {
  Expect(IBV_WR_RDMA_READ, true, false, kAllRemote);
}
TEST_F(OneSidedErrors, ReadWithoutAccess) {
  Expect(IBV_WR_RDMA_READ, false, false, kNoRead);
}
TEST_F(OneSidedErrors, AtomicOutOfBounds) {
  Expect(IBV_WR_ATOMIC_FETCH_AND_ADD, false, true, kAllRemote);
}
TEST_F(OneSidedErrors, AtomicWrongRkey) {
  Expect(IBV_WR_ATOMIC_FETCH_AND_ADD, true, false, kAllRemote);
}
TEST_F(OneSidedErrors, AtomicWithoutAccess) {
  Expect(IBV_WR_ATOMIC_FETCH_AND_ADD, false, false, kNoRead | IBV_ACCESS_REMOTE_READ);
}

TEST_F(OneSidedErrors, QpWithoutRemoteWrite) {
  ibv_qp_attr at{};
  at.qp_access_flags = IBV_ACCESS_REMOTE_READ;
  ASSERT_EQ(ibv_modify_qp(b, &at, IBV_QP_ACCESS_FLAGS), 0);
  Expect(IBV_WR_RDMA_WRITE, false, false, kAllRemote);
}

TEST_F(OneSidedErrors, WrongPd) {
  // An rkey of a region in another PD of the target process.
  ibv_pd* other = ibv_alloc_pd(ctx);
  ASSERT_NE(other, nullptr);
  alignas(8) static uint64_t remote[8];
  std::vector<uint8_t> local(64);
  ibv_mr* mr = ibv_reg_mr(other, remote, sizeof remote, kAllRemote);
  ibv_mr* ml = Reg(local.data(), local.size());
  ibv_sge s{reinterpret_cast<uintptr_t>(local.data()), 64, ml->lkey};
  ASSERT_EQ(PostRdma(a, IBV_WR_RDMA_WRITE, &s, 1, reinterpret_cast<uintptr_t>(remote), mr->rkey),
            0);
  auto wc = PollN(cq_a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(WaitErr(b, cq_b));
  ibv_dereg_mr(mr);
  ibv_dealloc_pd(other);
}

// A target QP connected with max_dest_rd_atomic = 0 has no responder
// resources: READ and atomics are NAKed as invalid requests (both QPs go to
// ERR), WRITE works (rc-transport.md §4.1 rule 4).
class NoResponderResources : public OneSided {
 public:
  void SetUp() override {
    OneSided::SetUp();
    cq_c = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    cq_d = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    ASSERT_TRUE(cq_c && cq_d);
    c = CreateRcQp(pd, cq_c, cq_c, QpParams{});
    d = CreateRcQp(pd, cq_d, cq_d, QpParams{});
    ASSERT_TRUE(c && d);
    for (ibv_qp* q : {c, d}) {
      ibv_qp_attr at{};
      at.qp_state = IBV_QPS_INIT;
      at.port_num = 1;
      at.qp_access_flags =
          IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
      ASSERT_EQ(ibv_modify_qp(q, &at,
                              IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
                0);
    }
    ASSERT_EQ(Connect(ctx, c, gid, d->qp_num, QpParams{}), 0);
    ibv_qp_attr rtr = RtrAttr(ctx, gid, c->qp_num);
    rtr.max_dest_rd_atomic = 0;
    ASSERT_EQ(ibv_modify_qp(d, &rtr, kRtrMask), 0);
  }
  void TearDown() override {
    if (c) ibv_destroy_qp(c);
    if (d) ibv_destroy_qp(d);
    if (cq_c) ibv_destroy_cq(cq_c);
    if (cq_d) ibv_destroy_cq(cq_d);
    OneSided::TearDown();
  }
  // Posts `op` from c to d's memory and checks the refusal and its effects.
  void ExpectRefused(ibv_wr_opcode op) {
    alignas(8) static uint64_t target, result;
    target = 77;
    result = 0;
    ibv_mr* mt = Reg(&target, 8, kAllRemote);
    ibv_mr* mres = Reg(&result, 8);
    ibv_sge s{reinterpret_cast<uintptr_t>(&result), 8, mres->lkey};
    const uintptr_t t = reinterpret_cast<uintptr_t>(&target);
    if (op == IBV_WR_RDMA_READ)
      ASSERT_EQ(PostRdma(c, op, &s, 1, t, mt->rkey), 0);
    else
      ASSERT_EQ(PostAtomic(c, op, &s, t, mt->rkey, 77, 5), 0);
    auto wc = PollN(cq_c, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_REM_INV_REQ_ERR);
    EXPECT_EQ(State(c), IBV_QPS_ERR);
    EXPECT_TRUE(WaitErr(d, cq_d));
    EXPECT_EQ(target, 77u);  // an atomic did not execute
    EXPECT_EQ(result, 0u);   // nothing came back
  }
  ibv_cq* cq_c = nullptr;
  ibv_cq* cq_d = nullptr;
  ibv_qp* c = nullptr;
  ibv_qp* d = nullptr;
};

TEST_F(NoResponderResources, ReadIsAnInvalidRequest) {
  ExpectRefused(IBV_WR_RDMA_READ);
}
TEST_F(NoResponderResources, CompareSwapIsAnInvalidRequest) {
  ExpectRefused(IBV_WR_ATOMIC_CMP_AND_SWP);
}
TEST_F(NoResponderResources, FetchAddIsAnInvalidRequest) {
  ExpectRefused(IBV_WR_ATOMIC_FETCH_AND_ADD);
}
TEST_F(NoResponderResources, WriteStillWorks) {
  std::vector<uint8_t> src(100), dst(100, 0);
  Fill(src, 51);
  ibv_mr* ms = Reg(src.data(), src.size());
  ibv_mr* md = Reg(dst.data(), dst.size(), kAllRemote);
  ibv_sge s{reinterpret_cast<uintptr_t>(src.data()), 100, ms->lkey};
  ASSERT_EQ(
      PostRdma(c, IBV_WR_RDMA_WRITE, &s, 1, reinterpret_cast<uintptr_t>(dst.data()), md->rkey), 0);
  auto wc = PollN(cq_c, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(dst, src);
}

TEST_F(OneSided, DeviceReportsHcaAtomics) {
  ibv_device_attr da{};
  ASSERT_EQ(ibv_query_device(ctx, &da), 0);
  EXPECT_EQ(da.atomic_cap, IBV_ATOMIC_HCA);
  EXPECT_GT(da.max_qp_rd_atom, 0);
  EXPECT_GT(da.max_qp_init_rd_atom, 0);
}

}  // namespace
}  // namespace softrdma::test
