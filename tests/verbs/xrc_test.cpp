// XRC: domains shared through a file, XRC SRQs, initiator and target QPs,
// ibv_open_qp, and a message to an SRQ of another domain.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "process_pipes.h"
#include "verbs_fixture.h"
#include "xrc_fixture.h"

namespace softrdma::test {
namespace {

TEST_F(Xrc, DeviceAdvertisesXrc) {
  ibv_device_attr a{};
  ASSERT_EQ(ibv_query_device(ctx, &a), 0);
  EXPECT_TRUE(a.device_cap_flags & IBV_DEVICE_XRC);
}

TEST_F(Xrc, SrqNumbersDiffer) {
  EXPECT_NE(SrqNum(srq[0]), SrqNum(srq[1]));
  EXPECT_NE(SrqNum(srq[0]), 0u);
}

// One initiator, two SRQs: each message lands in the SRQ it names and
// completes on that SRQ's CQ with the target QP's number. Sizes cover the
// inline record and the bulk (one- or two-copy) path.
TEST_F(Xrc, SendsLandInTheNamedSrq) {
  constexpr uint32_t kLen[2] = {100, 20000};
  uint8_t* src = buf.data();
  uint8_t* dst[2] = {buf.data() + 24000, buf.data() + 44000};
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(PostSrqRecv(srq[i], mr, dst[i], 20000, 10 + i), 0);
    memset(src, 'a' + i, kLen[i]);
    ASSERT_EQ(PostXrcSend(ini, mr, src, kLen[i], SrqNum(srq[i]), i), 0);
    auto s = PollN(send_cq, 1);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(s[0].status);
    auto r = PollN(cq[i], 1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(r[0].wr_id, 10u + i);
    EXPECT_EQ(r[0].byte_len, kLen[i]);
    EXPECT_EQ(r[0].qp_num, tgt->qp_num);
    EXPECT_EQ(r[0].src_qp, ini->qp_num);
    EXPECT_EQ(std::vector<uint8_t>(dst[i], dst[i] + kLen[i]),
              std::vector<uint8_t>(kLen[i], static_cast<uint8_t>('a' + i)));
  }
  ibv_wc wc;
  EXPECT_EQ(ibv_poll_cq(cq[0], 1, &wc), 0);  // nothing went to the wrong SRQ
}

TEST_F(Xrc, NoReceiveWqeIsRnrThenDelivered) {
  ASSERT_EQ(PostXrcSend(ini, mr, buf.data(), 64, SrqNum(srq[1]), 1), 0);
  usleep(20000);
  ASSERT_EQ(PostSrqRecv(srq[1], mr, buf.data() + 4096, 4096, 7), 0);
  auto r = PollN(cq[1], 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
  auto s = PollN(send_cq, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS);
}

// An SRQ of another XRC domain (or no SRQ at all): the target answers
// "invalid request", the sender's WQE completes with REM_INV_REQ_ERR, and
// nothing lands in the foreign SRQ.
TEST_F(Xrc, SrqOfAnotherDomainIsInvalidRequest) {
  ibv_xrcd* other = OpenDomain(ctx, -1, O_CREAT);
  ASSERT_NE(other, nullptr);
  ibv_srq* foreign = CreateXrcSrq(ctx, pd, other, cq[0]);
  ASSERT_NE(foreign, nullptr);
  ASSERT_EQ(PostSrqRecv(foreign, mr, buf.data() + 4096, 4096, 9), 0);
  ASSERT_EQ(PostXrcSend(ini, mr, buf.data(), 64, SrqNum(foreign), 1), 0);
  auto s = PollN(send_cq, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_REM_INV_REQ_ERR) << ibv_wc_status_str(s[0].status);
  ibv_wc wc;
  EXPECT_EQ(ibv_poll_cq(cq[0], 1, &wc), 0);
  EXPECT_EQ(ibv_close_xrcd(other), EBUSY);  // the SRQ still uses it
  EXPECT_EQ(ibv_destroy_srq(foreign), 0);
  EXPECT_EQ(ibv_close_xrcd(other), 0);
}

TEST_F(Xrc, UnknownSrqNumberIsInvalidRequest) {
  ASSERT_EQ(PostXrcSend(ini, mr, buf.data(), 64, 0xfffff0, 1), 0);
  auto s = PollN(send_cq, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_REM_INV_REQ_ERR);
}

// perftest -c XRC connects both kinds of XRC QP with RC's full masks; the
// kernel drops the bits of the side a QP has not got, and so do we.
TEST_F(Xrc, RcMasksAreAccepted) {
  ibv_qp* t2 = CreateTarget(ctx, xrcd);
  ibv_qp* i2 = CreateInitiator(ctx, pd, send_cq);
  ASSERT_TRUE(t2 && i2);
  QpParams p;
  ASSERT_EQ(ToInit(t2), 0);
  ASSERT_EQ(ToInit(i2), 0);
  ASSERT_EQ(Connect(ctx, t2, gid, i2->qp_num, p), 0);
  ASSERT_EQ(Connect(ctx, i2, gid, t2->qp_num, p), 0);
  ASSERT_EQ(PostSrqRecv(srq[1], mr, buf.data() + 4096, 4096, 5), 0);
  ASSERT_EQ(PostXrcSend(i2, mr, buf.data(), 16, SrqNum(srq[1]), 1), 0);
  auto r = PollN(cq[1], 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(r[0].qp_num, t2->qp_num);
  EXPECT_EQ(PollN(send_cq, 1).size(), 1u);
  EXPECT_EQ(ibv_destroy_qp(i2), 0);
  EXPECT_EQ(ibv_destroy_qp(t2), 0);
}

// The work-request API names the SRQ with ibv_wr_set_xrc_srqn (pyverbs,
// perftest's new post-send path).
TEST_F(Xrc, WrApiSetsTheSrqNumber) {
  ibv_qp_init_attr_ex a{};
  a.qp_type = IBV_QPT_XRC_SEND;
  a.send_cq = send_cq;
  a.cap.max_send_wr = 4;
  a.cap.max_send_sge = 1;
  a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  a.pd = pd;
  a.send_ops_flags = IBV_QP_EX_WITH_SEND;
  ibv_qp* i2 = ibv_create_qp_ex(ctx, &a);
  ASSERT_NE(i2, nullptr) << strerror(errno);
  ibv_qp* t2 = CreateTarget(ctx, xrcd);
  ASSERT_NE(t2, nullptr);
  ASSERT_EQ(ConnectTarget(ctx, t2, gid, i2->qp_num), 0);
  ASSERT_EQ(ConnectInitiator(ctx, i2, gid, t2->qp_num), 0);
  ASSERT_EQ(PostSrqRecv(srq[0], mr, buf.data() + 4096, 4096, 8), 0);
  memset(buf.data(), 'w', 48);
  ibv_qp_ex* x = ibv_qp_to_qp_ex(i2);
  ASSERT_NE(x, nullptr);
  ibv_wr_start(x);
  x->wr_id = 77;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(x);
  ibv_wr_set_xrc_srqn(x, SrqNum(srq[0]));
  ibv_wr_set_sge(x, mr->lkey, reinterpret_cast<uintptr_t>(buf.data()), 48);
  ASSERT_EQ(ibv_wr_complete(x), 0);
  auto r = PollN(cq[0], 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(r[0].byte_len, 48u);
  EXPECT_EQ(buf[4096 + 47], 'w');
  auto s = PollN(send_cq, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].wr_id, 77u);
  EXPECT_EQ(ibv_destroy_qp(i2), 0);
  EXPECT_EQ(ibv_destroy_qp(t2), 0);
}

// A target that failed lets its SRQ go: the SRQ can be destroyed first.
TEST_F(Xrc, SrqOfAFailedTargetCanBeDestroyed) {
  ibv_srq* extra = CreateXrcSrq(ctx, pd, xrcd, cq[0]);
  ASSERT_NE(extra, nullptr);
  ASSERT_EQ(PostSrqRecv(extra, mr, buf.data() + 4096, 8, 1), 0);
  ASSERT_EQ(PostXrcSend(ini, mr, buf.data(), 64, SrqNum(extra), 1), 0);  // too long
  auto s = PollN(send_cq, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_REM_INV_REQ_ERR);
  auto r = PollN(cq[0], 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, IBV_WC_LOC_LEN_ERR);
  EXPECT_EQ(ibv_destroy_srq(extra), 0);
}

// A target has no receive queue of its own; an initiator's SEND with
// invalidate (which would invalidate a key of the SRQ's PD) is not
// implemented.
TEST_F(Xrc, TargetHasNoReceiveQueueAndSendWithInvIsRefused) {
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  EXPECT_NE(ibv_post_recv(tgt, &wr, &bad), 0);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data()), 8, mr->lkey};
  ibv_send_wr sw{};
  sw.sg_list = &sge;
  sw.num_sge = 1;
  sw.opcode = IBV_WR_SEND_WITH_INV;
  sw.qp_type.xrc.remote_srqn = SrqNum(srq[0]);
  ibv_send_wr* sbad = nullptr;
  EXPECT_EQ(ibv_post_send(ini, &sw, &sbad), EOPNOTSUPP);
  EXPECT_EQ(sbad, &sw);
}

TEST_F(Xrc, CloseWhileInUseIsBusy) {
  EXPECT_EQ(ibv_close_xrcd(xrcd), EBUSY);
}

// ibv_open_qp from another context of the domain: the handle reaches the
// same target QP, which lives until its last handle is destroyed.
TEST_F(Xrc, OpenQpSharesTheTarget) {
  ibv_context* ctx2 = OpenSoftrdma();
  ASSERT_NE(ctx2, nullptr);
  ibv_xrcd* x2 = OpenDomain(ctx2, fd, 0);  // exists: no O_CREAT needed
  ASSERT_NE(x2, nullptr) << strerror(errno);
  ibv_qp_open_attr oa{};
  oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  oa.qp_num = tgt->qp_num;
  oa.xrcd = x2;
  oa.qp_type = IBV_QPT_XRC_RECV;
  ibv_qp* opened = ibv_open_qp(ctx2, &oa);
  ASSERT_NE(opened, nullptr) << strerror(errno);
  EXPECT_EQ(opened->qp_num, tgt->qp_num);
  ibv_qp_attr qa{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(opened, &qa, IBV_QP_STATE, &qi), 0);
  EXPECT_EQ(qa.qp_state, IBV_QPS_RTS);

  // The creator's handle goes; the target keeps working through the other.
  ASSERT_EQ(ibv_destroy_qp(tgt), 0);
  tgt = nullptr;
  ASSERT_EQ(PostSrqRecv(srq[0], mr, buf.data() + 4096, 4096, 3), 0);
  ASSERT_EQ(PostXrcSend(ini, mr, buf.data(), 32, SrqNum(srq[0]), 1), 0);
  auto r = PollN(cq[0], 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);

  // Another domain cannot open it; a wrong type is refused.
  ibv_xrcd* priv = OpenDomain(ctx2, -1, O_CREAT);
  ASSERT_NE(priv, nullptr);
  oa.xrcd = priv;
  EXPECT_EQ(ibv_open_qp(ctx2, &oa), nullptr);
  oa.xrcd = x2;
  oa.qp_type = IBV_QPT_RC;
  EXPECT_EQ(ibv_open_qp(ctx2, &oa), nullptr);
  EXPECT_EQ(errno, EINVAL);

  ASSERT_EQ(ibv_destroy_qp(opened), 0);
  EXPECT_EQ(ibv_close_xrcd(x2), 0);
  EXPECT_EQ(ibv_close_xrcd(priv), 0);
  ibv_close_device(ctx2);
}

TEST(XrcDomain, OflagsFollowTheManPage) {
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  DomainFileGuard file;
  const std::string& path = file.path;
  int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  errno = 0;
  EXPECT_EQ(OpenDomain(ctx, fd, 0), nullptr);  // does not exist, no O_CREAT
  EXPECT_EQ(errno, EINVAL);
  ibv_xrcd* a = OpenDomain(ctx, fd, O_CREAT | O_EXCL);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(OpenDomain(ctx, fd, O_CREAT | O_EXCL), nullptr);  // exists now
  ibv_xrcd* b = OpenDomain(ctx, fd, 0);
  ASSERT_NE(b, nullptr);
  close(fd);  // the domain does not depend on the application's fd
  EXPECT_EQ(ibv_close_xrcd(a), 0);
  EXPECT_EQ(ibv_close_xrcd(b), 0);
  fd = open(path.c_str(), O_RDONLY);
  EXPECT_EQ(OpenDomain(ctx, fd, 0), nullptr);  // last opener gone: no domain
  EXPECT_EQ(OpenDomain(ctx, -1, 0), nullptr);  // a private domain is always new
  ibv_xrcd_init_attr bad{};
  bad.comp_mask = IBV_XRCD_INIT_ATTR_FD;
  bad.fd = -1;
  EXPECT_EQ(ibv_open_xrcd(ctx, &bad), nullptr);
  close(fd);
  unlink(path.c_str());
  ibv_close_device(ctx);
}

// Child: joins the parent's domain through the file (it must exist: no
// O_CREAT), sends one message to each of the parent's two SRQs, and checks
// that O_EXCL sees the domain as existing.
[[noreturn]] void ChildInitiator(const std::string& path, int to_parent, int from_parent) {
  alarm(20);
  ibv_context* ctx = OpenSoftrdma();
  if (!ctx) exit(10);
  int gid = LoopbackGidIndex(ctx);
  int fd = open(path.c_str(), O_RDONLY);
  ibv_xrcd* x = OpenDomain(ctx, fd, 0);
  if (!x) exit(11);
  if (OpenDomain(ctx, fd, O_CREAT | O_EXCL) || errno != EINVAL) exit(12);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_qp* ini = CreateInitiator(ctx, pd, cq);
  if (!ini) exit(13);
  uint32_t theirs[3];  // target QPN, SRQ numbers
  if (!WriteAll(to_parent, &ini->qp_num, 4) || !ReadAll(from_parent, theirs, sizeof theirs))
    exit(14);
  if (ConnectInitiator(ctx, ini, gid, theirs[0])) exit(15);
  std::vector<uint8_t> buf(40000);
  ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  for (int i = 0; i < 2; ++i) {
    memset(buf.data(), 'x' + i, buf.size());
    if (PostXrcSend(ini, mr, buf.data(), 30000 + i, theirs[1 + i], i)) exit(16);
    auto s = PollN(cq, 1, 10000);
    if (s.size() != 1 || s[0].status != IBV_WC_SUCCESS) exit(17);
  }
  ibv_dereg_mr(mr);
  ibv_destroy_qp(ini);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  if (ibv_close_xrcd(x)) exit(18);
  ibv_close_device(ctx);
  exit(0);
}

TEST(XrcTwoProcesses, DomainSharedThroughAFile) {
  DomainFileGuard file;
  const std::string& path = file.path;
  int p2c[2], c2p[2];
  ASSERT_EQ(pipe(p2c), 0);
  ASSERT_EQ(pipe(c2p), 0);
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  int gid = LoopbackGidIndex(ctx);
  int fd = open(path.c_str(), O_RDONLY);
  ibv_xrcd* x = OpenDomain(ctx, fd, O_CREAT);
  ASSERT_NE(x, nullptr);
  close(fd);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) ChildInitiator(path, c2p[1], p2c[0]);

  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq[2] = {ibv_create_cq(ctx, 16, nullptr, nullptr, 0),
                   ibv_create_cq(ctx, 16, nullptr, nullptr, 0)};
  ibv_srq* srq[2] = {CreateXrcSrq(ctx, pd, x, cq[0]), CreateXrcSrq(ctx, pd, x, cq[1])};
  ibv_qp* tgt = CreateTarget(ctx, x);
  ASSERT_TRUE(srq[0] && srq[1] && tgt);
  std::vector<uint8_t> buf(80000, 0);
  ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(PostSrqRecv(srq[i], mr, buf.data() + i * 40000, 40000, i), 0);
  uint32_t ini_qpn = 0;
  ASSERT_TRUE(ReadAll(c2p[0], &ini_qpn, 4));
  ASSERT_EQ(ConnectTarget(ctx, tgt, gid, ini_qpn), 0);
  uint32_t mine[3] = {tgt->qp_num, SrqNum(srq[0]), SrqNum(srq[1])};
  ASSERT_TRUE(WriteAll(p2c[1], mine, sizeof mine));
  for (int i = 0; i < 2; ++i) {
    auto r = PollN(cq[i], 1, 10000);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(r[0].byte_len, 30000u + i);
    EXPECT_EQ(r[0].src_qp, ini_qpn);
    const uint8_t* d = buf.data() + i * 40000;
    EXPECT_EQ(std::vector<uint8_t>(d, d + 30000 + i),
              std::vector<uint8_t>(30000 + i, static_cast<uint8_t>('x' + i)));
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  ibv_dereg_mr(mr);
  EXPECT_EQ(ibv_destroy_qp(tgt), 0);
  for (ibv_srq* s : srq) EXPECT_EQ(ibv_destroy_srq(s), 0);
  EXPECT_EQ(ibv_close_xrcd(x), 0);
  for (ibv_cq* c : cq) ibv_destroy_cq(c);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  for (int f : {p2c[0], p2c[1], c2p[0], c2p[1]}) close(f);
  unlink(path.c_str());
}

}  // namespace
}  // namespace softrdma::test
