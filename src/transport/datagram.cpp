// Unreliable Datagram on the shm wire (rc-transport.md §9): each UD send is
// one record to the process owning the destination QPN, carrying the Q_Key
// and the addresses the receiver turns into the 40-byte GRH area. Nothing is
// ever answered: a send completes as soon as it is in the peer's ring, and
// the receiver drops what it cannot place (wrong Q_Key, no receive WQE,
// buffer too small), as a NIC drops packets.
#include <arpa/inet.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <span>

#include "core/device.h"
#include "core/limits.h"
#include "host/gsi_forwarder.h"
#include "host/mcast_groups.h"
#include "transport/datagram_grh.h"
#include "transport/engine.h"
#include "transport/recv_source.h"
#include "transport/roce/roce_gsi.h"
#include "transport/roce/roce_qp.h"
#include "transport/sq_drain.h"
#include "transport/transport.h"

namespace softrdma::transport {

namespace {

// Follows the RecordHeader of a kDatagram record; the payload follows it,
// so that the GRH area and the payload are one contiguous copy into the
// receive buffer. The sender builds the area (datagram_grh.h): it knows the
// route, and keeps what does not change per datagram.
struct DatagramHeader {
  uint32_t qkey;
  uint8_t sl;  // the receiver's wc.sl: which L3 header the GRH area holds
  uint8_t reserved[3];
  uint8_t grh[kGrhBytes];  // lengths set for this datagram
};
static_assert(sizeof(DatagramHeader) == 48);

// Header and datagram header, contiguous: one piece for Ring::TryProduce.
struct DatagramHead {
  wire::RecordHeader h;
  DatagramHeader d;
};
static_assert(sizeof(DatagramHead) == sizeof(wire::RecordHeader) + sizeof(DatagramHeader));

void CompleteDatagram(Qp& qp, const RecvWqe& w, ibv_wc_status status, const wire::RecordHeader& req,
                      uint8_t sl) {
  ibv_wc wc{};
  wc.wr_id = w.wr_id;
  wc.status = status;
  wc.opcode = IBV_WC_RECV;
  wc.byte_len = req.total_len + kGrhBytes;
  wc.qp_num = qp.qpx.qp_base.qp_num;
  wc.src_qp = req.src_qpn;
  wc.wc_flags = IBV_WC_GRH;
  wc.pkey_index = 0;  // the one P_Key of the port
  wc.sl = sl;
  if (req.flags & wire::kFlagHasImm) {
    wc.wc_flags |= IBV_WC_WITH_IMM;
    wc.imm_data = req.imm;
  }
  qp.recv_cq->Push(wc, (req.flags & wire::kFlagSolicited) || status != IBV_WC_SUCCESS);
}

// The process owning `qpn`, remembered per QP: a UD QP mostly talks to the
// same few peers, and a full lookup checks the owner's liveness with system
// calls. The cached link is reused while the registry still records the same
// owner for the QPN (one atomic load); a dead owner whose entry is not yet
// reclaimed only swallows datagrams, as a dead node does.
PeerLink* DatagramPeer(Engine& engine, Qp& qp, uint32_t qpn) {
  ProcRef owner;
  if (!engine.registry().QpnOwner(qpn, &owner)) return nullptr;
  if (qp.ud_peer && qp.ud_peer_qpn == qpn && qp.ud_peer->ref == owner) return qp.ud_peer.get();
  qp.ud_peer = engine.ResolveQpn(qpn);
  qp.ud_peer_qpn = qpn;
  return qp.ud_peer.get();
}

}  // namespace

void CompleteUnacknowledged(Qp& qp) {
  for (; qp.sq.tail != qp.sq_tx; ++qp.sq.tail) {
    const SendWqe& w = qp.sq.at(qp.sq.tail);
    if (w.signaled) CompleteSend(qp, w, IBV_WC_SUCCESS);
  }
  NoteSendsRetired(qp);  // a UC message finished in SQD
}

namespace {

// One datagram ready for a ring: the record and datagram headers (dst_qpn
// set per destination), and the payload's iovecs after them.
struct OutgoingDatagram {
  DatagramHead head{};
  iovec parts[limits::kMaxSge + 1];
  int nparts = 0;
};

// The payload of SQ entry `index` into parts[first...]: the number of
// iovecs, or -1 for a bad local SGE.
int PayloadParts(Engine& engine, Qp& qp, uint32_t index, const SendWqe& w, iovec* parts) {
  if (!w.is_inline) return ResolveLocal(engine, qp, index, w, parts);
  parts[0] = iovec{qp.inline_slot(index), w.total_len};
  return w.total_len ? 1 : 0;
}

// Builds the datagram of SQ entry `index`. false = a bad local SGE.
bool BuildDatagram(Engine& engine, Qp& qp, uint32_t index, const SendWqe& w, const GrhTemplate& grh,
                   OutgoingDatagram* out) {
  wire::RecordHeader& h = out->head.h;
  const bool has_imm = w.opcode == IBV_WR_SEND_WITH_IMM;
  h.type = wire::RecordType::kDatagram;
  h.mode = wire::PayloadMode::kInline;
  h.flags = static_cast<uint8_t>((w.solicited ? wire::kFlagSolicited : 0) |
                                 (has_imm ? wire::kFlagHasImm : 0));
  h.src_qpn = qp.qpx.qp_base.qp_num;
  h.dst_qpn = w.ud.remote_qpn;
  h.psn = qp.next_psn;  // UD checks no PSN; numbered for traces only
  h.src_slot = engine.me().slot;
  h.src_gen = engine.me().gen;
  h.imm = w.imm;
  h.total_len = w.total_len;
  h.payload_len = static_cast<uint32_t>(sizeof(DatagramHeader)) + w.total_len;
  DatagramHeader& d = out->head.d;
  d.qkey = w.ud.remote_qkey;
  d.sl = grh.sl();
  grh.WriteFor(has_imm, w.total_len, d.grh);

  out->parts[0] = iovec{&out->head, sizeof out->head};
  const int n = PayloadParts(engine, qp, index, w, out->parts + 1);
  if (n < 0) return false;
  out->nparts = n + 1;
  return true;
}

// Into `peer`'s ring; false if it is full. A payload of one piece (nearly
// always) goes with Ring::TryProduce, as an RC SEND's (Engine::Send).
bool SendDatagram(Engine& engine, PeerLink& peer, const OutgoingDatagram& dg) {
  if (dg.nparts <= 2)
    return peer.ring->TryProduce(&dg.head, sizeof dg.head,
                                 dg.nparts == 2 ? dg.parts[1].iov_base : nullptr,
                                 dg.nparts == 2 ? static_cast<uint32_t>(dg.parts[1].iov_len) : 0);
  return engine.SendGather(peer, dg.head.h, dg.parts, dg.nparts);
}

// A multicast send: one copy to the owner of every QP attached to the
// group, this QP included unless it blocks its own loopback. A member whose
// ring is full misses the datagram, as a congested switch port drops a
// multicast packet (nothing waits for the slowest member).
void TransmitMulticast(Engine& engine, Qp& qp, const ibv_gid& group, OutgoingDatagram& dg) {
  const uint32_t self = qp.gsi_agent ? kGsiQpn : qp.qpx.qp_base.qp_num;
  McastGroups(engine.registry()).ForEachMember(group.raw, [&](uint32_t qpn) {
    if (qpn == self && qp.block_self_mcast_loopback) return;
    std::shared_ptr<PeerLink> member = engine.ResolveQpn(qpn);
    if (!member) return;
    dg.head.h.dst_qpn = qpn;
    SendDatagram(engine, *member, dg);
  });
}

// A datagram to QP1 (the CM's MADs; docs/design.md, "Other hosts"). QP1 is
// nobody's QP (the registry has no owner for it): to another host's address
// (or any, with SOFTRDMA_WIRE=roce) it leaves as a RoCE UD packet; to this
// host's the GSI forwarder hands the MAD to the CM socket of the process it
// is for, as the RoCE receive path does for one from another host. Lost
// (like a dropped packet) when it cannot be delivered. false: a bad SGE.
bool TransmitToGsi(Engine& engine, Qp& qp, uint32_t index, const SendWqe& w) {
  iovec parts[limits::kMaxSge];
  const int nparts = PayloadParts(engine, qp, index, w, parts);
  if (nparts < 0) return false;
  uint8_t payload[128u << limits::kActiveMtu];
  size_t len = 0;
  for (int i = 0; i < nparts && len + parts[i].iov_len <= sizeof payload; ++i) {
    memcpy(payload + len, parts[i].iov_base, parts[i].iov_len);
    len += parts[i].iov_len;
  }
  GsiDatagram out;  // to QP1 at the destination, from our address
  memcpy(out.remote_gid.data(), w.ud.dgid.raw, 16);
  GidEntry src;
  if (qp.ud_gids.At(w.ud.sgid_index, &src)) memcpy(out.local_gid.data(), src.gid.raw, 16);
  out.qkey = w.ud.remote_qkey;
  out.payload = std::span<const uint8_t>(payload, len);
  const uint32_t self = qp.gsi_agent ? kGsiQpn : qp.qpx.qp_base.qp_num;
  if (engine.roce_forced() || !Device::Get().IsLocalGid(w.ud.dgid)) {
    roce::SendGsiPacket(engine, out, self);
    return true;
  }
  // This host: straight to the forwarder, and so is its own answer to us.
  ForwardGsiDatagram(AsReceived(out, self), [](const GsiDatagram& answer) {
    ForwardGsiDatagram(AsReceived(answer, kGsiQpn));
  });
  return true;
}

}  // namespace

void TransmitDatagrams(Engine& engine, Qp& qp) {
  const bool roce_forced = engine.roce_forced();
  while (qp.sq_tx != qp.sq.head) {
    const uint32_t index = qp.sq_tx;
    const SendWqe& w = qp.sq.at(index);
    if (w.ud.remote_qpn == kGsiQpn) {
      if (!TransmitToGsi(engine, qp, index, w)) {
        FailSendHead(engine, qp, IBV_WC_LOC_PROT_ERR);  // -> SQE
        return;
      }
      qp.next_psn = PsnAdd(qp.next_psn, 1);
      ++qp.sq_tx;
      CompleteUnacknowledged(qp);
      continue;
    }
    const bool multicast = w.ud.remote_qpn == kMulticastQpn && IsMulticastGid(w.ud.dgid.raw);
    // Only GIDs of this host are reachable (the shm wire); elsewhere, and to
    // a QPN nobody owns, the datagram is lost, as on a network.
    PeerLink* peer = nullptr;
    // A QPN of another registry's range (another user) is reached over the
    // RoCE wire even at a GID of this host.
    // The route's GRH area and whether its destination GID is ours: kept per
    // QP (DatagramGrhCache), so a datagram on the last route asks nothing.
    const GrhTemplate& grh = qp.ud_grh.For(w.ud, qp.ud_gids);
    const bool local = engine.registry().OwnsQpn(w.ud.remote_qpn) && qp.ud_grh.dgid_local();
    if (!multicast && (!local || roce_forced)) {
      // The RoCE wire (transport/roce/roce_datagram.cpp): one packet.
      const roce::DatagramTx r = roce::TransmitDatagram(engine, qp, index);
      if (r == roce::DatagramTx::kBadSge) {
        FailSendHead(engine, qp, IBV_WC_LOC_PROT_ERR);  // -> SQE
        return;
      }
      if (r == roce::DatagramTx::kBlocked) {
        qp.tx_blocked = true;
        engine.NeedService(&qp);
        return;
      }
      ++qp.sq_tx;
      CompleteUnacknowledged(qp);
      continue;
    }
    if (!multicast && local) peer = DatagramPeer(engine, qp, w.ud.remote_qpn);
    if (peer || multicast) {
      // The whole datagram (at most one MTU) is copied into the ring, so
      // the send buffer is free the moment it completes.
      OutgoingDatagram dg;
      if (!BuildDatagram(engine, qp, index, w, grh, &dg)) {
        FailSendHead(engine, qp, IBV_WC_LOC_PROT_ERR);  // -> SQE
        return;
      }
      if (multicast) {
        TransmitMulticast(engine, qp, w.ud.dgid, dg);
      } else if (!SendDatagram(engine, *peer, dg) && engine.registry().LivePid(peer->ref) != 0) {
        // A full ring holds the datagram back (back-pressure, as a NIC's
        // flow control would), unless its owner is dead: then it is lost.
        qp.tx_blocked = true;
        engine.NeedService(&qp);
        return;
      }
      qp.next_psn = PsnAdd(qp.next_psn, 1);
    }
    ++qp.sq_tx;
    CompleteUnacknowledged(qp);
  }
  qp.tx_blocked = false;
}

namespace {

bool ReceivesDatagrams(const Qp& qp) {
  return qp.type == IBV_QPT_UD && (qp.state == IBV_QPS_RTR || qp.state == IBV_QPS_RTS ||
                                   qp.state == IBV_QPS_SQD || qp.state == IBV_QPS_SQE);
}

// Writes a staged datagram into the receive WQE's buffers. A background
// drain (Engine::DrainingInBackground) may meet buffers the application
// unmapped while they were still posted and registered: UCX's ud_verbs
// frees its receive buffers before it destroys the QP, and its
// registration cache deregisters them only later. An HCA writes into the
// pages the registration pinned and nothing happens; here the write goes
// through the application's mapping, so a background drain copies with
// process_vm_writev into its own process, which reports an unmapped buffer
// (EFAULT) instead of faulting: the datagram is lost, as into pinned pages
// nobody maps any more. The application's own verbs calls use memcpy.
void WriteReceiveBuffers(const iovec* local, int nlocal, uint8_t* data, uint64_t len) {
  static std::atomic<bool> self_write_refused{false};  // seccomp: memcpy then
  if (Engine::DrainingInBackground() && !self_write_refused.load(std::memory_order_relaxed)) {
    const iovec from{data, len};
    if (process_vm_writev(getpid(), &from, 1, local, static_cast<unsigned long>(nlocal), 0) >= 0 ||
        errno == EFAULT)
      return;
    self_write_refused.store(true, std::memory_order_relaxed);
  }
  uint64_t off = 0;
  for (int i = 0; i < nlocal; ++i) {
    memcpy(local[i].iov_base, data + off, local[i].iov_len);
    off += local[i].iov_len;
  }
}

// Places a datagram (either wire) into the next receive WQE:
// `write_area(local, nlocal, need)` writes its GRH area and payload (`need`
// bytes) into the WQE's buffers; `sl` is what the completion reports.
template <typename WriteArea>
void PlaceDatagram(Engine& engine, Qp& qp, const wire::RecordHeader& req, uint32_t qkey, uint8_t sl,
                   WriteArea&& write_area) {
  if (qkey != qp.attr.qkey) return;  // Q_Key violation: dropped
  RecvSlot slot;
  if (!AcquireRecv(qp, &slot)) return;  // no RNR for UD: dropped
  const uint64_t need = kGrhBytes + req.total_len;
  if (RecvCapacity(slot) < need) {
    // Too small for GRH + payload: dropped, unless the WQE came from an SRQ
    // (it was taken already, so it completes in error).
    if (qp.srq) {
      CompleteDatagram(qp, *slot.wqe, IBV_WC_LOC_LEN_ERR, req, sl);
      ConsumeRecv(qp);
    }
    return;
  }
  iovec local[limits::kMaxSge];
  const int nlocal = ResolveRecv(engine, slot, need, local);
  if (nlocal < 0) {
    CompleteDatagram(qp, *slot.wqe, IBV_WC_LOC_PROT_ERR, req, sl);
    ConsumeRecv(qp);
    EnterError(engine, qp);
    return;
  }
  write_area(local, nlocal, need);
  CompleteDatagram(qp, *slot.wqe, IBV_WC_SUCCESS, req, sl);
  ConsumeRecv(qp);
}

// GRH area + payload is at most 40 bytes + one MTU.
constexpr uint32_t kMaxAreaBytes = kGrhBytes + (128u << limits::kActiveMtu);

// Where the GRH area starts in a kDatagram record: it goes with the payload.
constexpr uint32_t kAreaAt = sizeof(wire::RecordHeader) + offsetof(DatagramHeader, grh);

// The common receive, ahead of PlaceDatagram (as RC's TryReceiveInline): a
// datagram with the QP's Q_Key into a one-SGE WQE of the QP's own receive
// queue that holds GRH area and payload, placed by the application's own
// verbs call. One copy from the ring, the completion written in its slot,
// and no call but the copy. It changes nothing unless it completes the
// datagram: anything else (an SRQ, no WQE, several SGEs, a short buffer, a
// bad lkey, a drain in the background) is left to PlaceDatagram and its
// error handling.
[[gnu::always_inline]] inline bool TryPlaceInline(Engine& engine, Qp& qp,
                                                  const wire::RecordHeader& req,
                                                  const DatagramHeader& d,
                                                  const shm::RecordView& view) {
  if (qp.srq || qp.rq.size() == 0 || d.qkey != qp.attr.qkey) return false;
  const RecvWqe& w = qp.rq.at(qp.rq.tail);
  const ibv_sge& sge = *qp.rq.sge_of(qp.rq.tail);
  const uint32_t need = kGrhBytes + req.total_len;
  if (w.num_sge != 1 || sge.length < need) return false;
  uint64_t host = 0;
  if (engine.mr_table().LookupLocal(sge.lkey, sge.addr, sge.length, qp.pd->id,
                                    IBV_ACCESS_LOCAL_WRITE, &host) != 0 ||
      Engine::DrainingInBackground())
    return false;
  view.CopyOutToBuffer(kAreaAt, reinterpret_cast<void*>(host), need);
  const uint64_t wr_id = w.wr_id;
  const uint32_t qp_num = qp.qpx.qp_base.qp_num;
  const uint8_t sl = d.sl;
  qp.recv_cq->Emplace((req.flags & wire::kFlagSolicited) != 0, [&](ibv_wc& wc) {
    wc = ibv_wc{};
    wc.wr_id = wr_id;
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = IBV_WC_RECV;
    wc.byte_len = need;
    wc.qp_num = qp_num;
    wc.src_qp = req.src_qpn;
    wc.wc_flags = IBV_WC_GRH;
    wc.sl = sl;
    if (req.flags & wire::kFlagHasImm) {
      wc.wc_flags |= IBV_WC_WITH_IMM;
      wc.imm_data = req.imm;
    }
  });
  ++qp.rq.tail;
  return true;
}

}  // namespace

void OnDatagram(Engine& engine, Qp& qp, const wire::RecordHeader& req,
                const shm::RecordView& view) {
  if (!ReceivesDatagrams(qp)) return;
  DatagramHeader d;
  if (req.mode != wire::PayloadMode::kInline || req.payload_len < sizeof d ||
      req.payload_len - sizeof d != req.total_len || req.total_len > (128u << limits::kActiveMtu) ||
      view.size() < sizeof req + req.payload_len)
    return;                                            // malformed
  view.CopyOut(sizeof req, &d, kAreaAt - sizeof req);  // the fields before the GRH area
  if (TryPlaceInline(engine, qp, req, d, view)) return;
  PlaceDatagram(engine, qp, req, d.qkey, d.sl, [&](const iovec* local, int nlocal, uint64_t need) {
    if (!Engine::DrainingInBackground()) {
      // Straight from the ring into the application's buffers.
      ScatterFromRecord(view, kAreaAt, local, nlocal, 0, need);
      return;
    }
    uint8_t area[kMaxAreaBytes];
    view.CopyOut(kAreaAt, area, static_cast<uint32_t>(need));
    WriteReceiveBuffers(local, nlocal, area, need);
  });
}

void OnRoceDatagram(Engine& engine, Qp& qp, const RoceDatagramIn& in) {
  if (!ReceivesDatagrams(qp) || in.payload.size() > (128u << limits::kActiveMtu)) return;
  wire::RecordHeader req{};
  req.type = wire::RecordType::kDatagram;
  req.flags = static_cast<uint8_t>((in.solicited ? wire::kFlagSolicited : 0) |
                                   (in.has_imm ? wire::kFlagHasImm : 0));
  req.src_qpn = in.src_qpn;
  req.imm = in.imm_be;
  req.total_len = static_cast<uint32_t>(in.payload.size());
  GrhRoute route{};
  route.sgid = in.sgid;
  route.dgid = in.dgid;
  route.hop_limit = 64;  // the kernel does not tell us the received TTL
  GrhTemplate grh;
  grh.Build(route);
  PlaceDatagram(engine, qp, req, in.qkey, grh.sl(),
                [&](const iovec* local, int nlocal, uint64_t need) {
                  uint8_t area[kMaxAreaBytes];
                  grh.WriteFor(in.has_imm, req.total_len, area);
                  memcpy(area + kGrhBytes, in.payload.data(), in.payload.size());
                  WriteReceiveBuffers(local, nlocal, area, need);
                });
}

}  // namespace softrdma::transport
