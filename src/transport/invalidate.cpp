// Memory-window binds and invalidation.
//
// BIND_MW and LOCAL_INV are send-queue operations that send nothing: the
// requester executes them against this process's MR table when they reach
// the head of the send queue, so every earlier WQE is complete (rxe fences
// LOCAL_INV the same way; doing it for binds too keeps one rule) and their
// completion is in SQ order at once. A failure completes the WQE with
// IBV_WC_MW_BIND_ERR / IBV_WC_LOC_QP_OP_ERR and moves the QP to ERR
// (qp-state-machine.md §8).
//
// What can be invalidated follows rxe: a bound type 2 window. Regions from
// ibv_reg_mr are not fast-registration MRs and type 1 windows are unbound
// only by a bind, so invalidating their keys fails.
#include <infiniband/verbs.h>

#include "core/mw.h"
#include "transport/engine.h"
#include "transport/transport.h"

namespace softrdma::transport {

namespace {

constexpr unsigned kWindowAccess =
    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
// Accepted in a bind's access and dropped: a window has no lkey, so local
// write through it means nothing. mlx5 takes it too, and programs pass it
// (pyverbs binds with LOCAL_WRITE | REMOTE_WRITE).
constexpr unsigned kIgnoredWindowAccess = IBV_ACCESS_LOCAL_WRITE;

// The checks of the bind that need the verbs objects; the MR table checks
// the MR itself (live, MW_BIND, range, PD) under its lock.
int Bind(Engine& engine, Qp& qp, const SendWqe& w) {
  if (!w.mw) return EINVAL;
  const ibv_mw& mw = *w.mw;
  const ibv_mw_bind_info& info = w.bind;
  // Window, MR and QP share one PD; the new key keeps the window's index
  // (mw.handle, fixed at allocation: mw.rkey may be written by ibv_bind_mw's
  // caller while this runs in the progress thread).
  if (mw.pd != qp.verbs()->pd || (w.key >> 8) != mw.handle) return EINVAL;
  if (info.mr && info.mr->pd != mw.pd) return EPERM;
  if (!info.mr && (info.addr || info.length)) return EINVAL;
  // Zero-based windows (addressed from 0, not by the MR's addresses): type 2
  // only, as rxe binds them; ibv_bind_mw refuses them for type 1 (BindMw).
  const bool zero_based = info.mw_access_flags & IBV_ACCESS_ZERO_BASED;
  if (zero_based && mw.type != IBV_MW_TYPE_2) return EINVAL;
  const unsigned access =
      info.mw_access_flags & ~(kIgnoredWindowAccess | static_cast<unsigned>(IBV_ACCESS_ZERO_BASED));
  if (access & ~kWindowAccess) return EINVAL;
  WindowBind b{};
  b.new_rkey = w.key;
  b.pd_id = qp.pd->id;
  b.qpn = qp.qpx.qp_base.qp_num;
  if (info.length) {  // length 0 = unbind (type 1; the table refuses it for type 2)
    b.mr_lkey = info.mr->lkey;
    b.addr = info.addr;
    b.length = info.length;
    b.access = access;
    b.zero_based = zero_based;
  }
  return engine.mr_table().BindWindow(b);
}

}  // namespace

void CaptureLocalOpWr(SendWqe& w, const ibv_send_wr& wr) {
  w.mw = nullptr;
  w.bind = {};
  w.key = 0;
  switch (wr.opcode) {
    case IBV_WR_BIND_MW:
      w.mw = wr.bind_mw.mw;
      w.bind = wr.bind_mw.bind_info;
      w.key = wr.bind_mw.rkey;
      break;
    case IBV_WR_LOCAL_INV:
      w.key = wr.invalidate_rkey;
      break;
    case IBV_WR_SEND_WITH_INV:
      w.key = wr.invalidate_rkey;
      w.imm = wr.invalidate_rkey;  // travels in the header's imm field
      break;
    default:
      break;
  }
}

OneSidedTx ExecuteLocalOp(Engine& engine, Qp& qp, uint32_t index) {
  if (index != qp.sq.tail) return OneSidedTx::kWait;
  SendWqe& w = qp.sq.at(index);
  ibv_wc_status status = IBV_WC_SUCCESS;
  if (w.opcode == IBV_WR_BIND_MW) {
    if (Bind(engine, qp, w)) status = IBV_WC_MW_BIND_ERR;
  } else if (engine.mr_table().Invalidate(w.key, qp.pd->id, 0)) {
    status = IBV_WC_LOC_QP_OP_ERR;  // what rxe reports for a failed LOCAL_INV
  }
  if (status != IBV_WC_SUCCESS) {
    FailSendHead(engine, qp, status);
    return OneSidedTx::kStopped;
  }
  if (w.signaled) CompleteSend(qp, w, IBV_WC_SUCCESS);
  ++qp.sq.tail;
  ++qp.sq_tx;
  return OneSidedTx::kRetired;
}

bool InvalidateForSend(Engine& engine, Qp& qp, uint32_t rkey) {
  // Type 2B: the window must be bound to this very QP (and its PD).
  return engine.mr_table().Invalidate(rkey, qp.pd->id, qp.qpx.qp_base.qp_num) == 0;
}

}  // namespace softrdma::transport
