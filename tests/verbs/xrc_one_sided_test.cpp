// RDMA WRITE, WRITE_WITH_IMM, READ and atomics through XRC target QPs: the
// rkey is checked against the PD of the SRQ the WR names (the target QP has
// none), WRITE_WITH_IMM consumes a receive WQE of that SRQ, and errors
// complete with the status a NIC reports. One process and two.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "process_pipes.h"
#include "two_process_conn.h"
#include "verbs_fixture.h"
#include "xrc_fixture.h"

namespace softrdma::test {
namespace {

constexpr int kRemoteAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

bool IsAtomicOp(ibv_wr_opcode op) {
  return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

// One signaled WR through an XRC initiator naming SRQ `srqn`.
struct XrcWr {
  ibv_wr_opcode op;
  ibv_sge sge;
  uint64_t remote_addr;
  uint32_t rkey;
  uint32_t srqn;
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  uint32_t imm = 0;
};

int PostXrc(ibv_qp* ini, XrcWr w) {
  ibv_send_wr wr{};
  wr.wr_id = 0x5a;
  wr.opcode = w.op;
  wr.sg_list = &w.sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = w.imm;
  wr.qp_type.xrc.remote_srqn = w.srqn;
  if (IsAtomicOp(w.op)) {
    wr.wr.atomic.remote_addr = w.remote_addr;
    wr.wr.atomic.rkey = w.rkey;
    wr.wr.atomic.compare_add = w.compare_add;
    wr.wr.atomic.swap = w.swap;
  } else {
    wr.wr.rdma.remote_addr = w.remote_addr;
    wr.wr.rdma.rkey = w.rkey;
  }
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(ini, &wr, &bad);
}

// Posts the WR and returns its completion's status, -1 if none came.
int RunXrc(ibv_qp* ini, ibv_cq* cq, const XrcWr& w, ibv_wc* out = nullptr) {
  if (PostXrc(ini, w)) return -1;
  auto wc = PollN(cq, 1, 10000);
  if (wc.size() != 1) return -1;
  if (out) *out = wc[0];
  return wc[0].status;
}

// The Xrc fixture plus a region of the SRQs' PD that remote peers may use.
class XrcOneSided : public Xrc {
 public:
  void SetUp() override {
    Xrc::SetUp();
    if (HasFatalFailure()) return;
    mem.assign(1 << 16, 0);
    rmr = ibv_reg_mr(pd, mem.data(), mem.size(), kRemoteAll);
    ASSERT_NE(rmr, nullptr);
  }
  void TearDown() override {
    if (rmr) ibv_dereg_mr(rmr);
    Xrc::TearDown();
  }
  ibv_sge Local(size_t off, uint32_t len) {
    return ibv_sge{reinterpret_cast<uintptr_t>(buf.data() + off), len, mr->lkey};
  }
  uint64_t Remote(size_t off) { return reinterpret_cast<uintptr_t>(mem.data() + off); }
  // A completion has arrived on neither SRQ's CQ.
  void ExpectNoReceive() {
    ibv_wc wc;
    EXPECT_EQ(ibv_poll_cq(cq[0], 1, &wc), 0);
    EXPECT_EQ(ibv_poll_cq(cq[1], 1, &wc), 0);
  }

  std::vector<uint8_t> mem;
  ibv_mr* rmr = nullptr;
};

// Sizes cover a record of its own, the bulk path and the fragments of the
// two-copy path (.cma0).
TEST_F(XrcOneSided, WriteAndReadThroughTheTarget) {
  for (uint32_t len : {100u, 20000u}) {
    for (uint32_t i = 0; i < len; ++i) buf[i] = static_cast<uint8_t>(i * 13 + len);
    ASSERT_EQ(RunXrc(ini, send_cq,
                     {IBV_WR_RDMA_WRITE, Local(0, len), Remote(8), rmr->rkey, SrqNum(srq[0])}),
              IBV_WC_SUCCESS);
    EXPECT_EQ(std::vector<uint8_t>(mem.begin() + 8, mem.begin() + 8 + len),
              std::vector<uint8_t>(buf.begin(), buf.begin() + len));
    EXPECT_EQ(mem[7], 0);
    EXPECT_EQ(mem[8 + len], 0);
    ibv_wc wc{};
    ASSERT_EQ(
        RunXrc(ini, send_cq,
               {IBV_WR_RDMA_READ, Local(30000, len), Remote(8), rmr->rkey, SrqNum(srq[1])}, &wc),
        IBV_WC_SUCCESS);
    EXPECT_EQ(wc.opcode, IBV_WC_RDMA_READ);
    EXPECT_EQ(wc.byte_len, len);
    EXPECT_EQ(std::vector<uint8_t>(buf.begin() + 30000, buf.begin() + 30000 + len),
              std::vector<uint8_t>(buf.begin(), buf.begin() + len));
  }
  ExpectNoReceive();  // one-sided: no receive WQE consumed, none completed
}

TEST_F(XrcOneSided, AtomicsThroughTheTarget) {
  uint64_t start = 5;
  memcpy(&mem[64], &start, 8);
  const uint32_t n = SrqNum(srq[0]);
  ibv_wc wc{};
  ASSERT_EQ(RunXrc(ini, send_cq,
                   {IBV_WR_ATOMIC_FETCH_AND_ADD, Local(0, 8), Remote(64), rmr->rkey, n, 7}, &wc),
            IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_FETCH_ADD);
  uint64_t got = 0, now = 0;
  memcpy(&got, buf.data(), 8);
  memcpy(&now, &mem[64], 8);
  EXPECT_EQ(got, 5u);
  EXPECT_EQ(now, 12u);
  ASSERT_EQ(RunXrc(ini, send_cq,
                   {IBV_WR_ATOMIC_CMP_AND_SWP, Local(8, 8), Remote(64), rmr->rkey, n, 12, 99}, &wc),
            IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_COMP_SWAP);
  memcpy(&got, &buf[8], 8);
  memcpy(&now, &mem[64], 8);
  EXPECT_EQ(got, 12u);
  EXPECT_EQ(now, 99u);
  // A compare that does not match swaps nothing and returns the value.
  ASSERT_EQ(RunXrc(ini, send_cq,
                   {IBV_WR_ATOMIC_CMP_AND_SWP, Local(16, 8), Remote(64), rmr->rkey, n, 1, 3}),
            IBV_WC_SUCCESS);
  memcpy(&got, &buf[16], 8);
  memcpy(&now, &mem[64], 8);
  EXPECT_EQ(got, 99u);
  EXPECT_EQ(now, 99u);
  ExpectNoReceive();
}

// WRITE_WITH_IMM places the data and completes a receive WQE of the SRQ it
// names, on that SRQ's CQ; with none posted it waits (RNR) until one is.
TEST_F(XrcOneSided, WriteWithImmConsumesAWqeOfTheNamedSrq) {
  memset(buf.data(), 'i', 300);
  ASSERT_EQ(PostXrc(ini, {IBV_WR_RDMA_WRITE_WITH_IMM, Local(0, 300), Remote(0), rmr->rkey,
                          SrqNum(srq[1]), 0, 0, 0x12345678}),
            0);
  usleep(20000);
  EXPECT_TRUE(PollN(cq[1], 1, 0).empty());  // RNR: no WQE yet
  ASSERT_EQ(PostSrqRecv(srq[1], mr, buf.data() + 40000, 16, 42), 0);
  auto r = PollN(cq[1], 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(r[0].wr_id, 42u);
  EXPECT_EQ(r[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_TRUE(r[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(r[0].imm_data, 0x12345678u);
  EXPECT_EQ(r[0].byte_len, 300u);
  EXPECT_EQ(r[0].qp_num, tgt->qp_num);
  EXPECT_EQ(r[0].src_qp, ini->qp_num);
  auto s = PollN(send_cq, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(s[0].opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(mem[0], 'i');
  EXPECT_EQ(mem[299], 'i');
  EXPECT_EQ(buf[40000], 0);  // the receive buffer is not written
  ibv_wc wc;
  EXPECT_EQ(ibv_poll_cq(cq[0], 1, &wc), 0);
}

// The rkey must be of the named SRQ's PD: a region of another PD works
// through an SRQ of that PD (not the initiator's, not the target's), and
// fails through an SRQ of the region's-foreign PD.
TEST_F(XrcOneSided, RkeyIsCheckedAgainstThePdOfTheNamedSrq) {
  ibv_pd* pd2 = ibv_alloc_pd(ctx);
  ASSERT_NE(pd2, nullptr);
  ibv_srq* srq2 = CreateXrcSrq(ctx, pd2, xrcd, cq[0]);
  ASSERT_NE(srq2, nullptr);
  std::vector<uint8_t> other(4096, 0);
  ibv_mr* mr2 = ibv_reg_mr(pd2, other.data(), other.size(), kRemoteAll);
  ASSERT_NE(mr2, nullptr);
  const uint64_t addr2 = reinterpret_cast<uintptr_t>(other.data());
  memset(buf.data(), 'p', 64);
  EXPECT_EQ(RunXrc(ini, send_cq, {IBV_WR_RDMA_WRITE, Local(0, 64), addr2, mr2->rkey, SrqNum(srq2)}),
            IBV_WC_SUCCESS);
  EXPECT_EQ(other[63], 'p');
  EXPECT_EQ(RunXrc(ini, send_cq,
                   {IBV_WR_RDMA_WRITE, Local(0, 64), addr2 + 64, mr2->rkey, SrqNum(srq[0])}),
            IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(other[64], 0);
  EXPECT_EQ(ibv_destroy_srq(srq2), 0);
  EXPECT_EQ(ibv_dereg_mr(mr2), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd2), 0);
}

// Each operation with a key that is not registered: REM_ACCESS_ERR, both QPs
// in ERR, the next WR flushed. A fresh pair per operation (the error ends
// the connection).
TEST_F(XrcOneSided, BadRkeyIsRemoteAccessErrorForEveryOperation) {
  for (ibv_wr_opcode op : {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ,
                           IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_CMP_AND_SWP}) {
    SCOPED_TRACE(op);
    ibv_qp* t2 = CreateTarget(ctx, xrcd);
    ibv_qp* i2 = CreateInitiator(ctx, pd, send_cq);
    ASSERT_TRUE(t2 && i2);
    ASSERT_EQ(ConnectTarget(ctx, t2, gid, i2->qp_num), 0);
    ASSERT_EQ(ConnectInitiator(ctx, i2, gid, t2->qp_num), 0);
    ASSERT_EQ(PostSrqRecv(srq[0], mr, buf.data() + 40000, 64, 1), 0);
    const uint32_t bad_key = rmr->rkey ^ 0x5a;
    EXPECT_EQ(RunXrc(i2, send_cq, {op, Local(0, 8), Remote(128), bad_key, SrqNum(srq[0])}),
              IBV_WC_REM_ACCESS_ERR);
    EXPECT_EQ(RunXrc(i2, send_cq, {op, Local(0, 8), Remote(128), rmr->rkey, SrqNum(srq[0])}),
              IBV_WC_WR_FLUSH_ERR);
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    // The target learns of it asynchronously (the initiator's notice).
    for (uint64_t deadline = NowMs() + 5000;; usleep(1000)) {
      ASSERT_EQ(ibv_query_qp(t2, &a, IBV_QP_STATE, &ia), 0);
      if (a.qp_state == IBV_QPS_ERR || NowMs() > deadline) break;
    }
    EXPECT_EQ(a.qp_state, IBV_QPS_ERR);
    EXPECT_EQ(ibv_destroy_qp(i2), 0);
    EXPECT_EQ(ibv_destroy_qp(t2), 0);
  }
  // A WRITE_WITH_IMM whose WQE was taken before the access check gives it
  // back flushed; nothing else reached the SRQ's CQ.
  for (const ibv_wc& wc : PollN(cq[0], 16, 100)) EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(mem[128], 0);
}

TEST_F(XrcOneSided, UnknownSrqIsInvalidRequest) {
  EXPECT_EQ(RunXrc(ini, send_cq, {IBV_WR_RDMA_READ, Local(0, 8), Remote(0), rmr->rkey, 0xfffff0}),
            IBV_WC_REM_INV_REQ_ERR);
}

// An SRQ of another domain is not usable through this target, even with a
// key of its PD.
TEST_F(XrcOneSided, SrqOfAnotherDomainIsInvalidRequest) {
  ibv_xrcd* other = OpenDomain(ctx, -1, O_CREAT);
  ASSERT_NE(other, nullptr);
  ibv_srq* foreign = CreateXrcSrq(ctx, pd, other, cq[0]);
  ASSERT_NE(foreign, nullptr);
  EXPECT_EQ(
      RunXrc(ini, send_cq, {IBV_WR_RDMA_WRITE, Local(0, 8), Remote(0), rmr->rkey, SrqNum(foreign)}),
      IBV_WC_REM_INV_REQ_ERR);
  EXPECT_EQ(ibv_destroy_srq(foreign), 0);
  EXPECT_EQ(ibv_close_xrcd(other), 0);
}

// ------------------------------------------------------------------------
// Two processes: the child owns the domain's SRQ, the target QP and the
// memory; the parent's initiator reads, writes, adds, swaps and writes with
// immediate through it, then uses a bad key.

struct TargetInfo {
  uint32_t tgt_qpn, srqn, rkey, pad;
  uint64_t addr, pattern_sum;
};
constexpr uint32_t kPatternLen = 20000;
constexpr uint32_t kWriteOff = 24576, kWriteLen = 20000, kCounterOff = 49152;

[[noreturn]] void XrcTargetChild(const std::string& path, int up, int down) {
  alarm(30);
  ibv_context* ctx = OpenSoftrdma();
  if (!ctx) _exit(10);
  int gid = LoopbackGidIndex(ctx);
  int fd = open(path.c_str(), O_RDONLY);
  ibv_xrcd* x = OpenDomain(ctx, fd, O_CREAT);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_srq* srq = x && pd && cq ? CreateXrcSrq(ctx, pd, x, cq) : nullptr;
  ibv_qp* tgt = x ? CreateTarget(ctx, x) : nullptr;
  std::vector<uint8_t> mem(1 << 16, 0);
  for (uint32_t i = 0; i < kPatternLen; ++i) mem[i] = static_cast<uint8_t>(i * 7 + 3);
  uint64_t counter = 1000;
  memcpy(&mem[kCounterOff], &counter, 8);
  ibv_mr* mr = pd ? ibv_reg_mr(pd, mem.data(), mem.size(), kRemoteAll) : nullptr;
  if (!srq || !tgt || !mr) _exit(11);
  uint32_t ini_qpn = 0;
  if (!ReadAll(down, &ini_qpn, 4) || ConnectTarget(ctx, tgt, gid, ini_qpn)) _exit(12);
  if (PostSrqRecv(srq, mr, &mem[60000], 8, 77)) _exit(13);
  TargetInfo info{tgt->qp_num,
                  SrqNum(srq),
                  mr->rkey,
                  0,
                  reinterpret_cast<uintptr_t>(mem.data()),
                  Checksum(mem.data(), kPatternLen)};
  if (!WriteAll(up, &info, sizeof info)) _exit(14);
  // The parent's WRITE_WITH_IMM consumes our SRQ's WQE.
  auto r = PollN(cq, 1, 20000);
  if (r.size() != 1 || r[0].status != IBV_WC_SUCCESS || r[0].opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
      r[0].imm_data != 0xabcd || r[0].wr_id != 77 || r[0].qp_num != tgt->qp_num ||
      r[0].src_qp != ini_qpn || r[0].byte_len != 16)
    _exit(15);
  uint64_t expect[2] = {};  // checksum of the written range, final counter
  if (!ReadAll(down, expect, sizeof expect)) _exit(16);
  memcpy(&counter, &mem[kCounterOff], 8);
  if (Checksum(&mem[kWriteOff], kWriteLen) != expect[0] || counter != expect[1]) _exit(17);
  char ok = 'k';
  if (!WriteAll(up, &ok, 1)) _exit(18);
  char bye = 0;
  if (!ReadAll(down, &bye, 1)) _exit(19);  // after the parent's bad-key WR
  if (mem[kWriteOff - 1] != 0) _exit(20);  // the bad key wrote nothing
  bool clean = ibv_destroy_qp(tgt) == 0 && ibv_destroy_srq(srq) == 0 && ibv_dereg_mr(mr) == 0 &&
               ibv_close_xrcd(x) == 0 && ibv_destroy_cq(cq) == 0 && ibv_dealloc_pd(pd) == 0 &&
               ibv_close_device(ctx) == 0;
  close(fd);
  exit(clean ? 0 : 21);
}

TEST(XrcOneSidedTwoProcesses, WriteReadAtomicsAndBadKeyAcrossProcesses) {
  DomainFileGuard file;
  Child child = ForkChild([&](int up, int down) { XrcTargetChild(file.path, up, down); });
  ASSERT_GT(child.pid, 0);
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  int gid = LoopbackGidIndex(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_qp* ini = CreateInitiator(ctx, pd, cq);
  ASSERT_NE(ini, nullptr);
  std::vector<uint8_t> buf(1 << 16, 0);
  ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ASSERT_TRUE(WriteAll(child.to_child, &ini->qp_num, 4));
  TargetInfo t{};
  ASSERT_TRUE(ReadAll(child.from_child, &t, sizeof t));
  ASSERT_EQ(ConnectInitiator(ctx, ini, gid, t.tgt_qpn), 0);
  auto local = [&](size_t off, uint32_t len) {
    return ibv_sge{reinterpret_cast<uintptr_t>(&buf[off]), len, mr->lkey};
  };

  EXPECT_EQ(RunXrc(ini, cq, {IBV_WR_RDMA_READ, local(0, kPatternLen), t.addr, t.rkey, t.srqn}),
            IBV_WC_SUCCESS);
  EXPECT_EQ(Checksum(buf.data(), kPatternLen), t.pattern_sum);
  for (uint32_t i = 0; i < kWriteLen; ++i) buf[30000 + i] = static_cast<uint8_t>(i * 11 + 1);
  EXPECT_EQ(
      RunXrc(ini, cq,
             {IBV_WR_RDMA_WRITE, local(30000, kWriteLen), t.addr + kWriteOff, t.rkey, t.srqn}),
      IBV_WC_SUCCESS);
  EXPECT_EQ(
      RunXrc(ini, cq,
             {IBV_WR_ATOMIC_FETCH_AND_ADD, local(8, 8), t.addr + kCounterOff, t.rkey, t.srqn, 24}),
      IBV_WC_SUCCESS);
  uint64_t got = 0;
  memcpy(&got, &buf[8], 8);
  EXPECT_EQ(got, 1000u);
  EXPECT_EQ(RunXrc(ini, cq,
                   {IBV_WR_ATOMIC_CMP_AND_SWP, local(16, 8), t.addr + kCounterOff, t.rkey, t.srqn,
                    1024, 4242}),
            IBV_WC_SUCCESS);
  memcpy(&got, &buf[16], 8);
  EXPECT_EQ(got, 1024u);
  EXPECT_EQ(RunXrc(ini, cq,
                   {IBV_WR_RDMA_WRITE_WITH_IMM, local(24, 16), t.addr + 60000 - 16, t.rkey, t.srqn,
                    0, 0, 0xabcd}),
            IBV_WC_SUCCESS);
  uint64_t expect[2] = {Checksum(&buf[30000], kWriteLen), 4242};
  ASSERT_TRUE(WriteAll(child.to_child, expect, sizeof expect));
  char ok = 0;
  EXPECT_TRUE(ReadAll(child.from_child, &ok, 1));

  EXPECT_EQ(RunXrc(ini, cq,
                   {IBV_WR_RDMA_WRITE, local(0, 8), t.addr + kWriteOff - 1, t.rkey ^ 0x33, t.srqn}),
            IBV_WC_REM_ACCESS_ERR);
  char bye = 'b';
  ASSERT_TRUE(WriteAll(child.to_child, &bye, 1));
  int st = WaitChildPolling(child.pid, cq);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  EXPECT_EQ(ibv_destroy_qp(ini), 0);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  close(child.from_child);
  close(child.to_child);
}

}  // namespace
}  // namespace softrdma::test
