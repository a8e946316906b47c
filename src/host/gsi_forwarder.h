// The GSI forwarder: where a RoCEv2 datagram to QP1 goes on this host.
//
// QP1 belongs to no process (a NIC's kernel owns it; we have no kernel part),
// so whichever process of the host receives a datagram for QPN 1 hands it,
// with the addresses from its headers, to the CM socket of the process it is
// for (util/gsi_route.h says how the MAD names it). That process's CM answers
// to QP1 of the sender's address through a UD QP of its own. The RoCE receive
// path calls ForwardGsiDatagram for every packet whose BTH destination QP is
// 1, after the ICRC check, instead of looking QPN 1 up in the registry.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>

#include "util/status.h"

namespace softrdma {

inline constexpr uint32_t kGsiQpn = 1;
inline constexpr uint32_t kGsiQkeyValue = 0x80010000;

// A MAD to or from QP1, seen from this end: received, `remote_gid` is the
// sender's address and `local_gid` the one it came to; to send, `remote_gid`
// is the destination and `local_gid` the address to send from.
struct GsiDatagram {
  std::array<uint8_t, 16> remote_gid{};  // as a GID (IPv4-mapped for IPv4)
  std::array<uint8_t, 16> local_gid{};
  uint32_t remote_qpn = 0;           // received: DETH source QP
  uint16_t pkey = 0xFFFF;            // BTH P_Key
  uint32_t qkey = 0;                 // DETH Q_Key
  std::span<const uint8_t> payload;  // the MAD (UD SEND payload, pad excluded)
};

// A datagram sent from QP `src_qpn` as its destination receives it (the
// addresses swapped): for QP1 of this host, where no packet is involved.
inline GsiDatagram AsReceived(const GsiDatagram& sent, uint32_t src_qpn) {
  GsiDatagram received = sent;
  received.remote_gid = sent.local_gid;
  received.local_gid = sent.remote_gid;
  received.remote_qpn = src_qpn;
  return received;
}

// Counts of what the forwarder did (process-wide, relaxed).
struct GsiForwarderCounters {
  uint64_t forwarded = 0;
  uint64_t dropped_bad_qkey = 0;    // Q_Key other than the GSI's
  uint64_t dropped_not_cm = 0;      // not a CM MAD the CM routes
  uint64_t dropped_nobody = 0;      // no process holds the socket it names
  uint64_t dropped_queue_full = 0;  // that socket's queue was full (the sender retransmits)
  uint64_t answered_no_listener = 0;  // REQ/SIDR_REQ for an unbound port, answered
};
GsiForwarderCounters GsiForwarderCountersNow();

// Sends a datagram to QP1 of `remote_gid` from `local_gid` (the caller's
// wire: the RoCE transport for another host, the forwarder again for this
// host). Used for the answers the forwarder gives itself.
using GsiReply = std::function<void(const GsiDatagram&)>;

// Hands the datagram to the CM socket it is for. A REQ or SIDR_REQ for a
// port nobody has bound is answered through `reply` (when given) as a CM
// with no listener answers: REJ "invalid service ID", SIDR_REP "service ID
// not supported" (util/gsi_route.h, NoListenerAnswer); the requesting CM
// decides from there. EINVAL: wrong Q_Key; EBADMSG/EPROTONOSUPPORT: not a
// routable CM MAD; ECONNREFUSED/ENOENT: no process holds the socket it
// names; EAGAIN: the socket's queue is full. Every failure
// is counted and the datagram dropped; nothing here blocks.
Status ForwardGsiDatagram(const GsiDatagram& datagram, const GsiReply& reply = nullptr);

}  // namespace softrdma
