// Encoding and parsing of one RoCEv2 transport packet: the UDP payload
// BTH | extension headers | payload | pad | ICRC (roce-wire.md §1, §5, §7).
// Which headers an opcode carries comes from the opcode table; the ICRC from
// icrc.h. Whole IP/UDP datagrams (captures, tests) are in ip_datagram.h.
//
// Parsing never copies the payload: the view points into the caller's bytes
// and is valid as long as they are. It refuses, with the errno in the
// returned Status (a distinct one per reason, so a receiver can count drops
// by reason; docs/design.md "RoCEv2 wire: packet codec"):
//   EMSGSIZE         shorter than the BTH, or than the opcode's headers + pad + ICRC
//   EOPNOTSUPP       opcode not in the table
//   EPROTONOSUPPORT  BTH transport version (TVer) not 0
//   EBADMSG          pad count that does not make the packet a multiple of 4 bytes,
//                    or a payload the opcode does not allow (roce-wire.md §5)
//   EILSEQ           ICRC mismatch (ParsePacket, VerifyIcrc)
// Checks that need a QP (destination QPN, P_Key, Q_Key, PSN window, the path
// MTU) are the transport's; CheckPayloadForPathMtu does the last one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "util/status.h"
#include "wire/roce/headers.h"
#include "wire/roce/icrc.h"
#include "wire/roce/opcode_table.h"

namespace softrdma::roce {

// The largest payload of one packet: the largest InfiniBand MTU.
inline constexpr size_t kMaxPayload = 4096;
// The longest BTH + extension headers of any opcode (RD CmpSwap/FetchAdd).
inline constexpr size_t kMaxTransportHeaderLength = 52;

// Every header a packet may carry. An opcode uses the BTH and the ones its
// table row names; the others are ignored by the encoder and left at their
// defaults by the parser.
struct TransportHeaders {
  Bth bth;
  Rdeth rdeth;
  Deth deth;
  Feth feth;
  Reth reth;
  AtomicEth atomic_eth;
  uint32_t imm_data = 0;         // ImmDt, as the big-endian word reads
  uint32_t invalidate_rkey = 0;  // IETH
  Aeth aeth;
  AtomicAckEth atomic_ack;
  bool operator==(const TransportHeaders&) const = default;
};

struct PacketView {
  const OpcodeInfo* info = nullptr;
  TransportHeaders headers;
  std::span<const uint8_t> payload;  // inside the parsed bytes, pad excluded
  uint32_t icrc = 0;                 // as received (the CRC value, see LoadIcrc)
};

// Pad bytes after a payload of this length (roce-wire.md §5).
constexpr uint8_t PadCount(size_t payload_length) {
  return uint8_t((4 - payload_length % 4) % 4);
}

// Bytes of the transport packet, ICRC included, for an opcode and payload.
size_t PacketLength(const OpcodeInfo& info, size_t payload_length);

// Writes the BTH and the opcode's extension headers (BTH PadCnt derived from
// payload_length, TVer 0, every other field as given; the CNP's reserved
// bytes zero) and sets *written to the opcode's header length. EINVAL: the
// opcode is unknown or does not allow this payload length; ENOBUFS: `out` is
// too small. The transport sends these bytes, the payload, PadCount() zero
// bytes and the ICRC (ComputeIcrc over the same pieces).
Status EncodeTransportHeaders(const TransportHeaders& headers, size_t payload_length,
                              std::span<uint8_t> out, size_t* written);

// The whole transport packet, ICRC included, into `out` (PacketLength bytes).
Status EncodePacket(const NetworkHeaders& net, const TransportHeaders& headers,
                    std::span<const uint8_t> payload, std::span<uint8_t> out, size_t* written);

// Parses a UDP payload without checking its ICRC (view->icrc is the received
// value), for callers that check it separately or cannot (no IP header).
Status ParseTransport(std::span<const uint8_t> udp_payload, PacketView* view);

// Compares the ICRC at the end of `udp_payload` with the one computed for it.
// EMSGSIZE when shorter than a BTH and an ICRC, EILSEQ on a mismatch.
Status VerifyIcrc(const NetworkHeaders& net, std::span<const uint8_t> udp_payload);

// VerifyIcrc for a datagram read from a UDP socket, whose IPv4 identification
// is not known: over IPv4 (with net.ipv4_identification 0) it also accepts
// the ICRC of any other ID (icrc.h: UDP GSO segments, senders that number
// their datagrams: rxe, NICs). `likely_id` is tried first
// (InDatagram::gro_segment: a GSO segment's ID is its place in the read),
// then the ID is solved for. Accepting any ID costs 16 bits of the check:
// a corrupted IPv4 packet passes with probability 2^-16 (IPv6: 2^-32).
Status VerifyIcrcAnyIpv4Id(const NetworkHeaders& net, std::span<const uint8_t> udp_payload,
                           uint16_t likely_id = 0);

// ParseTransport, then VerifyIcrc.
Status ParsePacket(const NetworkHeaders& net, std::span<const uint8_t> udp_payload,
                   PacketView* view);

// The per-QP payload rule (roce-wire.md §5): FIRST/MIDDLE exactly path_mtu,
// LAST 1..path_mtu, ONLY 0..path_mtu, no payload where none is allowed,
// ATOMIC WRITE 8 bytes. EBADMSG when broken.
Status CheckPayloadForPathMtu(const OpcodeInfo& info, size_t payload_length, size_t path_mtu);

}  // namespace softrdma::roce
