// Shared helpers for the verbs tests: open softrdma0, find the 127.0.0.1
// GID, build connected RC QPs, poll with a deadline.
#pragma once

#include <arpa/inet.h>
#include <poll.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

namespace softrdma::test {

inline uint64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

inline ibv_context* OpenSoftrdma() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) return nullptr;
  ibv_context* ctx = nullptr;
  for (int i = 0; i < n; ++i)
    if (strcmp(ibv_get_device_name(list[i]), "softrdma0") == 0) ctx = ibv_open_device(list[i]);
  ibv_free_device_list(list);
  return ctx;
}

// Index of ::ffff:127.0.0.1 in the GID table, or -1.
inline int LoopbackGidIndex(ibv_context* ctx) {
  ibv_port_attr pa;
  if (ibv_query_port(ctx, 1, &pa)) return -1;
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    ibv_gid g;
    if (ibv_query_gid(ctx, 1, i, &g)) return -1;
    static const uint8_t lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
    if (memcmp(g.raw, lo, 16) == 0) return i;
  }
  return -1;
}

// Polls until `n` completions arrived or `timeout_ms` passed.
inline std::vector<ibv_wc> PollN(ibv_cq* cq, int n, int timeout_ms = 5000) {
  std::vector<ibv_wc> out;
  uint64_t deadline = NowMs() + static_cast<uint64_t>(timeout_ms);
  while (static_cast<int>(out.size()) < n && NowMs() < deadline) {
    // Never take more than asked for: the rest belongs to the next call.
    ibv_wc wc[16];
    int want = std::min<int>(16, n - static_cast<int>(out.size()));
    int got = ibv_poll_cq(cq, want, wc);
    if (got < 0) break;
    out.insert(out.end(), wc, wc + got);
  }
  return out;
}

struct QpParams {
  uint32_t max_send_wr = 64, max_recv_wr = 64, max_send_sge = 4, max_recv_sge = 4;
  uint32_t max_inline = 64;
  uint8_t rnr_retry = 7, retry_cnt = 7, min_rnr_timer = 1, timeout = 14;
  bool sq_sig_all = false;
};

inline ibv_qp* CreateRcQp(ibv_pd* pd, ibv_cq* scq, ibv_cq* rcq, const QpParams& p) {
  ibv_qp_init_attr a{};
  a.send_cq = scq;
  a.recv_cq = rcq;
  a.qp_type = IBV_QPT_RC;
  a.sq_sig_all = p.sq_sig_all;
  a.cap.max_send_wr = p.max_send_wr;
  a.cap.max_recv_wr = p.max_recv_wr;
  a.cap.max_send_sge = p.max_send_sge;
  a.cap.max_recv_sge = p.max_recv_sge;
  a.cap.max_inline_data = p.max_inline;
  return ibv_create_qp(pd, &a);
}

inline int ToInit(ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

inline ibv_qp_attr RtrAttr(ibv_context* ctx, int gid_index, uint32_t dest_qpn) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dest_qpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index);
  ibv_query_gid(ctx, 1, gid_index, &a.ah_attr.grh.dgid);
  return a;
}

constexpr int kRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                         IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
constexpr int kRtsMask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                         IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

// INIT -> RTR -> RTS towards `dest_qpn` on this host.
inline int Connect(ibv_context* ctx, ibv_qp* qp, int gid_index, uint32_t dest_qpn,
                   const QpParams& p) {
  ibv_qp_attr a = RtrAttr(ctx, gid_index, dest_qpn);
  a.min_rnr_timer = p.min_rnr_timer;
  if (int rc = ibv_modify_qp(qp, &a, kRtrMask)) return rc;
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.timeout = p.timeout;
  r.retry_cnt = p.retry_cnt;
  r.rnr_retry = p.rnr_retry;
  r.sq_psn = 0;
  r.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &r, kRtsMask);
}

// Two RC QPs of one process connected to each other (as pyverbs does).
class LoopbackPair : public ::testing::Test {
 public:
  void SetUp() override { Build(QpParams{}); }
  void Build(const QpParams& p) {
    ctx = OpenSoftrdma();
    ASSERT_NE(ctx, nullptr);
    gid = LoopbackGidIndex(ctx);
    ASSERT_GE(gid, 0);
    pd = ibv_alloc_pd(ctx);
    ASSERT_NE(pd, nullptr);
    cq_a = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
    cq_b = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
    ASSERT_TRUE(cq_a && cq_b);
    a = CreateRcQp(pd, cq_a, cq_a, p);
    b = CreateRcQp(pd, cq_b, cq_b, p);
    ASSERT_TRUE(a && b);
    ASSERT_EQ(ToInit(a), 0);
    ASSERT_EQ(ToInit(b), 0);
    ASSERT_EQ(Connect(ctx, a, gid, b->qp_num, p), 0);
    ASSERT_EQ(Connect(ctx, b, gid, a->qp_num, p), 0);
  }
  void TearDown() override {
    for (ibv_mr* m : mrs) ibv_dereg_mr(m);
    if (a) ibv_destroy_qp(a);
    if (b) ibv_destroy_qp(b);
    if (cq_a) ibv_destroy_cq(cq_a);
    if (cq_b) ibv_destroy_cq(cq_b);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
  ibv_mr* Reg(void* p, size_t len, int access = IBV_ACCESS_LOCAL_WRITE) {
    ibv_mr* m = ibv_reg_mr(pd, p, len, access);
    if (m) mrs.push_back(m);
    return m;
  }
  int PostRecv(ibv_qp* qp, uint64_t wr_id, ibv_sge* sges, int n) {
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = sges;
    wr.num_sge = n;
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(qp, &wr, &bad);
  }
  int PostSend(ibv_qp* qp, uint64_t wr_id, ibv_sge* sges, int n, unsigned flags = IBV_SEND_SIGNALED,
               ibv_wr_opcode op = IBV_WR_SEND, uint32_t imm = 0) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = sges;
    wr.num_sge = n;
    wr.opcode = op;
    wr.send_flags = flags;
    wr.imm_data = htonl(imm);
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
  }

  ibv_context* ctx = nullptr;
  int gid = -1;
  ibv_pd* pd = nullptr;
  ibv_cq *cq_a = nullptr, *cq_b = nullptr;
  ibv_qp *a = nullptr, *b = nullptr;
  std::vector<ibv_mr*> mrs;
};

}  // namespace softrdma::test
