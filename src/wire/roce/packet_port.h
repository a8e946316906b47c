// The seam between the RoCEv2 transport (QPs whose peer is reached over UDP)
// and the network below it (sockets, demultiplexing to the owning process,
// fault injection). The transport sees only this interface, so its tests run
// over an in-process fake (eRPC's pattern) and the sockets' tests need no QP.
//
// A datagram here is a UDP payload: BTH, extension headers, payload, pad and
// ICRC (roce-wire.md). IP and UDP headers are the kernel's. Over IPv4 a
// datagram's ICRC is computed for IPv4 ID 0; a port that sends it with
// another ID (UDP GSO) fixes the ICRC (icrc.h: Ipv4IdIcrcDelta).
#pragma once

#include <cstdint>
#include <functional>

#include <netinet/in.h>
#include <sys/uio.h>

#include "wire/roce/headers.h"  // kRoceUdpPort

namespace softrdma::roce {

// An IP endpoint. IPv4 addresses are held IPv4-mapped (::ffff:a.b.c.d), as
// in a RoCEv2 GID, so one type serves both families; port in host order.
struct IpEndpoint {
  in6_addr addr{};
  uint16_t port = 0;
};

// One datagram to send. `parts` point into the caller's memory (headers,
// payload straight from registered memory, pad + ICRC): the port copies
// nothing it does not have to, and nothing after Send returns.
struct OutDatagram {
  IpEndpoint to;          // port 0 means kRoceUdpPort
  in6_addr from{};        // the local address (the source GID); :: = any
  uint16_t src_port = 0;  // UDP source port (flow entropy); 0 = the port's own
  static constexpr int kMaxParts = 4;
  iovec parts[kMaxParts]{};
  int nparts = 0;
};

// One datagram received. `data` is valid only during the sink call.
struct InDatagram {
  IpEndpoint from;   // the sender's address and UDP source port
  in6_addr local{};  // the address it was sent to (the destination GID)
  const uint8_t* data = nullptr;
  uint32_t len = 0;  // UDP payload length
  // Its index among the datagrams of one GRO read (0 when read alone). The
  // segments of one UDP GSO send arrive in one read, numbered as the kernel
  // numbered their IPv4 IDs: the ID to try first for the ICRC (icrc.h).
  uint16_t gro_segment = 0;
};

using DatagramSink = std::function<void(const InDatagram&)>;

class PacketPort {
 public:
  virtual ~PacketPort() = default;
  // Sends `n` datagrams in order. Returns how many the kernel (or fake)
  // accepted from the start of the array: fewer than n when its buffers are
  // full (the caller keeps the rest and retries later, as on a full ring);
  // a negative errno when nothing can ever be sent (e.g. no route).
  virtual int Send(const OutDatagram* datagrams, int n) = 0;
  // Hands every datagram that has arrived to `sink`, without blocking, and
  // returns the count. It stops reading once `max` were handed over; the last
  // read may hold more (UDP GRO: up to 64 KiB of one flow), all handed over.
  // The sink may call Send (ACKs, READ responses); Send may be called from
  // several threads at once, Poll from one at a time.
  virtual int Poll(const DatagramSink& sink, int max) = 0;
  // An fd that polls readable when Poll would find something (so a thread
  // can sleep in poll/epoll until packets come), or -1 (then the engine
  // looks every millisecond while a QP uses the wire).
  virtual int ReadableFd() const { return -1; }
  // Whether datagrams to this local address reach the ports of this user's
  // processes (the UDP port: it bound the address; false when another user
  // holds the address's UDP 4791, and a peer there is then reached over UDP
  // like one on another host). Ports without addresses (tests) say true.
  virtual bool AddressIsOurs(const in6_addr&) const { return true; }
  // The UDP source port datagrams from local address `from` leave with (the
  // ICRC covers it, so the transport must know it before it seals a
  // packet): kRoceUdpPort, or, where another user holds that port on the
  // address, the port of the socket this port sends from instead.
  virtual uint16_t SourcePort(const in6_addr& /*from*/) const { return kRoceUdpPort; }
  // Sends at once what the port holds back for later (a fault-injecting
  // port's delayed and reordered datagrams), called when the process exits:
  // packets already on a wire still arrive after their sender is gone (a
  // peer's last ACK among them), and they must not vanish with our memory.
  virtual void FlushHeld() {}
};

}  // namespace softrdma::roce
