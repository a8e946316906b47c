#include "transport/recv_source.h"

#include "core/srq.h"
#include "transport/engine.h"
#include "transport/xrc.h"

namespace softrdma::transport {

bool AcquireRecv(Qp& qp, RecvSlot* slot) {
  if (!qp.srq) {
    if (qp.rq.size() == 0) return false;
    slot->wqe = &qp.rq.at(qp.rq.tail);
    slot->sges = qp.rq.sge_of(qp.rq.tail);
    slot->pd_id = qp.pd->id;
    return true;
  }
  if (!qp.srq_wqe_held) {
    if (!qp.srq->Take(&qp.srq_wqe, qp.srq_sges.data())) {
      if (qp.type == IBV_QPT_XRC_RECV) UnbindXrcSrq(qp);  // bound again on retry
      return false;
    }
    qp.srq_wqe_held = true;
  }
  slot->wqe = &qp.srq_wqe;
  slot->sges = qp.srq_sges.data();
  slot->pd_id = qp.srq->pd()->id;
  return true;
}

void ConsumeRecv(Qp& qp) {
  if (qp.srq)
    qp.srq_wqe_held = false;
  else
    ++qp.rq.tail;
  // An XRC target holds its SRQ only while placing a message.
  if (qp.type == IBV_QPT_XRC_RECV) UnbindXrcSrq(qp);
}

int ResolveRecv(Engine& engine, const RecvSlot& slot, uint64_t len, iovec* out) {
  return engine.mr_table().ResolveSges(slot.sges, slot.wqe->num_sge, slot.pd_id,
                                       IBV_ACCESS_LOCAL_WRITE, out, len);
}

uint64_t RecvCapacity(const RecvSlot& slot) {
  uint64_t sum = 0;
  for (uint32_t i = 0; i < slot.wqe->num_sge; ++i) sum += slot.sges[i].length;
  return sum;
}

void OnSrqQpError(Qp& qp) {
  if (qp.srq_wqe_held) {
    ibv_wc wc{};
    wc.wr_id = qp.srq_wqe.wr_id;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = qp.qpx.qp_base.qp_num;
    qp.recv_cq->Push(wc, true);
    qp.srq_wqe_held = false;
  }
  if (!qp.last_wqe_reached) {
    qp.last_wqe_reached = true;
    PostAsyncEvent(qp.ctx, IBV_EVENT_QP_LAST_WQE_REACHED, qp.verbs());
  }
  // A failed XRC target will place nothing more: it lets its SRQ go, so the
  // SRQ can be destroyed before the QP.
  if (qp.type == IBV_QPT_XRC_RECV) UnbindXrcSrq(qp);
}

}  // namespace softrdma::transport
