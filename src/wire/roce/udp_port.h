// The real PacketPort: kernel UDP sockets on port 4791.
//
// One socket per local address (IPv4 and IPv6), each bound to that address
// and port 4791 with SO_REUSEPORT, so every process of one user that speaks
// RoCE joins one reuseport group per address (the kernel allows a group to
// one uid only: an address whose port another user holds is not ours, and
// AddressIsOurs says so). Each socket is set up for RoCEv2:
//  - IPv4 with IP_PMTUDISC_DO and never connected: DF and IPv4 ID 0, the ID
//    the ICRC is computed with (design.md, roce-wire.md §1.4);
//  - the kernel's UDP checksum sent (masked in the ICRC, valid for every
//    receiver; the kernel refuses GSO on a socket with SO_NO_CHECK or
//    UDP_NO_CHECK6_TX, EINVAL, and the checksum is offloaded on veth, lo
//    and NICs so costs nothing there), zero ones accepted over IPv6
//    (UDP_NO_CHECK6_RX) as rxe and NICs send them;
//  - IP_PKTINFO / IPV6_RECVPKTINFO: the address a datagram came to (the
//    destination GID), also when bound to a wildcard address;
//  - UDP_GRO: the kernel may hand several datagrams of one flow in one read,
//    split here again; sendmmsg/recvmmsg batch the system calls; UDP GSO
//    (UDP_SEGMENT) sends equal-sized datagrams to one peer in one go. Over
//    IPv4 the kernel numbers the segments' IDs 0, 1, 2..., which the ICRC
//    covers: the port fixes segment g's ICRC by the delta of ID g (icrc.h),
//    and receivers solve for any ID (VerifyIcrcAnyIpv4Id; design.md).
// A datagram with a UDP source port (the flow rule's entropy) leaves from a
// socket bound to that port, made on first use; when the port cannot be had
// (another program holds it) it leaves from 4791.
// An address whose port 4791 another user holds (its reuseport group admits
// one uid) gets a send-only socket bound to (address, a port the kernel
// picks): datagrams from it leave with that source port (SourcePort), and
// what comes to the address reaches the other user's group, which hands
// ours to our registry's gateway (forwarding_port.h). Poll tries to bind
// the port there again every 100 ms and receives on it once the other
// user's processes have let it go (their group then no longer exists); it
// keeps sending from the send-only socket, the source port the QPs sealed
// their ICRCs with.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include <netinet/in.h>

#include "util/status.h"
#include "wire/roce/packet_port.h"

namespace softrdma::roce {

struct UdpPortOptions {
  // The local addresses to bind (IPv4-mapped or IPv6). Empty: every address
  // of an interface that is up, except IPv6 link-local ones (they need a
  // scope) and ::1 (not a RoCE GID).
  std::vector<in6_addr> addresses;
  uint16_t port = kRoceUdpPort;  // tests may choose another; 0: one the kernel picks
};

// Parses a comma-separated list of IPv4/IPv6 addresses (SOFTRDMA_ROCE_ADDRS).
// EINVAL names the first entry that is not an address.
Status ParseAddressList(const std::string& text, std::vector<in6_addr>* out);

// The IB MTU (bytes: 256..4096) a RoCE port on an interface of IP MTU
// `interface_mtu` offers, as rxe does: the largest that leaves room for the
// largest headers (80 bytes: IPv6, UDP, BTH, RETH/AtomicETH, ICRC). 0 when
// not even 256 fits.
uint32_t RoceMtuForInterfaceMtu(uint32_t interface_mtu);
// The IP MTU of the interface holding local address `local`, or 0 when no
// interface holds it.
uint32_t InterfaceMtuOfAddress(const in6_addr& local);

class UdpPort : public PacketPort {
 public:
  // Binds every address of `options`; where another user holds the port
  // (EADDRINUSE) it opens a send-only socket instead (see above). Fails
  // (EADDRINUSE, EADDRNOTAVAIL...) only when not one address could be had;
  // the others are skipped.
  static Status Open(const UdpPortOptions& options, std::unique_ptr<UdpPort>* out);
  ~UdpPort() override;
  UdpPort(const UdpPort&) = delete;
  UdpPort& operator=(const UdpPort&) = delete;

  int Send(const OutDatagram* datagrams, int n) override;
  int Poll(const DatagramSink& sink, int max) override;

  // Readable (poll/epoll) while some datagram waits: an epoll fd over the
  // sockets, for a thread that wants to sleep until one comes.
  int ReadableFd() const override { return epoll_fd_; }
  // True when this port bound `address` (so packets to it reach our group).
  bool AddressIsOurs(const in6_addr& address) const override;
  uint16_t SourcePort(const in6_addr& from) const override;
  // Addresses where another user holds the port: sent from, never received on.
  const std::vector<in6_addr>& send_only_addresses() const { return send_only_bound_; }
  const std::vector<in6_addr>& bound_addresses() const { return bound_; }
  // The UDP port the sockets are bound to (kRoceUdpPort unless a test chose).
  uint16_t port() const { return port_; }

  struct Counters {
    uint64_t sent = 0;                   // datagrams the kernel accepted
    uint64_t send_calls = 0;             // sendmmsg calls
    uint64_t gso_batches = 0;            // messages carrying several datagrams (UDP_SEGMENT)
    uint64_t received = 0;               // datagrams handed to the sink
    uint64_t receive_calls = 0;          // recvmmsg calls that returned datagrams
    uint64_t gro_batches = 0;            // reads that held several datagrams (UDP_GRO)
    uint64_t source_port_fallbacks = 0;  // flow source port not bindable: sent from port()
                                         // (once per run of datagrams sent together)
    uint64_t late_binds = 0;  // addresses whose port we took after another user let it go
  };
  Counters counters() const;  // a snapshot

 private:
  struct Socket {
    int fd = -1;
    in6_addr address{};
    bool ipv4 = false;
    uint16_t port = 0;  // the UDP port it is bound to
  };
  UdpPort() = default;
  int SocketFor(const OutDatagram& d);
  int SourcePortSocket(const Socket& base, uint16_t src_port);
  int SendBatch(int fd, bool ipv4, const OutDatagram* datagrams, int n);
  int ReadSocket(const Socket& s, const DatagramSink& sink, int max);

  uint16_t port_ = kRoceUdpPort;
  int epoll_fd_ = -1;
  std::vector<Socket> sockets_;            // bound to port_: receive and send
  std::vector<Socket> send_only_sockets_;  // another user holds port_ there
  // Poll's own: port_ bound later on send-only addresses (receive only;
  // their epoll data is kLateSocketBase + index), and which are.
  static constexpr uint64_t kLateSocketBase = 1ull << 32;
  static constexpr uint64_t kLateBindIntervalNs = 100'000'000;
  std::vector<Socket> late_sockets_;
  std::vector<bool> late_bound_;  // per send-only socket
  uint64_t next_late_bind_ns_ = 0;
  void TryBindLater();
  std::vector<in6_addr> bound_;
  std::vector<in6_addr> send_only_bound_;
  // (socket index, source port) -> fd bound to that port, or -1: not bindable.
  std::map<std::pair<size_t, uint16_t>, int> source_port_fds_;
  size_t next_socket_ = 0;  // Poll starts here, so no socket starves the others
  std::unique_ptr<uint8_t[]> receive_buffers_;
  // Send may run on several threads at once (packet_port.h): the counters
  // are relaxed atomics, the source port sockets are under a mutex.
  struct AtomicCounters {
    std::atomic<uint64_t> sent{0}, send_calls{0}, gso_batches{0}, received{0}, receive_calls{0},
        gro_batches{0}, source_port_fallbacks{0}, late_binds{0};
  };
  mutable AtomicCounters counters_;
  std::mutex source_port_mutex_;
};

}  // namespace softrdma::roce
