// XRC delivery to an SRQ that lives in another process than the target QP.
//
// Requests reach the ring of the process that owns the target QP (A). When
// the SRQ a SEND names is not A's, the registry says whose it is (XRC SRQs
// publish an entry, host/published_qp.h); A hands the request over to that
// process (B) as a kXrcForward record: the request's header and payload
// (inline data, one fragment, or the requester's iovec list, which B pulls
// itself), who sent it, and A's domain. B checks the domain exactly, takes
// a WQE of its SRQ, places the message, completes it on the SRQ's CQ (with
// the target QP's number, as a NIC does) and reports with kXrcDone. Only
// then does A advance its expected PSN and ACK the requester, or NAK it
// (RNR, pull refused, invalid request), as if it had placed the message
// itself; until then later PSNs are dropped as from the future, and a
// sequence NAK after the outcome has the requester resend them at once.
//
// B remembers, per (A, target QP), the last message it completed, so that a
// request handed over twice (the requester retransmitted because the report
// was lost to a full ring) is reported again, not delivered twice; and the
// WQE a message in fragments holds, as a QP holds its SRQ WQE.
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/cq.h"
#include "core/limits.h"
#include "core/srq.h"
#include "core/xrcd.h"
#include "transport/engine.h"
#include "transport/recv_source.h"
#include "transport/transport.h"
#include "transport/xrc.h"

namespace softrdma::transport {

namespace {

// B's memory of one target QP's messages.
struct ForwardState {
  const Srq* srq = nullptr;  // the SRQ the held WQE came from
  bool held = false;         // a WQE taken for the message in progress
  RecvWqe wqe{};
  ibv_sge sges[limits::kMaxSrqSge]{};
  uint32_t psn = 0;       // the message in progress or last completed
  uint32_t received = 0;  // fragments: bytes placed so far
  bool completed = false;
};

// Keyed by the target QP's process (slot, generation) and number.
using StateKey = std::tuple<uint32_t, uint32_t, uint32_t>;
std::mutex g_states_mutex;
std::map<StateKey, ForwardState>& States() {
  static auto* m = new std::map<StateKey, ForwardState>();  // never destroyed: used at exit
  return *m;
}

void Report(Engine& engine, const wire::RecordHeader& fwd, wire::Syndrome outcome) {
  auto target = engine.Peer(ProcRef{fwd.src_slot, fwd.src_gen});
  if (!target) return;
  wire::RecordHeader h{};
  h.type = wire::RecordType::kXrcDone;
  h.syndrome = outcome;
  h.src_qpn = fwd.dst_qpn;
  h.dst_qpn = fwd.src_qpn;
  h.psn = fwd.psn;
  h.src_slot = engine.me().slot;
  h.src_gen = engine.me().gen;
  // Lost to a full ring: the requester retransmits, A hands the message
  // over again and we report again.
  engine.Send(*target, h, nullptr, 0);
}

void Complete(const Srq& srq, ForwardState& st, const wire::RecordHeader& fwd,
              const wire::XrcForwardEth& eth, ibv_wc_status status) {
  ibv_wc wc{};
  wc.wr_id = st.wqe.wr_id;
  wc.status = status;
  wc.opcode = IBV_WC_RECV;
  wc.byte_len = fwd.total_len;
  wc.qp_num = fwd.src_qpn;  // the target QP
  wc.src_qp = eth.requester_qpn;
  if (fwd.flags & wire::kFlagHasImm) {
    wc.wc_flags |= IBV_WC_WITH_IMM;
    wc.imm_data = fwd.imm;
  }
  srq.cq->Push(wc, (fwd.flags & wire::kFlagSolicited) != 0);
  st.held = false;
}

// Places the message (or this fragment of it) in the held WQE. Returns the
// outcome to report, or kAck with *more = true while fragments remain.
wire::Syndrome Place(Engine& engine, Srq& srq, ForwardState& st, const wire::RecordHeader& fwd,
                     const wire::XrcForwardEth& eth, const shm::RecordView& view, bool* more) {
  RecvSlot slot{&st.wqe, st.sges, srq.pd()->id};
  if (fwd.total_len > RecvCapacity(slot)) {
    Complete(srq, st, fwd, eth, IBV_WC_LOC_LEN_ERR);
    return wire::Syndrome::kNakInvalidRequest;
  }
  iovec local[limits::kMaxSge];
  const int nlocal = ResolveRecv(engine, slot, fwd.total_len, local);
  if (nlocal < 0) {
    Complete(srq, st, fwd, eth, IBV_WC_LOC_PROT_ERR);
    return wire::Syndrome::kNakRemoteOp;
  }
  const uint32_t data_off = sizeof fwd + sizeof eth;
  switch (fwd.mode) {
    case wire::PayloadMode::kInline:
      ScatterFromRecord(view, data_off, local, nlocal, 0, fwd.total_len);
      break;
    case wire::PayloadMode::kPull: {
      auto requester = engine.Peer(ProcRef{eth.requester_slot, eth.requester_gen});
      PullResult r = requester ? PullFromRequester(*requester, local, nlocal, view, data_off, fwd)
                               : PullResult::kFault;
      // Refused: the WQE stays held for the resend by fragments.
      if (r == PullResult::kRefused) return wire::Syndrome::kPullRefused;
      if (r == PullResult::kFault) {
        Complete(srq, st, fwd, eth, IBV_WC_LOC_QP_OP_ERR);
        return wire::Syndrome::kNakRemoteOp;
      }
      break;
    }
    case wire::PayloadMode::kFragment:
      ScatterFromRecord(view, data_off, local, nlocal, fwd.frag_offset, fwd.payload_len);
      st.received += fwd.payload_len;
      if (!(fwd.flags & wire::kFlagLastFragment)) {
        *more = true;
        return wire::Syndrome::kAck;
      }
      break;
  }
  Complete(srq, st, fwd, eth, IBV_WC_SUCCESS);
  return wire::Syndrome::kAck;
}

}  // namespace

XrcForward ForwardXrcRequest(Engine& engine, Qp& qp, const wire::RecordHeader& req,
                             const shm::RecordView& view) {
  // A private domain is never shared with another process.
  if (!qp.xrcd || qp.xrcd->private_id) return XrcForward::kNowhere;
  const PublishedQp* entry = engine.registry().published_qp(req.rnr_timer);
  if (!entry) return XrcForward::kNowhere;
  const QpSnapshot srq = ReadQpEntry(*entry);
  const ProcRef owner{srq.owner_slot, srq.owner_gen};
  if (srq.type != kPublishedXrcSrq || srq.state != IBV_QPS_RTS || srq.dest_qpn != qp.xrcd->token ||
      owner == engine.me())
    return XrcForward::kNowhere;
  auto peer = engine.Peer(owner);
  if (!peer) return XrcForward::kNowhere;  // its process is gone

  wire::RecordHeader h = req;
  h.type = wire::RecordType::kXrcForward;
  h.flags = static_cast<uint8_t>(h.flags & ~wire::kFlagAck);  // that ACK was ours
  h.dst_qpn = req.rnr_timer;
  h.src_qpn = qp.qpx.qp_base.qp_num;
  h.src_slot = engine.me().slot;
  h.src_gen = engine.me().gen;
  wire::XrcForwardEth eth{req.src_slot,
                          req.src_gen,
                          req.src_qpn,
                          0,
                          static_cast<uint64_t>(qp.xrcd->dev),
                          static_cast<uint64_t>(qp.xrcd->ino)};
  std::vector<uint8_t> payload(req.payload_len);
  if (!view.CopyOut(sizeof req, payload.data(), req.payload_len)) return XrcForward::kBlocked;
  iovec parts[3] = {{&h, sizeof h}, {&eth, sizeof eth}, {payload.data(), payload.size()}};
  if (!engine.SendGather(*peer, h, parts, payload.empty() ? 2 : 3)) return XrcForward::kBlocked;
  qp.xrc_fwd_pending = true;
  qp.xrc_fwd_psn = req.psn;
  return XrcForward::kForwarded;
}

void OnXrcForward(Engine& engine, const wire::RecordHeader& fwd, const shm::RecordView& view) {
  wire::XrcForwardEth eth;
  if (view.size() < sizeof fwd + sizeof eth ||
      view.size() - sizeof fwd - sizeof eth < fwd.payload_len)
    return;  // malformed: drop
  view.CopyOut(sizeof fwd, &eth, sizeof eth);
  Srq* srq = AcquireXrcSrq(fwd.dst_qpn);
  if (!srq || !srq->xrcd || srq->xrcd->private_id ||
      static_cast<uint64_t>(srq->xrcd->dev) != eth.domain_dev ||
      static_cast<uint64_t>(srq->xrcd->ino) != eth.domain_ino) {
    if (srq) ReleaseXrcSrq(srq);
    Report(engine, fwd, wire::Syndrome::kNakInvalidRequest);
    return;
  }
  wire::Syndrome outcome = wire::Syndrome::kAck;
  bool more = false;
  {
    std::lock_guard<std::mutex> lock(g_states_mutex);
    ForwardState& st = States()[StateKey{fwd.src_slot, fwd.src_gen, fwd.src_qpn}];
    const bool fragment = fwd.mode == wire::PayloadMode::kFragment;
    const bool start = !fragment || fwd.frag_offset == 0;
    if (st.completed && st.psn == fwd.psn) {
      // Handed over again after our report was lost: report, do not redo.
    } else if (!start && (st.psn != fwd.psn || !st.held || st.received != fwd.frag_offset)) {
      more = true;  // the tail of a message that failed or restarted: drop
    } else {
      if (start) {
        st.psn = fwd.psn;
        st.completed = false;
        st.received = 0;
        // A WQE held for an earlier attempt (pull refused, resent in
        // fragments) serves this one; one of another SRQ is given back
        // flushed, as a QP's held WQE on error.
        if (st.held && st.srq != srq) Complete(*st.srq, st, fwd, eth, IBV_WC_WR_FLUSH_ERR);
      }
      if (!st.held && !srq->Take(&st.wqe, st.sges)) {
        outcome = wire::Syndrome::kRnrNak;
      } else {
        st.held = true;
        st.srq = srq;
        outcome = Place(engine, *srq, st, fwd, eth, view, &more);
        if (!more && outcome != wire::Syndrome::kPullRefused) st.completed = true;
      }
    }
  }
  ReleaseXrcSrq(srq);
  if (!more) Report(engine, fwd, outcome);
}

bool OnXrcDone(Engine& engine, Qp& qp, const wire::RecordHeader& done) {
  if (!qp.xrc_fwd_pending || done.psn != qp.xrc_fwd_psn || !qp.peer) return false;
  qp.xrc_fwd_pending = false;
  const bool dropped = qp.xrc_fwd_dropped;
  qp.xrc_fwd_dropped = false;
  wire::RecordHeader req{};  // the request as SendNak answers it
  req.src_qpn = qp.attr.dest_qp_num;
  req.dst_qpn = qp.qpx.qp_base.qp_num;
  req.psn = done.psn;
  if (done.syndrome == wire::Syndrome::kAck) {
    qp.epsn = PsnAdd(qp.epsn, 1);
    if (!dropped) return true;
    // Requests behind it were dropped: a sequence NAK at the next PSN
    // acknowledges this one and has the requester resend them now rather
    // than when its timer expires.
    req.psn = qp.epsn;
    SendNak(engine, qp, req, wire::Syndrome::kNakSequence);
    return false;
  }
  qp.frag_active = false;
  qp.frag_received = 0;
  if (done.syndrome == wire::Syndrome::kRnrNak) {
    SendNak(engine, qp, req, wire::Syndrome::kRnrNak, qp.attr.min_rnr_timer);
  } else if (done.syndrome == wire::Syndrome::kPullRefused) {
    SendNak(engine, qp, req, wire::Syndrome::kPullRefused);
  } else {
    SendNak(engine, qp, req, done.syndrome);
    EnterError(engine, qp);
  }
  return false;
}

void ForgetXrcForwards(const Srq* srq) {
  std::lock_guard<std::mutex> lock(g_states_mutex);
  for (auto it = States().begin(); it != States().end();)
    it = it->second.srq == srq ? States().erase(it) : std::next(it);
}

}  // namespace softrdma::transport
