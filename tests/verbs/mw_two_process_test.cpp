// A type 2 window used from another process: the window is published in the
// owner's shared MR table, so the peer's WRITE/READ/atomic validate it like
// an MR rkey (direct path, or the owner's responder under SOFTRDMA_CMA=0),
// and a LOCAL_INV in the owner kills it for the peer.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "process_pipes.h"
#include "verbs_fixture.h"

namespace softrdma::test {
namespace {

struct Window {
  uint64_t addr;
  uint32_t rkey;
};

// One connected RC QP with every remote access enabled.
ibv_qp* MakeQp(ibv_context* ctx, ibv_pd* pd, ibv_cq* cq) {
  QpParams p;
  ibv_qp* qp = CreateRcQp(pd, cq, cq, p);
  if (!qp) return nullptr;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return nullptr;
  (void)ctx;
  return qp;
}

int RunOne(ibv_qp* qp, ibv_cq* cq, ibv_send_wr& wr) {
  ibv_send_wr* bad = nullptr;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (ibv_post_send(qp, &wr, &bad)) return -1;
  auto wc = PollN(cq, 1, 10000);
  return wc.size() == 1 ? wc[0].status : -1;
}

constexpr size_t kOff = 256, kLen = 1024;

[[noreturn]] void Owner(int up, int down) {
  alarm(30);
  ibv_context* ctx = OpenSoftrdma();
  if (!ctx) _exit(10);
  int gid = LoopbackGidIndex(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = pd ? ibv_create_cq(ctx, 16, nullptr, nullptr, 0) : nullptr;
  ibv_qp* qp = cq ? MakeQp(ctx, pd, cq) : nullptr;
  if (!qp) _exit(11);
  std::vector<uint8_t> buf(4096, 0);
  ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  ibv_mw* mw = mr ? ibv_alloc_mw(pd, IBV_MW_TYPE_2) : nullptr;
  if (!mw) _exit(12);
  uint32_t peer_qpn = 0;
  if (!WriteAll(up, &qp->qp_num, 4) || !ReadAll(down, &peer_qpn, 4)) _exit(13);
  if (Connect(ctx, qp, gid, peer_qpn, QpParams{})) _exit(14);
  ibv_send_wr bind{};
  bind.opcode = IBV_WR_BIND_MW;
  bind.bind_mw.mw = mw;
  bind.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  bind.bind_mw.bind_info = {
      mr, reinterpret_cast<uintptr_t>(&buf[kOff]), kLen,
      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC};
  if (RunOne(qp, cq, bind) != IBV_WC_SUCCESS) _exit(15);
  Window w{reinterpret_cast<uintptr_t>(&buf[kOff]), bind.bind_mw.rkey};
  if (!WriteAll(up, &w, sizeof w)) _exit(16);
  char c = 0;
  if (!ReadAll(down, &c, 1)) _exit(17);  // the peer wrote, read and added
  for (size_t i = 0; i < 512; ++i)
    if (buf[kOff + i] != static_cast<uint8_t>(i * 13 + 1)) _exit(18);
  uint64_t counter = 0;
  memcpy(&counter, &buf[kOff + 512], 8);
  if (counter != 5 || buf[kOff - 1] != 0) _exit(19);
  ibv_send_wr inv{};
  inv.opcode = IBV_WR_LOCAL_INV;
  inv.invalidate_rkey = w.rkey;
  if (RunOne(qp, cq, inv) != IBV_WC_SUCCESS) _exit(20);
  if (!WriteAll(up, &c, 1) || !ReadAll(down, &c, 1)) _exit(21);
  if (ibv_dealloc_mw(mw) || ibv_dereg_mr(mr) || ibv_destroy_qp(qp) || ibv_destroy_cq(cq) ||
      ibv_dealloc_pd(pd) || ibv_close_device(ctx))
    _exit(22);
  exit(0);  // exit(): the library removes its segment at exit
}

TEST(MwTwoProcesses, Type2WindowFromAnotherProcess) {
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) Owner(up[1], down[0]);
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  int gid = LoopbackGidIndex(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_qp* qp = MakeQp(ctx, pd, cq);
  ASSERT_NE(qp, nullptr);
  uint32_t owner_qpn = 0;
  ASSERT_TRUE(ReadAll(up[0], &owner_qpn, 4));
  ASSERT_EQ(Connect(ctx, qp, gid, owner_qpn, QpParams{}), 0);
  ASSERT_TRUE(WriteAll(down[1], &qp->qp_num, 4));
  Window w{};
  ASSERT_TRUE(ReadAll(up[0], &w, sizeof w));

  std::vector<uint8_t> src(512), back(512, 0), old(8, 0xff);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 13 + 1);
  ibv_mr* ms = ibv_reg_mr(pd, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* mb = ibv_reg_mr(pd, back.data(), back.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* mo = ibv_reg_mr(pd, old.data(), old.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(ms && mb && mo);
  ibv_sge s{reinterpret_cast<uintptr_t>(src.data()), 512, ms->lkey};
  ibv_sge r{reinterpret_cast<uintptr_t>(back.data()), 512, mb->lkey};
  ibv_sge o{reinterpret_cast<uintptr_t>(old.data()), 8, mo->lkey};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.wr.rdma = {w.addr, w.rkey};
  EXPECT_EQ(RunOne(qp, cq, wr), IBV_WC_SUCCESS);
  wr.opcode = IBV_WR_RDMA_READ;
  wr.sg_list = &r;
  EXPECT_EQ(RunOne(qp, cq, wr), IBV_WC_SUCCESS);
  EXPECT_EQ(back, src);
  ibv_send_wr fa{};
  fa.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  fa.sg_list = &o;
  fa.num_sge = 1;
  fa.wr.atomic = {w.addr + 512, 5, 0, w.rkey};
  EXPECT_EQ(RunOne(qp, cq, fa), IBV_WC_SUCCESS);
  EXPECT_EQ(old, std::vector<uint8_t>(8, 0));
  char c = 'w';
  ASSERT_TRUE(WriteAll(down[1], &c, 1));
  ASSERT_TRUE(ReadAll(up[0], &c, 1));  // the owner invalidated the key
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &s;
  EXPECT_EQ(RunOne(qp, cq, wr), IBV_WC_REM_ACCESS_ERR);
  ASSERT_TRUE(WriteAll(down[1], &c, 1));
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  ibv_dereg_mr(ms);
  ibv_dereg_mr(mb);
  ibv_dereg_mr(mo);
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  for (int fd : {up[0], up[1], down[0], down[1]}) close(fd);
}

}  // namespace
}  // namespace softrdma::test
