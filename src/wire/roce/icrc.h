// The RoCEv2 Invariant CRC (roce-wire.md §7): CRC-32 (the Ethernet/zlib one)
// over 8 bytes of 0xFF, then the IP header, UDP header and transport packet
// (BTH .. pad) with the variant fields masked to all ones: IPv4 TOS, TTL and
// header checksum; IPv6 traffic class, flow label and hop limit; the UDP
// checksum; BTH byte 4 (FECN, BECN, Resv6a). The IPv4 identification is
// covered, so the sender must know the ID the datagram will carry.
//
// NetworkHeaders holds the IP and UDP fields of one datagram; the ICRC is
// computed from them and the transport bytes without building the datagram,
// so a transport that hands the kernel only the UDP payload can still compute
// it, and over a scatter list (header buffer, payload pieces, pad) with no
// copy.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "wire/roce/headers.h"

namespace softrdma::roce {

using Gid = std::array<uint8_t, 16>;

// The IPv4-mapped GID ::ffff:a.b.c.d (roce-wire.md §1.5) of an address given
// as its four bytes in network order.
Gid Ipv4MappedGid(std::span<const uint8_t, 4> address);
// Inline: asked of every packet's addresses, sent and received.
inline bool IsIpv4Mapped(const Gid& gid) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  return memcmp(gid.data(), kPrefix, sizeof kPrefix) == 0;
}

// The IP and UDP header fields of a RoCEv2 datagram. For IPv4 the addresses
// are IPv4-mapped GIDs. The masked fields (traffic_class, hop_limit,
// flow_label, udp_checksum) do not change the ICRC; they matter only when a
// whole datagram is built (ip_datagram.h).
struct NetworkHeaders {
  uint8_t ip_version = 4;  // 4 or 6 (ComputeIcrc takes anything but 4 as 6)
  Gid src_gid{};
  Gid dst_gid{};
  uint16_t ipv4_identification = 0;
  uint16_t ipv4_flags_fragment = 0x4000;  // DF, offset 0: RoCE is never fragmented
  uint8_t traffic_class = 0;              // IPv4 TOS / IPv6 traffic class
  uint8_t hop_limit = 64;                 // IPv4 TTL / IPv6 hop limit
  uint32_t flow_label = 0;                // IPv6 only; rxe sends 0
  uint16_t udp_src_port = 0xC000;
  uint16_t udp_dst_port = kRoceUdpPort;
  uint16_t udp_checksum = 0;  // rxe and NICs send 0 (IPv6 too)
  bool operator==(const NetworkHeaders&) const = default;
};

// The CRC register (zlib convention: already inverted) after the 8 bytes of
// 0xFF that stand in for the IB LRH. It equals ~0xDEBB20E3, rxe's seed.
inline constexpr uint32_t kIcrcAfterLrhPrefix = 0x2144DF1C;

// ICRC of the transport packet whose bytes (BTH through pad, without the
// ICRC) are the concatenation of `pieces`, sent inside `net`. The first
// piece(s) must hold the whole BTH (byte 4 is masked wherever it falls).
uint32_t ComputeIcrc(const NetworkHeaders& net, std::span<const std::span<const uint8_t>> pieces);
uint32_t ComputeIcrc(const NetworkHeaders& net, std::span<const uint8_t> transport);

// IPv4 identifications and the ICRC. A UDP socket neither shows the ID of a
// datagram it receives nor lets the sender choose it, and UDP GSO numbers the
// IDs of one send's segments 0, 1, 2, ... (one datagram alone: 0, with DF on
// an unconnected socket). The CRC is linear, so the ICRC of a datagram with
// ID `id` is its ICRC with ID 0 XOR a value that depends only on `id` and the
// length after the ID: a sender fixes the ICRCs of GSO segments with it, and
// a receiver recovers any ID from the difference with one CRC pass over the
// packet and one multiplication mod P.
inline constexpr uint16_t kIpv4IdSearch = 64;  // the kernel's UDP GSO: at least 64 segments
// ICRC(ID id) ^ ICRC(ID 0) of an IPv4 datagram whose transport packet (BTH
// .. pad, without the ICRC) is `transport_length` bytes.
uint32_t Ipv4IdIcrcDelta(uint16_t id, size_t transport_length);
// The ID (1..65535) whose delta is `delta`, or -1 when no ID has it (a
// corrupted packet: 2^32 deltas, 2^16 of them IDs'). O(1): the delta times
// x^-(32 + 8n) mod P is the ID's polynomial (docs/design.md).
int FindIpv4IdForIcrcDelta(uint32_t delta, size_t transport_length);

// The ICRC travels least-significant byte first (CRC 0xE26850D9 is sent as
// d9 50 68 e2). Inline: once per packet sent and received.
inline void StoreIcrc(uint32_t icrc, std::span<uint8_t, kIcrcSize> out) {
  for (size_t i = 0; i < kIcrcSize; ++i) out[i] = uint8_t(icrc >> (8 * i));
}
inline uint32_t LoadIcrc(std::span<const uint8_t, kIcrcSize> in) {
  return uint32_t(in[0]) | uint32_t(in[1]) << 8 | uint32_t(in[2]) << 16 | uint32_t(in[3]) << 24;
}

}  // namespace softrdma::roce
