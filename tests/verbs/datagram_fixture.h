// Helpers for the UC, UD and SRQ tests: QP creation and the state
// transitions of each QP type, and a non-blocking look at async events.
#pragma once

#include <fcntl.h>
#include <poll.h>

#include "verbs_fixture.h"

namespace softrdma::test {

inline ibv_qp* CreateQpOfType(ibv_pd* pd, ibv_cq* cq, ibv_qp_type type, ibv_srq* srq = nullptr,
                              uint32_t depth = 64) {
  ibv_qp_init_attr a{};
  a.send_cq = cq;
  a.recv_cq = cq;
  a.srq = srq;
  a.qp_type = type;
  a.cap.max_send_wr = depth;
  a.cap.max_recv_wr = depth;
  a.cap.max_send_sge = 4;
  a.cap.max_recv_sge = 4;
  a.cap.max_inline_data = 64;
  return ibv_create_qp(pd, &a);
}

// RESET -> INIT -> RTR -> RTS for a UD QP with Q_Key `qkey`.
inline int UdToRts(ibv_qp* qp, uint32_t qkey) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = qkey;
  if (int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
    return rc;
  a.qp_state = IBV_QPS_RTR;
  if (int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE)) return rc;
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

// INIT -> RTR -> RTS for a UC QP towards `dest_qpn` on this host.
inline int UcConnect(ibv_context* ctx, ibv_qp* qp, int gid_index, uint32_t dest_qpn) {
  if (int rc = ToInit(qp)) return rc;
  ibv_qp_attr a = RtrAttr(ctx, gid_index, dest_qpn);
  if (int rc = ibv_modify_qp(
          qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
    return rc;
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.sq_psn = 0;
  return ibv_modify_qp(qp, &r, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

inline ibv_ah* LoopbackAh(ibv_pd* pd, ibv_context* ctx, int gid) {
  ibv_ah_attr ah{};
  ah.is_global = 1;
  ah.port_num = 1;
  ah.grh.sgid_index = static_cast<uint8_t>(gid);
  ah.grh.hop_limit = 64;
  ibv_query_gid(ctx, 1, gid, &ah.grh.dgid);
  return ibv_create_ah(pd, &ah);
}

// Reads one async event if one arrives within `timeout_ms`.
inline bool NextAsyncEvent(ibv_context* ctx, ibv_async_event* ev, int timeout_ms) {
  pollfd p{ctx->async_fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) != 1) return false;
  if (ibv_get_async_event(ctx, ev)) return false;
  ibv_ack_async_event(ev);
  return true;
}

inline ibv_sge Sge(const void* p, uint32_t len, ibv_mr* mr) {
  return ibv_sge{reinterpret_cast<uintptr_t>(p), len, mr->lkey};
}

inline int PostRecvTo(ibv_qp* qp, uint64_t wr_id, ibv_sge sge) {
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(qp, &wr, &bad);
}

inline int PostSrqRecvTo(ibv_srq* srq, uint64_t wr_id, ibv_sge sge) {
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_srq_recv(srq, &wr, &bad);
}

inline int PostSendTo(ibv_qp* qp, uint64_t wr_id, ibv_sge sge, ibv_wr_opcode op = IBV_WR_SEND,
                      uint32_t imm = 0) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.imm_data = htonl(imm);
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

inline int PostUdSend(ibv_qp* qp, uint64_t wr_id, ibv_sge sge, ibv_ah* ah, uint32_t qpn,
                      uint32_t qkey, ibv_wr_opcode op = IBV_WR_SEND, uint32_t imm = 0) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.imm_data = htonl(imm);
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = qpn;
  wr.wr.ud.remote_qkey = qkey;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

}  // namespace softrdma::test
