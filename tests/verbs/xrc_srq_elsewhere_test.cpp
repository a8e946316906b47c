// XRC with the SRQ in another process than the target QP: the target's
// process hands each message over to the SRQ's process, which completes it
// on its SRQ's CQ with the target QP's number; RNR, a too-short buffer,
// ibv_open_qp of the other process's target QP, and RDMA (not handed over).
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

struct Numbers {
  uint32_t tgt_qpn, ini_qpn;
};
constexpr uint32_t kStream = 12;  // SENDs posted at once (the SRQ holds 16)

// Waits for one completion on `cq` and checks what the parent sent.
bool ReceivedOk(ibv_cq* cq, uint64_t wr_id, uint32_t len, const Numbers& n, bool imm) {
  auto r = PollN(cq, 1, 20000);
  return r.size() == 1 && r[0].status == IBV_WC_SUCCESS && r[0].opcode == IBV_WC_RECV &&
         r[0].wr_id == wr_id && r[0].byte_len == len && r[0].qp_num == n.tgt_qpn &&
         r[0].src_qp == n.ini_qpn && ((r[0].wc_flags & IBV_WC_WITH_IMM) != 0) == imm &&
         (!imm || r[0].imm_data == 0x77);
}

// The child owns the SRQ; the parent owns the target QP (and the
// initiator). Steps are paced through the pipes; each failure has its own
// exit code.
[[noreturn]] void SrqOwnerChild(const std::string& path, int up, int down) {
  alarm(30);
  ibv_context* ctx = OpenSoftrdma();
  if (!ctx) _exit(10);
  int fd = open(path.c_str(), O_RDONLY);
  ibv_xrcd* x = OpenDomain(ctx, fd, O_CREAT);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_srq* srq = x && pd && cq ? CreateXrcSrq(ctx, pd, x, cq) : nullptr;
  std::vector<uint8_t> buf(1 << 16, 0);
  ibv_mr* mr = pd ? ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE) : nullptr;
  if (!srq || !mr) _exit(11);
  if (PostSrqRecv(srq, mr, &buf[0], 30000, 1) || PostSrqRecv(srq, mr, &buf[30000], 30000, 2))
    _exit(12);
  const uint32_t srqn = SrqNum(srq);
  Numbers n{};
  if (!WriteAll(up, &srqn, 4) || !ReadAll(down, &n, sizeof n)) _exit(13);

  // A small SEND (in the record) and a large SEND_WITH_IMM (pulled from
  // the parent's memory, or in fragments).
  if (!ReceivedOk(cq, 1, 100, n, false)) _exit(14);
  if (!ReceivedOk(cq, 2, 20000, n, true)) _exit(15);
  for (uint32_t i = 0; i < 100; ++i)
    if (buf[i] != 'a') _exit(16);
  for (uint32_t i = 0; i < 20000; ++i)
    if (buf[30000 + i] != static_cast<uint8_t>(i * 3 + 1)) _exit(17);

  // ibv_open_qp of the parent's target QP through our handle of the domain.
  ibv_qp_open_attr oa{};
  oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  oa.qp_num = n.tgt_qpn;
  oa.xrcd = x;
  oa.qp_type = IBV_QPT_XRC_RECV;
  ibv_qp* opened = ibv_open_qp(ctx, &oa);
  if (!opened || opened->qp_num != n.tgt_qpn) _exit(18);
  ibv_qp_attr qa{};
  ibv_qp_init_attr qi{};
  if (ibv_query_qp(opened, &qa, IBV_QP_STATE, &qi) || qa.qp_state != IBV_QPS_RTS ||
      qi.qp_type != IBV_QPT_XRC_RECV)
    _exit(19);
  ibv_xrcd* priv = OpenDomain(ctx, -1, O_CREAT);
  oa.xrcd = priv;
  errno = 0;
  if (!priv || ibv_open_qp(ctx, &oa) || errno != EINVAL) _exit(20);
  if (ibv_destroy_qp(opened) || ibv_close_xrcd(priv)) _exit(21);

  // A stream: the parent posts kStream SENDs at once; each lands in order.
  for (uint32_t i = 0; i < kStream; ++i)
    if (PostSrqRecv(srq, mr, &buf[i * 1024], 1024, 100 + i)) _exit(29);
  char step = 's';
  if (!WriteAll(up, &step, 1)) _exit(30);
  for (uint32_t i = 0; i < kStream; ++i) {
    if (!ReceivedOk(cq, 100 + i, 200 + i, n, false)) _exit(31);
    if (buf[i * 1024] != static_cast<uint8_t>(i) ||
        buf[i * 1024 + 199 + i] != static_cast<uint8_t>(i))
      _exit(32);
  }

  // No WQE posted: the parent's SEND waits (RNR) until we post one.
  step = 'r';
  if (!WriteAll(up, &step, 1)) _exit(22);
  usleep(30000);
  if (!PollN(cq, 1, 0).empty()) _exit(23);
  if (PostSrqRecv(srq, mr, &buf[0], 4096, 3) || !ReceivedOk(cq, 3, 64, n, false)) _exit(24);

  // A buffer shorter than the message: LOC_LEN_ERR here, the sender gets
  // REM_INV_REQ_ERR.
  if (PostSrqRecv(srq, mr, &buf[0], 16, 4) || !WriteAll(up, &step, 1)) _exit(25);
  auto r = PollN(cq, 1, 20000);
  if (r.size() != 1 || r[0].status != IBV_WC_LOC_LEN_ERR || r[0].wr_id != 4) _exit(26);
  if (!ReadAll(down, &step, 1)) _exit(27);
  bool clean = ibv_destroy_srq(srq) == 0 && ibv_dereg_mr(mr) == 0 && ibv_close_xrcd(x) == 0 &&
               ibv_destroy_cq(cq) == 0 && ibv_dealloc_pd(pd) == 0 && ibv_close_device(ctx) == 0;
  close(fd);
  exit(clean ? 0 : 28);
}

// Sends and waits for the send completion; its status, or -1.
int SendTo(ibv_qp* ini, ibv_cq* cq, ibv_mr* mr, const uint8_t* buf, uint32_t len, uint32_t srqn,
           bool imm) {
  const uint32_t imm_data = 0x77;
  if (PostXrcSend(ini, mr, buf, len, srqn, len, imm ? &imm_data : nullptr)) return -1;
  auto s = PollN(cq, 1, 20000);
  return s.size() == 1 ? s[0].status : -1;
}

TEST(XrcSrqElsewhere, MessagesLandInTheSrqOfAnotherProcess) {
  DomainFileGuard file;
  Child child = ForkChild([&](int up, int down) { SrqOwnerChild(file.path, up, down); });
  ASSERT_GT(child.pid, 0);
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  int gid = LoopbackGidIndex(ctx);
  int fd = open(file.path.c_str(), O_RDONLY);
  ibv_xrcd* x = OpenDomain(ctx, fd, O_CREAT);
  ASSERT_NE(x, nullptr);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_qp* tgt = CreateTarget(ctx, x);
  ibv_qp* ini = CreateInitiator(ctx, pd, cq);
  ASSERT_TRUE(pd && cq && tgt && ini);
  ASSERT_EQ(ConnectTarget(ctx, tgt, gid, ini->qp_num), 0);
  ASSERT_EQ(ConnectInitiator(ctx, ini, gid, tgt->qp_num), 0);
  std::vector<uint8_t> buf(1 << 16);
  ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  uint32_t srqn = 0;
  ASSERT_TRUE(ReadAll(child.from_child, &srqn, 4));
  Numbers n{tgt->qp_num, ini->qp_num};
  ASSERT_TRUE(WriteAll(child.to_child, &n, sizeof n));

  memset(buf.data(), 'a', 100);
  EXPECT_EQ(SendTo(ini, cq, mr, buf.data(), 100, srqn, false), IBV_WC_SUCCESS);
  for (uint32_t i = 0; i < 20000; ++i) buf[i] = static_cast<uint8_t>(i * 3 + 1);
  EXPECT_EQ(SendTo(ini, cq, mr, buf.data(), 20000, srqn, true), IBV_WC_SUCCESS);
  // The stream: all posted before any completes; later PSNs wait while the
  // first is handed over, then come again in order.
  char step = 0;
  ASSERT_TRUE(ReadAll(child.from_child, &step, 1));
  for (uint32_t i = 0; i < kStream; ++i) {
    memset(&buf[i * 1024], static_cast<int>(i), 200 + i);
    ASSERT_EQ(PostXrcSend(ini, mr, &buf[i * 1024], 200 + i, srqn, 100 + i), 0);
  }
  auto sent = PollN(cq, static_cast<int>(kStream), 20000);
  ASSERT_EQ(sent.size(), kStream);
  for (uint32_t i = 0; i < kStream; ++i) {
    EXPECT_EQ(sent[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(sent[i].wr_id, 100u + i);
  }
  ASSERT_TRUE(ReadAll(child.from_child, &step, 1));
  EXPECT_EQ(SendTo(ini, cq, mr, buf.data(), 64, srqn, false), IBV_WC_SUCCESS);  // after RNR
  ASSERT_TRUE(ReadAll(child.from_child, &step, 1));
  EXPECT_EQ(SendTo(ini, cq, mr, buf.data(), 64, srqn, false), IBV_WC_REM_INV_REQ_ERR);
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  ASSERT_EQ(ibv_query_qp(tgt, &a, IBV_QP_STATE, &ia), 0);
  EXPECT_EQ(a.qp_state, IBV_QPS_ERR);  // an invalid-request NAK ends the connection

  // RDMA through a target to an SRQ of another process is not handed over:
  // an invalid request.
  ibv_qp* t2 = CreateTarget(ctx, x);
  ibv_qp* i2 = CreateInitiator(ctx, pd, cq);
  ASSERT_TRUE(t2 && i2);
  ASSERT_EQ(ConnectTarget(ctx, t2, gid, i2->qp_num), 0);
  ASSERT_EQ(ConnectInitiator(ctx, i2, gid, t2->qp_num), 0);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data()), 8, mr->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(buf.data());
  wr.wr.rdma.rkey = mr->rkey;
  wr.qp_type.xrc.remote_srqn = srqn;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(i2, &wr, &bad), 0);
  auto s = PollN(cq, 1, 20000);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_REM_INV_REQ_ERR);
  EXPECT_EQ(ibv_destroy_qp(i2), 0);
  EXPECT_EQ(ibv_destroy_qp(t2), 0);
  ASSERT_TRUE(WriteAll(child.to_child, &step, 1));
  int st = WaitChildPolling(child.pid, cq);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  EXPECT_EQ(ibv_destroy_qp(ini), 0);
  EXPECT_EQ(ibv_destroy_qp(tgt), 0);
  ibv_dereg_mr(mr);
  EXPECT_EQ(ibv_close_xrcd(x), 0);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  close(fd);
  close(child.from_child);
  close(child.to_child);
}

}  // namespace
}  // namespace softrdma::test
