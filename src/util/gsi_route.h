// How a CM MAD that reached this host over the network (a RoCEv2 UD datagram
// to QP1, the GSI) finds the process it is for, without a table: the MAD
// itself names it.
//
//  * REQ and SIDR_REQ carry a service id, (port space << 16) | port
//    (ib-cm.md §5.2): they go to the abstract socket of that bound rdma_cm
//    port, CmSocketName(port space, port), which only its owner holds.
//  * Every other message carries the receiver's own communication id (the
//    "remote comm id", or a SIDR_REP's request id). A process's comm ids
//    carry the number of its connection socket, CmSocketName(0, n), in their
//    top 16 bits (MakeCommId), so any process of the host can tell whose it is.
//
// The forwarder hands the MAD on inside a GsiEnvelope, which adds what the
// packet's headers said (the sender's and our address, the source QPN, the
// P_Key): the CM answers to QP1 of the sender's address with them.
//
// Used by both libraries: the verbs library's RoCE receive path (the
// forwarder, host/gsi_forwarder.h) and the CM (src/cm), which names its
// sockets and comm ids with the same functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "util/status.h"

namespace softrdma {

inline constexpr size_t kGsiMadSize = 256;  // every MAD

// The port space of the per-process connection sockets (no rdma_cm port
// space is 0).
inline constexpr uint16_t kCmProcessPortSpace = 0;

// "softrdma-[<namespace>-]cm-<port space hex>-<port>": per SOFTRDMA_NAMESPACE
// but not per user. rdma_cm ports are the host's, as the kernel's are: a
// client of one user reaches a listener of another (their QPs then talk
// over the RoCE wire, QPN ranges and gateways), and a port one user bound is
// EADDRINUSE for the others. No leading NUL (the socket layer adds it for an
// abstract name).
std::string CmSocketName(uint16_t port_space, uint16_t port);

// A communication id of the process whose connection socket is number
// `socket_number` (never 0 when serial is not 0).
constexpr uint32_t MakeCommId(uint16_t socket_number, uint16_t serial) {
  return (uint32_t(socket_number) << 16) | serial;
}
constexpr uint16_t CommIdSocketNumber(uint32_t comm_id) {
  return uint16_t(comm_id >> 16);
}

// The socket a CM MAD (256 bytes, as on the wire) is for. EBADMSG: not a CM
// MAD (size, base version, management class); EPROTONOSUPPORT: an attribute
// the CM does not route (LAP, APR, ClassPortInfo, ...); EINVAL: a request id
// or comm id of 0.
Status CmSocketForMad(std::span<const uint8_t> mad, std::string* socket_name);

// The answer a CM with no listener on a request's port gives (ib-cm.md
// §5.2): to a REQ, REJ "invalid service ID" (8) naming the REQ's comm id; to
// a SIDR_REQ, SIDR_REP "service ID not supported" (1). Same transaction id.
// false for any other MAD (nothing to answer).
bool NoListenerAnswer(std::span<const uint8_t> request, std::span<uint8_t, kGsiMadSize> answer);

// What the forwarder puts before the MAD. Network byte order on the socket
// (it never leaves the host, but a fixed layout keeps both sides honest).
struct GsiEnvelope {
  std::array<uint8_t, 16> remote_gid{};  // the sender's address (IP source as a GID)
  std::array<uint8_t, 16> local_gid{};   // the address it came to (IP destination)
  uint32_t remote_qpn = 0;               // DETH source QP
  uint16_t pkey = 0xFFFF;                // BTH P_Key
};
inline constexpr size_t kGsiEnvelopeHeaderSize = 48;
inline constexpr size_t kGsiEnvelopeSize = kGsiEnvelopeHeaderSize + kGsiMadSize;

// Header + MAD into `out`.
void EncodeGsiEnvelope(const GsiEnvelope& envelope, std::span<const uint8_t, kGsiMadSize> mad,
                       std::span<uint8_t, kGsiEnvelopeSize> out);
// Whether `bytes` is an envelope (size and magic); fills the header and
// points `mad` at its MAD.
bool DecodeGsiEnvelope(std::span<const uint8_t> bytes, GsiEnvelope* envelope,
                       std::span<const uint8_t>* mad);

}  // namespace softrdma
