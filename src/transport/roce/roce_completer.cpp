// RoCE completer: ACKs, NAKs, READ responses and ATOMIC ACKs retire send
// WQEs in order (rc-transport.md §6). A response for a later PSN implicitly
// acknowledges the SEND/WRITE WQEs before it; a READ/atomic it passes over
// lost its response (implied NAK) and is retried. Completions and the NAK ->
// status mapping are the shm wire's (completer.cpp).
#include <algorithm>
#include <cstring>

#include "core/limits.h"
#include "transport/engine.h"
#include "transport/iov_slice.h"
#include "transport/roce/roce_packets.h"
#include "transport/roce/roce_requester.h"
#include "transport/sq_drain.h"
#include "transport/transport.h"
#include "util/clock.h"
#include "util/log.h"

namespace softrdma::transport::roce {

namespace sr = softrdma::roce;

namespace {

uint32_t LastPsn(const SendWqe& w, uint32_t mtu) {
  return PsnAdd(w.psn, WqePackets(w, mtu) - 1);
}

// A response made progress: the retransmit timer and retry budget start over.
void Progress(Engine& engine, Qp& qp) {
  RestartRetransmitTimer(engine, qp);
  qp.retries_left = qp.attr.retry_cnt;
}

void AdvanceComp(RoceQp& rq, uint32_t psn_after) {
  const int32_t acknowledged = PsnDiff(psn_after, rq.comp_psn);
  if (acknowledged <= 0) return;
  rq.GrowWindow(static_cast<uint32_t>(acknowledged));
  rq.comp_psn = psn_after;
  rq.nak_gap_open = false;  // what the last sequence NAK named is acknowledged
}

enum class Retire { kDone, kImpliedNak };

// Retires the head WQEs all of whose PSNs are up to `psn` (inclusive) or
// before it. A READ/atomic without its response stops the walk: its
// response was lost (an implied NAK) when `psn` passed it.
Retire RetireThrough(Qp& qp, uint32_t psn, bool inclusive) {
  RoceQp& rq = *qp.roce;
  while (qp.sq.tail != qp.sq.head) {
    SendWqe& w = qp.sq.at(qp.sq.tail);
    if (!w.has_psn || IsLocalOp(w.opcode)) break;
    const int32_t d = PsnDiff(LastPsn(w, rq.mtu), psn);
    if (inclusive ? d > 0 : d >= 0) break;
    if (IsReadOrAtomic(w.opcode) && !w.resp_done) return Retire::kImpliedNak;
    if (w.signaled) CompleteSend(qp, w, IBV_WC_SUCCESS);
    AdvanceComp(rq, PsnAdd(LastPsn(w, rq.mtu), 1));
    ++qp.sq.tail;
    if (static_cast<int32_t>(qp.sq_tx - qp.sq.tail) < 0) {
      qp.sq_tx = qp.sq.tail;
      rq.tx_packet = 0;
    }
  }
  NoteSendsRetired(qp);
  return Retire::kDone;
}

// Go-back-N from the oldest unacknowledged PSN, counted against retry_cnt.
void Retry(Engine& engine, Qp& qp) {
  if (qp.retries_left == 0) {
    FailSendHead(engine, qp, IBV_WC_RETRY_EXC_ERR);
    return;
  }
  --qp.retries_left;
  Rewind(qp);
  Transmit(engine, qp);
}

ibv_wc_status NakStatus(uint8_t syndrome) {
  switch (syndrome) {
    case sr::kNakInvalidRequest:
      return IBV_WC_REM_INV_REQ_ERR;
    case sr::kNakRemoteAccessError:
      return IBV_WC_REM_ACCESS_ERR;
    default:
      return IBV_WC_REM_OP_ERR;
  }
}

// The head WQE, if it holds PSN `psn` and was sent.
SendWqe* HeadHolding(Qp& qp, uint32_t psn) {
  if (qp.sq.tail == qp.sq.head) return nullptr;
  SendWqe& w = qp.sq.at(qp.sq.tail);
  if (!w.has_psn || PsnDiff(psn, w.psn) < 0 || PsnDiff(psn, LastPsn(w, qp.roce->mtu)) > 0)
    return nullptr;
  return &w;
}

// Completes the head READ/atomic whose response is complete.
void FinishHead(Qp& qp, SendWqe& w) {
  RoceQp& rq = *qp.roce;
  w.resp_done = true;
  if (rq.rd_atomic_out > 0) --rq.rd_atomic_out;
  if (w.signaled) CompleteSend(qp, w, IBV_WC_SUCCESS);
  AdvanceComp(rq, PsnAdd(LastPsn(w, rq.mtu), 1));
  ++qp.sq.tail;
  if (static_cast<int32_t>(qp.sq_tx - qp.sq.tail) < 0) {
    qp.sq_tx = qp.sq.tail;
    rq.tx_packet = 0;
  }
  NoteSendsRetired(qp);
}

// Writes response bytes at `offset` of the head WQE's local buffers.
bool PlaceResponse(Engine& engine, Qp& qp, const SendWqe& w, uint64_t offset,
                   std::span<const uint8_t> data) {
  iovec local[limits::kMaxSge];
  const int n = engine.mr_table().ResolveSges(qp.sq.sge_of(qp.sq.tail), w.num_sge, qp.pd->id,
                                              IBV_ACCESS_LOCAL_WRITE, local, UINT64_MAX, nullptr);
  if (n < 0) return false;
  iovec pieces[limits::kMaxSge];
  const int np = SliceIovecs(local, n, offset, data.size(), pieces);
  const uint8_t* from = data.data();
  for (int i = 0; i < np; ++i) {
    memcpy(pieces[i].iov_base, from, pieces[i].iov_len);
    from += pieces[i].iov_len;
  }
  return true;
}

// A sequence NAK: go back to `psn`, once per pass. The responder NAKs a gap
// at the first packet past it and again at each AckReq packet past it
// (roce_responder.cpp), so the packets of one pass may bring several NAKs
// for the same PSN, all sent before that pass's go-back could reach the
// responder. Acting on each spent a retry per NAK: 8 NAKs in one receive
// batch ended a healthy QP in RETRY_EXC_ERR within 0.3 ms (docs/design.md
// "Repeated sequence NAKs"). So after going back, as many NAKs for that PSN
// as the pass can still bring are ignored: one for each of its AckReq
// packets past the PSN, less the one acted on unless it may have been the
// gap's first NAK (sent at any packet). A lost NAK leaves the count high: a
// later pass's NAK is then ignored, and the next one (or the timer) acts.
void OnSequenceNak(Engine& engine, Qp& qp, uint32_t psn) {
  RoceQp& rq = *qp.roce;
  Counters& c = GetCounters();
  c.seq_naks_received.fetch_add(1, std::memory_order_relaxed);
  SOFTRDMA_LOG(kDebug, "QP %u: sequence NAK for PSN %u (oldest unacknowledged %u, next %u)",
               qp.qpx.qp_base.qp_num, psn, rq.comp_psn, qp.next_psn);
  const int32_t ahead = PsnDiff(psn, rq.comp_psn);
  const bool repeat = ahead == 0 && rq.stale_naks_left > 0 && psn == rq.stale_nak_psn;
  // Behind what is acknowledged: a NAK the network delayed past a later answer.
  if (ahead < 0 || repeat) {
    if (repeat) --rq.stale_naks_left;
    c.seq_naks_stale.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // Counted before anything is retired or rewound: the pass being cut short.
  const bool acted_on_before = rq.last_nak_valid && rq.last_nak_psn == psn;
  uint32_t owed = AckReqPacketsSentAfter(qp, psn);
  if (acted_on_before && owed > 0) --owed;
  auto go_back = [&]() {
    rq.stale_nak_psn = psn;
    rq.stale_naks_left = owed;
    rq.last_nak_psn = psn;
    rq.last_nak_valid = true;
    rq.ShrinkWindow();
    Retry(engine, qp);
  };
  if (RetireThrough(qp, psn, /*inclusive=*/false) == Retire::kImpliedNak) return go_back();
  // The rest of a burst whose head got an RNR NAK: rewound already.
  if (qp.rnr_wait_until_ns && psn == rq.comp_psn) return;
  AdvanceComp(rq, psn);
  // A NAK beyond the oldest unacknowledged PSN acknowledges what came
  // before it: progress, so the retry budget starts over and counts only
  // the tries at the same PSN (a long transfer at 10% loss meets more NAKs
  // between two ACKs than retry_cnt).
  if (ahead > 0) Progress(engine, qp);
  RestartRetransmitTimer(engine, qp);
  go_back();
}

// Whether an ACK of `psn` with credit code 30 is our responder's repeat of
// a sequence NAK for psn + 1 (kNakRepeatSyndrome). A foreign responder may
// send code 30 on any ordinary ACK (32768 credits); read as a repeat, each
// such ACK of new PSNs made us go back and send everything after it again.
// Ours sends it only for a gap it has NAKed, as an ACK of the PSN before it:
// so it must make no progress (psn + 1 is our oldest unacknowledged PSN),
// and one of: we received that gap's NAK; the peer's other ACKs say it does
// not advertise credits (code 31 and never a count: an SRQ responder, or
// ours), so its code 30 is no credit count (the gap's NAK may have been
// lost: a pass later, or a probe, would cost a whole transfer's speed at
// 5% loss); or, the NAK lost and the peer not known, a tail probe went
// since the last progress (a foreign responder's duplicate ACK then costs
// one go-back per probe, at most two per timeout, as the timer would).
bool IsNakRepeat(const Qp& qp, uint32_t psn) {
  const RoceQp& rq = *qp.roce;
  const uint32_t gap = PsnAdd(psn, 1);
  if (gap != rq.comp_psn) return false;
  if (rq.nak_gap_open && rq.nak_gap_psn == gap) return true;
  if (rq.peer_credits_invalid_seen && !rq.peer_credit_count_seen) return true;
  return rq.probes_sent > 0;
}

// What an ACK's credit code tells of the peer (IsNakRepeat).
void NoteCreditCode(RoceQp& rq, uint8_t syndrome) {
  const uint8_t code = sr::AethValueOf(syndrome);
  if (code == 31)
    rq.peer_credits_invalid_seen = true;
  else if (code < 30)
    rq.peer_credit_count_seen = true;
}

// A sequence NAK for `psn` came: while nothing acknowledges past it, credit
// code 30 ACKs of psn - 1 are its repeats.
void NoteNakedGap(RoceQp& rq, uint32_t psn) {
  if (rq.comp_psn != psn) return;
  rq.nak_gap_psn = psn;
  rq.nak_gap_open = true;
}

void OnAckPacket(Engine& engine, Qp& qp, const PacketIn& in) {
  RoceQp& rq = *qp.roce;
  const uint32_t psn = in.h.bth.psn;
  const uint8_t syndrome = in.h.aeth.syndrome;
  switch (sr::AethTypeOf(syndrome)) {
    case sr::AethType::kAck:
      // Our responder's repeat of a sequence NAK for epsn (psn + 1); credit
      // code 30 on any other ACK is a foreign responder's credit count.
      NoteCreditCode(rq, syndrome);
      if (syndrome == kNakRepeatSyndrome && PsnAdd(psn, 1) == rq.comp_psn) {
        if (IsNakRepeat(qp, psn)) return OnSequenceNak(engine, qp, PsnAdd(psn, 1));
        // Not known to be a repeat (a new QP's first burst, its gap's NAK
        // lost): a tail-loss probe now asks. Our responder answers it with
        // the repeat again, which the probe makes trusted (IsNakRepeat); a
        // foreign one with an ACK of what it has (no gap) or nothing (its
        // one NAK was lost: the timer). Before, this ACK restarted the timer
        // and the gap waited an eighth of `timeout` for the probe.
        return SendTailProbeNow(engine, qp);
      }
      if (RetireThrough(qp, psn, /*inclusive=*/true) == Retire::kImpliedNak) {
        Progress(engine, qp);
        return Retry(engine, qp);
      }
      AdvanceComp(rq, PsnAdd(psn, 1));
      Progress(engine, qp);
      qp.rnr_retries_left = qp.attr.rnr_retry;
      break;
    case sr::AethType::kRnrNak: {
      // Every NAK acknowledges what came before it.
      if (RetireThrough(qp, psn, /*inclusive=*/false) == Retire::kImpliedNak)
        return Retry(engine, qp);
      if (!HeadHolding(qp, psn)) return;  // stale
      Progress(engine, qp);
      if (qp.attr.rnr_retry != 7) {
        if (qp.rnr_retries_left == 0) return FailSendHead(engine, qp, IBV_WC_RNR_RETRY_EXC_ERR);
        --qp.rnr_retries_left;
      }
      AdvanceComp(rq, psn);
      Rewind(qp);
      // After the wait the responder may NAK the gap's first packet anew.
      rq.stale_naks_left = 0;
      rq.last_nak_valid = false;
      qp.rnr_wait_until_ns = NowNs() + RnrTimerNs(sr::AethValueOf(syndrome));
      engine.NeedService(&qp);
      return;
    }
    case sr::AethType::kNak:
      if (syndrome == sr::kNakPsnSequenceError) {
        OnSequenceNak(engine, qp, psn);
        return NoteNakedGap(rq, psn);
      }
      if (RetireThrough(qp, psn, /*inclusive=*/false) == Retire::kImpliedNak)
        return Retry(engine, qp);
      if (!HeadHolding(qp, psn)) return;  // stale
      return FailSendHead(engine, qp, NakStatus(syndrome));
    case sr::AethType::kReserved:
      return;  // ignored (hfi1)
  }
  if (qp.tx_blocked || qp.sq_tx != qp.sq.head) Transmit(engine, qp);
}

void OnReadResponse(Engine& engine, Qp& qp, const PacketIn& in) {
  RoceQp& rq = *qp.roce;
  const uint32_t psn = in.h.bth.psn;
  // A READ response acknowledges every request before it.
  if (RetireThrough(qp, PsnAdd(psn, 0xFFFFFF), /*inclusive=*/true) == Retire::kImpliedNak) {
    if (!HeadHolding(qp, psn)) return Retry(engine, qp);
  }
  SendWqe* w = HeadHolding(qp, psn);
  if (!w || w->opcode != IBV_WR_RDMA_READ || w->resp_done) {
    GetCounters().drop_unsolicited_response.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const uint32_t expected = PsnAdd(w->psn, w->rx_offset / rq.mtu);
  if (psn != expected) {
    // Behind: a duplicate. Ahead: responses were lost; ask again from the
    // first missing one, once per gap (the timer covers a lost retry).
    if (PsnDiff(psn, expected) > 0 && !rq.read_gap_retried) {
      rq.read_gap_retried = true;
      Retry(engine, qp);
    } else {
      GetCounters().drop_psn_window.fetch_add(1, std::memory_order_relaxed);
    }
    return;
  }
  rq.read_gap_retried = false;
  const sr::Position pos = in.info->position;
  const bool first = pos == sr::Position::kFirst || pos == sr::Position::kOnly;
  // A replay from a mid-message PSN may start with FIRST (hfi1) or MIDDLE
  // (rxe): both are taken; only the byte count decides the end.
  (void)first;
  if (w->rx_offset + in.payload.size() > w->total_len) {
    GetCounters().drop_bad_header.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (!in.payload.empty() && !PlaceResponse(engine, qp, *w, w->rx_offset, in.payload))
    return FailSendHead(engine, qp, IBV_WC_LOC_PROT_ERR);
  w->rx_offset += static_cast<uint32_t>(in.payload.size());
  Progress(engine, qp);
  AdvanceComp(rq, PsnAdd(psn, 1));
  if (in.info->IsLastOfMessage()) {
    if (w->rx_offset != w->total_len) return Retry(engine, qp);  // short: ask again
    FinishHead(qp, *w);
  }
  if (qp.tx_blocked || qp.sq_tx != qp.sq.head) Transmit(engine, qp);
}

void OnAtomicAck(Engine& engine, Qp& qp, const PacketIn& in) {
  const uint32_t psn = in.h.bth.psn;
  if (RetireThrough(qp, PsnAdd(psn, 0xFFFFFF), /*inclusive=*/true) == Retire::kImpliedNak) {
    if (!HeadHolding(qp, psn)) return Retry(engine, qp);
  }
  SendWqe* w = HeadHolding(qp, psn);
  if (!w || !IsAtomicOp(w->opcode) || w->resp_done) {
    GetCounters().drop_unsolicited_response.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const uint64_t original = in.h.atomic_ack.original;
  uint8_t bytes[8];
  memcpy(bytes, &original, 8);  // host order, as the shm wire places it
  if (w->num_sge > 0 && !PlaceResponse(engine, qp, *w, 0, bytes))
    return FailSendHead(engine, qp, IBV_WC_LOC_PROT_ERR);
  Progress(engine, qp);
  FinishHead(qp, *w);
  if (qp.tx_blocked || qp.sq_tx != qp.sq.head) Transmit(engine, qp);
}

}  // namespace

void OnResponsePacket(Engine& engine, Qp& qp, const PacketIn& in) {
  if ((qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_SQD && qp.state != IBV_QPS_SQE) ||
      qp.type != IBV_QPT_RC) {
    GetCounters().drop_wrong_qp.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // Only PSNs we have sent can be answered.
  const uint32_t psn = in.h.bth.psn;
  if (qp.sq.tail == qp.sq.head || PsnDiff(psn, qp.next_psn) >= 0 ||
      PsnDiff(psn, qp.roce->comp_psn) < -kMaxStalePsns) {
    GetCounters().drop_psn_window.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  switch (in.info->operation) {
    case sr::Operation::kAcknowledge:
      return OnAckPacket(engine, qp, in);
    case sr::Operation::kRdmaReadResponse:
      return OnReadResponse(engine, qp, in);
    case sr::Operation::kAtomicAcknowledge:
      return OnAtomicAck(engine, qp, in);
    default:
      GetCounters().drop_unsolicited_response.fetch_add(1, std::memory_order_relaxed);
      return;
  }
}

}  // namespace softrdma::transport::roce
