// IPv4/IPv6 + UDP framing of RoCEv2 packets (see ip_datagram.h; roce-wire.md
// §1.1-§1.3 for the header values rxe uses).
#include "wire/roce/ip_datagram.h"

#include <algorithm>
#include <cerrno>
#include <string>

#include "util/big_endian.h"

namespace softrdma::roce {
namespace {

constexpr uint8_t kIpProtoUdp = 17;
constexpr uint16_t kIpv4MoreFragments = 0x2000;
constexpr uint16_t kIpv4FragmentOffsetMask = 0x1FFF;

void EncodeIpv4(const NetworkHeaders& net, size_t udp_length, std::span<uint8_t> out) {
  auto header = out.first<kIpv4HeaderSize>();
  header[0] = 0x45;
  header[1] = net.traffic_class;
  StoreBe(header, 2, 2, kIpv4HeaderSize + udp_length);
  StoreBe(header, 4, 2, net.ipv4_identification);
  StoreBe(header, 6, 2, net.ipv4_flags_fragment);
  header[8] = net.hop_limit;
  header[9] = kIpProtoUdp;
  header[10] = header[11] = 0;
  std::copy_n(net.src_gid.begin() + 12, 4, header.begin() + 12);
  std::copy_n(net.dst_gid.begin() + 12, 4, header.begin() + 16);
  StoreBe(header, 10, 2, Ipv4HeaderChecksum(header));
}

void EncodeIpv6(const NetworkHeaders& net, size_t udp_length, std::span<uint8_t> out) {
  StoreBe(out, 0, 4,
          (uint32_t{6} << 28) | (uint32_t{net.traffic_class} << 20) | (net.flow_label & 0xFFFFF));
  StoreBe(out, 4, 2, udp_length);
  out[6] = kIpProtoUdp;
  out[7] = net.hop_limit;
  std::copy(net.src_gid.begin(), net.src_gid.end(), out.begin() + 8);
  std::copy(net.dst_gid.begin(), net.dst_gid.end(), out.begin() + 24);
}

void EncodeUdp(const NetworkHeaders& net, size_t udp_length, std::span<uint8_t> out) {
  StoreBe(out, 0, 2, net.udp_src_port);
  StoreBe(out, 2, 2, net.udp_dst_port);
  StoreBe(out, 4, 2, udp_length);
  StoreBe(out, 6, 2, net.udp_checksum);
}

Status Refuse(int code, std::string why) {
  return Status::Error(code, std::move(why));
}

}  // namespace

uint16_t Ipv4HeaderChecksum(std::span<const uint8_t, kIpv4HeaderSize> header) {
  uint32_t sum = 0;
  for (size_t i = 0; i < kIpv4HeaderSize; i += 2) sum += uint32_t(LoadBe(header, i, 2));
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return uint16_t(~sum);
}

Status EncodeDatagram(const NetworkHeaders& net, const TransportHeaders& headers,
                      std::span<const uint8_t> payload, std::span<uint8_t> out, size_t* written) {
  if (net.ip_version != 4 && net.ip_version != 6) {
    return Refuse(EINVAL, "IP version " + std::to_string(net.ip_version));
  }
  if (net.ip_version == 4 && !(IsIpv4Mapped(net.src_gid) && IsIpv4Mapped(net.dst_gid))) {
    return Refuse(EINVAL, "IPv4 datagram between GIDs that are not IPv4-mapped");
  }
  const size_t front = NetworkHeaderLength(net.ip_version);
  if (out.size() < front) return Refuse(ENOBUFS, "no room for the IP and UDP headers");
  size_t transport_length = 0;
  Status status = EncodePacket(net, headers, payload, out.subspan(front), &transport_length);
  if (!status.ok()) return status;
  const size_t udp_length = kUdpHeaderSize + transport_length;
  if (net.ip_version == 4) {
    EncodeIpv4(net, udp_length, out);
  } else {
    EncodeIpv6(net, udp_length, out);
  }
  EncodeUdp(net, udp_length, out.subspan(front - kUdpHeaderSize));
  *written = front + transport_length;
  return Status::Ok();
}

Status ParseDatagram(std::span<const uint8_t> ip, DatagramView* view) {
  if (ip.empty()) return Refuse(EMSGSIZE, "empty IP packet");
  NetworkHeaders net;
  net.ip_version = ip[0] >> 4;
  size_t ip_header_length = 0;
  size_t ip_payload_length = 0;
  if (net.ip_version == 4) {
    // What is not a RoCEv2 datagram is told apart first (protocol, fragment),
    // so a capture's other traffic is never reported as a broken RoCE packet.
    if (ip.size() < kIpv4HeaderSize) return Refuse(EMSGSIZE, "shorter than an IPv4 header");
    if ((ip[0] & 0xF) != 5) return Refuse(EPROTONOSUPPORT, "IPv4 header with options");
    if (ip[9] != kIpProtoUdp) return Refuse(EPROTONOSUPPORT, "IPv4 protocol is not UDP");
    net.ipv4_flags_fragment = uint16_t(LoadBe(ip, 6, 2));
    if ((net.ipv4_flags_fragment & (kIpv4MoreFragments | kIpv4FragmentOffsetMask)) != 0) {
      return Refuse(EPROTONOSUPPORT, "IPv4 fragment");
    }
    const size_t total = LoadBe(ip, 2, 2);
    if (total > ip.size()) return Refuse(EMSGSIZE, "shorter than its IPv4 total length");
    if (total < kIpv4HeaderSize) return Refuse(EBADMSG, "IPv4 total length below 20");
    if (Ipv4HeaderChecksum(ip.first<kIpv4HeaderSize>()) != 0) {
      return Refuse(EBADMSG, "bad IPv4 header checksum");
    }
    net.traffic_class = ip[1];
    net.ipv4_identification = uint16_t(LoadBe(ip, 4, 2));
    net.hop_limit = ip[8];
    net.src_gid = Ipv4MappedGid(ip.subspan(12).first<4>());
    net.dst_gid = Ipv4MappedGid(ip.subspan(16).first<4>());
    ip_header_length = kIpv4HeaderSize;
    ip_payload_length = total - kIpv4HeaderSize;
  } else if (net.ip_version == 6) {
    if (ip.size() < kIpv6HeaderSize) return Refuse(EMSGSIZE, "shorter than an IPv6 header");
    if (ip[6] != kIpProtoUdp) return Refuse(EPROTONOSUPPORT, "IPv6 next header is not UDP");
    const uint32_t first_word = uint32_t(LoadBe(ip, 0, 4));
    net.traffic_class = uint8_t(first_word >> 20);
    net.flow_label = first_word & 0xFFFFF;
    ip_payload_length = LoadBe(ip, 4, 2);
    if (kIpv6HeaderSize + ip_payload_length > ip.size()) {
      return Refuse(EMSGSIZE, "shorter than its IPv6 payload length");
    }
    net.hop_limit = ip[7];
    std::copy_n(ip.begin() + 8, 16, net.src_gid.begin());
    std::copy_n(ip.begin() + 24, 16, net.dst_gid.begin());
    ip_header_length = kIpv6HeaderSize;
  } else {
    return Refuse(EPROTONOSUPPORT, "IP version " + std::to_string(net.ip_version));
  }
  if (ip_payload_length < kUdpHeaderSize) return Refuse(EMSGSIZE, "shorter than a UDP header");
  const auto udp = ip.subspan(ip_header_length, ip_payload_length);
  net.udp_src_port = uint16_t(LoadBe(udp, 0, 2));
  net.udp_dst_port = uint16_t(LoadBe(udp, 2, 2));
  const size_t udp_length = LoadBe(udp, 4, 2);
  net.udp_checksum = uint16_t(LoadBe(udp, 6, 2));
  if (net.udp_dst_port != kRoceUdpPort) {
    return Refuse(EPROTONOSUPPORT, "UDP port " + std::to_string(net.udp_dst_port));
  }
  if (udp_length != ip_payload_length) {
    return Refuse(EBADMSG, "UDP length " + std::to_string(udp_length) + " in an IP payload of " +
                               std::to_string(ip_payload_length) + " bytes");
  }
  view->net = net;
  view->udp_payload = udp.subspan(kUdpHeaderSize);
  return Status::Ok();
}

}  // namespace softrdma::roce
