// RoCE responder (rc-transport.md §4): executes request packets in PSN
// order against receive WQEs (recv_source.h) and registered memory
// (MrTable), answers duplicates without executing them twice (a READ is read
// again from the MR, an atomic's saved result is sent again), NAKs a PSN gap
// at the first packet past it and repeats it (as an ACK a requester of the
// standard ignores) at each AckReq packet past it until it is filled, and
// leaves one coalesced ACK per burst to the receive loop. UC: no
// answers; a gap drops the rest of that message.
#include <algorithm>
#include <cstring>

#include <endian.h>

#include "core/limits.h"
#include "core/objects.h"
#include "transport/atomics.h"
#include "transport/engine.h"
#include "transport/iov_slice.h"
#include "transport/recv_source.h"
#include "transport/roce/roce_batch.h"
#include "transport/roce/roce_packets.h"
#include "transport/transport.h"
#include "util/log.h"
#include "util/process.h"

namespace softrdma::transport::roce {

namespace sr = softrdma::roce;

namespace {

void SendAckPacket(Engine& engine, Qp& qp, uint8_t opcode, uint32_t psn, uint8_t syndrome,
                   uint64_t original = 0) {
  TransportHeaders h{};
  h.bth.opcode = opcode;
  h.bth.dest_qp = qp.attr.dest_qp_num;
  h.bth.psn = psn;
  h.aeth = {syndrome, qp.roce->msn};
  h.atomic_ack.original = original;
  SendPacket(engine, *qp.roce, h, nullptr, 0, 0);
}

void Nak(Engine& engine, Qp& qp, uint32_t psn, uint8_t syndrome) {
  if (qp.type == IBV_QPT_UC) return;  // UC is never answered
  SendAckPacket(engine, qp, opc::kAck, psn, syndrome);
}

void CompleteRecv(Qp& qp, const RecvWqe& w, ibv_wc_status status, ibv_wc_opcode opcode,
                  uint32_t byte_len, const TransportHeaders& h, const OpcodeInfo& info) {
  const uint64_t wr_id = w.wr_id;
  const uint32_t qp_num = qp.qpx.qp_base.qp_num;
  const uint32_t src_qp = qp.attr.dest_qp_num;
  const bool imm = info.Has(sr::kImmDtBit), inv = info.Has(sr::kIethBit);
  qp.recv_cq->Emplace(h.bth.solicited, [&](ibv_wc& wc) {
    wc = ibv_wc{};
    wc.wr_id = wr_id;
    wc.status = status;
    wc.opcode = opcode;
    wc.byte_len = byte_len;
    wc.qp_num = qp_num;
    wc.src_qp = src_qp;
    if (imm) {
      wc.wc_flags |= IBV_WC_WITH_IMM;
      wc.imm_data = htobe32(h.imm_data);
    }
    if (inv) {
      wc.wc_flags |= IBV_WC_WITH_INV;
      wc.invalidated_rkey = h.invalidate_rkey;
    }
  });
}

// No receive WQE: the requester waits the QP's min_rnr_timer and resends
// from `psn`; the rest of its burst is dropped without a sequence NAK.
void RnrNak(Engine& engine, Qp& qp, uint32_t psn) {
  Nak(engine, qp, psn, sr::RnrNakSyndrome(static_cast<uint8_t>(qp.attr.min_rnr_timer)));
  qp.roce->nak_sent = true;
  // The burst's packets after it are dropped quietly: the requester goes
  // back to `psn` after its RNR wait.
  qp.roce->rnr_quiet = true;
  qp.roce->nak_last_psn = psn;
  GetCounters().rnr_naks_sent.fetch_add(1, std::memory_order_relaxed);
}

// A request the responder cannot execute: RC NAKs it and the QP goes to ERR
// (rc-transport.md §4.6); UC drops the message.
void Fatal(Engine& engine, Qp& qp, uint32_t psn, uint8_t syndrome) {
  SOFTRDMA_LOG(kInfo, "QP %u: request PSN %u refused (NAK 0x%02x)", qp.qpx.qp_base.qp_num, psn,
               syndrome);
  qp.roce->in_message = InMessage::kNone;
  if (qp.type == IBV_QPT_UC) return;
  Nak(engine, qp, psn, syndrome);
  EnterError(engine, qp);
}

bool Allowed(const Qp& qp, unsigned access) {
  return (qp.attr.qp_access_flags & access) != 0;
}

// Host address of [va, va + len) under rkey for `access`, or 0.
uint64_t RemoteHost(Engine& engine, Qp& qp, uint32_t rkey, uint64_t va, uint64_t len,
                    unsigned access) {
  uint64_t host = 0;
  if (engine.mr_table().Lookup(KeyKind::kRemote, rkey, va, len, qp.pd->id, access, &host,
                               qp.qpx.qp_base.qp_num) != 0)
    return 0;
  return host;
}

// READ response packets for [va, va + len) from PSN `psn` on, read from the
// MR now (a replay reads again: the data may have changed).
void SendReadResponses(Engine& engine, Qp& qp, uint32_t rkey, uint64_t va, uint32_t len,
                       uint32_t psn) {
  RoceQp& rq = *qp.roce;
  const uint32_t packets = PacketCount(len, rq.mtu);
  PacketBatch batch(engine, rq.net, rq.to);  // one Send per kMaxPackets responses
  for (uint32_t i = 0; i < packets; ++i) {
    if (batch.full() && batch.Flush() < PacketBatch::kMaxPackets) return;  // lost: it asks again
    const uint64_t offset = uint64_t{i} * rq.mtu;
    const uint32_t length = static_cast<uint32_t>(std::min<uint64_t>(rq.mtu, len - offset));
    TransportHeaders h{};
    h.bth.opcode = packets == 1       ? opc::kReadResponseOnly
                   : i == 0           ? opc::kReadResponseFirst
                   : i + 1 == packets ? opc::kReadResponseLast
                                      : opc::kReadResponseMiddle;
    h.bth.dest_qp = qp.attr.dest_qp_num;
    h.bth.psn = PsnAdd(psn, i);
    h.aeth = {kAckSyndrome, rq.msn};
    iovec piece{};
    int npieces = 0;
    if (length > 0) {
      const uint64_t host =
          RemoteHost(engine, qp, rkey, va + offset, length, IBV_ACCESS_REMOTE_READ);
      if (host == 0) break;  // deregistered meanwhile: the requester times out
      piece = iovec{reinterpret_cast<void*>(host), length};
      npieces = 1;
    }
    if (!batch.Add(h, &piece, npieces, length)) break;
  }
  batch.Flush();
}

void OnDuplicate(Engine& engine, Qp& qp, const PacketIn& in) {
  RoceQp& rq = *qp.roce;
  const uint32_t psn = in.h.bth.psn;
  GetCounters().duplicates.fetch_add(1, std::memory_order_relaxed);
  switch (in.info->operation) {
    case sr::Operation::kRdmaReadRequest: {
      // The shared rule (transport/responder_resources.h): a part of a
      // remembered READ is read again from the MR, anything else dropped.
      const sr::Reth& reth = in.h.reth;
      if (qp.rd_resources.ReadToReplay(psn, reth.rkey, reth.va, reth.dma_length))
        SendReadResponses(engine, qp, reth.rkey, reth.va, reth.dma_length, psn);
      return;
    }
    case sr::Operation::kCompareSwap:
    case sr::Operation::kFetchAdd:
      if (const ExecutedRequest* r = qp.rd_resources.AtomicToReplay(psn))
        SendAckPacket(engine, qp, opc::kAtomicAck, psn, kAckSyndrome, r->original);
      return;
    default:
      // SEND/WRITE already executed: tell the requester again how far we are.
      rq.ack_due = true;
      return;
  }
}

void OnSendPacket(Engine& engine, Qp& qp, const PacketIn& in) {
  RoceQp& rq = *qp.roce;
  const bool uc = qp.type == IBV_QPT_UC;
  const uint32_t psn = in.h.bth.psn;
  RecvSlot slot;
  if (!AcquireRecv(qp, &slot)) {
    // Only a FIRST/ONLY can find no WQE: a message in progress holds one.
    if (!uc) RnrNak(engine, qp, psn);
    return;
  }
  if (in.info->IsFirstOfMessage()) {
    rq.in_message = InMessage::kSend;
    rq.in_offset = 0;
  }
  const uint64_t capacity = RecvCapacity(slot);
  const size_t length = in.payload.size();
  if (rq.in_offset + length > capacity) {
    // Longer than the receive buffer: the receive completes with a length
    // error and the requester is told "invalid request" (UC: dropped; an
    // SRQ's WQE, taken already, completes in error).
    rq.in_message = InMessage::kNone;
    if (uc && !qp.srq) return;
    CompleteRecv(qp, *slot.wqe, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, in.h, *in.info);
    ConsumeRecv(qp);
    return Fatal(engine, qp, psn, sr::kNakInvalidRequest);
  }
  if (length > 0) {
    iovec local[limits::kMaxSge];
    const int n = ResolveRecv(engine, slot, capacity, local);
    if (n < 0) {
      CompleteRecv(qp, *slot.wqe, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, in.h, *in.info);
      ConsumeRecv(qp);
      return Fatal(engine, qp, psn, sr::kNakRemoteOperationalError);
    }
    iovec pieces[limits::kMaxSge];
    const int np = SliceIovecs(local, n, rq.in_offset, length, pieces);
    const uint8_t* from = in.payload.data();
    for (int i = 0; i < np; ++i) {
      memcpy(pieces[i].iov_base, from, pieces[i].iov_len);
      from += pieces[i].iov_len;
    }
  }
  rq.in_offset += length;
  qp.epsn = PsnAdd(qp.epsn, 1);
  if (in.info->IsLastOfMessage()) {
    rq.in_message = InMessage::kNone;
    rq.msn = PsnAdd(rq.msn, 1);
    // SEND with Invalidate: the key dies before the receive completes; if it
    // cannot, the receive fails and the QP goes to ERR (no NAK, as rxe).
    const bool invalidated =
        !in.info->Has(sr::kIethBit) || InvalidateForSend(engine, qp, in.h.invalidate_rkey);
    CompleteRecv(qp, *slot.wqe, invalidated ? IBV_WC_SUCCESS : IBV_WC_REM_INV_REQ_ERR, IBV_WC_RECV,
                 static_cast<uint32_t>(rq.in_offset), in.h, *in.info);
    ConsumeRecv(qp);
    if (!invalidated) return EnterError(engine, qp);
  }
  if (!uc && in.h.bth.ack_req) rq.ack_due = true;
}

void OnWritePacket(Engine& engine, Qp& qp, const PacketIn& in) {
  RoceQp& rq = *qp.roce;
  const bool uc = qp.type == IBV_QPT_UC;
  const uint32_t psn = in.h.bth.psn;
  const bool first = in.info->IsFirstOfMessage();
  if (first) {
    if (!Allowed(qp, IBV_ACCESS_REMOTE_WRITE))
      return Fatal(engine, qp, psn, sr::kNakInvalidRequest);
    const sr::Reth& reth = in.h.reth;
    if (reth.dma_length > 0 &&
        !RemoteHost(engine, qp, reth.rkey, reth.va, reth.dma_length, IBV_ACCESS_REMOTE_WRITE))
      return Fatal(engine, qp, psn, sr::kNakRemoteAccessError);
  }
  const uint64_t start = first ? 0 : rq.in_offset;
  const uint32_t total = first ? in.h.reth.dma_length : rq.write_length;
  const size_t length = in.payload.size();
  if (start + length > total) return Fatal(engine, qp, psn, sr::kNakInvalidRequest);
  // WRITE with immediate consumes a receive WQE: none means RNR before any
  // byte of this packet is placed (the retry resends this packet).
  RecvSlot slot;
  const bool imm = in.info->Has(sr::kImmDtBit);
  if (imm && !AcquireRecv(qp, &slot)) {
    if (!uc) RnrNak(engine, qp, psn);
    return;
  }
  if (first) {
    rq.in_message = InMessage::kWrite;
    rq.write_va = in.h.reth.va;
    rq.write_rkey = in.h.reth.rkey;
    rq.write_length = in.h.reth.dma_length;
  }
  if (length > 0) {
    const uint64_t host =
        RemoteHost(engine, qp, rq.write_rkey, rq.write_va + start, length, IBV_ACCESS_REMOTE_WRITE);
    if (host == 0) return Fatal(engine, qp, psn, sr::kNakRemoteAccessError);
    memcpy(reinterpret_cast<void*>(host), in.payload.data(), length);
  }
  rq.in_offset = start + length;
  qp.epsn = PsnAdd(qp.epsn, 1);
  if (in.info->IsLastOfMessage()) {
    rq.in_message = InMessage::kNone;
    rq.msn = PsnAdd(rq.msn, 1);
    if (imm) {
      CompleteRecv(qp, *slot.wqe, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, rq.write_length, in.h,
                   *in.info);
      ConsumeRecv(qp);
    }
  }
  if (!uc && in.h.bth.ack_req) rq.ack_due = true;
}

void OnReadRequest(Engine& engine, Qp& qp, const PacketIn& in) {
  RoceQp& rq = *qp.roce;
  const uint32_t psn = in.h.bth.psn;
  const sr::Reth& reth = in.h.reth;
  if (!Allowed(qp, IBV_ACCESS_REMOTE_READ) || qp.attr.max_dest_rd_atomic == 0)
    return Fatal(engine, qp, psn, sr::kNakInvalidRequest);
  if (reth.dma_length > limits::kMaxMsgSize) return Fatal(engine, qp, psn, sr::kNakInvalidRequest);
  if (reth.dma_length > 0 &&
      !RemoteHost(engine, qp, reth.rkey, reth.va, reth.dma_length, IBV_ACCESS_REMOTE_READ))
    return Fatal(engine, qp, psn, sr::kNakRemoteAccessError);
  const uint32_t packets = PacketCount(reth.dma_length, rq.mtu);
  qp.rd_resources.RecordRead(psn, PsnAdd(psn, packets - 1), reth.va, reth.rkey, reth.dma_length,
                             qp.pd->id);
  rq.msn = PsnAdd(rq.msn, 1);
  qp.epsn = PsnAdd(psn, packets);
  SendReadResponses(engine, qp, reth.rkey, reth.va, reth.dma_length, psn);
}

void OnAtomicRequest(Engine& engine, Qp& qp, const PacketIn& in) {
  RoceQp& rq = *qp.roce;
  const uint32_t psn = in.h.bth.psn;
  const sr::AtomicEth& eth = in.h.atomic_eth;
  if (!Allowed(qp, IBV_ACCESS_REMOTE_ATOMIC) || qp.attr.max_dest_rd_atomic == 0 || (eth.va & 7))
    return Fatal(engine, qp, psn, sr::kNakInvalidRequest);
  const uint64_t host = RemoteHost(engine, qp, eth.rkey, eth.va, 8, IBV_ACCESS_REMOTE_ATOMIC);
  if (host == 0) return Fatal(engine, qp, psn, sr::kNakRemoteAccessError);
  const bool cas = in.info->operation == sr::Operation::kCompareSwap;
  AtomicLocks locks(engine.registry().atomic_lock_words());
  const AtomicOp op{cas, cas ? eth.compare : eth.swap_add, cas ? eth.swap_add : 0};
  uint64_t original = 0;
  ExecuteAtomic(locks, SelfPid(), engine.me().slot, host, op, &original);
  qp.rd_resources.RecordAtomic(psn, eth.va, eth.rkey, original, qp.pd->id);
  rq.msn = PsnAdd(rq.msn, 1);
  qp.epsn = PsnAdd(psn, 1);
  SendAckPacket(engine, qp, opc::kAtomicAck, psn, kAckSyndrome, original);
}

}  // namespace

void SendOwedAck(Engine& engine, Qp& qp) {
  if (!qp.roce || !qp.roce->ack_due) return;
  qp.roce->ack_due = false;  // a lost ACK is recovered like a lost packet
  SendAckPacket(engine, qp, opc::kAck, PsnAdd(qp.epsn, 0xFFFFFF), kAckSyndrome);
}

void OnRequestPacket(Engine& engine, Qp& qp, const PacketIn& in) {
  constexpr uint32_t kExecuting =
      1u << IBV_QPS_RTR | 1u << IBV_QPS_RTS | 1u << IBV_QPS_SQD | 1u << IBV_QPS_SQE;
  if (!((1u << (qp.state & 31)) & kExecuting)) {
    GetCounters().drop_wrong_qp.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  RoceQp& rq = *qp.roce;
  const uint32_t psn = in.h.bth.psn;
  const bool uc = qp.type == IBV_QPT_UC;
  const bool first = in.info->IsFirstOfMessage();
  if (uc) {
    // A gap drops the rest of its message; a FIRST/ONLY is taken whatever
    // its PSN and resynchronises the expected PSN (rc-transport.md §8).
    if (psn != qp.epsn) {
      rq.in_message = InMessage::kNone;
      if (!first) {
        GetCounters().drop_psn_window.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      qp.epsn = psn;
    }
  } else {
    const int32_t d = PsnDiff(psn, qp.epsn);
    if (d < 0) return OnDuplicate(engine, qp, in);
    if (d > 0) {
      // A gap: a sequence NAK at the first packet past it, and a repeat of it
      // at each AckReq packet past it until it is filled, so that neither a
      // lost NAK nor a lost retransmission waits for the retransmit timer.
      // The repeat is an ACK of epsn - 1 (kNakRepeatSyndrome): a requester
      // of the standard ignores it as a stale duplicate, and so sees one NAK
      // per gap (rc-transport.md §4.4) and spends one retry on it, where
      // NAKs repeated at each AckReq packet could take its whole retry_cnt
      // at the first loss. Ours takes it for the NAK; only AckReq packets
      // repeat it: the requester counts those it sent and ignores as many
      // repeats after going back (roce_completer.cpp; docs/design.md
      // "Repeated sequence NAKs").
      Counters& c = GetCounters();
      if (rq.rnr_quiet && PsnDiff(psn, rq.nak_last_psn) <= 0) {
        rq.rnr_quiet = false;  // the requester went back after its RNR wait
        rq.nak_sent = false;
      }
      rq.nak_last_psn = psn;
      const bool first = !rq.nak_sent;
      if (!rq.rnr_quiet && (first || in.h.bth.ack_req)) {
        rq.nak_sent = true;
        if (first) {
          Nak(engine, qp, qp.epsn, sr::kNakPsnSequenceError);
        } else if (qp.type != IBV_QPT_UC) {
          SendAckPacket(engine, qp, opc::kAck, PsnAdd(qp.epsn, 0xFFFFFF), kNakRepeatSyndrome);
        }
        c.seq_naks_sent.fetch_add(1, std::memory_order_relaxed);
        if (!first) c.seq_naks_repeated.fetch_add(1, std::memory_order_relaxed);
      } else {
        c.drop_psn_window.fetch_add(1, std::memory_order_relaxed);
      }
      return;
    }
    rq.nak_sent = false;
    rq.rnr_quiet = false;
  }
  if (qp.state == IBV_QPS_RTR && !qp.comm_established) {
    qp.comm_established = true;
    PostAsyncEvent(qp.ctx, IBV_EVENT_COMM_EST, qp.verbs());
  }
  // Opcode sequence: a FIRST/ONLY or a READ/atomic only between messages, a
  // MIDDLE/LAST only inside a message of its kind.
  const sr::Operation op = in.info->operation;
  const InMessage kind = op == sr::Operation::kSend        ? InMessage::kSend
                         : op == sr::Operation::kRdmaWrite ? InMessage::kWrite
                                                           : InMessage::kNone;
  const bool in_sequence = (first || kind == InMessage::kNone) ? rq.in_message == InMessage::kNone
                                                               : rq.in_message == kind;
  if (!in_sequence) {
    if (uc && first) {
      rq.in_message = InMessage::kNone;  // the unfinished message is abandoned
    } else {
      if (uc) GetCounters().drop_psn_window.fetch_add(1, std::memory_order_relaxed);
      return Fatal(engine, qp, psn, sr::kNakInvalidRequest);
    }
  }
  switch (op) {
    case sr::Operation::kSend:
      return OnSendPacket(engine, qp, in);
    case sr::Operation::kRdmaWrite:
      return OnWritePacket(engine, qp, in);
    case sr::Operation::kRdmaReadRequest:
      return uc ? void() : OnReadRequest(engine, qp, in);
    case sr::Operation::kCompareSwap:
    case sr::Operation::kFetchAdd:
      return uc ? void() : OnAtomicRequest(engine, qp, in);
    default:  // FLUSH, ATOMIC WRITE: not offered by this device
      return Fatal(engine, qp, psn, sr::kNakInvalidRequest);
  }
}

}  // namespace softrdma::transport::roce
