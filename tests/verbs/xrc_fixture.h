// XRC test helpers: a domain on a temporary file, XRC SRQs, target and
// initiator QPs connected as ibv_xsrq_pingpong connects them, and a
// one-process fixture with two SRQs, a target and an initiator.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "verbs_fixture.h"

namespace softrdma::test {

inline std::string DomainFile() {
  char path[] = "/tmp/softrdma-xrc-XXXXXX";
  int fd = mkstemp(path);
  if (fd >= 0) close(fd);
  return path;
}

// Removes the domain file when the test ends, however it ends (a failed
// ASSERT returns early).
struct DomainFileGuard {
  std::string path = DomainFile();
  ~DomainFileGuard() { unlink(path.c_str()); }
};

inline ibv_xrcd* OpenDomain(ibv_context* ctx, int fd, int oflags) {
  ibv_xrcd_init_attr a{};
  a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  a.fd = fd;
  a.oflags = oflags;
  return ibv_open_xrcd(ctx, &a);
}

inline ibv_srq* CreateXrcSrq(ibv_context* ctx, ibv_pd* pd, ibv_xrcd* xrcd, ibv_cq* cq) {
  ibv_srq_init_attr_ex a{};
  a.attr.max_wr = 16;
  a.attr.max_sge = 1;
  a.comp_mask =
      IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD;
  a.srq_type = IBV_SRQT_XRC;
  a.xrcd = xrcd;
  a.cq = cq;
  a.pd = pd;
  return ibv_create_srq_ex(ctx, &a);
}

inline ibv_qp* CreateTarget(ibv_context* ctx, ibv_xrcd* xrcd) {
  ibv_qp_init_attr_ex a{};
  a.qp_type = IBV_QPT_XRC_RECV;
  a.comp_mask = IBV_QP_INIT_ATTR_XRCD;
  a.xrcd = xrcd;
  return ibv_create_qp_ex(ctx, &a);
}

inline ibv_qp* CreateInitiator(ibv_context* ctx, ibv_pd* pd, ibv_cq* cq) {
  ibv_qp_init_attr_ex a{};
  a.qp_type = IBV_QPT_XRC_SEND;
  a.send_cq = cq;
  a.cap.max_send_wr = 16;
  a.cap.max_send_sge = 1;
  a.comp_mask = IBV_QP_INIT_ATTR_PD;
  a.pd = pd;
  return ibv_create_qp_ex(ctx, &a);
}

// The masks xsrq_pingpong uses for each side; the target allows every
// remote access (RDMA and atomics through it are checked against the PD of
// the SRQ they name).
inline int ConnectTarget(ibv_context* ctx, ibv_qp* qp, int gid, uint32_t initiator) {
  ibv_qp_attr init{};
  init.qp_state = IBV_QPS_INIT;
  init.port_num = 1;
  init.qp_access_flags =
      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  if (int rc = ibv_modify_qp(qp, &init,
                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return rc;
  ibv_qp_attr a = RtrAttr(ctx, gid, initiator);
  if (int rc = ibv_modify_qp(qp, &a, kRtrMask)) return rc;
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.timeout = 14;
  return ibv_modify_qp(qp, &r, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN);
}

inline int ConnectInitiator(ibv_context* ctx, ibv_qp* qp, int gid, uint32_t target) {
  if (int rc = ToInit(qp)) return rc;
  ibv_qp_attr a = RtrAttr(ctx, gid, target);
  if (int rc = ibv_modify_qp(
          qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
    return rc;
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.timeout = 14;
  r.retry_cnt = 7;
  r.rnr_retry = 7;
  r.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &r, kRtsMask);
}

inline int PostSrqRecv(ibv_srq* srq, ibv_mr* mr, void* buf, uint32_t len, uint64_t id) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), len, mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_srq_recv(srq, &wr, &bad);
}

// A signaled SEND (or, with `imm`, SEND_WITH_IMM carrying it) to SRQ `srqn`.
inline int PostXrcSend(ibv_qp* qp, ibv_mr* mr, const void* buf, uint32_t len, uint32_t srqn,
                       uint64_t id, const uint32_t* imm = nullptr) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), len, mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
  wr.imm_data = imm ? *imm : 0;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.qp_type.xrc.remote_srqn = srqn;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

inline uint32_t SrqNum(ibv_srq* srq) {
  uint32_t n = 0;
  EXPECT_EQ(ibv_get_srq_num(srq, &n), 0);
  return n;
}

// One process: a domain on a file, two SRQs with a CQ each, a target QP and
// an initiator connected to it.
class Xrc : public ::testing::Test {
 public:
  void SetUp() override {
    ctx = OpenSoftrdma();
    ASSERT_NE(ctx, nullptr);
    gid = LoopbackGidIndex(ctx);
    ASSERT_GE(gid, 0);
    path = DomainFile();
    fd = open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    pd = ibv_alloc_pd(ctx);
    send_cq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    cq[0] = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    cq[1] = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    ASSERT_TRUE(pd && send_cq && cq[0] && cq[1]);
    xrcd = OpenDomain(ctx, fd, O_CREAT);
    ASSERT_NE(xrcd, nullptr) << strerror(errno);
    for (int i = 0; i < 2; ++i) {
      srq[i] = CreateXrcSrq(ctx, pd, xrcd, cq[i]);
      ASSERT_NE(srq[i], nullptr) << strerror(errno);
    }
    tgt = CreateTarget(ctx, xrcd);
    ASSERT_NE(tgt, nullptr) << strerror(errno);
    ini = CreateInitiator(ctx, pd, send_cq);
    ASSERT_NE(ini, nullptr) << strerror(errno);
    ASSERT_EQ(ConnectTarget(ctx, tgt, gid, ini->qp_num), 0);
    ASSERT_EQ(ConnectInitiator(ctx, ini, gid, tgt->qp_num), 0);
    buf.assign(1 << 16, 0);
    mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr);
  }
  void TearDown() override {
    if (mr) ibv_dereg_mr(mr);
    if (ini) {
      EXPECT_EQ(ibv_destroy_qp(ini), 0);
    }
    if (tgt) {
      EXPECT_EQ(ibv_destroy_qp(tgt), 0);
    }
    for (ibv_srq* s : srq) {
      if (s) {
        EXPECT_EQ(ibv_destroy_srq(s), 0);
      }
    }
    if (xrcd) {
      EXPECT_EQ(ibv_close_xrcd(xrcd), 0);
    }
    for (ibv_cq* c : {send_cq, cq[0], cq[1]})
      if (c) ibv_destroy_cq(c);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
    if (fd >= 0) close(fd);
    unlink(path.c_str());
  }

  ibv_context* ctx = nullptr;
  int gid = -1;
  std::string path;
  int fd = -1;
  ibv_pd* pd = nullptr;
  ibv_cq* send_cq = nullptr;
  ibv_cq* cq[2] = {};
  ibv_xrcd* xrcd = nullptr;
  ibv_srq* srq[2] = {};
  ibv_qp* tgt = nullptr;
  ibv_qp* ini = nullptr;
  std::vector<uint8_t> buf;
  ibv_mr* mr = nullptr;
};

}  // namespace softrdma::test
