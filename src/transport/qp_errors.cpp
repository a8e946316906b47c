// What happens to outstanding work when a QP enters ERR or RESET
// (docs/qp-state-machine.md §5-6).
#include "transport/engine.h"
#include "transport/recv_source.h"
#include "transport/roce/roce_qp.h"
#include "transport/transport.h"
#include "transport/xrc.h"

namespace softrdma::transport {

void EnterError(Engine& engine, Qp& qp) {
  if (qp.state != IBV_QPS_ERR) {
    qp.state = IBV_QPS_ERR;
    qp.qpx.qp_base.state = IBV_QPS_ERR;
    PublishQp(engine, qp);  // initiators stop executing one-sided operations on it
  }
  // Every remaining send WQE completes with a flush error, in order, signaled
  // or not; then every receive WQE (those of an SRQ are not the QP's).
  FlushSendQueue(qp);
  if (qp.srq) OnSrqQpError(qp);
  for (; qp.rq.tail != qp.rq.head; ++qp.rq.tail) {
    ibv_wc wc{};
    wc.wr_id = qp.rq.at(qp.rq.tail).wr_id;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = qp.qpx.qp_base.qp_num;
    qp.recv_cq->Push(wc, true);
  }
  qp.rnr_wait_until_ns = 0;
  qp.tx_blocked = false;
  qp.peer_qp_gone = false;
  qp.frag_active = false;
  qp.frag_received = 0;
  roce::OnError(engine, qp);   // a message half received is abandoned
  qp.xrc_fwd_pending = false;  // its outcome no longer matters
  qp.xrc_fwd_dropped = false;
}

void FlushSendQueue(Qp& qp) {
  for (; qp.sq.tail != qp.sq.head; ++qp.sq.tail)
    CompleteSend(qp, qp.sq.at(qp.sq.tail), IBV_WC_WR_FLUSH_ERR);
  qp.sq_tx = qp.sq.tail;
  qp.tx_blocked = false;
}

void EnterSendQueueError(Qp& qp) {
  // UC/UD only (an RC send error is fatal to the connection): the send
  // queue stops and is flushed, the receive side keeps working, and
  // SQE -> RTS resumes sending.
  qp.state = IBV_QPS_SQE;
  qp.qpx.qp_base.state = IBV_QPS_SQE;
  FlushSendQueue(qp);
}

void ResetQueues(Qp& qp) {
  qp.srq_wqe_held = false;  // discarded without completion, as the QP's own WQEs
  if (qp.type == IBV_QPT_XRC_RECV) UnbindXrcSrq(qp);  // transport/xrc.cpp
  qp.xrc_fwd_pending = false;
  qp.xrc_fwd_dropped = false;
  qp.last_wqe_reached = false;
  qp.comm_established = false;
  qp.sq.tail = qp.sq.head;
  qp.sq_tx = qp.sq.head;
  qp.rq.tail = qp.rq.head;
  qp.rnr_wait_until_ns = 0;
  qp.tx_blocked = false;
  qp.peer_qp_gone = false;
  qp.frag_active = false;
  qp.frag_received = 0;
  qp.ack_pending = false;
  qp.responses.clear();
  qp.rd_resources.Reset(0);
  qp.next_psn = 0;
  qp.epsn = 0;
}

}  // namespace softrdma::transport
