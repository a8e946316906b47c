// Responder: executes incoming requests against receive WQEs and tells the
// requester how it went (ACK, RNR NAK, NAK), per docs/rc-transport.md §4.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include <sys/uio.h>

#include "core/limits.h"
#include "core/objects.h"
#include "core/qp_state_machine.h"
#include "core/srq.h"
#include "transport/engine.h"
#include "transport/iov_slice.h"
#include "transport/recv_source.h"
#include "transport/transport.h"
#include "transport/xrc.h"
#include "util/config.h"
#include "util/log.h"

namespace softrdma::transport {

// One frame for the lock and the queueing (ibv_post_recv jumps here): a
// separate PostRecv cost a call and a second set of register saves.
int LockAndPostRecv(Engine& engine, Qp& qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  std::lock_guard<SpinLock> lock(qp.lock);
  int rc = CheckPostRecvState(qp.state, qp.srq != nullptr);
  if (rc) {
    *bad_wr = wr;
    return rc;
  }
  bool queued = false;
  for (; wr; wr = wr->next) {
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > qp.cap.max_recv_sge ||
        (wr->num_sge > 0 && !wr->sg_list)) {
      rc = EINVAL;
    } else if (qp.rq.full()) {
      rc = ENOMEM;
    }
    if (rc) {
      *bad_wr = wr;
      break;
    }
    uint32_t index = qp.rq.head;
    RecvWqe& w = qp.rq.at(index);
    w.wr_id = wr->wr_id;
    w.num_sge = static_cast<uint32_t>(wr->num_sge);
    // One SGE is the common case: a plain copy, not a call to memmove.
    if (wr->num_sge == 1)
      *qp.rq.sge_of(index) = wr->sg_list[0];
    else
      std::copy_n(wr->sg_list, wr->num_sge, qp.rq.sge_of(index));
    ++qp.rq.head;
    queued = true;
  }
  if (queued && RecvsFlushImmediately(qp.state)) EnterError(engine, qp);
  return rc;
}

namespace {

void CompleteRecv(Qp& qp, const RecvWqe& w, ibv_wc_status status, const wire::RecordHeader& req) {
  const uint64_t wr_id = w.wr_id;
  const uint32_t qp_num = qp.qpx.qp_base.qp_num;
  qp.recv_cq->Emplace((req.flags & wire::kFlagSolicited) != 0, [=, &req](ibv_wc& wc) {
    wc = ibv_wc{};
    wc.wr_id = wr_id;
    wc.status = status;
    wc.opcode = IBV_WC_RECV;
    wc.byte_len = req.total_len;
    wc.qp_num = qp_num;
    wc.src_qp = req.src_qpn;
    if (req.flags & wire::kFlagHasImm) {
      wc.wc_flags |= IBV_WC_WITH_IMM;
      wc.imm_data = req.imm;
    }
    if (req.flags & wire::kFlagInvalidate) {
      wc.wc_flags |= IBV_WC_WITH_INV;
      wc.invalidated_rkey = req.imm;
    }
  });
}

}  // namespace

void ScatterFromRecord(const shm::RecordView& view, uint32_t src_off, const iovec* iov, int n,
                       uint64_t dst_off, uint64_t len) {
  for (int i = 0; i < n && len; ++i) {
    if (dst_off >= iov[i].iov_len) {
      dst_off -= iov[i].iov_len;
      continue;
    }
    uint64_t take = std::min<uint64_t>(iov[i].iov_len - dst_off, len);
    view.CopyOut(src_off, static_cast<uint8_t*>(iov[i].iov_base) + dst_off,
                 static_cast<uint32_t>(take));
    src_off += static_cast<uint32_t>(take);
    len -= take;
    dst_off = 0;
  }
}

namespace {

// The common receive, ahead of the general path: an RC QP, a whole message
// carried in the record, a one-SGE WQE that holds it. It changes nothing
// unless it completes the message, so anything else (no WQE, a short
// buffer, a bad lkey, several SGEs, invalidation, an empty message) is left
// to the general path and its error handling. With an SRQ the one thing it
// may change is to take the SRQ's oldest WQE, which the QP then holds
// (Qp::srq_wqe_held), exactly as the general path's AcquireRecv would: that
// path then finds the WQE held and handles it.
[[gnu::always_inline]] inline bool TryReceiveInline(Engine& engine, Qp& qp,
                                                    const wire::RecordHeader& req,
                                                    const shm::RecordView& view) {
  if (qp.type != IBV_QPT_RC || (req.flags & wire::kFlagInvalidate) ||
      req.payload_len != req.total_len || req.total_len == 0)
    return false;
  const RecvWqe* w;
  const ibv_sge* sge;
  uint32_t pd_id;
  if (!qp.srq) {
    if (qp.rq.size() == 0) return false;
    w = &qp.rq.at(qp.rq.tail);
    sge = qp.rq.sge_of(qp.rq.tail);
    pd_id = qp.pd->id;
  } else {
    // A stream of small SENDs into an SRQ (UCX's rc_verbs receives this
    // way): the same path, the WQE taken first.
    if (qp.srq_wqe_held || !qp.srq->Take(&qp.srq_wqe, qp.srq_sges.data())) return false;
    qp.srq_wqe_held = true;
    w = &qp.srq_wqe;
    sge = qp.srq_sges.data();
    pd_id = qp.srq->pd()->id;
  }
  if (w->num_sge != 1 || sge->length < req.total_len) return false;
  uint64_t host = 0;
  if (engine.mr_table().LookupLocal(sge->lkey, sge->addr, sge->length, pd_id,
                                    IBV_ACCESS_LOCAL_WRITE, &host) != 0)
    return false;
  view.CopyOutToBuffer(sizeof req, reinterpret_cast<void*>(host), req.total_len);
  CompleteRecv(qp, *w, IBV_WC_SUCCESS, req);
  if (qp.srq)
    qp.srq_wqe_held = false;
  else
    ++qp.rq.tail;
  qp.epsn = PsnAdd(qp.epsn, 1);
  return true;
}

}  // namespace

PullResult PullFromRequester(PeerLink& peer, const iovec* local, int nlocal,
                             const shm::RecordView& view, uint32_t list_off,
                             const wire::RecordHeader& req) {
  uint32_t niov = req.payload_len / sizeof(wire::RemoteIov);
  if (niov > limits::kMaxSge) return PullResult::kFault;
  wire::RemoteIov remote_list[limits::kMaxSge];
  view.CopyOut(list_off, remote_list, niov * sizeof(wire::RemoteIov));
  iovec remote[limits::kMaxSge];
  uint32_t mapped = 0;
  PeerMappings::Pinned pin(peer.mappings.get());
  for (uint32_t i = 0; i < niov; ++i) {
    uint8_t* p = peer.mappings ? peer.mappings->Resolve(remote_list[i].extent, remote_list[i].addr,
                                                        remote_list[i].len)
                               : nullptr;
    mapped += p != nullptr;
    remote[i] = iovec{p ? p : reinterpret_cast<void*>(remote_list[i].addr), remote_list[i].len};
  }
  if (mapped == niov) {
    CopyIovecs(remote, static_cast<int>(niov), local, nlocal);
    return PullResult::kOk;
  }
  if (!GetConfig().cma_allowed) {
    errno = EPERM;
    return PullResult::kRefused;
  }
  for (uint32_t i = 0; i < niov; ++i)
    remote[i] = iovec{reinterpret_cast<void*>(remote_list[i].addr), remote_list[i].len};
  ssize_t got = process_vm_readv(peer.pid, local, nlocal, remote, niov, 0);
  if (got == static_cast<ssize_t>(req.total_len)) return PullResult::kOk;
  SOFTRDMA_LOG(kDebug, "pull of %u bytes from pid %d: got %zd (%s)", req.total_len, peer.pid, got,
               got < 0 ? strerror(errno) : "short");
  if (got < 0 && (errno == EPERM || errno == ENOSYS || errno == EACCES))
    return PullResult::kRefused;
  return PullResult::kFault;
}

namespace {

wire::RecordHeader NakFor(Engine& engine, const wire::RecordHeader& req, wire::Syndrome why,
                          uint32_t rnr_timer) {
  wire::RecordHeader h{};
  h.type = wire::RecordType::kAck;
  h.syndrome = why;
  h.src_qpn = req.dst_qpn;
  h.dst_qpn = req.src_qpn;
  h.psn = req.psn;
  h.src_slot = engine.me().slot;
  h.src_gen = engine.me().gen;
  h.rnr_timer = rnr_timer;
  return h;
}

void QueueAckRecord(Qp& qp, uint32_t psn, wire::Syndrome syndrome, uint32_t rnr_timer) {
  PendingResponse r{};
  r.kind = PendingResponse::kAckRecord;
  r.syndrome = static_cast<uint8_t>(syndrome);
  r.psn = psn;
  r.value = rnr_timer;
  qp.responses.push_back(r);
}

}  // namespace

// The responder's answers leave in request order, as a NIC's responses
// leave in PSN order: the ACK owed for the messages before the NAKed one
// (a NIC sends it as it executes them), the READ/atomic answers still
// waiting for room in the requester's ring (one_sided.cpp), then the NAK.
// A NAK that overtook them was misread by the requester: an RNR NAK taken
// for a stale one left the SEND waiting for its timeout, a sequence NAK
// made it resend READs whose answers were on their way. So a NAK joins the
// queue of answers (Qp::responses), which FlushResponses sends in order
// now or, when the ring is full, once it has room (the QP's service): a
// NAK is no longer lost to a full ring. The caller holds the QP's lock.
void SendNak(Engine& engine, Qp& qp, const wire::RecordHeader& req, wire::Syndrome why,
             uint32_t rnr_timer) {
  if (!qp.peer) return;
  if (qp.ack_pending) {
    QueueAckRecord(qp, PsnAdd(qp.epsn, 0xffffff), wire::Syndrome::kAck, 0);  // epsn - 1
    qp.ack_pending = false;
  }
  QueueAckRecord(qp, req.psn, why, rnr_timer);
  if (!FlushResponses(engine, qp)) engine.NeedService(&qp);
}

void SendNakNoQp(Engine& engine, PeerLink& peer, const wire::RecordHeader& req) {
  // A NAK lost to a full ring is recovered by the requester's retransmit
  // timer, as a lost packet would be.
  engine.Send(peer, NakFor(engine, req, wire::Syndrome::kNakNoQp, 0), nullptr, 0);
}

bool SendAck(Engine& engine, Qp& qp) {
  if (!qp.peer) return true;
  if (!qp.responses.empty()) return false;  // queued answers go first (SendNak)
  wire::RecordHeader h{};
  h.type = wire::RecordType::kAck;
  h.syndrome = wire::Syndrome::kAck;
  h.src_qpn = qp.qpx.qp_base.qp_num;
  h.dst_qpn = qp.attr.dest_qp_num;
  h.psn = PsnAdd(qp.epsn, 0xffffff);  // epsn - 1: everything before epsn is done
  h.src_slot = engine.me().slot;
  h.src_gen = engine.me().gen;
  if (!engine.Send(*qp.peer, h, nullptr, 0)) return false;
  qp.ack_pending = false;
  return true;
}

// Deferred ACKs. The cumulative ACK that a drain run by the application
// owes a QP is held back until one of these, whichever comes first:
//  - the QP's next request to the same peer carries it (PiggybackAck): in a
//    ping-pong the reply acknowledges the request, and the ACK record, with
//    its cache-line transfers on both sides, disappears;
//  - a NAK for a later message on the QP (SendNak queues the ACK first);
//  - the next drain that finds records, or the next poll that finds no
//    completion (the application waits rather than answers);
//  - the QP's destruction, or the process's exit;
//  - the progress thread, about a tick after the application stopped
//    polling. Drains defer only while the thread is known to look again
//    soon (Engine::DeferAcks); the thread's own drains never defer.
// The requester's completion still means that the responder executed the
// message: the ACK is produced only after that, it is merely carried later.
bool PiggybackAck(const Qp& qp, wire::RecordHeader* h) {
  // Answers still queued go first (SendAck).
  if (!qp.ack_pending || !qp.responses.empty() || !qp.peer) return false;
  h->flags |= wire::kFlagAck;
  h->ack_psn = PsnAdd(qp.epsn, 0xffffff);  // epsn - 1, as SendAck
  return true;
}

namespace {

// A SEND (or one of its fragments) into the receive WQE `slot` holds: the
// length checked, the WQE's SGEs resolved, the payload copied or pulled,
// and the WQE completed with the message's last piece. What OnRequest
// returns (true: an ACK is owed).
bool ReceiveIntoSlot(Engine& engine, Qp& qp, const wire::RecordHeader& req,
                     const shm::RecordView& view, RecvSlot& slot) {
  const bool uc = qp.type == IBV_QPT_UC;
  if (req.total_len > RecvCapacity(slot)) {
    if (uc) {
      // Dropped; a WQE already taken from an SRQ completes in error.
      if (qp.srq) {
        CompleteRecv(qp, *slot.wqe, IBV_WC_LOC_LEN_ERR, req);
        ConsumeRecv(qp);
      }
      qp.frag_active = false;
      return false;
    }
    // Message longer than the receive buffer: the responder's WQE completes
    // with a local length error and the requester gets "invalid request".
    CompleteRecv(qp, *slot.wqe, IBV_WC_LOC_LEN_ERR, req);
    ConsumeRecv(qp);
    SendNak(engine, qp, req, wire::Syndrome::kNakInvalidRequest);
    EnterError(engine, qp);
    return false;
  }
  iovec local[limits::kMaxSge];
  int nlocal = ResolveRecv(engine, slot, req.total_len, local);
  if (nlocal < 0) {
    CompleteRecv(qp, *slot.wqe, IBV_WC_LOC_PROT_ERR, req);
    ConsumeRecv(qp);
    if (!uc) SendNak(engine, qp, req, wire::Syndrome::kNakRemoteOp);
    EnterError(engine, qp);
    return false;
  }

  switch (req.mode) {
    case wire::PayloadMode::kInline:
      if (req.payload_len != req.total_len) return false;  // malformed: drop
      ScatterFromRecord(view, sizeof req, local, nlocal, 0, req.total_len);
      break;
    case wire::PayloadMode::kPull: {
      PullResult r = PullFromRequester(*qp.peer, local, nlocal, view, sizeof req, req);
      if (r == PullResult::kRefused) {
        SOFTRDMA_LOG(kInfo, "cannot read the requester's memory (%s): using the two-copy path",
                     strerror(errno));
        SendNak(engine, qp, req, wire::Syndrome::kPullRefused);
        return false;
      }
      if (r == PullResult::kFault) {
        SendNak(engine, qp, req, wire::Syndrome::kNakRemoteOp);
        CompleteRecv(qp, *slot.wqe, IBV_WC_LOC_QP_OP_ERR, req);
        ConsumeRecv(qp);
        EnterError(engine, qp);
        return false;
      }
      break;
    }
    case wire::PayloadMode::kFragment:
      if (uint64_t{req.frag_offset} + req.payload_len > req.total_len) return false;  // malformed
      ScatterFromRecord(view, sizeof req, local, nlocal, req.frag_offset, req.payload_len);
      qp.frag_received += req.payload_len;
      qp.frag_active = true;
      if (!(req.flags & wire::kFlagLastFragment)) return false;  // more to come
      qp.frag_active = false;
      qp.frag_received = 0;
      break;
  }
  // SEND with Invalidate: the key dies before the receive completes. If it
  // cannot (rc-transport.md §4.6): REM_INV_REQ_ERR on the receive, QP to
  // ERR, and (as rxe) no NAK: the SEND itself was received.
  const bool invalidated =
      !(req.flags & wire::kFlagInvalidate) || InvalidateForSend(engine, qp, req.imm);
  CompleteRecv(qp, *slot.wqe, invalidated ? IBV_WC_SUCCESS : IBV_WC_REM_INV_REQ_ERR, req);
  ConsumeRecv(qp);
  qp.epsn = PsnAdd(qp.epsn, 1);
  if (!invalidated) EnterError(engine, qp);
  return !uc;  // UC is never acknowledged
}

}  // namespace

bool OnRequest(Engine& engine, Qp& qp, const wire::RecordHeader& req, const shm::RecordView& view) {
  // Requests are executed from RTR on; in RESET/INIT they are dropped and in
  // ERR nothing is answered (the requester times out, as on a NIC).
  constexpr uint32_t kExecuting =
      1u << IBV_QPS_RTR | 1u << IBV_QPS_RTS | 1u << IBV_QPS_SQD | 1u << IBV_QPS_SQE;
  if (!((1u << (qp.state & 31)) & kExecuting)) return false;
  if (!EnsurePeer(engine, qp) || req.src_qpn != qp.attr.dest_qp_num ||
      req.src_slot != qp.peer->ref.slot || req.src_gen != qp.peer->ref.gen)
    return false;  // an RC or UC QP only talks to its connected peer
  // The first request that finds the QP in RTR: the HCA's "communication
  // established" event (the CM uses it when data overtakes the RTU; rdma_notify).
  // Once per QP until it is reset. One-sided operations a requester executes
  // directly do not pass here (docs/abi.md).
  if (qp.state == IBV_QPS_RTR && !qp.comm_established) {
    qp.comm_established = true;
    PostAsyncEvent(qp.ctx, IBV_EVENT_COMM_EST, qp.verbs());
  }
  // RDMA WRITE/READ/atomics (two-copy path) and error notices.
  if (req.type != wire::RecordType::kSend) return OnOneSidedRequest(engine, qp, req, view);
  // Malformed (more payload claimed than the record holds): dropped, as a
  // WRITE or a datagram would be, not a receive completed unwritten.
  if (view.size() - sizeof req < req.payload_len) return false;
  const bool fragment = req.mode == wire::PayloadMode::kFragment;
  // UC (rc-transport.md §8): no ACKs, NAKs or RNR; what cannot be placed is
  // dropped. A message start is accepted whatever its PSN and resynchronises
  // the expected PSN; a continuation fragment of another PSN is dropped
  // along with the rest of its message.
  const bool uc = qp.type == IBV_QPT_UC;
  auto nak = [&](wire::Syndrome why, uint32_t rnr_timer = 0) {
    if (!uc) SendNak(engine, qp, req, why, rnr_timer);
  };
  if (uc) {
    if (req.mode == wire::PayloadMode::kPull) return false;  // a UC requester never pulls
    if (!fragment || req.frag_offset == 0) {
      qp.epsn = req.psn;
    } else if (req.psn != qp.epsn) {
      qp.frag_active = false;
      return false;
    }
  } else if (req.psn != qp.epsn) {
    // Duplicate (already executed): acknowledge again so that a requester
    // that retransmitted learns it is done. A PSN from the future follows a
    // message we NAKed; the requester rewinds on that NAK, so drop it (or
    // one behind an XRC message handed to another process: OnXrcDone).
    if (PsnBefore(req.psn, qp.epsn)) return true;
    if (qp.xrc_fwd_pending) qp.xrc_fwd_dropped = true;
    return false;
  }
  if (req.mode == wire::PayloadMode::kInline && TryReceiveInline(engine, qp, req, view))
    return true;
  if (fragment && req.frag_offset == 0) {
    // A (re)transmission starts the message over.
    qp.frag_received = 0;
    qp.frag_active = false;
  }
  if (fragment && req.frag_offset != qp.frag_received) return false;  // tail of a NAKed message
  if (fragment && req.frag_offset > 0 && !qp.frag_active) return false;

  RecvSlot slot;
  if (qp.type == IBV_QPT_XRC_RECV && !BindXrcSrq(qp, req.rnr_timer)) {
    // Not an SRQ of this process of our domain: one of another process of
    // the domain gets the message handed over (transport/xrc_forward.cpp).
    const XrcForward f = ForwardXrcRequest(engine, qp, req, view);
    if (f == XrcForward::kNowhere) {
      nak(wire::Syndrome::kNakInvalidRequest);
      EnterError(engine, qp);
    } else if (f == XrcForward::kForwarded && fragment) {
      const bool last = req.flags & wire::kFlagLastFragment;
      qp.frag_received = last ? 0 : qp.frag_received + req.payload_len;
      qp.frag_active = !last;
    }
    return false;  // answered when the SRQ's process reports (OnXrcDone)
  }
  if (!AcquireRecv(qp, &slot)) {
    nak(wire::Syndrome::kRnrNak, qp.attr.min_rnr_timer);
    return false;
  }
  return ReceiveIntoSlot(engine, qp, req, view, slot);
}

}  // namespace softrdma::transport
