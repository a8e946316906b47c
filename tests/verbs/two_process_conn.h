// One RC connection between two processes for the multi-process tests: a
// QP with its own CQ, what one side tells the other to reach its memory,
// and posting one WR and waiting for its completion.
#pragma once

#include <cstdlib>
#include <cstring>

#include "verbs_fixture.h"

namespace softrdma::test {

inline constexpr int kAllRemote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

inline bool CmaDisabled() {
  const char* v = getenv("SOFTRDMA_CMA");
  return v && strcmp(v, "0") == 0;
}

// What one side tells the other to reach its memory.
struct Remote {
  uint64_t addr;
  uint32_t rkey;
  uint32_t qpn;
};

// One RC QP with its own CQ; INIT with every remote access.
struct Conn {
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  bool Create(ibv_context* ctx, ibv_pd* pd) {
    cq = ibv_create_cq(ctx, 128, nullptr, nullptr, 0);
    QpParams p;
    qp = cq ? CreateRcQp(pd, cq, cq, p) : nullptr;
    if (!qp) return false;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    return ibv_modify_qp(qp, &a,
                         IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0;
  }
  bool Connect(ibv_context* ctx, int gid, uint32_t qpn) {
    return test::Connect(ctx, qp, gid, qpn, QpParams{}) == 0;
  }
};

inline int PostOne(ibv_qp* qp, ibv_wr_opcode op, ibv_sge* sg, int n, uint64_t raddr, uint32_t rkey,
                   uint64_t compare_add = 0, uint64_t swap = 0) {
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.opcode = op;
  wr.sg_list = sg;
  wr.num_sge = n;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    wr.wr.atomic.remote_addr = raddr;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = compare_add;
    wr.wr.atomic.swap = swap;
  } else {
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
  }
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

// Posts one WR and waits for its completion; returns its status (or -1).
inline int RunOne(Conn& c, ibv_wr_opcode op, ibv_sge* sg, int n, uint64_t raddr, uint32_t rkey,
                  uint64_t compare_add = 0, uint64_t swap = 0) {
  if (PostOne(c.qp, op, sg, n, raddr, rkey, compare_add, swap)) return -1;
  auto wc = PollN(c.cq, 1, 10000);
  return wc.size() == 1 ? wc[0].status : -1;
}

}  // namespace softrdma::test
