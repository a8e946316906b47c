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
#include "transport/engine.h"
#include "transport/recv_source.h"
#include "transport/roce/roce_gsi.h"
#include "transport/roce/roce_qp.h"
#include "transport/sq_drain.h"
#include "transport/transport.h"

namespace softrdma::transport {

namespace {

// Follows the RecordHeader of a kDatagram record; the payload follows it.
struct DatagramHeader {
  uint32_t qkey;
  uint32_t flow_label;
  uint8_t sgid[16];
  uint8_t dgid[16];
  uint8_t traffic_class;
  uint8_t hop_limit;
  uint16_t reserved0;
  uint32_t reserved1;
};
static_assert(sizeof(DatagramHeader) == 48);

constexpr uint32_t kGrhBytes = 40;

bool IsV4Mapped(const uint8_t* gid) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(gid, prefix, sizeof prefix) == 0;
}

// Whether the GRH area holds an IPv4 header (else an IPv6 one).
bool GrhIsIpv4(const DatagramHeader& d) {
  return IsV4Mapped(d.sgid) && IsV4Mapped(d.dgid);
}

uint16_t Ipv4Checksum(const uint8_t* h) {
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += static_cast<uint32_t>(h[i] << 8 | h[i + 1]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// The GRH area as a RoCEv2 NIC fills it (roce-wire.md §4 "GRH layout"): for
// IPv4-mapped GIDs 20 zero bytes and the IPv4 header (valid checksum, so
// that ibv_init_ah_from_wc classifies it as IPv4), else the IPv6 header.
// Lengths are those of the equivalent packet: UDP + BTH + DETH (+ ImmDt) +
// payload padded to 4 + ICRC.
void BuildGrh(const DatagramHeader& d, bool has_imm, uint32_t len, uint8_t* grh) {
  memset(grh, 0, kGrhBytes);
  const uint32_t udp_len = 8 + 12 + 8 + (has_imm ? 4 : 0) + ((len + 3) & ~3u) + 4;
  if (GrhIsIpv4(d)) {
    uint8_t* ip = grh + 20;
    const uint32_t total = 20 + udp_len;
    ip[0] = 0x45;
    ip[1] = d.traffic_class;
    ip[2] = static_cast<uint8_t>(total >> 8);
    ip[3] = static_cast<uint8_t>(total);
    ip[6] = 0x40;  // don't fragment
    ip[8] = d.hop_limit;
    ip[9] = 17;  // UDP
    memcpy(ip + 12, d.sgid + 12, 4);
    memcpy(ip + 16, d.dgid + 12, 4);
    uint16_t sum = Ipv4Checksum(ip);
    ip[10] = static_cast<uint8_t>(sum >> 8);
    ip[11] = static_cast<uint8_t>(sum);
    return;
  }
  grh[0] = static_cast<uint8_t>(0x60 | d.traffic_class >> 4);
  grh[1] = static_cast<uint8_t>((d.traffic_class & 0xf) << 4 | ((d.flow_label >> 16) & 0xf));
  grh[2] = static_cast<uint8_t>(d.flow_label >> 8);
  grh[3] = static_cast<uint8_t>(d.flow_label);
  grh[4] = static_cast<uint8_t>(udp_len >> 8);
  grh[5] = static_cast<uint8_t>(udp_len);
  grh[6] = 17;
  grh[7] = d.hop_limit;
  memcpy(grh + 8, d.sgid, 16);
  memcpy(grh + 24, d.dgid, 16);
}

// The L3 header of the GRH area as a RoCE NIC reports it in the
// completion's `sl` (RoCE carries no SL): mlx5 returns the CQE's packet type
// there, bit 3 = UDP present (RoCE v2), bits 2:0 = 1 (IPv6) or 2 (IPv4).
// Applications built against mlx5 rely on it: UCX 1.13's ud_verbs reads
// `sl & 7` to find the destination address in the GRH area, so a 0 made it
// read an IPv4 header as IPv6 and drop every datagram (ETH_DGID_CHECK).
constexpr uint8_t kSlRoceV2Ipv6 = 0x8 | 0x1;
constexpr uint8_t kSlRoceV2Ipv4 = 0x8 | 0x2;

void CompleteDatagram(Qp& qp, const RecvWqe& w, ibv_wc_status status, const wire::RecordHeader& req,
                      const DatagramHeader& d) {
  ibv_wc wc{};
  wc.wr_id = w.wr_id;
  wc.status = status;
  wc.opcode = IBV_WC_RECV;
  wc.byte_len = req.total_len + kGrhBytes;
  wc.qp_num = qp.qpx.qp_base.qp_num;
  wc.src_qp = req.src_qpn;
  wc.wc_flags = IBV_WC_GRH;
  wc.pkey_index = 0;  // the one P_Key of the port
  wc.sl = GrhIsIpv4(d) ? kSlRoceV2Ipv4 : kSlRoceV2Ipv6;
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

// One datagram ready for a ring: the record header (its dst_qpn set per
// destination), the addresses, and the payload's iovecs after both.
struct OutgoingDatagram {
  wire::RecordHeader h{};
  DatagramHeader d{};
  iovec parts[limits::kMaxSge + 2];
  int nparts = 0;
};

// Builds the datagram of SQ entry `index`. false = a bad local SGE.
bool BuildDatagram(Engine& engine, Qp& qp, uint32_t index, const SendWqe& w,
                   OutgoingDatagram* out) {
  wire::RecordHeader& h = out->h;
  h.type = wire::RecordType::kDatagram;
  h.mode = wire::PayloadMode::kInline;
  h.flags = static_cast<uint8_t>((w.solicited ? wire::kFlagSolicited : 0) |
                                 (w.opcode == IBV_WR_SEND_WITH_IMM ? wire::kFlagHasImm : 0));
  h.src_qpn = qp.qpx.qp_base.qp_num;
  h.dst_qpn = w.ud.remote_qpn;
  h.psn = qp.next_psn;  // UD checks no PSN; numbered for traces only
  h.src_slot = engine.me().slot;
  h.src_gen = engine.me().gen;
  h.imm = w.imm;
  h.total_len = w.total_len;
  h.payload_len = static_cast<uint32_t>(sizeof(DatagramHeader)) + w.total_len;
  DatagramHeader& d = out->d;
  d.qkey = w.ud.remote_qkey;
  d.flow_label = w.ud.flow_label;
  d.traffic_class = w.ud.traffic_class;
  d.hop_limit = w.ud.hop_limit;
  GidEntry src;
  if (qp.ud_gids.At(w.ud.sgid_index, &src)) memcpy(d.sgid, src.gid.raw, 16);
  memcpy(d.dgid, w.ud.dgid.raw, 16);

  out->parts[0] = iovec{&out->h, sizeof out->h};
  out->parts[1] = iovec{&out->d, sizeof out->d};
  int n = 0;
  if (w.is_inline) {
    out->parts[2] = iovec{qp.inline_slot(index), w.total_len};
    n = w.total_len ? 1 : 0;
  } else {
    n = ResolveLocal(engine, qp, index, w, out->parts + 2);
    if (n < 0) return false;
  }
  out->nparts = n + 2;
  return true;
}

// A multicast send: one copy to the owner of every QP attached to the
// group, this QP included unless it blocks its own loopback. A member whose
// ring is full misses the datagram, as a congested switch port drops a
// multicast packet (nothing waits for the slowest member).
void TransmitMulticast(Engine& engine, Qp& qp, OutgoingDatagram& dg) {
  const uint32_t self = qp.gsi_agent ? kGsiQpn : qp.qpx.qp_base.qp_num;
  McastGroups(engine.registry()).ForEachMember(dg.d.dgid, [&](uint32_t qpn) {
    if (qpn == self && qp.block_self_mcast_loopback) return;
    std::shared_ptr<PeerLink> member = engine.ResolveQpn(qpn);
    if (!member) return;
    dg.h.dst_qpn = qpn;
    engine.SendGather(*member, dg.h, dg.parts, dg.nparts);
  });
}

// A datagram to QP1 (the CM's MADs; docs/design.md, "Other hosts"). QP1 is
// nobody's QP (the registry has no owner for it): to another host's address
// (or any, with SOFTRDMA_WIRE=roce) it leaves as a RoCE UD packet; to this
// host's the GSI forwarder hands the MAD to the CM socket of the process it
// is for, as the RoCE receive path does for one from another host. Lost
// (like a dropped packet) when it cannot be delivered. false: a bad SGE.
bool TransmitToGsi(Engine& engine, Qp& qp, uint32_t index, const SendWqe& w) {
  OutgoingDatagram dg;
  if (!BuildDatagram(engine, qp, index, w, &dg)) return false;
  uint8_t payload[128u << limits::kActiveMtu];
  size_t len = 0;
  for (int i = 2; i < dg.nparts && len + dg.parts[i].iov_len <= sizeof payload; ++i) {
    memcpy(payload + len, dg.parts[i].iov_base, dg.parts[i].iov_len);
    len += dg.parts[i].iov_len;
  }
  GsiDatagram out;  // to QP1 at the destination, from our address
  memcpy(out.remote_gid.data(), dg.d.dgid, 16);
  memcpy(out.local_gid.data(), dg.d.sgid, 16);
  out.qkey = dg.d.qkey;
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
    const bool local = engine.registry().OwnsQpn(w.ud.remote_qpn) && qp.ud_gids.IsLocal(w.ud.dgid);
    if (!multicast && (!local || engine.roce_forced())) {
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
      if (!BuildDatagram(engine, qp, index, w, &dg)) {
        FailSendHead(engine, qp, IBV_WC_LOC_PROT_ERR);  // -> SQE
        return;
      }
      if (multicast) {
        TransmitMulticast(engine, qp, dg);
      } else if (!engine.SendGather(*peer, dg.h, dg.parts, dg.nparts) &&
                 engine.registry().LivePid(peer->ref) != 0) {
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

// Places a datagram (either wire) into the next receive WQE behind the GRH
// area: `copy_payload(dst)` writes its req.total_len bytes.
template <typename CopyPayload>
void PlaceDatagram(Engine& engine, Qp& qp, const wire::RecordHeader& req, const DatagramHeader& d,
                   CopyPayload&& copy_payload) {
  if (d.qkey != qp.attr.qkey) return;  // Q_Key violation: dropped
  RecvSlot slot;
  if (!AcquireRecv(qp, &slot)) return;  // no RNR for UD: dropped
  const uint64_t need = kGrhBytes + req.total_len;
  if (RecvCapacity(slot) < need) {
    // Too small for GRH + payload: dropped, unless the WQE came from an SRQ
    // (it was taken already, so it completes in error).
    if (qp.srq) {
      CompleteDatagram(qp, *slot.wqe, IBV_WC_LOC_LEN_ERR, req, d);
      ConsumeRecv(qp);
    }
    return;
  }
  iovec local[limits::kMaxSge];
  const int nlocal = ResolveRecv(engine, slot, need, local);
  if (nlocal < 0) {
    CompleteDatagram(qp, *slot.wqe, IBV_WC_LOC_PROT_ERR, req, d);
    ConsumeRecv(qp);
    EnterError(engine, qp);
    return;
  }
  // GRH + payload is at most 40 bytes + one MTU: stage it and scatter.
  uint8_t buf[kGrhBytes + (128u << limits::kActiveMtu)];
  BuildGrh(d, req.flags & wire::kFlagHasImm, req.total_len, buf);
  copy_payload(buf + kGrhBytes);
  WriteReceiveBuffers(local, nlocal, buf, need);
  CompleteDatagram(qp, *slot.wqe, IBV_WC_SUCCESS, req, d);
  ConsumeRecv(qp);
}

}  // namespace

void OnDatagram(Engine& engine, Qp& qp, const wire::RecordHeader& req,
                const shm::RecordView& view) {
  if (!ReceivesDatagrams(qp)) return;
  DatagramHeader d;
  if (req.mode != wire::PayloadMode::kInline || req.payload_len < sizeof d ||
      req.payload_len - sizeof d != req.total_len || req.total_len > (128u << limits::kActiveMtu) ||
      view.size() < sizeof req + req.payload_len)
    return;  // malformed
  view.CopyOut(sizeof req, &d, sizeof d);
  PlaceDatagram(engine, qp, req, d,
                [&](uint8_t* dst) { view.CopyOut(sizeof req + sizeof d, dst, req.total_len); });
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
  DatagramHeader d{};
  d.qkey = in.qkey;
  d.hop_limit = 64;  // the kernel does not tell us the received TTL
  memcpy(d.sgid, in.sgid.raw, 16);
  memcpy(d.dgid, in.dgid.raw, 16);
  PlaceDatagram(engine, qp, req, d,
                [&](uint8_t* dst) { memcpy(dst, in.payload.data(), in.payload.size()); });
}

}  // namespace softrdma::transport
