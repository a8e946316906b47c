// The RoCE wire of a QP: choosing it, attaching a QP to it, sending one
// packet, and checking a received one before its QP's roles see it.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/device.h"
#include "transport/engine.h"
#include "transport/roce/roce_gsi.h"
#include "transport/roce/roce_packets.h"
#include "transport/roce/roce_qp.h"
#include "transport/transport.h"
#include "util/log.h"
#include "wire/roce/udp_port.h"

namespace softrdma::transport::roce {

namespace sr = softrdma::roce;

Counters& GetCounters() {
  static Counters counters;
  return counters;
}

std::string FormatCounters() {
  const Counters& c = GetCounters();
  const std::pair<const char*, const std::atomic<uint64_t>*> fields[] = {
      {"tx_packets", &c.tx_packets},
      {"rx_packets", &c.rx_packets},
      {"retransmits", &c.retransmits},
      {"timeouts", &c.timeouts},
      {"tail_probes", &c.tail_probes},
      {"timeouts_not_counted", &c.timeouts_not_counted},
      {"seq_naks_sent", &c.seq_naks_sent},
      {"seq_naks_repeated", &c.seq_naks_repeated},
      {"seq_naks_received", &c.seq_naks_received},
      {"seq_naks_stale", &c.seq_naks_stale},
      {"rnr_naks_sent", &c.rnr_naks_sent},
      {"duplicates", &c.duplicates},
      {"drop_psn_window", &c.drop_psn_window},
      {"drop_unsolicited_response", &c.drop_unsolicited_response},
      {"drop_short", &c.drop_short},
      {"drop_bad_icrc", &c.drop_bad_icrc},
      {"drop_unknown_opcode", &c.drop_unknown_opcode},
      {"drop_bad_header", &c.drop_bad_header},
      {"drop_no_qp", &c.drop_no_qp},
      {"drop_wrong_qp", &c.drop_wrong_qp},
      {"send_refused", &c.send_refused},
  };
  std::string out;
  for (const auto& [name, value] : fields) {
    if (!out.empty()) out += ' ';
    out += name;
    out += '=';
    out += std::to_string(value->load(std::memory_order_relaxed));
  }
  return out;
}

bool WireForcedToRoce() {
  static const bool forced = [] {
    const char* v = getenv("SOFTRDMA_WIRE");
    return v && strcmp(v, "roce") == 0;
  }();
  return forced;
}

namespace {

sr::Gid ToGid(const ibv_gid& g) {
  sr::Gid out;
  memcpy(out.data(), g.raw, 16);
  return out;
}

bool IsZero(const ibv_gid& g) {
  static const ibv_gid zero{};
  return memcmp(g.raw, zero.raw, 16) == 0;
}

in6_addr ToAddr(const sr::Gid& g) {
  in6_addr a;
  memcpy(a.s6_addr, g.data(), 16);
  return a;
}

}  // namespace

bool Attach(Engine& engine, Qp& qp) {
  if (qp.type != IBV_QPT_RC && qp.type != IBV_QPT_UC) return false;
  if (!engine.packet_port()) return false;
  auto rq = std::unique_ptr<RoceQp, void (*)(RoceQp*)>(new RoceQp, DestroyRoceQp);
  const ibv_global_route& grh = qp.attr.ah_attr.grh;
  GidEntry source;
  if (!Device::Get().GidAt(grh.sgid_index, &source) && !Device::Get().GidAt(0, &source)) {
    SOFTRDMA_LOG(kWarn, "QP %u: no source GID for the RoCE wire", qp.qpx.qp_base.qp_num);
    return false;
  }
  // A QP addressed by LID only (no GRH) has no destination address: on a
  // RoCE NIC it could not connect either. Here it reaches this host, so that
  // programs that do not pass a GID run over the wire with SOFTRDMA_WIRE=roce.
  const ibv_gid dest = IsZero(grh.dgid) ? source.gid : grh.dgid;
  rq->net.src_gid = ToGid(source.gid);
  rq->net.dst_gid = ToGid(dest);
  rq->net.ip_version =
      sr::IsIpv4Mapped(rq->net.src_gid) && sr::IsIpv4Mapped(rq->net.dst_gid) ? 4 : 6;
  rq->net.ipv4_identification = 0;  // the port sends with DF and no connect(): ID 0
  rq->net.udp_src_port = SourcePortFor(engine, rq->net.src_gid);
  rq->to.addr = ToAddr(rq->net.dst_gid);
  rq->to.port = sr::kRoceUdpPort;
  const uint32_t mtu_code = qp.attr.path_mtu;
  rq->mtu = mtu_code >= IBV_MTU_256 && mtu_code <= IBV_MTU_4096 ? 128u << mtu_code : 1024u;
  // Never larger than the source address's interface carries (rxe: the
  // smaller of path_mtu and the port's MTU): a path_mtu of 4096 over a
  // 1500-byte link would send datagrams the kernel refuses (EMSGSIZE). The
  // peer on the same link makes the same choice.
  const uint32_t link_mtu =
      sr::RoceMtuForInterfaceMtu(sr::InterfaceMtuOfAddress(ToAddr(rq->net.src_gid)));
  if (link_mtu >= 256 && link_mtu < rq->mtu) {
    SOFTRDMA_LOG(kInfo, "QP %u: path MTU %u, %u on the RoCE wire (the interface's)",
                 qp.qpx.qp_base.qp_num, rq->mtu, link_mtu);
    rq->mtu = link_mtu;
  }
  qp.roce = std::move(rq);
  return true;
}

void Detach(Qp& qp) {
  qp.roce.reset();
}

void OnError(Engine& engine, Qp& qp) {
  if (!qp.roce) return;
  qp.roce->in_message = InMessage::kNone;
  SendOwedAck(engine, qp);
  qp.roce->tx_packet = 0;
  qp.roce->rd_atomic_out = 0;
}

bool SendPacket(Engine& engine, const RoceQp& rq, const TransportHeaders& h, const iovec* payload,
                int npayload, size_t payload_length) {
  return SendPacketTo(engine, rq.net, rq.to, h, payload, npayload, payload_length);
}

uint16_t SourcePortFor(Engine& engine, const sr::Gid& src) {
  PacketPort* port = engine.packet_port();
  return port ? port->SourcePort(ToAddr(src)) : sr::kRoceUdpPort;
}

bool SendPacketTo(Engine& engine, const NetworkHeaders& net, const IpEndpoint& to,
                  const TransportHeaders& h, const iovec* payload, int npayload,
                  size_t payload_length) {
  PacketPort* port = engine.packet_port();
  if (!port) return false;
  alignas(8) uint8_t buf[sr::kMaxTransportHeaderLength + sr::kMaxPayload + 3 + sr::kIcrcSize];
  size_t header_length = 0;
  Status s = sr::EncodeTransportHeaders(h, payload_length, buf, &header_length);
  if (!s.ok()) {
    SOFTRDMA_LOG(kWarn, "RoCE: cannot encode a packet: %s", s.message().c_str());
    return false;
  }
  size_t at = header_length;
  for (int i = 0; i < npayload; ++i) {
    memcpy(buf + at, payload[i].iov_base, payload[i].iov_len);
    at += payload[i].iov_len;
  }
  const uint8_t pad = sr::PadCount(payload_length);
  memset(buf + at, 0, pad);
  at += pad;
  const uint32_t icrc = sr::ComputeIcrc(net, std::span<const uint8_t>(buf, at));
  sr::StoreIcrc(icrc, std::span<uint8_t, sr::kIcrcSize>(buf + at, sr::kIcrcSize));
  at += sr::kIcrcSize;
  sr::OutDatagram d;
  d.to = to;
  d.from = ToAddr(net.src_gid);
  d.src_port = net.udp_src_port;
  d.parts[0] = iovec{buf, at};
  d.nparts = 1;
  Counters& c = GetCounters();
  const int sent = port->Send(&d, 1);
  if (sent == 1) {
    c.tx_packets.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  if (sent < 0) {
    CountSendError(-sent, at);
    return true;  // lost, as on a network
  }
  c.send_refused.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void CountSendError(int error, size_t bytes) {
  GetCounters().send_errors.fetch_add(1, std::memory_order_relaxed);
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    SOFTRDMA_LOG(kWarn, "RoCE: a datagram of %zu bytes cannot be sent (%s): lost%s", bytes,
                 strerror(error),
                 error == EMSGSIZE ? " (longer than its interface carries: the MTU)" : "");
}

namespace {

void CountRefusal(int code) {
  SOFTRDMA_LOG(kDebug, "RoCE: datagram refused by the codec: %s", strerror(code));
  Counters& c = GetCounters();
  switch (code) {
    case EMSGSIZE:
      c.drop_short.fetch_add(1, std::memory_order_relaxed);
      break;
    case EOPNOTSUPP:
      c.drop_unknown_opcode.fetch_add(1, std::memory_order_relaxed);
      break;
    case EILSEQ:
      c.drop_bad_icrc.fetch_add(1, std::memory_order_relaxed);
      break;
    default:  // EPROTONOSUPPORT (TVer), EBADMSG (pad, payload)
      c.drop_bad_header.fetch_add(1, std::memory_order_relaxed);
      break;
  }
}

bool ServiceMatches(sr::TransportService service, ibv_qp_type type) {
  return (service == sr::TransportService::kRc && type == IBV_QPT_RC) ||
         (service == sr::TransportService::kUc && type == IBV_QPT_UC);
}

}  // namespace

void OnDatagram(Engine& engine, const InDatagram& datagram, std::vector<Qp*>* acks) {
  Counters& c = GetCounters();
  c.rx_packets.fetch_add(1, std::memory_order_relaxed);
  const std::span<const uint8_t> bytes(datagram.data, datagram.len);
  sr::PacketView view;
  Status s = sr::ParseTransport(bytes, &view);
  if (!s.ok()) return CountRefusal(s.code());
  // The IP header is the kernel's: we check the ICRC over the header the
  // sender's kernel built from what we know of it (addresses, UDP ports,
  // lengths; DF set) and, not knowing the IPv4 identification, any of the
  // first 64 (UDP GSO numbers a send's segments 0, 1, 2...; docs/design.md).
  sr::NetworkHeaders net;
  memcpy(net.src_gid.data(), datagram.from.addr.s6_addr, 16);
  memcpy(net.dst_gid.data(), datagram.local.s6_addr, 16);
  net.ip_version = sr::IsIpv4Mapped(net.src_gid) && sr::IsIpv4Mapped(net.dst_gid) ? 4 : 6;
  net.udp_src_port = datagram.from.port ? datagram.from.port : sr::kRoceUdpPort;
  s = sr::VerifyIcrcAnyIpv4Id(net, bytes, datagram.gro_segment);
  if (!s.ok()) return CountRefusal(s.code());
  const sr::TransportService service = view.info->service;
  if (service == sr::TransportService::kUd && view.headers.bth.dest_qp == kGsiQpn) {
    c.rx_gsi.fetch_add(1, std::memory_order_relaxed);
    return OnGsiPacket(engine, view, net);  // the CM's MADs: QP1 is nobody's QP
  }
  if (service == sr::TransportService::kUd) return OnUdPacket(engine, datagram, view);
  if (service != sr::TransportService::kRc && service != sr::TransportService::kUc) {
    c.drop_unknown_opcode.fetch_add(1, std::memory_order_relaxed);  // RD, CNP
    return;
  }
  Qp* qp = engine.LocalQp(view.headers.bth.dest_qp);
  if (!qp) {
    SOFTRDMA_LOG(kDebug, "RoCE: opcode 0x%02x for QP %u, which is not ours: dropped",
                 view.headers.bth.opcode, view.headers.bth.dest_qp);
    c.drop_no_qp.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::lock_guard<SpinLock> lock(qp->lock);
  RoceQp* rq = qp->roce.get();
  if (!rq) {
    c.drop_no_qp.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // An RC/UC QP talks to its peer only: the packet must come from the
  // peer's address (RC/UC packets carry no source QP number).
  if (!ServiceMatches(service, qp->type) ||
      memcmp(datagram.from.addr.s6_addr, rq->to.addr.s6_addr, 16) != 0) {
    SOFTRDMA_LOG(kDebug, "RoCE: opcode 0x%02x for QP %u from another sender or service: dropped",
                 view.headers.bth.opcode, view.headers.bth.dest_qp);
    c.drop_wrong_qp.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (!sr::CheckPayloadForPathMtu(*view.info, view.payload.size(), rq->mtu).ok()) {
    SOFTRDMA_LOG(kDebug, "RoCE: %s with %zu payload bytes at path MTU %u: dropped", view.info->name,
                 view.payload.size(), rq->mtu);
    c.drop_bad_header.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  PacketIn in{view.info, view.headers, view.payload};
  const bool owed = rq->ack_due;
  if (view.info->is_request)
    OnRequestPacket(engine, *qp, in);
  else
    OnResponsePacket(engine, *qp, in);
  // One ACK per burst: the receive loop sends it after the batch.
  if (qp->roce && qp->roce->ack_due && !owed) acks->push_back(qp);
}

}  // namespace softrdma::transport::roce

namespace softrdma {
void DestroyRoceQp(transport::roce::RoceQp* rq) {
  delete rq;
}
}  // namespace softrdma
