// Completer: retires send WQEs when the responder acknowledges them, and
// turns NAKs and timeouts into the work-completion statuses of
// docs/rc-transport.md §6.
#include <cstring>

#include "transport/engine.h"
#include "transport/responder_stall.h"
#include "transport/roce/roce_qp.h"
#include "transport/sq_drain.h"
#include "transport/transport.h"
#include "util/clock.h"
#include "util/log.h"

namespace softrdma::transport {

namespace {

ibv_wc_opcode SendWcOpcode(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ:
      return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
      return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      return IBV_WC_FETCH_ADD;
    case IBV_WR_LOCAL_INV:
      return IBV_WC_LOCAL_INV;
    case IBV_WR_BIND_MW:
      return IBV_WC_BIND_MW;
    default:
      return IBV_WC_SEND;
  }
}

ibv_wc_status NakStatus(wire::Syndrome s) {
  switch (s) {
    case wire::Syndrome::kNakInvalidRequest:
      return IBV_WC_REM_INV_REQ_ERR;
    case wire::Syndrome::kNakRemoteAccess:
      return IBV_WC_REM_ACCESS_ERR;
    default:
      return IBV_WC_REM_OP_ERR;
  }
}

}  // namespace

// Retires every transmitted WQE whose PSN is before `psn` (exclusive) or up
// to and including it (inclusive).
void RetireAcked(Qp& qp, uint32_t psn, bool inclusive) {
  while (qp.sq.tail != qp.sq_tx) {
    SendWqe& w = qp.sq.at(qp.sq.tail);
    bool covered = PsnBefore(w.psn, psn) || (inclusive && w.psn == psn);
    if (!covered) break;
    // A READ/atomic completes with its response, never with an ACK alone.
    if ((w.opcode == IBV_WR_RDMA_READ || w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
         w.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) &&
        !w.resp_done)
      break;
    if (w.signaled) CompleteSend(qp, w, IBV_WC_SUCCESS);
    ++qp.sq.tail;
  }
  NoteSendsRetired(qp);
}

namespace {

// Restart transmission from the oldest unacknowledged WQE.
void Rewind(Qp& qp) {
  qp.sq_tx = qp.sq.tail;
  for (uint32_t i = qp.sq.tail; i != qp.sq.head; ++i) qp.sq.at(i).tx_offset = 0;
}

}  // namespace

void CompleteSendWr(Qp& qp, uint64_t wr_id, ibv_wr_opcode opcode, uint32_t byte_len,
                    ibv_wc_status status) {
  const uint32_t qp_num = qp.qpx.qp_base.qp_num;
  qp.send_cq->Emplace(status != IBV_WC_SUCCESS, [=](ibv_wc& wc) {
    wc = ibv_wc{};
    wc.wr_id = wr_id;
    wc.status = status;
    wc.opcode = SendWcOpcode(opcode);
    wc.byte_len = byte_len;
    wc.qp_num = qp_num;
    if (opcode == IBV_WR_SEND_WITH_IMM || opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
      wc.wc_flags = IBV_WC_WITH_IMM;
  });
}

void CompleteSend(Qp& qp, const SendWqe& w, ibv_wc_status status) {
  CompleteSendWr(qp, w.wr_id, w.opcode, w.total_len, status);
}

void FailSendHead(Engine& engine, Qp& qp, ibv_wc_status status) {
  if (qp.sq.tail != qp.sq.head) {
    // An error completion is generated even for an unsignaled WR.
    CompleteSend(qp, qp.sq.at(qp.sq.tail), status);
    ++qp.sq.tail;
    if (static_cast<int32_t>(qp.sq_tx - qp.sq.tail) < 0) qp.sq_tx = qp.sq.tail;
  }
  if (qp.type == IBV_QPT_UC || qp.type == IBV_QPT_UD)
    EnterSendQueueError(qp);  // receives go on
  else
    EnterError(engine, qp);
}

namespace {

// Whether an ACK or NAK is for this QP now. false: dropped, as a NIC drops it.
bool ResponseApplies(const Qp& qp, uint32_t src_qpn) {
  // Responses are processed in RTS, SQD and SQE; in ERR everything is flushed.
  if (qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_SQD && qp.state != IBV_QPS_SQE) return false;
  if (qp.type != IBV_QPT_RC && qp.type != IBV_QPT_XRC_SEND) return false;  // UC/UD: never ACKed
  return src_qpn == qp.attr.dest_qp_num;                                   // not our peer: ignore
}

// What every ACK or NAK from the responder QP does first: it exists and
// answers, so the retransmit timer starts over.
bool TakeResponse(Qp& qp, uint32_t src_qpn) {
  if (!ResponseApplies(qp, src_qpn)) return false;
  qp.progress_seen = true;  // restarts the retransmit timer (CheckTimers)
  qp.retries_left = qp.attr.retry_cnt;
  qp.peer_qp_gone = false;
  return true;
}

void OnPositiveAck(Qp& qp, uint32_t psn) {
  RetireAcked(qp, psn, /*inclusive=*/true);
  qp.rnr_retries_left = qp.attr.rnr_retry;
}

}  // namespace

// The ACK a request carries (wire::kFlagAck): as a kAck record for
// `ack_psn` just before the request, without building one.
void OnPiggybackedAck(Engine& engine, Qp& qp, const wire::RecordHeader& req) {
  if (!TakeResponse(qp, req.src_qpn)) return;
  OnPositiveAck(qp, req.ack_psn);
  // Acknowledgements free the way for a WQE that waited behind them.
  if (qp.tx_blocked) engine.NeedService(&qp);
}

void OnAck(Engine& engine, Qp& qp, const wire::RecordHeader& ack) {
  if (ack.syndrome == wire::Syndrome::kNakNoQp) {
    // The responder's process has no such QP (destroyed, or not created
    // yet). A NIC hears nothing and reports RETRY_EXC_ERR once its timer
    // expired retry_cnt + 1 times; we skip the retries but not the timer
    // (CheckTimers). Failing now would let the error overtake completions
    // that a NIC delivers long before it, such as the ACKs (on other QPs,
    // still in our ring) of what the responder executed before its destroy:
    // an application that counts completions, then stops at the first error
    // (ibv_srq_pingpong), fails where it never does on hardware. Not
    // progress, and it acknowledges nothing.
    if (ResponseApplies(qp, ack.src_qpn) && qp.sq.tail != qp.sq_tx &&
        qp.sq.at(qp.sq.tail).psn == ack.psn)
      qp.peer_qp_gone = true;
    return;
  }
  if (!TakeResponse(qp, ack.src_qpn)) return;
  switch (ack.syndrome) {
    case wire::Syndrome::kAck:
      OnPositiveAck(qp, ack.psn);
      break;
    case wire::Syndrome::kRnrNak: {
      // Every NAK implicitly acknowledges what came before it.
      RetireAcked(qp, ack.psn, /*inclusive=*/false);
      if (qp.sq.tail == qp.sq_tx || qp.sq.at(qp.sq.tail).psn != ack.psn) break;  // stale
      if (qp.attr.rnr_retry != 7) {
        if (qp.rnr_retries_left == 0) {
          FailSendHead(engine, qp, IBV_WC_RNR_RETRY_EXC_ERR);
          return;
        }
        --qp.rnr_retries_left;
      }
      Rewind(qp);
      qp.rnr_wait_until_ns = NowNs() + RnrTimerNs(ack.rnr_timer);
      engine.NeedService(&qp);
      break;
    }
    case wire::Syndrome::kPullRefused:
      // The responder cannot read our memory: resend from this WQE by
      // fragments, which every responder accepts.
      RetireAcked(qp, ack.psn, /*inclusive=*/false);
      if (qp.peer) qp.peer->pull_refused.store(true, std::memory_order_relaxed);
      Rewind(qp);
      engine.NeedService(&qp);
      break;
    case wire::Syndrome::kNakSequence:
      RetireAcked(qp, ack.psn, /*inclusive=*/false);
      Rewind(qp);
      engine.NeedService(&qp);
      break;
    default:
      RetireAcked(qp, ack.psn, /*inclusive=*/false);
      if (qp.sq.tail == qp.sq_tx || qp.sq.at(qp.sq.tail).psn != ack.psn) break;  // stale
      FailSendHead(engine, qp, NakStatus(ack.syndrome));
      return;
  }
  // Acknowledgements free the way for a WQE that waited behind them.
  if (qp.tx_blocked) engine.NeedService(&qp);
}

namespace {

// Whether the responder's silence over the last timeout is its CPU's, not
// its QP's: its process is alive, records wait unread in its ring, and its
// consumer has not moved since the timer last expired. On a NIC the
// responder's hardware answers whatever its CPU does, so no retry is used
// up for that: on a loaded host (more runnable threads than cores, a
// process pinned to a busy core) a process can go half a second without
// running, as long as a whole retry budget (ibv_rc_pingpong: 7 x 67 ms),
// and the requester then failed a healthy connection with RETRY_EXC_ERR.
// A responder that runs and drops what it reads (its QP in INIT or RESET)
// empties its ring and still uses up the retries; one that reads nothing
// for kMaxResponderStallNs (a stopped process) counts as unresponsive.
// The clock, its bound and the liveness check are both wires'
// (responder_stall.h); progress here is the ring's consumption.
bool ResponderNotScheduled(Engine& engine, Qp& qp, uint64_t now) {
  if (!qp.peer || qp.peer->ring == nullptr) return false;
  const shm::Ring& ring = *qp.peer->ring;
  const uint64_t consumed = ring.ConsumedSlots();
  const bool unread = ring.ReservedSlots() != consumed;
  // Records waiting unread start a stall at once; within one, the consumer
  // moving ends it.
  ResponderStallClock& clock = qp.peer_stall;
  const bool progress = !unread || (clock.since_ns != 0 && consumed != clock.mark);
  if (clock.since_ns == 0) clock.mark = consumed;
  return StalledButAlive(engine, clock, qp.peer->ref, progress, now);
}

}  // namespace

bool CheckTimers(Engine& engine, Qp& qp, uint64_t now, uint64_t* deadline, bool* ring_look_wanted) {
  if (qp.roce) return roce::CheckTimers(engine, qp, now, deadline);
  if (qp.state == IBV_QPS_ERR || qp.state == IBV_QPS_RESET) return false;
  // A WQE waiting for ring space counts as outstanding too: a peer that
  // stops draining its ring is as dead to us as one that stops answering.
  bool outstanding = qp.sq.tail != qp.sq_tx || (qp.tx_blocked && qp.sq_tx != qp.sq.head);
  if (!outstanding) return qp.rnr_wait_until_ns != 0;
  uint64_t timeout = AckTimeoutNs(qp.attr.timeout);
  // timeout 0 = wait forever, unless the responder said its QP is gone.
  if (timeout == 0 && !qp.peer_qp_gone) return true;
  if (qp.progress_seen) {
    // Progress since we last looked: the timeout counts from now, which is
    // at most one timer period after the progress, so never early.
    qp.progress_seen = false;
    qp.last_ack_ns = now;
    qp.peer_stall.since_ns = 0;
  }
  uint64_t due = qp.last_ack_ns + timeout;
  if (now < due) {
    *deadline = due;
    return true;
  }
  if (ring_look_wanted != nullptr && engine.inbound_ring().Head() != shm::Ring::HeadState::kEmpty) {
    // Our own ring holds records nobody has read yet: the answer may be
    // there (Engine::CheckTimers takes them, then asks again).
    *ring_look_wanted = true;
    *deadline = now + kRingLookRetryNs;
    return true;
  }
  if (!qp.peer_qp_gone && ResponderNotScheduled(engine, qp, now)) {
    // Nothing was lost: what we sent waits in its ring. Wait once more.
    qp.last_ack_ns = now;
    *deadline = now + timeout;
    return true;
  }
  // No sign of life from the responder for a whole timeout (or it said
  // that the QP is gone: retrying is pointless).
  if (qp.retries_left == 0 || qp.peer_qp_gone) {
    SOFTRDMA_LOG(kInfo, "QP %u: retry count exceeded", qp.qpx.qp_base.qp_num);
    FailSendHead(engine, qp, IBV_WC_RETRY_EXC_ERR);
    return false;
  }
  --qp.retries_left;
  // If the peer process is gone there is no point in retrying: report now.
  if (qp.peer && engine.registry().LivePid(qp.peer->ref) == 0) {
    FailSendHead(engine, qp, IBV_WC_RETRY_EXC_ERR);
    return false;
  }
  Rewind(qp);
  qp.last_ack_ns = now;
  Transmit(engine, qp);
  *deadline = now + timeout;
  return true;
}

uint64_t RnrTimerNs(uint32_t code) {
  static const uint32_t kMicros[32] = {
      655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,   320,
      480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240, 15360,
      20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};
  return uint64_t{kMicros[code & 31]} * 1000;
}

uint64_t AckTimeoutNs(uint8_t timeout) {
  if (timeout == 0) return 0;
  // 4.096 us * 2^timeout. Below ~1 ms a busy host could time out a healthy
  // peer that is merely descheduled, so shorter timeouts are rounded up.
  uint64_t ns = 4096ull << (timeout > 31 ? 31 : timeout);
  return ns < 1000000 ? 1000000 : ns;
}

}  // namespace softrdma::transport
