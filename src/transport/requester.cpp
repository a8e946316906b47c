// Requester: validates posted send WRs, queues them as WQEs and turns them
// into request records on the peer's ring.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "core/device.h"
#include "core/limits.h"
#include "core/qp_state_machine.h"
#include "core/wr_opcodes.h"
#include "host/gsi_forwarder.h"
#include "transport/engine.h"
#include "transport/iov_slice.h"
#include "transport/roce/roce_qp.h"
#include "transport/sq_drain.h"
#include "transport/transport.h"
#include "transport/xrc.h"
#include "util/config.h"
#include "util/log.h"

namespace softrdma::transport {

namespace {

// Pieces of a message pushed through the ring when cross-memory attach is
// refused; small enough that several fit in a ring at once.
constexpr uint32_t kFragmentBytes = 8192;

}  // namespace

namespace {

// SEND and SEND_WITH_IMM: two-sided, so neither the one-sided checks
// (ValidateOneSidedWr) nor the one-sided and local-operation fields
// (CaptureOneSidedWr) concern them.
constexpr bool IsPlainSend(ibv_wr_opcode op) {
  return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM;
}

// ValidateSendWr's rules, inline into PostSend. The common case (an RC SEND
// with one SGE) passes each test at its first comparison and sums its one
// SGE without entering the loop.
[[gnu::always_inline]] inline int CheckSendWr(const Qp& qp, const ibv_send_wr& wr,
                                              uint64_t* total) {
  const ibv_wr_opcode op = wr.opcode;
  if (int rc = CheckSendOpcode(qp.type, op)) return rc;  // core/wr_opcodes.h
  if (qp.type == IBV_QPT_XRC_SEND)
    if (int rc = CheckXrcSendWr(qp, wr)) return rc;  // transport/xrc.cpp
  // A negative num_sge reads as a count above any max_send_sge.
  const uint32_t nsge = static_cast<uint32_t>(wr.num_sge);
  if (nsge > qp.cap.max_send_sge) return EINVAL;
  uint64_t sum = 0;
  if (nsge != 0) {
    if (!wr.sg_list) return EINVAL;
    sum = wr.sg_list[0].length;
    for (uint32_t i = 1; i < nsge; ++i) sum += wr.sg_list[i].length;
  }
  if (sum > limits::kMaxMsgSize) return EINVAL;
  if ((wr.send_flags & IBV_SEND_INLINE) && sum > qp.cap.max_inline_data) return EINVAL;
  // A UD message is one packet: refused here rather than dropped on the way
  // (rxe drops it and reports success), so the error shows where it is made.
  // A datagram is one packet: at most the port's active MTU (as rxe).
  if (qp.type == IBV_QPT_UD && (!wr.wr.ud.ah || sum > (128u << Device::Get().active_mtu())))
    return EINVAL;
  if (!IsPlainSend(op))
    if (int rc = ValidateOneSidedWr(qp, wr, sum)) return rc;
  *total = sum;
  return 0;
}

}  // namespace

int ValidateSendWr(const Qp& qp, const ibv_send_wr& wr, uint64_t* total) {
  return CheckSendWr(qp, wr, total);
}

[[gnu::always_inline]] inline void TransmitBody(Engine& engine, Qp& qp);

namespace {

// PostSend's body, inline into both entry points.
[[gnu::always_inline]] inline int PostSendHeld(Engine& engine, Qp& qp, ibv_send_wr* wr,
                                               ibv_send_wr** bad_wr) {
  int rc = CheckPostSendState(qp.state);
  if (rc) {
    *bad_wr = wr;
    return rc;
  }
  bool queued = false;
  for (; wr; wr = wr->next) {
    uint64_t total = 0;
    rc = CheckSendWr(qp, *wr, &total);
    if (rc == 0 && qp.sq.full()) rc = ENOMEM;
    if (rc) {
      *bad_wr = wr;
      break;
    }
    // A WRITE/READ/atomic to an idle SQ runs now (one_sided.cpp), saving
    // the queue's round trip; everything else, and whatever it declines,
    // is queued and transmitted in order.
    if (MayExecuteAtPost(qp, wr->opcode) &&
        ExecuteAtPost(engine, qp, *wr, static_cast<uint32_t>(total)))
      continue;
    const ibv_wr_opcode op = wr->opcode;
    const unsigned flags = wr->send_flags;
    const uint32_t index = qp.sq.head;
    SendWqe& w = qp.sq.at(index);
    w.wr_id = wr->wr_id;
    w.opcode = op;
    w.imm = op == IBV_WR_SEND_WITH_IMM ? wr->imm_data : 0;
    w.total_len = static_cast<uint32_t>(total);
    w.signaled = qp.sq_sig_all || (flags & IBV_SEND_SIGNALED);
    w.solicited = flags & IBV_SEND_SOLICITED;
    w.is_inline = flags & IBV_SEND_INLINE;
    w.tx_offset = 0;
    w.xrc_srqn = qp.type == IBV_QPT_XRC_SEND ? wr->qp_type.xrc.remote_srqn & 0xffffff : 0;
    if (qp.type == IBV_QPT_UD) {
      // The AH is copied, so it may be destroyed once the send completed.
      const ibv_ah_attr& ah = Ah::From(wr->wr.ud.ah)->attr;
      w.ud.dgid = ah.grh.dgid;
      w.ud.flow_label = ah.grh.flow_label;
      w.ud.sgid_index = ah.grh.sgid_index;
      w.ud.hop_limit = ah.grh.hop_limit;
      w.ud.traffic_class = ah.grh.traffic_class;
      w.ud.remote_qpn = wr->wr.ud.remote_qpn & 0xffffff;
      // Bit 31 set = "use the QP's own Q_Key" (IBA 10.2.5; mlx4, hns do it).
      // A send to QP1 carries the GSI's Q_Key, the only one QP1 takes: the
      // CM, which does the kernel's part from user space, may not hold that
      // controlled Q_Key on its QP (host/gsi_forwarder.h).
      w.ud.remote_qkey = w.ud.remote_qpn == kGsiQpn              ? kGsiQkeyValue
                         : (wr->wr.ud.remote_qkey & 0x80000000u) ? qp.attr.qkey
                                                                 : wr->wr.ud.remote_qkey;
    }
    // The PSN is assigned at first transmission (Transmit): operations the
    // initiator executes directly never use one.
    if (IsPlainSend(op)) {
      // Of CaptureOneSidedWr's fields a SEND's transmission and completion
      // read only these (Transmit: fence, PSN); the rest stay unwritten.
      w.fenced = flags & IBV_SEND_FENCE;
      w.has_psn = false;
      w.placed = false;
      w.resp_done = false;
    } else {
      CaptureOneSidedWr(w, *wr);
    }
    const uint32_t nsge = static_cast<uint32_t>(wr->num_sge);
    if (w.is_inline) {
      // Inline data is taken at post time (no lkey needed): the application
      // may reuse its buffer as soon as ibv_post_send returns.
      uint8_t* dst = qp.inline_slot(index);
      for (uint32_t i = 0; i < nsge; ++i) {
        memcpy(dst, reinterpret_cast<const void*>(wr->sg_list[i].addr), wr->sg_list[i].length);
        dst += wr->sg_list[i].length;
      }
      w.num_sge = 0;
    } else {
      w.num_sge = nsge;
      ibv_sge* sge = qp.sq.sge_of(index);
      if (nsge == 1)
        sge[0] = wr->sg_list[0];
      else
        std::copy_n(wr->sg_list, nsge, sge);
    }
    ++qp.sq.head;
    queued = true;
  }
  if (queued) {
    if (SendsFlushImmediately(qp.state)) {
      if (qp.state == IBV_QPS_SQE)
        FlushSendQueue(qp);  // the receive side keeps working
      else
        EnterError(engine, qp);  // flushes what was just queued
    } else {
      TransmitBody(engine, qp);
      engine.WatchTimers();
    }
  }
  return rc;
}

}  // namespace

int PostSend(Engine& engine, Qp& qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  return PostSendHeld(engine, qp, wr, bad_wr);
}

int LockAndPostSend(Engine& engine, Qp& qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  std::lock_guard<SpinLock> lock(qp.lock);
  return PostSendHeld(engine, qp, wr, bad_wr);
}

namespace {

enum class TxResult { kSent, kBlocked, kFailed };

}  // namespace

// Resolves a WQE's local SGEs to addresses in this process, checking each
// lkey, bound and the QP's PD. Returns the number of iovecs or -1.
namespace {

// ResolveLocal's body, inline into the small message's transmission too.
[[gnu::always_inline]] inline int ResolveWqeSges(Engine& engine, Qp& qp, uint32_t index,
                                                 const SendWqe& w, iovec* out, uint32_t* extents) {
  return engine.mr_table().ResolveSges(qp.sq.sge_of(index), w.num_sge, qp.pd->id, 0, out,
                                       UINT64_MAX, extents);
}

}  // namespace

int ResolveLocal(Engine& engine, Qp& qp, uint32_t index, const SendWqe& w, iovec* out,
                 uint32_t* extents) {
  return ResolveWqeSges(engine, qp, index, w, out, extents);
}

namespace {

wire::RecordHeader RequestHeader(Engine& engine, const Qp& qp, const SendWqe& w) {
  wire::RecordHeader h{};
  h.type = wire::RecordType::kSend;
  h.flags = (w.solicited ? wire::kFlagSolicited : 0) |
            (w.opcode == IBV_WR_SEND_WITH_IMM ? wire::kFlagHasImm : 0) |
            (w.opcode == IBV_WR_SEND_WITH_INV ? wire::kFlagInvalidate : 0);
  h.src_qpn = qp.qpx.qp_base.qp_num;
  h.dst_qpn = qp.attr.dest_qp_num;
  h.psn = w.psn;
  h.src_slot = engine.me().slot;
  h.src_gen = engine.me().gen;
  h.imm = w.imm;
  h.total_len = w.total_len;
  h.rnr_timer = w.xrc_srqn;
  return h;
}

// A message above the inline limit: the responder pulls it (one copy) or it
// goes through the ring in fragments (two copies). Out of line, so that the
// small message's path in Transmit stays short.
[[gnu::noinline]] TxResult TransmitLarge(Engine& engine, Qp& qp, uint32_t index,
                                         wire::RecordHeader& h, bool carries_ack) {
  SendWqe& w = qp.sq.at(index);
  PeerLink& peer = *qp.peer;
  iovec parts[limits::kMaxSge + 1];
  parts[0] = iovec{&h, sizeof h};
  uint32_t extents[limits::kMaxSge];  // written by ResolveLocal for each iovec it fills
  const int nlocal = ResolveLocal(engine, qp, index, w, parts + 1, extents);
  if (nlocal < 0) return TxResult::kFailed;

  // UC completes a send once it is on the wire, so the responder must not
  // read the buffer later: UC moves bulk data by fragments.
  const Config& cfg = GetConfig();
  if ((qp.type == IBV_QPT_RC || qp.type == IBV_QPT_XRC_SEND) && (cfg.cma_allowed || cfg.map_mr) &&
      !peer.pull_refused.load(std::memory_order_relaxed)) {
    // One copy: the responder reads straight from our buffers (through its
    // mapping of our registered memory, or with cross-memory attach).
    wire::RemoteIov iov[limits::kMaxSge];
    for (int i = 0; i < nlocal; ++i)
      iov[i] = {reinterpret_cast<uint64_t>(parts[i + 1].iov_base),
                static_cast<uint32_t>(parts[i + 1].iov_len), extents[i]};
    h.mode = wire::PayloadMode::kPull;
    h.payload_len = static_cast<uint32_t>(nlocal * sizeof(wire::RemoteIov));
    if (!engine.Send(peer, h, iov, h.payload_len)) return TxResult::kBlocked;
    if (carries_ack) qp.ack_pending = false;
    return TxResult::kSent;
  }

  // Two copies: push the message through the ring in fragments, resuming
  // where a full ring stopped us.
  h.mode = wire::PayloadMode::kFragment;
  while (w.tx_offset < w.total_len) {
    uint32_t len = std::min(kFragmentBytes, w.total_len - w.tx_offset);
    iovec frag[limits::kMaxSge + 1];
    frag[0] = iovec{&h, sizeof h};
    int nfrag = 1 + SliceIovecs(parts + 1, nlocal, w.tx_offset, len, frag + 1);
    h.frag_offset = w.tx_offset;
    h.payload_len = len;
    h.flags =
        static_cast<uint8_t>((h.flags & ~wire::kFlagLastFragment) |
                             (w.tx_offset + len == w.total_len ? wire::kFlagLastFragment : 0));
    if (!engine.SendGather(peer, h, frag, nfrag)) return TxResult::kBlocked;
    if (h.flags & wire::kFlagAck) {
      qp.ack_pending = false;  // carried by the first fragment
      h.flags = static_cast<uint8_t>(h.flags & ~wire::kFlagAck);
    }
    w.tx_offset += len;
  }
  return TxResult::kSent;
}

// Inline into Transmit: a small message is one record holding the header
// and the data (the QP's inline copy, or the application's buffer found by
// its lkey), written by Engine::Send without an iovec list when the data is
// one piece.
[[gnu::always_inline]] inline TxResult TransmitOne(Engine& engine, Qp& qp, uint32_t index) {
  SendWqe& w = qp.sq.at(index);
  wire::RecordHeader h = RequestHeader(engine, qp, w);
  // Our pending ACK for the peer's requests rides along (responder.cpp).
  const bool carries_ack = PiggybackAck(qp, &h);
  // shm_inline_max is never below kMaxInlineData (util/config.cpp): a
  // message up to that size needs no look at the configuration.
  const uint32_t len = w.total_len;
  if (!w.is_inline && len > static_cast<uint32_t>(limits::kMaxInlineData) &&
      len > GetConfig().shm_inline_max) [[unlikely]]
    return TransmitLarge(engine, qp, index, h, carries_ack);
  h.mode = wire::PayloadMode::kInline;
  h.payload_len = len;
  bool sent;
  if (w.is_inline) {
    sent = engine.Send(*qp.peer, h, qp.inline_slot(index), len);
  } else {
    iovec parts[limits::kMaxSge + 1];
    parts[0] = iovec{&h, sizeof h};
    const int nlocal = ResolveWqeSges(engine, qp, index, w, parts + 1, nullptr);
    if (nlocal < 0) return TxResult::kFailed;
    // One piece (nearly always): Send directly, without SendGather's call.
    sent = nlocal <= 1 ? engine.Send(*qp.peer, h, nlocal ? parts[1].iov_base : nullptr,
                                     nlocal ? static_cast<uint32_t>(parts[1].iov_len) : 0)
                       : engine.SendGather(*qp.peer, h, parts, nlocal + 1);
  }
  if (!sent) return TxResult::kBlocked;
  if (carries_ack) qp.ack_pending = false;
  return TxResult::kSent;
}

}  // namespace

// Shared memory reaches our own registry's QPs on this host only.
bool PeerSharesOurRegistry(Engine& engine, const Qp& qp) {
  return engine.registry().OwnsQpn(qp.attr.dest_qp_num) &&
         Device::Get().IsLocalGid(qp.attr.ah_attr.grh.dgid);
}

void ChooseWire(Engine& engine, Qp& qp) {
  // UD chooses per datagram (datagram.cpp), and listens on the RoCE wire
  // from RTR on (if the port can be opened): its first datagram may come
  // from another host (a listening server; the CM's GSI agent too).
  if (qp.type == IBV_QPT_UD) {
    if (engine.packet_port()) engine.ActivateRoce();
    return;
  }
  // A new connection: nothing executed yet whose duplicate could come.
  qp.rd_resources.Reset(qp.attr.max_dest_rd_atomic);
  // Shared memory reaches the QPs of our own registry on this host only: a
  // QPN of another registry's range (another user, another namespace) is
  // reached over the RoCE wire even at one of our GIDs, as a NIC would.
  const bool local = PeerSharesOurRegistry(engine, qp);
  if ((qp.type == IBV_QPT_RC || qp.type == IBV_QPT_UC) && (engine.roce_forced() || !local)) {
    // Without a port the peer is unreachable: sends end in RETRY_EXC_ERR.
    if (roce::Attach(engine, qp)) engine.ActivateRoce();
    return;
  }
  if (local) qp.peer = engine.ResolveQpn(qp.attr.dest_qp_num);
}

bool EnsurePeer(Engine& engine, Qp& qp) {
  if (qp.peer) return true;
  // SOFTRDMA_WIRE=roce: never over shared memory, even without a port.
  if (PeerSharesOurRegistry(engine, qp) && !engine.roce_forced())
    qp.peer = engine.ResolveQpn(qp.attr.dest_qp_num);
  return qp.peer != nullptr;
}

void Transmit(Engine& engine, Qp& qp) {
  TransmitBody(engine, qp);
}

namespace {

// Transmits the queue up to its end, or in SQD (kDrain) up to the end of the
// drain (sq_drain.h): the RTS instance is the data path, unchanged by SQD.
template <bool kDrain>
[[gnu::always_inline]] inline void TransmitQueue(Engine& engine, Qp& qp) {
  auto end = [&qp] { return kDrain ? qp.sq_drain_end : qp.sq.head; };
  if (qp.type == IBV_QPT_UD) return TransmitDatagrams(engine, qp);
  if (!qp.peer) [[unlikely]] {
    // The RoCE wire (transport/roce): its own requester, same WQEs.
    if (qp.roce) return roce::Transmit(engine, qp);
    if (!EnsurePeer(engine, qp) && qp.type == IBV_QPT_UC) {
      // Unreliable: what nobody receives is lost, and the sender never knows.
      qp.sq_tx = end();
      CompleteUnacknowledged(qp);
      return;
    }
  }
  if (!qp.peer) {
    // Nobody owns the destination QPN (or it is on another host, and the
    // RoCE wire is not there yet): what a NIC reports after its retries.
    if (qp.sq_tx != end()) FailSendHead(engine, qp, IBV_WC_RETRY_EXC_ERR);
    return;
  }
  // The retransmit timer runs from the moment the oldest WQE starts out
  // (give or take the timer's own period: see Qp::progress_seen).
  if (qp.sq_tx == qp.sq.tail && qp.sq_tx != qp.sq.head && !qp.tx_blocked) qp.progress_seen = true;
  while (qp.sq_tx != end()) {
    // --- one-sided operations and fences (one_sided.cpp)
    SendWqe& w = qp.sq.at(qp.sq_tx);
    if (w.fenced && FenceBlocks(qp)) {
      qp.tx_blocked = true;  // resumed when the completer retires them
      return;
    }
    TxResult r = TxResult::kSent;
    if (IsOneSided(w.opcode) || IsLocalOp(w.opcode)) {
      OneSidedTx o = IsLocalOp(w.opcode) ? ExecuteLocalOp(engine, qp, qp.sq_tx)  // invalidate.cpp
                                         : TransmitOneSided(engine, qp, qp.sq_tx);
      if (o == OneSidedTx::kRetired) continue;
      if (o == OneSidedTx::kStopped) return;
      if (o == OneSidedTx::kWait) {
        qp.tx_blocked = true;
        return;
      }
      if (o == OneSidedTx::kBlocked) r = TxResult::kBlocked;
      if (o == OneSidedTx::kFailed) r = TxResult::kFailed;
    } else {
      if (!w.has_psn) {
        w.psn = qp.next_psn;
        qp.next_psn = PsnAdd(qp.next_psn, 1);
        w.has_psn = true;
      }
      r = TransmitOne(engine, qp, qp.sq_tx);
    }
    // ---
    if (r == TxResult::kBlocked) {
      qp.tx_blocked = true;
      engine.NeedService(&qp);
      return;
    }
    if (r == TxResult::kFailed) {
      // The failing WQE must be the next to complete: everything before it
      // is already on the wire and will be acknowledged first. Complete the
      // earlier ones as they are ACKed; mark this one and stop sending.
      if (qp.sq_tx == qp.sq.tail) {
        FailSendHead(engine, qp, IBV_WC_LOC_PROT_ERR);
      } else {
        qp.tx_blocked = true;  // retried after the earlier WQEs complete
        engine.NeedService(&qp);
      }
      return;
    }
    ++qp.sq_tx;
    if (qp.type == IBV_QPT_UC) CompleteUnacknowledged(qp);
  }
  qp.tx_blocked = false;
}

// SQD: only the WQEs of the drain, out of RTS's path.
[[gnu::noinline]] void TransmitDrain(Engine& engine, Qp& qp) {
  TransmitQueue<true>(engine, qp);
}

}  // namespace

// Transmit's body, inline into PostSend too: a post that transmits at once
// (an idle SQ) runs in one frame.
[[gnu::always_inline]] inline void TransmitBody(Engine& engine, Qp& qp) {
  if (qp.state != IBV_QPS_RTS || qp.rnr_wait_until_ns) {
    // SQD: WQEs not yet started stay queued until the QP returns to RTS;
    // those of the drain are finished.
    if (MayTransmit(qp) && !qp.rnr_wait_until_ns) TransmitDrain(engine, qp);
    return;
  }
  TransmitQueue<false>(engine, qp);
}

namespace {

// The QP lost a completion to a full CQ (Cq::Overrun): ERR and
// IBV_EVENT_QP_FATAL, once, after the service above sent what it owed
// (an ACK for the message whose completion was lost).
bool EnterFatalAfterCqOverrun(Engine& engine, Qp& qp) {
  qp.cq_overrun.store(false, std::memory_order_relaxed);
  if (qp.state == IBV_QPS_ERR || qp.state == IBV_QPS_RESET) return false;
  EnterError(engine, qp);
  PostAsyncEvent(qp.ctx, IBV_EVENT_QP_FATAL, qp.verbs());
  return true;
}

bool ServiceShm(Engine& engine, Qp& qp, uint64_t now, uint64_t* deadline);

}  // namespace

bool Service(Engine& engine, Qp& qp, uint64_t now, uint64_t* deadline) {
  bool did =
      qp.roce ? roce::Service(engine, qp, now, deadline) : ServiceShm(engine, qp, now, deadline);
  if (qp.cq_overrun.load(std::memory_order_relaxed)) [[unlikely]]
    did |= EnterFatalAfterCqOverrun(engine, qp);
  return did;
}

namespace {

bool ServiceShm(Engine& engine, Qp& qp, uint64_t now, uint64_t* deadline) {
  bool did = false;
  // Answers waiting for ring space (READ/atomic responses, ACKs/NAKs
  // behind them) go first: the ACK owed must not overtake them.
  if (!qp.responses.empty()) {
    if (FlushResponses(engine, qp))
      did = true;
    else
      engine.NeedService(&qp);
  }
  if (qp.ack_pending) {
    if (SendAck(engine, qp))
      did = true;
    else
      engine.NeedService(&qp);
  }
  if (qp.rnr_wait_until_ns) {
    if (now < qp.rnr_wait_until_ns) {
      *deadline = qp.rnr_wait_until_ns;
      engine.NeedService(&qp);
      return did;
    }
    qp.rnr_wait_until_ns = 0;
  }
  if (qp.sq_tx != qp.sq.head && MayTransmit(qp)) {
    uint32_t before = qp.sq_tx;
    Transmit(engine, qp);
    did |= qp.sq_tx != before;
  }
  return did;
}

}  // namespace

}  // namespace softrdma::transport
