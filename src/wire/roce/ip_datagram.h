// Whole RoCEv2 datagrams: IPv4 or IPv6 header, UDP header, transport packet
// (roce-wire.md §1). The transport over UDP sockets never builds these (the
// kernel writes the IP and UDP headers); captures, the ICRC checking tool and
// the tests do.
//
// ParseDatagram accepts what rxe's receive path accepts (§1, §6) and refuses,
// with the errno in the Status:
//   EMSGSIZE         shorter than the IP header, or than the lengths it states
//   EPROTONOSUPPORT  not IPv4/IPv6, IPv4 options (IHL != 5), an IPv4 fragment,
//                    IPv6 extension headers, not UDP, UDP destination port not 4791
//   EBADMSG          a bad IPv4 header checksum, a UDP length that disagrees with
//                    the IP length, or one shorter than the UDP header
// The UDP checksum is not checked: RoCE senders transmit 0 and the ICRC
// covers the datagram (a kernel socket drops bad nonzero checksums itself).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "util/status.h"
#include "wire/roce/icrc.h"
#include "wire/roce/packet.h"

namespace softrdma::roce {

inline constexpr size_t kIpv4HeaderSize = 20;
inline constexpr size_t kIpv6HeaderSize = 40;
inline constexpr size_t kUdpHeaderSize = 8;

// IP + UDP header bytes in front of the transport packet.
constexpr size_t NetworkHeaderLength(uint8_t ip_version) {
  return (ip_version == 4 ? kIpv4HeaderSize : kIpv6HeaderSize) + kUdpHeaderSize;
}

// The datagram carrying a packet (EncodePacket) with `net`'s IP and UDP
// fields; the IPv4 header checksum is computed. EINVAL for an IP version
// other than 4/6 or an IPv4 packet whose GIDs are not IPv4-mapped; otherwise
// as EncodePacket.
Status EncodeDatagram(const NetworkHeaders& net, const TransportHeaders& headers,
                      std::span<const uint8_t> payload, std::span<uint8_t> out, size_t* written);

struct DatagramView {
  NetworkHeaders net;
  std::span<const uint8_t> udp_payload;  // the transport packet, ICRC included
};

// Reads the IP and UDP headers of `ip_packet` (which may be followed by link
// padding: the IP length decides). The transport packet is then parsed with
// ParsePacket(view.net, view.udp_payload, ...).
Status ParseDatagram(std::span<const uint8_t> ip_packet, DatagramView* view);

// The Internet checksum of an IPv4 header whose checksum field holds 0 (or,
// on receive, 0 when the header is intact).
uint16_t Ipv4HeaderChecksum(std::span<const uint8_t, kIpv4HeaderSize> header);

}  // namespace softrdma::roce
