// RoCE requester: turns send WQEs into path-MTU packets with a PSN each
// (rc-transport.md §3), keeps at most RoceQp::window PSNs unacknowledged, and
// restarts from the oldest unacknowledged PSN (go-back-N) when the completer
// or the retransmit timer asks. The WQEs, their validation and queueing are
// the shm wire's (requester.cpp); only their transmission differs.
#include <algorithm>
#include <cinttypes>

#include <endian.h>

#include "core/limits.h"
#include "transport/engine.h"
#include "transport/iov_slice.h"
#include "transport/responder_stall.h"
#include "transport/roce/roce_batch.h"
#include "transport/roce/roce_packets.h"
#include "transport/roce/roce_requester.h"
#include "transport/sq_drain.h"
#include "transport/transport.h"
#include "util/clock.h"
#include "util/log.h"

namespace softrdma::transport::roce {

namespace {

// Unacknowledged PSNs the requester may have outstanding (rxe's 128).
// AckReq on every this many packets of a long message besides the last, so
// that the window moves before the message ends.
constexpr uint32_t kAckReqEvery = 32;
// The tail-loss probe goes this fraction of `timeout` after the last
// progress: far above a round trip (timeout 14: 8.4 ms), so that a slow
// peer seldom gets a needless probe, which costs it a duplicate to ACK.
constexpr uint64_t kProbeFraction = 8;

enum class PacketTx { kAdded, kBlocked, kFailed };

uint8_t SendFamilyOpcode(const SendWqe& w, bool first, bool last) {
  const bool write = w.opcode == IBV_WR_RDMA_WRITE || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  if (write) {
    const bool imm = w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    if (first && last) return imm ? opc::kWriteOnlyImm : opc::kWriteOnly;
    if (first) return opc::kWriteFirst;
    if (!last) return opc::kWriteMiddle;
    return imm ? opc::kWriteLastImm : opc::kWriteLast;
  }
  if (first && last) {
    if (w.opcode == IBV_WR_SEND_WITH_IMM) return opc::kSendOnlyImm;
    if (w.opcode == IBV_WR_SEND_WITH_INV) return opc::kSendOnlyInv;
    return opc::kSendOnly;
  }
  if (first) return opc::kSendFirst;
  if (!last) return opc::kSendMiddle;
  if (w.opcode == IBV_WR_SEND_WITH_IMM) return opc::kSendLastImm;
  if (w.opcode == IBV_WR_SEND_WITH_INV) return opc::kSendLastInv;
  return opc::kSendLast;
}

// Adds packet k of SQ entry `index` to `batch` (which has room).
// ack_req: set AckReq whatever the packet's place (the tail-loss probe).
PacketTx AddWqePacket(Engine& engine, Qp& qp, uint32_t index, uint32_t k, PacketBatch& batch,
                      bool ack_req = false) {
  SendWqe& w = qp.sq.at(index);
  RoceQp& rq = *qp.roce;
  TransportHeaders h{};
  h.bth.dest_qp = qp.attr.dest_qp_num;
  if (w.opcode == IBV_WR_RDMA_READ) {
    // A retry of a partly answered READ asks only for what is missing.
    const uint32_t done = w.rx_offset;
    h.bth.opcode = opc::kReadRequest;
    h.bth.psn = PsnAdd(w.psn, done / rq.mtu);
    h.bth.ack_req = true;
    h.reth = {w.remote_addr + done, w.rkey, w.total_len - done};
    return batch.Add(h, nullptr, 0, 0) ? PacketTx::kAdded : PacketTx::kBlocked;
  }
  if (IsAtomicOp(w.opcode)) {
    const bool cas = w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP;
    h.bth.opcode = cas ? opc::kCompareSwap : opc::kFetchAdd;
    h.bth.psn = w.psn;
    h.bth.ack_req = true;
    h.atomic_eth = {w.remote_addr, w.rkey, cas ? w.swap : w.compare_add, cas ? w.compare_add : 0};
    return batch.Add(h, nullptr, 0, 0) ? PacketTx::kAdded : PacketTx::kBlocked;
  }
  const bool uc = qp.type == IBV_QPT_UC;
  const uint32_t packets = PacketCount(w.total_len, rq.mtu);
  const bool first = k == 0, last = k + 1 == packets;
  const uint64_t offset = uint64_t{k} * rq.mtu;
  const uint32_t length = static_cast<uint32_t>(std::min<uint64_t>(rq.mtu, w.total_len - offset));
  h.bth.opcode = static_cast<uint8_t>(SendFamilyOpcode(w, first, last) | (uc ? opc::kUcBase : 0));
  h.bth.psn = PsnAdd(w.psn, k);
  h.bth.ack_req = !uc && (ack_req || last || k % kAckReqEvery == kAckReqEvery - 1);
  h.bth.solicited =
      last && w.solicited && (w.opcode != IBV_WR_RDMA_WRITE);  // SE: SENDs and WRITE with immediate
  const bool write = w.opcode == IBV_WR_RDMA_WRITE || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  if (write && first) h.reth = {w.remote_addr, w.rkey, w.total_len};
  if (last && (w.opcode == IBV_WR_SEND_WITH_IMM || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM))
    h.imm_data = be32toh(w.imm);
  if (last && w.opcode == IBV_WR_SEND_WITH_INV) h.invalidate_rkey = w.key;
  iovec pieces[limits::kMaxSge];
  int npieces = 0;
  if (length > 0) {
    if (w.is_inline) {
      pieces[0] = iovec{qp.inline_slot(index) + offset, length};
      npieces = 1;
    } else {
      iovec local[limits::kMaxSge];
      const int nlocal = ResolveLocal(engine, qp, index, w, local);
      if (nlocal < 0) return PacketTx::kFailed;
      npieces = SliceIovecs(local, nlocal, offset, length, pieces);
    }
  }
  return batch.Add(h, pieces, npieces, length) ? PacketTx::kAdded : PacketTx::kBlocked;
}

}  // namespace

uint32_t WqePackets(const SendWqe& w, uint32_t mtu) {
  return IsAtomicOp(w.opcode) ? 1 : PacketCount(w.total_len, mtu);
}

void Rewind(Qp& qp) {
  RoceQp& rq = *qp.roce;
  qp.sq_tx = qp.sq.tail;
  rq.rd_atomic_out = 0;
  rq.tx_packet = 0;
  rq.probes_in_pass = 0;
  if (qp.sq.tail != qp.sq.head) {
    // Packets of the oldest WQE that were acknowledged are not sent again.
    const SendWqe& w = qp.sq.at(qp.sq.tail);
    if (w.has_psn && !IsReadOrAtomic(w.opcode)) {
      const int32_t acked = PsnDiff(rq.comp_psn, w.psn);
      if (acked > 0 && static_cast<uint32_t>(acked) < WqePackets(w, rq.mtu))
        rq.tx_packet = static_cast<uint32_t>(acked);
    }
  }
  GetCounters().retransmits.fetch_add(1, std::memory_order_relaxed);
}

uint32_t AckReqPacketsSentAfter(Qp& qp, uint32_t psn) {
  const RoceQp& rq = *qp.roce;
  uint32_t count = 0;
  for (uint32_t i = qp.sq.tail; i != qp.sq.head && static_cast<int32_t>(i - qp.sq_tx) <= 0; ++i) {
    const SendWqe& w = qp.sq.at(i);
    if (!w.has_psn) break;
    if (IsReadOrAtomic(w.opcode)) {
      // One request packet, with AckReq; sent once sq_tx is past it.
      const uint32_t request_psn =
          w.opcode == IBV_WR_RDMA_READ ? PsnAdd(w.psn, w.rx_offset / rq.mtu) : w.psn;
      if (i != qp.sq_tx && PsnDiff(request_psn, psn) > 0) ++count;
      continue;
    }
    // Packets k in [first, sent) of this WQE are past `psn`; AckReq is on
    // every kAckReqEvery-th and on the last (AddWqePacket). Counted, not
    // walked: a WQE may have a million packets.
    const uint32_t packets = WqePackets(w, rq.mtu);
    const uint32_t sent = i == qp.sq_tx ? std::min(rq.tx_packet, packets) : packets;
    const int32_t behind = PsnDiff(psn, w.psn);  // packets of w at or before `psn`, less one
    const uint32_t first = behind < 0 ? 0 : static_cast<uint32_t>(behind) + 1;
    if (first >= sent) continue;
    count += sent / kAckReqEvery - first / kAckReqEvery;
    const uint32_t last = packets - 1;
    if (last >= first && last < sent && last % kAckReqEvery != kAckReqEvery - 1) ++count;
  }
  count += rq.probes_in_pass;
  return count;
}

void RestartRetransmitTimer(Engine& engine, Qp& qp) {
  qp.last_ack_ns = NowNs();
  qp.roce->probes_sent = 0;
  qp.progress_seen = false;  // the shm wire's flag; unused here
  const uint64_t timeout = AckTimeoutNs(qp.attr.timeout);
  // WQEs queued (Transmit calls this before the oldest gets its PSN); a
  // local one among them costs at most a wake-up that finds nothing due.
  if (qp.type == IBV_QPT_RC && timeout && qp.sq.tail != qp.sq.head)
    engine.TimerDueBy(qp.last_ack_ns + timeout / kProbeFraction);
}

void Transmit(Engine& engine, Qp& qp) {
  // SQD: only the drain's WQEs are sent (sq_drain.h).
  if (!MayTransmit(qp) || qp.rnr_wait_until_ns) return;
  const uint32_t end = TransmitEnd(qp);
  RoceQp& rq = *qp.roce;
  const bool uc = qp.type == IBV_QPT_UC;
  // The retransmit timer runs from the moment the oldest WQE starts out.
  if (qp.sq_tx == qp.sq.tail && qp.sq_tx != qp.sq.head && !qp.tx_blocked)
    RestartRetransmitTimer(engine, qp);
  // A WQE's packets go out together (the batch is empty between WQEs). When
  // the port takes only part of a batch, the packets it did not take are
  // sent again later from the first of them.
  PacketBatch batch(engine, rq.net, rq.to);
  auto flush = [&]() {
    const int gathered = batch.size();
    const int sent = batch.Flush();
    if (sent == gathered) return true;
    rq.tx_packet -= static_cast<uint32_t>(gathered - sent);
    qp.tx_blocked = true;
    engine.NeedService(&qp);
    return false;
  };
  while (qp.sq_tx != end) {
    SendWqe& w = qp.sq.at(qp.sq_tx);
    if (IsLocalOp(w.opcode)) {
      const OneSidedTx o = ExecuteLocalOp(engine, qp, qp.sq_tx);  // invalidate.cpp
      if (o == OneSidedTx::kRetired) continue;
      if (o == OneSidedTx::kWait) qp.tx_blocked = true;  // resumed as earlier WQEs complete
      return;
    }
    const bool read_or_atomic = IsReadOrAtomic(w.opcode);
    if (rq.tx_packet == 0) {
      if (w.fenced && rq.rd_atomic_out > 0) {
        qp.tx_blocked = true;
        return;
      }
      if (read_or_atomic && rq.rd_atomic_out >= std::max<uint32_t>(1, qp.attr.max_rd_atomic)) {
        qp.tx_blocked = true;
        return;
      }
    }
    if (!w.has_psn) {
      w.psn = qp.next_psn;
      qp.next_psn = PsnAdd(qp.next_psn, WqePackets(w, rq.mtu));
      w.has_psn = true;
      w.rx_offset = 0;
      w.resp_done = false;
      if (qp.sq_tx == qp.sq.tail) rq.comp_psn = w.psn;
    }
    const uint32_t packets = read_or_atomic ? 1 : WqePackets(w, rq.mtu);
    while (rq.tx_packet < packets) {
      const uint32_t psn =
          read_or_atomic ? PsnAdd(w.psn, w.rx_offset / rq.mtu) : PsnAdd(w.psn, rq.tx_packet);
      if (!uc && PsnDiff(psn, rq.comp_psn) >= static_cast<int32_t>(rq.window)) {
        if (!flush()) return;
        qp.tx_blocked = true;  // an ACK moves the window and transmits again
        return;
      }
      if (batch.full() && !flush()) return;
      const PacketTx r = AddWqePacket(engine, qp, qp.sq_tx, rq.tx_packet, batch);
      if (r == PacketTx::kBlocked) {
        flush();
        qp.tx_blocked = true;
        engine.NeedService(&qp);
        return;
      }
      if (r == PacketTx::kFailed) {
        if (!flush()) return;
        // A bad local SGE: the WQE fails once everything before it completed.
        if (qp.sq_tx == qp.sq.tail) {
          FailSendHead(engine, qp, IBV_WC_LOC_PROT_ERR);
        } else {
          qp.tx_blocked = true;
          engine.NeedService(&qp);
        }
        return;
      }
      ++rq.tx_packet;
    }
    if (!flush()) return;
    rq.tx_packet = 0;
    if (read_or_atomic) ++rq.rd_atomic_out;
    ++qp.sq_tx;
    if (uc) CompleteUnacknowledged(qp);  // UC: done once on the wire
  }
  qp.tx_blocked = false;
}

bool Service(Engine& engine, Qp& qp, uint64_t now, uint64_t* deadline) {
  bool did = false;
  if (qp.roce->ack_due) {
    SendOwedAck(engine, qp);
    did = true;
  }
  if (qp.rnr_wait_until_ns) {
    if (now < qp.rnr_wait_until_ns) {
      *deadline = qp.rnr_wait_until_ns;
      engine.NeedService(&qp);
      return did;
    }
    qp.rnr_wait_until_ns = 0;
    RestartRetransmitTimer(engine, qp);  // the wait was the responder's answer
  }
  if (qp.sq_tx != qp.sq.head && MayTransmit(qp)) {
    const uint32_t before = qp.sq_tx, packet_before = qp.roce->tx_packet;
    Transmit(engine, qp);
    did |= qp.sq_tx != before || qp.roce->tx_packet != packet_before;
  }
  return did;
}

namespace {

// Sends the last packet sent again, with AckReq (a READ or atomic: its
// request). Whatever was lost at the tail, the answer shows it: an ACK (the
// packet was lost, or only its ACK), or a sequence NAK for an earlier gap
// whose NAKs were all lost. Nothing is rewound and the timer keeps running.
void SendTailProbe(Engine& engine, Qp& qp) {
  RoceQp& rq = *qp.roce;
  ++rq.probes_sent;
  uint32_t index = qp.sq_tx, k = rq.tx_packet;
  if (k == 0) {
    if (qp.sq_tx == qp.sq.tail) return;  // nothing of this pass sent yet
    index = qp.sq_tx - 1;
    const SendWqe& w = qp.sq.at(index);
    if (!w.has_psn || IsLocalOp(w.opcode)) return;
    k = IsReadOrAtomic(w.opcode) ? 1 : WqePackets(w, rq.mtu);
  }
  --k;
  PacketBatch batch(engine, rq.net, rq.to);
  if (AddWqePacket(engine, qp, index, k, batch, /*ack_req=*/true) != PacketTx::kAdded) return;
  if (batch.Flush() != 1) return;
  ++rq.probes_in_pass;
  GetCounters().tail_probes.fetch_add(1, std::memory_order_relaxed);
}

// The shm wire's rule (completer.cpp), for a peer on the RoCE wire that is a
// process of this host (SOFTRDMA_WIRE=roce, or another user's process: not
// seen, its registry is not ours): whether its silence over the last timeout
// is its CPU's. It is when the process is alive and has not looked at its
// port once since the previous expiry: whatever we sent waits in its socket
// (a NIC would have answered, whatever its host's CPU does). Busy-polled
// ibv_rc_pingpong pairs on a loaded host failed with RETRY_EXC_ERR from
// starvation alone. A peer that runs and drops what it reads (its QP gone
// or in ERR) moves its count and still uses up the retries, and one that
// has not looked for kMaxResponderStallNs (a stopped process) counts as
// unresponsive. Never for a peer on another host: its CPU is not ours to
// see, and its retries count as on a NIC. The first expiry always counts
// (nothing to compare with yet).
bool ResponderNotScheduled(Engine& engine, Qp& qp, uint64_t now) {
  RoceQp& rq = *qp.roce;
  if (!rq.local_peer) {
    if (!PeerSharesOurRegistry(engine, qp)) return false;
    rq.local_peer = engine.ResolveQpn(qp.attr.dest_qp_num);
    if (!rq.local_peer) return false;
  }
  const uint64_t* word = rq.local_peer->roce_polls;
  const uint64_t polls = word ? __atomic_load_n(word, __ATOMIC_RELAXED) : 0;
  // Progress: a look at its port since the previous expiry (0: not counted).
  const bool progress = polls == 0 || polls != rq.peer_stall.mark;
  rq.peer_stall.mark = polls;
  return StalledButAlive(engine, rq.peer_stall, rq.local_peer->ref, progress, now);
}

}  // namespace

void SendTailProbeNow(Engine& engine, Qp& qp) {
  if (qp.roce->probes_sent >= RoceQp::kMaxProbes ||
      (qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_SQD))
    return;
  SendTailProbe(engine, qp);
}

bool CheckTimers(Engine& engine, Qp& qp, uint64_t now, uint64_t* deadline) {
  if (qp.state == IBV_QPS_ERR || qp.state == IBV_QPS_RESET || qp.type != IBV_QPT_RC) return false;
  const bool outstanding = qp.sq.tail != qp.sq.head && qp.sq.at(qp.sq.tail).has_psn;
  if (!outstanding) return qp.rnr_wait_until_ns != 0;
  if (qp.rnr_wait_until_ns) return true;  // the RNR wait is the responder's answer
  const uint64_t timeout = AckTimeoutNs(qp.attr.timeout);
  if (timeout == 0) return true;  // wait forever
  // last_ack_ns: the last progress, the oldest WQE's first transmission, or
  // the time the previous try was due (RestartRetransmitTimer, below).
  const uint64_t due = qp.last_ack_ns + timeout;
  if (now < due) {
    // Tail-loss probes: a lost last packet, or lost ACKs/NAKs, cost an
    // eighth of the timeout instead of all of it (docs/design.md); the
    // second, a quarter, covers a lost first one or its lost answer.
    const uint64_t probe_due =
        qp.last_ack_ns + (qp.roce->probes_sent + 1) * (timeout / kProbeFraction);
    if (qp.roce->probes_sent < RoceQp::kMaxProbes &&
        (qp.state == IBV_QPS_RTS || qp.state == IBV_QPS_SQD)) {
      if (now < probe_due) {
        *deadline = probe_due;
        return true;
      }
      SendTailProbe(engine, qp);
      // The next probe's due time, not the timer's: a caller that sleeps
      // to the deadline would send it late or never.
      if (qp.roce->probes_sent < RoceQp::kMaxProbes) {
        *deadline = qp.last_ack_ns + (qp.roce->probes_sent + 1) * (timeout / kProbeFraction);
        return true;
      }
    }
    *deadline = due;
    return true;
  }
  // A try the responder's process had no CPU for does not count; it is
  // still retransmitted (it may have been lost as well).
  const bool starved = ResponderNotScheduled(engine, qp, now);
  if (qp.retries_left == 0 && !starved) {
    SOFTRDMA_LOG(kInfo, "QP %u: retry count exceeded (RoCE, timer %" PRIu64 " us late)",
                 qp.qpx.qp_base.qp_num, (now - due) / 1000);
    FailSendHead(engine, qp, IBV_WC_RETRY_EXC_ERR);
    return false;
  }
  if (starved)
    GetCounters().timeouts_not_counted.fetch_add(1, std::memory_order_relaxed);
  else
    --qp.retries_left;
  GetCounters().timeouts.fetch_add(1, std::memory_order_relaxed);
  SOFTRDMA_LOG(kDebug,
               "QP %u: retransmit timer expired (%" PRIu64
               " us late), go back to PSN %u (%d retries left)",
               qp.qpx.qp_base.qp_num, (now - due) / 1000, qp.roce->comp_psn, qp.retries_left);
  qp.roce->ShrinkWindow();
  Rewind(qp);
  qp.roce->probes_sent = 0;
  // NAKs still in flight after a whole timeout are lost: none is counted
  // as owed, and the responder may NAK the gap's first packet anew.
  qp.roce->stale_naks_left = 0;
  qp.roce->last_nak_valid = false;
  Transmit(engine, qp);
  // The next try is due one timeout after this one was due, not after this
  // check ran: a NIC's timer is not late, and lateness added up over
  // retry_cnt + 1 tries took a silent peer's RETRY_EXC_ERR ~10% past
  // timeout x (retry_cnt + 1). A check later than an eighth of a timeout
  // (this process did not run: the peer, niced or starved alike, may not
  // have either) gives the retransmission a whole timeout from now, as
  // before: a requester that was not scheduled must not fail a healthy
  // peer sooner than it used to.
  qp.last_ack_ns = now - due <= timeout / 8 ? due : now;
  *deadline = qp.last_ack_ns + timeout;
  return true;
}

}  // namespace softrdma::transport::roce
