#include "transport/roce/roce_gsi.h"

#include <atomic>
#include <cstring>

#include "transport/roce/roce_packets.h"

namespace softrdma::transport::roce {
namespace {

namespace sr = softrdma::roce;

constexpr uint8_t kUdSendOnly = 0x64;

std::atomic<uint32_t>& GsiPsn() {
  static std::atomic<uint32_t> psn{0};  // UD checks no PSN; numbered for captures
  return psn;
}

}  // namespace

bool SendGsiPacket(Engine& engine, const GsiDatagram& datagram, uint32_t src_qpn) {
  if (!engine.packet_port()) return false;
  sr::NetworkHeaders net;
  std::memcpy(net.src_gid.data(), datagram.local_gid.data(), 16);
  std::memcpy(net.dst_gid.data(), datagram.remote_gid.data(), 16);
  net.ip_version = sr::IsIpv4Mapped(net.src_gid) && sr::IsIpv4Mapped(net.dst_gid) ? 4 : 6;
  net.udp_src_port = SourcePortFor(engine, net.src_gid);
  sr::IpEndpoint to;
  std::memcpy(to.addr.s6_addr, datagram.remote_gid.data(), 16);
  to.port = sr::kRoceUdpPort;
  TransportHeaders h;
  h.bth.opcode = kUdSendOnly;
  h.bth.pkey = datagram.pkey;
  h.bth.dest_qp = kGsiQpn;
  h.bth.psn = GsiPsn().fetch_add(1, std::memory_order_relaxed) & sr::kPsnMask;
  h.deth.qkey = datagram.qkey;
  h.deth.src_qp = src_qpn & sr::kPsnMask;
  iovec payload{const_cast<uint8_t*>(datagram.payload.data()), datagram.payload.size()};
  if (!SendPacketTo(engine, net, to, h, &payload, 1, datagram.payload.size())) return false;
  engine.ActivateRoce();  // the answer comes over the same wire
  return true;
}

void OnGsiPacket(Engine& engine, const sr::PacketView& view, const sr::NetworkHeaders& net) {
  GsiDatagram datagram;
  std::memcpy(datagram.remote_gid.data(), net.src_gid.data(), 16);
  std::memcpy(datagram.local_gid.data(), net.dst_gid.data(), 16);
  datagram.remote_qpn = view.headers.deth.src_qp;
  datagram.pkey = view.headers.bth.pkey;
  datagram.qkey = view.headers.deth.qkey;
  datagram.payload = view.payload;
  // The forwarder's own answer ("nobody listens") goes back to the
  // requester's QP1 from QP1.
  ForwardGsiDatagram(
      datagram, [&engine](const GsiDatagram& answer) { SendGsiPacket(engine, answer, kGsiQpn); });
}

}  // namespace softrdma::transport::roce
